//! The run ledger: each run's counters, attempts by tool, failed calls and abort, in the tables
//! `toolgate_runs`, `toolgate_run_attempts` and `toolgate_run_failures`.
//!
//! Every change is one transaction that first locks the run's row, creating it if it has none,
//! in one statement (`INSERT … ON CONFLICT DO UPDATE … RETURNING`, which PostgreSQL makes atomic
//! against a concurrent insert or delete of the row). It then reads what the rule needs into a
//! [`RunRecord`], applies the rule of [`RunRecord`] (the rules every store follows), and writes
//! back what changed; an answer that counts nothing rolls back and writes nothing. Every change
//! to a run holds that row lock, so processes sharing the database change one run one at a time
//! and its counters never pass a limit.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::postgres::{PgConnection, PgPool, PgRow};
use toolgate_core::store::{
    AbortedRun, FailedCall, RunAbort, RunKey, RunRecord, StoreError, TurnGrant, TurnRequest,
};

use crate::approval;
use crate::error::store_error;
use crate::row::{count, get};

/// [`OperationStore::begin_turn`](toolgate_core::store::OperationStore::begin_turn).
pub(crate) async fn begin_turn(
    pool: &PgPool,
    request: &TurnRequest<'_>,
) -> Result<TurnGrant, StoreError> {
    let run = request.run;
    let tools: Vec<&str> = request.tools.iter().map(|(tool, _)| *tool).collect();
    let mut tx = pool.begin().await.map_err(fault("begin a turn"))?;
    let mut record = lock(&mut tx, run, request.now_ms).await?;
    record.failed = failures(&mut tx, run, Some(&tools)).await?;
    let grant = record.begin_turn(request);
    match grant {
        TurnGrant::Aborted(_) | TurnGrant::StepLimit { .. } => {
            tx.rollback().await.map_err(fault("end a refused turn"))?;
            return Ok(grant);
        }
        TurnGrant::CallLimit { .. } => save_run(&mut tx, run, &record).await?,
        TurnGrant::Admitted(_) => {
            save_run(&mut tx, run, &record).await?;
            save_attempts(&mut tx, run, &record, &tools).await?;
        }
    }
    tx.commit().await.map_err(fault("commit a turn"))?;
    Ok(grant)
}

/// [`OperationStore::charge_attempt`](toolgate_core::store::OperationStore::charge_attempt).
pub(crate) async fn charge_attempt(
    pool: &PgPool,
    run: RunKey<'_>,
    tool: &str,
    retry_budget: Option<u32>,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let mut tx = pool
        .begin()
        .await
        .map_err(fault("begin charging an attempt"))?;
    let mut record = lock(&mut tx, run, now_ms).await?;
    if !record.charge_attempt(tool, retry_budget, now_ms) {
        tx.rollback()
            .await
            .map_err(fault("end a refused attempt"))?;
        return Ok(false);
    }
    save_run(&mut tx, run, &record).await?;
    save_attempts(&mut tx, run, &record, &[tool]).await?;
    tx.commit().await.map_err(fault("commit an attempt"))?;
    Ok(true)
}

/// [`OperationStore::note_failure`](toolgate_core::store::OperationStore::note_failure): the
/// run's row is created or touched, then the failure inserted unless it is there.
pub(crate) async fn note_failure(
    pool: &PgPool,
    run: RunKey<'_>,
    tool: &str,
    request_hash: &str,
    now_ms: i64,
) -> Result<(), StoreError> {
    let mut tx = pool
        .begin()
        .await
        .map_err(fault("begin noting a failed call"))?;
    sqlx::query(
        "INSERT INTO toolgate_runs (tenant_id, run_id, updated_ms) VALUES ($1, $2, $3) \
         ON CONFLICT (tenant_id, run_id) DO UPDATE SET updated_ms = excluded.updated_ms",
    )
    .bind(run.tenant)
    .bind(run.run_id)
    .bind(now_ms)
    .execute(&mut *tx)
    .await
    .map_err(fault("touch a run"))?;
    sqlx::query(
        "INSERT INTO toolgate_run_failures (tenant_id, run_id, tool, request_hash) \
         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
    )
    .bind(run.tenant)
    .bind(run.run_id)
    .bind(tool)
    .bind(request_hash)
    .execute(&mut *tx)
    .await
    .map_err(fault("note a failed call"))?;
    tx.commit().await.map_err(fault("commit a failed call"))
}

