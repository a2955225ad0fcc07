//! The run ledger: each run's counters, attempts by tool, failed calls and abort, in the tables
//! `runs`, `run_attempts` and `run_failures`.
//!
//! Every change is one immediate transaction that reads what the rule needs into a
//! [`RunRecord`], applies the rule of [`RunRecord`] to it (the rules every store follows), and
//! writes back what changed; an answer that counts nothing writes nothing. `BEGIN IMMEDIATE`
//! takes the write lock before the first read, so no other writer changes the run in between.
//! A turn's counting and a retry's commit without an fsync of their own: the claim or the
//! retry's record that follows carries them to the disk (see `unflushed`).

use std::collections::BTreeSet;

use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;
use sqlx::{Connection, Row, SqliteConnection, SqlitePool};
use toolgate_core::run::RunAborted;
use toolgate_core::store::{
    AbortReport, AbortRequest, AttemptCharge, FailedCall, FailureNote, RunKey, RunLedger,
    RunRecord, StoreError, TurnGrant, TurnRequest,
};

use crate::error::backend;
use crate::unflushed::Unflushed;
use crate::{SqliteStore, approval};

async fn begin_turn_on(
    conn: &mut SqliteConnection,
    request: &TurnRequest<'_>,
) -> Result<TurnGrant, StoreError> {
    let run = request.run;
    let tools: Vec<&str> = request.tools.iter().map(|(tool, _)| *tool).collect();
    let mut tx = conn
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(backend("begin a turn"))?;
    let mut record = counters(&mut tx, run).await?.unwrap_or_default();
    record.failed = failures(&mut tx, run, Some(&tools)).await?;
    let grant = record.begin_turn(request);
    match grant {
        TurnGrant::Aborted(_) | TurnGrant::StepLimit { .. } => {
            tx.rollback().await.map_err(backend("end a refused turn"))?;
            return Ok(grant);
        }
        TurnGrant::CallLimit { .. } => save_run(&mut tx, run, &record).await?,
        TurnGrant::Admitted(_) => {
            save_run(&mut tx, run, &record).await?;
            save_attempts(&mut tx, run, &record, &tools).await?;
        }
    }
    tx.commit().await.map_err(backend("commit a turn"))?;
    Ok(grant)
}

async fn charge_attempt_on(
    conn: &mut SqliteConnection,
    charge: AttemptCharge<'_>,
) -> Result<bool, StoreError> {
    let mut tx = conn
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(backend("begin charging an attempt"))?;
    let mut record = counters(&mut tx, charge.run).await?.unwrap_or_default();
    if !record.charge_attempt(charge.tool, charge.retry_budget, charge.now_ms) {
        tx.rollback()
            .await
            .map_err(backend("end a refused attempt"))?;
        return Ok(false);
    }
    save_run(&mut tx, charge.run, &record).await?;
    save_attempts(&mut tx, charge.run, &record, &[charge.tool]).await?;
    tx.commit().await.map_err(backend("commit an attempt"))?;
    Ok(true)
}

/// [`RunLedger::run`](toolgate_core::store::RunLedger::run): the run's row, its
/// attempts and its failures, read in one transaction so they agree.
pub(crate) async fn run(
    reader: &SqlitePool,
    run: RunKey<'_>,
) -> Result<Option<RunRecord>, StoreError> {
    let mut tx = reader
        .begin()
        .await
        .map_err(backend("begin reading a run"))?;
    let Some(mut record) = counters(&mut tx, run).await? else {
        return Ok(None);
    };
    record.failed = failures(&mut tx, run, None).await?;
    tx.commit().await.map_err(backend("end reading a run"))?;
    Ok(Some(record))
}

