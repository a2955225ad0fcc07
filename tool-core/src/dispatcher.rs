//! The pipeline every call goes through: look up, validate, authorise, execute under a deadline,
//! and one result per call id.
//!
//! The public face and the read path live here; the write path (`write`), the attempts and
//! retries (`attempts`), the answers to a record already under a key (`existing`), a store that
//! cannot be reached (`outage`), how attempts end (`failure`) and panics (`unwind`) in files of
//! their own.

mod attempts;
mod existing;
mod failure;
mod outage;
mod unwind;
mod write;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::join_all;
use tracing::Instrument;

use crate::auth::Session;
use serde_json::Value;

use crate::call::{Arguments, CallReport, MalformedCall, ToolCall, parse_checked};
use crate::call_ids::{self, Split};
use crate::clock::{Clock, SystemClock};
use crate::ctx::Ctx;
use crate::descriptor::ToolDescriptor;
use crate::error::{ErrorClass, RunAborted, ToolError};
use crate::failpoint::Failpoints;
use crate::registry::{RegisteredTool, Registry};
use crate::result::CallResult;
use crate::retry::RetryPolicy;
use crate::schema::normalize_numbers;
use crate::state::StateMap;
use crate::store::OperationStore;
use crate::validate::invalid_arguments;
use crate::wiring::BuildError;
use failure::Failure;

use attempts::Input;
pub use outage::DEFAULT_STORE_RETRY;
use outage::UnrecordedOutcomes;

/// The deadline of one attempt when a tool declares no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the calls a model emits against a [`Registry`].
///
/// Runs DESIGN §3 steps 1–4 and 6–10: look-up, validation, authorisation from the session; for
/// writes, the idempotency key claimed in the [`OperationStore`] (a duplicate answers the stored
/// outcome as a replay); execution under the tool's deadline with retries below the model; the
/// outcome recorded; the result object. Approvals (step 7), business-invariant hooks (step 5) and
/// budgets come with the releases that the descriptor fields name.
///
/// A tool that panics affects its own call only: a read answers `internal`, a write (which may
/// have acted) becomes `outcome_unknown` for the reconciler to settle; a panic is never retried,
/// and its message goes to the trace (an error event in the call's span), never to the model.
///
/// When the operation store cannot be reached
/// ([`StoreError::Unreachable`](crate::store::StoreError::Unreachable)), a claim is tried again
/// below the model under [`DispatcherBuilder::store_retry`] (default [`DEFAULT_STORE_RETRY`]),
/// no try starting later than the tool's deadline after the first failure, then answered
/// [`ErrorKind::Unavailable`] (the model reads `retry_budget_exhausted`): the store could not be
/// reached, nothing was run. An outcome that cannot be recorded after the tool ran is tried
/// again the same way; if it still does not land, the model reads `outcome_unknown` (the tool's
/// own words for an unknown outcome; "it ran, and may have acted" for a result) and the
/// dispatcher keeps the outcome in memory, writing it before the next claim of the same key and
/// at the start of every [`Reconciler`](crate::Reconciler) pass
/// ([`Dispatcher::record_unrecorded`]); a duplicate of it is answered `outcome_unknown`, never
/// "running". `in_progress` answers only a `processing` record this dispatcher does not hold, in
/// words that say its worker may be running it or may have run it without recording the outcome
/// yet.
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
    seed: u64,
    failpoints: Option<Arc<dyn Failpoints>>,
    /// Outcomes of writes this dispatcher ran and could not record yet (see `outage`).
    unrecorded: UnrecordedOutcomes,
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

/// How long a duplicate of a running write waits for its outcome before answering
/// `in_progress`.
pub const DEFAULT_IN_PROGRESS_WAIT: Duration = Duration::from_secs(2);

/// Configures a [`Dispatcher`].
pub struct DispatcherBuilder {
    registry: Registry,
    state: StateMap,
    default_timeout: Duration,
    store: Option<Arc<dyn OperationStore>>,
    clock: Arc<dyn Clock>,
    in_progress_wait: Duration,
    store_retry: RetryPolicy,
    seed: u64,
    failpoints: Option<Arc<dyn Failpoints>>,
}

impl std::fmt::Debug for DispatcherBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DispatcherBuilder").finish_non_exhaustive()
    }
}

