//! How long a call waits for an operation store that does not answer (DESIGN §5, guide `stores`, "When
//! the operation store cannot be reached"): a write at most the store wait in all, a read at most
//! the counter wait, and not at all once the store is known to be down; a slow store that answers
//! spends none of it; the session keeps the run's limits while the store is away.
//!
//! The store is the memory store behind `toolgate_test::ControlledStore`, down and slow on
//! command (`set_latency` makes every request wait as a client waits for a connection to a
//! stopped server); time is tokio's paused clock, so every wait is exact.
//! `postgres_outage/bound.rs` measures the same on a stopped PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::store::AuditQuery;
use toolgate::store::prelude::*;
use toolgate::{
    RunLimits, dispatch::CallReport, dispatch::DEFAULT_COUNTER_WAIT, dispatch::DEFAULT_STORE_WAIT,
};
use toolgate_test::{ControlledStore, MemoryStore, Request};

/// Refund an order.
#[tool(side_effect = "write", key = [order_id])]
async fn refund(order_id: String, amount: f64) -> Result<Value, ToolError> {
    Ok(json!({"refund_id": format!("re_{order_id}"), "amount": amount}))
}

/// Look up an order by its id.
#[tool]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    Ok(format!("{order_id}: paid"))
}

/// How long a client waits for a connection to a stopped server here (PostgreSQL's default).
const CONNECT_WAIT: Duration = Duration::from_secs(3);

pub(super) struct Desk {
    pub(super) dispatcher: Dispatcher,
    pub(super) store: Arc<ControlledStore<MemoryStore>>,
    pub(super) session: Session,
}

pub(super) fn desk(limits: RunLimits) -> Desk {
    let store = Arc::new(ControlledStore::new(Arc::new(MemoryStore::new())));
    let mut registry = Registry::new();
    registry.register::<refund>().unwrap();
    registry.register::<get_order>().unwrap();
    let dispatcher = Dispatcher::builder(registry)
        .store(store.clone())
        .run_limits(limits)
        .jitter_seed(3)
        .build();
    let session = crate::support::session();
    Desk {
        dispatcher,
        store,
        session,
    }
}

pub(super) fn refund_call(id: &str, order: &str) -> ToolCall {
    ToolCall::new(id, "refund", json!({"order_id": order, "amount": 10}))
}

pub(super) fn read_call(id: &str, order: &str) -> ToolCall {
    ToolCall::new(id, "get_order", json!({"order_id": order}))
}

/// One turn: each report with when it arrived, from the turn's start, in arrival order.
async fn timed_turn(desk: &Desk, calls: Vec<ToolCall>) -> Vec<(CallReport, Duration)> {
    toolgate_test::timed_turn(&desk.dispatcher, &desk.session, calls)
        .await
        .1
}

fn answer(timed: &[(CallReport, Duration)], id: &str) -> (Value, Duration) {
    let (report, at) = timed
        .iter()
        .find(|(report, _)| report.call_id == id)
        .unwrap_or_else(|| panic!("{id} was answered"));
    (report.result.to_json(), *at)
}

#[tokio::test(start_paused = true)]
async fn a_write_waits_at_most_the_store_wait_and_a_read_of_its_turn_the_counter_wait() {
    let desk = desk(RunLimits::DEFAULT);
    desk.store.set_down(true);
    desk.store.set_latency(CONNECT_WAIT);

    let timed = timed_turn(
        &desk,
        vec![refund_call("w1", "ORD-1"), read_call("r1", "ORD-1")],
    )
    .await;
    let (read, read_at) = answer(&timed, "r1");
    let (write, write_at) = answer(&timed, "w1");
    assert_eq!(read["status"], "succeeded", "{read}");
    assert_eq!(
        read_at, DEFAULT_COUNTER_WAIT,
        "the read waited the counters' wait"
    );
    assert_eq!(timed[0].0.call_id, "r1", "the read is answered first");
    assert_eq!(write["error"]["kind"], "unavailable", "{write}");
    // The counters' 250 ms, a first try of 3 s, a backoff, and a second try cut at the end.
    assert_eq!(
        write_at, DEFAULT_STORE_WAIT,
        "the write waited the store wait, no more"
    );
    assert_eq!(desk.store.asked(Request::Claim), 2);
}

