//! The outbox, end to end on the MemoryStore: an outbox tool's body commits its record and its
//! event together or leaves nothing; the model reads `queued`, then the operation's progress;
//! the worker delivers, retries with backoff, dead-letters, is resumed, and hands unknown
//! outcomes to the reconciler.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::store::prelude::*;
use toolgate::store::{
    DecideRequest, EventLease, EventStatus, OperationState, OutboxEvent, ResumeRequest, Verdict,
};
use toolgate::{
    dispatch::Clock, outbox::Deliver, outbox::OutboxWorker, reconcile::Reconciler, tool::RetrySpec,
};
use toolgate_test::{ManualClock, MemoryStore};

const TENANT: &str = "acme";

/// What the body of `request_refund` does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Body {
    #[default]
    Enqueue,
    Fail,
    Panic,
    Hang,
    /// Writes its rows and enqueues nothing.
    NoEvent,
}

/// The application and its payment provider.
#[derive(Default)]
struct Bank {
    body: Mutex<Body>,
    /// Refunds the provider applied, by idempotency key, with how many times each was sent.
    applied: Mutex<BTreeMap<String, u32>>,
    /// What the provider answers to the next deliveries (then: applies and answers).
    script: Mutex<VecDeque<Answer>>,
    /// Deliveries the handler was called with.
    calls: Mutex<u32>,
}

#[derive(Debug, Clone, Copy)]
enum Answer {
    /// 503 before anything was sent.
    Unavailable,
    /// Applied, then the answer was lost.
    AppliedThenLost,
    /// Sent, lost before the provider applied it.
    LostUnapplied,
}

impl Bank {
    fn applied(&self, key: &str) -> u32 {
        self.applied.lock().unwrap().get(key).copied().unwrap_or(0)
    }

    fn script(&self, answers: impl IntoIterator<Item = Answer>) {
        self.script.lock().unwrap().extend(answers);
    }

    /// The provider's side of a delivery; `dedupe`: it applies a key once.
    fn deliver(&self, event: &OutboxEvent, dedupe: bool) -> Result<Value, ToolError> {
        *self.calls.lock().unwrap() += 1;
        let next = self.script.lock().unwrap().pop_front();
        let apply = || {
            let mut applied = self.applied.lock().unwrap();
            let count = applied.entry(event.key.clone()).or_insert(0);
            if !(dedupe && *count > 0) {
                *count += 1;
            }
        };
        match next {
            Some(Answer::Unavailable) => Err(ToolError::unavailable("the provider answered 503")),
            Some(Answer::AppliedThenLost) => {
                apply();
                Err(ToolError::outcome_unknown(
                    "the connection dropped after the request was sent",
                ))
            }
            Some(Answer::LostUnapplied) => Err(ToolError::outcome_unknown(
                "the connection dropped after the request was sent",
            )),
            None => {
                apply();
                Ok(json!({"refund_id": format!("re_{}", &event.key[..8])}))
            }
        }
    }
}

/// The worker's handler for `request_refund`.
struct Handler {
    bank: Arc<Bank>,
    honours: bool,
}

#[async_trait::async_trait]
impl Deliver for Handler {
    async fn deliver(&self, event: &OutboxEvent) -> Result<Value, ToolError> {
        self.bank.deliver(event, self.honours)
    }

    fn honours_key(&self) -> bool {
        self.honours
    }
}

