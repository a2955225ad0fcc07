//! The run's counters, in the operation store when the dispatcher has one and the run is not
//! the session's alone (so a restarted process keeps them), else in the session: turns begun,
//! attempts charged, failed calls noted, the abort recorded.
//!
//! The store is asked for at most the counter wait, and not at all while it is known to be out
//! of reach (but once a second, to see whether it answers again; see `reach`). When it does not
//! answer, the session counts in its place and a warning is logged. The session mirrors every
//! count the store answers, so the limits of a run that one session drives hold exactly while
//! the store is down; a write still needs the store for its claim, which answers `unavailable`
//! while it is down. What the session counted meanwhile is not added to the store's counts
//! later.

use std::future::Future;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use crate::auth::Session;
use crate::backoff::seed_of;
use crate::decide::decision_entry;
use crate::error::ErrorKind;
use crate::run::RunAborted;
use crate::run_limits::RunLimits;
use crate::store::{
    AbortRequest, ApprovalRecord, OperationStore, RunKey, RunRecord, StoreError, TurnGrant,
    TurnRequest,
};
use crate::store::{AttemptCharge, FailureNote};

use super::turn_shared::{Refusal, TurnAtClaim};
use super::{Dispatcher, reach};

/// Where one session's run is counted.
pub(super) struct Ledger<'a> {
    dispatcher: &'a Dispatcher,
    session: &'a Session,
    store: Option<&'a dyn OperationStore>,
    pub(super) limits: RunLimits,
    /// What the turn's counters waited for a store that did not answer.
    store_waited: Duration,
    /// The turn of a lone write, begun by its claim, when it is.
    turn_at_claim: Option<&'a TurnAtClaim>,
}

impl Dispatcher {
    /// The ledger of `session`'s run.
    pub(super) fn ledger<'a>(&'a self, session: &'a Session) -> Ledger<'a> {
        Ledger {
            dispatcher: self,
            session,
            store: self.inner.store.as_deref(),
            limits: session.limits().unwrap_or(self.inner.run_limits),
            store_waited: Duration::ZERO,
            turn_at_claim: None,
        }
    }
}

