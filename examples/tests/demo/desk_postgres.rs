//! The refund desk on PostgreSQL: the same script gives the same answers as on SQLite, and two
//! desks playing one script with one run id at once, as two processes on one database and one
//! payment provider, refund every order exactly once; a restart while the database is down is
//! reported on its line and the desk opens the store again on the next line that needs it.

use std::process::Stdio;

use crate::support::{FakePayments, PATIENCE, call, desk, json_lines, play, read_lines};
use serde_json::{Value, json};
use toolgate_test_postgres::{OwnCluster, test_database};

fn refund(id: &str, order: &str, amount: f64) -> String {
    call(
        id,
        "issue_refund",
        json!({"order_id": order, "amount": amount}),
    )
}

fn fault(kind: &str, times: u32) -> String {
    json!({"fault": {"operation": "refund", "kind": kind, "times": times}}).to_string()
}

#[tokio::test]
async fn a_script_gives_the_same_answers_on_postgres_and_sqlite() {
    let url = test_database().await;
    let mut lines: Vec<String> = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/timeout-after-apply.jsonl"
    ))
    .unwrap()
    .lines()
    .map(str::to_owned)
    .collect();
    lines.extend([
        r#"{"run": "mixed"}"#.to_owned(),
        fault("unavailable_before_apply", 1),
        refund("call_1", "ORD-1002", 250.0),
        refund("call_2", "ORD-1002", 300.0),
        fault("reset_after_apply", 1),
        refund("call_3", "ORD-1004", 10.25),
        r#"{"restart": {}}"#.to_owned(),
        refund("call_4", "ORD-1002", 250.0),
        r#"{"reconcile": {}}"#.to_owned(),
        refund("call_5", "ORD-1004", 10.25),
        refund("call_6", "ORD-1003", 500.0),
    ]);
    let script = lines.join("\n") + "\n";
    let timeout = ["--provider-timeout-ms", "300"];
    let on_sqlite = play(&script, &timeout);
    let on_postgres = play(&script, &[timeout[0], timeout[1], "--store", &url]);
    assert_eq!(on_postgres, on_sqlite);
    assert_eq!(on_sqlite.len(), 13, "{on_sqlite:?}");
    let ledger = on_sqlite.last().unwrap();
    assert_eq!(
        ledger["ledger"]["ORD-1002"],
        json!({"refunded": "250.00", "refunds": 1})
    );
    assert_eq!(
        ledger["ledger"]["ORD-1004"],
        json!({"refunded": "10.25", "refunds": 1})
    );
}

/// The looping model and the abort of a turn, on PostgreSQL: the run's counters (turns, attempts,
/// failed calls, the abort) live in the store, across the looping story's restart, and answer
/// as they do on SQLite.
#[tokio::test]
async fn the_run_limit_stories_answer_the_same_on_postgres_and_sqlite() {
    for name in ["looping-model.jsonl", "abort-keeps-every-report.jsonl"] {
        let url = test_database().await;
        let script =
            std::fs::read_to_string(format!("{}/scenarios/{name}", env!("CARGO_MANIFEST_DIR")))
                .unwrap();
        let timeout = ["--provider-timeout-ms", "300"];
        let on_sqlite = play(&script, &timeout);
        let on_postgres = play(&script, &[timeout[0], timeout[1], "--store", &url]);
        assert_eq!(on_postgres, on_sqlite, "{name}");
        let aborted: Vec<&Value> = on_postgres
            .iter()
            .filter(|answer| answer.get("run_aborted").is_some())
            .collect();
        assert_eq!(aborted.len(), 2, "{name}: {on_postgres:?}");
        assert_eq!(
            aborted[1]["run_aborted"]["calls"],
            json!([]),
            "{name}: a later turn of an aborted run runs nothing"
        );
        let ledger = on_postgres.last().unwrap();
        assert_eq!(
            ledger["ledger"]["ORD-1001"]["refunds"], 0,
            "{name}: {ledger}"
        );
        let refund_requests = if name == "looping-model.jsonl" { 3 } else { 0 };
        assert_eq!(
            ledger["provider_requests"]["refund"], refund_requests,
            "{name}: {ledger}"
        );
    }
}

