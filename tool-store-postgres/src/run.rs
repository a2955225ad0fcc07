//! The run ledger: each run's counters, attempts by tool, failed calls and abort, in the tables
//! `toolgate_runs`, `toolgate_run_attempts` and `toolgate_run_failures`.
//!
//! Every change first locks the run's row, creating it if it has none, in one statement
//! (`INSERT … ON CONFLICT DO UPDATE … RETURNING`, which PostgreSQL makes atomic against a
//! concurrent insert or delete of the row). Every change to a run holds that row lock, so
//! processes sharing the database change one run one at a time and its counters never pass a
//! limit.
//!
//! What every call pays for is one statement, one round trip: a turn begins in the function
//! `toolgate_begin_turn` and a retry is charged in `toolgate_charge_attempt` (migration 0007),
//! which apply the rules of [`RunRecord`] in SQL; a failed call is noted in one statement. An
//! abort, rare, is a transaction that reads the row into a [`RunRecord`], applies its rule, and
//! writes back what changed.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use sqlx::Connection;
use sqlx::postgres::{PgConnection, PgRow};
use toolgate_core::run::RunAborted;
use toolgate_core::store::{
    AbortReport, AbortRequest, AttemptCharge, ClaimRequest, FailedCall, FailureNote, RunKey,
    RunLedger, RunRecord, StoreError, TurnClaim, TurnGrant, TurnRequest, begin_turn_then_claim,
};

use crate::error::store_error;
use crate::grant::{abort_reason, grant_of};
use crate::row::{count, get};
use crate::statement::{ExecuteOn, FetchOn};
use crate::{PostgresStore, approval, turn_claim};

/// [`abort_run`] on `conn`, in a transaction.
async fn abort_run_on(
    conn: &mut PgConnection,
    run: RunKey<'_>,
    abort: &RunAborted,
    now_ms: i64,
) -> Result<AbortReport, StoreError> {
    let mut tx = conn.begin().await.map_err(fault("begin aborting a run"))?;
    let mut record = lock(&mut tx, run, now_ms).await?;
    let first = record.aborted.is_none();
    let stands = record.abort(abort, now_ms);
    if first {
        save_run(&mut tx, run, &record).await?;
    }
    let rejected = approval::reject_run(&mut tx, run, now_ms).await?;
    if first || !rejected.is_empty() {
        tx.commit().await.map_err(fault("commit an abort"))?;
    } else {
        tx.rollback().await.map_err(fault("end a second abort"))?;
    }
    Ok(AbortReport {
        abort: stands,
        rejected,
    })
}

