//! A PostgreSQL outage, for real: the test creates a cluster of its own, runs refunds through
//! the dispatcher on it, stops it (once in the middle of a refund, after the provider applied it
//! and before its outcome is recorded), calls while it is down, starts it again, and checks that
//! every operation settles and that the provider's ledger is exact.
//!
//! While the database is down, every call answers within the bounded wait that the store could
//! not be reached and nothing ran (a spent retry budget, DESIGN §11), and no call is answered
//! `in_progress`. Once it is back, the outcome the dispatcher kept is written, a lease left by a
//! dropped dispatcher is settled by the reconciler (through the tool's hook, with the project's
//! `ManualClock` moved past the lease), each refund was applied once and every applied one is
//! recorded as succeeded with the provider's receipt.
//!
//! Needs PostgreSQL's cluster tools and root (`OwnCluster` says so and fails, never skips).
//!
//! How fast a stopped cluster is answered (the figures of guide `stores`) is measured in `bound`.

mod bound;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::reconcile::Reconciler;
use toolgate::store::OperationState;
use toolgate::store::PostgresStore;
use toolgate::store::prelude::*;
use toolgate_test::ManualClock;
use toolgate_test_postgres::OwnCluster;

/// How long the store waits for a connection in this test.
const ACQUIRE: Duration = Duration::from_secs(1);

/// The provider: one receipt per idempotency key, and how often each key was applied.
#[derive(Default)]
struct Ledger {
    receipts: Mutex<BTreeMap<String, Value>>,
    applied: Mutex<BTreeMap<String, u32>>,
    /// Set: the next refund stops the database after it is applied, before it answers.
    outage_during_run: AtomicBool,
    cluster: Mutex<Option<Arc<OwnCluster>>>,
}

/// Refund an order.
#[tool(side_effect = "write", key = [order_id], timeout = "20s", reconcile = find_refund)]
async fn refund(
    ctx: &Ctx,
    key: &IdempotencyKey,
    order_id: String,
    amount: f64,
) -> Result<Value, ToolError> {
    let ledger = ctx.state::<Arc<Ledger>>()?;
    let key = key.to_string();
    let receipt = json!({"refund_id": format!("re_{order_id}"), "amount": amount});
    *ledger
        .applied
        .lock()
        .unwrap()
        .entry(key.clone())
        .or_default() += 1;
    ledger.receipts.lock().unwrap().insert(key, receipt.clone());
    if ledger.outage_during_run.swap(false, Ordering::SeqCst) {
        let cluster = ledger.cluster.lock().unwrap().clone().expect("a cluster");
        tokio::task::spawn_blocking(move || cluster.stop())
            .await
            .expect("the cluster stops");
    }
    Ok(receipt)
}

/// Asks the provider for the refund under the operation's key.
async fn find_refund(
    ctx: &Ctx,
    key: &IdempotencyKey,
    order_id: String,
    amount: f64,
) -> Result<Option<Value>, ToolError> {
    let _ = (order_id, amount);
    let ledger = ctx.state::<Arc<Ledger>>()?;
    Ok(ledger.receipts.lock().unwrap().get(key.as_str()).cloned())
}

struct Outage {
    cluster: Arc<OwnCluster>,
    store: Arc<PostgresStore>,
    ledger: Arc<Ledger>,
    clock: Arc<ManualClock>,
    /// Every result the model saw, for the check that none was `in_progress`.
    seen: Mutex<Vec<Value>>,
}

impl Outage {
    fn dispatcher(&self) -> Dispatcher {
        let mut registry = Registry::new();
        registry.register::<refund>().unwrap();
        Dispatcher::builder(registry)
            .state(self.ledger.clone())
            .store(self.store.clone())
            .clock(self.clock.clone())
            .jitter_seed(5)
            .build()
    }

    async fn refund(&self, dispatcher: &Dispatcher, id: &str, order: &str) -> Value {
        let session = crate::support::session();
        let call = ToolCall::new(id, "refund", json!({"order_id": order, "amount": 10}));
        let result = dispatcher
            .dispatch(&session, call)
            .await
            .unwrap()
            .result
            .to_json();
        self.seen.lock().unwrap().push(result.clone());
        result
    }

    async fn start(&self) {
        let cluster = self.cluster.clone();
        tokio::task::spawn_blocking(move || cluster.start())
            .await
            .unwrap();
    }
}

/// The answer to a call made while the database is down.
fn assert_unreachable(result: &Value) {
    assert_eq!(result["status"], "error", "{result}");
    assert_eq!(result["error"]["kind"], "unavailable", "{result}");
    assert_eq!(
        result["error"]["what"],
        "this call ran nothing: the operation store could not be reached to record refund",
        "{result}"
    );
    assert!(
        result["error"]["why"]
            .as_str()
            .unwrap()
            .contains("whether an earlier call with these arguments was applied cannot be read"),
        "{result}"
    );
    assert!(!result.to_string().contains("did not run"), "{result}");
}

