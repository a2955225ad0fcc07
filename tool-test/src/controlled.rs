//! A store wrapped for tests: its requests fail on command, the whole store goes down and comes
//! back, another worker acts between two requests, and every request is counted.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use toolgate_core::identity::IssuerKey;
use toolgate_core::store::prelude::*;
use toolgate_core::store::{
    AbortReport, AbortRequest, ApprovalQuery, ApprovalRecord, ApprovalSweep, AttemptCharge,
    AttemptFailure, AuditEntry, AuditQuery, AuditRecord, Begun, Claim, ClaimRequest,
    ClaimedRejection, DecideRequest, Decided, EventLease, EventQuery, EventSettlement, FailureNote,
    LeasedEvent, OperationQuery, OperationRecord, OutboxEvent, PartialOutcome, ResolveRequest,
    ResumeRequest, RetryNote, RunKey, RunRecord, StepOutcome, StepRecord, StepRequest, StepStart,
    StoreError, Success, TurnGrant, TurnRequest,
};

mod request;

use request::KINDS;
pub use request::{Fault, Request, Tally};

/// What runs before a request: another worker's action, as a future.
type Hook = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// What the test asked the store to do, by request.
#[derive(Default)]
struct Plan {
    /// Fails the next `n` requests of a kind with the fault.
    next: [Option<(u32, Fault)>; KINDS],
    /// Fails every request of a kind with the fault, until told to stop.
    always: [Option<Fault>; KINDS],
    /// Runs once, before the next request of a kind.
    hooks: [Option<Hook>; KINDS],
}

/// An [`OperationStore`] in front of another that a test controls: requests fail on command
/// ([`ControlledStore::fail_next`], [`ControlledStore::fail`], the whole store with
/// [`ControlledStore::set_down`]), a hook runs before a request ([`ControlledStore::before_next`],
/// for another worker acting while the dispatcher waits), and every request is counted.
///
/// Every request, in this order: is counted as asked; runs the hook planned for it, if any;
/// waits the latency set ([`ControlledStore::set_latency`]); fails with the first fault that applies (the next-`n` faults, then the lasting ones, then
/// the store being down); otherwise goes to the inner store. Then it is counted as answered,
/// whatever it answered.
///
/// It keeps `begin_turn_and_claim` as the trait's default (a `begin_turn`, then a `claim`, each
/// counted and failed apart) and answers `claims_with_turn` with `false`, whatever the inner
/// store answers: the dispatcher begins every turn before its calls, as it does on a store that
/// cannot do both in one transaction.
pub struct ControlledStore<S: ?Sized = dyn OperationStore> {
    inner: Arc<S>,
    down: AtomicBool,
    /// How long every request waits before it goes on (or fails).
    latency: Mutex<Duration>,
    plan: Mutex<Plan>,
    asked: [AtomicU64; KINDS],
    answered: watch::Sender<Tally>,
}

impl<S: OperationStore + ?Sized> ControlledStore<S> {
    /// `inner`, up, with no fault planned.
    pub fn new(inner: Arc<S>) -> Self {
        ControlledStore {
            inner,
            down: AtomicBool::new(false),
            latency: Mutex::new(Duration::ZERO),
            plan: Mutex::new(Plan::default()),
            asked: Default::default(),
            answered: watch::Sender::new(Tally::default()),
        }
    }

