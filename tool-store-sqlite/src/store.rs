//! [`SqliteStore`]: opening the file, and the trait's operations as SQL.

use std::path::Path;

use async_trait::async_trait;
use sqlx::sqlite::SqliteArguments;
use sqlx::{Sqlite, SqlitePool};
use toolgate_core::store::{
    ApprovalQuery, ApprovalRecord, AttemptError, AuditEntry, AuditQuery, AuditRecord, Claim,
    ClaimRequest, ClaimToken, DecideRequest, Decided, Decision, OperationQuery, OperationRecord,
    OperationState, OperationStore, Resolution, RunAbort, RunKey, RunRecord, StoreError, TurnGrant,
    TurnRequest,
};

use crate::connect::SqliteOptions;
use crate::error::backend;
use crate::{claim, migrate, row, run};

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
        let query = match resolution {
            Resolution::Applied(result) => sqlx::query(
                "UPDATE operations SET state = 'succeeded', result = ?4, updated_ms = ?3 \
                 WHERE tenant_id = ?1 AND idempotency_key = ?2 AND state = 'outcome_unknown' \
                 RETURNING *",
            )
            .bind(tenant)
            .bind(key)
            .bind(now_ms)
            .bind(result),
            Resolution::NotApplied => sqlx::query(
                "UPDATE operations SET state = 'failed', updated_ms = ?3 \
                 WHERE tenant_id = ?1 AND idempotency_key = ?2 AND state = 'outcome_unknown' \
                 RETURNING *",
            )
            .bind(tenant)
            .bind(key)
            .bind(now_ms),
            Resolution::StillUnknown => sqlx::query(
                "UPDATE operations SET reconcile_tries = reconcile_tries + 1, updated_ms = ?3 \
                 WHERE tenant_id = ?1 AND idempotency_key = ?2 AND state = 'outcome_unknown' \
                 RETURNING *",
            )
            .bind(tenant)
            .bind(key)
            .bind(now_ms),
        };
        query
            .fetch_optional(&self.writer)
            .await
            .map_err(backend("settle an unknown outcome"))?
            .as_ref()
            .map(row::record)
            .transpose()
    }

    async fn purge(&self, before_ms: i64) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "DELETE FROM operations \
             WHERE state IN ('succeeded', 'failed') AND updated_ms < ?1",
        )
        .bind(before_ms)
        .execute(&self.writer)
        .await
        .map_err(backend("purge settled records"))?;
        // A run's attempts and failures go with it (ON DELETE CASCADE).
        sqlx::query("DELETE FROM runs WHERE updated_ms < ?1")
            .bind(before_ms)
            .execute(&self.writer)
            .await
            .map_err(backend("purge old runs"))?;
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
    ) -> Result<RunAbort, StoreError> {
        run::abort_run(&self.writer, run, abort, now_ms).await
    }

    async fn run(&self, run: RunKey<'_>) -> Result<Option<RunRecord>, StoreError> {
        run::run(&self.reader, run).await
    }

    async fn decide(&self, _request: DecideRequest<'_>) -> Result<Decided, StoreError> {
        Err(StoreError::backend(PENDING))
    }

    async fn approval(&self, _id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        Err(StoreError::backend(PENDING))
    }

    async fn list_approvals(
        &self,
        _query: ApprovalQuery<'_>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        Err(StoreError::backend(PENDING))
    }

    async fn list_approved(&self, _limit: u32) -> Result<Vec<ApprovalRecord>, StoreError> {
        Err(StoreError::backend(PENDING))
    }

    async fn expire_approvals(
        &self,
        _now_ms: i64,
        _limit: u32,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        Err(StoreError::backend(PENDING))
    }

    async fn reject_claimed(
        &self,
        _owner: &ClaimToken,
        _decision: &Decision,
        _now_ms: i64,
    ) -> Result<ApprovalRecord, StoreError> {
        Err(StoreError::backend(PENDING))
    }

    async fn list_operations(
        &self,
        _query: OperationQuery<'_>,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        Err(StoreError::backend(PENDING))
    }

    async fn append_audit(&self, _entry: &AuditEntry) -> Result<i64, StoreError> {
        Err(StoreError::backend(PENDING))
    }

    async fn audit(&self, _query: AuditQuery<'_>) -> Result<Vec<AuditRecord>, StoreError> {
        Err(StoreError::backend(PENDING))
    }
}

/// Placeholder until this store implements approvals and the audit trail.
const PENDING: &str = "approvals and the audit trail are not implemented by this store yet";
