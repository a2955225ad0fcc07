//! [`SqliteStore`]: opening the file, and the trait's operations as SQL.

use std::path::Path;

use async_trait::async_trait;
use sqlx::sqlite::SqliteArguments;
use sqlx::{AssertSqlSafe, Sqlite, SqlitePool};
use toolgate_core::store::{
    AbortedRun, ApprovalQuery, ApprovalRecord, AttemptError, AuditEntry, AuditQuery, AuditRecord,
    Begun, Claim, ClaimRequest, ClaimToken, DecideRequest, Decided, Decision, DeliveryOutcome,
    EventLease, EventQuery, LeasedEvent, OperationQuery, OperationRecord, OperationState,
    OperationStore, OutboxEvent, Resolution, RunAbort, RunKey, RunRecord, StepOutcome, StepRecord,
    StepStart, StoreError, TurnGrant, TurnRequest,
};

use crate::connect::SqliteOptions;
use crate::error::backend;
use crate::{approval, audit, begin, claim, migrate, outbox, resolve, row, run, steps};

/// An [`OperationStore`] in one SQLite file, for one process (see the [crate docs](crate) for its
/// limits and durability).
///
/// Cheap to clone: clones share the file's connections. Writes go through one connection, in
/// order; reads use their own connections beside it.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
}

