//! The refund desk run as a process on scripts, on its default SQLite store with the provider in
//! process: each story's answers and the provider's ledger, exact.

use crate::support::{
    FakePayments, call, desk, json_lines, only_result, openai_results, play, play_bytes,
    play_output,
};
use serde_json::{Value, json};

/// The ledger the desk prints last, with every order untouched but those in `refunded`.
fn ledger(refunded: &[(&str, &str, u64)], refund_requests: u64, lookups: u64) -> Value {
    let mut ledger = json!({
        "ORD-1001": {"refunded": "0.00", "refunds": 0},
        "ORD-1002": {"refunded": "0.00", "refunds": 0},
        "ORD-1003": {"refunded": "20.00", "refunds": 0},
        "ORD-1004": {"refunded": "0.00", "refunds": 0},
    });
    for (order, amount, refunds) in refunded {
        ledger[order] = json!({"refunded": amount, "refunds": refunds});
    }
    json!({
        "ledger": ledger,
        "crm": {},
        "notify": {},
        "provider_requests": {"refund": refund_requests, "lookup": lookups, "crm": 0, "notify": 0},
    })
}

fn script(lines: &[String]) -> String {
    lines.join("\n") + "\n"
}

fn fault(kind: &str, times: u32) -> String {
    json!({"fault": {"operation": "refund", "kind": kind, "times": times}}).to_string()
}

fn refund(id: &str, order: &str, amount: Value) -> String {
    call(
        id,
        "issue_refund",
        json!({"order_id": order, "amount": amount}),
    )
}

const RECONCILE: &str = r#"{"reconcile": {}}"#;
const FAST: [&str; 2] = ["--provider-timeout-ms", "300"];

#[test]
fn the_narrated_story_shows_the_timeout_and_one_refund() {
    let output = desk().output().expect("the desk runs");
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("the payment provider did not answer within 2000 ms"),
        "the run shows the timeout:\n{text}"
    );
    assert!(
        text.contains("ORD-1001  refunded   500.00  in 1 refund(s)"),
        "{text}"
    );
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last, ledger(&[("ORD-1001", "500.00", 1)], 1, 1));
}

/// The flags a story in `examples/scenarios/` is played with: the slow story needs the provider's
/// client to wait longer than `get_order`'s deadline of 1 s, the others a short wait.
fn story_flags(path: &str) -> [&'static str; 2] {
    if path.ends_with("slow-call-times-out.jsonl") {
        ["--provider-timeout-ms", "5000"]
    } else {
        FAST
    }
}

/// The ledger each story in `examples/scenarios/` ends with.
fn story_ledger(path: &str) -> Value {
    let name = path.rsplit('/').next().unwrap();
    match name {
        "timeout-after-apply.jsonl" => ledger(&[("ORD-1001", "500.00", 1)], 1, 1),
        "looping-model.jsonl" => ledger(&[], 3, 0),
        "two-refunds-one-order.jsonl" => ledger(
            &[("ORD-1001", "100.00", 1), ("ORD-1002", "100.00", 1)],
            2,
            0,
        ),
        "slow-call-times-out.jsonl" => ledger(&[("ORD-1004", "5.00", 1)], 1, 0),
        "approval-waits-for-a-manager.jsonl" => ledger(&[("ORD-1002", "8000.00", 1)], 1, 0),
        // Played on a fresh store: the refund waits, and the runner finds nothing approved.
        "refund-waits-for-approval.jsonl" | "run-approved.jsonl" => ledger(&[], 0, 0),
        "balance-changes-while-waiting.jsonl" => ledger(&[("ORD-1002", "100.00", 1)], 1, 0),
        "bad-arguments.jsonl"
        | "hostile-turns.jsonl"
        | "rate-limited-burst.jsonl"
        | "abort-keeps-every-report.jsonl" => ledger(&[], 0, 0),
        "outbox-refund-is-queued-then-delivered.jsonl" => {
            ledger(&[("ORD-1001", "100.00", 1)], 1, 0)
        }
        "outbox-delivery-retries-then-dead.jsonl" => ledger(&[], 3, 0),
        "crm-update-then-notification-fails.jsonl" => {
            let mut ledger = ledger(&[], 0, 0);
            ledger["crm"] = json!({"ORD-1003": 1});
            ledger["notify"] = json!({"ORD-1003": 1});
            ledger["provider_requests"]["crm"] = json!(1);
            ledger["provider_requests"]["notify"] = json!(3);
            ledger
        }
        other => panic!("a story without its ledger here: {other}"),
    }
}

/// `answers` with what a rate limit makes depend on the real clock taken out, once checked: how
/// long a rate-limited call is told to wait (`retry_after_ms`, and the same number in `next`:
/// the milliseconds until the tenant's bucket has a call again, from 1 to the limit's 12000 ms
/// for `get_order`'s 5/min, and a few milliseconds less the later the call is checked), and which
/// calls of a burst were the ones over the limit (the calls of a turn run concurrently, so
/// which reach the limiter first is not defined): each turn's results are sorted.
fn without_real_time(answers: &[Value]) -> Vec<Value> {
    answers
        .iter()
        .map(|answer| {
            let Some(messages) = answer["openai"].as_array() else {
                return answer.clone();
            };
            let mut results: Vec<String> = messages
                .iter()
                .map(|message| {
                    let mut result: Value =
                        serde_json::from_str(message["content"].as_str().unwrap()).unwrap();
                    if result["error"]["kind"] == "rate_limited" {
                        let wait = result["error"]["retry_after_ms"].as_u64().unwrap();
                        assert!((1..=12_000).contains(&wait), "{result}");
                        assert_eq!(
                            result["error"]["next"],
                            format!("wait {wait} ms, then call get_order again")
                        );
                        result["error"]["retry_after_ms"] = json!("1 to 12000");
                        result["error"]["next"] = json!("wait …");
                    }
                    result.to_string()
                })
                .collect();
            results.sort();
            json!({ "openai results, sorted": results })
        })
        .collect()
}

