//! An operator approves, with the `toolgate` command line, a refund that a running refund desk
//! holds for approval, on the SQLite file the desk is using; the desk's runner then applies it,
//! once.

use std::io::Write;
use std::process::Stdio;

use serde_json::{Value, json};
use toolgate_demo::harness::{PATIENCE, call, desk, only_result, operator_cli, read_lines};

#[test]
fn the_command_line_approves_while_the_desk_waits() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("operations.db");
    let store = format!("sqlite:{}", file.display());
    let mut running = desk()
        .args(["--script", "-", "--store", &store])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut script = running.stdin.take().unwrap();
    let answers = read_lines(running.stdout.take().unwrap());
    let mut play = |line: &str| -> Value {
        writeln!(script, "{line}").unwrap();
        script.flush().unwrap();
        let answer = answers.recv_timeout(PATIENCE).expect("the desk answers");
        serde_json::from_str(&answer).unwrap()
    };
    let refund = call(
        "call_1",
        "issue_refund",
        json!({"order_id": "ORD-1002", "amount": 8000}),
    );
    let waiting = only_result(&play(&refund));
    assert_eq!(waiting["status"], "awaiting_approval", "{waiting}");
    let id = waiting["error"]["approval_id"].as_str().unwrap().to_owned();

    // While the desk waits for its next line, an operator decides on the same file.
    let listed = operator_cli()
        .args(["--store", &store, "approvals", "list", "--json"])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let approved = operator_cli()
        .args(["--store", &store, "approvals", "approve", &id])
        .args(["--reason", "the customer returned the whole order"])
        .args([
            "--as",
            "manager",
            "--tenant",
            "acme",
            "--permission",
            "refund:approve",
        ])
        .output()
        .unwrap();
    assert!(approved.status.success(), "{approved:?}");
    // The requester may not decide on their own refund.
    let own = operator_cli()
        .args([
            "--store",
            &store,
            "approvals",
            "reject",
            &id,
            "--reason",
            "mine",
        ])
        .args([
            "--as",
            "agent",
            "--tenant",
            "acme",
            "--permission",
            "refund:approve",
        ])
        .output()
        .unwrap();
    assert_eq!(own.status.code(), Some(1), "{own:?}");

    let executed = play(r#"{"run_approved": {}}"#);
    assert_eq!(executed["executed"][0]["status"], "succeeded", "{executed}");
    let again = only_result(&play(&refund.replace("call_1", "call_2")));
    assert_eq!(again["status"], "succeeded");
    assert_eq!(again["replayed"], true, "{again}");
    drop(script);
    let ledger: Value =
        serde_json::from_str(&answers.recv_timeout(PATIENCE).expect("the ledger")).unwrap();
    assert_eq!(
        ledger["ledger"]["ORD-1002"],
        json!({"refunded": "8000.00", "refunds": 1})
    );
    assert_eq!(ledger["provider_requests"]["refund"], 1);
    assert!(running.wait().unwrap().success());

    let audit = operator_cli()
        .args(["--store", &store, "audit", "run-1", "--json"])
        .output()
        .unwrap();
    assert!(audit.status.success(), "{audit:?}");
    let audit: Value = serde_json::from_slice(&audit.stdout).unwrap();
    let outcomes: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|record| record["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        ["awaiting_approval", "approved", "succeeded", "succeeded"],
        "{audit}"
    );
}