#[tokio::test]
async fn two_desks_on_one_database_refund_each_order_once() {
    let url = test_database().await;
    let provider = FakePayments::start();
    let orders = [
        ("ORD-1001", 100.0),
        ("ORD-1002", 200.0),
        ("ORD-1003", 30.0),
        ("ORD-1004", 40.0),
    ];
    let mut lines = vec![r#"{"run": "shared"}"#.to_owned()];
    for round in 0..3 {
        for (index, (order, amount)) in orders.iter().enumerate() {
            lines.push(call(
                &format!("look_{round}_{index}"),
                "get_order",
                json!({"order_id": order}),
            ));
            lines.push(refund(&format!("call_{round}_{index}"), order, *amount));
        }
    }
    let script = lines.join("\n") + "\n";
    let desks: Vec<_> = (0..2)
        .map(|_| {
            let mut child = desk()
                .args(["--script", "-", "--store", &url])
                .args(["--provider-url", &provider.url])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            std::io::Write::write_all(&mut stdin, script.as_bytes()).unwrap();
            drop(stdin);
            child
        })
        .collect();
    let outputs: Vec<_> = desks
        .into_iter()
        .map(|child| child.wait_with_output().unwrap())
        .collect();
    let mut fresh = Vec::new();
    for output in &outputs {
        assert!(output.status.success(), "{output:?}");
        for answer in json_lines(&output.stdout) {
            let Some(messages) = answer["openai"].as_array() else {
                continue;
            };
            let message = &messages[0];
            let id = message["tool_call_id"].as_str().unwrap().to_owned();
            let result: Value = serde_json::from_str(message["content"].as_str().unwrap()).unwrap();
            if !id.starts_with("call_") {
                continue;
            }
            match (result["status"].as_str(), result["replayed"].as_bool()) {
                (Some("succeeded"), Some(false)) => fresh.push(id),
                (Some("succeeded"), Some(true)) | (Some("in_progress"), _) => {}
                _ => panic!("{id}: {result}"),
            }
        }
    }
    fresh.sort();
    let first_round: Vec<String> = (0..orders.len())
        .map(|index| format!("call_0_{index}"))
        .collect();
    assert_eq!(
        fresh, first_round,
        "each refund ran once, in the first round, in one desk or the other"
    );
    // A third desk with nothing to do prints the provider's ledger.
    let ledger = play("", &["--provider-url", &provider.url]);
    let ledger = &ledger[0];
    for (order, total) in [
        ("ORD-1001", "100.00"),
        ("ORD-1002", "200.00"),
        ("ORD-1003", "50.00"),
        ("ORD-1004", "40.00"),
    ] {
        assert_eq!(
            ledger["ledger"][order],
            json!({"refunded": total, "refunds": 1}),
            "{ledger}"
        );
    }
}

#[test]
fn a_restart_while_the_database_is_down_reopens_on_a_later_line() {
    let cluster = OwnCluster::create();
    let provider = FakePayments::start();
    let mut child = desk()
        .args(["--script", "-", "--store", &cluster.url()])
        .args(["--provider-url", &provider.url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let answers = read_lines(child.stdout.take().unwrap());
    let mut say = |line: String| -> Value {
        std::io::Write::write_all(&mut stdin, format!("{line}\n").as_bytes()).unwrap();
        let answer = answers.recv_timeout(PATIENCE).expect("the desk answers");
        serde_json::from_str(&answer).unwrap()
    };
    let status = |answer: &Value| -> Value {
        let content = answer["openai"][0]["content"].as_str().unwrap_or("{}");
        serde_json::from_str::<Value>(content).unwrap()["status"].clone()
    };

    let first = say(refund("call_1", "ORD-1001", 100.0));
    assert_eq!(status(&first), "succeeded", "{first}");
    cluster.stop();
    let restart = say(r#"{"restart": {}}"#.to_owned());
    let problem = restart["error"].as_str().unwrap_or_default();
    assert!(
        problem.starts_with("line 2: cannot open the PostgreSQL store")
            && problem.ends_with("the desk opens it again on the next line that needs it"),
        "{restart}"
    );
    let still_down = say(refund("call_2", "ORD-1002", 50.0));
    assert!(
        still_down["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("line 3: cannot open the PostgreSQL store")),
        "{still_down}"
    );
    cluster.start();
    let back = say(refund("call_3", "ORD-1002", 50.0));
    assert_eq!(status(&back), "succeeded", "{back}");
    let replay = say(refund("call_4", "ORD-1001", 100.0));
    assert_eq!(status(&replay), "succeeded", "{replay}");
    drop(stdin);
    let ledger: Value =
        serde_json::from_str(&answers.recv_timeout(PATIENCE).expect("the ledger")).unwrap();
    assert_eq!(
        child.wait().unwrap().code(),
        Some(0),
        "two lines were answered with errors, and the desk played the script to its end"
    );
    assert_eq!(
        ledger["ledger"]["ORD-1001"],
        json!({"refunded": "100.00", "refunds": 1})
    );
    assert_eq!(
        ledger["ledger"]["ORD-1002"],
        json!({"refunded": "50.00", "refunds": 1})
    );
}
