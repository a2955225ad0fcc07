//! Faults inside a write's call, on both durable stores (a SQLite file and a PostgreSQL server):
//! a tool that panics (a read and a write in one turn, beside a healthy call; the write then
//! settled by the reconciler), a tool error holding NUL and other control characters, retries
//! that run out (the record keeps each attempt's own error), and a store that fails after the
//! tool ran (never told "it did not run").
//!
//! The PostgreSQL tests need a server: `toolgate_test_postgres::test_database` finds or
//! starts one and gives each test a fresh database (a test fails, never skips, without one).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::reconcile::Reconciler;
use toolgate::store::{AttemptError, OperationRecord, OperationState, OperationStore};
use toolgate_test::{ControlledStore, Fault, Request};

use crate::support::stores;
use stores::{postgres, sqlite};

/// Words with a NUL and other control characters, as a provider may send them.
const AWKWARD: &str = "the provider refused: amount\0invalid \u{7}\u{1b}[0m\ttab\nline \u{2028}";

/// A payment provider: refunds by idempotency key.
#[derive(Default)]
struct Provider {
    refunds: Mutex<BTreeMap<String, Value>>,
    runs: AtomicU32,
}

/// Look up an order. The order `PANIC` makes it panic.
#[tool(timeout = "10s")]
async fn get_order(order_id: String) -> Result<Value, ToolError> {
    if order_id == "PANIC" {
        panic!("the lookup exploded: internal detail 7f3a");
    }
    Ok(json!({"order_id": order_id, "status": "paid"}))
}

/// A customer id whose reading panics.
#[derive(schemars::JsonSchema)]
struct CustomerId(String);

impl<'de> serde::Deserialize<'de> for CustomerId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = String::deserialize(deserializer)?;
        panic!("reading {id} exploded: internal detail 91c2");
    }
}

/// What `get_customer` takes.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct CustomerQuery {
    /// The customer.
    id: CustomerId,
}

/// Look up a customer; reading its argument panics.
#[tool(timeout = "10s")]
async fn get_customer(Args(query): Args<CustomerQuery>) -> Result<Value, ToolError> {
    Ok(json!({"customer": query.id.0}))
}

/// Refund an order. `PANIC-*` applies the refund, then panics; `NUL` is refused with words
/// holding a NUL; `DOWN` answers 503 on every attempt, each in its own words.
#[tool(
    side_effect = "write",
    key = [order_id],
    timeout = "10s",
    retry(max_attempts = 3, base = "1ms", max = "2ms"),
    reconcile = find_refund(ctx, key)
)]
async fn refund(
    ctx: &Ctx,
    key: &IdempotencyKey,
    order_id: String,
    amount: f64,
) -> Result<Value, ToolError> {
    let provider = ctx.state::<Arc<Provider>>()?;
    let run = provider.runs.fetch_add(1, Ordering::SeqCst) + 1;
    match order_id.as_str() {
        "NUL" => return Err(ToolError::refused(AWKWARD)),
        "DOWN" => {
            return Err(ToolError::unavailable(format!(
                "run {run}: the provider answered 503"
            )));
        }
        _ => {}
    }
    let key = key.to_string();
    let receipt = json!({"refund_id": format!("re_{order_id}"), "amount": amount});
    provider
        .refunds
        .lock()
        .unwrap()
        .insert(key, receipt.clone());
    if order_id.starts_with("PANIC") {
        panic!("the refund exploded after it was applied: internal detail 5be0");
    }
    Ok(receipt)
}

/// Asks the provider for the refund under the operation's key.
async fn find_refund(ctx: &Ctx, key: &IdempotencyKey) -> Result<Option<Value>, ToolError> {
    let provider = ctx.state::<Arc<Provider>>()?;
    Ok(provider.refunds.lock().unwrap().get(key.as_str()).cloned())
}

struct Desk {
    dispatcher: Dispatcher,
    provider: Arc<Provider>,
    session: Session,
}