/// Record a refund request; a worker sends it to the payment provider.
#[tool(side_effect = "write", delivery = "outbox", key = [order_id], timeout = "1s", reconcile = find_refund(bank, key))]
async fn request_refund(
    ctx: &Ctx,
    bank: State<Arc<Bank>>,
    key: &IdempotencyKey,
    order_id: String,
    amount: f64,
) -> Result<Value, ToolError> {
    assert_eq!(ctx.idempotency_key(), Some(key.as_str()));
    let tx = ctx.transaction().await?;
    drop(tx);
    let body = *bank.body.lock().unwrap();
    match body {
        Body::Enqueue => {}
        Body::Fail => return Err(ToolError::refused("the order is not refundable")),
        Body::Panic => panic!("the refund table is missing"),
        Body::Hang => tokio::time::sleep(Duration::from_secs(60)).await,
        Body::NoEvent => return Ok(json!({"request": order_id, "queued": false})),
    }
    ctx.enqueue(&json!({"order_id": order_id, "amount": amount}))?;
    Ok(json!({"request": order_id, "amount": amount}))
}

/// Asks the provider whether the refund under the key was applied.
async fn find_refund(
    bank: State<Arc<Bank>>,
    key: &IdempotencyKey,
) -> Result<Option<Value>, ToolError> {
    let applied = bank.applied(key.as_str()) > 0;
    Ok(applied.then(|| json!({"refund_id": "found"})))
}

/// Refunds over this need a person's approval; refused by the check while the bank says so.
async fn open_for_refunds(bank: State<Arc<Bank>>) -> Result<(), ToolError> {
    if *bank.body.lock().unwrap() == Body::Fail {
        return Err(ToolError::refused("refunds are closed"));
    }
    Ok(())
}

/// Record a large refund request; a worker sends it to the payment provider.
#[tool(side_effect = "write", delivery = "outbox", key = [order_id], approval_over = 100,
       approver = "refund:approve", check = open_for_refunds(bank))]
async fn request_large_refund(
    ctx: &Ctx,
    bank: State<Arc<Bank>>,
    order_id: String,
    amount: f64,
) -> Result<Value, ToolError> {
    let _ = bank;
    ctx.enqueue(&json!({"order_id": order_id, "amount": amount}))?;
    Ok(json!({"request": order_id, "amount": amount}))
}

struct Setup {
    dispatcher: Dispatcher,
    bank: Arc<Bank>,
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
}

fn setup() -> Setup {
    let mut registry = Registry::new();
    registry.register::<request_refund>().unwrap();
    registry.register::<request_large_refund>().unwrap();
    let bank = Arc::new(Bank::default());
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let dispatcher = Dispatcher::builder(registry)
        .state(bank.clone())
        .store(store.clone())
        .clock(clock.clone())
        .build();
    Setup {
        dispatcher,
        bank,
        store,
        clock,
    }
}

impl Setup {
    /// A worker of 3 deliveries a budget, backoff 1 s doubling to 10 s, no jitter (so that the
    /// due times can be asserted).
    fn worker(&self, honours: bool) -> OutboxWorker {
        let handler = Handler {
            bank: self.bank.clone(),
            honours,
        };
        OutboxWorker::builder(self.store.clone())
            .name("w1")
            .clock(self.clock.clone())
            .lease(Duration::from_secs(30))
            .retry(RetrySpec {
                max_attempts: Some(3),
                base: Some(Duration::from_secs(1)),
                max: Some(Duration::from_secs(10)),
                jitter: Some(false),
            })
            .deliver("request_refund", handler)
            .build()
            .unwrap()
    }

    async fn call(&self, id: &str) -> Value {
        self.call_in("run-1", id).await
    }

    async fn call_in(&self, run: &str, id: &str) -> Value {
        let session = Session::new(AuthContext::new(TENANT, "agent"), run);
        let call = ToolCall::new(
            id,
            "request_refund",
            json!({"order_id": "ORD-1001", "amount": 25}),
        );
        self.dispatcher
            .dispatch(&session, call)
            .await
            .unwrap()
            .result
            .to_json()
    }

    /// The one event in the store.
    async fn event(&self) -> Option<OutboxEvent> {
        let events = self.store.list_events(Default::default()).await.unwrap();
        assert!(events.len() <= 1, "{events:?}");
        events.into_iter().next()
    }

