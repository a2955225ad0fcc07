//! The refund desk's outbox mode: a refund answers `queued` once its request, its operation and
//! its event are committed in the store's database; the `deliver` line's worker sends it to the
//! provider once; a delivery that keeps failing is dead until an operator resumes it with the
//! `toolgate` command line. On SQLite, and the queued story on PostgreSQL too.

use std::io::Write;
use std::process::Stdio;

use crate::support::{
    PATIENCE, call, desk, only_result, operator_cli, operator_token, play, read_lines,
};
use serde_json::{Value, json};
use sqlx::{Connection, Row};
use toolgate_test_postgres::test_database;

const FAST: [&str; 2] = ["--provider-timeout-ms", "300"];

/// The text of the story `name` in `examples/scenarios/`.
fn story(name: &str) -> String {
    std::fs::read_to_string(format!("{}/scenarios/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The rows of the shop's `refund_requests` table in the SQLite file `file`.
async fn refund_requests(file: &std::path::Path) -> Vec<(String, i64)> {
    let url = format!("sqlite://{}", file.display());
    let mut connection = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let rows = sqlx::query("SELECT order_id, amount_cents FROM refund_requests")
        .fetch_all(&mut connection)
        .await
        .unwrap();
    rows.iter()
        .map(|row| (row.get("order_id"), row.get("amount_cents")))
        .collect()
}

/// The answers of `outbox-refund-is-queued-then-delivered.jsonl`, checked: queued, queued
/// again, delivered once, then succeeded with the delivery.
fn check_queued_story(answers: &[Value]) {
    assert_eq!(answers.len(), 6, "{answers:?}");
    let queued = only_result(&answers[0]);
    assert_eq!(queued["status"], "queued", "{queued}");
    assert_eq!(
        queued["data"],
        json!({"order_id": "ORD-1001", "amount": "100.00"}),
        "{queued}"
    );
    assert_eq!(queued["delivery"]["state"], "pending", "{queued}");
    let operation = queued["delivery"]["operation"].as_str().unwrap().to_owned();
    assert!(!operation.is_empty(), "{queued}");

    let again = only_result(&answers[1]);
    assert_eq!(again["status"], "queued", "{again}");
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(again["delivery"]["operation"], operation.as_str());
    assert_eq!(again["delivery"]["state"], "pending", "{again}");

    assert_eq!(
        answers[2],
        json!({"delivered": 1, "retrying": 0, "dead": 0})
    );

    let done = only_result(&answers[3]);
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["replayed"], true, "{done}");
    assert_eq!(done["delivery"]["state"], "delivered", "{done}");
    assert_eq!(done["delivery"]["operation"], operation.as_str());
    assert_eq!(
        answers[4],
        json!({"delivered": 0, "retrying": 0, "dead": 0}),
        "nothing is left to deliver"
    );
    let ledger = &answers[5];
    assert_eq!(
        ledger["ledger"]["ORD-1001"],
        json!({"refunded": "100.00", "refunds": 1})
    );
    assert_eq!(ledger["provider_requests"]["refund"], 1, "{ledger}");
}

#[tokio::test]
async fn an_outbox_refund_is_queued_with_its_row_then_delivered_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("operations.db");
    let store = format!("sqlite:{}", file.display());
    let answers = play(
        &story("outbox-refund-is-queued-then-delivered.jsonl"),
        &[FAST[0], FAST[1], "--store", &store],
    );
    check_queued_story(&answers);
    assert_eq!(
        refund_requests(&file).await,
        [("ORD-1001".to_owned(), 10_000)],
        "one row, committed with the operation"
    );
}

#[tokio::test]
async fn the_outbox_story_answers_the_same_on_postgres() {
    let url = test_database().await;
    let script = story("outbox-refund-is-queued-then-delivered.jsonl");
    let on_postgres = play(&script, &[FAST[0], FAST[1], "--store", &url]);
    check_queued_story(&on_postgres);
    let on_sqlite = play(&script, &FAST);
    assert_eq!(on_postgres, on_sqlite);
    let mut connection = sqlx::PgConnection::connect(&url).await.unwrap();
    let rows: i64 = sqlx::query("SELECT count(*) FROM refund_requests")
        .fetch_one(&mut connection)
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1);
}

