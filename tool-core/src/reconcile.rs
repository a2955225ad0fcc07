//! Settles operations whose outcome is unknown by asking the system of record, through each
//! tool's `reconcile` hook.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::auth::AuthContext;
use crate::ctx::Ctx;
use crate::dispatch::Dispatcher;
use crate::store::{OperationRecord, OperationState, Resolution, ResolveRequest, StoreError};

/// After this many answers of "still unknown", an operation is reported as escalated.
pub const DEFAULT_ESCALATE_AFTER: u32 = 5;

/// How long settled (`succeeded`, `failed`, `rejected`) records are kept before a pass purges
/// them: 7 days, the window in which the same operation asked again is recognised and replayed
/// ([`Reconciler::retention`]). Records are purged only by a reconciler's passes: without one,
/// they are kept.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// What one pass of the reconciler did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Leases that had expired on `processing` writes (crashed workers), now `outcome_unknown`.
    pub expired_leases: u64,
    /// Terminal records older than the retention, deleted.
    pub purged: u64,
    /// Unknown outcomes found applied: now `succeeded` with the provider's result (an outbox
    /// operation keeps the tool's result, and its event is `delivered` with the provider's).
    pub succeeded: u32,
    /// Unknown outcomes found not applied: now `failed`, so a new call may run them, or
    /// `partial` when a step of theirs had succeeded (the same call again runs the rest).
    pub failed: u32,
    /// Outbox operations whose delivery was found not applied: `queued` again, their event
    /// `pending` and due now, so a worker delivers them (their records stay committed).
    pub requeued: u32,
    /// Still unknown (the hook could not tell, or the tool has no hook).
    pub still_unknown: u32,
    /// Of those, the ones asked about [`Reconciler::escalate_after`] times or more: a person
    /// should look (each is logged at `warn`).
    pub escalated: u32,
}

/// Resolves `outcome_unknown` operations: applied → `succeeded` with the provider's result, not
/// applied → `failed` (claimable again), unknown → stays, counted, escalated after N tries. An
/// expired lease on a write (a crashed worker) first becomes `outcome_unknown` and goes the same
/// way.
///
/// A multi-step operation found not applied has its unknown steps marked failed, and becomes
/// `partial` when one of its steps had succeeded. An outbox operation whose delivery's outcome
/// was unknown (an [`OutboxWorker`](crate::outbox::OutboxWorker) could not tell) is asked about the same
/// way, through its tool's hook: applied → `succeeded`, its event `delivered`; not applied →
/// `queued` again with its event due now, for a worker to deliver.
///
/// ```no_run
/// # async fn demo(dispatcher: toolgate::Dispatcher) -> Result<(), toolgate::store::StoreError> {
/// use std::time::Duration;
/// use toolgate::reconcile::Reconciler;
///
/// let reconciler = Reconciler::new(&dispatcher);
/// let report = reconciler.run_once().await?;
/// println!("{} settled as applied, {} as not applied", report.succeeded, report.failed);
/// // Or keep reconciling every 30 s until `shutdown` completes:
/// let shutdown = std::future::pending::<()>();
/// reconciler.run(Duration::from_secs(30), shutdown).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Reconciler {
    dispatcher: Dispatcher,
    escalate_after: u32,
    batch: u32,
    retention: Duration,
}

impl Reconciler {
    /// A reconciler for the tools and store of `dispatcher`.
    pub fn new(dispatcher: &Dispatcher) -> Self {
        Reconciler {
            dispatcher: dispatcher.clone(),
            escalate_after: DEFAULT_ESCALATE_AFTER,
            batch: 100,
            retention: DEFAULT_RETENTION,
        }
    }

    /// After how many "still unknown" answers an operation is escalated (default
    /// [`DEFAULT_ESCALATE_AFTER`]).
    pub fn escalate_after(mut self, tries: u32) -> Self {
        self.escalate_after = tries.max(1);
        self
    }

    /// How long settled records are kept (default [`DEFAULT_RETENTION`], 7 days): the window in
    /// which the same business operation asked again (from any run, process or session, with
    /// the default `key_scope = "tenant"`) is answered from its record as a replay. After it,
    /// the record is purged and the same call is a new operation that runs again. Choose it
    /// longer than anyone (a model, a user, a client retrying, an agent restarted) may ask again
    /// for the same operation. `processing`, `outcome_unknown` and `awaiting_approval` records
    /// are never purged.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// How many unknown operations one pass looks at, at most (default 100).
    pub fn batch(mut self, batch: u32) -> Self {
        self.batch = batch.max(1);
        self
    }