    /// The store behind: requests to it bypass every fault and count.
    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }

    /// Takes the whole store down (every request fails with [`Fault::Refused`]) or brings it
    /// back.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Makes every request wait `latency` (on tokio's clock) before it goes on or fails: a slow
    /// server, or, with [`set_down`](Self::set_down), a stopped one that a client waits for a
    /// connection to (as PostgreSQL's pool waits its acquire timeout).
    pub fn set_latency(&self, latency: Duration) {
        *self
            .latency
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = latency;
    }

    /// Fails the next `times` requests of `request` with `fault`, then lets them through.
    pub fn fail_next(&self, request: Request, times: u32, fault: Fault) {
        self.plan().next[request.index()] = (times > 0).then_some((times, fault));
    }

    /// Fails every one of `requests` with `fault` until [`ControlledStore::stop_failing`].
    pub fn fail_all(&self, requests: &[Request], fault: Fault) {
        let mut plan = self.plan();
        for request in requests {
            plan.always[request.index()] = Some(fault.clone());
        }
    }

    /// Lets `requests` through again after [`ControlledStore::fail`].
    pub fn stop_failing(&self, requests: &[Request]) {
        let mut plan = self.plan();
        for request in requests {
            plan.always[request.index()] = None;
        }
    }

    /// Runs `hook` once, before the next `request` goes on (and before its fault, if any):
    /// another worker acting at that moment, for example settling a claim on the inner store.
    pub fn before_next<F, Fut>(&self, request: Request, hook: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.plan().hooks[request.index()] = Some(Box::new(move || Box::pin(hook())));
    }

    /// How many requests of `request` were asked, answered yet or not.
    pub fn asked(&self, request: Request) -> u64 {
        self.asked[request.index()].load(Ordering::SeqCst)
    }

    /// How many requests of `request` were answered, with a result or an error.
    pub fn answered(&self, request: Request) -> u64 {
        self.answered.borrow().of(request)
    }

    /// The answered requests as they change, to wait until some have been answered
    /// (`receiver.wait_for(|tally| tally.of(Request::Claim) >= n)`).
    pub fn watch_answered(&self) -> watch::Receiver<Tally> {
        self.answered.subscribe()
    }

    fn plan(&self) -> MutexGuard<'_, Plan> {
        self.plan
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Counts `request`, runs its hook, and answers the fault it meets, if any.
    async fn enter(&self, request: Request) -> Result<(), StoreError> {
        self.asked[request.index()].fetch_add(1, Ordering::SeqCst);
        let hook = self.plan().hooks[request.index()].take();
        if let Some(hook) = hook {
            hook().await;
        }
        let latency = *self
            .latency
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let fault = {
            let mut plan = self.plan();
            let slot = &mut plan.next[request.index()];
            let next = slot.as_mut().map(|(left, fault)| {
                *left -= 1;
                fault.clone()
            });
            if matches!(slot, Some((0, _))) {
                *slot = None;
            }
            next.or_else(|| plan.always[request.index()].clone())
        };
        let fault = fault.or_else(|| self.down.load(Ordering::SeqCst).then_some(Fault::Refused));
        match fault {
            Some(fault) => Err(fault.error(request)),
            None => Ok(()),
        }
    }

    /// Runs `request` through its plan, then on the inner store; counts the answer.
    async fn run<T>(
        &self,
        request: Request,
        on_inner: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let answer = match self.enter(request).await {
            Ok(()) => on_inner.await,
            Err(err) => Err(err),
        };
        self.answered.send_modify(|tally| tally.count(request));
        answer
    }
}

impl<S: ?Sized> fmt::Debug for ControlledStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlledStore")
            .field("down", &self.down.load(Ordering::SeqCst))
            .field("answered", &*self.answered.borrow())
            .finish_non_exhaustive()
    }
}

