//! The step journal of a multi-step operation, in the table `steps`: each step begun, finished
//! and read under the claim that holds its operation, each change one immediate transaction.

use async_trait::async_trait;
use sqlx::SqliteConnection;
use sqlx::sqlite::SqliteRow;
use toolgate_core::store::{
    AttemptError, ClaimToken, Journal, PartialOutcome, StepOutcome, StepRecord, StepRequest,
    StepStart, StepStatus, StepStore, StoreError,
};

use crate::SqliteStore;
use crate::error::backend;
use crate::row::{column, count};

/// What the journal of `(tenant, key)` says about a lease that ended, read on `conn`.
pub(crate) async fn journal(
    conn: &mut SqliteConnection,
    tenant: &str,
    key: &str,
) -> Result<Journal, StoreError> {
    let statuses: Vec<String> = sqlx::query_scalar(
        "SELECT status FROM steps WHERE tenant_id = ?1 AND idempotency_key = ?2",
    )
    .bind(tenant)
    .bind(key)
    .fetch_all(&mut *conn)
    .await
    .map_err(backend("read a step journal"))?;
    let statuses = statuses
        .iter()
        .map(|status| parse_status(status))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Journal::of(&statuses))
}

/// Deletes the journal of `(tenant, key)`, on `conn`: a takeover under other arguments.
pub(crate) async fn clear(
    conn: &mut SqliteConnection,
    tenant: &str,
    key: &str,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM steps WHERE tenant_id = ?1 AND idempotency_key = ?2")
        .bind(tenant)
        .bind(key)
        .execute(&mut *conn)
        .await
        .map_err(backend("clear a step journal"))?;
    Ok(())
}

/// Whether `owner` still holds its operation (`processing` under its attempt), on `conn`.
async fn held(conn: &mut SqliteConnection, owner: &ClaimToken) -> Result<(), StoreError> {
    let held: Option<i64> = sqlx::query_scalar(
        "SELECT 1 FROM operations WHERE tenant_id = ?1 AND idempotency_key = ?2 \
           AND state = 'processing' AND attempt = ?3",
    )
    .bind(&owner.tenant)
    .bind(&owner.key)
    .bind(i64::from(owner.attempt))
    .fetch_optional(&mut *conn)
    .await
    .map_err(backend("check a claim"))?;
    held.map(|_| ()).ok_or_else(|| lost(owner))
}

/// The claim of `owner` is no longer held.
pub(crate) fn lost(owner: &ClaimToken) -> StoreError {
    StoreError::LostClaim {
        key: owner.key.clone(),
        attempt: owner.attempt,
    }
}

/// An attempt's error as JSON text.
pub(crate) fn error_json(error: &AttemptError) -> Result<String, StoreError> {
    serde_json::to_string(error).map_err(|err| {
        StoreError::backend_with_source(format!("could not encode an attempt error: {err}"), err)
    })
}

/// A stored attempt error, read back.
pub(crate) fn parse_error(text: Option<String>) -> Result<Option<AttemptError>, StoreError> {
    text.map(|text| {
        serde_json::from_str(&text)
            .map_err(|err| StoreError::Corrupt(format!("an unreadable error {text:?}: {err}")))
    })
    .transpose()
}

fn parse_status(status: &str) -> Result<StepStatus, StoreError> {
    StepStatus::parse(status)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown step status {status:?}")))
}

/// A row of `steps`, read back.
fn step(row: &SqliteRow) -> Result<StepRecord, StoreError> {
    let status: String = column(row, "status")?;
    Ok(StepRecord {
        name: column(row, "name")?,
        seq: count(row, "seq").map_err(StoreError::Corrupt)?,
        status: parse_status(&status)?,
        attempt: count(row, "attempt").map_err(StoreError::Corrupt)?,
        output: column(row, "output")?,
        error: parse_error(column(row, "error")?)?,
        updated_ms: column(row, "updated_ms")?,
    })
}

