//! The recording failpoint hook on a real dispatcher: a write reaches claimed, executed and
//! recorded in that order, a read reaches none, and a write stopped at a step leaves the store as
//! that step left it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::store::OperationState;
use toolgate::store::prelude::*;
use toolgate::{dispatch::Failpoint, idempotency};
use toolgate_test::{MemoryStore, RecordingFailpoints};

/// Runs of `refund`.
#[derive(Default)]
struct Runs(AtomicU32);

/// Refund an order.
#[tool(side_effect = "write", key = [order_id], timeout = "10s")]
async fn refund(ctx: &Ctx, order_id: String) -> Result<Value, ToolError> {
    ctx.state::<Arc<Runs>>()?.0.fetch_add(1, Ordering::SeqCst);
    Ok(json!({"refund_id": format!("re_{order_id}")}))
}

/// Look up an order.
#[tool(timeout = "10s")]
async fn get_order(order_id: String) -> Result<Value, ToolError> {
    Ok(json!({"order_id": order_id}))
}

struct Desk {
    dispatcher: Dispatcher,
    store: Arc<MemoryStore>,
    runs: Arc<Runs>,
    failpoints: Arc<RecordingFailpoints>,
}

fn desk(failpoints: RecordingFailpoints) -> Desk {
    let mut registry = Registry::new();
    registry.register::<refund>().unwrap();
    registry.register::<get_order>().unwrap();
    let (store, runs) = (Arc::new(MemoryStore::new()), Arc::new(Runs::default()));
    let failpoints = Arc::new(failpoints);
    let dispatcher = Dispatcher::builder(registry)
        .state(runs.clone())
        .store(store.clone())
        .failpoints(failpoints.clone())
        .build();
    Desk {
        dispatcher,
        store,
        runs,
        failpoints,
    }
}

fn session() -> Session {
    Session::new(AuthContext::new("acme", "agent"), "run-1")
}

async fn call(dispatcher: &Dispatcher, name: &str, args: Value) -> Value {
    dispatcher
        .dispatch(&session(), ToolCall::new("call_1", name, args))
        .await
        .expect("no call aborts the run")
        .result
        .to_json()
}

#[tokio::test]
async fn a_write_reaches_each_step_in_order_and_a_read_none() {
    let desk = desk(RecordingFailpoints::new());
    call(&desk.dispatcher, "get_order", json!({"order_id": "ORD-1"})).await;
    assert_eq!(desk.failpoints.hits(), [], "a read is not recorded");

    let result = call(&desk.dispatcher, "refund", json!({"order_id": "ORD-1"})).await;
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(
        desk.failpoints.hits(),
        [Failpoint::Claimed, Failpoint::Executed, Failpoint::Recorded]
    );
    let replay = call(&desk.dispatcher, "refund", json!({"order_id": "ORD-1"})).await;
    assert_eq!(replay["replayed"], true, "{replay}");
    assert_eq!(
        desk.failpoints.count(Failpoint::Claimed),
        1,
        "a replay claims nothing"
    );
}

/// Stopped after the tool ran and before its outcome was written: the refund was applied, the
/// record is still `processing`, and `recorded` was never reached.
#[tokio::test]
async fn a_write_stopped_after_it_ran_leaves_its_claim_processing() {
    let desk = desk(RecordingFailpoints::new().panic_at(Failpoint::Executed));
    let dispatcher = desk.dispatcher.clone();
    let stopped =
        tokio::spawn(
            async move { call(&dispatcher, "refund", json!({"order_id": "ORD-2"})).await },
        )
        .await
        .expect_err("the failpoint ends the call's task");
    assert!(stopped.is_panic());
    assert_eq!(desk.runs.0.load(Ordering::SeqCst), 1, "the tool ran");
    assert_eq!(
        desk.failpoints.hits(),
        [Failpoint::Claimed, Failpoint::Executed]
    );
    let key = idempotency::operation_key(
        refund::descriptor(),
        "acme",
        "run-1",
        &json!({"order_id": "ORD-2"}),
    );
    let record = desk
        .store
        .get("acme", &key)
        .await
        .unwrap()
        .expect("claimed");
    assert_eq!(record.state, OperationState::Processing);
}
