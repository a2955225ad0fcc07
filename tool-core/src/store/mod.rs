//! Durable records of write operations: their state machine behind one small trait.
//!
//! A store keeps one record per `(tenant, key)`. The dispatcher claims a key before a write runs
//! (one atomic insert-or-inspect, with a lease and an attempt counter), then records the outcome
//! carrying the attempt it claimed, so a worker that lost its lease changes nothing. Stores:
//! `toolgate-store-sqlite` (the embedded default), `toolgate-store-postgres` (many processes, one
//! database) and `MemoryStore` (tests only: the `test-util` feature, or the `toolgate-test`
//! crate). Every store passes the conformance suite of `toolgate-test`, which a store of your
//! own can run too.

mod approval;
mod attempt_error;
mod audit;
mod grants;
#[cfg(feature = "test-util")]
mod memory;
mod outbox;
mod record;
mod run;
mod shared;
mod steps;
mod turn_claim;

use async_trait::async_trait;

pub use approval::{
    ApprovalQuery, ApprovalRecord, ApprovalStatus, DecideRequest, DecideStep, Decided, Decision,
    EXPIRED, RUN_ABORTED, Refusal, Requester, SYSTEM_DECIDER, Verdict,
};
pub use attempt_error::AttemptError;
pub use audit::{AuditEntry, AuditKind, AuditQuery, AuditRecord};
pub use grants::Grants;
#[cfg(feature = "test-util")]
pub use memory::MemoryStore;
pub use outbox::{
    Begun, Commit, DeliveryOutcome, EventLease, EventQuery, EventStatus, LeasedEvent, NewEvent,
    OutboxEvent, StoreTransaction,
};
pub use record::{
    Claim, ClaimRequest, ClaimStep, ClaimToken, OperationQuery, OperationRecord, OperationState,
    Resolution, StoreError,
};
pub use run::{
    AbortedRun, Admission, FailedCall, RunAbort, RunKey, RunRecord, TurnGrant, TurnRequest,
};
pub use steps::{Journal, StepOutcome, StepRecord, StepStart, StepStatus};
pub use turn_claim::{TurnClaim, begin_turn_then_claim, grant_lets_claim};

