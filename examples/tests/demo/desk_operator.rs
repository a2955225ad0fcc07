//! An operator approves, with the `toolgate` command line, a refund that a running refund desk
//! holds for approval, on the SQLite file the desk is using; the desk's runner then applies it,
//! once. And the request hashes the desk stores are keyed with the secret it is given.

use std::io::Write;
use std::process::Stdio;

use crate::support::{PATIENCE, call, desk, only_result, operator_cli, operator_token, read_lines};
use serde_json::{Value, json};
use toolgate::idempotency::{HASH_SECRET_ENV, HASH_SECRET_FILE_ENV, HashSecret};
use toolgate::idempotency::{canonical_json, request_hash};

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
    let manager = operator_token(&store, dir.path(), "manager", "refund:approve");
    let approved = operator_cli()
        .args(["--store", &store, "approvals", "approve", &id])
        .args(["--reason", "the customer returned the whole order"])
        .env("TOOLGATE_TOKEN", &manager)
        .output()
        .unwrap();
    assert!(approved.status.success(), "{approved:?}");
    // The requester may not decide on their own refund, even with a token of the issuer.
    let agent = operator_token(&store, dir.path(), "agent", "refund:approve");
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
        .args(["--token", &agent])
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
    // The requester's refused attempt to decide is in the trail, after the manager's decision.
    assert_eq!(
        outcomes,
        [
            "awaiting_approval",
            "approved",
            "refused",
            "succeeded",
            "succeeded"
        ],
        "{audit}"
    );
}

/// The desk keys the request hashes it stores with `TOOLGATE_HASH_SECRET`: the hash the command
/// line shows with `--show-hashes` is the HMAC under that secret of the refund's arguments. A
/// secret too short stops the desk at start (exit 2), saying why.
#[test]
fn the_desk_keys_request_hashes_with_the_secret_it_is_given() {
    const SECRET: &str = "the desk's own secret, thirty-two bytes or more";
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("operations.db").display());
    let desk_with = |secret: &str| {
        let mut child = desk()
            .args(["--script", "-", "--store", &store])
            .env(HASH_SECRET_ENV, secret)
            .env_remove(HASH_SECRET_FILE_ENV)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let refund = call(
            "call_1",
            "issue_refund",
            json!({"order_id": "ORD-1001", "amount": 50}),
        );
        let mut script = child.stdin.take().unwrap();
        writeln!(script, "{refund}").unwrap();
        drop(script);
        child.wait_with_output().unwrap()
    };
    let played = desk_with(SECRET);
    assert!(played.status.success(), "{played:?}");
    let listed = operator_cli()
        .args(["--store", &store, "ops", "list", "--json", "--show-hashes"])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let op = &listed[0];
    let canonical = canonical_json(&op["arguments"]);
    let secret = HashSecret::new(SECRET).unwrap();
    assert_eq!(
        op["request_hash"],
        request_hash(&secret, "issue_refund", &canonical),
        "{op}"
    );

    let short = desk_with("short");
    assert_eq!(short.status.code(), Some(2), "{short:?}");
    let said = String::from_utf8_lossy(&short.stderr);
    assert!(said.contains("the hash secret has 5 bytes"), "{said}");
}
