//! The outbox worker: leases due events, delivers each through its tool's handler with the
//! operation's key, records the outcome and an audit record of the attempt, retries with backoff
//! and full jitter, and dead-letters after its budget.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::FutureExt;
use serde_json::Value;
use tracing::Instrument;

use crate::backoff::Backoff;
use crate::clock::{Clock, SystemClock};
use crate::error::{ErrorKind, ToolError};
use crate::retry::RetrySpec;
use crate::store::{
    AttemptError, DeliveryOutcome, EventLease, EventSettlement, LeasedEvent, OperationStore,
    OutboxEvent, StoreError,
};
use crate::wiring::BuildError;

use super::delivery_audit::delivery_entry;
use super::verdict::{Failure, Verdict, after_failure};

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
///   `outcome_unknown`, for the [`Reconciler`](crate::reconcile::Reconciler) and the tool's reconcile hook;
/// - any other kind (`refused`, `invalid_arguments`, `not_found`, `internal`, …): not applied,
///   and trying again will not help: dead-lettered at once, with the error kept.
///
/// An event one of whose deliveries may have been applied (an `outcome_unknown` sent again
/// with the key, or a lease taken over from a worker that stopped) is never dead-lettered:
/// where it would be, it becomes `unknown` and its operation `outcome_unknown`, for the
/// reconciler ([`OutboxEvent::maybe_applied`]).
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
    /// Events dead-lettered: their budget is spent or the provider refused them for good, and
    /// none of their deliveries may have been applied.
    pub dead: u32,
    /// Events whose delivery's outcome is unknown (this delivery's, or an earlier one's when
    /// this one stopped their delivery): their operations are `outcome_unknown`.
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
/// use toolgate::{outbox::OutboxWorker, ToolError};
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
    /// ended) and delivers each, the batch's deliveries running concurrently. A store error
    /// while leasing is answered at once; one while recording an outcome is answered after
    /// every delivery of the pass has ended (the event stays leased until its lease ends, then
    /// another pass takes it over).
    pub async fn run_once(&self) -> Result<DeliveryReport, StoreError> {
        let tools: Vec<&str> = self.handlers.keys().map(String::as_str).collect();
        let leased = self
            .store
            .lease_events(EventLease {
                worker: &self.name,
                tools: &tools,
                now_ms: self.clock.now_ms(),
                lease: self.lease,
                limit: self.batch,
            })
            .await?;
        let deliveries = leased.into_iter().map(|leased| self.deliver_one(leased));
        let mut report = DeliveryReport::default();
        let mut first_error = None;
        for settled in futures_util::future::join_all(deliveries).await {
            match settled {
                Ok(settled) => report.count(settled),
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        match first_error {
            Some(err) => Err(err),
            None => Ok(report),
        }
    }

    /// Passes until one leases nothing: every event due now is delivered, waiting for its
    /// backoff, dead or unknown. Answers the sum of the passes.
    pub async fn drain(&self) -> Result<DeliveryReport, StoreError> {
        let mut total = DeliveryReport::default();
        loop {
            let pass = self.run_once().await?;
            if pass.leased() == 0 {
                return Ok(total);
            }
            total.add(pass);
        }
    }

    /// Delivers until `shutdown` completes, draining every `poll`. A store error is logged and
    /// the next poll tries again. A drain under way when `shutdown` completes ends first, so
    /// that no event is left leased by a worker that stopped.
    pub async fn run(
        &self,
        poll: Duration,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), StoreError> {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            if let Err(err) = self.drain().await {
                tracing::warn!(error = %err, worker = self.name.as_str(), "an outbox pass failed; trying again at the next poll");
            }
            tokio::select! {
                biased;
                () = &mut shutdown => return Ok(()),
                () = tokio::time::sleep(poll) => {}
            }
        }
    }

    /// Delivers one leased event and records what it came to.
    async fn deliver_one(&self, leased: LeasedEvent) -> Result<Settled, StoreError> {
        let event = leased.event;
        let span = tracing::info_span!(
            "outbox.deliver",
            worker = self.name.as_str(),
            tool = event.tool.as_str(),
            key = event.key.as_str(),
            attempt = event.attempt,
            taken_over = leased.taken_over,
        );
        async {
            let Some(handler) = self.handlers.get(&event.tool) else {
                // Leased only for the tools it has handlers for; a store that answered another
                // is left to the lease's end.
                tracing::warn!("leased an event of a tool this worker has no handler for");
                return Ok(Settled::Lost);
            };
            let started_ms = self.clock.now_ms();
            let verdict = if leased.taken_over && !handler.honours_key() {
                // Its earlier worker stopped mid-delivery and may have sent it: never sent again
                // by a worker that cannot know.
                Verdict::Unknown(AttemptError {
                    attempt: event.attempt,
                    kind: ErrorKind::OutcomeUnknown.as_str().to_owned(),
                    what: format!(
                        "the worker that leased attempt {} stopped before recording its outcome; \
                         the provider may have applied it",
                        event.attempt.saturating_sub(1)
                    ),
                })
            } else {
                self.attempt(handler.as_ref(), &event).await
            };
            self.settle(&event, &verdict, started_ms).await
        }
        .instrument(span)
        .await
    }

    /// Calls the handler once under the lease, and says what to record.
    async fn attempt(&self, handler: &dyn Deliver, event: &OutboxEvent) -> Verdict {
        let call = AssertUnwindSafe(handler.deliver(event)).catch_unwind();
        let err = match tokio::time::timeout(self.lease, call).await {
            Ok(Ok(Ok(value))) => {
                return match serde_json::to_string(&value) {
                    Ok(text) => Verdict::Delivered(text),
                    Err(err) => Verdict::Unknown(AttemptError {
                        attempt: event.attempt,
                        kind: ErrorKind::OutcomeUnknown.as_str().to_owned(),
                        what: format!(
                            "the provider's answer was received and does not serialize to JSON: {err}"
                        ),
                    }),
                };
            }
            Ok(Ok(Err(err))) => err,
            Ok(Err(payload)) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("(a panic payload that is not text)");
                tracing::error!(panic = message, "the outbox handler panicked");
                ToolError::outcome_unknown(format!(
                    "the handler of {} panicked mid-delivery and may have sent it; its message is in the trace",
                    event.tool
                ))
            }
            Err(_elapsed) => ToolError::outcome_unknown(format!(
                "the handler of {} did not answer within the worker's lease of {:?}; it may have sent it",
                event.tool, self.lease
            )),
        };
        tracing::info!(
            kind = err.kind().as_str(),
            error = err.what(),
            "a delivery failed"
        );
        let error = AttemptError {
            attempt: event.attempt,
            kind: err.kind().as_str().to_owned(),
            what: err.what().to_owned(),
        };
        let failure = Failure {
            kind: err.kind(),
            honours_key: handler.honours_key(),
            budget_left: event.attempts_spent() < self.max_attempts(),
            maybe_applied_before: event.maybe_applied,
        };
        after_failure(failure, error)
    }

    /// Records `verdict` for `event`, with the delivery's audit record in the same write; a
    /// lease lost meanwhile is counted, not an error, and its record (`lost`, or `unrecorded`
    /// when the store failed) is appended apart.
    async fn settle(
        &self,
        event: &OutboxEvent,
        verdict: &Verdict,
        started_ms: i64,
    ) -> Result<Settled, StoreError> {
        let due_ms;
        let (outcome, settled) = match verdict {
            Verdict::Delivered(result) => (DeliveryOutcome::Delivered(result), Settled::Delivered),
            Verdict::Retry {
                error,
                maybe_applied,
            } => {
                let wait = self.backoff(event);
                let wait = i64::try_from(wait.as_millis()).unwrap_or(i64::MAX);
                due_ms = self.clock.now_ms().saturating_add(wait);
                let outcome = DeliveryOutcome::Retry {
                    error,
                    due_ms,
                    maybe_applied: *maybe_applied,
                };
                (outcome, Settled::Retrying)
            }
            Verdict::Dead(error) => (DeliveryOutcome::Dead(error), Settled::Dead),
            Verdict::Unknown(error) => (DeliveryOutcome::Unknown(error), Settled::Unknown),
        };
        let now_ms = self.clock.now_ms();
        let mut entry = delivery_entry(
            &self.name,
            event,
            verdict,
            settled.as_str(),
            started_ms,
            now_ms,
        );
        let recorded = self
            .store
            .settle_event(EventSettlement {
                tenant: &event.tenant,
                key: &event.key,
                attempt: event.attempt,
                outcome,
                now_ms,
                audit: Some(&entry),
            })
            .await;
        let answer = match recorded {
            Ok(_) => return Ok(settled),
            Err(StoreError::LostClaim { .. }) => {
                tracing::warn!("the event's lease ended before its outcome was recorded");
                Ok(Settled::Lost)
            }
            Err(err) => {
                tracing::warn!(error = %err, "the outcome of a delivery could not be recorded");
                Err(err)
            }
        };
        entry.outcome = answer
            .as_ref()
            .map_or("unrecorded", |settled| settled.as_str())
            .to_owned();
        if let Err(err) = self.store.append_audit(&entry).await {
            tracing::warn!(error = %err, "the audit record of a delivery could not be appended");
        }
        answer
    }

    /// How many deliveries an event gets between two resumes.
    fn max_attempts(&self) -> u32 {
        self.retry
            .max_attempts
            .unwrap_or(DEFAULT_MAX_ATTEMPTS)
            .max(1)
    }

    /// The wait before the next delivery of `event`: exponential in the attempts spent since
    /// its last resume, with full jitter drawn from the worker's seed, the event's key and its
    /// attempt (so two workers, or two events, do not wake together).
    fn backoff(&self, event: &OutboxEvent) -> Duration {
        let base = self.retry.base.unwrap_or(DEFAULT_BASE);
        let max = self.retry.max.unwrap_or(DEFAULT_MAX);
        let jitter = self.retry.jitter.unwrap_or(true);
        let seed = self.seed ^ fnv(&event.key) ^ u64::from(event.attempt);
        let step = event.attempts_spent().saturating_sub(1) as usize;
        Backoff::new(base, max, jitter, seed)
            .nth(step)
            .unwrap_or(max)
    }
}

