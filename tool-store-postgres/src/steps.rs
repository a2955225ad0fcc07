//! The step journal of a multi-step operation: one row a step in `toolgate_steps`, changed by
//! the claim's holder while it holds the operation's row lock, so that a worker that lost its
//! claim changes nothing.

use async_trait::async_trait;
use sqlx::Connection;
use sqlx::postgres::{PgConnection, PgRow};
use toolgate_core::store::{
    ClaimToken, Journal, PartialOutcome, StepOutcome, StepRecord, StepRequest, StepStart,
    StepStatus, StepStore, StoreError,
};

use crate::PostgresStore;
use crate::error::store_error;
use crate::row::{self, append_error, decode_optional, encode, get};
use crate::statement::{ExecuteOn, FetchOn};

/// The columns of a step, in the order [`step`] reads them.
macro_rules! step_columns {
    () => {
        "name, seq, status, attempt, output, error::text AS error, updated_ms"
    };
}

/// What the steps of `(tenant, key)` say about a lease that ended ([`Journal::of`]).
pub(crate) async fn journal(
    conn: &mut PgConnection,
    tenant: &str,
    key: &str,
) -> Result<Journal, StoreError> {
    let statuses: Vec<String> = sqlx::query_scalar(
        "SELECT status FROM toolgate_steps WHERE tenant_id = $1 AND idempotency_key = $2",
    )
    .bind(tenant)
    .bind(key)
    .fetch_all(conn)
    .await
    .map_err(backend)?;
    let statuses = statuses
        .iter()
        .map(|status| parse_status(status))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Journal::of(&statuses))
}

/// Deletes the journal of `(tenant, key)`: the operation is taken over for other arguments.
pub(crate) async fn clear(
    conn: &mut PgConnection,
    tenant: &str,
    key: &str,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM toolgate_steps WHERE tenant_id = $1 AND idempotency_key = $2")
        .bind(tenant)
        .bind(key)
        .execute(conn)
        .await
        .map_err(backend)?;
    Ok(())
}

/// [`begin_step`] on `conn`, in a transaction.
async fn begin_step_on(
    conn: &mut PgConnection,
    request: StepRequest<'_>,
) -> Result<StepStart, StoreError> {
    let mut tx = conn.begin().await.map_err(backend)?;
    lock_owned(&mut tx, request.owner).await?;
    let started = sqlx::query(
        "INSERT INTO toolgate_steps AS s (tenant_id, idempotency_key, name, seq, status, \
         attempt, updated_ms) \
         SELECT $1, $2, $3, COALESCE(MAX(seq), 0) + 1, 'started', $4, $5 FROM toolgate_steps \
         WHERE tenant_id = $1 AND idempotency_key = $2 \
         ON CONFLICT (tenant_id, idempotency_key, name) DO UPDATE \
         SET status = 'started', attempt = $4, updated_ms = $5 WHERE s.status = 'failed'",
    )
    .bind(&request.owner.tenant)
    .bind(&request.owner.key)
    .bind(request.name)
    .bind(row::attempt(request.owner.attempt))
    .bind(request.now_ms)
    .execute(&mut *tx)
    .await
    .map_err(backend)?;
    let answer = if started.rows_affected() == 1 {
        StepStart::Run
    } else {
        let row = sqlx::query(concat!(
            "SELECT ",
            step_columns!(),
            " FROM toolgate_steps WHERE tenant_id = $1 AND idempotency_key = $2 AND name = $3"
        ))
        .bind(&request.owner.tenant)
        .bind(&request.owner.key)
        .bind(request.name)
        .fetch_one(&mut *tx)
        .await
        .map_err(backend)?;
        let record = step(&row)?;
        match record.status {
            StepStatus::Succeeded => StepStart::Done(record),
            _ => StepStart::Unknown(record),
        }
    };
    tx.commit().await.map_err(backend)?;
    Ok(answer)
}

/// Locks the row of the operation `owner` holds (`processing` under its attempt), or answers
/// [`StoreError::LostClaim`].
async fn lock_owned(conn: &mut PgConnection, owner: &ClaimToken) -> Result<(), StoreError> {
    let owned = sqlx::query(
        "SELECT FROM toolgate_operations WHERE tenant_id = $1 AND idempotency_key = $2 \
         AND state = 'processing' AND attempt = $3 FOR UPDATE",
    )
    .bind(&owner.tenant)
    .bind(&owner.key)
    .bind(row::attempt(owner.attempt))
    .fetch_optional(conn)
    .await
    .map_err(backend)?;
    match owned {
        Some(_) => Ok(()),
        None => Err(lost(owner)),
    }
}

fn lost(owner: &ClaimToken) -> StoreError {
    StoreError::LostClaim {
        key: owner.key.clone(),
        attempt: owner.attempt,
    }
}