/// `stdout` with what the time of day makes of an approval taken out: its id (a hash of the
/// time it was asked) reads `apr_…`, and its expiry `0`.
fn without_approval_times(stdout: &[u8]) -> String {
    let text = String::from_utf8_lossy(stdout);
    let mut out = String::with_capacity(text.len());
    let mut rest = &*text;
    while let Some(at) = rest.find("apr_") {
        out.push_str(&rest[..at]);
        out.push_str("apr_…");
        rest = rest[at + 4..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
    }
    out.push_str(rest);
    let mut normalized = String::with_capacity(out.len());
    let mut rest = &*out;
    while let Some(at) = rest.find("expires_at_ms") {
        let (head, tail) = rest.split_at(at + "expires_at_ms".len());
        normalized.push_str(head);
        let digits = tail.find(|c: char| c.is_ascii_digit()).unwrap_or(0);
        normalized.push_str(&tail[..digits]);
        rest = tail[digits..].trim_start_matches(|c: char| c.is_ascii_digit());
        // A number still, so that the JSON around it still parses.
        normalized.push('0');
    }
    normalized.push_str(rest);
    normalized
}

#[test]
fn every_example_script_gives_the_same_output_twice() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios");
    let mut scripts: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    scripts.sort();
    assert_eq!(scripts.len(), 15, "{scripts:?}");
    for script in scripts {
        let path = script.to_str().unwrap();
        let run = || {
            let output = desk()
                .args(["--script", path])
                .args(story_flags(path))
                .output()
                .unwrap();
            assert!(output.status.success(), "{path}: {output:?}");
            output.stdout
        };
        let first = run();
        let second = run();
        if path.ends_with("rate-limited-burst.jsonl") {
            assert_eq!(
                without_real_time(&json_lines(&first)),
                without_real_time(&json_lines(&second)),
                "{path} is not deterministic"
            );
        } else {
            assert_eq!(
                without_approval_times(&first),
                without_approval_times(&second),
                "{path} is not deterministic"
            );
        }
        let lines = json_lines(&first);
        assert_eq!(lines.last().unwrap(), &story_ledger(path), "{path}");
    }
}

#[test]
fn a_timed_out_refund_asked_again_is_reconciled_and_applied_once() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/timeout-after-apply.jsonl"
    ))
    .unwrap();
    let answers = play(&text, &FAST);
    assert_eq!(answers.len(), 6, "{answers:?}");
    assert_eq!(only_result(&answers[0])["status"], "succeeded");
    let timed_out = only_result(&answers[1]);
    assert_eq!(timed_out["status"], "outcome_unknown", "never `failed`");
    assert_eq!(
        timed_out["error"]["what"],
        "the payment provider did not answer within 300 ms"
    );
    let again = only_result(&answers[2]);
    assert_eq!(again["status"], "outcome_unknown");
    assert_eq!(again["replayed"], true, "not sent a second time");
    assert_eq!(
        answers[3],
        json!({"reconciled": {"succeeded": 1, "failed": 0, "still_unknown": 0}})
    );
    assert_eq!(
        only_result(&answers[4]),
        json!({"status": "succeeded", "replayed": true, "data":
            {"refund_id": "re_000001", "order_id": "ORD-1001", "amount": "500.00"}})
    );
    assert_eq!(answers[5], ledger(&[("ORD-1001", "500.00", 1)], 1, 1));
}

#[test]
fn a_reset_after_apply_is_unknown_until_reconciled() {
    let answers = play(
        &script(&[
            fault("reset_after_apply", 1),
            refund("call_1", "ORD-1004", json!(75.5)),
            refund("call_2", "ORD-1004", json!(75.5)),
            RECONCILE.to_owned(),
            refund("call_3", "ORD-1004", json!(75.50)),
        ]),
        &FAST,
    );
    let reset = only_result(&answers[0]);
    assert_eq!(reset["status"], "outcome_unknown");
    assert_eq!(
        reset["error"]["what"],
        "the connection to the payment provider dropped before the answer"
    );
    assert_eq!(only_result(&answers[1])["replayed"], true);
    assert_eq!(answers[2]["reconciled"]["succeeded"], 1);
    let settled = only_result(&answers[3]);
    assert_eq!(settled["status"], "succeeded");
    assert_eq!(settled["replayed"], true);
    assert_eq!(settled["data"]["amount"], "75.50");
    assert_eq!(answers[4], ledger(&[("ORD-1004", "75.50", 1)], 1, 1));
}

#[test]
fn a_503_before_apply_is_retried_below_the_model() {
    let answers = play(
        &script(&[
            fault("unavailable_before_apply", 2),
            refund("call_1", "ORD-1001", json!(120)),
        ]),
        &FAST,
    );
    let result = only_result(&answers[0]);
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(result["replayed"], false);
    assert_eq!(
        answers[1],
        ledger(&[("ORD-1001", "120.00", 1)], 3, 0),
        "two 503s and the third request applied"
    );
}

#[test]
fn another_amount_under_the_same_key_is_a_conflict() {
    let answers = play(
        &script(&[
            refund("call_1", "ORD-1002", json!(100)),
            refund("call_2", "ORD-1002", json!(200)),
            refund("call_3", "ORD-1002", json!(100)),
        ]),
        &FAST,
    );
    assert_eq!(only_result(&answers[0])["status"], "succeeded");
    let conflict = only_result(&answers[1]);
    assert_eq!(conflict["error"]["kind"], "conflict", "{conflict}");
    let replay = only_result(&answers[2]);
    assert_eq!(replay["replayed"], true);
    assert_eq!(answers[3], ledger(&[("ORD-1002", "100.00", 1)], 1, 0));
}

#[test]
fn a_refund_over_the_refundable_balance_is_refused_and_never_sent() {
    let answers = play(
        &script(&[
            refund("call_1", "ORD-1004", json!(75.51)),
            refund("call_2", "ORD-1003", json!(100)),
            call("call_3", "get_order", json!({"order_id": "ORD-1003"})),
        ]),
        &FAST,
    );
    let refused = only_result(&answers[0]);
    assert_eq!(refused["error"]["kind"], "refused");
    assert_eq!(
        refused["error"]["why"],
        "paid 75.50, already refunded 0.00, so at most 75.50 is refundable"
    );
    assert_eq!(
        only_result(&answers[1])["status"],
        "succeeded",
        "exactly the balance"
    );
    assert_eq!(only_result(&answers[2])["data"]["refundable"], "0.00");
    assert_eq!(answers[3], ledger(&[("ORD-1003", "120.00", 1)], 1, 0));
}