impl SqliteStore {
    /// Opens the store in the file at `path`, creating the file if needed (but not its
    /// directory), and migrates its schema to this version's; [`SqliteStore::options`] opens
    /// it with other settings.
    ///
    /// Fails with [`StoreError::Backend`] when the file cannot be opened or created (a missing
    /// directory, no permission; SQLite's error is its source), or when it belongs to another
    /// program or a newer version.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), toolgate_core::store::StoreError> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// let store = toolgate_store_sqlite::SqliteStore::open(dir.path().join("operations.db")).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::options(path).open().await
    }

    /// The settings of the store in the file at `path`, to change before
    /// [`SqliteOptions::open`].
    pub fn options(path: impl AsRef<Path>) -> SqliteOptions {
        SqliteOptions::new(path.as_ref())
    }

    pub(crate) fn from_pools(writer: SqlitePool, reader: SqlitePool) -> SqliteStore {
        SqliteStore { writer, reader }
    }

    /// Migrates the file's schema to this version's. [`SqliteStore::open`] already does; running
    /// it again changes nothing.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        migrate::migrate(&self.writer).await
    }

    /// Closes every connection of this store and its clones, waiting for the writes in flight.
    /// Dropping the last clone closes them too, in the background; every committed write is
    /// on disk either way.
    pub async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }

    /// Runs an owner-checked write: `sql` ends with `tenant_id = ? AND idempotency_key = ? AND
    /// state = 'processing' AND attempt = ?`, bound here; no row changed means the claim is lost.
    /// Moves an owned `processing` record to `state`, appending `error`.
    async fn settle_with_error(
        &self,
        owner: &ClaimToken,
        state: OperationState,
        error: &AttemptError,
        now_ms: i64,
        doing: &'static str,
    ) -> Result<(), StoreError> {
        let query = sqlx::query(
            "UPDATE operations SET state = ?1, \
                 errors = json_insert(errors, '$[#]', json(?2)), updated_ms = ?3 \
             WHERE tenant_id = ?4 AND idempotency_key = ?5 \
               AND state = 'processing' AND attempt = ?6",
        )
        .bind(state.as_str())
        .bind(error_json(error)?)
        .bind(now_ms);
        self.owned(owner, query, doing).await
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

/// An attempt's error as the JSON text appended to `errors`.
fn error_json(error: &AttemptError) -> Result<String, StoreError> {
    serde_json::to_string(error).map_err(|err| {
        StoreError::backend_with_source(format!("could not encode an attempt error: {err}"), err)
    })
}

#[async_trait]
impl OperationStore for SqliteStore {
    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Claim, StoreError> {
        claim::claim(&self.writer, &request).await
    }

    async fn succeed(
        &self,
        owner: &ClaimToken,
        result: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let query = sqlx::query(
            "UPDATE operations SET state = 'succeeded', result = ?1, updated_ms = ?2 \
             WHERE tenant_id = ?3 AND idempotency_key = ?4 \
               AND state = 'processing' AND attempt = ?5",
        )
        .bind(result)
        .bind(now_ms);
        self.owned(owner, query, "record a success").await
    }

    /// One immediate transaction: the success, then the audit record, one commit (one fsync
    /// where the two would take two).
    async fn succeed_audited(
        &self,
        owner: &ClaimToken,
        result: &str,
        now_ms: i64,
        entry: &AuditEntry,
    ) -> Result<Option<i64>, StoreError> {
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin recording a success"))?;
        let done = sqlx::query(
            "UPDATE operations SET state = 'succeeded', result = ?1, updated_ms = ?2 \
             WHERE tenant_id = ?3 AND idempotency_key = ?4 \
               AND state = 'processing' AND attempt = ?5",
        )
        .bind(result)
        .bind(now_ms)
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

    async fn fail(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.settle_with_error(
            owner,
            OperationState::Failed,
            error,
            now_ms,
            "record a failure",
        )
        .await
    }

    async fn mark_unknown(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.settle_with_error(
            owner,
            OperationState::OutcomeUnknown,
            error,
            now_ms,
            "record an unknown outcome",
        )
        .await
    }

    async fn record_retry(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        lease_until_ms: i64,
    ) -> Result<(), StoreError> {
        let query = sqlx::query(
            "UPDATE operations SET \
                 errors = json_insert(errors, '$[#]', json(?1)), lease_until_ms = ?2 \
             WHERE tenant_id = ?3 AND idempotency_key = ?4 \
               AND state = 'processing' AND attempt = ?5",
        )
        .bind(error_json(error)?)
        .bind(lease_until_ms);
        self.owned(owner, query, "record a retry").await
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

    async fn expire_leases(&self, now_ms: i64) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE operations SET state = 'outcome_unknown', updated_ms = ?1 \
             WHERE state = 'processing' AND lease_until_ms <= ?1",
        )
        .bind(now_ms)
        .execute(&self.writer)
        .await
        .map_err(backend("expire leases"))?;
        Ok(done.rows_affected())
    }

    async fn list_unknown(&self, limit: u32) -> Result<Vec<OperationRecord>, StoreError> {
        sqlx::query(
            "SELECT * FROM operations WHERE state = 'outcome_unknown' \
             ORDER BY updated_ms, tenant_id, idempotency_key LIMIT ?1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await
        .map_err(backend("list unknown outcomes"))?
        .iter()
        .map(row::record)
        .collect()
    }

    async fn resolve(
        &self,
        tenant: &str,
        key: &str,
        resolution: Resolution<'_>,
        now_ms: i64,
    ) -> Result<Option<OperationRecord>, StoreError> {
        resolve::resolve(&self.writer, tenant, key, resolution, now_ms).await
    }

    async fn purge(&self, before_ms: i64) -> Result<u64, StoreError> {
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin a purge"))?;
        let done = sqlx::query(
            "DELETE FROM operations \
             WHERE state IN ('succeeded', 'failed', 'rejected') AND updated_ms < ?1",
        )
        .bind(before_ms)
        .execute(&mut *tx)
        .await
        .map_err(backend("purge settled records"))?;
        sqlx::query(
            "DELETE FROM approvals WHERE NOT EXISTS ( \
                 SELECT 1 FROM operations o \
                 WHERE o.tenant_id = approvals.tenant_id \
                   AND o.idempotency_key = approvals.idempotency_key)",
        )
        .execute(&mut *tx)
        .await
        .map_err(backend("purge the approvals of purged records"))?;
        for (table, doing) in [
            ("outbox", "purge the outbox events of purged records"),
            ("steps", "purge the step journals of purged records"),
        ] {
            sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE NOT EXISTS ( \
                     SELECT 1 FROM operations o \
                     WHERE o.tenant_id = {table}.tenant_id \
                       AND o.idempotency_key = {table}.idempotency_key)"
            )))
            .execute(&mut *tx)
            .await
            .map_err(backend(doing))?;
        }
        // An audit record never goes before its operation.
        sqlx::query(
            "DELETE FROM audit WHERE at_ms < ?1 AND NOT EXISTS ( \
                 SELECT 1 FROM operations o \
                 WHERE o.tenant_id = audit.tenant_id \
                   AND o.idempotency_key = audit.idempotency_key)",
        )
        .bind(before_ms)
        .execute(&mut *tx)
        .await
        .map_err(backend("purge old audit records"))?;
        // A run's attempts and failures go with it (ON DELETE CASCADE).
        sqlx::query("DELETE FROM runs WHERE updated_ms < ?1")
            .bind(before_ms)
            .execute(&mut *tx)
            .await
            .map_err(backend("purge old runs"))?;
        tx.commit().await.map_err(backend("commit a purge"))?;
        Ok(done.rows_affected())
    }

    async fn begin_turn(&self, request: TurnRequest<'_>) -> Result<TurnGrant, StoreError> {
        run::begin_turn(&self.writer, &request).await
    }

    async fn charge_attempt(
        &self,
        run: RunKey<'_>,
        tool: &str,
        retry_budget: Option<u32>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        run::charge_attempt(&self.writer, run, tool, retry_budget, now_ms).await
    }

    async fn note_failure(
        &self,
        run: RunKey<'_>,
        tool: &str,
        request_hash: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        run::note_failure(&self.writer, run, tool, request_hash, now_ms).await
    }

    async fn abort_run(
        &self,
        run: RunKey<'_>,
        abort: &RunAbort,
        now_ms: i64,
    ) -> Result<AbortedRun, StoreError> {
        run::abort_run(&self.writer, run, abort, now_ms).await
    }

    async fn run(&self, run: RunKey<'_>) -> Result<Option<RunRecord>, StoreError> {
        run::run(&self.reader, run).await
    }

    async fn decide(&self, request: DecideRequest<'_>) -> Result<Decided, StoreError> {
        approval::decide(&self.writer, &request).await
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        approval::get(&self.reader, id).await
    }

    async fn list_approvals(
        &self,
        query: ApprovalQuery<'_>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        approval::list(&self.reader, &query).await
    }

    async fn list_approved(&self, limit: u32) -> Result<Vec<ApprovalRecord>, StoreError> {
        approval::list_approved(&self.reader, limit).await
    }

    async fn expire_approvals(
        &self,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        approval::expire(&self.writer, now_ms, limit).await
    }

    async fn reject_claimed(
        &self,
        owner: &ClaimToken,
        decision: &Decision,
        now_ms: i64,
    ) -> Result<ApprovalRecord, StoreError> {
        approval::reject_claimed(&self.writer, owner, decision, now_ms).await
    }

    async fn list_operations(
        &self,
        query: OperationQuery<'_>,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        sqlx::query(
            "SELECT * FROM operations o \
             WHERE (?1 IS NULL OR o.tenant_id = ?1) AND (?2 IS NULL OR o.state = ?2) \
               AND (?3 IS NULL OR EXISTS ( \
                   SELECT 1 FROM audit a \
                   WHERE a.run_id = ?3 AND a.tenant_id = o.tenant_id \
                     AND a.idempotency_key = o.idempotency_key)) \
             ORDER BY o.created_ms, o.tenant_id, o.idempotency_key LIMIT ?4",
        )
        .bind(query.tenant)
        .bind(query.state.map(OperationState::as_str))
        .bind(query.run_id)
        .bind(approval::limit(query.limit))
        .fetch_all(&self.reader)
        .await
        .map_err(backend("list operations"))?
        .iter()
        .map(row::record)
        .collect()
    }

    async fn begin(&self, request: ClaimRequest<'_>) -> Result<Begun, StoreError> {
        begin::begin(&self.writer, &request).await
    }

    async fn lease_events(&self, lease: EventLease<'_>) -> Result<Vec<LeasedEvent>, StoreError> {
        outbox::lease(&self.writer, &lease).await
    }

    async fn settle_event(
        &self,
        tenant: &str,
        key: &str,
        attempt: u32,
        outcome: DeliveryOutcome<'_>,
        now_ms: i64,
    ) -> Result<OutboxEvent, StoreError> {
        outbox::settle(&self.writer, tenant, key, attempt, outcome, now_ms, None).await
    }

    async fn settle_event_audited(
        &self,
        tenant: &str,
        key: &str,
        attempt: u32,
        outcome: DeliveryOutcome<'_>,
        now_ms: i64,
        audit: &AuditEntry,
    ) -> Result<OutboxEvent, StoreError> {
        outbox::settle(
            &self.writer,
            tenant,
            key,
            attempt,
            outcome,
            now_ms,
            Some(audit),
        )
        .await
    }

    async fn resume_event(
        &self,
        tenant: &str,
        key: &str,
        now_ms: i64,
    ) -> Result<Option<OutboxEvent>, StoreError> {
        outbox::resume(&self.writer, tenant, key, now_ms).await
    }

    async fn event(&self, tenant: &str, key: &str) -> Result<Option<OutboxEvent>, StoreError> {
        outbox::get(&self.reader, tenant, key).await
    }

    async fn list_events(&self, query: EventQuery<'_>) -> Result<Vec<OutboxEvent>, StoreError> {
        outbox::list(&self.reader, &query).await
    }

    async fn begin_step(
        &self,
        owner: &ClaimToken,
        name: &str,
        now_ms: i64,
    ) -> Result<StepStart, StoreError> {
        steps::begin_step(&self.writer, owner, name, now_ms).await
    }

    async fn finish_step(
        &self,
        owner: &ClaimToken,
        name: &str,
        outcome: StepOutcome<'_>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        steps::finish_step(&self.writer, owner, name, outcome, now_ms).await
    }

    async fn steps(&self, tenant: &str, key: &str) -> Result<Vec<StepRecord>, StoreError> {
        steps::steps(&self.reader, tenant, key).await
    }

    async fn partial(
        &self,
        owner: &ClaimToken,
        report: &str,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        steps::partial(&self.writer, owner, report, error, now_ms).await
    }

    async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        audit::append(&self.writer, entry).await
    }

    async fn append_audits(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        audit::append_all(&self.writer, entries).await
    }

    async fn audit(&self, query: AuditQuery<'_>) -> Result<Vec<AuditRecord>, StoreError> {
        audit::read(&self.reader, &query).await
    }
}
