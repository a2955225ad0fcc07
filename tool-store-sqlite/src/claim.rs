//! The claim: one immediate transaction that inserts the record (and its approval, for a call
//! over its tool's threshold), or inspects the one there with its latest approval and moves it
//! on as [`ClaimStore::claim`](toolgate_core::store::ClaimStore::claim) says. The same
//! logic runs inside the transaction an outbox tool's body runs in ([`claim_on`]).

use async_trait::async_trait;
use sqlx::sqlite::SqliteArguments;
use sqlx::{Sqlite, SqliteConnection, SqlitePool};
use toolgate_core::store::{
    ApprovalRecord, AttemptFailure, Claim, ClaimRequest, ClaimStep as Step, ClaimStore, ClaimToken,
    Journal, OperationRecord, OperationState, RetryNote, StoreError, Success,
};

use crate::error::backend;
use crate::steps::error_json;
use crate::{SqliteStore, approval, audit, row, steps};

/// Claims `request.key`. `BEGIN IMMEDIATE` takes the write lock before the first read, so no
/// other writer can change the record or its approval between the inspection and the update.
pub(crate) async fn claim(
    writer: &SqlitePool,
    request: &ClaimRequest<'_>,
) -> Result<Claim, StoreError> {
    let mut tx = writer
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(backend("begin a claim"))?;
    let claim = claim_on(&mut tx, request).await?;
    tx.commit().await.map_err(backend("commit a claim"))?;
    Ok(claim)
}

/// Claims `request.key` on `conn`, which must be inside an immediate transaction (the caller
/// commits it): inserts the record, or inspects the one there with its latest approval and, when
/// [`ClaimRequest::needs_journal`], its step journal, and moves it on as
/// [`ClaimRequest::step`] says.
pub(crate) async fn claim_on(
    conn: &mut SqliteConnection,
    request: &ClaimRequest<'_>,
) -> Result<Claim, StoreError> {
    let found =
        sqlx::query("SELECT * FROM operations WHERE tenant_id = ?1 AND idempotency_key = ?2")
            .bind(request.tenant)
            .bind(request.key)
            .fetch_optional(&mut *conn)
            .await
            .map_err(backend("read a claimed record"))?;
    let Some(found) = found else {
        return insert(conn, request).await;
    };
    let record = row::record(&found)?;
    let approval = match &record.approval_id {
        Some(id) => approval::read(conn, id).await?,
        None => None,
    };
    let journal = if request.needs_journal(&record) {
        steps::journal(conn, request.tenant, request.key).await?
    } else {
        Journal::Empty
    };
    let step = request.step(&record, approval.as_ref(), journal);
    let taken = matches!(step, Step::Reclaim | Step::Await);
    if taken && !request.same_request(&record.request_hash) {
        // Steps are never answered to other arguments.
        steps::clear(conn, request.tenant, request.key).await?;
    }
    take_step(conn, request, step, record, approval).await
}

/// A new record: `processing` (attempt 1, leased), or `awaiting_approval` (attempt 0) with the
/// request's approval stored beside it.
async fn insert(
    conn: &mut SqliteConnection,
    request: &ClaimRequest<'_>,
) -> Result<Claim, StoreError> {
    sqlx::query(
        "INSERT INTO operations (tenant_id, idempotency_key, tool, request_hash, arguments, \
                                 state, attempt, lease_until_ms, created_ms, updated_ms, \
                                 approval_id) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10)",
    )
    .bind(request.tenant)
    .bind(request.key)
    .bind(request.tool)
    .bind(request.request_hash)
    .bind(request.arguments)
    .bind(request.first_state().as_str())
    .bind(i64::from(request.first_attempt()))
    .bind(request.lease_until_ms())
    .bind(request.now_ms)
    .bind(request.approval.map(|a| a.id.as_str()))
    .execute(&mut *conn)
    .await
    .map_err(backend("insert a claim"))?;
    Ok(match request.approval {
        Some(asked) => {
            approval::insert(conn, asked).await?;
            Claim::Approval(asked.clone())
        }
        None => Claim::Acquired {
            attempt: 1,
            approved: None,
        },
    })
}

/// Does what `step` says with `record`, the record under the key, and `approval`, its latest
/// approval.
async fn take_step(
    conn: &mut SqliteConnection,
    request: &ClaimRequest<'_>,
    step: Step,
    record: OperationRecord,
    approval: Option<ApprovalRecord>,
) -> Result<Claim, StoreError> {
    Ok(match step {
        Step::Conflict => Claim::Conflict { tool: record.tool },
        Step::Existing => Claim::Existing(record),
        Step::AnswerApproval => match approval {
            Some(approval) => Claim::Approval(approval),
            None => Claim::Existing(record),
        },
        Step::Reclaim | Step::RunApproved => {
            let attempt = run(conn, request).await?;
            Claim::Acquired {
                attempt,
                approved: approval.filter(|_| step == Step::RunApproved),
            }
        }
        Step::Await => {
            let Some(asked) = request.approval else {
                return Err(StoreError::backend(
                    "a claim without an approval was told to await one",
                ));
            };
            approval::insert(conn, asked).await?;
            sqlx::query(
                "UPDATE operations \
                 SET state = 'awaiting_approval', approval_id = ?3, updated_ms = ?4, \
                     request_hash = ?5, arguments = ?6 \
                 WHERE tenant_id = ?1 AND idempotency_key = ?2",
            )
            .bind(request.tenant)
            .bind(request.key)
            .bind(&asked.id)
            .bind(request.now_ms)
            .bind(request.request_hash)
            .bind(request.arguments)
            .execute(&mut *conn)
            .await
            .map_err(backend("store an operation awaiting its approval"))?;
            Claim::Approval(asked.clone())
        }
        Step::ExpireApproval => {
            let vanished = || {
                StoreError::Corrupt(format!(
                    "{}/{}: its approval vanished during the claim",
                    request.tenant, request.key
                ))
            };
            let id = approval.map(|a| a.id).ok_or_else(vanished)?;
            let expiry = ApprovalRecord::expiry(request.now_ms);
            let expired = approval::reject(conn, &id, &expiry, request.now_ms).await?;
            Claim::Approval(expired.ok_or_else(vanished)?)
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
            .fetch_one(&mut *conn)
            .await
            .map_err(backend("store an expired claim's unknown outcome"))?;
            Claim::Existing(row::record(&updated)?)
        }
    })
}

