//! The reconciler's settlement of an `outcome_unknown` operation, with its outbox event and its
//! step journal, in one immediate transaction.

use sqlx::SqlitePool;
use toolgate_core::store::{OperationRecord, Resolution, StoreError};

use crate::error::backend;
use crate::row;

/// Settles `(tenant, key)` as
/// [`OperationStore::resolve`](toolgate_core::store::OperationStore::resolve) says.
pub(crate) async fn resolve(
    writer: &SqlitePool,
    tenant: &str,
    key: &str,
    resolution: Resolution<'_>,
    now_ms: i64,
) -> Result<Option<OperationRecord>, StoreError> {
    let mut tx = writer
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(backend("begin a reconciliation"))?;
    let unknown: Option<i64> = sqlx::query_scalar(
        "SELECT 1 FROM operations \
         WHERE tenant_id = ?1 AND idempotency_key = ?2 AND state = 'outcome_unknown'",
    )
    .bind(tenant)
    .bind(key)
    .fetch_optional(&mut *tx)
    .await
    .map_err(backend("read an unknown outcome"))?;
    if unknown.is_none() {
        return Ok(None);
    }
    let has_event: Option<i64> =
        sqlx::query_scalar("SELECT 1 FROM outbox WHERE tenant_id = ?1 AND idempotency_key = ?2")
            .bind(tenant)
            .bind(key)
            .fetch_optional(&mut *tx)
            .await
            .map_err(backend("read an unknown outcome's event"))?;
    let has_event = has_event.is_some();
    let (sql, result) = match resolution {
        Resolution::Applied(result) if has_event => {
            sqlx::query(
                "UPDATE outbox SET status = 'delivered', result = ?3, updated_ms = ?4 \
                 WHERE tenant_id = ?1 AND idempotency_key = ?2",
            )
            .bind(tenant)
            .bind(key)
            .bind(result)
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(backend("record a reconciled delivery"))?;
            // The operation keeps the tool's own result.
            ("state = 'succeeded'", None)
        }
        Resolution::Applied(result) => ("state = 'succeeded', result = ?4", Some(result)),
        Resolution::NotApplied if has_event => {
            sqlx::query(
                "UPDATE outbox SET status = 'pending', due_ms = ?3, maybe_applied = 0, \
                     updated_ms = ?3 \
                 WHERE tenant_id = ?1 AND idempotency_key = ?2",
            )
            .bind(tenant)
            .bind(key)
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(backend("owe a delivery again"))?;
            ("state = 'queued'", None)
        }
        Resolution::NotApplied => {
            sqlx::query(
                "UPDATE steps SET status = 'failed', updated_ms = ?3 \
                 WHERE tenant_id = ?1 AND idempotency_key = ?2 AND status = 'started'",
            )
            .bind(tenant)
            .bind(key)
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(backend("record steps not applied"))?;
            (
                "state = CASE WHEN EXISTS ( \
                     SELECT 1 FROM steps s WHERE s.tenant_id = ?1 AND s.idempotency_key = ?2 \
                       AND s.status = 'succeeded') THEN 'partial' ELSE 'failed' END",
                None,
            )
        }
        Resolution::StillUnknown => ("reconcile_tries = reconcile_tries + 1", None),
    };
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE operations SET {sql}, updated_ms = ?3 \
         WHERE tenant_id = ?1 AND idempotency_key = ?2 AND state = 'outcome_unknown' \
         RETURNING *"
    )))
    .bind(tenant)
    .bind(key)
    .bind(now_ms);
    let row = match result {
        Some(result) => row.bind(result),
        None => row,
    }
    .fetch_one(&mut *tx)
    .await
    .map_err(backend("settle an unknown outcome"))?;
    let record = row::record(&row)?;
    tx.commit()
        .await
        .map_err(backend("commit a reconciliation"))?;
    Ok(Some(record))
}
