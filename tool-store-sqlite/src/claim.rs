//! The claim: one immediate transaction that inserts the record, or inspects the one there and
//! moves it on as [`OperationStore::claim`](toolgate_core::store::OperationStore::claim) says.

use sqlx::SqlitePool;
use toolgate_core::store::{Claim, ClaimRequest, ClaimStep as Step, StoreError};

use crate::error::backend;
use crate::row;

/// Claims `request.key`. `BEGIN IMMEDIATE` takes the write lock before the first read, so no
/// other writer can change the record between the inspection and the update.
pub(crate) async fn claim(
    writer: &SqlitePool,
    request: &ClaimRequest<'_>,
) -> Result<Claim, StoreError> {
    let mut tx = writer
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(backend("begin a claim"))?;
    let inserted = sqlx::query(
        "INSERT INTO operations (tenant_id, idempotency_key, tool, request_hash, arguments, \
                                 state, attempt, lease_until_ms, created_ms, updated_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, 'processing', 1, ?6, ?7, ?7) \
         ON CONFLICT (tenant_id, idempotency_key) DO NOTHING",
    )
    .bind(request.tenant)
    .bind(request.key)
    .bind(request.tool)
    .bind(request.request_hash)
    .bind(request.arguments)
    .bind(request.lease_until_ms())
    .bind(request.now_ms)
    .execute(&mut *tx)
    .await
    .map_err(backend("insert a claim"))?
    .rows_affected();

    let claim = if inserted == 1 {
        Claim::Acquired {
            attempt: 1,
            approved: None,
        }
    } else {
        let found =
            sqlx::query("SELECT * FROM operations WHERE tenant_id = ?1 AND idempotency_key = ?2")
                .bind(request.tenant)
                .bind(request.key)
                .fetch_optional(&mut *tx)
                .await
                .map_err(backend("read a claimed record"))?
                .ok_or_else(|| {
                    StoreError::backend(format!(
                        "the record {}/{} conflicted on insert but cannot be read",
                        request.tenant, request.key
                    ))
                })?;
        let record = row::record(&found)?;
        match request.step(&record, None) {
            Step::Conflict => Claim::Conflict { tool: record.tool },
            Step::Existing => Claim::Existing(record),
            Step::Await | Step::RunApproved | Step::ExpireApproval | Step::AnswerApproval => {
                return Err(StoreError::backend(
                    "approvals are not implemented by this store yet",
                ));
            }
            Step::Reclaim => {
                let attempt: i64 = sqlx::query_scalar(
                    "UPDATE operations \
                     SET state = 'processing', attempt = attempt + 1, \
                         lease_until_ms = ?3, updated_ms = ?4, \
                         request_hash = ?5, arguments = ?6 \
                     WHERE tenant_id = ?1 AND idempotency_key = ?2 \
                     RETURNING attempt",
                )
                .bind(request.tenant)
                .bind(request.key)
                .bind(request.lease_until_ms())
                .bind(request.now_ms)
                .bind(request.request_hash)
                .bind(request.arguments)
                .fetch_one(&mut *tx)
                .await
                .map_err(backend("claim a record again"))?;
                let attempt = u32::try_from(attempt).map_err(|_| {
                    StoreError::Corrupt(format!(
                        "{}/{}: attempt {attempt} is out of range",
                        request.tenant, request.key
                    ))
                })?;
                Claim::Acquired {
                    attempt,
                    approved: None,
                }
            }
            Step::ExpireToUnknown => {
                let updated = sqlx::query(
                    "UPDATE operations SET state = 'outcome_unknown', updated_ms = ?3 \
                     WHERE tenant_id = ?1 AND idempotency_key = ?2 \
                     RETURNING *",
                )
                .bind(request.tenant)
                .bind(request.key)
                .bind(request.now_ms)
                .fetch_one(&mut *tx)
                .await
                .map_err(backend("store an expired claim's unknown outcome"))?;
                Claim::Existing(row::record(&updated)?)
            }
        }
    };
    tx.commit().await.map_err(backend("commit a claim"))?;
    Ok(claim)
}