#[async_trait]
impl StepStore for SqliteStore {
    /// Begins the step `name` of the operation `owner` holds (see
    /// [`StepStore::begin_step`](toolgate_core::store::StepStore::begin_step)).
    async fn begin_step(&self, request: StepRequest<'_>) -> Result<StepStart, StoreError> {
        let writer = &self.writer;
        let mut tx = writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin a step"))?;
        held(&mut tx, request.owner).await?;
        let found = sqlx::query(
            "SELECT * FROM steps WHERE tenant_id = ?1 AND idempotency_key = ?2 AND name = ?3",
        )
        .bind(&request.owner.tenant)
        .bind(&request.owner.key)
        .bind(request.name)
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend("read a step"))?;
        let start = match found.as_ref().map(step).transpose()? {
            Some(done) if done.status == StepStatus::Succeeded => StepStart::Done(done),
            Some(unknown) if unknown.status == StepStatus::Started => StepStart::Unknown(unknown),
            Some(_failed) => {
                sqlx::query(
                    "UPDATE steps SET status = 'started', attempt = ?4, output = NULL, \
                         updated_ms = ?5 \
                     WHERE tenant_id = ?1 AND idempotency_key = ?2 AND name = ?3",
                )
                .bind(&request.owner.tenant)
                .bind(&request.owner.key)
                .bind(request.name)
                .bind(i64::from(request.owner.attempt))
                .bind(request.now_ms)
                .execute(&mut *tx)
                .await
                .map_err(backend("begin a failed step again"))?;
                StepStart::Run
            }
            None => {
                sqlx::query(
                    "INSERT INTO steps (tenant_id, idempotency_key, name, seq, status, attempt, \
                                        updated_ms) \
                     SELECT ?1, ?2, ?3, COALESCE(MAX(seq), 0) + 1, 'started', ?4, ?5 \
                     FROM steps WHERE tenant_id = ?1 AND idempotency_key = ?2",
                )
                .bind(&request.owner.tenant)
                .bind(&request.owner.key)
                .bind(request.name)
                .bind(i64::from(request.owner.attempt))
                .bind(request.now_ms)
                .execute(&mut *tx)
                .await
                .map_err(backend("begin a new step"))?;
                StepStart::Run
            }
        };
        tx.commit()
            .await
            .map_err(backend("commit a step's begin"))?;
        Ok(start)
    }

    /// Records the outcome of the step `name` (see
    /// [`StepStore::finish_step`](toolgate_core::store::StepStore::finish_step)).
    async fn finish_step(
        &self,
        step: StepRequest<'_>,
        outcome: StepOutcome<'_>,
    ) -> Result<(), StoreError> {
        let writer = &self.writer;
        let mut tx = writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin a step's outcome"))?;
        held(&mut tx, step.owner).await?;
        let (status, output, error) = match outcome {
            StepOutcome::Succeeded(output) => (StepStatus::Succeeded, Some(output), None),
            StepOutcome::Failed(error) => (StepStatus::Failed, None, Some(error_json(error)?)),
        };
        // A succeeded step clears its last error; a failed one keeps its new error.
        let done = sqlx::query(
            "UPDATE steps SET status = ?4, output = ?5, error = ?6, updated_ms = ?7 \
             WHERE tenant_id = ?1 AND idempotency_key = ?2 AND name = ?3 AND status = 'started'",
        )
        .bind(&step.owner.tenant)
        .bind(&step.owner.key)
        .bind(step.name)
        .bind(status.as_str())
        .bind(output)
        .bind(error)
        .bind(step.now_ms)
        .execute(&mut *tx)
        .await
        .map_err(backend("record a step's outcome"))?;
        if done.rows_affected() != 1 {
            // Not begun, or its outcome already recorded: not this holder's to record.
            return Err(lost(step.owner));
        }
        tx.commit()
            .await
            .map_err(backend("commit a step's outcome"))
    }

    /// The journal of `(tenant, key)`, by `seq`.
    async fn steps(&self, tenant: &str, key: &str) -> Result<Vec<StepRecord>, StoreError> {
        let reader = &self.reader;
        sqlx::query(
            "SELECT * FROM steps WHERE tenant_id = ?1 AND idempotency_key = ?2 ORDER BY seq",
        )
        .bind(tenant)
        .bind(key)
        .fetch_all(reader)
        .await
        .map_err(backend("read a step journal"))?
        .iter()
        .map(step)
        .collect()
    }

    async fn partial(&self, outcome: PartialOutcome<'_>) -> Result<(), StoreError> {
        let owner = outcome.owner;
        let done = sqlx::query(
            "UPDATE operations SET state = 'partial', result = ?1, \
                 errors = json_insert(errors, '$[#]', json(?2)), updated_ms = ?3 \
             WHERE tenant_id = ?4 AND idempotency_key = ?5 \
               AND state = 'processing' AND attempt = ?6",
        )
        .bind(outcome.report)
        .bind(error_json(outcome.error)?)
        .bind(outcome.now_ms)
        .bind(&owner.tenant)
        .bind(&owner.key)
        .bind(i64::from(owner.attempt))
        .execute(&self.writer)
        .await
        .map_err(backend("record a partial success"))?;
        if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err(lost(owner))
        }
    }
}