/// Where write operations are recorded. Object safe: the dispatcher holds an
/// `Arc<dyn OperationStore>`.
///
/// Times are milliseconds since the Unix epoch, given by the caller (the dispatcher's clock), so
/// that every store agrees on what "expired" means and tests can move time by hand.
#[async_trait]
pub trait OperationStore: Send + Sync + 'static {
    /// Claims `request.key` for `request.tenant`, atomically, following
    /// [`ClaimRequest::step`] with the record's latest approval and, when
    /// [`ClaimRequest::needs_journal`], the [`Journal`] of its steps:
    ///
    /// - no record, and `request.approval` is `None`: inserts one in `processing` with attempt 1
    ///   and a lease until `now + lease`, and answers [`Claim::Acquired`];
    /// - no record, with `request.approval`: inserts the record `awaiting_approval` (attempt 0,
    ///   its `approval_id` the approval's) and the approval as given (pending), and answers
    ///   [`Claim::Approval`] with it; the same for a `failed` record, or a `rejected` one under
    ///   another hash ([`ClaimStep::Await`], attempt unchanged);
    /// - `awaiting_approval` with the same hash: approved, it becomes `processing` (attempt + 1,
    ///   leased) and answers [`Claim::Acquired`] with the approval, for exactly one claim;
    ///   pending past its expiry, the approval becomes rejected as [`EXPIRED`] and the record
    ///   `rejected`; otherwise nothing changes; all but the first answer [`Claim::Approval`];
    /// - `rejected` with the same hash: [`Claim::Approval`] with its approval;
    /// - `failed` (definitely not applied): takes it again for this request, whatever its
    ///   hash: stores `request.request_hash` and `request.arguments`, attempt + 1, keeps the
    ///   earlier errors, [`Claim::Acquired`];
    /// - any other record with another `request_hash`: [`Claim::Conflict`], and nothing is
    ///   written;
    /// - `partial` with the same hash: takes it again as `failed` is taken (the steps done
    ///   stay in the journal and are skipped);
    /// - `processing` whose lease has expired: with `request.takeover` (the tool's downstream
    ///   honours the key), or a [`Journal::Settled`] journal, takes it over, attempt + 1,
    ///   [`Claim::Acquired`]; otherwise turns it into `outcome_unknown` and answers
    ///   [`Claim::Existing`] with the updated record;
    /// - a takeover under another request hash (`failed`, `rejected`) clears the record's step
    ///   journal: steps are never answered to other arguments;
    /// - any other record (`succeeded`, `outcome_unknown`, a live `processing`, …):
    ///   [`Claim::Existing`] with the record as it is.
    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Claim, StoreError>;

    /// `processing` → `succeeded` with the tool's result. [`StoreError::LostClaim`] when the
    /// record is no longer `processing` under `owner.attempt`.
    async fn succeed(
        &self,
        owner: &ClaimToken,
        result: &str,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// [`succeed`](OperationStore::succeed), and the call's audit record `audit` appended in the
    /// same transaction: both or neither, one commit. Answers the record's `seq`, or `None` when
    /// the success was recorded and the audit record was not (the dispatcher then appends it
    /// itself).
    ///
    /// The default records the success, then appends the record, in two transactions; the
    /// stores of this workspace do both in one.
    async fn succeed_audited(
        &self,
        owner: &ClaimToken,
        result: &str,
        now_ms: i64,
        audit: &AuditEntry,
    ) -> Result<Option<i64>, StoreError> {
        self.succeed(owner, result, now_ms).await?;
        Ok(self.append_audit(audit).await.ok())
    }

    /// `processing` → `failed` (definitely not applied), appending `error` to the record's
    /// attempt errors. Same ownership rule as [`OperationStore::succeed`].
    async fn fail(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// `processing` → `outcome_unknown` (sent, outcome not known), appending `error`. Same
    /// ownership rule as [`OperationStore::succeed`].
    async fn mark_unknown(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// Appends the error of an attempt that will be retried; the record stays `processing` and
    /// its lease is renewed until `lease_until_ms`. Same ownership rule.
    async fn record_retry(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        lease_until_ms: i64,
    ) -> Result<(), StoreError>;

    /// The record of `key` for `tenant`. A tenant never sees another tenant's record.
    async fn get(&self, tenant: &str, key: &str) -> Result<Option<OperationRecord>, StoreError>;

    /// Every `processing` record whose lease expired before `now_ms` becomes `outcome_unknown`
    /// (its worker crashed after it may have acted). Answers how many.
    async fn expire_leases(&self, now_ms: i64) -> Result<u64, StoreError>;

    /// Up to `limit` `outcome_unknown` records of every tenant, oldest first, for the
    /// reconciler.
    async fn list_unknown(&self, limit: u32) -> Result<Vec<OperationRecord>, StoreError>;

    /// Settles an `outcome_unknown` record: applied → `succeeded` with the result, not applied →
    /// `failed`, still unknown → stays, with its reconcile count + 1. Answers the record after
    /// the change, or `None` when it was not `outcome_unknown` any more (someone else settled it).
    ///
    /// For an operation with an outbox event (see [`OperationStore::settle_event`]): applied →
    /// `succeeded` with the record's result unchanged (the tool's own) and the event `delivered`
    /// with the resolution's result; not applied → `queued` again with the event `pending`, due
    /// at `now_ms` and no longer [`maybe_applied`](OutboxEvent::maybe_applied) (its rows are
    /// committed; the delivery is still owed). For an operation with a
    /// step journal, not applied turns its `started` steps `failed`, and the record becomes
    /// `partial` instead of `failed` when a step of it succeeded.
    async fn resolve(
        &self,
        tenant: &str,
        key: &str,
        resolution: Resolution<'_>,
        now_ms: i64,
    ) -> Result<Option<OperationRecord>, StoreError>;

    /// Deletes `succeeded`, `failed` and `rejected` records last changed before `before_ms`,
    /// with their approvals, outbox events and step journals. `processing`, `outcome_unknown` and `awaiting_approval` records
    /// are never purged. Answers how many records. Also deleted, not counted in the answer:
    /// runs last changed before `before_ms` (their counters, failed calls and abort), and audit
    /// records appended before `before_ms` whose operation, if they name one, has no record any
    /// more (an audit record never goes before its operation).
    async fn purge(&self, before_ms: i64) -> Result<u64, StoreError>;

    /// Starts a model turn of `request.run`, atomically, creating the run's record if it has
    /// none (see [`RunRecord::begin_turn`], which every store follows):
    ///
    /// - an aborted run: [`TurnGrant::Aborted`], nothing counted;
    /// - `steps >= max_steps`: [`TurnGrant::StepLimit`], nothing counted;
    /// - otherwise the turn counts as a step; then, when `tool_calls` plus the turn's calls
    ///   would pass `max_tool_calls`: [`TurnGrant::CallLimit`], no call counted;
    /// - otherwise every call is counted, each tool is granted as many of its calls as its
    ///   retry budget has attempts left (those grants are added to its attempts), and the answer
    ///   lists the run's failed calls of the requested tools: [`TurnGrant::Admitted`].
    async fn begin_turn(&self, request: TurnRequest<'_>) -> Result<TurnGrant, StoreError>;

    /// Begins the turn `turn` of one write and, when its grant lets the write claim its key
    /// ([`grant_lets_claim`]), claims it with `claim` as [`claim`](Self::claim) does: the turn
    /// of a lone write, whose first statement to the store is its claim. `turn` asks for one
    /// call of `claim.tool`, in `claim.tenant`'s run.
    ///
    /// A store that can do both in one transaction should (the PostgreSQL store does, in one
    /// statement, for a claim that asks for no approval): the turn of a write then costs the
    /// store two commits, the claim and the outcome. The default begins the turn, then claims:
    /// two transactions, and a turn counted whose claim failed (which is what the dispatcher
    /// counts when a claim fails after its turn, too).
    async fn begin_turn_and_claim(
        &self,
        turn: TurnRequest<'_>,
        claim: ClaimRequest<'_>,
    ) -> Result<TurnClaim, StoreError> {
        begin_turn_then_claim(self, turn, claim).await
    }

    /// Whether [`begin_turn_and_claim`](Self::begin_turn_and_claim) costs this store less than
    /// [`begin_turn`](Self::begin_turn) and then [`claim`](Self::claim) (one transaction, not
    /// two): the dispatcher then begins the turn of a lone write with its claim. The default,
    /// `false`: the dispatcher begins every turn before its calls run.
    fn claims_with_turn(&self) -> bool {
        false
    }

    /// One more attempt of `tool` in `run` (a retry below the model), atomically: `false`, and
    /// nothing counted, when its attempts have reached `retry_budget`.
    async fn charge_attempt(
        &self,
        run: RunKey<'_>,
        tool: &str,
        retry_budget: Option<u32>,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Notes that a call of `tool` with the request hash `request_hash` failed in `run` (noting
    /// it again adds nothing; either way the run's `updated_ms` becomes `now_ms`).
    async fn note_failure(
        &self,
        run: RunKey<'_>,
        tool: &str,
        request_hash: &str,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// Aborts `run`: the first abort stands. In the same transaction, every approval of the
    /// run that [`ApprovalRecord::falls_with_its_run`] (pending, or approved with its operation
    /// still `awaiting_approval` under it) is rejected with [`ApprovalRecord::run_aborted`] at
    /// `now_ms`, its operation `rejected`; this is done at every call, so an abort stored again
    /// also rejects an approval asked since. Answers the abort that stands and the approvals
    /// rejected now ([`AbortedRun`]).
    async fn abort_run(
        &self,
        run: RunKey<'_>,
        abort: &RunAbort,
        now_ms: i64,
    ) -> Result<AbortedRun, StoreError>;

    /// The record of `run`, if it has one.
    async fn run(&self, run: RunKey<'_>) -> Result<Option<RunRecord>, StoreError>;

    /// Decides on an approval, atomically, following [`ApprovalRecord::decide_step`]:
    ///
    /// - [`DecideStep::Apply`]: appends the decision; approve makes the approval `approved`
    ///   (its operation stays `awaiting_approval` until a claim runs it); reject makes the
    ///   approval and its operation `rejected`. Answers [`Decided::Applied`];
    /// - [`DecideStep::Expire`]: stores the expiry ([`ApprovalRecord::expiry`]) as
    ///   [`OperationStore::expire_approvals`] would, and answers [`Refusal::Expired`] with the
    ///   approval after it;
    /// - [`DecideStep::Refuse`]: changes nothing; the approval is given back unless the refusal
    ///   is [`Refusal::NotFound`] (no approval with this id, or one of another tenant).
    async fn decide(&self, request: DecideRequest<'_>) -> Result<Decided, StoreError>;

    /// The approval `id`, of whichever tenant: the caller checks the tenant before showing it.
    async fn approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError>;

    /// The approvals `query` admits, oldest first (by creation, then id), at most `query.limit`
    /// (0: all).
    async fn list_approvals(
        &self,
        query: ApprovalQuery<'_>,
    ) -> Result<Vec<ApprovalRecord>, StoreError>;

    /// Up to `limit` approved approvals whose operation has not run yet (still
    /// `awaiting_approval` under this approval), of every tenant, oldest first: what the
    /// application's runner executes.
    async fn list_approved(&self, limit: u32) -> Result<Vec<ApprovalRecord>, StoreError>;

    /// Up to `limit` pending approvals past their expiry at `now_ms` become rejected as
    /// [`EXPIRED`] ([`ApprovalRecord::expiry`]), their operations `rejected`. Answers them after
    /// the change, oldest first.
    async fn expire_approvals(
        &self,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<ApprovalRecord>, StoreError>;

    /// An approved operation that failed its revalidation: `processing` (under `owner.attempt`)
    /// → `rejected`, and its approval → `rejected` with `decision` appended. Answers the
    /// approval after the change. [`StoreError::LostClaim`] when the record is no longer
    /// `processing` under `owner.attempt`, or has no approval.
    async fn reject_claimed(
        &self,
        owner: &ClaimToken,
        decision: &Decision,
        now_ms: i64,
    ) -> Result<ApprovalRecord, StoreError>;

    /// The operations `query` admits, oldest first (by creation, then tenant and key), at most
    /// `query.limit` (0: all).
    async fn list_operations(
        &self,
        query: OperationQuery<'_>,
    ) -> Result<Vec<OperationRecord>, StoreError>;

    /// Opens a transaction and claims `request.key` inside it, following the rules of
    /// [`OperationStore::claim`]. An acquired claim answers [`Begun::Open`] with the transaction
    /// still open, the record `processing` inside it (so a concurrent claim of the key waits for
    /// it, or sees it as soon as it commits); every other answer commits what the claim changed
    /// and answers [`Begun::Settled`]. On SQLite the transaction holds the store's one writer
    /// until it ends.
    async fn begin(&self, request: ClaimRequest<'_>) -> Result<Begun, StoreError>;

    /// Leases up to `lease.limit` events of `lease.tools`, oldest first: `pending` ones due at
    /// `lease.now_ms`, and `leased` ones whose lease ended (their worker crashed or stalled;
    /// [`LeasedEvent::taken_over`], and the event becomes
    /// [`maybe_applied`](OutboxEvent::maybe_applied)). Each becomes `leased` by `lease.worker`
    /// until `lease.lease_until_ms()`, its attempt + 1. Concurrent workers never lease the same event
    /// twice (PostgreSQL: `FOR UPDATE SKIP LOCKED`; SQLite: one writer).
    async fn lease_events(&self, lease: EventLease<'_>) -> Result<Vec<LeasedEvent>, StoreError>;

    /// Records what the delivery of the event of `(tenant, key)` under `attempt` came to (see
    /// [`DeliveryOutcome`]), with its operation, atomically. Answers the event after the
    /// change. [`StoreError::LostClaim`] when the event is no longer `leased` under `attempt`
    /// (its lease ended and another worker took it).
    async fn settle_event(
        &self,
        tenant: &str,
        key: &str,
        attempt: u32,
        outcome: DeliveryOutcome<'_>,
        now_ms: i64,
    ) -> Result<OutboxEvent, StoreError>;

    /// [`settle_event`](Self::settle_event) and the delivery's audit record `audit`, appended
    /// only when the outcome is recorded: a lost lease ([`StoreError::LostClaim`]) or a fault
    /// writes neither, and the worker appends the record of what happened apart.
    ///
    /// The default settles, then appends the record, in two transactions (a record that fails
    /// to append is logged, and the settled event stands); the stores of this workspace do both
    /// in one statement (PostgreSQL) or one transaction (SQLite).
    async fn settle_event_audited(
        &self,
        tenant: &str,
        key: &str,
        attempt: u32,
        outcome: DeliveryOutcome<'_>,
        now_ms: i64,
        audit: &AuditEntry,
    ) -> Result<OutboxEvent, StoreError> {
        let event = self
            .settle_event(tenant, key, attempt, outcome, now_ms)
            .await?;
        if let Err(err) = self.append_audit(audit).await {
            tracing::warn!(error = %err, "the audit record of a delivery could not be appended");
        }
        Ok(event)
    }

    /// An operator's resume of a `dead` event: `pending` again, due at `now_ms`, its budget
    /// counted afresh from its current attempt ([`OutboxEvent::resumed_at`]). Answers the event
    /// after the change, or `None` when `(tenant, key)` has no event; a `dead` event only is
    /// changed (any other is answered as it is).
    async fn resume_event(
        &self,
        tenant: &str,
        key: &str,
        now_ms: i64,
    ) -> Result<Option<OutboxEvent>, StoreError>;

    /// The outbox event of the operation `(tenant, key)`, if it has one.
    async fn event(&self, tenant: &str, key: &str) -> Result<Option<OutboxEvent>, StoreError>;

    /// The events `query` admits, oldest first (by creation, then tenant and key), at most
    /// `query.limit` (0: all).
    async fn list_events(&self, query: EventQuery<'_>) -> Result<Vec<OutboxEvent>, StoreError>;

    /// Begins the step `name` of the operation `owner` holds, atomically (see [`StepStart`]):
    /// a step never begun, or `failed`, becomes `started` under `owner.attempt` (a new one takes
    /// the next `seq`) and answers [`StepStart::Run`]; a `succeeded` one answers
    /// [`StepStart::Done`]; a `started` one answers [`StepStart::Unknown`] and is not changed.
    /// [`StoreError::LostClaim`] when the record is no longer `processing` under
    /// `owner.attempt`.
    async fn begin_step(
        &self,
        owner: &ClaimToken,
        name: &str,
        now_ms: i64,
    ) -> Result<StepStart, StoreError>;

    /// Records the outcome of the step `name` (`started`, or `failed` when a check found that
    /// an unknown step was not applied) of the operation `owner` holds. Same ownership rule as
    /// [`OperationStore::begin_step`].
    async fn finish_step(
        &self,
        owner: &ClaimToken,
        name: &str,
        outcome: StepOutcome<'_>,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// The step journal of `(tenant, key)`, by `seq`.
    async fn steps(&self, tenant: &str, key: &str) -> Result<Vec<StepRecord>, StoreError>;

    /// `processing` → `partial`: some steps succeeded and a later one failed. `report` (JSON
    /// text, the steps as the model reads them) becomes the record's result and `error` is
    /// appended. Same ownership rule as [`OperationStore::succeed`].
    async fn partial(
        &self,
        owner: &ClaimToken,
        report: &str,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// Appends an audit record. Answers its `seq`, greater than every earlier one's.
    async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError>;

    /// Appends `entries`, in their order, each numbered as
    /// [`append_audit`](OperationStore::append_audit) numbers one. The dispatcher hands a
    /// store the audit records of reads this way, several at once.
    ///
    /// The default appends them one at a time, so a store that fails on the way may have
    /// appended the first ones; the stores of this workspace append all of them or none, in one
    /// statement (PostgreSQL) or one transaction (SQLite).
    async fn append_audits(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        for entry in entries {
            self.append_audit(entry).await?;
        }
        Ok(())
    }

    /// The audit records `query` admits, in the order they were appended, the first
    /// `query.limit` (0: all).
    async fn audit(&self, query: AuditQuery<'_>) -> Result<Vec<AuditRecord>, StoreError>;
}
