//! The operation store out of reach, in one process: a claim is retried below the model and
//! then answered as a transient fault that says nothing ran; an outcome that cannot be recorded
//! keeps the tool's own words and is written when the store answers again; no duplicate is told
//! that a call "is running" when it is not. The store is the memory store behind
//! `toolgate_test::ControlledStore`, which makes requests fail with `StoreError::Unreachable` on
//! command; time is tokio's paused clock and the project's `ManualClock`.
//!
//! The bounds of a wait for a store that does not answer are in `wait`; the audit records of
//! reads, written after their turn, in `read_audit`.

mod read_audit;
mod wait;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::store::OperationState;
use toolgate::store::prelude::*;
use toolgate::{dispatch::DEFAULT_STORE_RETRY, reconcile::Reconciler};
use toolgate_test::{ControlledStore, Fault, ManualClock, MemoryStore, Request};

/// The memory store behind a switch: while down, every request fails as unreachable.
type Switched = ControlledStore<MemoryStore>;

/// The provider: refunds applied, by key, and what the next run does after applying.
#[derive(Default)]
struct Provider {
    applied: Mutex<Vec<String>>,
    /// Set: the store goes down while the refund is applied (before its outcome is recorded).
    store_dies_during_run: AtomicBool,
    /// Set: the refund is sent, and the answer never comes.
    answer_lost: AtomicBool,
    /// Set: the next refund is refused with a 503, nothing applied.
    unavailable_once: AtomicBool,
    store: Mutex<Option<Arc<Switched>>>,
    /// Every run of the tool, applied or not.
    attempts: Mutex<u32>,
}

impl Provider {
    fn runs(&self) -> usize {
        self.applied.lock().unwrap().len()
    }
}

/// Refund an order.
#[tool(side_effect = "write", key = [order_id], timeout = "10s")]
async fn refund(
    ctx: &Ctx,
    key: &IdempotencyKey,
    order_id: String,
    amount: f64,
) -> Result<Value, ToolError> {
    let provider = ctx.state::<Arc<Provider>>()?;
    let key = key.to_string();
    *provider.attempts.lock().unwrap() += 1;
    if provider.unavailable_once.swap(false, Ordering::SeqCst) {
        provider
            .store
            .lock()
            .unwrap()
            .clone()
            .expect("a store")
            .set_down(true);
        return Err(ToolError::unavailable("the provider answered 503"));
    }
    provider.applied.lock().unwrap().push(key);
    if provider.store_dies_during_run.swap(false, Ordering::SeqCst) {
        let store = provider.store.lock().unwrap().clone().expect("a store");
        store.set_down(true);
    }
    if provider.answer_lost.swap(false, Ordering::SeqCst) {
        return Err(ToolError::outcome_unknown("the provider did not answer")
            .with_why("the connection dropped after the refund was sent"));
    }
    Ok(json!({"order_id": order_id, "amount": amount}))
}

struct Desk {
    dispatcher: Dispatcher,
    provider: Arc<Provider>,
    store: Arc<Switched>,
    clock: Arc<ManualClock>,
}

fn desk() -> Desk {
    let store = Arc::new(Switched::new(Arc::new(MemoryStore::new())));
    let provider = Arc::new(Provider::default());
    *provider.store.lock().unwrap() = Some(store.clone());
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    Desk {
        dispatcher: dispatcher_on(&store, &provider, &clock),
        provider,
        store,
        clock,
    }
}

/// A dispatcher on the desk's store: a second one is another process on the same database.
fn dispatcher_on(
    store: &Arc<Switched>,
    provider: &Arc<Provider>,
    clock: &Arc<ManualClock>,
) -> Dispatcher {
    let mut registry = Registry::new();
    registry.register::<refund>().unwrap();
    Dispatcher::builder(registry)
        .state(provider.clone())
        .store(store.clone())
        .clock(clock.clone())
        .jitter_seed(11)
        .build()
}