#[test]
fn every_bad_argument_gets_an_error_the_model_can_act_on() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/bad-arguments.jsonl"
    ))
    .unwrap();
    let answers = play(&text, &FAST);
    let results: Vec<Value> = answers[..6].iter().map(only_result).collect();
    let expect = [
        (
            "invalid_arguments",
            "/amount: -5 is less than or equal to the minimum of 0",
        ),
        ("invalid_arguments", "\"amount\" is a required property"),
        ("invalid_arguments", "'note' was unexpected"),
        ("unknown_tool", "the tools are: get_order, issue_refund"),
        ("not_found", "the known orders are ORD-1001"),
        ("refused", "at most 100.00 is refundable"),
    ];
    for (result, (kind, needle)) in results.iter().zip(expect) {
        assert_eq!(result["status"], "error", "{result}");
        assert_eq!(result["error"]["kind"], kind, "{result}");
        let why = result["error"]["why"].as_str().unwrap();
        assert!(why.contains(needle), "{needle:?} not in {result}");
        assert!(result["error"]["next"].as_str().is_some(), "{result}");
    }
    assert_eq!(answers[6], ledger(&[], 0, 0), "nothing was sent");
}

#[test]
fn malformed_calls_each_get_a_result_and_nothing_is_sent() {
    let turn = |tool_calls: Value| {
        json!({"openai": {"role": "assistant", "content": null, "tool_calls": tool_calls}})
            .to_string()
    };
    let output = play_output(
        &script(&[
            turn(json!([
                {"id": "c1", "type": "function", "function": {"name": "issue_refund", "arguments": "{\"order_id\": \"ORD-1001\", \"amount\": "}},
                {"id": "c2", "type": "function", "function": {"name": "issue_refund", "arguments": {"order_id": "ORD-1001", "amount": 5}}},
                {"id": "c3", "type": "function", "function": {"name": "issue_refund", "arguments": "[1, 2]"}},
                {"id": "c4", "type": "function", "function": {"name": "issue_refund", "arguments": "{\"order_id\": \"ORD-1001\", \"amount\": \"5\"}"}},
                {"id": "c5", "type": "function", "function": {"name": "issue_refund", "arguments": "{\"order_id\": \"ORD-1001\", \"amount\": 1e300}"}},
                {"id": "c6", "type": "function", "function": {"name": "issue_refund", "arguments": "{\"order_id\": \"ORD-1001\", \"amount\": 0.001}"}},
                {"id": "c7", "type": "function", "function": {"name": "get_order", "arguments": "{\"order_id\": 1001}"}},
            ])),
            r#"{"openai": "not a message"}"#.to_owned(),
            "{\"openai\": {\"tool_calls\": [".to_owned(),
        ]),
        &FAST,
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "two lines are not turns, and each is answered with its error"
    );
    let answers = json_lines(&output.stdout);
    let results = openai_results(&answers[0]);
    let ids: Vec<&str> = answers[0]["openai"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4", "c5", "c6", "c7"]);
    for result in &results {
        assert_eq!(result["status"], "error", "{result}");
        assert_eq!(result["error"]["kind"], "invalid_arguments", "{result}");
    }
    assert_eq!(
        results[4]["error"]["what"],
        "1e300 is not a refundable amount"
    );
    assert!(
        answers[1]["error"]
            .as_str()
            .unwrap()
            .starts_with("line 2: ")
    );
    assert!(
        answers[2]["error"]
            .as_str()
            .unwrap()
            .starts_with("line 3: ")
    );
    assert_eq!(answers[3], ledger(&[], 0, 0));
}

/// A line answered with an error does not fail the run: the desk answered it.
#[test]
fn a_script_with_a_bad_line_still_ends_with_the_ledger_and_exits_0() {
    let output = play_output(
        &script(&[
            r#"{"rerun": "r2"}"#.to_owned(),
            refund("call_1", "ORD-1001", json!(10)),
        ]),
        &FAST,
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("1 line(s) of the script were answered with an error"),
        "{stderr}"
    );
    let answers = json_lines(&output.stdout);
    assert!(
        answers[0]["error"]
            .as_str()
            .unwrap()
            .contains("unknown line `rerun`"),
        "{answers:?}"
    );
    assert_eq!(only_result(&answers[1])["status"], "succeeded");
    assert_eq!(answers[2], ledger(&[("ORD-1001", "10.00", 1)], 1, 0));
}

#[test]
fn a_restart_between_two_turns_keeps_every_outcome() {
    let answers = play(
        &script(&[
            refund("call_1", "ORD-1001", json!(50)),
            fault("timeout_after_apply", 1),
            refund("call_2", "ORD-1004", json!(5)),
            r#"{"restart": {}}"#.to_owned(),
            refund("call_3", "ORD-1001", json!(50)),
            refund("call_4", "ORD-1004", json!(5)),
            RECONCILE.to_owned(),
            refund("call_5", "ORD-1004", json!(5)),
        ]),
        &FAST,
    );
    assert_eq!(only_result(&answers[0])["status"], "succeeded");
    assert_eq!(only_result(&answers[1])["status"], "outcome_unknown");
    let after_restart = only_result(&answers[2]);
    assert_eq!(after_restart["status"], "succeeded");
    assert_eq!(after_restart["replayed"], true, "the store kept it");
    assert_eq!(only_result(&answers[3])["status"], "outcome_unknown");
    assert_eq!(answers[4]["reconciled"]["succeeded"], 1);
    assert_eq!(only_result(&answers[5])["data"]["refund_id"], "re_000002");
    assert_eq!(
        answers[6],
        ledger(&[("ORD-1001", "50.00", 1), ("ORD-1004", "5.00", 1)], 2, 1)
    );
}

#[test]
fn runs_sessions_anthropic_turns_and_approvals() {
    let anthropic = json!({"anthropic": {"role": "assistant", "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {"order_id": "ORD-1002"}},
        {"type": "tool_use", "id": "toolu_2", "name": "issue_refund", "input": {"order_id": "ORD-1002", "amount": 30}},
    ]}});
    let answers = play(
        &script(&[
            anthropic.to_string(),
            // The same refund in a new run is the same operation: a replay.
            r#"{"run": "r2"}"#.to_owned(),
            refund("call_1", "ORD-1002", json!(30)),
            r#"{"session": {"tenant": "acme", "user": "viewer", "permissions": ["orders:read"]}}"#
                .to_owned(),
            refund("call_2", "ORD-1002", json!(30)),
            call("call_3", "get_order", json!({"order_id": "ORD-1002"})),
            r#"{"approve": {"approver": {"tenant": "acme", "user": "lead"}, "reason": "ok"}}"#
                .to_owned(),
        ]),
        &FAST,
    );
    let message = &answers[0]["anthropic"];
    assert_eq!(message["role"], "user");
    let blocks = message["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0]["tool_use_id"], "toolu_1");
    assert_eq!(blocks[1]["tool_use_id"], "toolu_2");
    assert!(
        blocks.iter().all(|block| block["is_error"] != true),
        "{message}"
    );
    let again = only_result(&answers[1]);
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(
        answers[2]["run_aborted"]["kind"], "permission_denied",
        "{}",
        answers[2]
    );
    assert!(
        answers[3]["run_aborted"].is_object(),
        "an aborted run stays aborted"
    );
    // No refund here was over the threshold: nothing waits for a decision.
    assert_eq!(answers[4], json!({"decided": []}));
    assert_eq!(answers[5], ledger(&[("ORD-1002", "30.00", 1)], 1, 0));
}

#[test]
fn a_turn_without_calls_has_nothing_to_send_back() {
    let answers = play(
        &script(&[
            json!({"anthropic": {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}})
                .to_string(),
            json!({"openai": {"role": "assistant", "content": "Done.", "tool_calls": null}})
                .to_string(),
        ]),
        &FAST,
    );
    assert_eq!(
        answers[..2],
        [json!({"anthropic": null}), json!({"openai": null})]
    );
    assert_eq!(answers[2], ledger(&[], 0, 0));
}

#[test]
fn a_slow_answer_within_the_timeout_is_a_success() {
    let answers = play(
        &script(&[
            json!({"fault": {"operation": "refund", "kind": "slow", "times": 1, "ms": 50}})
                .to_string(),
            refund("call_1", "ORD-1001", json!(1)),
        ]),
        &["--provider-timeout-ms", "5000"],
    );
    assert_eq!(only_result(&answers[0])["status"], "succeeded");
    assert_eq!(answers[1], ledger(&[("ORD-1001", "1.00", 1)], 1, 0));
}

#[test]
fn an_unreachable_provider_leaves_the_outcome_unknown_until_a_later_pass() {
    let lookup_fault =
        json!({"fault": {"operation": "lookup", "kind": "unavailable_before_apply", "times": 1}});
    let answers = play(
        &script(&[
            fault("timeout_after_apply", 1),
            refund("call_1", "ORD-1002", json!(99.99)),
            lookup_fault.to_string(),
            RECONCILE.to_owned(),
            RECONCILE.to_owned(),
        ]),
        &FAST,
    );
    assert_eq!(only_result(&answers[0])["status"], "outcome_unknown");
    assert_eq!(
        answers[1],
        json!({"reconciled": {"succeeded": 0, "failed": 0, "still_unknown": 1}})
    );
    assert_eq!(
        answers[2],
        json!({"reconciled": {"succeeded": 1, "failed": 0, "still_unknown": 0}})
    );
    assert_eq!(answers[3], ledger(&[("ORD-1002", "99.99", 1)], 1, 2));
}

#[test]
fn a_bad_fault_line_is_an_error() {
    let output = play_output(
        &script(&[
            json!({"fault": {"operation": "refund", "kind": "explode"}}).to_string(),
            json!({"fault": {"operation": "refund", "kind": "slow"}}).to_string(),
            json!({"fault": {"operation": "orders", "kind": "slow", "ms": 5}}).to_string(),
            json!({"fault": {"operation": "refund", "kind": "slow", "ms": 60_001}}).to_string(),
            json!({"fault": {"operation": "refund", "kind": "timeout_after_apply", "times": 4_000_000_000_u64}}).to_string(),
            json!({"fault": {"operation": "refund", "kind": "timeout_after_apply", "times": 1001}}).to_string(),
            json!({"fault": {"operation": "refund", "kind": "timeout_after_apply", "times": 0}}).to_string(),
            r#"{"fault": {"operation": "refund", "kind": "timeout_after_apply", "times": 1, "times": 9}}"#.to_owned(),
            // Within the limits: armed, and the refund that takes it is slow but served.
            json!({"fault": {"operation": "refund", "kind": "slow", "times": 1000, "ms": 1}}).to_string(),
            refund("call_1", "ORD-1001", json!(1)),
        ]),
        &FAST,
    );
    assert_eq!(output.status.code(), Some(0), "every line was answered");
    let answers = json_lines(&output.stdout);
    let needles = [
        "unknown fault kind `explode`",
        "needs `ms`",
        "unknown operation `orders`",
        "waits at most 60000 ms, not 60001",
        "`times` is between 1 and 1000, not 4000000000",
        "`times` is between 1 and 1000, not 1001",
        "`times` is between 1 and 1000, not 0",
        "the key `times` is given twice",
    ];
    for (number, (answer, needle)) in answers.iter().zip(needles).enumerate() {
        let error = answer["error"].as_str().unwrap();
        assert!(
            error.starts_with(&format!("line {}: ", number + 1)),
            "{error}"
        );
        assert!(error.contains(needle), "{needle:?} not in {error}");
    }
    assert_eq!(only_result(&answers[8])["status"], "succeeded");
    assert_eq!(answers[9], ledger(&[("ORD-1001", "1.00", 1)], 1, 0));
}

/// The script is read as bytes: a byte-order mark is skipped, a line that is not UTF-8 is that
/// line's error, a key given twice is an error naming it, and every other line still plays.
#[test]
fn a_script_is_read_line_by_line_whatever_its_bytes() {
    let mut script = b"\xEF\xBB\xBF".to_vec();
    script.extend_from_slice(refund("call_1", "ORD-1001", json!(10)).as_bytes());
    script.extend_from_slice(b"\r\n{\"run\": \"r\xFF\xFE\"}\n");
    script.extend_from_slice(br#"{"run": "r2", "run": "r3"}"#);
    script.extend_from_slice(b"\n\n");
    script.extend_from_slice(refund("call_2", "ORD-1002", json!(20)).as_bytes());
    let output = play_bytes(&script, &FAST);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let answers = json_lines(&output.stdout);
    assert_eq!(answers.len(), 5, "{answers:?}");
    assert_eq!(
        only_result(&answers[0])["status"],
        "succeeded",
        "after the BOM"
    );
    assert_eq!(
        answers[1],
        json!({"error": "line 2: not UTF-8: the byte at column 11 cannot start or continue a character"})
    );
    let twice = answers[2]["error"].as_str().unwrap();
    assert!(
        twice.starts_with("line 3: the key `run` is given twice"),
        "{twice}"
    );
    assert_eq!(only_result(&answers[3])["status"], "succeeded");
    assert_eq!(
        answers[4],
        ledger(&[("ORD-1001", "10.00", 1), ("ORD-1002", "20.00", 1)], 2, 0)
    );
}

/// What the desk answers a line of a hostile script with: nothing, a turn's results in that
/// format, an error, or a reconciliation.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Answer {
    Nothing,
    Turn(&'static str),
    Error,
    Reconciled,
}

/// The call ids of a turn line, in order.
fn call_ids(line: &[u8]) -> Vec<String> {
    // Typed, so that arguments nested past a JSON tree's depth are skipped, not parsed.
    #[derive(serde::Deserialize)]
    struct Turn {
        openai: Option<Calls>,
        anthropic: Option<Blocks>,
    }
    #[derive(serde::Deserialize)]
    struct Calls {
        tool_calls: Vec<Id>,
    }
    #[derive(serde::Deserialize)]
    struct Blocks {
        content: Vec<Id>,
    }
    #[derive(serde::Deserialize)]
    struct Id {
        id: String,
    }
    let turn: Turn = serde_json::from_slice(line).unwrap();
    match (turn.openai, turn.anthropic) {
        (Some(calls), _) => calls.tool_calls,
        (None, Some(blocks)) => blocks.content,
        (None, None) => panic!("not a turn"),
    }
    .into_iter()
    .map(|call| call.id)
    .collect()
}

/// The ids a turn's answer has a result for, in order, with each result.
fn answered(answer: &Value) -> Vec<(String, Value)> {
    let results: Vec<(&Value, &Value)> = match answer.get("openai") {
        Some(messages) => messages
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (&m["tool_call_id"], &m["content"]))
            .collect(),
        None => answer["anthropic"]["content"]
            .as_array()
            .unwrap_or_else(|| panic!("not a turn's answer: {answer}"))
            .iter()
            .map(|block| (&block["tool_use_id"], &block["content"]))
            .collect(),
    };
    results
        .into_iter()
        .map(|(id, content)| {
            let result = serde_json::from_str(content.as_str().unwrap()).unwrap();
            (id.as_str().unwrap().to_owned(), result)
        })
        .collect()
}

/// Plays `script` and checks what a hostile script must get: exit 0, the expected answer for
/// each line, every call id of each turn answered, no answer larger than `max_answer` bytes, the
/// calls in `succeed` succeeding, those in `may_succeed` as they will, every other an error with
/// a next step, and nothing refunded or even asked of the provider.
fn check_hostile(
    script: &[u8],
    expect: &[Answer],
    (succeed, may_succeed): (&[&str], &[&str]),
    max_answer: usize,
) {
    let lines: Vec<&[u8]> = script
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.is_empty())
        .collect();
    assert_eq!(lines.len(), expect.len(), "one expectation a line");
    let output = play_bytes(script, &FAST);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for line in output.stdout.split(|&byte| byte == b'\n') {
        assert!(
            line.len() <= max_answer,
            "an answer of {} bytes",
            line.len()
        );
    }
    let answers = json_lines(&output.stdout);
    let mut answers = answers.iter();
    for (number, (line, expected)) in lines.iter().zip(expect).enumerate() {
        let number = number + 1;
        if *expected == Answer::Nothing {
            continue;
        }
        let answer = answers
            .next()
            .unwrap_or_else(|| panic!("line {number} got no answer"));
        match expected {
            Answer::Nothing => unreachable!(),
            Answer::Turn(format) => {
                assert!(answer.get(*format).is_some(), "line {number}: {answer}");
                let results = answered(answer);
                let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
                // Every distinct id answered exactly once, in the order of its first call.
                let mut expected_ids = Vec::new();
                for id in call_ids(line) {
                    if !expected_ids.contains(&id) {
                        expected_ids.push(id);
                    }
                }
                assert_eq!(
                    ids, expected_ids,
                    "line {number}: every call id answered once"
                );
                for (id, result) in &results {
                    if may_succeed.contains(&id.as_str()) {
                        continue;
                    }
                    let wanted = if succeed.contains(&id.as_str()) {
                        "succeeded"
                    } else {
                        "error"
                    };
                    assert_eq!(result["status"], wanted, "line {number}, {id}: {result}");
                    if wanted == "error" {
                        assert!(result["error"]["next"].is_string(), "{id}: {result}");
                    }
                }
            }
            Answer::Error => {
                let error = answer["error"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{answer}"));
                assert!(
                    error.starts_with(&format!("line {number}: ")),
                    "line {number}: {error}"
                );
            }
            Answer::Reconciled => assert_eq!(
                answer,
                &json!({"reconciled": {"succeeded": 0, "failed": 0, "still_unknown": 0}})
            ),
        }
    }
    assert_eq!(answers.next(), Some(&ledger(&[], 0, 0)), "nothing refunded");
    assert_eq!(answers.next(), None);
}

fn openai_turn(calls: &[(&str, &str, String)]) -> Vec<u8> {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, arguments)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
        })
        .collect();
    json!({"openai": {"role": "assistant", "content": null, "tool_calls": tool_calls}})
        .to_string()
        .into_bytes()
}

