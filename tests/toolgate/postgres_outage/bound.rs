//! How fast a stopped PostgreSQL is answered, for real: the test creates a cluster of its own,
//! runs a turn on it, stops it, and times the answers of turns with a write and a read, and of a
//! turn of reads alone, on the store's and the dispatcher's defaults (the store waits 3 s for a
//! connection; a call waits 5 s in all, the run's counters 250 ms).
//!
//! - A write is answered `unavailable` within the store wait ([`DEFAULT_STORE_WAIT`]), its
//!   business check, its claim's tries and the turn's counters included.
//! - A read in the same turn is answered within 0.5 s ([`Dispatcher::dispatch_turn_answering`]
//!   sends it as soon as it is), and so is a turn of reads alone: the run's counters wait for
//!   the store at most the counter wait, and not at all once it is known to be down.
//! - Once the cluster is back, the same write runs, and the audit trail holds every call of the
//!   outage (kept in memory meanwhile).
//!
//! The times are printed for the figures of guide `stores`. The assertions allow 0.5 s beyond the
//! documented bound for a loaded machine's timers, never as a synchronisation.
//!
//! Needs PostgreSQL's cluster tools and root (`OwnCluster` says so and fails, never skips).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::dispatch::{CallReport, DEFAULT_STORE_WAIT};
use toolgate::prelude::*;
use toolgate::store::prelude::*;
use toolgate::store::{AuditQuery, PostgresStore};
use toolgate_test_postgres::OwnCluster;

/// Refund an order.
#[tool(side_effect = "write", key = [order_id], check = positive(amount))]
async fn refund(order_id: String, amount: f64) -> Result<Value, ToolError> {
    Ok(json!({"refund_id": format!("re_{order_id}"), "amount": amount}))
}

async fn positive(amount: f64) -> Result<(), ToolError> {
    if amount > 0.0 {
        Ok(())
    } else {
        Err(ToolError::refused("a refund must be positive"))
    }
}

/// Look up an order by its id.
#[tool]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    Ok(format!("{order_id}: paid"))
}

/// Room beyond a documented bound for a loaded machine's timers.
const SLACK: Duration = Duration::from_millis(500);

/// A read's bound during an outage.
const READ_BOUND: Duration = Duration::from_millis(500);

/// One turn, each report timed from the turn's start as it arrives.
async fn timed_turn(
    dispatcher: &Dispatcher,
    session: &Session,
    calls: Vec<ToolCall>,
) -> Vec<(CallReport, Duration)> {
    toolgate_test::timed_turn(dispatcher, session, calls)
        .await
        .1
}

fn refund_call(id: &str, order: &str) -> ToolCall {
    ToolCall::new(id, "refund", json!({"order_id": order, "amount": 10}))
}

fn read_call(id: &str, order: &str) -> ToolCall {
    ToolCall::new(id, "get_order", json!({"order_id": order}))
}

fn report(timed: &[(CallReport, Duration)], id: &str) -> (Value, Duration) {
    let (report, at) = timed
        .iter()
        .find(|(report, _)| report.call_id == id)
        .unwrap_or_else(|| panic!("{id} was answered"));
    (report.result.to_json(), *at)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_database_answers_a_write_within_the_store_wait_and_a_read_at_once() {
    let cluster = Arc::new(
        tokio::task::spawn_blocking(OwnCluster::create)
            .await
            .unwrap(),
    );
    let store = Arc::new(
        PostgresStore::connect(&cluster.url())
            .await
            .expect("the store connects to the test's cluster"),
    );
    let mut registry = Registry::new();
    registry.register::<refund>().unwrap();
    registry.register::<get_order>().unwrap();
    let dispatcher = Dispatcher::builder(registry)
        .store(store.clone())
        .jitter_seed(7)
        .build();
    let session = crate::support::session_in("outage-run");

    // Up: a write and a read.
    let up = timed_turn(
        &dispatcher,
        &session,
        vec![refund_call("u1", "ORD-1"), read_call("u2", "ORD-1")],
    )
    .await;
    assert_eq!(report(&up, "u1").0["status"], "succeeded");
    assert_eq!(report(&up, "u2").0["status"], "succeeded");

    let stopping = cluster.clone();
    tokio::task::spawn_blocking(move || stopping.stop())
        .await
        .unwrap();

    // Down, first turn: the counters find out, the read is answered, the write waits its bound.
    for (turn, (write, read)) in [("w1", "r1"), ("w3", "r3")].into_iter().enumerate() {
        let timed = timed_turn(
            &dispatcher,
            &session,
            vec![refund_call(write, "ORD-2"), read_call(read, "ORD-2")],
        )
        .await;
        let (written, write_at) = report(&timed, write);
        let (read_result, read_at) = report(&timed, read);
        eprintln!(
            "turn {turn} with the database down: the read answered after {read_at:?}, the write after {write_at:?}"
        );
        assert_eq!(written["status"], "error", "{written}");
        assert_eq!(written["error"]["kind"], "unavailable", "{written}");
        assert_eq!(read_result["status"], "succeeded", "{read_result}");
        assert_eq!(read_result["data"], "ORD-2: paid");
        assert!(read_at < READ_BOUND, "the read waited {read_at:?}");
        assert!(
            write_at <= DEFAULT_STORE_WAIT + SLACK,
            "the write waited {write_at:?}"
        );
        assert!(read_at < write_at, "the read came first");

        // A turn of reads alone.
        let reads = timed_turn(
            &dispatcher,
            &session,
            vec![
                read_call(&format!("{read}a"), "ORD-3"),
                read_call(&format!("{read}b"), "ORD-4"),
            ],
        )
        .await;
        for (report, at) in &reads {
            eprintln!(
                "a read-only turn with the database down: {} answered after {at:?}",
                report.call_id
            );
            assert_eq!(report.result.to_json()["status"], "succeeded");
            assert!(*at < READ_BOUND, "{} waited {at:?}", report.call_id);
        }
    }

    // Back: the same write runs, and every call of the outage is in the audit trail.
    let starting = cluster.clone();
    tokio::task::spawn_blocking(move || starting.start())
        .await
        .unwrap();
    let back = timed_turn(&dispatcher, &session, vec![refund_call("b1", "ORD-2")]).await;
    let (again, _) = report(&back, "b1");
    assert_eq!(again["status"], "succeeded", "{again}");
    assert_eq!(again["replayed"], false, "{again}");
    let audit = store
        .audit(AuditQuery {
            tenant: Some("acme"),
            run_id: Some("outage-run"),
            key: None,
            limit: 0,
        })
        .await
        .unwrap();
    let ids: Vec<&str> = audit
        .iter()
        .map(|record| record.entry.call_id.as_str())
        .collect();
    for id in [
        "u1", "u2", "w1", "r1", "r1a", "r1b", "w3", "r3", "r3a", "r3b", "b1",
    ] {
        assert_eq!(
            ids.iter().filter(|seen| **seen == id).count(),
            1,
            "{id} has one audit record: {ids:?}"
        );
    }
}
