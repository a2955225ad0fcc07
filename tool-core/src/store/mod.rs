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
mod audit;
#[cfg(feature = "test-util")]
mod memory;
mod record;
mod run;
mod shared;

use async_trait::async_trait;

pub use approval::{
    ApprovalQuery, ApprovalRecord, ApprovalStatus, DecideRequest, DecideStep, Decided, Decision,
    EXPIRED, Refusal, Requester, SYSTEM_DECIDER, Verdict,
};
pub use audit::{AuditEntry, AuditKind, AuditQuery, AuditRecord};
#[cfg(feature = "test-util")]
pub use memory::MemoryStore;
pub use record::{
    AttemptError, Claim, ClaimRequest, ClaimStep, ClaimToken, OperationQuery, OperationRecord,
    OperationState, Resolution, StoreError,
};
pub use run::{Admission, FailedCall, RunAbort, RunKey, RunRecord, TurnGrant, TurnRequest};

/// Where write operations are recorded. Object safe: the dispatcher holds an
/// `Arc<dyn OperationStore>`.
///
/// Times are milliseconds since the Unix epoch, given by the caller (the dispatcher's clock), so
/// that every store agrees on what "expired" means and tests can move time by hand.
#[async_trait]
pub trait OperationStore: Send + Sync + 'static {
    /// Claims `request.key` for `request.tenant`, atomically, following
    /// [`ClaimRequest::step`] with the record's latest approval:
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
    /// - `processing` whose lease has expired: with `request.takeover` (the tool's downstream
    ///   honours the key) takes it over, attempt + 1, [`Claim::Acquired`]; otherwise turns it
    ///   into `outcome_unknown` and answers [`Claim::Existing`] with the updated record;
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
    async fn resolve(
        &self,
        tenant: &str,
        key: &str,
        resolution: Resolution<'_>,
        now_ms: i64,
    ) -> Result<Option<OperationRecord>, StoreError>;

    /// Deletes `succeeded`, `failed` and `rejected` records last changed before `before_ms`,
    /// with their approvals. `processing`, `outcome_unknown` and `awaiting_approval` records
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

    /// Aborts `run`: the first abort stands. Answers the abort that stands.
    async fn abort_run(
        &self,
        run: RunKey<'_>,
        abort: &RunAbort,
        now_ms: i64,
    ) -> Result<RunAbort, StoreError>;

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

    /// Appends an audit record. Answers its `seq`, greater than every earlier one's.
    async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError>;

    /// The audit records `query` admits, in the order they were appended, the first
    /// `query.limit` (0: all).
    async fn audit(&self, query: AuditQuery<'_>) -> Result<Vec<AuditRecord>, StoreError>;
}