/// `examples/scenarios/hostile-turns.jsonl` (a byte-order mark, order ids with `/`, `?`, `%`,
/// `#` and `..`, deep nesting, a line not in UTF-8, a key given twice, a fault of four billion
/// requests), then turns too large to commit: a 300 KB order id beside a good read, a 10 MB
/// amount, 20,000 unknown fields, a 1 MB key. Every line is answered, each turn's every call id,
/// in bounded answers, and nothing reaches the provider's refunds.
#[test]
fn a_hostile_script_is_answered_line_by_line_and_refunds_nothing() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/hostile-turns.jsonl");
    let mut script = std::fs::read(path).unwrap();
    let huge_id = format!("ORD-{}", "1".repeat(300_000));
    script.extend(openai_turn(&[
        (
            "g1",
            "get_order",
            json!({ "order_id": huge_id }).to_string(),
        ),
        (
            "g2",
            "get_order",
            json!({"order_id": "ORD-1002"}).to_string(),
        ),
    ]));
    script.push(b'\n');
    let huge_amount = "9".repeat(10 * 1024 * 1024);
    script.extend(openai_turn(&[(
        "g3",
        "issue_refund",
        json!({"order_id": "ORD-1001", "amount": huge_amount}).to_string(),
    )]));
    script.push(b'\n');
    let mut fields = serde_json::Map::new();
    fields.insert("order_id".into(), json!("ORD-1001"));
    fields.insert("amount".into(), json!(5));
    for i in 0..20_000 {
        fields.insert(format!("extra_{i}"), json!(i));
    }
    script.extend(openai_turn(&[(
        "g4",
        "issue_refund",
        Value::Object(fields).to_string(),
    )]));
    script.push(b'\n');
    let key = "k".repeat(1024 * 1024);
    let anthropic = json!({"anthropic": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "g5", "name": "issue_refund",
         "input": {"order_id": "ORD-1001", "amount": 5, key: 1}},
    ]}});
    script.extend(anthropic.to_string().into_bytes());
    script.push(b'\n');

    use Answer::*;
    let expect = [
        Nothing,
        Turn("openai"),
        Turn("openai"),
        Turn("anthropic"),
        Turn("openai"),
        Error, // not UTF-8
        Error, // `run` twice
        Error, // times 4000000000
        Error, // an operation with a path in it
        Error, // a turn that is not an object
        Reconciled,
        Turn("openai"),
        Turn("openai"),
        Turn("openai"),
        Turn("anthropic"),
    ];
    check_hostile(&script, &expect, (&["h5", "g2"], &[]), 16 * 1024);
}