    async fn state(&self, key: &str) -> Option<OperationState> {
        self.store
            .get(TENANT, key)
            .await
            .unwrap()
            .map(|record| record.state)
    }
}

#[tokio::test(start_paused = true)]
async fn a_committed_body_answers_queued_with_its_record_and_event() {
    let setup = setup();
    let answer = setup.call("c1").await;
    assert_eq!(answer["status"], "queued", "{answer}");
    assert_eq!(answer["replayed"], false);
    assert_eq!(
        answer["data"],
        json!({"request": "ORD-1001", "amount": 25.0})
    );
    let delivery = &answer["delivery"];
    let key = delivery["operation"].as_str().unwrap().to_owned();
    assert_eq!(delivery["state"], "pending");
    assert_eq!(delivery["attempts"], 0);
    assert!(
        delivery["what"]
            .as_str()
            .unwrap()
            .contains("the provider has not acted yet")
    );
    assert!(
        delivery["next"]
            .as_str()
            .unwrap()
            .contains("do not call it again")
    );
    assert!(answer.get("error").is_none());

    assert_eq!(setup.state(&key).await, Some(OperationState::Queued));
    let event = setup
        .event()
        .await
        .expect("the event committed with the record");
    assert_eq!(
        (event.key.as_str(), event.status),
        (key.as_str(), EventStatus::Pending)
    );
    assert_eq!(
        serde_json::from_str::<Value>(&event.payload).unwrap(),
        json!({"order_id": "ORD-1001", "amount": 25.0})
    );
    assert_eq!(
        *setup.bank.calls.lock().unwrap(),
        0,
        "the provider has not been called"
    );
}