/// What one delivery came to, as counted in a [`DeliveryReport`].
#[derive(Debug, Clone, Copy)]
enum Settled {
    Delivered,
    Retrying,
    Dead,
    Unknown,
    Lost,
}

impl Settled {
    /// The name of the outcome in a delivery's audit record.
    fn as_str(self) -> &'static str {
        match self {
            Settled::Delivered => "delivered",
            Settled::Retrying => "retrying",
            Settled::Dead => "dead",
            Settled::Unknown => "unknown",
            Settled::Lost => "lost",
        }
    }
}

impl DeliveryReport {
    fn count(&mut self, settled: Settled) {
        match settled {
            Settled::Delivered => self.delivered += 1,
            Settled::Retrying => self.retrying += 1,
            Settled::Dead => self.dead += 1,
            Settled::Unknown => self.unknown += 1,
            Settled::Lost => self.lost += 1,
        }
    }

    fn add(&mut self, other: DeliveryReport) {
        self.delivered += other.delivered;
        self.retrying += other.retrying;
        self.dead += other.dead;
        self.unknown += other.unknown;
        self.lost += other.lost;
    }

    /// How many events the pass leased.
    fn leased(&self) -> u32 {
        self.delivered + self.retrying + self.dead + self.unknown + self.lost
    }
}

/// Deliveries an event gets between two resumes, by default.
const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// The first backoff, by default.
const DEFAULT_BASE: Duration = Duration::from_secs(1);
/// The largest backoff, by default.
const DEFAULT_MAX: Duration = Duration::from_secs(60);

/// Numbers the workers of the process that were given no name.
static NEXT_WORKER: AtomicU64 = AtomicU64::new(1);

/// FNV-1a of `text`: a stable seed from a name or a key.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
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
        if self.handlers.is_empty() {
            return Err(BuildError::NoHandlers);
        }
        let name = self
            .name
            .unwrap_or_else(|| format!("worker-{}", NEXT_WORKER.fetch_add(1, Ordering::Relaxed)));
        let seed = self.seed.unwrap_or_else(|| fnv(&name));
        Ok(OutboxWorker {
            store: self.store,
            handlers: Arc::new(self.handlers),
            name,
            lease: self.lease,
            batch: self.batch.max(1),
            retry: self.retry,
            clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
            seed,
        })
    }
}