fn desk(store: Arc<dyn OperationStore>) -> Desk {
    let mut registry = Registry::new();
    registry.register::<get_order>().unwrap();
    registry.register::<get_customer>().unwrap();
    registry.register::<refund>().unwrap();
    let provider = Arc::new(Provider::default());
    let dispatcher = Dispatcher::builder(registry)
        .state(provider.clone())
        .store(store)
        .jitter_seed(7)
        .build();
    let session = crate::support::session();
    Desk {
        dispatcher,
        provider,
        session,
    }
}

impl Desk {
    async fn turn(&self, calls: Vec<ToolCall>) -> Vec<Value> {
        self.dispatcher
            .dispatch_turn(&self.session, calls)
            .await
            .expect("no call aborts the run")
            .into_iter()
            .map(|report| report.result.to_json())
            .collect()
    }

    async fn call(&self, name: &str, args: Value) -> Value {
        self.turn(vec![ToolCall::new("call_x", name, args)])
            .await
            .remove(0)
    }

    /// The record of the refund of `order_id`.
    async fn record(&self, order_id: &str) -> OperationRecord {
        let args = json!({"order_id": order_id, "amount": 5.0});
        let key =
            toolgate::idempotency::operation_key(refund::descriptor(), "acme", "run-1", &args);
        self.dispatcher
            .store()
            .unwrap()
            .get("acme", &key)
            .await
            .unwrap()
            .expect("the refund is recorded")
    }
}