#[tokio::test(start_paused = true)]
async fn a_body_that_fails_panics_or_overruns_leaves_nothing() {
    for (body, kind) in [
        (Body::Fail, "refused"),
        (Body::Panic, "internal"),
        (Body::Hang, "timeout"),
    ] {
        let setup = setup();
        *setup.bank.body.lock().unwrap() = body;
        let answer = setup.call("c1").await;
        assert_eq!(answer["status"], "error", "{body:?}: {answer}");
        assert_eq!(answer["error"]["kind"], kind, "{body:?}: {answer}");
        let why = answer["error"]["why"].as_str().unwrap_or_default();
        assert!(why.contains("nothing was stored"), "{body:?}: {answer}");
        let records = setup
            .store
            .list_operations(Default::default())
            .await
            .unwrap();
        assert!(
            records.is_empty(),
            "{body:?}: no record remains: {records:?}"
        );
        assert_eq!(setup.event().await, None, "{body:?}: no event remains");

        // Nothing remains, so the same call (in another run: a refusal is not repeated in its
        // own) runs again once the body works.
        *setup.bank.body.lock().unwrap() = Body::Enqueue;
        assert_eq!(
            setup.call_in("run-2", "c2").await["status"],
            "queued",
            "{body:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_body_that_enqueues_nothing_succeeds_with_its_rows_alone() {
    let setup = setup();
    *setup.bank.body.lock().unwrap() = Body::NoEvent;
    let answer = setup.call("c1").await;
    assert_eq!(answer["status"], "succeeded", "{answer}");
    assert!(answer.get("delivery").is_none());
    let records = setup
        .store
        .list_operations(Default::default())
        .await
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].state, OperationState::Succeeded);
    assert_eq!(setup.event().await, None);
    let again = setup.call("c2").await;
    assert_eq!(
        (again["status"].as_str(), again["replayed"].as_bool()),
        (Some("succeeded"), Some(true))
    );
    assert!(again.get("delivery").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_duplicate_reads_the_progress_then_the_delivery() {
    let setup = setup();
    let first = setup.call("c1").await;
    let key = first["delivery"]["operation"].as_str().unwrap().to_owned();
    let again = setup.call("c2").await;
    assert_eq!(again["status"], "queued");
    assert_eq!(again["replayed"], true);
    assert_eq!(again["data"], first["data"]);
    assert_eq!(again["delivery"]["state"], "pending");
    assert_eq!(
        setup
            .store
            .list_events(Default::default())
            .await
            .unwrap()
            .len(),
        1
    );

    let report = setup.worker(false).drain().await.unwrap();
    assert_eq!(report.delivered, 1);
    assert_eq!(setup.state(&key).await, Some(OperationState::Succeeded));
    let done = setup.call("c3").await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["replayed"], true);
    assert_eq!(done["data"], first["data"], "the tool's own result");
    assert_eq!(done["delivery"]["state"], "delivered");
    assert_eq!(
        done["delivery"]["result"],
        json!({"refund_id": format!("re_{}", &key[..8])})
    );
    assert_eq!(setup.bank.applied(&key), 1);
    assert_eq!(*setup.bank.calls.lock().unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn transient_errors_are_retried_with_backoff_then_delivered() {
    let setup = setup();
    setup.call("c1").await;
    setup
        .bank
        .script([Answer::Unavailable, Answer::Unavailable]);
    let worker = setup.worker(false);
    let t0 = setup.clock.now_ms();

    let report = worker.drain().await.unwrap();
    assert_eq!((report.retrying, report.delivered), (1, 0));
    let event = setup.event().await.unwrap();
    assert_eq!((event.status, event.attempt), (EventStatus::Pending, 1));
    assert_eq!(event.due_ms, t0 + 1_000, "the first backoff is the base");
    assert_eq!(event.last_error.as_ref().unwrap().kind, "unavailable");

    // Not due yet: nothing leased.
    setup.clock.advance_ms(999);
    assert_eq!(worker.drain().await.unwrap(), Default::default());
    setup.clock.advance_ms(1);
    assert_eq!(worker.drain().await.unwrap().retrying, 1);
    let event = setup.event().await.unwrap();
    assert_eq!(
        event.due_ms,
        setup.clock.now_ms() + 2_000,
        "the backoff doubles"
    );

    setup.clock.advance_ms(2_000);
    assert_eq!(worker.drain().await.unwrap().delivered, 1);
    let event = setup.event().await.unwrap();
    assert_eq!((event.status, event.attempt), (EventStatus::Delivered, 3));
    assert_eq!(setup.bank.applied(&event.key), 1);
}

#[tokio::test(start_paused = true)]
async fn a_spent_budget_dead_letters_and_a_resume_delivers_once() {
    let setup = setup();
    setup.call("c1").await;
    setup.bank.script([Answer::Unavailable; 3]);
    let worker = setup.worker(false);
    let mut dead = 0;
    for _ in 0..3 {
        dead += worker.drain().await.unwrap().dead;
        setup.clock.advance_ms(10_000);
    }
    assert_eq!(dead, 1);
    let event = setup.event().await.unwrap();
    assert_eq!((event.status, event.attempt), (EventStatus::Dead, 3));
    assert_eq!(
        event.last_error.as_ref().unwrap().what,
        "the provider answered 503"
    );
    assert_eq!(setup.state(&event.key).await, Some(OperationState::Queued));
    assert_eq!(
        worker.drain().await.unwrap(),
        Default::default(),
        "dead stays dead"
    );

    let answer = setup.call("c2").await;
    assert_eq!(answer["status"], "queued");
    assert_eq!(answer["delivery"]["state"], "dead");
    let what = answer["delivery"]["what"].as_str().unwrap();
    assert!(
        what.contains("delivery stopped after 3 attempts: the provider answered 503"),
        "{what}"
    );
    assert!(what.contains("an operator must resume it"), "{what}");

    let now = setup.clock.now_ms();
    let resumed = setup
        .store
        .resume_event(ResumeRequest {
            tenant: TENANT,
            key: &event.key,
            now_ms: now,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resumed.status, EventStatus::Pending);
    assert_eq!(worker.drain().await.unwrap().delivered, 1);
    assert_eq!(worker.drain().await.unwrap(), Default::default());
    assert_eq!(setup.bank.applied(&event.key), 1, "delivered exactly once");
    assert_eq!(*setup.bank.calls.lock().unwrap(), 4);
    assert_eq!(
        setup.state(&event.key).await,
        Some(OperationState::Succeeded)
    );
}

#[tokio::test(start_paused = true)]
async fn a_refusal_is_dead_at_once() {
    let setup = setup();
    setup.call("c1").await;
    let worker = OutboxWorker::builder(setup.store.clone())
        .clock(setup.clock.clone())
        .deliver("request_refund", |_event: OutboxEvent| async {
            Err::<Value, _>(ToolError::refused("the card was closed"))
        })
        .build()
        .unwrap();
    assert!(worker.name().starts_with("worker-"));
    assert_eq!(worker.drain().await.unwrap().dead, 1);
    let event = setup.event().await.unwrap();
    assert_eq!((event.status, event.attempt), (EventStatus::Dead, 1));
}

#[tokio::test(start_paused = true)]
async fn an_unknown_delivery_found_applied_is_settled_delivered() {
    let setup = setup();
    setup.call("c1").await;
    setup.bank.script([Answer::AppliedThenLost]);
    let report = setup.worker(false).drain().await.unwrap();
    assert_eq!(report.unknown, 1);
    let event = setup.event().await.unwrap();
    assert_eq!(event.status, EventStatus::Unknown);
    assert_eq!(
        setup.state(&event.key).await,
        Some(OperationState::OutcomeUnknown)
    );
    assert_eq!(setup.call("c2").await["status"], "outcome_unknown");

    let report = Reconciler::new(&setup.dispatcher).run_once().await.unwrap();
    assert_eq!(
        (report.succeeded, report.requeued, report.failed),
        (1, 0, 0)
    );
    assert_eq!(
        setup.state(&event.key).await,
        Some(OperationState::Succeeded)
    );
    assert_eq!(setup.event().await.unwrap().status, EventStatus::Delivered);
    let done = setup.call("c3").await;
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["delivery"]["state"], "delivered");
    assert_eq!(
        setup.worker(false).drain().await.unwrap(),
        Default::default()
    );
    assert_eq!(setup.bank.applied(&event.key), 1);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_delivery_found_not_applied_is_requeued_and_delivered_once() {
    let setup = setup();
    setup.call("c1").await;
    setup.bank.script([Answer::LostUnapplied]);
    assert_eq!(setup.worker(false).drain().await.unwrap().unknown, 1);

    let report = Reconciler::new(&setup.dispatcher).run_once().await.unwrap();
    assert_eq!(
        (report.succeeded, report.requeued, report.failed),
        (0, 1, 0)
    );
    let event = setup.event().await.unwrap();
    assert_eq!(event.status, EventStatus::Pending);
    assert_eq!(setup.state(&event.key).await, Some(OperationState::Queued));

    assert_eq!(setup.worker(false).drain().await.unwrap().delivered, 1);
    assert_eq!(setup.bank.applied(&event.key), 1);
    assert_eq!(*setup.bank.calls.lock().unwrap(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_honours_the_key_is_sent_again_after_an_unknown_outcome() {
    let setup = setup();
    setup.call("c1").await;
    setup.bank.script([Answer::AppliedThenLost]);
    let worker = setup.worker(true);
    assert_eq!(worker.drain().await.unwrap().retrying, 1);
    setup.clock.advance_ms(1_000);
    assert_eq!(worker.drain().await.unwrap().delivered, 1);
    let event = setup.event().await.unwrap();
    assert_eq!((event.status, event.attempt), (EventStatus::Delivered, 2));
    assert_eq!(
        *setup.bank.calls.lock().unwrap(),
        2,
        "sent again with the key"
    );
    assert_eq!(
        setup.bank.applied(&event.key),
        1,
        "the provider applied it once"
    );
}

/// A worker leases the event and dies before recording anything.
async fn crash_holding_the_lease(setup: &Setup) {
    let leased = setup
        .store
        .lease_events(EventLease {
            worker: "crashed",
            tools: &["request_refund"],
            now_ms: setup.clock.now_ms(),
            lease: Duration::from_secs(30),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    setup.clock.advance_ms(30_000);
}

#[tokio::test(start_paused = true)]
async fn a_lease_taken_over_is_unknown_unless_the_handler_honours_the_key() {
    let setup = setup();
    setup.call("c1").await;
    crash_holding_the_lease(&setup).await;
    let report = setup.worker(false).drain().await.unwrap();
    assert_eq!((report.unknown, report.delivered), (1, 0));
    assert_eq!(
        *setup.bank.calls.lock().unwrap(),
        0,
        "never sent by a worker that cannot know"
    );
    let event = setup.event().await.unwrap();
    assert_eq!((event.status, event.attempt), (EventStatus::Unknown, 2));
    assert_eq!(
        setup.state(&event.key).await,
        Some(OperationState::OutcomeUnknown)
    );

    let setup = self::setup();
    setup.call("c1").await;
    crash_holding_the_lease(&setup).await;
    let report = setup.worker(true).drain().await.unwrap();
    assert_eq!((report.unknown, report.delivered), (0, 1));
    assert_eq!(*setup.bank.calls.lock().unwrap(), 1);
    let event = setup.event().await.unwrap();
    assert_eq!((event.status, event.attempt), (EventStatus::Delivered, 2));
}

/// A lease taken over from a worker that stopped mid-delivery may have been sent: when the
/// delivery budget of a handler that honours the key ends in 503s, the event is unknown, never
/// dead; found not applied, it is delivered again, once.
#[tokio::test(start_paused = true)]
async fn a_lease_taken_over_then_503s_is_unknown_not_dead() {
    let setup = setup();
    setup.call("c1").await;
    crash_holding_the_lease(&setup).await;
    setup
        .bank
        .script([Answer::Unavailable, Answer::Unavailable]);
    let worker = setup.worker(true);
    assert_eq!(worker.drain().await.unwrap().retrying, 1);
    let event = setup.event().await.unwrap();
    assert!(event.maybe_applied, "{event:?}");
    setup.clock.advance_ms(2_000);
    let report = worker.drain().await.unwrap();
    assert_eq!((report.dead, report.unknown), (0, 1), "{report:?}");
    let event = setup.event().await.unwrap();
    assert_eq!((event.status, event.attempt), (EventStatus::Unknown, 3));
    assert_eq!(
        setup.state(&event.key).await,
        Some(OperationState::OutcomeUnknown)
    );

    let report = Reconciler::new(&setup.dispatcher).run_once().await.unwrap();
    assert_eq!(report.requeued, 1);
    let event = setup.event().await.unwrap();
    assert!(!event.maybe_applied, "found not applied: {event:?}");
    assert_eq!(worker.drain().await.unwrap().delivered, 1);
    assert_eq!(setup.bank.applied(&event.key), 1);
}

#[tokio::test]
async fn a_worker_without_handlers_is_not_built() {
    let store = Arc::new(MemoryStore::new());
    let err = OutboxWorker::builder(store).build().unwrap_err();
    assert!(err.to_string().contains("no handler"), "{err}");
}

/// Asks for a large refund, approves it, runs `meanwhile`, and calls again: the answer once
/// approved.
async fn approved_large_refund(setup: &Setup, meanwhile: impl FnOnce()) -> Value {
    let session = Session::new(AuthContext::new(TENANT, "agent"), "run-1");
    let ask = |id: &str| {
        ToolCall::new(
            id,
            "request_large_refund",
            json!({"order_id": "ORD-2002", "amount": 500}),
        )
    };
    let waiting = setup
        .dispatcher
        .dispatch(&session, ask("c1"))
        .await
        .unwrap()
        .result;
    let waiting = waiting.to_json();
    assert_eq!(waiting["status"], "awaiting_approval", "{waiting}");
    assert!(
        setup
            .store
            .list_events(Default::default())
            .await
            .unwrap()
            .is_empty()
    );
    let id = waiting["error"]["approval_id"].as_str().unwrap().to_owned();
    let approver = toolgate_test::operator(TENANT, "manager", &["refund:approve"]);
    let request = DecideRequest {
        id: &id,
        approver: &approver,
        verdict: Verdict::Approve,
        reason: "checked with the customer",
        now_ms: setup.clock.now_ms(),
    };
    toolgate::approval::decide(&*setup.store, request)
        .await
        .unwrap();
    meanwhile();
    let answer = setup
        .dispatcher
        .dispatch(&session, ask("c2"))
        .await
        .unwrap()
        .result;
    answer.to_json()
}

#[tokio::test(start_paused = true)]
async fn an_approved_outbox_operation_commits_queued() {
    let setup = setup();
    let answer = approved_large_refund(&setup, || {}).await;
    assert_eq!(answer["status"], "queued", "{answer}");
    let event = setup.event().await.expect("its event");
    assert_eq!(event.status, EventStatus::Pending);
    assert_eq!(setup.state(&event.key).await, Some(OperationState::Queued));
}

#[tokio::test(start_paused = true)]
async fn an_approved_outbox_operation_that_fails_its_checks_is_rejected_with_nothing_queued() {
    let setup = setup();
    // The check passes when the approval is asked, and refuses once it is approved.
    let bank = setup.bank.clone();
    let answer =
        approved_large_refund(&setup, move || *bank.body.lock().unwrap() = Body::Fail).await;
    assert_eq!(answer["status"], "rejected", "{answer}");
    assert!(
        answer["error"]["why"]
            .as_str()
            .unwrap()
            .contains("refunds are closed"),
        "{answer}"
    );
    assert_eq!(setup.event().await, None, "nothing queued");
    let records = setup
        .store
        .list_operations(Default::default())
        .await
        .unwrap();
    assert_eq!(records[0].state, OperationState::Rejected);
}

#[tokio::test(start_paused = true)]
async fn run_delivers_at_every_poll_until_its_shutdown() {
    let setup = setup();
    let worker = setup.worker(false);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        worker.run(Duration::from_secs(1), shutdown).await
    });
    setup.call("c1").await;
    let mut polls = 0;
    while setup.event().await.unwrap().status != EventStatus::Delivered {
        polls += 1;
        assert!(polls <= 3, "delivered within a few polls");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    assert_eq!(*setup.bank.calls.lock().unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_backoffs_jitter_is_drawn_from_the_seed_under_its_cap() {
    let mut waits = Vec::new();
    for _ in 0..2 {
        let setup = setup();
        setup.call("c1").await;
        setup.bank.script([Answer::Unavailable]);
        let worker = OutboxWorker::builder(setup.store.clone())
            .clock(setup.clock.clone())
            .seed(7)
            .retry(RetrySpec {
                max_attempts: Some(3),
                base: Some(Duration::from_secs(4)),
                max: Some(Duration::from_secs(60)),
                jitter: Some(true),
            })
            .deliver(
                "request_refund",
                Handler {
                    bank: setup.bank.clone(),
                    honours: false,
                },
            )
            .build()
            .unwrap();
        assert_eq!(worker.run_once().await.unwrap().retrying, 1);
        let event = setup.event().await.unwrap();
        waits.push(event.due_ms - setup.clock.now_ms());
    }
    assert_eq!(waits[0], waits[1], "the same seed draws the same wait");
    assert!((0..=4_000).contains(&waits[0]), "{waits:?}");
}
