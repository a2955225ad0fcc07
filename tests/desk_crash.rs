//! The refund desk killed with SIGKILL in the middle of a long script, while the provider holds
//! the answer to a refund it applied, then run again on the same SQLite file: the reconciler
//! settles what the dead desk left, and every refund is in the provider's ledger exactly once.

#[allow(dead_code)]
#[path = "support/desk.rs"]
mod desk;

use std::process::Stdio;

use desk::{FakePayments, call, desk, only_result, play, read_lines};
use serde_json::{Value, json};

/// The refunds of the script: call id, order, amount.
const REFUNDS: [(&str, &str, u64); 4] = [
    ("call_1", "ORD-1001", 100),
    ("call_2", "ORD-1002", 200),
    ("call_3", "ORD-1003", 30),
    ("call_4", "ORD-1004", 40),
];

fn refund(index: usize) -> String {
    let (id, order, amount) = REFUNDS[index];
    call(
        id,
        "issue_refund",
        json!({"order_id": order, "amount": amount}),
    )
}

#[test]
fn a_killed_desk_is_reconciled_and_refunds_each_order_once() {
    let provider = FakePayments::start();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("operations.db").display());
    let script = dir.path().join("long.jsonl");
    let mut lines = vec![r#"{"run": "crash"}"#.to_owned()];
    for (index, (_, order, _)) in REFUNDS.iter().enumerate() {
        lines.push(call(
            &format!("look_{index}"),
            "get_order",
            json!({"order_id": order}),
        ));
        if index == 2 {
            // The third refund is applied and its answer never comes in time: the desk waits.
            lines.push(
                json!({"fault": {"operation": "refund", "kind": "timeout_after_apply"}})
                    .to_string(),
            );
        }
        lines.push(refund(index));
    }
    std::fs::write(&script, lines.join("\n")).unwrap();

    let mut first = desk()
        .args(["--script", script.to_str().unwrap(), "--store", &store])
        .args(["--provider-url", &provider.url])
        .args(["--provider-timeout-ms", "600000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let answers = read_lines(first.stdout.take().unwrap());
    provider.wait_for("applied re_000003 ORD-1003");
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let before_kill: Vec<String> = answers.try_iter().collect();
    assert!(
        before_kill.len() >= 4,
        "two lookups and two refunds were answered before the kill: {before_kill:?}"
    );
    assert!(
        before_kill.len() < 6,
        "the third refund was never answered: {before_kill:?}"
    );

    // The same desk an hour later: the dead desk's lease has expired.
    let mut again = vec![
        r#"{"run": "crash"}"#.to_owned(),
        r#"{"reconcile": {}}"#.to_owned(),
    ];
    again.extend((0..REFUNDS.len()).map(refund));
    let answers = play(
        &(again.join("\n") + "\n"),
        &[
            "--store",
            &store,
            "--provider-url",
            &provider.url,
            "--clock-ahead-secs",
            "3600",
        ],
    );
    assert_eq!(
        answers[0],
        json!({"reconciled": {"succeeded": 1, "failed": 0, "still_unknown": 0}}),
        "the refund the dead desk left unanswered was found applied"
    );
    for (index, answer) in answers[1..5].iter().enumerate() {
        let result = only_result(answer);
        assert_eq!(result["status"], "succeeded", "{result}");
        assert_eq!(
            result["replayed"],
            index < 3,
            "the first three were settled before: {result}"
        );
        assert_eq!(
            result["data"]["refund_id"],
            format!("re_{:06}", index + 1),
            "{result}"
        );
    }
    let ledger = &answers[5];
    let refunded = [
        ("ORD-1001", "100.00"),
        ("ORD-1002", "200.00"),
        ("ORD-1003", "50.00"),
        ("ORD-1004", "40.00"),
    ];
    for (order, total) in refunded {
        let entry: &Value = &ledger["ledger"][order];
        assert_eq!(
            entry,
            &json!({"refunded": total, "refunds": 1}),
            "{order}: {ledger}"
        );
    }
    assert_eq!(
        ledger["provider_requests"],
        json!({"refund": 4, "lookup": 1}),
        "no refund was sent twice"
    );
}
