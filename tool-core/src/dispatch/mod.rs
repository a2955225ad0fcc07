//! The pipeline every call goes through: look up, validate, authorise, execute under a deadline,
//! and one result per call id.
//!
//! This file is the public face: [`Dispatcher`]. The rest, one concept a file; the stages a
//! call goes through are types that hold what they use (`Planner`, `Attempts`, `WriteCall`,
//! `UnderClaim`), each tested in its file:
//!
//! - `batch`: [`Dispatcher::dispatch_turn`] and [`Dispatcher::dispatch`]: a turn planned,
//!   counted, its calls run concurrently, and an abort that loses nothing; each call's step (a
//!   read's, a write's) and the fate its outcome makes;
//! - `answering`: [`Dispatcher::dispatch_turn_answering`], a turn whose answers come one by one;
//! - `turn_end`: how a turn's calls end: a turn of an aborted run, an abort before any call
//!   starts, a turn its counters did not admit, the spans and audit records owed, the reports
//!   or the abort;
//! - `turn_shared`: what every call of one turn shares while it runs (the abort's signal, the
//!   run's failed calls, where each answer goes);
//! - `turn_claim`: the turn of a lone write, begun by its claim;
//! - `call_span`: the `execute_tool` span every call id answered has, and what failed in it;
//! - `plan`: `Planner`, a turn's calls before any runs (looked up, permitted, a write's key
//!   derived), and the order they run in (`Units`: writes on one resource or key in order);
//! - `ledger`: the run's counters, in the store or in the session;
//! - `repeat`: which failed calls a repeat of is refused;
//! - `builder`: [`DispatcherBuilder`] and the defaults;
//! - `admit`: the tool looked up, its arguments validated, the session's permission checked;
//! - `check`: a tool's business check;
//! - `read`: the read path;
//! - `read_audit`: the audit records of reads, written after their turn;
//! - `audit`: the audit record of every call answered;
//! - `write`: the write path: the business check, the claim of the key (`WriteCall`, a write on
//!   its way to its claim), the run under the claim;
//! - `under_claim`: `UnderClaim`, a write under its claim: its attempts, and its outcome
//!   recorded (a success, a failure, or steps done halfway) or kept until the store takes it;
//! - `held_claim`: the claim a write's attempts run under;
//! - `outbox`: the write path of an outbox tool (claim in a transaction, run once, commit);
//! - `approval`: a write over its approval threshold: its approval, its words, and the checks
//!   made again before it runs;
//! - `runner`: the runner of approved operations;
//! - `partial`: a multi-step write that ended halfway, as the model reads it;
//! - `recorded`: answering a claim that found a record under its key;
//! - `delivery_notes`: what the model reads about an outbox operation's delivery;
//! - `attempt`: `Attempts`, the attempts of one call (the tool, its context and arguments, the
//!   deadline, a write's claim, the ledger), one attempt under its deadline, and how a call's
//!   future is kept small;
//! - `retries`: the attempts after a transient fault, and when one is sent again
//!   (`Schedule::next`; which faults may be sent again is
//!   [`RetryPolicy::may_send_again`](crate::tool::RetryPolicy::may_send_again));
//! - `outage`: an operation store that cannot be reached;
//! - `reach`: how long a call waits for it, and what the dispatcher knows of its reach;
//! - `failure`: how the attempts of a call ended without a result;
//! - `unwind`: a tool that panics;
//! - `future_sizes` (a test): the size of a turn's future, bounded;
//! - `answers`: every error the dispatcher itself writes for the model.

mod admit;
mod answering;
mod answers;
mod approval;
mod attempt;
mod audit;
mod batch;
mod builder;
mod call_span;
mod check;
mod delivery_notes;
mod failure;
#[cfg(test)]
mod future_sizes;
mod held_claim;
mod ledger;
mod outage;
mod outbox;
mod partial;
mod plan;
mod reach;
mod read;
mod read_audit;
mod recorded;
mod repeat;
mod retries;
pub(crate) mod runner;
mod turn_claim;
mod turn_end;
mod turn_shared;
mod under_claim;
mod unwind;
mod write;

use std::sync::Arc;
use std::time::Duration;

use crate::ctx::Ctx;
use crate::hash_secret::HashSecret;
use crate::rate_limit::RateLimiters;
use crate::registry::{RegisteredTool, Registry};
use crate::retry::RetryPolicy;
use crate::run_limits::RunLimits;
use crate::state::StateMap;
use crate::store::OperationStore;

