//! The dispatcher's pipeline: look-up, validation, authorisation, deadline, result object, and
//! one report per call id. Bad input must get a clear error and never run the tool.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::run::RunAborted;

/// Counts how many times tool bodies ran; the test keeps a clone.
#[derive(Clone, Default)]
struct Runs(Arc<AtomicUsize>);

impl Runs {
    fn bump(ctx: &Ctx) -> Result<(), ToolError> {
        ctx.state::<Runs>()?.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Look up an order.
#[tool(permission = "orders:read", timeout = "1s")]
async fn get_order(ctx: &Ctx, order_id: String) -> Result<Value, ToolError> {
    Runs::bump(ctx)?;
    if order_id == "ORD-SLOW" {
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    if order_id == "ORD-9999" {
        return Err(ToolError::not_found("order ORD-9999 does not exist")
            .with_why("no order has that id")
            .with_next("call get_order with one of ORD-1001, ORD-1002"));
    }
    Ok(json!({"order_id": order_id, "paid": "500.00"}))
}

/// Refund an order.
#[tool(side_effect = "write", permission = "refund:create", timeout = "2s", key = [order_id])]
async fn issue_refund(
    ctx: &Ctx,
    order_id: String,
    amount: f64,
    count: Option<u32>,
) -> Result<Value, ToolError> {
    Runs::bump(ctx)?;
    if order_id == "ORD-SLOW" {
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    if order_id == "ORD-REVOKED" {
        return Err(ToolError::credentials_revoked(
            "the payment provider rejected the API key",
        ));
    }
    Ok(json!({"refund_id": "re_1", "amount": amount, "count": count}))
}

/// Needs state nobody gave.
#[tool]
async fn unconfigured(ctx: &Ctx) -> Result<(), ToolError> {
    ctx.state::<String>()?;
    Ok(())
}

fn dispatcher() -> (Dispatcher, Runs) {
    let mut registry = Registry::new();
    registry
        .register::<get_order>()
        .unwrap()
        .register::<issue_refund>()
        .unwrap()
        .register::<unconfigured>()
        .unwrap();
    let runs = Runs::default();
    (
        Dispatcher::builder(registry)
            .store(std::sync::Arc::new(toolgate_test::MemoryStore::new()))
            .state(runs.clone())
            .build(),
        runs,
    )
}

fn session(permissions: &[&str]) -> Session {
    Session::new(
        crate::support::agent().with_permissions(permissions.iter().copied()),
        "run-1",
    )
}

async fn call(dispatcher: &Dispatcher, session: &Session, call: ToolCall) -> Value {
    dispatcher
        .dispatch(session, call)
        .await
        .unwrap()
        .result
        .to_json()
}

#[tokio::test]
async fn a_good_call_succeeds_with_the_tool_data() {
    let (d, runs) = dispatcher();
    let s = session(&["orders:read"]);
    let result = call(
        &d,
        &s,
        ToolCall::new("c1", "get_order", json!({"order_id": "ORD-1001"})),
    )
    .await;
    assert_eq!(
        result,
        json!({"status": "succeeded", "replayed": false, "data": {"order_id": "ORD-1001", "paid": "500.00"}})
    );
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn an_unknown_tool_lists_the_known_ones() {
    let (d, runs) = dispatcher();
    let s = session(&["orders:read"]);
    let result = call(&d, &s, ToolCall::new("c1", "refund_everything", json!({}))).await;
    assert_eq!(result["status"], "error");
    assert_eq!(result["error"]["kind"], "unknown_tool");
    assert_eq!(
        result["error"]["what"],
        "there is no tool named \"refund_everything\""
    );
    assert_eq!(
        result["error"]["next"],
        "call one of: get_order, issue_refund, unconfigured"
    );
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn a_tool_the_session_was_not_shown_is_unknown_to_it_and_the_run_goes_on() {
    let (d, runs) = dispatcher();
    let s = session(&["orders:read"])
        .with_shown_tools(|tool: &str| tool == "get_order" || tool == "unconfigured");
    let hidden = ToolCall::new(
        "c1",
        "issue_refund",
        json!({"order_id": "ORD-1", "amount": 5}),
    );
    let result = call(&d, &s, hidden).await;
    assert_eq!(result["error"]["kind"], "unknown_tool");
    assert_eq!(
        result["error"]["what"],
        "there is no tool named \"issue_refund\""
    );
    // Only the tools shown are named.
    assert_eq!(
        result["error"]["next"],
        "call one of: get_order, unconfigured"
    );
    assert_eq!(
        s.aborted(),
        None,
        "a tool never shown does not abort the run"
    );
    let read = call(
        &d,
        &s,
        ToolCall::new("c2", "get_order", json!({"order_id": "ORD-1"})),
    )
    .await;
    assert_eq!(read["status"], "succeeded");
    assert_eq!(runs.count(), 1);

    // Shown, a tool the session may not call aborts the run, as without a catalog.
    let shown = session(&["orders:read"]).with_shown_tools(|_: &str| true);
    let refund = ToolCall::new(
        "c3",
        "issue_refund",
        json!({"order_id": "ORD-1", "amount": 5}),
    );
    let aborted = d.dispatch(&shown, refund).await.unwrap_err();
    assert_eq!(aborted.kind, ErrorKind::PermissionDenied);
}

#[tokio::test]
async fn a_session_with_another_caller_keeps_its_run_and_abort() {
    let (d, _runs) = dispatcher();
    let reader = session(&["orders:read"]);
    let refund = ToolCall::new(
        "c1",
        "issue_refund",
        json!({"order_id": "ORD-1", "amount": 5}),
    );
    let aborted = d.dispatch(&reader, refund).await.unwrap_err();
    // The caller authenticated again, with more permissions: the same run, still aborted.
    let again = reader
        .with_auth(crate::support::agent().with_permissions(["orders:read", "refund:create"]));
    assert_eq!(again.run_id(), reader.run_id());
    let read = ToolCall::new("c2", "get_order", json!({"order_id": "ORD-1"}));
    assert_eq!(d.dispatch(&again, read).await.unwrap_err(), aborted);
}

#[tokio::test]
async fn a_huge_unknown_tool_name_is_cut_in_the_message() {
    let (d, _) = dispatcher();
    let s = session(&[]);
    let name = "x".repeat(100_000);
    let result = call(&d, &s, ToolCall::new("c1", name, json!({}))).await;
    assert_eq!(result["error"]["kind"], "unknown_tool");
    assert!(result["error"]["what"].as_str().unwrap().len() < 300);
}

/// Every malformed input gets `invalid_arguments` saying where, and the tool never runs.
#[tokio::test]
async fn bad_arguments_never_reach_the_tool() {
    let (d, runs) = dispatcher();
    let s = session(&["orders:read", "refund:create"]);
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let cases: Vec<(ToolCall, &str)> = vec![
        (
            ToolCall::from_json_text("c1", "issue_refund", "{\"order_id\": \"ORD-1\", "),
            "not valid JSON",
        ),
        (
            ToolCall::from_json_text("c2", "issue_refund", "[1, 2]"),
            "the arguments are not a JSON object",
        ),
        (
            ToolCall::new("c3", "issue_refund", json!("ORD-1")),
            "is not of type \"object\"",
        ),
        (
            ToolCall::from_json_text("c4", "issue_refund", ""),
            "not valid JSON",
        ),
        (
            ToolCall::new("c5", "issue_refund", json!({"order_id": "ORD-1"})),
            "\"amount\" is a required property",
        ),
        (
            ToolCall::new("c6", "issue_refund", json!({"order_id": 7, "amount": 1})),
            "/order_id: 7 is not of type \"string\"",
        ),
        (
            ToolCall::new(
                "c7",
                "issue_refund",
                json!({"order_id": "ORD-1", "amount": 1, "note": "x"}),
            ),
            "('note' was unexpected)",
        ),
        (
            ToolCall::new(
                "c8",
                "issue_refund",
                json!({"order_id": "ORD-1", "amount": 1, "count": 1u64 << 40}),
            ),
            "/count: 1099511627776 is greater than the maximum of 4294967295",
        ),
        (
            ToolCall::new(
                "c9",
                "issue_refund",
                json!({"order_id": "ORD-1", "amount": 1, "count": -1}),
            ),
            "/count: -1 is less than the minimum of 0",
        ),
        (
            ToolCall::new(
                "c10",
                "issue_refund",
                json!({"order_id": "ORD-1", "amount": 1, "count": 1.5}),
            ),
            "/count: 1.5 is not of type",
        ),
        (
            ToolCall::from_json_text(
                "c11",
                "issue_refund",
                "{\"order_id\": \"ORD-1\", \"amount\": 1e400}",
            ),
            // Valid JSON, but beyond what a JSON tree holds.
            "the arguments hold a value that cannot be read",
        ),
        (
            ToolCall::new(
                "c12",
                "issue_refund",
                json!({"order_id": "ORD-1", "amount": "ten"}),
            ),
            "/amount: \"ten\" is not of type \"number\"",
        ),
        (
            ToolCall::from_json_text("c13", "issue_refund", &deep),
            "the arguments hold a value that cannot be read",
        ),
        (
            ToolCall::malformed(
                "c14",
                "issue_refund",
                "the arguments are not a JSON string",
                "got an object",
            ),
            "the arguments are not a JSON string",
        ),
    ];
    for (bad, expected) in cases {
        let id = bad.id.clone();
        let result = call(&d, &s, bad).await;
        assert_eq!(result["status"], "error", "{id}: {result}");
        assert_eq!(
            result["error"]["kind"], "invalid_arguments",
            "{id}: {result}"
        );
        let text = format!(
            "{} {}",
            result["error"]["what"].as_str().unwrap(),
            result["error"]["why"].as_str().unwrap_or_default()
        );
        assert!(
            text.contains(expected),
            "{id}: expected {expected:?} in {text}"
        );
        let next = result["error"]["next"].as_str().unwrap();
        assert!(next.contains("issue_refund"), "{id}: {next}");
    }
    assert_eq!(runs.count(), 0, "no malformed call may run the tool");

    let good = ToolCall::new(
        "ok",
        "issue_refund",
        json!({"order_id": "ORD-1", "amount": 3.0, "count": 2.0}),
    );
    let result = call(&d, &s, good).await;
    assert_eq!(
        result["data"],
        json!({"refund_id": "re_1", "amount": 3.0, "count": 2})
    );
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn a_tool_error_reaches_the_model_in_three_parts() {
    let (d, _) = dispatcher();
    let s = session(&["orders:read"]);
    let result = call(
        &d,
        &s,
        ToolCall::new("c1", "get_order", json!({"order_id": "ORD-9999"})),
    )
    .await;
    assert_eq!(
        result,
        json!({"status": "error", "error": {
            "kind": "not_found",
            "what": "order ORD-9999 does not exist",
            "why": "no order has that id",
            "next": "call get_order with one of ORD-1001, ORD-1002"
        }})
    );
}

#[tokio::test]
async fn a_missing_permission_aborts_the_run_before_the_tool_runs() {
    let (d, runs) = dispatcher();
    let s = session(&["orders:read"]);
    let aborted = d
        .dispatch(
            &s,
            ToolCall::new(
                "c1",
                "issue_refund",
                json!({"order_id": "ORD-1", "amount": 5}),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(aborted.kind, ErrorKind::PermissionDenied);
    assert!(
        aborted
            .reason
            .contains("lacks the permission `refund:create`"),
        "{aborted}"
    );
    assert_eq!(runs.count(), 0);

    // The run stays aborted: even a permitted read no longer runs.
    let again = d
        .dispatch(
            &s,
            ToolCall::new("c2", "get_order", json!({"order_id": "ORD-1"})),
        )
        .await
        .unwrap_err();
    assert_eq!(again, aborted);
    assert_eq!(runs.count(), 0);
    assert_eq!(s.aborted(), Some(&aborted));
}

#[tokio::test]
async fn permission_comes_from_the_session_never_the_arguments() {
    let (d, runs) = dispatcher();
    let s = session(&[]);
    let smuggled = json!({"order_id": "ORD-1", "amount": 5, "permissions": ["refund:create"]});
    let result = d
        .dispatch(&s, ToolCall::new("c1", "issue_refund", smuggled))
        .await;
    // Validation runs first: the smuggled field is an unknown argument, not a permission.
    assert_eq!(
        result.unwrap().result.to_json()["error"]["kind"],
        "invalid_arguments"
    );
    let clean = json!({"order_id": "ORD-1", "amount": 5});
    assert!(
        d.dispatch(&s, ToolCall::new("c2", "issue_refund", clean))
            .await
            .is_err()
    );
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn an_abort_class_error_from_a_tool_aborts_the_run() {
    let (d, _) = dispatcher();
    let s = session(&["refund:create"]);
    let aborted: RunAborted = d
        .dispatch(
            &s,
            ToolCall::new(
                "c1",
                "issue_refund",
                json!({"order_id": "ORD-REVOKED", "amount": 5}),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(aborted.kind, ErrorKind::CredentialsRevoked);
    assert!(s.aborted().is_some());
}

#[tokio::test(start_paused = true)]
async fn a_slow_read_times_out() {
    let (d, _) = dispatcher();
    let s = session(&["orders:read"]);
    let result = call(
        &d,
        &s,
        ToolCall::new("c1", "get_order", json!({"order_id": "ORD-SLOW"})),
    )
    .await;
    assert_eq!(result["status"], "error");
    assert_eq!(result["error"]["kind"], "timeout");
    assert_eq!(
        result["error"]["what"],
        "get_order did not answer within 1s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_write_is_an_unknown_outcome_never_a_failure() {
    let (d, _) = dispatcher();
    let s = session(&["refund:create"]);
    let result = call(
        &d,
        &s,
        ToolCall::new(
            "c1",
            "issue_refund",
            json!({"order_id": "ORD-SLOW", "amount": 5}),
        ),
    )
    .await;
    assert_eq!(result["status"], "outcome_unknown");
    assert_eq!(result["replayed"], false);
    assert_eq!(result["error"]["kind"], "outcome_unknown");
    assert!(
        result["error"]["next"]
            .as_str()
            .unwrap()
            .starts_with("do not assume it failed, and do not repeat the call")
    );
    assert!(!result.to_string().contains("\"failed\""));
}

#[tokio::test]
async fn missing_state_is_an_internal_error_naming_the_type() {
    let (d, _) = dispatcher();
    let s = session(&[]);
    let result = call(&d, &s, ToolCall::new("c1", "unconfigured", json!({}))).await;
    assert_eq!(result["error"]["kind"], "internal");
    assert!(
        result["error"]["why"]
            .as_str()
            .unwrap()
            .contains("alloc::string::String"),
        "{result}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_turn_answers_every_call_id_in_order() {
    let (d, _) = dispatcher();
    let s = session(&["orders:read", "refund:create"]);
    let calls = vec![
        ToolCall::new("a", "get_order", json!({"order_id": "ORD-1001"})),
        ToolCall::new("b", "nope", json!({})),
        ToolCall::from_json_text("c", "issue_refund", "{oops"),
        ToolCall::new("d", "get_order", json!({"order_id": "ORD-SLOW"})),
        ToolCall::new(
            "e",
            "issue_refund",
            json!({"order_id": "ORD-1", "amount": 1}),
        ),
    ];
    let reports = d.dispatch_turn(&s, calls).await.unwrap();
    let summary: Vec<(String, Status)> = reports
        .iter()
        .map(|r| (r.call_id.clone(), r.result.status))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("a".into(), Status::Succeeded),
            ("b".into(), Status::Error),
            ("c".into(), Status::Error),
            ("d".into(), Status::Error),
            ("e".into(), Status::Succeeded),
        ]
    );
}

#[tokio::test]
async fn a_turn_with_an_aborting_call_aborts_as_a_whole() {
    let (d, _) = dispatcher();
    let s = session(&["orders:read"]);
    let calls = vec![
        ToolCall::new("a", "get_order", json!({"order_id": "ORD-1001"})),
        ToolCall::new(
            "b",
            "issue_refund",
            json!({"order_id": "ORD-1", "amount": 1}),
        ),
    ];
    let aborted = d.dispatch_turn(&s, calls).await.unwrap_err();
    assert_eq!(aborted.reason.kind, ErrorKind::PermissionDenied);
    // Permissions are checked before any call starts: the read never ran.
    let fates: Vec<(&str, &str)> = aborted
        .calls
        .iter()
        .map(|call| (call.call_id.as_str(), call.fate.status()))
        .collect();
    assert_eq!(fates, vec![("a", "not_started"), ("b", "aborted")]);
}

/// A value of 10 MB where a number belongs is answered in a few hundred bytes that still say
/// where and what: the schema's errors quote an excerpt, never the value.
#[tokio::test]
async fn a_huge_bad_value_gets_a_small_error_naming_its_pointer() {
    let (d, runs) = dispatcher();
    let s = session(&["refund:create"]);
    let huge = "7".repeat(10 * 1024 * 1024);
    let as_tree = ToolCall::new(
        "c1",
        "issue_refund",
        json!({"order_id": "ORD-1", "amount": huge}),
    );
    let as_text = ToolCall::from_json_text(
        "c2",
        "issue_refund",
        &json!({"order_id": "ORD-1", "amount": huge}).to_string(),
    );
    for call_ in [as_tree, as_text] {
        let result = call(&d, &s, call_).await;
        let size = result.to_string().len();
        assert!(size < 2048, "{size} bytes");
        assert_eq!(result["error"]["kind"], "invalid_arguments", "{result}");
        let why = result["error"]["why"].as_str().unwrap();
        assert!(why.starts_with("/amount: \"777"), "{why}");
        assert!(why.ends_with("7… is not of type \"number\""), "{why}");
    }
    assert_eq!(runs.count(), 0);
}
