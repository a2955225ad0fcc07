//! The audit records of reads (DESIGN §10, guide `approvals`, "The audit trail"): a read answers before its
//! record is written; the records of a turn's reads go to the store after the turn, in one
//! request, and before any later record of the same dispatcher; `flush_audit` writes them at
//! once. The test runs on one thread, so the task that writes them runs only when the test
//! awaits.

use toolgate::RunLimits;
use toolgate::prelude::ToolCall;
use toolgate::store::AuditQuery;
use toolgate::store::prelude::*;
use toolgate_test::Request;

use super::wait::{Desk, desk, read_call, refund_call};

/// The call ids of `run-1`'s audit records, in the order they were appended.
async fn trail(desk: &Desk) -> Vec<String> {
    let query = AuditQuery {
        run_id: Some("run-1"),
        ..AuditQuery::default()
    };
    let records = desk.store.inner().audit(query).await.unwrap();
    records.into_iter().map(|r| r.entry.call_id).collect()
}

#[tokio::test(start_paused = true)]
async fn the_reads_of_a_turn_are_audited_after_it_in_one_request() {
    let desk = desk(RunLimits::DEFAULT);
    let reads = (1..=5)
        .map(|i| read_call(&format!("r{i}"), &format!("ORD-{i}")))
        .collect();
    let reports = desk
        .dispatcher
        .dispatch_turn(&desk.session, reads)
        .await
        .unwrap();
    assert!(reports.iter().all(|r| r.result.is_succeeded()));
    // Answered before any record was written.
    assert!(trail(&desk).await.is_empty());
    assert_eq!(desk.store.asked(Request::AppendAudit), 0);

    desk.dispatcher.flush_audit().await;
    assert_eq!(trail(&desk).await, ["r1", "r2", "r3", "r4", "r5"]);
    assert_eq!(desk.store.asked(Request::AppendAudits), 1, "one request");
    assert_eq!(desk.store.asked(Request::AppendAudit), 0);
    // Nothing waits any more: another flush asks nothing.
    desk.dispatcher.flush_audit().await;
    assert_eq!(desk.store.asked(Request::AppendAudits), 1);
}

#[tokio::test(start_paused = true)]
async fn the_records_of_reads_are_written_without_a_flush() {
    let desk = desk(RunLimits::DEFAULT);
    let turn = vec![read_call("r1", "ORD-1"), read_call("r2", "ORD-2")];
    desk.dispatcher
        .dispatch_turn(&desk.session, turn)
        .await
        .unwrap();
    // The task the turn left behind writes them once it runs: a bounded number of yields.
    for _ in 0..10 {
        if !trail(&desk).await.is_empty() {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(trail(&desk).await, ["r1", "r2"]);
    assert_eq!(desk.store.asked(Request::AppendAudits), 1);
}

#[tokio::test(start_paused = true)]
async fn a_later_record_goes_after_the_reads_that_ended_before_it() {
    let desk = desk(RunLimits::DEFAULT);
    desk.dispatcher
        .dispatch(&desk.session, read_call("r1", "ORD-1"))
        .await
        .unwrap();
    // A write's success carries its record: the read's goes first.
    let wrote = desk
        .dispatcher
        .dispatch(&desk.session, refund_call("w1", "ORD-1"))
        .await
        .unwrap();
    assert!(wrote.result.is_succeeded());
    assert_eq!(trail(&desk).await, ["r1", "w1"]);

    // A call refused before it runs (its record is appended at once) goes after them too.
    desk.dispatcher
        .dispatch(&desk.session, read_call("r2", "ORD-2"))
        .await
        .unwrap();
    let unknown = ToolCall::new("u1", "no_such_tool", serde_json::json!({}));
    let refused = desk
        .dispatcher
        .dispatch(&desk.session, unknown)
        .await
        .unwrap();
    assert_eq!(refused.result.to_json()["error"]["kind"], "unknown_tool");
    assert_eq!(trail(&desk).await, ["r1", "w1", "r2", "u1"]);
}

#[tokio::test(start_paused = true)]
async fn the_records_of_reads_answered_while_the_store_is_down_are_kept_and_written_in_order() {
    let desk = desk(RunLimits::DEFAULT);
    desk.store.set_down(true);
    let turn = vec![read_call("r1", "ORD-1"), read_call("r2", "ORD-2")];
    let reports = desk
        .dispatcher
        .dispatch_turn(&desk.session, turn)
        .await
        .unwrap();
    assert!(reports.iter().all(|r| r.result.is_succeeded()));
    desk.dispatcher.flush_audit().await;
    assert!(
        trail(&desk).await.is_empty(),
        "kept while the store is down"
    );

    desk.store.set_down(false);
    desk.dispatcher
        .dispatch(&desk.session, refund_call("w1", "ORD-1"))
        .await
        .unwrap();
    assert_eq!(trail(&desk).await, ["r1", "r2", "w1"]);
}
