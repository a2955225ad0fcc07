//! The outbox worker: leases due events, delivers each through its tool's handler with the
//! operation's key, records the outcome, retries with backoff and full jitter, and dead-letters
//! after its budget.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::clock::Clock;
use crate::error::ToolError;
use crate::retry::RetrySpec;
use crate::store::{OperationStore, OutboxEvent, StoreError};
use crate::wiring::BuildError;

/// Delivers the events of one outbox tool to its provider.
///
/// `deliver` gets the event: its `payload` (what the tool enqueued) and its `key`, the
/// operation's idempotency key, to hand to the provider. Answer the provider's result, or an
/// error whose kind says what is known:
///
/// - `unavailable`, `rate_limited`, `timeout` (before anything was sent): not applied; retried
///   with backoff until the worker's budget is spent, then dead-lettered;
/// - `outcome_unknown` (sent, no answer): retried with the same key when the provider honours
///   it ([`Deliver::honours_key`]); otherwise the event becomes `unknown` and its operation
///   `outcome_unknown`, for the [`Reconciler`](crate::Reconciler) and the tool's reconcile hook;
/// - any other kind (`refused`, `invalid_arguments`, `not_found`, `internal`, …): not applied,
///   and trying again will not help: dead-lettered at once, with the error kept.
///
/// A closure `Fn(OutboxEvent) -> impl Future<Output = Result<Value, ToolError>>` is a handler
/// whose provider does not honour the key.
#[async_trait]
pub trait Deliver: Send + Sync + 'static {
    /// Delivers `event` to the provider.
    async fn deliver(&self, event: &OutboxEvent) -> Result<Value, ToolError>;

    /// Whether the provider applies one key once, so that a delivery whose outcome is unknown
    /// (or whose worker crashed mid-delivery) may be sent again with the same key. Default:
    /// `false`.
    fn honours_key(&self) -> bool {
        false
    }
}

#[async_trait]
impl<F, Fut> Deliver for F
where
    F: Fn(OutboxEvent) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    async fn deliver(&self, event: &OutboxEvent) -> Result<Value, ToolError> {
        (self)(event.clone()).await
    }
}

/// What a worker's pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeliveryReport {
    /// Events delivered: the provider applied them, and their operations are `succeeded`.
    pub delivered: u32,
    /// Events that failed and wait for their backoff, `pending` again.
    pub retrying: u32,
    /// Events dead-lettered: their budget is spent or the provider refused them for good.
    pub dead: u32,
    /// Events whose delivery's outcome is unknown: their operations are `outcome_unknown`.
    pub unknown: u32,
    /// Events whose lease ended before their outcome could be recorded (another worker took
    /// them): nothing was recorded by this worker.
    pub lost: u32,
}

/// Delivers the outbox's events. Run as many as you like, on as many machines: the store leases
/// each event to one worker at a time, and a worker that dies loses its lease.
///
/// ```no_run
/// # async fn demo(store: std::sync::Arc<dyn toolgate::store::OperationStore>) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use toolgate::{OutboxWorker, ToolError};
/// use toolgate::store::OutboxEvent;
///
/// let worker = OutboxWorker::builder(store)
///     .name("worker-1")
///     .deliver("request_refund", |event: OutboxEvent| async move {
///         // POST the payload to the provider with `Idempotency-Key: {event.key}`.
///         Ok::<_, ToolError>(serde_json::json!({"refund_id": "re_1"}))
///     })
///     .build()?;
/// let report = worker.drain().await?;
/// println!("{} delivered, {} dead", report.delivered, report.dead);
/// // Or keep delivering, polling every second, until `shutdown` completes:
/// worker.run(Duration::from_secs(1), std::future::pending::<()>()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct OutboxWorker {
    store: Arc<dyn OperationStore>,
    handlers: Arc<HashMap<String, Arc<dyn Deliver>>>,
    name: String,
    lease: Duration,
    batch: u32,
    retry: RetrySpec,
    clock: Arc<dyn Clock>,
    seed: u64,
}

impl std::fmt::Debug for OutboxWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut tools: Vec<&str> = self.handlers.keys().map(String::as_str).collect();
        tools.sort_unstable();
        f.debug_struct("OutboxWorker")
            .field("name", &self.name)
            .field("tools", &tools)
            .field("lease", &self.lease)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

/// Builds an [`OutboxWorker`].
pub struct OutboxWorkerBuilder {
    store: Arc<dyn OperationStore>,
    handlers: HashMap<String, Arc<dyn Deliver>>,
    name: Option<String>,
    lease: Duration,
    batch: u32,
    retry: RetrySpec,
    clock: Option<Arc<dyn Clock>>,
    seed: Option<u64>,
}

impl OutboxWorker {
    /// A builder of a worker over `store`.
    pub fn builder(store: Arc<dyn OperationStore>) -> OutboxWorkerBuilder {
        OutboxWorkerBuilder {
            store,
            handlers: HashMap::new(),
            name: None,
            lease: Duration::from_secs(30),
            batch: 16,
            retry: RetrySpec::new(),
            clock: None,
            seed: None,
        }
    }

    /// The worker's name, kept on the events it leases.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// One pass: leases up to the batch size of due events (and events whose worker's lease
    /// ended) and delivers each.
    pub async fn run_once(&self) -> Result<DeliveryReport, StoreError> {
        let _ = (
            &self.store,
            &self.handlers,
            &self.retry,
            &self.clock,
            self.seed,
        );
        unimplemented!("the worker's pass")
    }

    /// Passes until one leases nothing: every event due now is delivered, waiting for its
    /// backoff, dead or unknown. Answers the sum of the passes.
    pub async fn drain(&self) -> Result<DeliveryReport, StoreError> {
        unimplemented!("drain")
    }

    /// Delivers until `shutdown` completes, draining every `poll`. A store error is logged and
    /// the next poll tries again.
    pub async fn run(
        &self,
        poll: Duration,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), StoreError> {
        let _ = (poll, shutdown);
        unimplemented!("run")
    }
}

impl OutboxWorkerBuilder {
    /// Delivers the events of the outbox tool `tool` (its wire name) with `handler`. A worker
    /// leases only the events of the tools it has a handler for.
    pub fn deliver(mut self, tool: impl Into<String>, handler: impl Deliver) -> Self {
        self.handlers.insert(tool.into(), Arc::new(handler));
        self
    }

    /// The worker's name, kept on the events it leases (default: `worker-` and a number unique
    /// in the process).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// How long a lease lasts (default 30 s): longer than a delivery takes, since an event whose
    /// lease ends is leased again by another worker.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How many events one pass leases (default 16).
    pub fn batch(mut self, batch: u32) -> Self {
        self.batch = batch;
        self
    }

    /// The delivery budget and backoff: `max_attempts` deliveries (default 5) with exponential
    /// backoff from `base` (1 s) to `max` (60 s) and full jitter; then the event is dead.
    pub fn retry(mut self, retry: RetrySpec) -> Self {
        self.retry = retry;
        self
    }

    /// The clock that says when events are due and leases end (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The seed of the backoff's jitter (default: from the worker's name).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The worker. [`BuildError::NoHandlers`] when it was given no handler.
    pub fn build(self) -> Result<OutboxWorker, BuildError> {
        let _ = (self.name, self.clock, self.seed);
        unimplemented!("build")
    }
}
