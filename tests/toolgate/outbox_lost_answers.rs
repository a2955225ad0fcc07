//! An outbox delivery the provider applied and whose answer was lost, followed by 503s until the
//! worker's budget is spent, is never dead-lettered: the event becomes `unknown`, its operation
//! `outcome_unknown`, and the reconciler finds the refund and settles it `succeeded`, one refund
//! in the provider's ledger; each delivery attempt has its audit record. On a SQLite file, on
//! the test PostgreSQL server, and in memory.

use crate::support::stores;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::store::{
    AuditKind, AuditQuery, EventQuery, EventStatus, OperationState, OperationStore, OutboxEvent,
};
use toolgate::{
    outbox::{Deliver, OutboxWorker},
    reconcile::Reconciler,
    tool::RetrySpec,
};
use toolgate_test::{ManualClock, MemoryStore};

const TENANT: &str = "acme";

/// How the provider answers one delivery.
#[derive(Debug, Clone, Copy)]
enum Answer {
    /// Applies the refund, then the connection drops before its answer arrives.
    AppliedThenLost,
    /// 503 before anything is applied.
    Unavailable,
}

/// A payment provider that applies one idempotency key once, with a script of faults.
#[derive(Default)]
struct Provider {
    /// Refunds applied, by idempotency key: the provider's ledger.
    ledger: Mutex<BTreeMap<String, u32>>,
    /// How the next deliveries are answered; then each is applied and answered.
    script: Mutex<VecDeque<Answer>>,
}

impl Provider {
    fn refunds(&self, key: &str) -> u32 {
        self.ledger.lock().unwrap().get(key).copied().unwrap_or(0)
    }

    fn deliver(&self, event: &OutboxEvent) -> Result<Value, ToolError> {
        let next = self.script.lock().unwrap().pop_front();
        if let Some(Answer::Unavailable) = next {
            return Err(ToolError::unavailable("the provider answered 503"));
        }
        // One key, one refund.
        self.ledger
            .lock()
            .unwrap()
            .entry(event.key.clone())
            .or_insert(1);
        match next {
            Some(Answer::AppliedThenLost) => Err(ToolError::outcome_unknown(
                "the connection was reset after the request was sent",
            )),
            _ => Ok(json!({"refund_id": "re_1"})),
        }
    }
}

/// The worker's handler: the provider honours the key, so a lost answer is sent again.
struct Handler(Arc<Provider>);

#[async_trait::async_trait]
impl Deliver for Handler {
    async fn deliver(&self, event: &OutboxEvent) -> Result<Value, ToolError> {
        self.0.deliver(event)
    }

    fn honours_key(&self) -> bool {
        true
    }
}

/// Record a refund request; a worker sends it to the payment provider.
#[tool(side_effect = "write", delivery = "outbox", key = [order_id], reconcile = find_refund(provider, key))]
async fn request_refund(
    ctx: &Ctx,
    provider: State<Arc<Provider>>,
    key: &IdempotencyKey,
    order_id: String,
    amount: f64,
) -> Result<Value, ToolError> {
    let _ = (provider, key);
    ctx.enqueue(&json!({"order_id": order_id, "amount": amount}))?;
    Ok(json!({"request": order_id, "amount": amount}))
}

/// Asks the provider whether it holds a refund under the key.
async fn find_refund(
    provider: State<Arc<Provider>>,
    key: &IdempotencyKey,
) -> Result<Option<Value>, ToolError> {
    Ok((provider.refunds(key.as_str()) > 0).then(|| json!({"refund_id": "re_1"})))
}