/// [`OperationStore::abort_run`](toolgate_core::store::OperationStore::abort_run): under the
/// run's row lock, the abort stored (the first only), then the run's approvals that fall with
/// it rejected ([`approval::reject_run`]). A second abort that rejects nothing writes nothing.
pub(crate) async fn abort_run(
    pool: &PgPool,
    run: RunKey<'_>,
    abort: &RunAbort,
    now_ms: i64,
) -> Result<AbortedRun, StoreError> {
    let mut tx = pool.begin().await.map_err(fault("begin aborting a run"))?;
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
    Ok(AbortedRun {
        abort: stands,
        rejected,
    })
}

/// [`OperationStore::run`](toolgate_core::store::OperationStore::run): the run's row, its
/// attempts and its failures, read from one snapshot so they agree.
pub(crate) async fn run(pool: &PgPool, run: RunKey<'_>) -> Result<Option<RunRecord>, StoreError> {
    let mut tx = pool
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
    record.failed = failures(&mut tx, run, None).await?;
    tx.commit().await.map_err(fault("end reading a run"))?;
    Ok(Some(record))
}

/// Locks the run's row, inserting it (at `now_ms`) if it has none, and answers its counters and
/// attempts, without its failures.
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
    let mut record = counters(&row)?;
    record.attempts = attempts(conn, run).await?;
    Ok(record)
}

/// The counters, abort and time of a run's row.
fn counters(row: &PgRow) -> Result<RunRecord, StoreError> {
    let kind: Option<String> = get(row, "aborted_kind")?;
    let reason: Option<String> = get(row, "aborted_reason")?;
    let reason = reason
        .map(|reason| {
            serde_json::from_str::<String>(&reason)
                .map_err(|err| StoreError::Corrupt(format!("aborted_reason {reason:?}: {err}")))
        })
        .transpose()?;
    Ok(RunRecord {
        steps: count(get(row, "steps")?, "steps")?,
        tool_calls: count(get(row, "tool_calls")?, "tool_calls")?,
        aborted: kind
            .zip(reason)
            .map(|(kind, reason)| RunAbort { kind, reason }),
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

/// The run's failed calls: of the tools `of`, or all of them.
async fn failures(
    conn: &mut PgConnection,
    run: RunKey<'_>,
    of: Option<&[&str]>,
) -> Result<BTreeSet<FailedCall>, StoreError> {
    let rows = sqlx::query(
        "SELECT tool, request_hash FROM toolgate_run_failures \
         WHERE tenant_id = $1 AND run_id = $2 AND ($3::text[] IS NULL OR tool = ANY($3))",
    )
    .bind(run.tenant)
    .bind(run.run_id)
    .bind(of)
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

/// Writes the attempts of `tools` as `record` has them, in one statement.
async fn save_attempts(
    conn: &mut PgConnection,
    run: RunKey<'_>,
    record: &RunRecord,
    tools: &[&str],
) -> Result<(), StoreError> {
    // Once each: one statement may not update a row twice.
    let attempts: BTreeMap<&str, i64> = tools
        .iter()
        .map(|tool| {
            let attempts = record.attempts.get(*tool).copied().unwrap_or_default();
            (*tool, i64::from(attempts))
        })
        .collect();
    let (names, counts): (Vec<&str>, Vec<i64>) = attempts.into_iter().unzip();
    sqlx::query(
        "INSERT INTO toolgate_run_attempts (tenant_id, run_id, tool, attempts) \
         SELECT $1, $2, tool, attempts FROM unnest($3::text[], $4::bigint[]) AS t(tool, attempts) \
         ON CONFLICT (tenant_id, run_id, tool) DO UPDATE SET attempts = excluded.attempts",
    )
    .bind(run.tenant)
    .bind(run.run_id)
    .bind(names)
    .bind(counts)
    .execute(&mut *conn)
    .await
    .map_err(fault("write a run's attempts"))?;
    Ok(())
}

/// A failed statement while the store was `doing` something to a run.
fn fault(doing: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| store_error(doing, error)
}