    /// One pass: record the outcomes the dispatcher ran and could not record (see
    /// [`Dispatcher::record_unrecorded`]), expire dead leases, ask about every unknown outcome
    /// (up to the batch), purge terminal records past the retention.
    /// A dispatcher without a store has nothing to reconcile.
    pub async fn run_once(&self) -> Result<ReconcileReport, StoreError> {
        let Some(store) = self.dispatcher.store() else {
            return Ok(ReconcileReport::default());
        };
        // Outcomes the dispatcher knows and could not record while the store was down go in
        // first, so that a lease expiring below does not make a known outcome unknown.
        self.dispatcher.record_unrecorded().await;
        let mut report = ReconcileReport {
            expired_leases: store.expire_leases(self.dispatcher.now_ms()).await?,
            ..ReconcileReport::default()
        };
        for record in store.list_unknown(self.batch).await? {
            let resolution = self.ask(&record).await;
            let settled = store
                .resolve(ResolveRequest {
                    tenant: &record.tenant,
                    key: &record.key,
                    resolution: resolution.as_resolution(),
                    now_ms: self.dispatcher.now_ms(),
                })
                .await?;
            let Some(settled) = settled else {
                continue; // settled meanwhile by another reconciler
            };
            match (&resolution, settled.state) {
                (Asked::StillUnknown(why), _) => {
                    report.still_unknown += 1;
                    if settled.reconcile_tries >= self.escalate_after {
                        report.escalated += 1;
                        tracing::warn!(
                            tenant = %settled.tenant,
                            key = %settled.key,
                            tool = %settled.tool,
                            tries = settled.reconcile_tries,
                            reason = %why,
                            "an operation's outcome is still unknown; a person should check it"
                        );
                    }
                }
                (_, OperationState::Succeeded) => report.succeeded += 1,
                (_, OperationState::Queued) => report.requeued += 1,
                (_, OperationState::Failed | OperationState::Partial) => report.failed += 1,
                (_, state) => {
                    tracing::warn!(
                        tenant = %settled.tenant,
                        key = %settled.key,
                        state = state.as_str(),
                        "a resolved operation is in a state a resolution does not lead to"
                    );
                }
            }
        }
        let retention = i64::try_from(self.retention.as_millis()).unwrap_or(i64::MAX);
        report.purged = store
            .purge(self.dispatcher.now_ms().saturating_sub(retention))
            .await?;
        Ok(report)
    }

    /// Runs a pass every `interval` until `shutdown` completes; a pass that fails is logged and
    /// the next one tried.
    pub async fn run<F: Future>(&self, interval: Duration, shutdown: F) -> Result<(), StoreError> {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                _ = ticks.tick() => {
                    if let Err(err) = self.run_once().await {
                        tracing::warn!(error = %err, "a reconcile pass failed; trying again at the next tick");
                    }
                }
            }
        }
    }

    /// Asks the tool's hook what became of `record`.
    async fn ask(&self, record: &OperationRecord) -> Asked {
        let Some(registered) = self.dispatcher.registry().get(&record.tool) else {
            return Asked::StillUnknown(format!("no tool named {} is registered", record.tool));
        };
        let args = match serde_json::from_str(&record.arguments) {
            Ok(args) => args,
            Err(err) => {
                return Asked::StillUnknown(format!("the stored arguments do not parse: {err}"));
            }
        };
        let descriptor = registered.descriptor();
        let ctx = Ctx::new(
            Arc::new(AuthContext::new(
                record.tenant.clone(),
                "toolgate-reconciler",
            )),
            Arc::from("reconcile"),
            format!("reconcile-{}", record.key),
            descriptor,
            self.dispatcher.state(),
        )
        .with_idempotency_key(record.key.clone());
        let Some(hook) = registered.tool().reconcile(&ctx, &args) else {
            return Asked::StillUnknown(format!("{} declares no reconcile hook", record.tool));
        };
        let deadline = descriptor
            .timeout
            .unwrap_or(self.dispatcher.default_timeout());
        match tokio::time::timeout(deadline, hook).await {
            Ok(Ok(Some(output))) => Asked::Applied(output.as_str().to_owned()),
            Ok(Ok(None)) => Asked::NotApplied,
            Ok(Err(err)) => Asked::StillUnknown(err.to_string()),
            Err(_) => Asked::StillUnknown(format!(
                "the reconcile hook did not answer within {deadline:?}"
            )),
        }
    }
}

enum Asked {
    Applied(String),
    NotApplied,
    StillUnknown(String),
}

impl Asked {
    fn as_resolution(&self) -> Resolution<'_> {
        match self {
            Asked::Applied(output) => Resolution::Applied(output),
            Asked::NotApplied => Resolution::NotApplied,
            Asked::StillUnknown(_) => Resolution::StillUnknown,
        }
    }
}