/// A panicking read and a panicking write in one turn, beside a healthy read: each call gets
/// its own result; the panics' messages reach neither the model nor the record; the write is
/// `outcome_unknown`, never retried, and the reconciler settles it as applied.
async fn a_panic_stays_inside_its_call(store: Arc<dyn OperationStore>) {
    let desk = desk(store);
    let results = desk
        .turn(vec![
            ToolCall::new("call_1", "get_order", json!({"order_id": "PANIC"})),
            ToolCall::new(
                "call_2",
                "refund",
                json!({"order_id": "PANIC-1", "amount": 5.0}),
            ),
            ToolCall::new("call_3", "get_order", json!({"order_id": "ORD-1"})),
            ToolCall::new("call_4", "get_customer", json!({"id": "C-1"})),
        ])
        .await;
    assert_eq!(results.len(), 4);
    assert_eq!(results[0]["status"], "error", "{}", results[0]);
    assert_eq!(results[0]["error"]["kind"], "internal");
    assert_eq!(results[0]["error"]["what"], "get_order failed unexpectedly");
    assert_eq!(results[1]["status"], "outcome_unknown", "{}", results[1]);
    assert_eq!(
        results[2],
        json!({"status": "succeeded", "replayed": false,
               "data": {"order_id": "ORD-1", "status": "paid"}})
    );
    assert_eq!(results[3]["error"]["kind"], "internal", "{}", results[3]);
    for result in &results {
        assert!(!result.to_string().contains("internal detail"), "{result}");
    }
    assert_eq!(
        desk.provider.runs.load(Ordering::SeqCst),
        1,
        "a panic is never retried"
    );

    let record = desk.record("PANIC-1").await;
    assert_eq!(record.state, OperationState::OutcomeUnknown);
    assert_eq!(record.errors.len(), 1, "{:?}", record.errors);
    assert_eq!(record.errors[0].kind, "internal");
    assert_eq!(record.errors[0].attempt, 1);
    assert!(!record.errors[0].what.contains("internal detail"));

    let report = Reconciler::new(&desk.dispatcher).run_once().await.unwrap();
    assert_eq!(report.succeeded, 1, "{report:?}");
    assert_eq!(
        desk.record("PANIC-1").await.state,
        OperationState::Succeeded
    );
    let replay = desk
        .call("refund", json!({"order_id": "PANIC-1", "amount": 5.0}))
        .await;
    assert_eq!(
        replay,
        json!({"status": "succeeded", "replayed": true,
               "data": {"refund_id": "re_PANIC-1", "amount": 5.0}})
    );
    assert_eq!(desk.provider.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_panic_stays_inside_its_call_on_sqlite() {
    let (store, _dir) = sqlite().await;
    a_panic_stays_inside_its_call(store).await;
}

#[tokio::test]
async fn a_panic_stays_inside_its_call_on_postgres() {
    a_panic_stays_inside_its_call(postgres().await).await;
}

/// A refusal whose words hold a NUL and other control characters is recorded as it was said,
/// and the model reads those words, not a store failure.
async fn an_error_with_any_characters_is_recorded(store: Arc<dyn OperationStore>) {
    let desk = desk(store);
    let result = desk
        .call("refund", json!({"order_id": "NUL", "amount": 5.0}))
        .await;
    assert_eq!(result["status"], "error", "{result}");
    assert_eq!(result["error"]["kind"], "refused");
    assert_eq!(result["error"]["what"], AWKWARD);
    let record = desk.record("NUL").await;
    assert_eq!(record.state, OperationState::Failed);
    assert_eq!(
        record.errors,
        vec![AttemptError {
            attempt: 1,
            kind: "refused".into(),
            what: AWKWARD.into(),
        }]
    );
}

#[tokio::test]
async fn an_error_with_any_characters_is_recorded_on_sqlite() {
    let (store, _dir) = sqlite().await;
    an_error_with_any_characters_is_recorded(store).await;
}

#[tokio::test]
async fn an_error_with_any_characters_is_recorded_on_postgres() {
    an_error_with_any_characters_is_recorded(postgres().await).await;
}

/// Three attempts of `unavailable`: the model reads the summary, the record holds the three
/// attempts' own errors.
async fn the_record_keeps_every_attempts_own_error(store: Arc<dyn OperationStore>) {
    let desk = desk(store);
    let result = desk
        .call("refund", json!({"order_id": "DOWN", "amount": 5.0}))
        .await;
    assert_eq!(result["error"]["kind"], "unavailable", "{result}");
    assert_eq!(desk.provider.runs.load(Ordering::SeqCst), 3);
    let record = desk.record("DOWN").await;
    assert_eq!(record.state, OperationState::Failed);
    let own = |attempt: u32| AttemptError {
        attempt,
        kind: "unavailable".into(),
        what: format!("run {attempt}: the provider answered 503"),
    };
    assert_eq!(record.errors, vec![own(1), own(2), own(3)]);
}

#[tokio::test]
async fn the_record_keeps_every_attempts_own_error_on_sqlite() {
    let (store, _dir) = sqlite().await;
    the_record_keeps_every_attempts_own_error(store).await;
}

#[tokio::test]
async fn the_record_keeps_every_attempts_own_error_on_postgres() {
    the_record_keeps_every_attempts_own_error(postgres().await).await;
}

/// Once the tool ran, no answer says it did not. When the store cannot record what became of
/// it: a refusal is still the tool's own refusal (it proves nothing was applied, and the
/// dispatcher keeps it to record later); a fault whose retry cannot be recorded says the call was
/// not tried again; a panic and a result are `outcome_unknown`, in words that say it ran.
#[tokio::test]
async fn a_store_that_fails_after_the_tool_ran_is_never_said_to_have_stopped_it() {
    let (store, _dir) = sqlite().await;
    // Every write after the claim fails: the tool has run by then.
    let failing = ControlledStore::new(store);
    failing.fail_all(
        &[
            Request::Succeed,
            Request::Fail,
            Request::MarkUnknown,
            Request::RecordRetry,
        ],
        Fault::Backend("the connection was reset".into()),
    );
    let desk = desk(Arc::new(failing));
    for (order_id, runs) in [("NUL", 1), ("DOWN", 2), ("PANIC-2", 3), ("ORD-9", 4)] {
        let result = desk
            .call("refund", json!({"order_id": order_id, "amount": 5.0}))
            .await;
        let what = result["error"]["what"].as_str().unwrap();
        match order_id {
            "NUL" => assert_eq!(result["error"]["kind"], "refused", "{result}"),
            "DOWN" => {
                assert_eq!(result["status"], "error", "{result}");
                assert!(what.contains("was not tried again"), "{what}");
            }
            _ => {
                assert_eq!(result["status"], "outcome_unknown", "{order_id}: {result}");
                assert!(what.contains(" ran"), "{order_id}: {what}");
            }
        }
        assert!(!result.to_string().contains("did not run"), "{result}");
        assert_eq!(
            desk.provider.runs.load(Ordering::SeqCst),
            runs,
            "{order_id}"
        );
    }
}
