//! [`DispatcherBuilder`]: what a [`Dispatcher`] is given before its first call, and the
//! defaults of what it is not given.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
#[cfg(feature = "test-util")]
use crate::failpoint::Failpoints;
use crate::hash_secret::HashSecret;
use crate::permissions::PermissionSource;
use crate::rate_limit::RateLimiters;
use crate::registry::Registry;
use crate::retry::RetryPolicy;
use crate::run_limits::RunLimits;
use crate::state::StateMap;
use crate::store::OperationStore;
use crate::wiring::BuildError;

use super::outage::{DEFAULT_STORE_RETRY, UnrecordedOutcomes};
use super::reach::{DEFAULT_COUNTER_WAIT, DEFAULT_STORE_WAIT};
use super::{Dispatcher, Inner};

/// The deadline of one attempt when a tool declares no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an approval waits for a decision before it is rejected as expired, when neither the
/// tool (`approval_ttl`) nor the dispatcher ([`DispatcherBuilder::approval_ttl`]) says: 24 hours.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(24 * 60 * 60);

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
    store_wait: Duration,
    counter_wait: Duration,
    seed: u64,
    run_limits: RunLimits,
    spawn_calls: bool,
    approval_ttl: Duration,
    permission_source: Option<Arc<dyn PermissionSource>>,
    hash_secret: Option<HashSecret>,
    #[cfg(feature = "test-util")]
    failpoints: Option<Arc<dyn Failpoints>>,
}

impl std::fmt::Debug for DispatcherBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DispatcherBuilder").finish_non_exhaustive()
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
            store_wait: DEFAULT_STORE_WAIT,
            counter_wait: DEFAULT_COUNTER_WAIT,
            seed: SystemClock.now_ms().unsigned_abs(),
            run_limits: RunLimits::DEFAULT,
            spawn_calls: true,
            approval_ttl: DEFAULT_APPROVAL_TTL,
            permission_source: None,
            hash_secret: None,
            #[cfg(feature = "test-util")]
            failpoints: None,
        }
    }
}

impl DispatcherBuilder {
    /// How long an approval may wait for a decision when its tool declares no `approval_ttl`;
    /// afterwards it is rejected as expired. Default [`DEFAULT_APPROVAL_TTL`].
    pub fn approval_ttl(mut self, ttl: Duration) -> Self {
        self.approval_ttl = ttl;
        self
    }

    /// Where the permissions a requester holds now come from, checked again before an approved
    /// operation runs. Without one, the permissions recorded with the approval are used.
    pub fn permission_source(mut self, source: impl PermissionSource) -> Self {
        self.permission_source = Some(Arc::new(source));
        self
    }

    /// The secret that keys the hash of every request (the arguments of a call, as the store
    /// keeps it to tell a replay from a conflict, and as repeat detection notes a failed call),
    /// so that nobody without it can recover an argument, a `#[sensitive]` one included, from a
    /// stored or printed hash by hashing guesses. Hold it outside the store: for example read it
    /// with [`HashSecret::from_env`] (`TOOLGATE_HASH_SECRET`, or the file
    /// `TOOLGATE_HASH_SECRET_FILE` names).
    ///
    /// Keep it stable across restarts and processes sharing a store: a record hashed under
    /// another secret no longer matches its replays (they answer `conflict` until it expires).
    /// Records stored before hashes were keyed keep matching theirs.
    ///
    /// Default [`HashSecret::local_default`], for local use: public, so it protects nothing,
    /// and a dispatcher with a store built with it logs a warning once a process.
    ///
    /// ```
    /// use toolgate::{Dispatcher, idempotency::HashSecret, Registry};
    ///
    /// let secret = HashSecret::new("a secret of at least thirty-two bytes, kept out of the store")
    ///     .unwrap();
    /// let dispatcher = Dispatcher::builder(Registry::new()).hash_secret(secret).build();
    /// ```
    pub fn hash_secret(mut self, secret: HashSecret) -> Self {
        self.hash_secret = Some(secret);
        self
    }