/// The store wait (5 s by default, the store policy's tries and backoffs within it), and room
/// for a loaded machine: a ceiling, never a synchronisation.
const CEILING: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_is_answered_truly_and_every_refund_settles_exactly_once() {
    let cluster = Arc::new(
        tokio::task::spawn_blocking(OwnCluster::create)
            .await
            .unwrap(),
    );
    let store = PostgresStore::options(&cluster.url())
        .acquire_timeout(ACQUIRE)
        .connect()
        .await
        .expect("the store connects to the test's cluster");
    let ledger = Arc::new(Ledger::default());
    *ledger.cluster.lock().unwrap() = Some(cluster.clone());
    let outage = Outage {
        cluster,
        store: Arc::new(store),
        ledger,
        clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        seen: Mutex::new(Vec::new()),
    };
    let desk = outage.dispatcher();

    // Up: a refund runs and is recorded.
    let first = outage.refund(&desk, "c1", "ORD-1").await;
    assert_eq!(first["status"], "succeeded", "{first}");

    // Down in the middle of a refund: applied, and its result cannot be recorded.
    outage
        .ledger
        .outage_during_run
        .store(true, Ordering::SeqCst);
    let cut = outage.refund(&desk, "c2", "ORD-2").await;
    assert_eq!(cut["status"], "outcome_unknown", "{cut}");
    assert_eq!(
        cut["error"]["what"],
        "refund ran, but its result could not be recorded"
    );

    // A dispatcher of another process runs a refund, and dies before the database comes back.
    outage.start().await;
    let doomed = outage.dispatcher();
    outage
        .ledger
        .outage_during_run
        .store(true, Ordering::SeqCst);
    let lost = outage.refund(&doomed, "d1", "ORD-4").await;
    assert_eq!(lost["status"], "outcome_unknown", "{lost}");
    drop(doomed);

    // Down: new calls and re-asks answer within the bound that this call ran nothing, never
    // that the operation did not run; the refund this process ran and keeps is answered as such.
    for (id, order) in [
        ("c3", "ORD-3"),
        ("c4", "ORD-2"),
        ("c5", "ORD-4"),
        ("c5b", "ORD-1"),
    ] {
        let started = Instant::now();
        let result = outage.refund(&desk, id, order).await;
        let waited = started.elapsed();
        if order == "ORD-2" {
            assert_eq!(result["status"], "outcome_unknown", "{result}");
            assert_eq!(
                result["error"]["what"],
                "an earlier refund call with these arguments ran, but its outcome is not recorded yet"
            );
        } else {
            assert_unreachable(&result);
        }
        assert!(waited < CEILING, "{id} waited {waited:?}");
    }
    assert!(
        !outage
            .ledger
            .applied
            .lock()
            .unwrap()
            .keys()
            .any(|k| k.contains("ORD-3")),
        "nothing ran while the database was down"
    );
    assert_eq!(outage.ledger.applied.lock().unwrap().len(), 3);

    // Back up: the kept outcome is written, the new call runs, the dead lease is reconciled.
    outage.start().await;
    let again = outage.refund(&desk, "c6", "ORD-2").await;
    assert_eq!(again["status"], "succeeded", "{again}");
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(
        again["data"],
        json!({"refund_id": "re_ORD-2", "amount": 10.0})
    );
    let third = outage.refund(&desk, "c7", "ORD-3").await;
    assert_eq!(third["status"], "succeeded", "{third}");
    assert_eq!(third["replayed"], false, "{third}");

    outage.clock.advance_ms(3_600_000);
    let report = Reconciler::new(&desk).run_once().await.unwrap();
    assert_eq!(
        (report.expired_leases, report.succeeded),
        (1, 1),
        "{report:?}"
    );
    let fourth = outage.refund(&desk, "c8", "ORD-4").await;
    assert_eq!(fourth["status"], "succeeded", "{fourth}");
    assert_eq!(fourth["replayed"], true, "{fourth}");

    // The ledger is exact: every refund applied once, and each recorded with its receipt.
    let applied = outage.ledger.applied.lock().unwrap().clone();
    assert_eq!(applied.len(), 4, "{applied:?}");
    assert!(applied.values().all(|&n| n == 1), "{applied:?}");
    let receipts = outage.ledger.receipts.lock().unwrap().clone();
    for (key, receipt) in &receipts {
        let record = outage.store.get("acme", key).await.unwrap().unwrap();
        assert_eq!(record.state, OperationState::Succeeded, "{key}");
        let stored: Value = serde_json::from_str(record.result.as_deref().unwrap()).unwrap();
        assert_eq!(&stored, receipt, "{key}");
    }
    assert!(outage.store.list_unknown(100).await.unwrap().is_empty());
    let seen = outage.seen.lock().unwrap();
    assert!(
        seen.iter().all(|result| result["status"] != "in_progress"),
        "no call was answered in_progress: {seen:?}"
    );
}