impl<'a> Ledger<'a> {
    fn key(&self) -> RunKey<'_> {
        RunKey {
            tenant: self.session.auth().tenant(),
            run_id: self.session.run_id(),
        }
    }

    fn local(&self) -> MutexGuard<'_, RunRecord> {
        lock(self.session.local_run())
    }

    /// This ledger, for the calls of a turn whose counters waited `waited` for a store that
    /// did not answer.
    pub(super) fn after_waiting(mut self, waited: Duration) -> Self {
        self.store_waited = waited;
        self
    }

    /// This ledger, for the calls of a turn that the claim of its lone write begins.
    pub(super) fn with_turn_at_claim(mut self, turn: Option<&'a TurnAtClaim>) -> Self {
        self.turn_at_claim = turn;
        self
    }

    /// The turn the claim of this write begins, the first time it is asked for; `None` after,
    /// and for a turn already begun.
    pub(super) fn take_turn_at_claim(&self) -> Option<&'a TurnAtClaim> {
        self.turn_at_claim.filter(|turn| turn.take())
    }

    /// Why the store refused the turn its write's claim began, if it did.
    pub(super) fn turn_refused_at_claim(&self) -> Option<Refusal> {
        self.turn_at_claim.and_then(TurnAtClaim::refusal)
    }

    /// Whether the counters ask the store now (a run counted in the store, a store not known to
    /// be out of reach).
    pub(super) fn asks_store(&self) -> bool {
        self.asked().is_some()
    }

    /// The turn of `tools` (each once, with its calls) in this run, at `now_ms`.
    pub(super) fn turn_request<'t>(
        &'t self,
        tools: &'t [(&'t str, u32)],
        now_ms: i64,
    ) -> TurnRequest<'t> {
        TurnRequest {
            run: self.key(),
            tools,
            limits: self.limits,
            now_ms,
        }
    }

    /// Mirrors in the session the grant the store answered for `request`.
    pub(super) fn mirror_turn(&self, request: &TurnRequest<'_>, grant: &TurnGrant) {
        self.local().mirror_turn(request, grant);
    }

    /// Counts `request` in the session, in the place of a store that could not be reached.
    pub(super) fn begin_turn_locally(&self, request: &TurnRequest<'_>) -> TurnGrant {
        self.local().begin_turn(request)
    }

    /// What the turn's counters waited for a store that did not answer: a write's claim waits
    /// that much less (see `reach`).
    pub(super) fn store_waited(&self) -> Duration {
        self.store_waited
    }

    /// The store, when the counters ask it now: never for an unshared run, whose session is
    /// where it is counted; else unless the store is known to be out of reach (see `reach`).
    fn asked(&self) -> Option<&dyn OperationStore> {
        self.store
            .filter(|_| !self.session.is_unshared() && self.dispatcher.inner.reach.counters_ask())
    }

    /// `op` on the store, cut at the counter wait; what the store met is noted in its reach.
    async fn counted<T>(
        &self,
        doing: &'static str,
        op: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let deadline = Instant::now() + self.dispatcher.inner.counter_wait;
        let done = reach::by(deadline, doing, op).await;
        self.dispatcher.inner.reach.note(&done);
        done
    }

    /// Starts a turn calling `tools` (each tool once, with its number of calls); answers the
    /// grant and what was waited for a store that did not answer.
    pub(super) async fn begin_turn(&self, tools: &[(&str, u32)]) -> (TurnGrant, Duration) {
        let store = self.asked();
        // The time is the store's to keep: a session's own record is never shown, and reading
        // the clock on every turn of a run without a store is a cost for nothing.
        let now_ms = if store.is_some() {
            self.dispatcher.now_ms()
        } else {
            0
        };
        let request = self.turn_request(tools, now_ms);
        let mut waited = Duration::ZERO;
        if let Some(store) = store {
            let started = Instant::now();
            match self
                .counted("begin a turn", store.begin_turn(request))
                .await
            {
                Ok(grant) => {
                    self.mirror_turn(&request, &grant);
                    return (grant, waited);
                }
                Err(err) => {
                    waited = started.elapsed();
                    unreachable_store(&err, "begin a turn");
                }
            }
        }
        (self.begin_turn_locally(&request), waited)
    }

    /// One more attempt of `tool`: `false` when its budget is spent.
    pub(super) async fn charge_attempt(&self, tool: &str) -> bool {
        let budget = self.limits.retry_budget;
        let now_ms = self.dispatcher.now_ms();
        if let Some(store) = self.asked() {
            let charge = store.charge_attempt(AttemptCharge {
                run: self.key(),
                tool,
                retry_budget: budget,
                now_ms,
            });
            match self.counted("count a retry", charge).await {
                Ok(charged) => {
                    if charged {
                        self.local().charge_attempt(tool, None, now_ms);
                    }
                    return charged;
                }
                Err(err) => unreachable_store(&err, "count a retry"),
            }
        }
        self.local().charge_attempt(tool, budget, now_ms)
    }

    /// Notes a failed call. Repeat detection is best effort: a store fault is logged, and the
    /// call's answer stands.
    pub(super) async fn note_failure(&self, tool: &str, request_hash: &str) {
        let now_ms = self.dispatcher.now_ms();
        if let Some(store) = self.asked() {
            let noted = store.note_failure(FailureNote {
                run: self.key(),
                tool,
                request_hash,
                now_ms,
            });
            if let Err(err) = self.counted("note a failed call", noted).await {
                unreachable_store(&err, "note a failed call");
            }
        }
        // Mirrored, or in the store's place.
        self.local().note_failure(tool, request_hash, now_ms);
    }

    /// Aborts the run: the session holds the abort at once, and the store keeps it for later
    /// processes, rejecting the run's approvals that have not run as `run_aborted` (each
    /// rejection is added to the audit trail). A store that cannot be reached is tried again
    /// under the store policy, within the store wait: until the store holds
    /// the abort, another process may still run an approval of the run. Answers the abort that
    /// stands (the first one).
    pub(super) async fn abort(&self, abort: RunAborted) -> RunAborted {
        let standing = self.session.abort(abort);
        if !self.store_abort(&standing).await {
            self.local().abort(&standing, self.dispatcher.now_ms());
        }
        standing
    }

    /// Stores the session's abort again, when it has one, so that an approval a call of the
    /// aborted turn asked for after the abort was first stored is rejected as `run_aborted` too
    /// (and audited). Answers the approvals rejected now.
    pub(super) async fn reject_late_approvals(&self) -> Vec<ApprovalRecord> {
        let (Some(store), Some(standing)) = (self.store, self.session.aborted()) else {
            return Vec::new();
        };
        match self.stored_abort(store, standing).await {
            Ok(rejected) => rejected,
            Err(err) => {
                unreachable_store(&err, "store the abort of a run again");
                Vec::new()
            }
        }
    }

    /// Stores `standing` and audits the approvals it rejected; `false` when there is no store,
    /// or it could not be reached.
    async fn store_abort(&self, standing: &RunAborted) -> bool {
        let Some(store) = self.store else {
            return false;
        };
        match self.stored_abort(store, standing).await {
            Ok(_) => true,
            Err(err) => {
                unreachable_store(&err, "store the abort of a run");
                false
            }
        }
    }

    /// `record` stored in `store` (tried again under the store policy), with an audit record of
    /// each approval it rejected. Answers those approvals.
    async fn stored_abort(
        &self,
        store: &dyn OperationStore,
        record: &RunAborted,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let now_ms = self.dispatcher.now_ms();
        let seed = self.dispatcher.inner.seed ^ seed_of(self.session.run_id());
        let mut wait = self
            .dispatcher
            .store_wait(self.dispatcher.default_timeout());
        let aborted = self
            .dispatcher
            .reaching(seed, &mut wait, "store the abort of a run", || {
                store.abort_run(AbortRequest {
                    run: self.key(),
                    abort: record,
                    now_ms,
                })
            })
            .await?;
        audit_rejections(store, &aborted.rejected).await;
        Ok(aborted.rejected)
    }
}

/// The abort of a run that reached its limit of `max_steps` turns.
pub(super) fn step_limit_reached(max_steps: u32) -> RunAborted {
    RunAborted {
        kind: ErrorKind::RunBudgetExhausted,
        reason: format!("the run reached its limit of {max_steps} model turns"),
    }
}

/// Appends the rejection of each approval an abort rejected to the audit trail. Best effort, as
/// for the rejection of an approved operation that failed its checks: a store fault is logged,
/// and the rejections stand.
async fn audit_rejections(store: &dyn OperationStore, rejected: &[ApprovalRecord]) {
    for approval in rejected {
        let Some(decision) = approval.last_decision() else {
            continue;
        };
        if let Err(err) = store
            .append_audit(&decision_entry(approval, decision))
            .await
        {
            tracing::warn!(error = %err, approval = %approval.id, "the rejection of an aborted run's approval could not be added to the audit trail");
        }
    }
}

/// A store that could not be asked: the session counts in its place.
fn unreachable_store(err: &StoreError, doing: &str) {
    tracing::warn!(error = %err, "the operation store could not {doing}; this session counts the run meanwhile");
}

fn lock(run: &Mutex<RunRecord>) -> MutexGuard<'_, RunRecord> {
    run.lock().unwrap_or_else(|poison| poison.into_inner())
}