async fn call_on(dispatcher: &Dispatcher, id: &str) -> Value {
    let session = crate::support::session();
    let call = ToolCall::from_json_text(id, "refund", r#"{"order_id": "ORD-1", "amount": 5}"#);
    dispatcher
        .dispatch(&session, call)
        .await
        .unwrap()
        .result
        .to_json()
}

async fn call(desk: &Desk, id: &str) -> Value {
    call_on(&desk.dispatcher, id).await
}

/// The key of the one refund applied.
fn the_key(desk: &Desk) -> String {
    desk.provider.applied.lock().unwrap()[0].clone()
}

fn assert_store_unreachable(result: &Value) {
    assert_eq!(result["status"], "error", "{result}");
    // A store that could not be reached: nothing ran, the same call may succeed in a moment.
    assert_eq!(result["error"]["kind"], "unavailable", "{result}");
    let error = &result["error"];
    assert_eq!(
        error["what"],
        "this call ran nothing: the operation store could not be reached to record refund"
    );
    assert!(
        error["why"]
            .as_str()
            .unwrap()
            .contains("this call ran nothing"),
        "{result}"
    );
    assert!(!result.to_string().contains("did not run"), "{result}");
    assert!(
        error["next"]
            .as_str()
            .unwrap()
            .starts_with("try again in a moment"),
        "{result}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_claim_while_the_store_is_down_is_retried_then_answered_unavailable() {
    let desk = desk();
    desk.store.set_down(true);
    let started = tokio::time::Instant::now();
    let result = call(&desk, "c1").await;
    let waited = started.elapsed();
    assert_store_unreachable(&result);
    assert_eq!(desk.provider.runs(), 0, "nothing ran");
    assert_eq!(
        desk.store.asked(Request::Claim),
        u64::from(DEFAULT_STORE_RETRY.max_attempts),
        "the claim was tried under the store policy"
    );
    // The backoffs of the store policy, no more: 100 ms then 200 ms at most.
    assert!(waited <= Duration::from_millis(300), "waited {waited:?}");
}

#[tokio::test(start_paused = true)]
async fn a_claim_that_fails_once_is_retried_below_the_model() {
    let desk = desk();
    desk.store.fail_next(Request::Claim, 1, Fault::Refused);
    let result = call(&desk, "c1").await;
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(desk.store.asked(Request::Claim), 2);
    assert_eq!(desk.provider.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_result_that_cannot_be_recorded_is_unknown_and_written_when_the_store_is_back() {
    let desk = desk();
    desk.provider
        .store_dies_during_run
        .store(true, Ordering::SeqCst);
    let first = call(&desk, "c1").await;
    assert_eq!(first["status"], "outcome_unknown", "{first}");
    let error = &first["error"];
    assert_eq!(
        error["what"],
        "refund ran, but its result could not be recorded"
    );
    assert!(
        error["why"]
            .as_str()
            .unwrap()
            .starts_with("it may have acted"),
        "{first}"
    );
    assert!(
        error["next"]
            .as_str()
            .unwrap()
            .contains("outcome is being checked"),
        "{first}"
    );

    // Asked again while the store is down: nothing runs, and the answer says the refund ran
    // and its outcome is being recorded, never that it did not run.
    let again = call(&desk, "c2").await;
    assert_eq!(again["status"], "outcome_unknown", "{again}");
    assert_eq!(
        again["error"]["what"],
        "an earlier refund call with these arguments ran, but its outcome is not recorded yet"
    );
    assert_eq!(desk.provider.runs(), 1, "{again}");

    // The store is back: the kept result is written before the claim, and the re-ask is
    // answered from the store, never "in progress".
    desk.store.set_down(false);
    let record = desk
        .store
        .inner()
        .get("acme", &the_key(&desk))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.state, OperationState::Processing, "not recorded yet");
    let back = call(&desk, "c3").await;
    assert_eq!(
        back,
        json!({"status": "succeeded", "replayed": true, "data": {"order_id": "ORD-1", "amount": 5.0}})
    );
    assert_eq!(desk.provider.runs(), 1, "applied once");
}

#[tokio::test(start_paused = true)]
async fn the_reconciler_writes_a_kept_result_and_another_process_is_told_only_what_is_known() {
    let desk = desk();
    desk.provider
        .store_dies_during_run
        .store(true, Ordering::SeqCst);
    assert_eq!(call(&desk, "c1").await["status"], "outcome_unknown");
    desk.store.set_down(false);

    // Another process (its own dispatcher) asks while the record is still `processing`.
    let other = dispatcher_on(&desk.store, &desk.provider, &desk.clock);
    let seen = call_on(&other, "o1").await;
    assert_eq!(seen["status"], "in_progress", "{seen}");
    let error = &seen["error"];
    assert_eq!(
        error["what"],
        "an earlier refund call with these arguments has not recorded its outcome yet"
    );
    assert!(
        error["why"]
            .as_str()
            .unwrap()
            .contains("or may have run it without recording"),
        "the words cover a worker that ran and could not record: {seen}"
    );

    // The first process's reconciler pass writes what it knows.
    Reconciler::new(&desk.dispatcher).run_once().await.unwrap();
    let record = desk
        .store
        .inner()
        .get("acme", &the_key(&desk))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.state, OperationState::Succeeded);
    assert_eq!(call_on(&other, "o2").await["replayed"], true);
    assert_eq!(desk.provider.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_kept_result_settles_the_unknown_outcome_its_expired_lease_became() {
    let desk = desk();
    desk.provider
        .store_dies_during_run
        .store(true, Ordering::SeqCst);
    assert_eq!(call(&desk, "c1").await["status"], "outcome_unknown");
    desk.store.set_down(false);

    // Past the lease, another process's reconciler finds the record abandoned.
    desk.clock.advance_ms(3_600_000);
    let other = dispatcher_on(&desk.store, &desk.provider, &desk.clock);
    let report = Reconciler::new(&other).run_once().await.unwrap();
    assert_eq!(report.expired_leases, 1);
    let key = the_key(&desk);
    let record = desk.store.inner().get("acme", &key).await.unwrap().unwrap();
    assert_eq!(
        record.state,
        OperationState::OutcomeUnknown,
        "no hook can tell"
    );

    // The process that ran it knows the result: the unknown outcome is settled with it.
    assert_eq!(desk.dispatcher.record_unrecorded().await, 0);
    let record = desk.store.inner().get("acme", &key).await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Succeeded);
    assert_eq!(
        record.result.as_deref(),
        Some(r#"{"order_id":"ORD-1","amount":5.0}"#)
    );
    assert_eq!(desk.provider.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_outcome_that_cannot_be_recorded_keeps_the_tools_own_why() {
    let desk = desk();
    desk.provider.answer_lost.store(true, Ordering::SeqCst);
    desk.provider
        .store_dies_during_run
        .store(true, Ordering::SeqCst);
    let result = call(&desk, "c1").await;
    assert_eq!(result["status"], "outcome_unknown", "{result}");
    assert_eq!(result["error"]["what"], "the provider did not answer");
    assert_eq!(
        result["error"]["why"],
        "the connection dropped after the refund was sent"
    );

    // Once the store is back, the duplicate hears the stored unknown outcome, not "running".
    desk.store.set_down(false);
    let again = call(&desk, "c2").await;
    assert_eq!(again["status"], "outcome_unknown", "{again}");
    assert_eq!(again["replayed"], true, "{again}");
    let record = desk
        .store
        .inner()
        .get("acme", &the_key(&desk))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.state, OperationState::OutcomeUnknown);
    assert_eq!(desk.provider.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_duplicate_of_a_kept_outcome_is_told_it_ran_not_that_it_is_running() {
    let desk = desk();
    // Only the writes that record an outcome fail: the connection is lost under them.
    desk.store.fail_all(&Request::OUTCOMES, Fault::Reset);
    assert_eq!(call(&desk, "c1").await["status"], "outcome_unknown");

    // Claims are answered again, outcomes still cannot be written: the record is `processing`,
    // and this dispatcher knows that nothing runs.
    let started = tokio::time::Instant::now();
    let again = call(&desk, "c2").await;
    assert_eq!(again["status"], "outcome_unknown", "{again}");
    assert_eq!(
        again["error"]["what"],
        "an earlier refund call with these arguments ran, but its outcome is not recorded yet"
    );
    assert!(
        started.elapsed() < toolgate::dispatch::DEFAULT_IN_PROGRESS_WAIT,
        "answered without waiting for an outcome that no one is writing"
    );

    desk.store.stop_failing(&Request::OUTCOMES);
    let back = call(&desk, "c3").await;
    assert_eq!(back["status"], "succeeded", "{back}");
    assert_eq!(back["replayed"], true, "{back}");
    assert_eq!(desk.provider.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_that_cannot_be_recorded_is_not_sent_and_says_nothing_was_applied() {
    let desk = desk();
    // The first attempt answers 503 and the store goes down with it: the retry cannot be
    // recorded, so it is not sent.
    desk.provider.unavailable_once.store(true, Ordering::SeqCst);
    let result = call(&desk, "c1").await;
    assert_eq!(result["status"], "error", "{result}");
    assert_eq!(result["error"]["kind"], "unavailable", "{result}");
    assert_eq!(
        result["error"]["what"],
        "refund failed and was not tried again: the provider answered 503"
    );
    assert!(
        result["error"]["why"]
            .as_str()
            .unwrap()
            .ends_with("the failure proved that nothing was applied"),
        "{result}"
    );
    assert_eq!(*desk.provider.attempts.lock().unwrap(), 1);

    // Back up: the kept failure is written, and the call runs again under the same key.
    desk.store.set_down(false);
    let again = call(&desk, "c2").await;
    assert_eq!(again["status"], "succeeded", "{again}");
    assert_eq!(again["replayed"], false, "{again}");
    assert_eq!(desk.provider.runs(), 1, "applied once");
}

/// A refund that ran and was recorded, asked again while the store cannot be reached: this call
/// runs nothing, and the answer never says the refund did not run (DESIGN §11: no result calls
/// what may have happened something that did not).
#[tokio::test(start_paused = true)]
async fn a_reask_during_an_outage_of_a_refund_that_ran_is_not_told_it_did_not_run() {
    let desk = desk();
    let first = call(&desk, "c1").await;
    assert_eq!(first["status"], "succeeded", "{first}");
    desk.store.set_down(true);
    let again = call(&desk, "c2").await;
    assert_store_unreachable(&again);
    assert!(
        again["error"]["why"]
            .as_str()
            .unwrap()
            .contains("whether an earlier call with these arguments was applied cannot be read"),
        "{again}"
    );
    assert_eq!(desk.provider.runs(), 1);
}

/// A store failure is a failure of the infrastructure, not of the call (DESIGN §5): the same
/// call once the store is back runs, never `repeated_call`. Both ways a store fails: it answers
/// with an error (`internal`), and it cannot be reached (`unavailable`).
#[tokio::test(start_paused = true)]
async fn a_store_failure_then_the_same_call_runs() {
    // A backend's error is not tried again; an unreachable store is, under the store policy.
    for (fault, times, kind) in [
        (Fault::Backend("disk I/O error".to_owned()), 1, "internal"),
        (
            Fault::Refused,
            DEFAULT_STORE_RETRY.max_attempts,
            "unavailable",
        ),
    ] {
        let desk = desk();
        desk.store.fail_next(Request::Claim, times, fault);
        let failed = call(&desk, "c1").await;
        assert_eq!(failed["error"]["kind"], kind, "{failed}");
        assert_eq!(*desk.provider.attempts.lock().unwrap(), 0, "nothing ran");

        let again = call(&desk, "c2").await;
        assert_eq!(again["status"], "succeeded", "{kind}: {again}");
        assert_eq!(again["replayed"], false, "{again}");
        assert_eq!(desk.provider.runs(), 1, "{kind}: applied once");
    }
}

/// The audit records of calls answered while the store could not be reached are kept in the
/// process and written, in order, once it answers again (DESIGN §10): before the next record,
/// and by a reconciler pass.
#[tokio::test(start_paused = true)]
async fn calls_answered_during_an_outage_are_audited_when_the_store_is_back() {
    let desk = desk();
    desk.store.set_down(true);
    let down = call(&desk, "c1").await;
    assert_eq!(down["error"]["kind"], "unavailable", "{down}");
    assert!(
        audited(desk.store.inner()).await.is_empty(),
        "not written yet"
    );

    // Back: the kept record goes first, then the new call's.
    desk.store.set_down(false);
    let up = call(&desk, "c2").await;
    assert_eq!(up["status"], "succeeded", "{up}");
    assert_eq!(
        audited(desk.store.inner()).await,
        [
            ("c1".to_owned(), "error".to_owned()),
            ("c2".to_owned(), "succeeded".to_owned())
        ]
    );

    // Down again, then a reconciler pass once it is back writes what was kept.
    desk.store.set_down(true);
    call(&desk, "c3").await;
    desk.store.set_down(false);
    Reconciler::new(&desk.dispatcher).run_once().await.unwrap();
    let records = audited(desk.store.inner()).await;
    assert_eq!(records.len(), 3, "{records:?}");
    assert_eq!(records[2].0, "c3");
}

/// The call ids and outcomes of the audit records of `run-1`, in the order they were appended.
async fn audited(store: &MemoryStore) -> Vec<(String, String)> {
    let query = toolgate::store::AuditQuery {
        tenant: Some("acme"),
        run_id: Some("run-1"),
        key: None,
        limit: 0,
    };
    store
        .audit(query)
        .await
        .unwrap()
        .into_iter()
        .map(|record| (record.entry.call_id, record.entry.outcome))
        .collect()
}
