//! [`PostgresStore`]: the [`OperationStore`] for many processes and machines on one database.

use async_trait::async_trait;
use sqlx::Connection;
use sqlx::postgres::{PgPool, PgQueryResult};
use toolgate_core::store::{
    AbortedRun, ApprovalQuery, ApprovalRecord, AttemptError, AuditEntry, AuditQuery, AuditRecord,
    Begun, Claim, ClaimRequest, ClaimToken, DecideRequest, Decided, Decision, DeliveryOutcome,
    EventLease, EventQuery, LeasedEvent, OperationQuery, OperationRecord, OperationState,
    OperationStore, OutboxEvent, Resolution, RunAbort, RunKey, RunRecord, StepOutcome, StepRecord,
    StepStart, StoreError, TurnClaim, TurnGrant, TurnRequest, begin_turn_then_claim,
};

use crate::connect::PostgresOptions;
use crate::connections::Connections;
use crate::error::store_error;
use crate::migrate::migrator;
use crate::row::{self, append_error, columns};
use crate::run;
use crate::statement::{ExecuteOn, FetchOn};
use crate::{approval, audit, claim, outbox, resolve, steps, transaction, turn_claim};

/// An [`OperationStore`] in a PostgreSQL database, shared safely by any number of processes
/// and machines.
///
/// One row a `(tenant, key)` in the table `toolgate_operations`, whose primary key is that
/// pair. A claim is one statement, one round trip: an `INSERT … ON CONFLICT DO NOTHING` that
/// also reads the record already under the key, so a new key is acquired and a replay answered
/// at once. Only a record the claim must change (`failed`, or an expired lease) is read again
/// `FOR UPDATE` and settled in a transaction, so two claims never both acquire. Every write of a
/// worker is one `UPDATE … WHERE state = 'processing' AND attempt = $n`: when no row matches,
/// the claim was lost and the write changes nothing.
///
/// Approvals are rows of `toolgate_approvals`. A claim over the threshold inserts its record
/// (`awaiting_approval`) and its approval in one transaction; a claim of a record that waits, or
/// was rejected, reads the record and then its approval `FOR UPDATE`, and a decision, an expiry
/// and a revalidation's rejection take the same two locks in the same order. So an approved
/// operation is run by exactly one claim, whichever process makes it, and a claim acts on the
/// decisions committed before it. The audit trail is `toolgate_audit`, appended one row at a time and numbered
/// by an identity column. A run's ledger is one row a run in
/// `toolgate_runs` (with its attempts and failed calls beside it), changed under that row's
/// lock.
///
/// An outbox operation is claimed inside a transaction that stays open while the tool's body
/// writes its rows (see [`connection`](crate::connection)): its uncommitted record, or the row
/// lock of a record taken again, holds every other claim of the key until the transaction ends.
/// Its event, in `toolgate_outbox` under the operation's key, is inserted by the commit. The
/// transaction holds one of the store's connections while the body runs: count the outbox calls
/// that run at once in `max_connections`, besides the other statements. Workers
/// lease events with one `UPDATE … FOR UPDATE SKIP LOCKED`, so two never hold the same one, and
/// settle an event and its operation in one transaction fenced by the event's attempt. Steps are
/// rows of `toolgate_steps`, begun and finished under the lock of their operation's row.
///
/// Cloning is cheap: clones share the store's connections. Every statement runs on one of
/// them (see [the crate's docs](crate#connections)), not on the pool the store was made with.
///
/// ```no_run
/// use std::sync::Arc;
/// use toolgate_core::store::OperationStore;
/// use toolgate_store_postgres::PostgresStore;
///
/// # async fn run() -> Result<(), toolgate_core::store::StoreError> {
/// let store = PostgresStore::connect("postgres://toolgate:secret@db.internal/toolgate").await?;
/// let store: Arc<dyn OperationStore> = Arc::new(store);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct PostgresStore {
    conns: Connections,
}