/// [`run`] on `conn`, in a read-only transaction.
async fn run_on(conn: &mut PgConnection, run: RunKey<'_>) -> Result<Option<RunRecord>, StoreError> {
    let mut tx = conn
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await
        .map_err(fault("begin reading a run"))?;
    let row = sqlx::query(
        "SELECT steps, tool_calls, aborted_kind, aborted_reason::text AS aborted_reason, \
         updated_ms FROM toolgate_runs WHERE tenant_id = $1 AND run_id = $2",
    )
    .bind(run.tenant)
    .bind(run.run_id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(fault("read a run"))?;
    let Some(row) = row else {
        return Ok(None);
    };
    let mut record = counters(&row)?;
    record.attempts = attempts(&mut tx, run).await?;
    record.failed = failures(&mut tx, run).await?;
    tx.commit().await.map_err(fault("end reading a run"))?;
    Ok(Some(record))
}

/// Locks the run's row, inserting it (at `now_ms`) if it has none, and answers its counters,
/// without its attempts and failures.
async fn lock(
    conn: &mut PgConnection,
    run: RunKey<'_>,
    now_ms: i64,
) -> Result<RunRecord, StoreError> {
    // The update changes nothing; it is there to lock the row and return it.
    let row = sqlx::query(
        "INSERT INTO toolgate_runs (tenant_id, run_id, updated_ms) VALUES ($1, $2, $3) \
         ON CONFLICT (tenant_id, run_id) DO UPDATE SET steps = toolgate_runs.steps \
         RETURNING steps, tool_calls, aborted_kind, aborted_reason::text AS aborted_reason, \
         updated_ms",
    )
    .bind(run.tenant)
    .bind(run.run_id)
    .bind(now_ms)
    .fetch_one(&mut *conn)
    .await
    .map_err(fault("lock a run"))?;
    counters(&row)
}

/// The counters, abort and time of a run's row.
fn counters(row: &PgRow) -> Result<RunRecord, StoreError> {
    let kind: Option<String> = get(row, "aborted_kind")?;
    let reason: Option<String> = get(row, "aborted_reason")?;
    let reason = reason.map(abort_reason).transpose()?;
    Ok(RunRecord {
        steps: count(get(row, "steps")?, "steps")?,
        tool_calls: count(get(row, "tool_calls")?, "tool_calls")?,
        aborted: kind
            .zip(reason)
            .map(|(kind, reason)| RunAborted::from_stored(&kind, reason)),
        updated_ms: get(row, "updated_ms")?,
        ..RunRecord::default()
    })
}

/// The run's attempts, by tool.
async fn attempts(
    conn: &mut PgConnection,
    run: RunKey<'_>,
) -> Result<BTreeMap<String, u32>, StoreError> {
    let rows = sqlx::query(
        "SELECT tool, attempts FROM toolgate_run_attempts WHERE tenant_id = $1 AND run_id = $2",
    )
    .bind(run.tenant)
    .bind(run.run_id)
    .fetch_all(&mut *conn)
    .await
    .map_err(fault("read a run's attempts"))?;
    rows.iter()
        .map(|row| Ok((get(row, "tool")?, count(get(row, "attempts")?, "attempts")?)))
        .collect()
}

/// The run's failed calls.
async fn failures(
    conn: &mut PgConnection,
    run: RunKey<'_>,
) -> Result<BTreeSet<FailedCall>, StoreError> {
    let rows = sqlx::query(
        "SELECT tool, request_hash FROM toolgate_run_failures \
         WHERE tenant_id = $1 AND run_id = $2",
    )
    .bind(run.tenant)
    .bind(run.run_id)
    .fetch_all(&mut *conn)
    .await
    .map_err(fault("read a run's failed calls"))?;
    rows.iter()
        .map(|row| {
            Ok(FailedCall {
                tool: get(row, "tool")?,
                request_hash: get(row, "request_hash")?,
            })
        })
        .collect()
}

/// Writes the run's row, which [`lock`] made sure exists: its counters, abort and time.
async fn save_run(
    conn: &mut PgConnection,
    run: RunKey<'_>,
    record: &RunRecord,
) -> Result<(), StoreError> {
    let kind = record.aborted.as_ref().map(|abort| abort.kind.as_str());
    let reason = record
        .aborted
        .as_ref()
        .map(|abort| {
            serde_json::to_string(&abort.reason).map_err(|err| {
                StoreError::backend_with_source(format!("cannot encode an abort: {err}"), err)
            })
        })
        .transpose()?;
    sqlx::query(
        "UPDATE toolgate_runs SET steps = $3, tool_calls = $4, aborted_kind = $5, \
         aborted_reason = $6::json, updated_ms = $7 WHERE tenant_id = $1 AND run_id = $2",
    )
    .bind(run.tenant)
    .bind(run.run_id)
    .bind(i64::from(record.steps))
    .bind(i64::from(record.tool_calls))
    .bind(kind)
    .bind(reason)
    .bind(record.updated_ms)
    .execute(&mut *conn)
    .await
    .map_err(fault("write a run"))?;
    Ok(())
}

/// A failed statement while the store was `doing` something to a run.
fn fault(doing: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| store_error(doing, error)
}

#[async_trait]
impl RunLedger for PostgresStore {
    /// [`RunLedger::begin_turn`](toolgate_core::store::RunLedger::begin_turn): one
    /// statement, the function `toolgate_begin_turn` (migration 0007).
    async fn begin_turn(&self, request: TurnRequest<'_>) -> Result<TurnGrant, StoreError> {
        let conns = &self.conns;
        let request = &request;
        let run = request.run;
        let (tools, calls): (Vec<&str>, Vec<i64>) = request
            .tools
            .iter()
            .map(|(tool, calls)| (*tool, i64::from(*calls)))
            .unzip();
        let limits = request.limits;
        let row = sqlx::query(
            "SELECT outcome, step, used, aborted_kind, aborted_reason, granted, failed_tools, \
             failed_hashes FROM toolgate_begin_turn($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(run.tenant)
        .bind(run.run_id)
        .bind(&tools)
        .bind(&calls)
        .bind(limits.max_steps.map(i64::from))
        .bind(limits.max_tool_calls.map(i64::from))
        .bind(limits.retry_budget.map(i64::from))
        .bind(request.now_ms)
        .fetch_one_on(conns)
        .await
        .map_err(fault("begin a turn"))?;
        grant_of(&row, limits)
    }

    async fn begin_turn_and_claim(
        &self,
        turn: TurnRequest<'_>,
        claim: ClaimRequest<'_>,
    ) -> Result<TurnClaim, StoreError> {
        if !turn_claim::in_one_statement(&turn, &claim) {
            return begin_turn_then_claim(self, turn, claim).await;
        }
        turn_claim::begin_turn_and_claim(&self.conns, &turn, &claim).await
    }

    /// `true`: one statement counts the turn and claims the key.
    fn claims_with_turn(&self) -> bool {
        true
    }

    /// [`RunLedger::charge_attempt`](toolgate_core::store::RunLedger::charge_attempt): one
    /// statement, the function `toolgate_charge_attempt` (migration 0007).
    async fn charge_attempt(&self, charge: AttemptCharge<'_>) -> Result<bool, StoreError> {
        let conns = &self.conns;
        sqlx::query_scalar("SELECT toolgate_charge_attempt($1, $2, $3, $4, $5)")
            .bind(charge.run.tenant)
            .bind(charge.run.run_id)
            .bind(charge.tool)
            .bind(charge.retry_budget.map(i64::from))
            .bind(charge.now_ms)
            .fetch_one_on(conns)
            .await
            .map_err(fault("charge an attempt"))
    }

    /// [`RunLedger::note_failure`](toolgate_core::store::RunLedger::note_failure): in one
    /// statement, the run's row created or touched, then the failure inserted unless it is there
    /// (the row's foreign key is checked at the end of the statement, when the row is in).
    async fn note_failure(&self, failure: FailureNote<'_>) -> Result<(), StoreError> {
        let conns = &self.conns;
        sqlx::query(
            "WITH run AS (INSERT INTO toolgate_runs (tenant_id, run_id, updated_ms) \
             VALUES ($1, $2, $3) ON CONFLICT (tenant_id, run_id) \
             DO UPDATE SET updated_ms = excluded.updated_ms RETURNING tenant_id, run_id) \
             INSERT INTO toolgate_run_failures (tenant_id, run_id, tool, request_hash) \
             SELECT tenant_id, run_id, $4, $5 FROM run ON CONFLICT DO NOTHING",
        )
        .bind(failure.run.tenant)
        .bind(failure.run.run_id)
        .bind(failure.now_ms)
        .bind(failure.tool)
        .bind(failure.request_hash)
        .execute_on(conns)
        .await
        .map_err(fault("note a failed call"))?;
        Ok(())
    }

    /// [`RunLedger::abort_run`](toolgate_core::store::RunLedger::abort_run): under the
    /// run's row lock, the abort stored (the first only), then the run's approvals that fall with
    /// it rejected (`approval::reject_run`). A second abort that rejects nothing writes nothing.
    async fn abort_run(&self, request: AbortRequest<'_>) -> Result<AbortReport, StoreError> {
        let conns = &self.conns;
        let mut lease = conns.lease().await.map_err(fault("begin aborting a run"))?;
        let aborted = abort_run_on(lease.conn(), request.run, request.abort, request.now_ms).await;
        lease.finish(aborted).await
    }

    /// [`RunLedger::run`](toolgate_core::store::RunLedger::run): the run's row, its
    /// attempts and its failures, read from one snapshot so they agree.
    async fn run(&self, run: RunKey<'_>) -> Result<Option<RunRecord>, StoreError> {
        let conns = &self.conns;
        let mut lease = conns.lease().await.map_err(fault("begin reading a run"))?;
        let read = run_on(lease.conn(), run).await;
        lease.finish(read).await
    }
}