    /// Gives tools a value they reach with [`Ctx::state`](crate::Ctx::state).
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(value);
        self
    }

    /// Gives tools the value behind an `Arc` the application already holds, as
    /// [`state`](Self::state) gives an owned one: tools reach the very value the application
    /// keeps (not a copy), as a `T` with [`Ctx::state`](crate::Ctx::state) or a
    /// [`State<T>`](crate::State) parameter.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use toolgate::prelude::*;
    ///
    /// struct Counter {
    ///     visits: AtomicU32,
    /// }
    ///
    /// /// Count a visit.
    /// #[tool]
    /// async fn visit(counter: State<Counter>) -> Result<u32, ToolError> {
    ///     Ok(counter.visits.fetch_add(1, Ordering::SeqCst) + 1)
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let counter = Arc::new(Counter { visits: AtomicU32::new(0) });
    /// let mut registry = Registry::new();
    /// registry.register::<visit>().unwrap();
    /// let dispatcher = Dispatcher::builder(registry)
    ///     .state_shared(counter.clone())
    ///     .build();
    /// let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    /// let call = ToolCall::new("call_1", "visit", serde_json::json!({}));
    /// dispatcher.dispatch(&session, call).await.unwrap();
    /// // The application's own handle sees the tool's visit.
    /// assert_eq!(counter.visits.load(Ordering::SeqCst), 1);
    /// # });
    /// ```
    pub fn state_shared<T: Send + Sync + 'static>(mut self, value: Arc<T>) -> Self {
        self.state.insert_shared(value);
        self
    }

    /// The deadline for tools that declare no `timeout` (default [`DEFAULT_TIMEOUT`]).
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// The store that records write and destructive operations (required for them:
    /// [`try_build`](Self::try_build) refuses a registry holding one when no store is given). An
    /// `Arc<dyn OperationStore>` (or an `Arc` of any store) is a store too, for a caller that
    /// keeps a handle on it.
    pub fn store(mut self, store: impl OperationStore) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// The clock for leases, stored times and the refill of rate limits (default
    /// [`SystemClock`]).
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
    /// recording an outcome (default [`DEFAULT_STORE_RETRY`]), within the
    /// [`store_wait`](Self::store_wait) and the tool's deadline. `max_attempts` of 1 tries
    /// once.
    pub fn store_retry(mut self, policy: RetryPolicy) -> Self {
        self.store_retry = RetryPolicy {
            max_attempts: policy.max_attempts.max(1),
            ..policy
        };
        self
    }

    /// How long a call waits, in all, for an operation store that cannot be reached (default
    /// [`DEFAULT_STORE_WAIT`], 5 s; never longer than the tool's deadline). A write's wait
    /// counts the run's counters at the start of its turn, its look-up before a business check,
    /// its claim's tries and the backoffs between them: a try still waiting at the end is cut,
    /// and the call answers `unavailable` (nothing ran). Recording an outcome after the tool
    /// ran waits as long again, then keeps the outcome in this process (see [`Dispatcher`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolgate::prelude::*;
    ///
    /// let dispatcher = Dispatcher::builder(Registry::new())
    ///     .store_wait(Duration::from_secs(2))
    ///     .build();
    /// # let _ = dispatcher;
    /// ```
    pub fn store_wait(mut self, wait: Duration) -> Self {
        self.store_wait = wait;
        self
    }

    /// How long the run's counters wait for the operation store before the session counts in
    /// its place (default [`DEFAULT_COUNTER_WAIT`], 250 ms). The session mirrors every count
    /// the store answers, so a run that one session drives keeps its limits exactly; a run that
    /// several processes share counts only this session's calls while the store does not
    /// answer. A read waits for the store no longer than this, and not at all once the store is
    /// known to be out of reach. A longer wait trades a read's speed during an outage for
    /// counts that every process of a shared run sees at once.
    pub fn counter_wait(mut self, wait: Duration) -> Self {
        self.counter_wait = wait;
        self
    }

    /// The limits of every run (default [`RunLimits::DEFAULT`]); a session may carry its own
    /// ([`Session::with_limits`](crate::Session::with_limits)). With a [`store`](Self::store),
    /// a run's counters live in it, so a restarted process keeps them, and the session mirrors
    /// them, standing in while the store does not answer (see
    /// [`counter_wait`](Self::counter_wait)); without one they live in the session.
    pub fn run_limits(mut self, limits: RunLimits) -> Self {
        self.run_limits = limits;
        self
    }

    /// Whether the calls of a turn run on tasks of their own (default `true`): then a tool body
    /// that blocks its thread or burns CPU does not stall its siblings on a multi-threaded
    /// runtime, and a write in flight runs to its end even if the turn's future is dropped. Each
    /// task costs a spawn and a few reference counts per call; with `false` the calls of a turn
    /// are polled together on the caller's task. A turn of one call never spawns.
    pub fn spawn_calls(mut self, spawn: bool) -> Self {
        self.spawn_calls = spawn;
        self
    }

    /// The seed of the backoff jitter, for reproducible runs (default: drawn at start).
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Hooks called at each step of a write, for crash tests (see
    /// [`Failpoints`](crate::dispatch::Failpoints)). Only with the `test-util` feature.
    #[cfg(feature = "test-util")]
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
        let rate_limits = RateLimiters::new(&self.registry, self.clock.clone());
        let hash_secret = self.hash_secret.unwrap_or_else(HashSecret::local_default);
        if self.store.is_some() {
            hash_secret.warn_if_local_default();
        }
        Ok(Dispatcher {
            inner: Arc::new(Inner {
                registry: self.registry,
                state: Arc::new(self.state),
                default_timeout: self.default_timeout,
                store: self.store,
                clock: self.clock,
                in_progress_wait: self.in_progress_wait,
                store_retry: self.store_retry,
                store_wait: self.store_wait,
                counter_wait: self.counter_wait.min(self.store_wait),
                seed: self.seed,
                run_limits: self.run_limits,
                spawn_calls: self.spawn_calls,
                approval_ttl: self.approval_ttl,
                permission_source: self.permission_source,
                hash_secret,
                #[cfg(feature = "test-util")]
                failpoints: self.failpoints,
                unrecorded: UnrecordedOutcomes::default(),
                kept_audit: Default::default(),
                read_audit: Default::default(),
                reach: Default::default(),
                rate_limits,
            }),
        })
    }
}