/// Hostile turns that the provider formats must take apart call by call: the same key twice in
/// a call's arguments (in text and in an Anthropic `input`), one id for two calls, and nesting
/// too deep for a JSON tree inside one call of an Anthropic turn. Each bad call gets its own
/// error, its siblings run, and nothing is refunded.
#[test]
fn hostile_turns_the_formats_take_apart_call_by_call() {
    let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    let lines = [
        openai_turn(&[(
            "p1",
            "issue_refund",
            r#"{"order_id": "ORD-1001", "amount": 5, "amount": 500}"#.to_owned(),
        )]),
        br#"{"anthropic": {"role": "assistant", "content": [{"type": "tool_use", "id": "p2", "name": "issue_refund", "input": {"order_id": "ORD-1003", "amount": 1, "amount": 100}}]}}"#.to_vec(),
        openai_turn(&[
            ("p3", "get_order", json!({"order_id": "ORD-1001"}).to_string()),
            ("p3", "issue_refund", json!({"order_id": "ORD-1002", "amount": 5}).to_string()),
        ]),
        format!(
            r#"{{"anthropic": {{"role": "assistant", "content": [{{"type": "tool_use", "id": "p4", "name": "get_order", "input": {{"order_id": "ORD-1004"}}}}, {{"type": "tool_use", "id": "p5", "name": "issue_refund", "input": {{"order_id": "ORD-1004", "amount": {deep}}}}}]}}}}"#
        )
        .into_bytes(),
    ];
    let script = lines.join(&b'\n');
    use Answer::*;
    check_hostile(
        &script,
        &[
            Turn("openai"),
            Turn("anthropic"),
            Turn("openai"),
            Turn("anthropic"),
        ],
        // Neither call under the reused id runs: the id gets one error.
        (&["p4"], &[]),
        16 * 1024,
    );
}