/// The step in `row`, selected with [`step_columns!`].
fn step(row: &PgRow) -> Result<StepRecord, StoreError> {
    let status: String = get(row, "status")?;
    Ok(StepRecord {
        name: get(row, "name")?,
        seq: row::count(get(row, "seq")?, "seq")?,
        status: parse_status(&status)?,
        attempt: row::count(get(row, "attempt")?, "attempt")?,
        output: get(row, "output")?,
        error: decode_optional(row, "error")?,
        updated_ms: get(row, "updated_ms")?,
    })
}

fn parse_status(status: &str) -> Result<StepStatus, StoreError> {
    StepStatus::parse(status).ok_or_else(|| StoreError::Corrupt(format!("step status {status:?}")))
}

/// A failed statement of the journal in the store's words (see `error::store_error`).
fn backend(error: sqlx::Error) -> StoreError {
    store_error("journal a step", error)
}

#[async_trait]
impl StepStore for PostgresStore {
    /// [`StepStore::begin_step`](toolgate_core::store::StepStore::begin_step): under the
    /// lock of the owned operation's row, a new or failed step becomes `started`; any other is
    /// answered as it is.
    async fn begin_step(&self, step: StepRequest<'_>) -> Result<StepStart, StoreError> {
        let conns = &self.conns;
        let mut lease = conns.lease().await.map_err(backend)?;
        let started = begin_step_on(lease.conn(), step).await;
        lease.finish(started).await
    }

    /// [`StepStore::finish_step`](toolgate_core::store::StepStore::finish_step): one
    /// `UPDATE` of a `started` step, joined to the owned operation; [`StoreError::LostClaim`] when
    /// the claim is not held or the step is not `started`.
    async fn finish_step(
        &self,
        step: StepRequest<'_>,
        outcome: StepOutcome<'_>,
    ) -> Result<(), StoreError> {
        let conns = &self.conns;
        let (status, output, error) = match outcome {
            StepOutcome::Succeeded(output) => (StepStatus::Succeeded, Some(output), None),
            StepOutcome::Failed(error) => (StepStatus::Failed, None, Some(encode(error)?)),
        };
        let done = sqlx::query(
            "UPDATE toolgate_steps AS s SET status = $5, output = $6, \
             error = $7::json, updated_ms = $8 \
             FROM toolgate_operations AS o \
             WHERE s.tenant_id = $1 AND s.idempotency_key = $2 AND s.name = $4 \
             AND s.status = 'started' \
             AND o.tenant_id = $1 AND o.idempotency_key = $2 \
             AND o.state = 'processing' AND o.attempt = $3",
        )
        .bind(&step.owner.tenant)
        .bind(&step.owner.key)
        .bind(row::attempt(step.owner.attempt))
        .bind(step.name)
        .bind(status.as_str())
        .bind(output)
        .bind(error)
        .bind(step.now_ms)
        .execute_on(conns)
        .await
        .map_err(backend)?;
        if done.rows_affected() == 0 {
            // The claim was lost, or the step is not `started` (never begun, failed or succeeded):
            // there is no outcome of this claim's to record.
            return Err(lost(step.owner));
        }
        Ok(())
    }

    /// The journal of `(tenant, key)`, by `seq`.
    async fn steps(&self, tenant: &str, key: &str) -> Result<Vec<StepRecord>, StoreError> {
        let conns = &self.conns;
        let rows = sqlx::query(concat!(
            "SELECT ",
            step_columns!(),
            " FROM toolgate_steps WHERE tenant_id = $1 AND idempotency_key = $2 ORDER BY seq"
        ))
        .bind(tenant)
        .bind(key)
        .fetch_all_on(conns)
        .await
        .map_err(backend)?;
        rows.iter().map(step).collect()
    }

    /// The owned `processing` record becomes `partial` with the report as its result, the error
    /// appended.
    async fn partial(&self, outcome: PartialOutcome<'_>) -> Result<(), StoreError> {
        let owner = outcome.owner;
        let done = sqlx::query(concat!(
            "UPDATE toolgate_operations SET state = 'partial', result = $4, errors = ",
            append_error!("$5"),
            ", updated_ms = $6 \
             WHERE tenant_id = $1 AND idempotency_key = $2 \
             AND state = 'processing' AND attempt = $3"
        ))
        .bind(&owner.tenant)
        .bind(&owner.key)
        .bind(row::attempt(owner.attempt))
        .bind(outcome.report)
        .bind(row::error_list(outcome.error)?)
        .bind(outcome.now_ms)
        .execute_on(&self.conns)
        .await
        .map_err(backend)?;
        if done.rows_affected() == 0 {
            return Err(lost(owner));
        }
        Ok(())
    }
}