#[test]
fn a_delivery_past_its_budget_is_dead_and_the_call_says_an_operator_must_resume_it() {
    let answers = play(&story("outbox-delivery-retries-then-dead.jsonl"), &FAST);
    assert_eq!(answers.len(), 5, "{answers:?}");
    let queued = only_result(&answers[0]);
    assert_eq!(queued["status"], "queued", "{queued}");
    assert_eq!(
        answers[1],
        json!({"delivered": 0, "retrying": 2, "dead": 1}),
        "3 deliveries, all answered 503: two retried, the third dead"
    );
    let dead = only_result(&answers[2]);
    assert_eq!(dead["status"], "queued", "{dead}");
    assert_eq!(dead["delivery"]["state"], "dead", "{dead}");
    assert_eq!(dead["delivery"]["attempts"], 3, "{dead}");
    let what = dead["delivery"]["what"].as_str().unwrap();
    assert!(what.ends_with("an operator must resume it"), "{dead}");
    assert_eq!(
        answers[3],
        json!({"delivered": 0, "retrying": 0, "dead": 0}),
        "a dead event is not delivered again until resumed"
    );
    assert_eq!(answers[4]["ledger"]["ORD-1004"]["refunds"], 0);
    assert_eq!(answers[4]["provider_requests"]["refund"], 3);
}

/// The desk dead-letters a refund; an operator resumes it with the command line, on the file the
/// desk is using; the desk's next `deliver` delivers it, once.
#[test]
fn the_command_line_resumes_a_dead_refund_and_the_next_delivery_applies_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("operations.db");
    let store = format!("sqlite:{}", file.display());
    let mut running = desk()
        .args(["--script", "-", "--store", &store, "--delivery", "outbox"])
        .args(FAST)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut script = running.stdin.take().unwrap();
    let answers = read_lines(running.stdout.take().unwrap());
    // Owns the desk's stdin: dropped, it ends the script.
    let mut send = move |line: &str| {
        writeln!(script, "{line}").unwrap();
        script.flush().unwrap();
    };
    let answer = || -> Value {
        let answer = answers.recv_timeout(PATIENCE).expect("the desk answers");
        serde_json::from_str(&answer).unwrap()
    };
    let mut play = |line: &str| -> Value {
        send(line);
        answer()
    };
    let refund = call(
        "call_1",
        "issue_refund",
        json!({"order_id": "ORD-1001", "amount": 50}),
    );
    let queued = only_result(&play(&refund));
    assert_eq!(queued["status"], "queued", "{queued}");
    let key = queued["delivery"]["operation"].as_str().unwrap().to_owned();
    // A fault line has no answer: the deliver line's answer comes after it.
    let dead = play(
        "{\"fault\": {\"operation\": \"refund\", \"kind\": \"unavailable_before_apply\", \
         \"times\": 3}}\n{\"deliver\": {}}",
    );
    assert_eq!(dead, json!({"delivered": 0, "retrying": 2, "dead": 1}));

    // A token without outbox:resume is refused.
    let settler = operator_token(&store, dir.path(), "ops", "ops:settle");
    let refused = operator_cli()
        .args(["--store", &store, "outbox", "resume", &key])
        .args(["--token", &settler])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("outbox:resume"),
        "{refused:?}"
    );
    let resumed = operator_cli()
        .args(["--store", &store, "outbox", "resume", &key, "--json"])
        .args(["--reason", "the provider is back"])
        .env(
            "TOOLGATE_TOKEN",
            operator_token(&store, dir.path(), "ops", "outbox:resume"),
        )
        .output()
        .unwrap();
    assert!(resumed.status.success(), "{resumed:?}");
    let event: Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!(event["status"], "pending", "{event}");

    let delivered = play(r#"{"deliver": {}}"#);
    assert_eq!(delivered, json!({"delivered": 1, "retrying": 0, "dead": 0}));
    let done = only_result(&play(&refund.replace("call_1", "call_2")));
    assert_eq!(done["status"], "succeeded", "{done}");
    drop(send);
    let ledger = answer();
    assert_eq!(
        ledger["ledger"]["ORD-1001"],
        json!({"refunded": "50.00", "refunds": 1})
    );
    assert_eq!(
        ledger["provider_requests"]["refund"], 4,
        "3 refused, 1 applied"
    );
    assert!(running.wait().unwrap().success());
}