impl DispatcherBuilder {
    /// Gives tools a value they reach with [`Ctx::state`].
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(value);
        self
    }

    /// The deadline for tools that declare no `timeout` (default [`DEFAULT_TIMEOUT`]).
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// The store that records write and destructive operations (required for them:
    /// [`try_build`](Self::try_build) refuses a registry holding one when no store is given).
    pub fn store(mut self, store: Arc<dyn OperationStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The clock for leases and stored times (default [`SystemClock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How long a duplicate of a running write waits for its outcome (default
    /// [`DEFAULT_IN_PROGRESS_WAIT`]). When that call fails (nothing was applied) or its record
    /// is purged meanwhile, the duplicate claims the key itself and runs.
    pub fn in_progress_wait(mut self, wait: Duration) -> Self {
        self.in_progress_wait = wait;
        self
    }

    /// How a store that cannot be reached is tried again below the model, for a claim and for
    /// recording an outcome (default [`DEFAULT_STORE_RETRY`]); no try starts later than the
    /// tool's deadline after the first failure. `max_attempts` of 1 tries once.
    pub fn store_retry(mut self, policy: RetryPolicy) -> Self {
        self.store_retry = RetryPolicy {
            max_attempts: policy.max_attempts.max(1),
            ..policy
        };
        self
    }

    /// The seed of the backoff jitter, for reproducible runs (default: drawn at start).
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Hooks called at each step of a write, for crash tests (see [`Failpoints`]).
    pub fn failpoints(mut self, failpoints: Arc<dyn Failpoints>) -> Self {
        self.failpoints = Some(failpoints);
        self
    }

    /// The dispatcher.
    ///
    /// # Panics
    ///
    /// When the wiring is wrong, with the message of the [`BuildError`] that
    /// [`try_build`](Self::try_build) returns.
    pub fn build(self) -> Dispatcher {
        match self.try_build() {
            Ok(dispatcher) => dispatcher,
            Err(err) => panic!("{err}"),
        }
    }

    /// The dispatcher, or the first wiring mistake: a write or destructive tool without a
    /// [`store`](Self::store), or a tool taking a [`State<T>`](crate::State) whose `T` was not
    /// given with [`state`](Self::state).
    pub fn try_build(self) -> Result<Dispatcher, BuildError> {
        crate::wiring::check(&self.registry, self.store.is_some(), &self.state)?;
        Ok(Dispatcher {
            inner: Arc::new(Inner {
                registry: self.registry,
                state: Arc::new(self.state),
                default_timeout: self.default_timeout,
                store: self.store,
                clock: self.clock,
                in_progress_wait: self.in_progress_wait,
                store_retry: self.store_retry,
                seed: self.seed,
                failpoints: self.failpoints,
                unrecorded: UnrecordedOutcomes::default(),
            }),
        })
    }
}

impl Dispatcher {
    /// Starts configuring a dispatcher for `registry`.
    pub fn builder(registry: Registry) -> DispatcherBuilder {
        DispatcherBuilder {
            registry,
            state: StateMap::default(),
            default_timeout: DEFAULT_TIMEOUT,
            store: None,
            clock: Arc::new(SystemClock),
            in_progress_wait: DEFAULT_IN_PROGRESS_WAIT,
            store_retry: DEFAULT_STORE_RETRY,
            seed: SystemClock.now_ms().unsigned_abs(),
            failpoints: None,
        }
    }

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

    /// Runs every call of one model turn concurrently; one report per call id, in the order
    /// given.
    ///
    /// Each call id gets exactly one report. When several calls of the turn share an id, none
    /// of them runs: a result could not be matched to one of them. That id gets one report, at
    /// the place of its first call, an `invalid_arguments` error saying so; the other calls of
    /// the turn run as usual. (The provider formats give a call that came without an id one
    /// that no other call of its turn has, so a shared id is always the model's.)
    ///
    /// If any call aborts the run, the turn answers `Err` and the session stays aborted.
    ///
    /// ```
    /// use toolgate::prelude::*;
    ///
    /// /// Look up an order by its id.
    /// #[tool]
    /// async fn get_order(order_id: String) -> Result<String, ToolError> {
    ///     Ok(format!("{order_id}: paid"))
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let mut registry = Registry::new();
    /// registry.register::<get_order>().unwrap();
    /// let dispatcher = Dispatcher::builder(registry).build();
    /// let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    /// let call = |id: &str, order: &str| {
    ///     ToolCall::new(id, "get_order", serde_json::json!({"order_id": order}))
    /// };
    /// let turn = vec![call("c1", "ORD-1"), call("c2", "ORD-2"), call("c1", "ORD-3")];
    /// let reports = dispatcher.dispatch_turn(&session, turn).await.unwrap();
    /// assert_eq!(reports.len(), 2);
    /// assert_eq!(reports[0].call_id, "c1");
    /// assert_eq!(reports[0].result.error.as_ref().unwrap().kind, "invalid_arguments");
    /// assert_eq!(reports[1].call_id, "c2");
    /// assert_eq!(reports[1].result.to_json()["data"], "ORD-2: paid");
    /// # });
    /// ```
    pub async fn dispatch_turn(
        &self,
        session: &Session,
        calls: Vec<ToolCall>,
    ) -> Result<Vec<CallReport>, RunAborted> {
        if calls.len() == 1 {
            // The common turn: one call, no need to join.
            let call = calls.into_iter().next().expect("one call");
            return Ok(vec![self.dispatch(session, call).await?]);
        }
        let Split { runs, answered } = match call_ids::split_shared(calls) {
            Ok(split) => split,
            Err(calls) => {
                let reports =
                    join_all(calls.into_iter().map(|call| self.dispatch(session, call))).await;
                return reports.into_iter().collect();
            }
        };
        if let Some(aborted) = session.aborted() {
            return Err(aborted.clone());
        }
        let ran = join_all(
            runs.into_iter()
                .map(|(place, call)| async move { (place, self.dispatch(session, call).await) }),
        )
        .await;
        let mut reports = answered;
        for (place, report) in ran {
            reports.push((place, report?));
        }
        reports.sort_by_key(|(place, _)| *place);
        Ok(reports.into_iter().map(|(_, report)| report).collect())
    }

    /// Runs one call through the pipeline. `Err` means the run is aborted (a missing permission,
    /// revoked credentials, a policy violation); every other outcome is a report for the model.
    pub async fn dispatch(
        &self,
        session: &Session,
        call: ToolCall,
    ) -> Result<CallReport, RunAborted> {
        if let Some(aborted) = session.aborted() {
            return Err(aborted.clone());
        }
        let ToolCall {
            id,
            name,
            arguments,
        } = call;
        let span = tracing::info_span!(
            "execute_tool",
            otel.name = %format_args!("execute_tool {name}"),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %name,
            gen_ai.tool.call.id = %id,
            gen_ai.tool.type = "function",
            toolgate.status = tracing::field::Empty,
        );
        // Entering a span on each poll is work for nothing when no one can see it: no
        // subscriber wants it, and `log` (which tracing may forward spans to) is off. The call's
        // future is made in each branch, so that this one holds one of them, not both.
        let (id, outcome) = if span.is_disabled() && log::max_level() < log::LevelFilter::Info {
            self.run(session, id, &name, arguments).await
        } else {
            self.run(session, id, &name, arguments)
                .instrument(span.clone())
                .await
        };
        let result = match outcome {
            Ok(result) => result,
            Err(err) if err.class() == ErrorClass::Abort => {
                span.record("toolgate.status", "run_aborted");
                return Err(session.abort(RunAborted::from_error(&err)));
            }
            Err(err) => CallResult::from_error(&err),
        };
        if !span.is_disabled() {
            span.record("toolgate.status", tracing::field::debug(result.status));
        }
        Ok(CallReport {
            call_id: id,
            tool: name,
            result,
        })
    }

    /// The call, inside its span: steps 1 to 4, then the attempts of a read or the write path.
    /// The call id moves into the tool's context and back out, uncopied.
    async fn run(
        &self,
        session: &Session,
        id: String,
        name: &str,
        arguments: Result<Arguments, MalformedCall>,
    ) -> (String, Result<CallResult, ToolError>) {
        let (registered, arguments) = match self.admit(name, arguments) {
            Ok(admitted) => admitted,
            Err(err) => return (id, Err(err)),
        };
        if registered.descriptor().side_effect.is_read() {
            let ctx = self.ctx(session, id, registered);
            let outcome = self.read(session, registered, &ctx, arguments).await;
            return (ctx.into_call_id(), outcome);
        }
        let args = self
            .validated(registered, arguments.into_value())
            .and_then(|args| permitted(session, registered.descriptor()).map(|()| args));
        match args {
            // Boxed: the write path (store round trips, replays, retries) would otherwise set
            // the size of every call's future, reads included.
            Ok(args) => Box::pin(self.write(session, id, registered, args)).await,
            Err(err) => (id, Err(err)),
        }
    }

    /// Step 1, and the arguments readable: the tool looked up, or what the model must fix.
    fn admit(
        &self,
        name: &str,
        arguments: Result<Arguments, MalformedCall>,
    ) -> Result<(&RegisteredTool, Arguments), ToolError> {
        if let (true, Err(malformed)) = (name.is_empty(), &arguments) {
            // A call the format could not read at all: say what was wrong with it.
            return Err(ToolError::invalid_arguments(malformed.what.clone())
                .why(malformed.why.clone())
                .next("call one tool by its name, with its arguments as one JSON object"));
        }
        let registered = self.lookup(name)?;
        match arguments {
            Ok(arguments) => Ok((registered, arguments)),
            Err(malformed) => Err(ToolError::invalid_arguments(malformed.what)
                .why(malformed.why)
                .next(format!(
                    "call {} again with its arguments as one JSON object",
                    registered.descriptor().name
                ))),
        }
    }

    /// Step 2 on a tree: the arguments validated against the schema.
    fn validated(&self, registered: &RegisteredTool, mut args: Value) -> Result<Value, ToolError> {
        normalize_numbers(&mut args);
        let violations = registered.validator().violations_if_invalid(&args);
        if violations.is_empty() {
            Ok(args)
        } else {
            Err(invalid_arguments(registered.descriptor().name, &violations))
        }
    }

    /// Steps 2 to 4 and 8 for a read. Arguments that arrived as text are validated as the tool's
    /// types read them, when those decide exactly as the schema would (Tool::invoke_text), with
    /// no tree; any others as a tree, against the schema.
    async fn read(
        &self,
        session: &Session,
        registered: &RegisteredTool,
        ctx: &Ctx,
        arguments: Arguments,
    ) -> Result<CallResult, ToolError> {
        let name = registered.descriptor().name;
        let text;
        let read_from_text = match arguments.into_text() {
            Ok(owned) => {
                text = owned;
                // Reading the text into the tool's parameters runs the tool's own code.
                let built = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    registered.tool().invoke_text(ctx, &text)
                }));
                match built {
                    Ok(Some(call)) => Ok((Input::Text(&text), call)),
                    Ok(None) => Err(parse_checked(&text)),
                    Err(payload) => {
                        unwind::trace(name, &*payload);
                        return Err(unwind::read_panicked(name));
                    }
                }
            }
            Err(tree) => Err(tree),
        };
        let tree;
        let (input, first) = match read_from_text {
            Ok((input, call)) => (input, Some(call)),
            Err(value) => {
                tree = self.validated(registered, value)?;
                (Input::Tree(&tree), None)
            }
        };
        permitted(session, registered.descriptor())?;
        let attempts = AssertUnwindSafe(self.attempts(registered, ctx, input, first, None));
        match attempts.catch_unwind().await {
            Ok(outcome) => outcome
                .map(CallResult::succeeded)
                .map_err(Failure::into_answer),
            Err(payload) => {
                unwind::trace(name, &*payload);
                Err(unwind::read_panicked(name))
            }
        }
    }

    fn ctx(&self, session: &Session, call_id: String, registered: &RegisteredTool) -> Ctx {
        Ctx::new(
            session.auth_arc().clone(),
            session.run_id_arc().clone(),
            call_id,
            registered.descriptor(),
            self.inner.state.clone(),
        )
    }

    fn lookup(&self, name: &str) -> Result<&RegisteredTool, ToolError> {
        self.inner.registry.get(name).ok_or_else(|| {
            let known = self.inner.registry.names().collect::<Vec<_>>().join(", ");
            ToolError::new(
                crate::error::ErrorKind::UnknownTool,
                format!("there is no tool named {}", crate::call::excerpt(name)),
            )
            .why(format!("the tools are: {known}"))
            .next(format!("call one of: {known}"))
        })
    }
}

/// Step 4: the session holds the tool's permission, if it needs one.
fn permitted(session: &Session, descriptor: &ToolDescriptor) -> Result<(), ToolError> {
    match descriptor.permission {
        Some(permission) if !session.auth().has_permission(permission) => Err(
            ToolError::permission_denied(format!("the session may not call {}", descriptor.name))
                .why(format!(
                    "user `{}` of tenant `{}` lacks the permission `{permission}`",
                    session.auth().user(),
                    session.auth().tenant()
                )),
        ),
        _ => Ok(()),
    }
}