/// `impl<S: OperationStore + ?Sized> Trait for ControlledStore<S>`: each method listed with its
/// [`Request`] runs through [`ControlledStore::run`]; each listed with `_` goes to the inner
/// store without faults; the items after `;;` are written by hand.
macro_rules! controlled {
    ($(
        $trait:ident {
            $($kind:ident => $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*
            $(_ => $pass:ident($($parg:ident: $pty:ty),*) -> $pret:ty;)*
            $(;; $($own:tt)+)?
        }
    )*) => {$(
        #[async_trait]
        impl<S: OperationStore + ?Sized> $trait for ControlledStore<S> {
            $(async fn $name(&self, $($arg: $ty),*) -> Result<$ret, StoreError> {
                self.run(Request::$kind, self.inner.$name($($arg),*)).await
            })*
            $(async fn $pass(&self, $($parg: $pty),*) -> Result<$pret, StoreError> {
                self.inner.$pass($($parg),*).await
            })*
            $($($own)+)?
        }
    )*};
}

// `begin_turn_and_claim` and `claims_with_turn` keep the trait's defaults (see the type's docs);
// the outbox's and the steps' requests pass to the inner store without faults. A success or a
// settlement with its audit record is two requests, each counted and failed apart, as on a
// store that cannot write both at once.
controlled! {
    ClaimStore {
        Claim => claim(request: ClaimRequest<'_>) -> Claim;
        Fail => fail(failure: AttemptFailure<'_>) -> ();
        MarkUnknown => mark_unknown(failure: AttemptFailure<'_>) -> ();
        RecordRetry => record_retry(retry: RetryNote<'_>) -> ();
        Get => get(tenant: &str, key: &str) -> Option<OperationRecord>;
        ;;
        async fn succeed(&self, success: Success<'_>) -> Result<Option<i64>, StoreError> {
            let alone = Success {
                audit: None,
                ..success
            };
            self.run(Request::Succeed, self.inner.succeed(alone)).await?;
            match success.audit {
                Some(entry) => Ok(self.append_audit(entry).await.ok()),
                None => Ok(None),
            }
        }
    }
    OperationLog {
        ExpireLeases => expire_leases(now_ms: i64) -> u64;
        ListUnknown => list_unknown(limit: u32) -> Vec<OperationRecord>;
        Resolve => resolve(request: ResolveRequest<'_>) -> Option<OperationRecord>;
        Purge => purge(before_ms: i64) -> u64;
        ListOperations => list_operations(query: OperationQuery<'_>) -> Vec<OperationRecord>;
    }
    RunLedger {
        BeginTurn => begin_turn(request: TurnRequest<'_>) -> TurnGrant;
        ChargeAttempt => charge_attempt(charge: AttemptCharge<'_>) -> bool;
        NoteFailure => note_failure(failure: FailureNote<'_>) -> ();
        AbortRun => abort_run(request: AbortRequest<'_>) -> AbortReport;
        Run => run(run: RunKey<'_>) -> Option<RunRecord>;
    }
    ApprovalStore {
        Decide => decide(request: DecideRequest<'_>) -> Decided;
        Approval => approval(id: &str) -> Option<ApprovalRecord>;
        ListApprovals => list_approvals(query: ApprovalQuery<'_>) -> Vec<ApprovalRecord>;
        ListApproved => list_approved(limit: u32) -> Vec<ApprovalRecord>;
        ExpireApprovals => expire_approvals(sweep: ApprovalSweep) -> Vec<ApprovalRecord>;
        RejectClaimed => reject_claimed(rejection: ClaimedRejection<'_>) -> ApprovalRecord;
    }
    OutboxStore {
        _ => begin(request: ClaimRequest<'_>) -> Begun;
        _ => lease_events(lease: EventLease<'_>) -> Vec<LeasedEvent>;
        _ => resume_event(request: ResumeRequest<'_>) -> Option<OutboxEvent>;
        _ => event(tenant: &str, key: &str) -> Option<OutboxEvent>;
        _ => list_events(query: EventQuery<'_>) -> Vec<OutboxEvent>;
        ;;
        async fn settle_event(
            &self,
            settlement: EventSettlement<'_>,
        ) -> Result<OutboxEvent, StoreError> {
            let alone = EventSettlement {
                audit: None,
                ..settlement
            };
            let event = self.inner.settle_event(alone).await?;
            if let Some(entry) = settlement.audit {
                // A record that fails to append is dropped: the settled event stands, and the
                // tally counts the failed request.
                let _ = self.append_audit(entry).await;
            }
            Ok(event)
        }
    }
    StepStore {
        _ => begin_step(step: StepRequest<'_>) -> StepStart;
        _ => finish_step(step: StepRequest<'_>, outcome: StepOutcome<'_>) -> ();
        _ => steps(tenant: &str, key: &str) -> Vec<StepRecord>;
        _ => partial(outcome: PartialOutcome<'_>) -> ();
    }
    AuditStore {
        AppendAudit => append_audit(entry: &AuditEntry) -> i64;
        AppendAudits => append_audits(entries: &[AuditEntry]) -> ();
        Audit => audit(query: AuditQuery<'_>) -> Vec<AuditRecord>;
    }
    IssuerKeyStore {
        AddIssuerKey => add_issuer_key(key: &IssuerKey, now_ms: i64) -> bool;
        IssuerKeys => issuer_keys(tenant: &str) -> Vec<IssuerKey>;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use toolgate_core::store::{ClaimToken, MemoryStore};

    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    fn claim(key: &str) -> ClaimRequest<'_> {
        ClaimRequest {
            tenant: "acme",
            key,
            tool: "issue_refund",
            request_hash: "h1",
            unkeyed: None,
            arguments: "{}",
            now_ms: NOW,
            lease: Duration::from_secs(30),
            takeover: false,
            approval: None,
        }
    }

    fn store() -> ControlledStore<MemoryStore> {
        ControlledStore::new(Arc::new(MemoryStore::new()))
    }

    /// The kind of I/O error behind an unreachable store.
    fn io_kind(err: &StoreError) -> std::io::ErrorKind {
        let source = std::error::Error::source(err).expect("a source");
        source
            .downcast_ref::<std::io::Error>()
            .expect("an I/O error")
            .kind()
    }

    #[tokio::test]
    async fn a_store_that_is_down_refuses_every_request_until_it_is_back() {
        let store = store();
        store.set_down(true);
        let err = store.claim(claim("k1")).await.unwrap_err();
        assert!(err.is_unreachable(), "{err}");
        assert_eq!(io_kind(&err), std::io::ErrorKind::ConnectionRefused);
        assert!(store.get("acme", "k1").await.unwrap_err().is_unreachable());
        assert!(store.purge(NOW).await.unwrap_err().is_unreachable());
        assert_eq!(store.inner().get("acme", "k1").await.unwrap(), None);
        store.set_down(false);
        assert_eq!(
            store.claim(claim("k1")).await.unwrap(),
            Claim::Acquired {
                attempt: 1,
                approved: None
            }
        );
    }

    #[tokio::test]
    async fn the_next_faults_fail_exactly_that_many_requests_of_their_kind() {
        let store = store();
        store.fail_next(Request::Claim, 2, Fault::Reset);
        for _ in 0..2 {
            let err = store.claim(claim("k1")).await.unwrap_err();
            assert_eq!(io_kind(&err), std::io::ErrorKind::ConnectionReset);
        }
        assert!(store.get("acme", "k1").await.is_ok(), "other requests pass");
        assert_eq!(
            store.claim(claim("k1")).await.unwrap(),
            Claim::Acquired {
                attempt: 1,
                approved: None
            }
        );
        assert_eq!(store.asked(Request::Claim), 3);
        assert_eq!(store.answered(Request::Claim), 3);
    }

    #[tokio::test]
    async fn lasting_faults_hold_until_stopped_and_come_before_the_store_being_down() {
        let store = store();
        let Claim::Acquired { attempt, .. } = store.claim(claim("k1")).await.unwrap() else {
            panic!("a fresh key is acquired");
        };
        let owner = ClaimToken {
            tenant: "acme".into(),
            key: "k1".into(),
            attempt,
        };
        let success = Success {
            owner: &owner,
            result: "1",
            now_ms: NOW,
            audit: None,
        };
        store.fail_all(&Request::OUTCOMES, Fault::Backend("disk full".into()));
        store.set_down(true);
        for _ in 0..2 {
            let err = store.succeed(success).await.unwrap_err();
            assert!(
                matches!(&err, StoreError::Backend { what, .. } if what == "disk full"),
                "{err}"
            );
        }
        let err = store.get("acme", "k1").await.unwrap_err();
        assert!(err.is_unreachable(), "not an outcome: the store is down");
        store.set_down(false);
        store.stop_failing(&Request::OUTCOMES);
        store.succeed(success).await.unwrap();
        assert_eq!(store.asked(Request::Succeed), 3);
    }

    #[tokio::test]
    async fn a_hook_runs_once_before_its_request_reaches_the_store() {
        let store = Arc::new(store());
        let inner = store.inner().clone();
        store.before_next(Request::Get, move || async move {
            inner.claim(claim("k1")).await.unwrap();
        });
        let seen = store.get("acme", "k1").await.unwrap();
        assert_eq!(
            seen.map(|record| record.attempt),
            Some(1),
            "the hook ran first"
        );
        store.get("acme", "k1").await.unwrap();
        assert_eq!(
            store.claim(claim("k1")).await.unwrap(),
            Claim::Existing(store.inner().get("acme", "k1").await.unwrap().unwrap()),
            "the hook ran once"
        );
    }

    #[tokio::test]
    async fn a_watcher_sees_each_answer() {
        let store = store();
        let mut answers = store.watch_answered();
        store.claim(claim("k1")).await.unwrap();
        store.set_down(true);
        store.claim(claim("k2")).await.unwrap_err();
        let tally = *answers
            .wait_for(|tally| tally.of(Request::Claim) >= 2)
            .await
            .unwrap();
        assert_eq!(tally.of(Request::Claim), 2);
        assert_eq!(tally.of(Request::Get), 0);
    }
}