/// The run's row and its attempts, without its failures; `None` when it has no row.
async fn counters(
    conn: &mut SqliteConnection,
    run: RunKey<'_>,
) -> Result<Option<RunRecord>, StoreError> {
    let Some(row) = sqlx::query(
        "SELECT steps, tool_calls, aborted_kind, aborted_reason, updated_ms FROM runs \
         WHERE tenant_id = ?1 AND run_id = ?2",
    )
    .bind(run.tenant)
    .bind(run.run_id)
    .fetch_optional(&mut *conn)
    .await
    .map_err(backend("read a run"))?
    else {
        return Ok(None);
    };
    let kind: Option<String> = column(&row, "aborted_kind")?;
    let reason: Option<String> = column(&row, "aborted_reason")?;
    let mut record = RunRecord {
        steps: count(&row, "steps")?,
        tool_calls: count(&row, "tool_calls")?,
        aborted: kind
            .zip(reason)
            .map(|(kind, reason)| RunAborted::from_stored(&kind, reason)),
        updated_ms: column(&row, "updated_ms")?,
        ..RunRecord::default()
    };
    let attempts =
        sqlx::query("SELECT tool, attempts FROM run_attempts WHERE tenant_id = ?1 AND run_id = ?2")
            .bind(run.tenant)
            .bind(run.run_id)
            .fetch_all(&mut *conn)
            .await
            .map_err(backend("read a run's attempts"))?;
    for row in &attempts {
        record
            .attempts
            .insert(column(row, "tool")?, count(row, "attempts")?);
    }
    Ok(Some(record))
}

/// The run's failed calls: of the tools `of`, or all of them.
async fn failures(
    conn: &mut SqliteConnection,
    run: RunKey<'_>,
    of: Option<&[&str]>,
) -> Result<BTreeSet<FailedCall>, StoreError> {
    let tools = match of {
        Some(tools) => Some(serde_json::to_string(tools).map_err(|err| {
            StoreError::backend_with_source(format!("could not encode tool names: {err}"), err)
        })?),
        None => None,
    };
    let rows = sqlx::query(
        "SELECT tool, request_hash FROM run_failures WHERE tenant_id = ?1 AND run_id = ?2 \
         AND (?3 IS NULL OR tool IN (SELECT value FROM json_each(?3)))",
    )
    .bind(run.tenant)
    .bind(run.run_id)
    .bind(tools)
    .fetch_all(&mut *conn)
    .await
    .map_err(backend("read a run's failed calls"))?;
    rows.iter()
        .map(|row| {
            Ok(FailedCall {
                tool: column(row, "tool")?,
                request_hash: column(row, "request_hash")?,
            })
        })
        .collect()
}