#[tokio::test(start_paused = true)]
async fn once_the_store_is_known_down_a_read_waits_for_it_once_a_second_at_most() {
    let desk = desk(RunLimits::DEFAULT);
    desk.store.set_down(true);
    desk.store.set_latency(CONNECT_WAIT);
    let first = timed_turn(&desk, vec![read_call("r1", "ORD-1")]).await;
    assert_eq!(first[0].1, DEFAULT_COUNTER_WAIT, "the first read finds out");
    let asked = desk.store.asked(Request::BeginTurn);

    // Known down: the counters do not ask, and the audit record is kept in memory.
    let second = timed_turn(&desk, vec![read_call("r2", "ORD-1")]).await;
    assert_eq!(second[0].1, Duration::ZERO, "the second read does not wait");
    assert_eq!(desk.store.asked(Request::BeginTurn), asked);
    assert_eq!(desk.store.asked(Request::AppendAudit), 0);

    // A second later, the counters ask the store again, once.
    tokio::time::advance(Duration::from_secs(1)).await;
    let third = timed_turn(
        &desk,
        vec![read_call("r3", "ORD-1"), read_call("r4", "ORD-2")],
    )
    .await;
    assert!(
        third.iter().all(|(_, at)| *at == DEFAULT_COUNTER_WAIT),
        "{third:?}"
    );
    assert_eq!(desk.store.asked(Request::BeginTurn), asked + 1);

    // Back: a write's claim reaches it, and the kept audit records are written, in order.
    desk.store.set_down(false);
    desk.store.set_latency(Duration::ZERO);
    let back = timed_turn(&desk, vec![refund_call("w1", "ORD-1")]).await;
    assert_eq!(answer(&back, "w1").0["status"], "succeeded");
    let next = timed_turn(&desk, vec![read_call("r5", "ORD-1")]).await;
    assert_eq!(next[0].1, Duration::ZERO);
    assert_eq!(
        desk.store.asked(Request::BeginTurn),
        asked + 2,
        "the counters ask it again"
    );
    desk.dispatcher.flush_audit().await;
    let audit = desk
        .store
        .inner()
        .audit(AuditQuery {
            run_id: Some("run-1"),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    let ids: Vec<&str> = audit.iter().map(|r| r.entry.call_id.as_str()).collect();
    assert_eq!(ids, ["r1", "r2", "r3", "r4", "w1", "r5"]);
}

#[tokio::test(start_paused = true)]
async fn a_slow_store_that_answers_spends_none_of_the_wait() {
    let desk = desk(RunLimits::DEFAULT);
    // Every request takes a second: slower than the counters wait, well within the store wait.
    desk.store.set_latency(Duration::from_secs(1));
    for id in ["w1", "w2", "w3"] {
        let timed = timed_turn(&desk, vec![refund_call(id, id)]).await;
        let (write, _) = answer(&timed, id);
        assert_eq!(write["status"], "succeeded", "{write}");
    }
    // The same refund again: a replay, read from the slow store.
    let again = timed_turn(&desk, vec![refund_call("w4", "w1")]).await;
    assert_eq!(answer(&again, "w4").0["replayed"], true);
}

#[tokio::test(start_paused = true)]
async fn the_session_keeps_the_step_limit_while_the_store_is_down() {
    let limits = RunLimits {
        max_steps: Some(3),
        ..RunLimits::DEFAULT
    };
    let desk = desk(limits);
    for id in ["r1", "r2"] {
        timed_turn(&desk, vec![read_call(id, "ORD-1")]).await;
    }
    assert_eq!(
        desk.store.answered(Request::BeginTurn),
        2,
        "the store counted two turns"
    );

    // Down: the session counts from where the store was.
    desk.store.set_down(true);
    let third = timed_turn(&desk, vec![read_call("r3", "ORD-1")]).await;
    assert_eq!(third[0].0.result.to_json()["status"], "succeeded");
    let fourth = desk
        .dispatcher
        .dispatch_turn(&desk.session, vec![read_call("r4", "ORD-1")])
        .await
        .expect_err("the fourth turn passes the limit of three");
    assert_eq!(fourth.reason.kind, ErrorKind::RunBudgetExhausted);
}