/// An order id is `ORD-` and up to ten digits, as the tools' schemas tell the model: anything
/// else, a path, a query, an escape, a fragment or 300 KB, is `invalid_arguments` naming
/// `/order_id`, in a small answer, and never reaches the provider.
#[test]
fn an_order_id_that_is_not_one_is_invalid_arguments() {
    let huge = format!("ORD-{}", "1".repeat(300_000));
    let ids = [
        huge.as_str(),
        "ORD-1001/../refunds",
        "ORD-1001?x=1",
        "ORD-1001%2F",
        "ORD-1001#x",
    ];
    let mut lines = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        lines.push(call(
            &format!("get_{n}"),
            "get_order",
            json!({ "order_id": id }),
        ));
        lines.push(refund(&format!("refund_{n}"), id, json!(5)));
    }
    let answers = play(&script(&lines), &FAST);
    assert_eq!(answers.len(), 2 * ids.len() + 1);
    for answer in &answers[..2 * ids.len()] {
        assert!(answer.to_string().len() < 2048, "a small answer");
        let result = only_result(answer);
        assert_eq!(result["error"]["kind"], "invalid_arguments", "{result}");
        let why = result["error"]["why"].as_str().unwrap();
        assert!(why.starts_with("/order_id: "), "{why}");
        assert!(
            why.contains("does not match \"^ORD-[0-9]{1,10}$\""),
            "{why}"
        );
    }
    assert_eq!(answers.last().unwrap(), &ledger(&[], 0, 0));
}