impl PostgresStore {
    /// Connects a pool to the database at `url` (`postgres://user:password@host:port/database`)
    /// and applies the store's migrations, which is safe while other processes do the same.
    ///
    /// A statement waits at most [`DEFAULT_ACQUIRE_TIMEOUT`](crate::DEFAULT_ACQUIRE_TIMEOUT)
    /// for a connection, then fails with [`StoreError::Unreachable`]; [`PostgresStore::options`]
    /// sets another wait.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::options(url).connect().await
    }

    /// The settings of a connection to `url`, to change before [`PostgresOptions::connect`].
    pub fn options(url: &str) -> PostgresOptions {
        PostgresOptions::new(url)
    }

    /// A store on a pool the application configured itself. Applies no migration: call
    /// [`PostgresStore::migrate`] once at start-up (or use [`PostgresStore::connect`]).
    ///
    /// The store takes the pool's settings and opens its own connections with them (see
    /// [the crate's docs](crate#connections)): at most `max_connections` at once, each statement
    /// waiting at most `acquire_timeout` for one, an idle one closed after `idle_timeout`
    /// (5 minutes when the pool has none) or `max_lifetime`. It runs none of its statements on
    /// the pool's connections, and the pool's hooks (`after_connect`, `before_acquire`,
    /// `after_release`) and `min_connections` do not apply to its own. A pool made with
    /// `connect_lazy` opens nothing, and the store opens its first connection for its first
    /// statement.
    pub fn from_pool(pool: PgPool) -> PostgresStore {
        PostgresStore {
            conns: Connections::new(pool),
        }
    }

    /// Applies the migrations this version of the store needs and that the database lacks.
    ///
    /// Safe to call again and from many processes at once: it waits for a PostgreSQL advisory
    /// lock on the database, and applies each migration once. Its bookkeeping is the table
    /// `_toolgate_store_migrations`, apart from any migrations of the application's.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut lease = self.conns.lease().await.map_err(backend)?;
        let applied = migrator().run(lease.conn()).await;
        if applied.is_ok() {
            lease.done().await;
        }
        // Otherwise the lease is dropped with its session: a failed run can leave the advisory
        // lock held by the session, and the lock dies with it.
        applied.map_err(|e| match e {
            sqlx::migrate::MigrateError::Execute(e)
            | sqlx::migrate::MigrateError::ExecuteMigration(e, _) => {
                store_error("migrate the store", e)
            }
            other => {
                StoreError::backend_with_source(format!("cannot migrate the store: {other}"), other)
            }
        })
    }

    /// The pool the store was made with: the settings of the store's connections, and a pool
    /// for the application's own statements, apart from the store's connections.
    pub fn pool(&self) -> &PgPool {
        self.conns.pool()
    }

    /// Opens a connection now (or finds one idle), kept for the statements to come.
    pub(crate) async fn connected(&self) -> Result<(), sqlx::Error> {
        self.conns.lease().await?.done().await;
        Ok(())
    }

    /// Closes every connection of this store and its clones, waiting for the statements in
    /// flight, and the pool it was made with. Dropping the last clone closes them too; every
    /// committed write is in the database either way.
    pub async fn close(&self) {
        self.conns.close().await;
        self.conns.pool().close().await;
    }

    /// Turns the result of an owner-checked `UPDATE` into `LostClaim` when no row matched.
    fn owned(owner: &ClaimToken, done: PgQueryResult) -> Result<(), StoreError> {
        if done.rows_affected() == 0 {
            return Err(StoreError::LostClaim {
                key: owner.key.clone(),
                attempt: owner.attempt,
            });
        }
        Ok(())
    }

    /// Moves an owned `processing` record to `state`, appending `error`.
    async fn settle_with_error(
        &self,
        owner: &ClaimToken,
        state: OperationState,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let done = sqlx::query(concat!(
            "UPDATE toolgate_operations SET state = $4, errors = ",
            append_error!("$5"),
            ", updated_ms = $6 \
             WHERE tenant_id = $1 AND idempotency_key = $2 \
             AND state = 'processing' AND attempt = $3"
        ))
        .bind(&owner.tenant)
        .bind(&owner.key)
        .bind(row::attempt(owner.attempt))
        .bind(state.as_str())
        .bind(row::error_list(error)?)
        .bind(now_ms)
        .execute_on(&self.conns)
        .await
        .map_err(backend)?;
        Self::owned(owner, done)
    }
}

#[async_trait]
impl OperationStore for PostgresStore {
    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Claim, StoreError> {
        claim::claim(&self.conns, &request).await
    }