/// Writes the run's row: its counters, abort and time.
async fn save_run(
    conn: &mut SqliteConnection,
    run: RunKey<'_>,
    record: &RunRecord,
) -> Result<(), StoreError> {
    let (kind, reason) = record
        .aborted
        .as_ref()
        .map(|abort| (abort.kind.as_str(), abort.reason.as_str()))
        .unzip();
    sqlx::query(
        "INSERT INTO runs (tenant_id, run_id, steps, tool_calls, aborted_kind, aborted_reason, \
                           updated_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
         ON CONFLICT (tenant_id, run_id) DO UPDATE SET steps = excluded.steps, \
             tool_calls = excluded.tool_calls, aborted_kind = excluded.aborted_kind, \
             aborted_reason = excluded.aborted_reason, updated_ms = excluded.updated_ms",
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
    .map_err(backend("write a run"))?;
    Ok(())
}

/// Writes the attempts of `tools` as `record` has them.
async fn save_attempts(
    conn: &mut SqliteConnection,
    run: RunKey<'_>,
    record: &RunRecord,
    tools: &[&str],
) -> Result<(), StoreError> {
    for tool in tools {
        let attempts = record.attempts.get(*tool).copied().unwrap_or_default();
        sqlx::query(
            "INSERT INTO run_attempts (tenant_id, run_id, tool, attempts) \
             VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (tenant_id, run_id, tool) DO UPDATE SET attempts = excluded.attempts",
        )
        .bind(run.tenant)
        .bind(run.run_id)
        .bind(*tool)
        .bind(i64::from(attempts))
        .execute(&mut *conn)
        .await
        .map_err(backend("write a run's attempts"))?;
    }
    Ok(())
}

fn column<'r, T>(row: &'r SqliteRow, name: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
{
    row.try_get(name)
        .map_err(|err| StoreError::Corrupt(format!("runs, column {name}: {err}")))
}

/// A counter of the ledger: an INTEGER the schema keeps within a `u32`.
fn count(row: &SqliteRow, name: &str) -> Result<u32, StoreError> {
    let value: i64 = column(row, name)?;
    u32::try_from(value)
        .map_err(|_| StoreError::Corrupt(format!("runs, column {name}: {value} is out of range")))
}

#[async_trait]
impl RunLedger for SqliteStore {
    /// [`RunLedger::begin_turn`](toolgate_core::store::RunLedger::begin_turn), committed
    /// without an fsync of its own (see `Unflushed`).
    async fn begin_turn(&self, request: TurnRequest<'_>) -> Result<TurnGrant, StoreError> {
        let writer = &self.writer;
        let request = &request;
        let mut conn = Unflushed::acquire(writer).await?;
        let grant = begin_turn_on(&mut conn, request).await?;
        conn.restore().await?;
        Ok(grant)
    }

    /// [`RunLedger::charge_attempt`](toolgate_core::store::RunLedger::charge_attempt),
    /// committed without an fsync of its own (see `Unflushed`): the retry's record, fsynced,
    /// follows it before the retry is sent.
    async fn charge_attempt(&self, charge: AttemptCharge<'_>) -> Result<bool, StoreError> {
        let writer = &self.writer;
        let mut conn = Unflushed::acquire(writer).await?;
        let charged = charge_attempt_on(&mut conn, charge).await?;
        conn.restore().await?;
        Ok(charged)
    }

    /// [`RunLedger::note_failure`](toolgate_core::store::RunLedger::note_failure): the
    /// run's row is created or touched, then the failure inserted unless it is there.
    async fn note_failure(&self, failure: FailureNote<'_>) -> Result<(), StoreError> {
        let writer = &self.writer;
        let mut tx = writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin noting a failed call"))?;
        sqlx::query(
            "INSERT INTO runs (tenant_id, run_id, updated_ms) VALUES (?1, ?2, ?3) \
             ON CONFLICT (tenant_id, run_id) DO UPDATE SET updated_ms = excluded.updated_ms",
        )
        .bind(failure.run.tenant)
        .bind(failure.run.run_id)
        .bind(failure.now_ms)
        .execute(&mut *tx)
        .await
        .map_err(backend("touch a run"))?;
        sqlx::query(
            "INSERT INTO run_failures (tenant_id, run_id, tool, request_hash) \
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
        )
        .bind(failure.run.tenant)
        .bind(failure.run.run_id)
        .bind(failure.tool)
        .bind(failure.request_hash)
        .execute(&mut *tx)
        .await
        .map_err(backend("note a failed call"))?;
        tx.commit().await.map_err(backend("commit a failed call"))
    }

    /// [`RunLedger::abort_run`](toolgate_core::store::RunLedger::abort_run): in one
    /// immediate transaction, the abort stored (the first only), then the run's approvals that fall
    /// with it rejected (`approval::reject_run`). A second abort that rejects nothing writes
    /// nothing.
    async fn abort_run(&self, request: AbortRequest<'_>) -> Result<AbortReport, StoreError> {
        let writer = &self.writer;
        let mut tx = writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin aborting a run"))?;
        let mut record = counters(&mut tx, request.run).await?.unwrap_or_default();
        let first = record.aborted.is_none();
        let stands = record.abort(request.abort, request.now_ms);
        if first {
            save_run(&mut tx, request.run, &record).await?;
        }
        let rejected = approval::reject_run(&mut tx, request.run, request.now_ms).await?;
        if first || !rejected.is_empty() {
            tx.commit().await.map_err(backend("commit an abort"))?;
        } else {
            tx.rollback().await.map_err(backend("end a second abort"))?;
        }
        Ok(AbortReport {
            abort: stands,
            rejected,
        })
    }

    async fn run(&self, run: RunKey<'_>) -> Result<Option<RunRecord>, StoreError> {
        self::run(&self.reader, run).await
    }
}