pub use crate::auth::{AuthContext, Session, ShownTools};
pub use crate::call::{Arguments, CallReport, MalformedCall, ToolCall};
#[cfg(feature = "test-util")]
pub use crate::clock::ManualClock;
pub use crate::clock::{Clock, SystemClock};
#[cfg(feature = "test-util")]
pub use crate::failpoint::{Failpoint, Failpoints};
pub use crate::permissions::PermissionSource;
pub use crate::result::{CallResult, DeliveryNote, Explanation, Outcome, Status};
pub use crate::turn::{TurnAnswer, TurnError};
pub use crate::wiring::BuildError;
pub use audit::KEPT_AUDIT_RECORDS;
pub use builder::{
    DEFAULT_APPROVAL_TTL, DEFAULT_IN_PROGRESS_WAIT, DEFAULT_TIMEOUT, DispatcherBuilder,
};
pub use outage::DEFAULT_STORE_RETRY;
use outage::UnrecordedOutcomes;
pub use reach::{DEFAULT_COUNTER_WAIT, DEFAULT_STORE_WAIT};

/// Runs the calls a model emits against a [`Registry`].
///
/// Each call is looked up, its arguments validated against the tool's schema, and the
/// session's permission for it checked (a missing permission aborts the run). A read then runs
/// under the tool's deadline, its transient faults retried below the model. A write or
/// destructive call first claims its operation's idempotency key in the [`OperationStore`] (a
/// duplicate answers the stored outcome, marked as a replay), runs under that claim with
/// retries only while a fault proves nothing was applied, and has its outcome recorded before
/// the model reads the result. Every call id gets exactly one result. A tool's `rate_limit`
/// refuses a tenant's calls over it (`rate_limited`, per process). A write whose amount is over
/// its tool's `approval_over` does not run: its operation is stored `awaiting_approval` with an
/// approval (the model reads `awaiting_approval` with the approval's id and expiry); once an
/// approver approves it ([`decide`](crate::approval::decide)), it runs once, at the model's next call with
/// the same arguments or at [`Dispatcher::run_approved`], whichever comes first, after the
/// checks are made again (its run not aborted, the arguments against the schema, the tool's
/// policy, the requester's permission, the business check). The abort of a run rejects its
/// approvals that have not run as `run_aborted`. Every call the dispatcher answers is appended
/// to the store's audit trail.
///
/// A tool declared `delivery = "outbox"` claims its key inside a transaction of the store, runs
/// its body once in it (no retries: its only effects are its rows and its one event), and
/// commits the record, the rows and the event together; the model reads `queued`, and an
/// [`OutboxWorker`](crate::outbox::OutboxWorker) delivers the event later. A body that fails, panics or
/// passes its deadline is rolled back: nothing remains. The steps of a write
/// ([`Ctx::step`](crate::Ctx::step)) are journaled under its claim; when one succeeded and a
/// later one failed, the call answers `partial` (the record too), and the same call again runs
/// only the steps not done.
///
/// A model turn is a batch ([`Dispatcher::dispatch_turn`]): counted against the run's
/// [`RunLimits`] (steps, tool calls, each tool's retry budget), its calls run concurrently,
/// writes on one `resource` value or key in order, and a call that aborts the run loses no
/// applied write: every call's fate reaches the application in
/// [`TurnAborted`](crate::run::TurnAborted). A call identical to one that failed earlier in the run
/// answers `repeated_call` without running.
///
/// A tool that panics affects its own call only: a read answers `internal`, a write (which may
/// have acted) becomes `outcome_unknown` for the reconciler to settle; a panic is never retried,
/// and its message goes to the trace (an error event in the call's span), never to the model.
///
/// When the operation store cannot be reached
/// ([`StoreError::Unreachable`](crate::store::StoreError::Unreachable)), a claim is tried again
/// below the model under [`DispatcherBuilder::store_retry`] (default [`DEFAULT_STORE_RETRY`]),
/// within the call's store wait ([`DispatcherBuilder::store_wait`], default
/// [`DEFAULT_STORE_WAIT`], 5 s in all), then answered
/// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable): the store could not be reached,
/// nothing was run, and the same call may succeed in a moment. The run's counters wait for the
/// store at most [`DispatcherBuilder::counter_wait`], and not at all once it is known to be out
/// of reach, so that a read, which needs no store, is answered meanwhile
/// ([`Dispatcher::dispatch_turn_answering`] hands it over before its turn's writes end). An
/// outcome that
/// cannot be recorded after the tool ran is tried again the same way; if it still does not
/// land, the model reads `outcome_unknown` (the tool's own words for an unknown outcome; "it
/// ran, and may have acted" for a result) and the dispatcher keeps the outcome in memory,
/// writing it before the next claim of the same key and at the start of every
/// [`Reconciler`](crate::reconcile::Reconciler) pass ([`Dispatcher::record_unrecorded`]); a duplicate of
/// it is answered `outcome_unknown`, never "running". `in_progress` answers only a `processing`
/// record this dispatcher does not hold, in words that say its worker may be running it or may
/// have run it without recording the outcome yet.
///
/// ```
/// use toolgate::prelude::*;
///
/// /// Look up an order by its id.
/// #[tool(permission = "orders:read")]
/// async fn get_order(order_id: String) -> Result<String, ToolError> {
///     Ok(format!("{order_id}: paid"))
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let mut registry = Registry::new();
/// registry.register::<get_order>().unwrap();
/// let dispatcher = Dispatcher::builder(registry).build();
/// let session = Session::new(AuthContext::new("acme", "agent").with_permissions(["orders:read"]), "run-1");
///
/// let call = ToolCall::new("call_1", "get_order", serde_json::json!({"order_id": "ORD-1"}));
/// let report = dispatcher.dispatch(&session, call).await.unwrap();
/// assert_eq!(report.result.to_json_string(), r#"{"status":"succeeded","replayed":false,"data":"ORD-1: paid"}"#);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct Dispatcher {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    state: Arc<StateMap>,
    default_timeout: Duration,
    store: Option<Arc<dyn OperationStore>>,
    clock: Arc<dyn Clock>,
    in_progress_wait: Duration,
    store_retry: RetryPolicy,
    /// How long a call waits for a store that cannot be reached, in all (see `reach`).
    store_wait: Duration,
    /// How long the run's counters wait for the store (see `reach`).
    counter_wait: Duration,
    seed: u64,
    run_limits: RunLimits,
    spawn_calls: bool,
    approval_ttl: Duration,
    permission_source: Option<Arc<dyn PermissionSource>>,
    /// Keys request hashes and fingerprints.
    hash_secret: HashSecret,
    #[cfg(feature = "test-util")]
    failpoints: Option<Arc<dyn Failpoints>>,
    /// Outcomes of writes this dispatcher ran and could not record yet (see `outage`).
    unrecorded: UnrecordedOutcomes,
    /// Audit records the store could not be reached to take yet (see `audit`).
    kept_audit: audit::KeptAudit,
    /// Audit records of reads that wait to be written after their turn (see `read_audit`).
    read_audit: read_audit::ReadAudit,
    /// What this dispatcher knows of the store's reach (see `reach`).
    reach: reach::Reach,
    /// The buckets of the tools' `rate_limit`s, per tenant.
    rate_limits: RateLimiters,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("registry", &self.registry)
            .field("default_timeout", &self.default_timeout)
            .field("store", &self.store.is_some())
            .finish_non_exhaustive()
    }
}

impl Dispatcher {
    /// The tools.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// The operation store, if one was given.
    pub fn store(&self) -> Option<&dyn OperationStore> {
        self.inner.store.as_deref()
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    pub(crate) fn state(&self) -> Arc<StateMap> {
        self.inner.state.clone()
    }

    pub(crate) fn default_timeout(&self) -> Duration {
        self.inner.default_timeout
    }

    /// The deadline of one attempt of `registered`.
    fn timeout_of(&self, registered: &RegisteredTool) -> Duration {
        registered
            .descriptor()
            .timeout
            .unwrap_or(self.inner.default_timeout)
    }

    /// The tool's context for one call.
    fn ctx(&self, session: &Session, call_id: &str, registered: &RegisteredTool) -> Ctx {
        self.ctx_owning(session, call_id.to_owned(), registered)
    }

    /// The tool's context for one call, holding its id (given back by
    /// [`Ctx::into_call_id`]).
    fn ctx_owning(&self, session: &Session, call_id: String, registered: &RegisteredTool) -> Ctx {
        Ctx::new(
            session.auth_arc().clone(),
            session.run_id_arc().clone(),
            call_id,
            registered.descriptor(),
            self.inner.state.clone(),
        )
    }
}
