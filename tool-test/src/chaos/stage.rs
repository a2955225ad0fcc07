//! [`Stage`]: what a [`Story`](super::Story) is played on: the application's dispatcher, its
//! store, and the fault plan its provider sits behind.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;
use toolgate_core::Dispatcher;
use toolgate_core::dispatch::{Clock, SystemClock};
use toolgate_core::outbox::OutboxWorker;
use toolgate_core::reconcile::Reconciler;
use toolgate_core::store::{OperationStore, StoreError};

use super::FaultPlan;

type Open =
    dyn Fn() -> BoxFuture<'static, Result<Arc<dyn OperationStore>, StoreError>> + Send + Sync;
type Build = dyn Fn(Arc<dyn OperationStore>) -> Dispatcher + Send + Sync;
type SetUp = dyn Fn(Reconciler) -> Reconciler + Send + Sync;
type Worker = dyn Fn(Arc<dyn OperationStore>) -> OutboxWorker + Send + Sync;
type Act = dyn Fn(Value) -> BoxFuture<'static, Result<Value, String>> + Send + Sync;

/// What the application gives the kit to play stories on: how to open its store (again, at a
/// restart or for a second process), how to build its dispatcher on a store (its registry and
/// its state), the [`FaultPlan`] its provider sits behind (the plan of its
/// [`FaultProxy`](super::FaultProxy) or [`FaultHook`](super::FaultHook)), and how it sets up
/// its [`Reconciler`] when its tools have `reconcile` hooks.
///
/// A restart opens the store again and builds a new dispatcher on it; so does the first line
/// of a second process. Each opening must reach the same records: a SQLite file or a
/// PostgreSQL database, never a store in memory made anew.
///
/// # Examples
///
/// ```no_run
/// use std::path::PathBuf;
/// use std::sync::Arc;
/// use std::time::Duration;
/// use toolgate::prelude::*;
/// use toolgate::store::{OperationStore, SqliteStore};
/// use toolgate_test::chaos::{FaultPlan, Stage};
///
/// # fn registry() -> Registry { Registry::new() }
/// # fn stage(path: PathBuf, plan: FaultPlan) -> Stage {
/// Stage::new(
///     move || {
///         let path = path.clone();
///         async move {
///             let store = SqliteStore::open(&path).await?;
///             Ok(Arc::new(store) as Arc<dyn OperationStore>)
///         }
///     },
///     |store| Dispatcher::builder(registry()).store(store).build(),
/// )
/// .with_plan(plan)
/// .with_reconciler(|reconciler| reconciler.escalate_after(3))
/// # }
/// ```
#[derive(Clone)]
pub struct Stage {
    open: Arc<Open>,
    build: Arc<Build>,
    plan: FaultPlan,
    reconciler: Arc<SetUp>,
    worker: Option<Arc<Worker>>,
    acts: BTreeMap<String, Arc<Act>>,
    clock: Arc<dyn Clock>,
}

impl Stage {
    /// A stage whose store `open` opens (every time it is called, on the same records) and
    /// whose dispatcher `build` builds on that store. Its plan is a new [`FaultPlan`] until
    /// [`Stage::with_plan`] gives the provider's; its reconciler is [`Reconciler::new`]'s.
    pub fn new<O, F, B>(open: O, build: B) -> Stage
    where
        O: Fn() -> F + Send + Sync + 'static,
        F: Future<Output = Result<Arc<dyn OperationStore>, StoreError>> + Send + 'static,
        B: Fn(Arc<dyn OperationStore>) -> Dispatcher + Send + Sync + 'static,
    {
        Stage {
            open: Arc::new(move || Box::pin(open())),
            build: Arc::new(build),
            plan: FaultPlan::new(),
            reconciler: Arc::new(|reconciler| reconciler),
            worker: None,
            acts: BTreeMap::new(),
            clock: Arc::new(SystemClock),
        }
    }

    /// The plan the provider sits behind: the `fault` lines are planned on it, and its record
    /// of requests is [`Played::requests`](super::Played::requests).
    pub fn with_plan(mut self, plan: FaultPlan) -> Stage {
        self.plan = plan;
        self
    }

    /// How the application sets up its reconciler (its escalation, its batch), applied to
    /// [`Reconciler::new`] for every `reconcile` line and for the pass at the end.
    pub fn with_reconciler(
        mut self,
        setup: impl Fn(Reconciler) -> Reconciler + Send + Sync + 'static,
    ) -> Stage {
        self.reconciler = Arc::new(setup);
        self
    }

    /// How the application builds its outbox worker (its handlers, its retry) on a store: what
    /// a `deliver` line runs, on the current process's store. A story with a `deliver` line
    /// and no worker is not played ([`PlayError::NoWorker`](super::PlayError::NoWorker)).
    pub fn with_worker(
        mut self,
        worker: impl Fn(Arc<dyn OperationStore>) -> OutboxWorker + Send + Sync + 'static,
    ) -> Stage {
        self.worker = Some(Arc::new(worker));
        self
    }

    /// What an `act` line named `name` does: `act` is given the line's `args` and answers a
    /// value, or why it failed (which the story records, and goes on). A story with an act the
    /// stage does not have is not played ([`PlayError::NoAct`](super::PlayError::NoAct)).
    ///
    /// ```
    /// use serde_json::{Value, json};
    /// use toolgate_test::chaos::{Stage, Story};
    ///
    /// # fn with(stage: Stage) -> Stage {
    /// // Someone refunds an order at the provider by hand, outside the agent.
    /// stage.with_act("refund_by_hand", |args: Value| async move {
    ///     let order = args["order_id"].as_str().ok_or("an order_id")?.to_owned();
    ///     Ok(json!({"refunded": order}))
    /// })
    /// # }
    /// let story = Story::new().act("refund_by_hand", json!({"order_id": "ORD-1"}));
    /// ```
    pub fn with_act<F, Fut>(mut self, name: impl Into<String>, act: F) -> Stage
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, String>> + Send + 'static,
    {
        self.acts
            .insert(name.into(), Arc::new(move |args| Box::pin(act(args))));
        self
    }

    /// The clock the approvers decide by: the dispatcher's, when the application gives its
    /// dispatcher a clock of its own (the system clock otherwise).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Stage {
        self.clock = clock;
        self
    }

    /// The plan the provider sits behind.
    pub fn plan(&self) -> &FaultPlan {
        &self.plan
    }

    pub(crate) async fn open(&self) -> Result<Arc<dyn OperationStore>, StoreError> {
        (self.open)().await
    }

    pub(crate) fn build(&self, store: Arc<dyn OperationStore>) -> Dispatcher {
        (self.build)(store)
    }

    pub(crate) fn reconciler(&self, dispatcher: &Dispatcher) -> Reconciler {
        (self.reconciler)(Reconciler::new(dispatcher))
    }

    /// The outbox worker on `store`, when the stage has one.
    pub(crate) fn worker(&self, store: Arc<dyn OperationStore>) -> Option<OutboxWorker> {
        self.worker.as_ref().map(|build| build(store))
    }

    /// The act named `name`, when the stage has one.
    pub(crate) fn act(&self, name: &str) -> Option<&Act> {
        self.acts.get(name).map(|act| &**act)
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
}

impl fmt::Debug for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stage")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}
