//! The reconciler settles unknown outcomes through each tool's `reconcile` hook: applied,
//! not applied, still unknown (escalated after N tries), and leases left by crashed workers.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::session;
use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::store::prelude::*;
use toolgate::store::{ClaimRequest, OperationState};
use toolgate::{dispatch::Clock, reconcile::Reconciler};
use toolgate_test::{ManualClock, MemoryStore};

/// A payment provider: refunds by idempotency key, and what the next refund call does.
#[derive(Default)]
struct Provider {
    refunds: Mutex<BTreeMap<String, Value>>,
    /// Apply, then time out (the answer never arrives).
    hang_after_apply: Mutex<bool>,
    /// The lookup cannot answer.
    lookup_down: Mutex<bool>,
    calls: Mutex<u32>,
}

/// Refund an order.
#[tool(side_effect = "write", key = [order_id], timeout = "1s", reconcile = find_refund(provider, key))]
async fn refund(
    provider: State<Arc<Provider>>,
    key: &IdempotencyKey,
    order_id: String,
    amount: f64,
) -> Result<Value, ToolError> {
    *provider.calls.lock().unwrap() += 1;
    let key = key.to_string();
    let receipt =
        json!({"refund_id": format!("re_{}", &key[3..9]), "order_id": order_id, "amount": amount});
    provider
        .refunds
        .lock()
        .unwrap()
        .entry(key)
        .or_insert(receipt.clone());
    if *provider.hang_after_apply.lock().unwrap() {
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    Ok(receipt)
}

/// Asks the provider for the refund under the operation's key: the hook takes only the
/// parameters it uses.
async fn find_refund(
    provider: State<Arc<Provider>>,
    key: &IdempotencyKey,
) -> Result<Option<Value>, ToolError> {
    if *provider.lookup_down.lock().unwrap() {
        return Err(ToolError::unavailable("the lookup answered 503"));
    }
    Ok(provider.refunds.lock().unwrap().get(key.as_str()).cloned())
}

struct Setup {
    dispatcher: Dispatcher,
    provider: Arc<Provider>,
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
}

fn setup() -> Setup {
    let mut registry = Registry::new();
    registry.register::<refund>().unwrap();
    let provider = Arc::new(Provider::default());
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let dispatcher = Dispatcher::builder(registry)
        .state(provider.clone())
        .store(store.clone())
        .clock(clock.clone())
        .build();
    Setup {
        dispatcher,
        provider,
        store,
        clock,
    }
}

async fn refund_call(setup: &Setup, id: &str) -> Value {
    let call = ToolCall::new(id, "refund", json!({"order_id": "ORD-1001", "amount": 500}));
    setup
        .dispatcher
        .dispatch(&session(), call)
        .await
        .unwrap()
        .result
        .to_json()
}

#[tokio::test(start_paused = true)]
async fn an_unknown_outcome_that_was_applied_becomes_the_providers_result() {
    let setup = setup();
    *setup.provider.hang_after_apply.lock().unwrap() = true;
    assert_eq!(refund_call(&setup, "c1").await["status"], "outcome_unknown");
    *setup.provider.hang_after_apply.lock().unwrap() = false;

    let report = Reconciler::new(&setup.dispatcher).run_once().await.unwrap();
    assert_eq!(
        (report.succeeded, report.failed, report.still_unknown),
        (1, 0, 0)
    );
    let replay = refund_call(&setup, "c2").await;
    assert_eq!(replay["status"], "succeeded");
    assert_eq!(replay["replayed"], true);
    let receipt = setup
        .provider
        .refunds
        .lock()
        .unwrap()
        .values()
        .next()
        .cloned()
        .unwrap();
    assert_eq!(replay["data"], receipt, "the result is the provider's");
    assert_eq!(
        *setup.provider.calls.lock().unwrap(),
        1,
        "refunded exactly once"
    );
}

#[tokio::test(start_paused = true)]
async fn an_unknown_outcome_that_was_not_applied_may_run_again() {
    let setup = setup();
    *setup.provider.hang_after_apply.lock().unwrap() = true;
    refund_call(&setup, "c1").await;
    // The provider lost it: nothing under the key.
    setup.provider.refunds.lock().unwrap().clear();
    *setup.provider.hang_after_apply.lock().unwrap() = false;
    let report = Reconciler::new(&setup.dispatcher).run_once().await.unwrap();
    assert_eq!((report.succeeded, report.failed), (0, 1));
    let again = refund_call(&setup, "c2").await;
    assert_eq!(again["status"], "succeeded");
    assert_eq!(again["replayed"], false);
    assert_eq!(setup.provider.refunds.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_still_unknown_outcome_stays_and_escalates_after_n_tries() {
    let setup = setup();
    *setup.provider.hang_after_apply.lock().unwrap() = true;
    refund_call(&setup, "c1").await;
    *setup.provider.lookup_down.lock().unwrap() = true;
    let reconciler = Reconciler::new(&setup.dispatcher).escalate_after(3);
    let mut escalated = Vec::new();
    for _ in 0..4 {
        let report = reconciler.run_once().await.unwrap();
        assert_eq!(report.still_unknown, 1);
        escalated.push(report.escalated);
    }
    assert_eq!(escalated, [0, 0, 1, 1]);
    assert_eq!(
        refund_call(&setup, "c2").await["status"],
        "outcome_unknown",
        "never re-run meanwhile"
    );
    *setup.provider.lookup_down.lock().unwrap() = false;
    assert_eq!(reconciler.run_once().await.unwrap().succeeded, 1);
}

#[tokio::test(start_paused = true)]
async fn a_lease_left_by_a_crashed_worker_is_reconciled() {
    let setup = setup();
    // A worker claimed the operation, called the provider, and died before recording anything.
    let args = json!({"amount": 500, "order_id": "ORD-1001"});
    let descriptor = refund::descriptor();
    let key = toolgate::idempotency::operation_key(descriptor, "acme", "run-1", &args);
    let canonical = toolgate::idempotency::canonical_json(&args);
    let claim = setup
        .store
        .claim(ClaimRequest {
            tenant: "acme",
            key: &key,
            tool: "refund",
            request_hash: &toolgate::idempotency::request_hash(
                &toolgate::idempotency::HashSecret::local_default(),
                "refund",
                &canonical,
            ),
            unkeyed: None,
            arguments: &canonical,
            now_ms: setup.clock.now_ms(),
            lease: Duration::from_secs(10),
            takeover: false,
            approval: None,
        })
        .await
        .unwrap();
    assert!(matches!(
        claim,
        toolgate::store::Claim::Acquired {
            attempt: 1,
            approved: None
        }
    ));
    setup
        .provider
        .refunds
        .lock()
        .unwrap()
        .insert(key.clone(), json!({"refund_id": "re_crash"}));

    let reconciler = Reconciler::new(&setup.dispatcher);
    let early = reconciler.run_once().await.unwrap();
    assert_eq!(early.expired_leases, 0, "the lease still holds");
    setup.clock.advance_ms(10_001);
    let report = reconciler.run_once().await.unwrap();
    assert_eq!((report.expired_leases, report.succeeded), (1, 1));
    let record = setup.store.get("acme", &key).await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Succeeded);
    let replay = refund_call(&setup, "c9").await;
    assert_eq!(replay["data"], json!({"refund_id": "re_crash"}));
    assert_eq!(
        *setup.provider.calls.lock().unwrap(),
        0,
        "the tool never ran twice"
    );
}

#[tokio::test(start_paused = true)]
async fn run_stops_at_shutdown() {
    let setup = setup();
    let reconciler = Reconciler::new(&setup.dispatcher);
    let shutdown = tokio::time::sleep(Duration::from_secs(95));
    reconciler
        .run(Duration::from_secs(30), shutdown)
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_pass_purges_only_settled_records_past_the_retention() {
    let setup = setup();
    refund_call(&setup, "c1").await;
    *setup.provider.hang_after_apply.lock().unwrap() = true;
    let other = ToolCall::new("c2", "refund", json!({"order_id": "ORD-1002", "amount": 5}));
    setup.dispatcher.dispatch(&session(), other).await.unwrap();
    *setup.provider.lookup_down.lock().unwrap() = true;
    let reconciler = Reconciler::new(&setup.dispatcher).retention(Duration::from_secs(3600));
    assert_eq!(reconciler.run_once().await.unwrap().purged, 0);
    setup.clock.advance_ms(3_600_001);
    let report = reconciler.run_once().await.unwrap();
    assert_eq!(
        (report.purged, report.still_unknown),
        (1, 1),
        "the unknown outcome is kept"
    );
    // The purged key may run again: its record is gone after the retention.
    *setup.provider.hang_after_apply.lock().unwrap() = false;
    assert_eq!(refund_call(&setup, "c3").await["replayed"], false);
}