    async fn succeed(
        &self,
        owner: &ClaimToken,
        result: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE toolgate_operations SET state = 'succeeded', result = $4, updated_ms = $5 \
             WHERE tenant_id = $1 AND idempotency_key = $2 \
             AND state = 'processing' AND attempt = $3",
        )
        .bind(&owner.tenant)
        .bind(&owner.key)
        .bind(row::attempt(owner.attempt))
        .bind(result)
        .bind(now_ms)
        .execute_on(&self.conns)
        .await
        .map_err(backend)?;
        Self::owned(owner, done)
    }

    async fn succeed_audited(
        &self,
        owner: &ClaimToken,
        result: &str,
        now_ms: i64,
        entry: &AuditEntry,
    ) -> Result<Option<i64>, StoreError> {
        audit::succeed(&self.conns, owner, result, now_ms, entry).await
    }

    async fn fail(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.settle_with_error(owner, OperationState::Failed, error, now_ms)
            .await
    }

    async fn mark_unknown(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.settle_with_error(owner, OperationState::OutcomeUnknown, error, now_ms)
            .await
    }

    async fn record_retry(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        lease_until_ms: i64,
    ) -> Result<(), StoreError> {
        let done = sqlx::query(concat!(
            "UPDATE toolgate_operations SET errors = ",
            append_error!("$4"),
            ", lease_until_ms = $5 \
             WHERE tenant_id = $1 AND idempotency_key = $2 \
             AND state = 'processing' AND attempt = $3"
        ))
        .bind(&owner.tenant)
        .bind(&owner.key)
        .bind(row::attempt(owner.attempt))
        .bind(row::error_list(error)?)
        .bind(lease_until_ms)
        .execute_on(&self.conns)
        .await
        .map_err(backend)?;
        Self::owned(owner, done)
    }

    async fn get(&self, tenant: &str, key: &str) -> Result<Option<OperationRecord>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM toolgate_operations WHERE tenant_id = $1 AND idempotency_key = $2"
        ))
        .bind(tenant)
        .bind(key)
        .fetch_optional_on(&self.conns)
        .await
        .map_err(backend)?;
        row.as_ref().map(row::record).transpose()
    }

    async fn expire_leases(&self, now_ms: i64) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE toolgate_operations SET state = 'outcome_unknown', updated_ms = $1 \
             WHERE state = 'processing' AND lease_until_ms <= $1",
        )
        .bind(now_ms)
        .execute_on(&self.conns)
        .await
        .map_err(backend)?;
        Ok(done.rows_affected())
    }

    async fn list_unknown(&self, limit: u32) -> Result<Vec<OperationRecord>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM toolgate_operations WHERE state = 'outcome_unknown' \
             ORDER BY updated_ms, tenant_id, idempotency_key LIMIT $1"
        ))
        .bind(i64::from(limit))
        .fetch_all_on(&self.conns)
        .await
        .map_err(backend)?;
        rows.iter().map(row::record).collect()
    }

    async fn resolve(
        &self,
        tenant: &str,
        key: &str,
        resolution: Resolution<'_>,
        now_ms: i64,
    ) -> Result<Option<OperationRecord>, StoreError> {
        resolve::resolve(&self.conns, tenant, key, resolution, now_ms).await
    }

    async fn purge(&self, before_ms: i64) -> Result<u64, StoreError> {
        let mut lease = self.conns.lease().await.map_err(backend)?;
        let mut tx = lease.conn().begin().await.map_err(backend)?;
        // Their outbox events and step journals go with them (ON DELETE CASCADE).
        let done = sqlx::query(
            "DELETE FROM toolgate_operations \
             WHERE state IN ('succeeded', 'failed', 'rejected') AND updated_ms < $1",
        )
        .bind(before_ms)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        // The approvals of operations that are gone, whenever they were made.
        sqlx::query(
            "DELETE FROM toolgate_approvals AS a WHERE NOT EXISTS (SELECT FROM \
             toolgate_operations AS o WHERE o.tenant_id = a.tenant_id \
             AND o.idempotency_key = a.idempotency_key)",
        )
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        // Old audit records, never before their operation.
        sqlx::query(
            "DELETE FROM toolgate_audit AS a WHERE at_ms < $1 AND (idempotency_key IS NULL \
             OR NOT EXISTS (SELECT FROM toolgate_operations AS o \
             WHERE o.tenant_id = a.tenant_id AND o.idempotency_key = a.idempotency_key))",
        )
        .bind(before_ms)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        // A run's attempts and failures go with it (ON DELETE CASCADE).
        sqlx::query("DELETE FROM toolgate_runs WHERE updated_ms < $1")
            .bind(before_ms)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        lease.done().await;
        Ok(done.rows_affected())
    }

    async fn begin_turn(&self, request: TurnRequest<'_>) -> Result<TurnGrant, StoreError> {
        run::begin_turn(&self.conns, &request).await
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

    async fn charge_attempt(
        &self,
        run: RunKey<'_>,
        tool: &str,
        retry_budget: Option<u32>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        run::charge_attempt(&self.conns, run, tool, retry_budget, now_ms).await
    }

    async fn note_failure(
        &self,
        run: RunKey<'_>,
        tool: &str,
        request_hash: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        run::note_failure(&self.conns, run, tool, request_hash, now_ms).await
    }

    async fn abort_run(
        &self,
        run: RunKey<'_>,
        abort: &RunAbort,
        now_ms: i64,
    ) -> Result<AbortedRun, StoreError> {
        run::abort_run(&self.conns, run, abort, now_ms).await
    }

    async fn run(&self, run: RunKey<'_>) -> Result<Option<RunRecord>, StoreError> {
        run::run(&self.conns, run).await
    }

    async fn decide(&self, request: DecideRequest<'_>) -> Result<Decided, StoreError> {
        approval::decide(&self.conns, &request).await
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        let mut lease = self.conns.lease().await.map_err(backend)?;
        let read = approval::read(lease.conn(), id, false).await;
        lease.finish(read).await
    }

    async fn list_approvals(
        &self,
        query: ApprovalQuery<'_>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        approval::list(&self.conns, &query).await
    }

    async fn list_approved(&self, limit: u32) -> Result<Vec<ApprovalRecord>, StoreError> {
        approval::list_approved(&self.conns, limit).await
    }

    async fn expire_approvals(
        &self,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        approval::expire(&self.conns, now_ms, limit).await
    }

    async fn reject_claimed(
        &self,
        owner: &ClaimToken,
        decision: &Decision,
        now_ms: i64,
    ) -> Result<ApprovalRecord, StoreError> {
        approval::reject_claimed(&self.conns, owner, decision, now_ms).await
    }

    async fn list_operations(
        &self,
        query: OperationQuery<'_>,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        audit::operations(&self.conns, &query).await
    }

    async fn begin(&self, request: ClaimRequest<'_>) -> Result<Begun, StoreError> {
        transaction::begin(&self.conns, &request).await
    }

    async fn lease_events(&self, lease: EventLease<'_>) -> Result<Vec<LeasedEvent>, StoreError> {
        outbox::lease(&self.conns, &lease).await
    }

    async fn settle_event(
        &self,
        tenant: &str,
        key: &str,
        attempt: u32,
        outcome: DeliveryOutcome<'_>,
        now_ms: i64,
    ) -> Result<OutboxEvent, StoreError> {
        outbox::settle(&self.conns, tenant, key, attempt, outcome, now_ms, None).await
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
            &self.conns,
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
        outbox::resume(&self.conns, tenant, key, now_ms).await
    }

    async fn event(&self, tenant: &str, key: &str) -> Result<Option<OutboxEvent>, StoreError> {
        let mut lease = self.conns.lease().await.map_err(backend)?;
        let read = outbox::read(lease.conn(), tenant, key, false).await;
        lease.finish(read).await
    }

    async fn list_events(&self, query: EventQuery<'_>) -> Result<Vec<OutboxEvent>, StoreError> {
        outbox::list(&self.conns, &query).await
    }

    async fn begin_step(
        &self,
        owner: &ClaimToken,
        name: &str,
        now_ms: i64,
    ) -> Result<StepStart, StoreError> {
        steps::begin_step(&self.conns, owner, name, now_ms).await
    }

    async fn finish_step(
        &self,
        owner: &ClaimToken,
        name: &str,
        outcome: StepOutcome<'_>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        steps::finish_step(&self.conns, owner, name, outcome, now_ms).await
    }

    async fn steps(&self, tenant: &str, key: &str) -> Result<Vec<StepRecord>, StoreError> {
        steps::steps(&self.conns, tenant, key).await
    }

    async fn partial(
        &self,
        owner: &ClaimToken,
        report: &str,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        steps::partial(&self.conns, owner, report, error, now_ms).await
    }

    async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        audit::append(&self.conns, entry).await
    }

    async fn append_audits(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        audit::append_all(&self.conns, entries).await
    }

    async fn audit(&self, query: AuditQuery<'_>) -> Result<Vec<AuditRecord>, StoreError> {
        audit::read(&self.conns, &query).await
    }
}

/// A failed statement in the store's words: [`StoreError::Unreachable`] when the server could not
/// be reached (see `error::is_unreachable`), [`StoreError::Backend`] otherwise.
fn backend(error: sqlx::Error) -> StoreError {
    store_error("run a statement on PostgreSQL", error)
}