/// The text of the story `name` in `examples/scenarios/`.
fn story(name: &str) -> String {
    std::fs::read_to_string(format!("{}/scenarios/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The same refund in two runs of the desk, one process after the other on the same SQLite file
/// and provider (an agent restarted with a new run id): the second run's answer is the first
/// one's refund, a replay, and the provider's ledger holds one refund.
#[test]
fn the_same_refund_in_two_runs_of_the_desk_is_applied_once() {
    let provider = FakePayments::start();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("operations.db").display());
    let args = ["--store", &store, "--provider-url", &provider.url];
    let refund = call(
        "refund_1",
        "issue_refund",
        json!({"order_id": "ORD-1001", "amount": 120}),
    );
    let run = |id: &str| {
        let script = format!("{}\n{refund}\n", json!({ "run": id }));
        play(&script, &args)
    };
    let first = only_result(&run("monday")[0]);
    let second_answers = run("tuesday");
    let second = only_result(&second_answers[0]);
    assert_eq!(first["status"], "succeeded", "{first}");
    assert_eq!(first["replayed"], false, "{first}");
    assert_eq!(second["status"], "succeeded", "{second}");
    assert_eq!(second["replayed"], true, "{second}");
    assert_eq!(second["data"], first["data"]);
    assert_eq!(
        second_answers[1],
        ledger(&[("ORD-1001", "120.00", 1)], 1, 0),
        "refunded once"
    );
}

/// `looping-model.jsonl`: a model that repeats failing refunds is stopped by the run: a call that
/// failed and would fail again is not run again, a refund failing for a transient fault is
/// stopped by the retry budget (whose counters survive a restart: they live in the store), and
/// the step limit aborts the run.
#[test]
fn a_looping_model_is_stopped_by_its_run_limits() {
    let output = play_output(&story("looping-model.jsonl"), &FAST);
    assert!(output.status.success(), "{output:?}");
    let answers = json_lines(&output.stdout);
    assert_eq!(answers.len(), 7, "{answers:?}");
    let refused = only_result(&answers[0]);
    assert_eq!(refused["error"]["kind"], "refused", "{refused}");
    let repeated = only_result(&answers[1]);
    assert_eq!(repeated["error"]["kind"], "repeated_call", "{repeated}");
    assert_eq!(
        repeated["error"]["next"],
        "that call already failed; change the approach: other arguments, another tool, or tell the user"
    );
    // Two attempts of the 5 spent: the 503s get three, retried below the model.
    let stopped = only_result(&answers[2]);
    assert_eq!(
        stopped["error"]["kind"], "retry_budget_exhausted",
        "{stopped}"
    );
    assert_eq!(
        stopped["error"]["what"],
        "issue_refund failed 3 times in a row and its 5 attempts in this run are used up; \
         nothing was applied"
    );
    assert!(
        stopped["error"]["next"]
            .as_str()
            .unwrap()
            .starts_with("stop retrying: do not call issue_refund again in this run"),
        "not `try again later`: {stopped}"
    );
    // After the restart the budget is still spent: the refund does not run.
    let spent = only_result(&answers[3]);
    assert_eq!(spent["error"]["kind"], "retry_budget_exhausted", "{spent}");
    assert_eq!(
        spent["error"]["what"],
        "issue_refund did not run: it has used its 5 attempts in this run"
    );
    assert_eq!(
        answers[4],
        json!({"run_aborted": {
            "kind": "run_budget_exhausted",
            "reason": "the run reached its limit of 4 model turns",
            "calls": [{"id": "call_5", "tool": "issue_refund", "status": "not_started"}],
        }})
    );
    assert_eq!(
        answers[5],
        json!({"run_aborted": {
            "kind": "run_budget_exhausted",
            "reason": "the run reached its limit of 4 model turns",
            "calls": [],
        }}),
        "a later turn of the aborted run runs nothing"
    );
    assert_eq!(
        answers[6],
        ledger(&[], 3, 0),
        "three attempts of the refund that met the 503s: the repeat, the refund after the \
         budget was spent and the turns past the limit sent nothing"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    for said in [
        "call_5 issue_refund: not started (nothing of it was sent)",
        "call_6 issue_refund: not started (the run was aborted before this turn)",
    ] {
        assert!(stderr.contains(said), "{said:?} not in:\n{stderr}");
    }
    assert_eq!(
        stderr.matches("provider: GET /orders/ORD-1003").count(),
        1,
        "the repeat of the refused refund did not run:\n{stderr}"
    );
}

/// `two-refunds-one-order.jsonl`: writes on one order in one turn run one after the other; the
/// identical one runs once, and one with another amount under the same key is a conflict.
#[test]
fn two_refunds_of_one_order_in_one_turn() {
    let answers = play(&story("two-refunds-one-order.jsonl"), &FAST);
    assert_eq!(answers.len(), 3, "{answers:?}");
    let refund = |id: &str, amount: &str| json!({"refund_id": id, "order_id": if id == "re_000001" { "ORD-1001" } else { "ORD-1002" }, "amount": amount});
    let identical = openai_results(&answers[0]);
    assert_eq!(
        identical,
        [
            json!({"status": "succeeded", "replayed": false, "data": refund("re_000001", "100.00")}),
            json!({"status": "succeeded", "replayed": true, "data": refund("re_000001", "100.00")}),
        ]
    );
    let different = openai_results(&answers[1]);
    assert_eq!(
        different[0],
        json!({"status": "succeeded", "replayed": false, "data": refund("re_000002", "100.00")})
    );
    assert_eq!(different[1]["status"], "error", "{}", different[1]);
    assert_eq!(
        different[1]["error"]["kind"], "conflict",
        "{}",
        different[1]
    );
    assert_eq!(
        answers[2],
        ledger(
            &[("ORD-1001", "100.00", 1), ("ORD-1002", "100.00", 1)],
            2,
            0
        ),
        "one refund per operation"
    );
}

/// `rate-limited-burst.jsonl`: seven lookups of one order in one turn against `get_order`'s
/// 5/min: five run, two are answered `rate_limited` with how long to wait and never reach the
/// provider.
#[test]
fn a_burst_over_the_rate_limit_never_reaches_the_provider() {
    let output = play_output(&story("rate-limited-burst.jsonl"), &FAST);
    assert!(output.status.success(), "{output:?}");
    let answers = json_lines(&output.stdout);
    assert_eq!(answers.len(), 2, "{answers:?}");
    let ids: Vec<&str> = answers[0]["openai"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "call_1", "call_2", "call_3", "call_4", "call_5", "call_6", "call_7"
        ]
    );
    let results = openai_results(&answers[0]);
    let succeeded = results
        .iter()
        .filter(|result| result["status"] == "succeeded")
        .count();
    assert_eq!(succeeded, 5, "{results:?}");
    for limited in results
        .iter()
        .filter(|result| result["status"] != "succeeded")
    {
        assert_eq!(limited["error"]["kind"], "rate_limited", "{limited}");
        let wait = limited["error"]["retry_after_ms"].as_u64().unwrap();
        assert!((1..=12_000).contains(&wait), "{limited}");
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.matches("provider: GET /orders/ORD-1001").count(),
        5,
        "only the calls within the limit reached the provider:\n{stderr}"
    );
    assert_eq!(answers[1], ledger(&[], 0, 0));
}

/// `slow-call-times-out.jsonl`: a read slower than its deadline answers `timeout` with
/// `after_ms`, and the calls beside it in the turn succeed.
#[test]
fn a_slow_read_times_out_while_its_siblings_succeed() {
    let path = "slow-call-times-out.jsonl";
    let answers = play(&story(path), &story_flags(path));
    assert_eq!(answers.len(), 2, "{answers:?}");
    let results = openai_results(&answers[0]);
    assert_eq!(results[0]["status"], "succeeded", "{}", results[0]);
    assert_eq!(results[0]["data"]["order_id"], "ORD-1001");
    assert_eq!(
        results[1],
        json!({"status": "error", "error": {
            "kind": "timeout",
            "what": "get_order did not answer within 1s",
            "why": "the read was stopped at its deadline; it changed nothing",
            "next": "try again in a moment: call get_order again, or tell the user the system is slow",
            "after_ms": 1000,
            "may_still_be_running": false,
        }})
    );
    assert_eq!(results[2]["status"], "succeeded", "{}", results[2]);
    assert_eq!(results[2]["data"]["refund_id"], "re_000001");
    assert_eq!(answers[1], ledger(&[("ORD-1004", "5.00", 1)], 1, 0));
}

/// `abort-keeps-every-report.jsonl`: a session with `refund:create` and without `orders:read`
/// sends a refund and a lookup in one turn: the run aborts before anything runs, the desk
/// answers both calls' statuses, and the provider refunded nothing.
#[test]
fn an_abort_reports_every_call_and_the_ledger_agrees() {
    let output = play_output(&story("abort-keeps-every-report.jsonl"), &FAST);
    assert!(output.status.success(), "{output:?}");
    let answers = json_lines(&output.stdout);
    let reason = "the session may not call get_order: user `refund-bot` of tenant `acme` lacks \
                  the permission `orders:read`";
    assert_eq!(
        answers,
        [
            json!({"run_aborted": {"kind": "permission_denied", "reason": reason, "calls": [
                {"id": "call_1", "tool": "issue_refund", "status": "not_started"},
                {"id": "call_2", "tool": "get_order", "status": "aborted"},
            ]}}),
            json!({"run_aborted": {"kind": "permission_denied", "reason": reason, "calls": []}}),
            ledger(&[], 0, 0),
        ]
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    for said in [
        "call_1 issue_refund: not started",
        "call_2 get_order: aborted the run",
        "call_3 issue_refund: not started (the run was aborted before this turn)",
    ] {
        assert!(stderr.contains(said), "{said:?} not in:\n{stderr}");
    }
}

/// A `run` line with limits that are not limits is that line's error; the run goes on as it was.
#[test]
fn a_bad_run_line_is_an_error() {
    let output = play_output(
        &script(&[
            r#"{"run": {"id": "r1", "max_turns": 1}}"#.to_owned(),
            r#"{"run": {"id": "r1", "max_steps": "1"}}"#.to_owned(),
            r#"{"run": {"id": "r1", "max_steps": 0}}"#.to_owned(),
            refund("call_1", "ORD-1001", json!(10)),
        ]),
        &FAST,
    );
    let answers = json_lines(&output.stdout);
    assert!(
        answers[0]["error"]
            .as_str()
            .unwrap()
            .contains("unknown field `max_turns`"),
        "{answers:?}"
    );
    assert!(
        answers[1]["error"]
            .as_str()
            .unwrap()
            .contains("invalid type: string"),
        "{answers:?}"
    );
    // A limit of 0 turns is a limit: the turn aborts the run.
    assert_eq!(answers[2]["run_aborted"]["kind"], "run_budget_exhausted");
    assert_eq!(answers[3], ledger(&[], 0, 0));
}

/// A fault may name the order whose requests take it: a slow read of ORD-1002 leaves a read of
/// ORD-1001 alone. A lookup asks for a key, so a lookup fault naming an order is an error.
#[test]
fn a_fault_may_name_its_order() {
    let output = play_output(
        &script(&[
            json!({"fault": {"operation": "lookup", "order_id": "ORD-1001", "kind": "slow", "ms": 5}})
                .to_string(),
            json!({"fault": {"operation": "order", "order_id": "ORD-1002", "kind": "unavailable_before_apply", "times": 3}})
                .to_string(),
            call("call_1", "get_order", json!({"order_id": "ORD-1001"})),
            call("call_2", "get_order", json!({"order_id": "ORD-1002"})),
        ]),
        &FAST,
    );
    let answers = json_lines(&output.stdout);
    assert!(
        answers[0]["error"]
            .as_str()
            .unwrap()
            .contains("a `lookup` fault takes no `order_id`"),
        "{answers:?}"
    );
    assert_eq!(only_result(&answers[1])["status"], "succeeded");
    let failed = only_result(&answers[2]);
    assert_eq!(failed["error"]["kind"], "unavailable", "{failed}");
    assert_eq!(
        failed["error"]["what"],
        "get_order failed 3 times in a row; nothing was applied"
    );
    assert_eq!(answers[3], ledger(&[], 0, 0));
}

/// The answers of a story with what the time of day makes of its approvals taken out.
fn approval_story(name: &str) -> Vec<Value> {
    let path = format!("{}/scenarios/{name}", env!("CARGO_MANIFEST_DIR"));
    let output = desk()
        .args(["--script", &path])
        .args(FAST)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    json_lines(without_approval_times(&output.stdout).as_bytes())
}

#[test]
fn a_big_refund_waits_for_a_manager_and_runs_once() {
    let answers = approval_story("approval-waits-for-a-manager.jsonl");
    assert_eq!(answers.len(), 9, "{answers:#?}");
    let waiting = only_result(&answers[0]);
    assert_eq!(waiting["status"], "awaiting_approval", "{waiting}");
    assert_eq!(waiting["replayed"], false);
    assert_eq!(waiting["error"]["approval_id"], "apr_…");
    assert_eq!(waiting["error"]["expires_at_ms"], 0, "a time, taken out");
    let again = only_result(&answers[1]);
    assert_eq!(again["status"], "awaiting_approval");
    assert_eq!(again["replayed"], true, "the same approval, not a second");
    let own = answers[2]["error"].as_str().unwrap();
    assert!(own.contains("agent asked for approval"), "{own}");
    let clerk = answers[3]["error"].as_str().unwrap();
    assert!(
        clerk.contains("takes the permission `refund:approve`"),
        "{clerk}"
    );
    let decided = answers[4]["decided"].as_array().unwrap();
    assert_eq!(decided.len(), 1, "{}", answers[4]);
    assert_eq!(decided[0]["status"], "approved");
    let ran = only_result(&answers[5]);
    assert_eq!(ran["status"], "succeeded", "{ran}");
    assert_eq!(ran["replayed"], false);
    assert_eq!(ran["data"]["amount"], "8000.00");
    let replay = only_result(&answers[6]);
    assert_eq!(replay["status"], "succeeded");
    assert_eq!(replay["replayed"], true);
    assert_eq!(answers[7], json!({"executed": []}), "nothing left to run");
    assert_eq!(answers[8], ledger(&[("ORD-1002", "8000.00", 1)], 1, 0));
}

#[test]
fn a_waiting_refund_is_rejected_when_the_balance_changed() {
    let answers = approval_story("balance-changes-while-waiting.jsonl");
    // The refund made at the provider, outside the agent, has no answer of its own.
    assert_eq!(answers.len(), 5, "{answers:#?}");
    assert_eq!(only_result(&answers[0])["status"], "awaiting_approval");
    assert_eq!(answers[1]["decided"][0]["status"], "approved");
    let executed = answers[2]["executed"].as_array().unwrap();
    assert_eq!(executed.len(), 1, "{}", answers[2]);
    assert_eq!(executed[0]["status"], "rejected");
    let rejected = only_result(&answers[3]);
    assert_eq!(rejected["status"], "rejected", "{rejected}");
    let why = rejected["error"]["why"].as_str().unwrap();
    assert!(why.contains("failed the checks before it ran"), "{why}");
    assert!(why.contains("at most 7900.00 is refundable"), "{why}");
    assert_eq!(answers[4], ledger(&[("ORD-1002", "100.00", 1)], 1, 0));
}