/// One refund, its first delivery applied with its answer lost and the next two answered 503,
/// under a budget of three deliveries; then the reconciler.
async fn an_applied_delivery_with_its_answer_lost_then_503s_is_never_dead(
    store: Arc<dyn OperationStore>,
) {
    let mut registry = Registry::new();
    registry.register::<request_refund>().unwrap();
    let provider = Arc::new(Provider::default());
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let dispatcher = Dispatcher::builder(registry)
        .state(provider.clone())
        .store(store.clone())
        .clock(clock.clone())
        .build();
    let worker = OutboxWorker::builder(store.clone())
        .name("w1")
        .clock(clock.clone())
        .retry(RetrySpec {
            max_attempts: Some(3),
            base: Some(Duration::from_secs(1)),
            max: Some(Duration::from_secs(10)),
            jitter: Some(false),
        })
        .deliver("request_refund", Handler(provider.clone()))
        .build()
        .unwrap();
    // One run: the key does not depend on the key scope.
    let session = Session::new(AuthContext::new(TENANT, "agent"), "run-1");
    let call = |id: &str| {
        let call = ToolCall::new(
            id,
            "request_refund",
            json!({"order_id": "ORD-1001", "amount": 25}),
        );
        let dispatcher = dispatcher.clone();
        let session = session.clone();
        async move {
            dispatcher
                .dispatch(&session, call)
                .await
                .unwrap()
                .result
                .to_json()
        }
    };
    let dead = || async {
        let query = EventQuery {
            status: Some(EventStatus::Dead),
            ..EventQuery::default()
        };
        store.list_events(query).await.unwrap()
    };

    let queued = call("c1").await;
    assert_eq!(queued["status"], "queued", "{queued}");
    let key = queued["delivery"]["operation"].as_str().unwrap().to_owned();
    provider.script.lock().unwrap().extend([
        Answer::AppliedThenLost,
        Answer::Unavailable,
        Answer::Unavailable,
    ]);

    // Attempt 1 is applied and its answer lost: sent again, since the provider honours the key.
    assert_eq!(worker.run_once().await.unwrap().retrying, 1);
    assert_eq!(provider.refunds(&key), 1);
    let retrying = call("c1b").await;
    assert_eq!(retrying["status"], "queued", "{retrying}");
    let note = retrying["delivery"]["what"].as_str().unwrap();
    assert!(
        note.contains("one of those may have been applied (its answer was lost)")
            && !note.contains("without being applied"),
        "{retrying}"
    );
    // Attempts 2 and 3 meet 503s, 1 s and 2 s later; the third spends the budget.
    clock.advance_ms(1_000);
    assert_eq!(worker.run_once().await.unwrap().retrying, 1);
    clock.advance_ms(2_000);
    let report = worker.run_once().await.unwrap();
    assert_eq!((report.dead, report.unknown), (0, 1), "{report:?}");
    assert!(
        dead().await.is_empty(),
        "never dead with the refund applied"
    );
    let event = store.event(TENANT, &key).await.unwrap().unwrap();
    assert_eq!((event.status, event.attempt), (EventStatus::Unknown, 3));
    let record = store.get(TENANT, &key).await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::OutcomeUnknown);
    let pending = call("c2").await;
    assert_eq!(pending["status"], "outcome_unknown", "{pending}");
    // Each delivery attempt has its audit record.
    let trail = store
        .audit(AuditQuery {
            key: Some(&key),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    let deliveries: Vec<(u32, &str, Option<&str>, &str)> = trail
        .iter()
        .filter(|record| record.entry.kind == AuditKind::Delivery)
        .map(|record| {
            let entry = &record.entry;
            let kind = entry.error_kind.as_deref();
            (
                entry.attempts,
                entry.outcome.as_str(),
                kind,
                entry.actor.as_str(),
            )
        })
        .collect();
    assert_eq!(
        deliveries,
        [
            (1, "retrying", Some("outcome_unknown"), "w1"),
            (2, "retrying", Some("unavailable"), "w1"),
            (3, "unknown", Some("outcome_unknown"), "w1"),
        ]
    );

    // The reconciler asks the provider, which holds the refund.
    let report = Reconciler::new(&dispatcher).run_once().await.unwrap();
    assert_eq!(
        (report.succeeded, report.requeued, report.failed),
        (1, 0, 0)
    );
    let record = store.get(TENANT, &key).await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Succeeded);
    let event = store.event(TENANT, &key).await.unwrap().unwrap();
    assert_eq!(event.status, EventStatus::Delivered);
    let done = call("c3").await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["delivery"]["state"], "delivered", "{done}");
    // Nothing is left to deliver, and the ledger holds one refund.
    clock.advance_ms(60_000);
    assert_eq!(worker.drain().await.unwrap(), Default::default());
    assert!(dead().await.is_empty());
    assert_eq!(provider.refunds(&key), 1);
    assert_eq!(provider.ledger.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn on_sqlite_an_applied_delivery_with_its_answer_lost_is_never_dead() {
    let (store, _dir) = stores::sqlite().await;
    an_applied_delivery_with_its_answer_lost_then_503s_is_never_dead(store).await;
}

#[tokio::test]
async fn on_postgres_an_applied_delivery_with_its_answer_lost_is_never_dead() {
    let store = stores::postgres().await;
    an_applied_delivery_with_its_answer_lost_then_503s_is_never_dead(store).await;
}

#[tokio::test]
async fn in_memory_an_applied_delivery_with_its_answer_lost_is_never_dead() {
    let store: Arc<dyn OperationStore> = Arc::new(MemoryStore::new());
    an_applied_delivery_with_its_answer_lost_then_503s_is_never_dead(store).await;
}