/// The record → `processing` under this request: attempt + 1, a new lease. Answers the attempt.
async fn run(conn: &mut SqliteConnection, request: &ClaimRequest<'_>) -> Result<u32, StoreError> {
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
    .fetch_one(&mut *conn)
    .await
    .map_err(backend("claim a record again"))?;
    u32::try_from(attempt).map_err(|_| {
        StoreError::Corrupt(format!(
            "{}/{}: attempt {attempt} is out of range",
            request.tenant, request.key
        ))
    })
}

impl SqliteStore {
    /// Runs an owner-checked write: `sql` ends with `tenant_id = ? AND idempotency_key = ? AND
    /// state = 'processing' AND attempt = ?`, bound here; no row changed means the claim is lost.
    /// Moves the owned `processing` record of `failure` to `state`, appending its error.
    async fn settle_with_error(
        &self,
        failure: AttemptFailure<'_>,
        state: OperationState,
        doing: &'static str,
    ) -> Result<(), StoreError> {
        let query = sqlx::query(
            "UPDATE operations SET state = ?1, \
                 errors = json_insert(errors, '$[#]', json(?2)), updated_ms = ?3 \
             WHERE tenant_id = ?4 AND idempotency_key = ?5 \
               AND state = 'processing' AND attempt = ?6",
        )
        .bind(state.as_str())
        .bind(error_json(failure.error)?)
        .bind(failure.now_ms);
        self.owned(failure.owner, query, doing).await
    }

    async fn owned(
        &self,
        owner: &ClaimToken,
        query: sqlx::query::Query<'_, Sqlite, SqliteArguments>,
        doing: &'static str,
    ) -> Result<(), StoreError> {
        let done = query
            .bind(&owner.tenant)
            .bind(&owner.key)
            .bind(i64::from(owner.attempt))
            .execute(&self.writer)
            .await
            .map_err(backend(doing))?;
        if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err(StoreError::LostClaim {
                key: owner.key.clone(),
                attempt: owner.attempt,
            })
        }
    }
}

/// A success of the owner's claim: binds the result and the time, then the owner.
const SUCCEED: &str = "UPDATE operations SET state = 'succeeded', result = ?1, updated_ms = ?2 \
     WHERE tenant_id = ?3 AND idempotency_key = ?4 \
       AND state = 'processing' AND attempt = ?5";

#[async_trait]
impl ClaimStore for SqliteStore {
    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Claim, StoreError> {
        claim(&self.writer, &request).await
    }

    /// With an audit record, one immediate transaction: the success, then the audit record, one
    /// commit (one fsync where the two would take two).
    async fn succeed(&self, success: Success<'_>) -> Result<Option<i64>, StoreError> {
        let owner = success.owner;
        let Some(entry) = success.audit else {
            let query = sqlx::query(SUCCEED)
                .bind(success.result)
                .bind(success.now_ms);
            self.owned(owner, query, "record a success").await?;
            return Ok(None);
        };
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin recording a success"))?;
        let done = sqlx::query(SUCCEED)
            .bind(success.result)
            .bind(success.now_ms)
            .bind(&owner.tenant)
            .bind(&owner.key)
            .bind(i64::from(owner.attempt))
            .execute(&mut *tx)
            .await
            .map_err(backend("record a success"))?;
        if done.rows_affected() != 1 {
            // Nothing was written: the transaction rolls back as it is dropped.
            return Err(StoreError::LostClaim {
                key: owner.key.clone(),
                attempt: owner.attempt,
            });
        }
        let seq = audit::append(&mut *tx, entry).await?;
        tx.commit().await.map_err(backend("commit a success"))?;
        Ok(Some(seq))
    }

    async fn fail(&self, failure: AttemptFailure<'_>) -> Result<(), StoreError> {
        let failed = OperationState::Failed;
        self.settle_with_error(failure, failed, "record a failure")
            .await
    }

    async fn mark_unknown(&self, failure: AttemptFailure<'_>) -> Result<(), StoreError> {
        let unknown = OperationState::OutcomeUnknown;
        self.settle_with_error(failure, unknown, "record an unknown outcome")
            .await
    }

    async fn record_retry(&self, retry: RetryNote<'_>) -> Result<(), StoreError> {
        let query = sqlx::query(
            "UPDATE operations SET \
                 errors = json_insert(errors, '$[#]', json(?1)), lease_until_ms = ?2 \
             WHERE tenant_id = ?3 AND idempotency_key = ?4 \
               AND state = 'processing' AND attempt = ?5",
        )
        .bind(error_json(retry.error)?)
        .bind(retry.lease_until_ms);
        self.owned(retry.owner, query, "record a retry").await
    }

    async fn get(&self, tenant: &str, key: &str) -> Result<Option<OperationRecord>, StoreError> {
        sqlx::query("SELECT * FROM operations WHERE tenant_id = ?1 AND idempotency_key = ?2")
            .bind(tenant)
            .bind(key)
            .fetch_optional(&self.reader)
            .await
            .map_err(backend("read a record"))?
            .as_ref()
            .map(row::record)
            .transpose()
    }
}
