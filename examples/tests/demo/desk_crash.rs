//! The refund desk killed with SIGKILL in the middle of a long script, while the provider holds
//! the answer to a refund it applied, then run again on the same SQLite file: the reconciler
//! settles what the dead desk left, the same refunds asked again in later runs are replays, and
//! every refund is in the provider's ledger exactly once.

use std::process::Stdio;

use crate::support::{FakePayments, call, desk, only_result, play, read_lines};
use serde_json::json;

/// Each run asks for the same refund of each order: order, amount. The refunds are keyed on the
/// order for the tenant, so a later run's are replays of the first run's.
const REFUNDS: [(&str, u64); 4] = [
    ("ORD-1001", 100),
    ("ORD-1002", 200),
    ("ORD-1003", 30),
    ("ORD-1004", 20),
];
const RUNS: usize = 3;
/// The refund (counting from 1 across runs) the desk is killed in: run 1's third.
const KILLED_IN: usize = 3;

/// The script's lines: per run a `run` line, then per order a look-up and a refund; with
/// `fault`, a timeout-after-apply armed before refund number [`KILLED_IN`].
fn script(fault: bool) -> Vec<String> {
    let mut lines = Vec::new();
    let mut number = 0;
    for run in 1..=RUNS {
        lines.push(json!({ "run": format!("r{run}") }).to_string());
        for (order, amount) in REFUNDS {
            number += 1;
            let look = format!("look_{number}");
            lines.push(call(&look, "get_order", json!({"order_id": order})));
            if fault && number == KILLED_IN {
                lines.push(
                    json!({"fault": {"operation": "refund", "kind": "timeout_after_apply"}})
                        .to_string(),
                );
            }
            let id = format!("refund_{number}");
            lines.push(call(
                &id,
                "issue_refund",
                json!({"order_id": order, "amount": amount}),
            ));
        }
    }
    lines
}

#[test]
fn a_killed_desk_is_reconciled_and_refunds_each_order_once() {
    let provider = FakePayments::start();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("operations.db").display());
    let long = dir.path().join("long.jsonl");
    std::fs::write(&long, script(true).join("\n")).unwrap();

    let mut first = desk()
        .args(["--script", long.to_str().unwrap(), "--store", &store])
        .args(["--provider-url", &provider.url])
        .args(["--provider-timeout-ms", "600000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let answers = read_lines(first.stdout.take().unwrap());
    // Applied, and the answer held back: the desk is inside the call when it dies.
    provider.wait_for(&format!("applied re_{KILLED_IN:06} ORD-1003"));
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    // Everything the desk printed, up to the end of its stdout.
    let before_kill: Vec<String> = answers.iter().collect();
    assert_eq!(
        before_kill.len(),
        2 * KILLED_IN - 1,
        "every look-up and refund before the killed one was answered, and no more: \
         {before_kill:?}"
    );

    // The same desk an hour later, on the same file: the dead desk's lease has expired.
    let mut again = vec![r#"{"reconcile": {}}"#.to_owned()];
    again.extend(script(false));
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
    let refunds: Vec<_> = answers
        .iter()
        .filter(|answer| {
            answer["openai"][0]["tool_call_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("refund_"))
        })
        .map(only_result)
        .collect();
    assert_eq!(refunds.len(), RUNS * REFUNDS.len());
    for (index, result) in refunds.iter().enumerate() {
        let number = index + 1;
        let order = index % REFUNDS.len() + 1;
        assert_eq!(result["status"], "succeeded", "refund {number}: {result}");
        // The first run's refunds up to the killed one were settled before the restart, and
        // every later run's are the first run's: all replays but the first run's last.
        assert_eq!(
            result["replayed"],
            number != REFUNDS.len(),
            "refund {number}: {result}"
        );
        assert_eq!(
            result["data"]["refund_id"],
            format!("re_{order:06}"),
            "refund {number}: {result}"
        );
    }
    let ledger = answers.last().unwrap();
    for (order, total) in [
        ("ORD-1001", "100.00"),
        ("ORD-1002", "200.00"),
        ("ORD-1003", "50.00"),
        ("ORD-1004", "20.00"),
    ] {
        assert_eq!(
            ledger["ledger"][order],
            json!({"refunded": total, "refunds": 1}),
            "{order}: {ledger}"
        );
    }
    assert_eq!(
        ledger["provider_requests"],
        json!({"refund": REFUNDS.len(), "lookup": 1, "crm": 0, "notify": 0}),
        "no refund was sent twice"
    );
}
