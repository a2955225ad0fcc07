//! The answers of the run policies and of timeouts, dispatched for real and rendered in all five
//! wire formats: `call_budget_exhausted`, `retry_budget_exhausted` (the run's budget),
//! `repeated_call`, `rate_limited` (with `retry_after_ms`), a read's `timeout` and a write's
//! `outcome_unknown` (with `after_ms` and `may_still_be_running`).
//!
//! For each format the rendering has the provider's shape, the error is flagged the way that
//! format flags it, and the result object read back from the rendering equals
//! `CallResult::to_json()` field for field. Waiting is on tokio's paused clock; the rate
//! limiter's buckets refill on the dispatcher's `ManualClock`.
//!
//! Call ids are numbers in text ("1", "2"): the form an MCP request id takes once parsed (its
//! JSON text), and an id every other format carries as it is.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::support::session;
use serde_json::{Value, json};
use toolgate::error::ErrorClass;
use toolgate::prelude::*;
use toolgate::provider::{Anthropic, Gemini, Mcp, OpenAiChat, OpenAiResponses, WireFormat};
use toolgate_test::{ManualClock, MemoryStore};

/// How many times the tools' bodies ran.
#[derive(Default)]
struct Runs(AtomicU32);

impl Runs {
    fn count(ctx: &Ctx) -> Result<(), ToolError> {
        ctx.state::<Arc<Runs>>()?.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn get(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Look up an order.
#[tool(timeout = "1s")]
async fn get_order(ctx: &Ctx, order_id: String) -> Result<Value, ToolError> {
    Runs::count(ctx)?;
    Ok(json!({"order_id": order_id}))
}

/// Look up a customer (there are none).
#[tool(timeout = "1s")]
async fn get_customer(ctx: &Ctx, customer_id: String) -> Result<Value, ToolError> {
    Runs::count(ctx)?;
    Err(
        ToolError::not_found(format!("there is no customer {customer_id}"))
            .with_next("check the customer id with the user"),
    )
}

/// Export a report (at most one a minute per tenant).
#[tool(timeout = "1s", rate_limit = "1/min")]
async fn export_report(ctx: &Ctx, month: String) -> Result<Value, ToolError> {
    Runs::count(ctx)?;
    Ok(json!({"month": month}))
}

/// Search the archive (which answers after 5 s, past the deadline; not tried again, so its
/// timeout reaches the model after one attempt).
#[tool(timeout = "1s", retry(max_attempts = 1))]
async fn search_archive(ctx: &Ctx, query: String) -> Result<Value, ToolError> {
    Runs::count(ctx)?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok(json!({"query": query}))
}

/// Refund an order (the provider answers after 5 s, past the deadline).
#[tool(side_effect = "write", key = [order_id], timeout = "1s")]
async fn issue_refund(ctx: &Ctx, order_id: String, amount: u32) -> Result<Value, ToolError> {
    Runs::count(ctx)?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok(json!({"order_id": order_id, "amount": amount}))
}

struct Desk {
    dispatcher: Dispatcher,
    runs: Arc<Runs>,
    clock: Arc<ManualClock>,
}

fn desk(limits: RunLimits) -> Desk {
    let mut registry = Registry::new();
    registry.register::<get_order>().unwrap();
    registry.register::<get_customer>().unwrap();
    registry.register::<export_report>().unwrap();
    registry.register::<search_archive>().unwrap();
    registry.register::<issue_refund>().unwrap();
    let runs = Arc::new(Runs::default());
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let dispatcher = Dispatcher::builder(registry)
        .store(MemoryStore::new())
        .clock(clock.clone())
        .state(runs.clone())
        .run_limits(limits)
        .build();
    Desk {
        dispatcher,
        runs,
        clock,
    }
}

fn call(id: u32, tool: &str, arguments: Value) -> ToolCall {
    ToolCall::new(id.to_string(), tool, arguments)
}

/// The text of a JSON string value, as a JSON value.
fn read_text(value: &Value) -> Value {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not text: {value}"));
    serde_json::from_str(text).unwrap()
}

/// Renders `reports` in every format and checks each rendering: the provider's shape, the error
/// flagged as the format flags it, and every result object read back equal to
/// `CallResult::to_json()`. Every report here is one the model must not take for a success.
fn assert_renders_everywhere(reports: &[CallReport]) {
    for report in reports {
        assert!(
            report.result.status.is_flagged(),
            "a flagged status: {report:?}"
        );
    }
    let expected: Vec<Value> = reports.iter().map(|r| r.result.to_json()).collect();

    // OpenAI Chat Completions: one `tool` message per call, the result as text, no flag.
    let chat = OpenAiChat { strict: false };
    let messages = chat.render_results(reports).expect("reports are answered");
    let text = chat
        .render_results_text(reports)
        .expect("reports are answered");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        messages,
        "the text rendering is the tree rendering"
    );
    let messages = messages.as_array().unwrap();
    assert_eq!(messages.len(), reports.len());
    for ((message, report), result) in messages.iter().zip(reports).zip(&expected) {
        assert_eq!(message["role"], "tool", "{message}");
        assert_eq!(
            message["tool_call_id"],
            report.call_id.as_str(),
            "{message}"
        );
        assert_eq!(
            message.as_object().unwrap().len(),
            3,
            "no error flag in this format: {message}"
        );
        assert_eq!(&read_text(&message["content"]), result, "{message}");
    }

    // OpenAI Responses: one `function_call_output` item per call, no flag.
    let items = OpenAiResponses { strict: false }
        .render_results(reports)
        .expect("reports are answered");
    let items = items.as_array().unwrap();
    assert_eq!(items.len(), reports.len());
    for ((item, report), result) in items.iter().zip(reports).zip(&expected) {
        assert_eq!(item["type"], "function_call_output", "{item}");
        assert_eq!(item["call_id"], report.call_id.as_str(), "{item}");
        assert_eq!(item.as_object().unwrap().len(), 3, "no error flag: {item}");
        assert_eq!(&read_text(&item["output"]), result, "{item}");
    }

    // Anthropic: one user message of `tool_result` blocks, `is_error: true` on each.
    let message = Anthropic::default()
        .render_results(reports)
        .expect("reports are answered");
    assert_eq!(message["role"], "user", "{message}");
    assert_eq!(message.as_object().unwrap().len(), 2, "{message}");
    let blocks = message["content"].as_array().unwrap();
    assert_eq!(blocks.len(), reports.len());
    for ((block, report), result) in blocks.iter().zip(reports).zip(&expected) {
        assert_eq!(block["type"], "tool_result", "{block}");
        assert_eq!(block["tool_use_id"], report.call_id.as_str(), "{block}");
        assert_eq!(block["is_error"], true, "{block}");
        assert_eq!(block.as_object().unwrap().len(), 4, "{block}");
        assert_eq!(&read_text(&block["content"]), result, "{block}");
    }

    // Gemini: one user content of `functionResponse` parts, the result under `response.error`.
    let content = Gemini
        .render_results(reports)
        .expect("reports are answered");
    assert_eq!(content["role"], "user", "{content}");
    let parts = content["parts"].as_array().unwrap();
    assert_eq!(parts.len(), reports.len());
    for ((part, report), result) in parts.iter().zip(reports).zip(&expected) {
        let response = &part["functionResponse"];
        assert_eq!(response["id"], report.call_id.as_str(), "{part}");
        assert_eq!(response["name"], report.tool.as_str(), "{part}");
        assert_eq!(
            response["response"],
            json!({"error": result}),
            "flagged as `error`, never `output`: {part}"
        );
    }

    // MCP: one JSON-RPC response per call, `isError: true`, the result as text and as
    // `structuredContent`.
    let rendered = Mcp.render_results(reports).expect("reports are answered");
    let responses = match &rendered {
        Value::Array(responses) => responses.clone(),
        one => vec![one.clone()],
    };
    assert_eq!(responses.len(), reports.len());
    for ((response, report), result) in responses.iter().zip(reports).zip(&expected) {
        let id: Value = serde_json::from_str(&report.call_id).unwrap();
        assert_eq!(response["jsonrpc"], "2.0", "{response}");
        assert_eq!(response["id"], id, "{response}");
        assert!(response.get("error").is_none(), "a tool result: {response}");
        let body = &response["result"];
        assert_eq!(body["resultType"], "complete", "{response}");
        assert_eq!(body["isError"], true, "{response}");
        let content = body["content"].as_array().unwrap();
        assert_eq!(content.len(), 1, "{response}");
        assert_eq!(content[0]["type"], "text", "{response}");
        assert_eq!(&read_text(&content[0]["text"]), result, "{response}");
        assert_eq!(&body["structuredContent"], result, "{response}");
    }
}

/// The `error` object of a result: its kind, and what, why and next, all said.
fn explained<'a>(result: &'a Value, kind: &str) -> &'a Value {
    let error = &result["error"];
    assert_eq!(error["kind"], kind, "{result}");
    for part in ["what", "why", "next"] {
        assert!(
            error[part].as_str().is_some_and(|text| !text.is_empty()),
            "{part} is said: {result}"
        );
    }
    let advice = ErrorKind::from_name(kind).unwrap().advice();
    assert!(
        advice.opens(error["next"].as_str().unwrap()),
        "a {kind} advises `{}…`: {result}",
        advice.words()
    );
    error
}

/// Each kind has one meaning and one kind of advice (DESIGN §11): the table of every kind's
/// advice, and of the words a `next` giving it opens with. A kind's default `next`, read by the
/// model in a result, gives that advice.
#[test]
fn every_kind_gives_one_kind_of_advice() {
    use toolgate::ErrorKind::*;
    use toolgate::error::Advice::*;
    let table = [
        (InvalidArguments, FixArguments, "fix "),
        (UnknownTool, CallAListedTool, "call one of"),
        (NotFound, CheckTheIdentifier, "check the identifier"),
        (Conflict, DoNotRepeat, "do not repeat"),
        (Refused, DoNotRepeat, "do not repeat"),
        (Timeout, TryAgain, "try again"),
        (RateLimited, Wait, "wait "),
        (RetryBudgetExhausted, Stop, "stop"),
        (
            RepeatedCall,
            ChangeTheApproach,
            "that call already failed; change the approach",
        ),
        (CallBudgetExhausted, Stop, "stop"),
        (Internal, DoNotRepeat, "do not repeat"),
        (Unavailable, TryAgain, "try again"),
        (
            OutcomeUnknown,
            DoNotAssumeItFailed,
            "do not assume it failed",
        ),
        (InProgress, DoNotRepeat, "do not repeat"),
        (AwaitingApproval, TellTheUserItWaits, "tell the user"),
        (Rejected, DoNotRepeat, "do not repeat"),
        (PermissionDenied, Stop, "stop"),
        (CredentialsRevoked, Stop, "stop"),
        (RunBudgetExhausted, Stop, "stop"),
        (PolicyViolation, Stop, "stop"),
    ];
    assert_eq!(table.map(|row| row.0), ErrorKind::ALL, "one row a kind");
    for (kind, advice, words) in table {
        assert_eq!(kind.advice(), advice, "{kind}");
        assert_eq!(advice.words(), words, "{kind}");
        let next = ToolError::new(kind, "x").next().to_owned();
        assert!(advice.opens(&next), "{kind}: {next}");
        // What the model reads (a kind that aborts the run never reaches it).
        if kind.class() != ErrorClass::Abort {
            let result = CallResult::from_error(&ToolError::new(kind, "x")).to_json();
            assert_eq!(result["error"]["kind"], kind.as_str(), "{result}");
            assert_eq!(result["error"]["next"], next.as_str(), "{result}");
        }
    }
}

/// Repeat detection counts only a failure the same call would meet again (DESIGN §5): never
/// one of the infrastructure, a state that changes by itself, or the runtime's own limits.
#[test]
fn only_a_failure_the_same_call_would_meet_again_is_a_repeat() {
    use toolgate::ErrorKind::*;
    const Y: bool = true;
    const N: bool = false;
    let table = [
        (InvalidArguments, Y),
        (UnknownTool, N),
        (NotFound, Y),
        (Conflict, Y),
        (Refused, Y),
        (Timeout, N),
        (RateLimited, N),
        (RetryBudgetExhausted, N),
        (RepeatedCall, N),
        (CallBudgetExhausted, N),
        (Internal, N),
        (Unavailable, N),
        (OutcomeUnknown, N),
        (InProgress, N),
        (AwaitingApproval, N),
        (Rejected, N),
        (PermissionDenied, N),
        (CredentialsRevoked, N),
        (RunBudgetExhausted, N),
        (PolicyViolation, N),
    ];
    assert_eq!(table.map(|row| row.0), ErrorKind::ALL, "one row a kind");
    for (kind, fails_again) in table {
        assert_eq!(kind.fails_again(), fails_again, "{kind}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_turn_past_the_call_limit_answers_call_budget_exhausted_everywhere() {
    let desk = desk(RunLimits::DEFAULT.max_tool_calls(2));
    let session = session();
    let turn = (1..=3)
        .map(|n| call(n, "get_order", json!({"order_id": format!("ORD-{n}")})))
        .collect();
    let reports = desk.dispatcher.dispatch_turn(&session, turn).await.unwrap();

    assert_eq!(desk.runs.get(), 0, "none of the turn's calls ran");
    assert_eq!(reports.len(), 3);
    for (report, id) in reports.iter().zip(["1", "2", "3"]) {
        assert_eq!(report.call_id, id);
        let result = report.result.to_json();
        assert_eq!(result["status"], "error", "{result}");
        let error = explained(&result, "call_budget_exhausted");
        assert_eq!(
            error["next"],
            "stop calling tools; answer the user with what you have"
        );
        assert!(error.get("retry_after_ms").is_none(), "{result}");
    }
    assert_renders_everywhere(&reports);
}

#[tokio::test(start_paused = true)]
async fn a_spent_retry_budget_answers_retry_budget_exhausted_everywhere() {
    let desk = desk(RunLimits::DEFAULT.retry_budget(1));
    let session = session();
    let first = desk
        .dispatcher
        .dispatch(&session, call(1, "get_order", json!({"order_id": "ORD-1"})))
        .await
        .unwrap();
    assert!(first.result.is_succeeded(), "{:?}", first.result);
    let second = desk
        .dispatcher
        .dispatch(&session, call(2, "get_order", json!({"order_id": "ORD-2"})))
        .await
        .unwrap();

    assert_eq!(desk.runs.get(), 1, "the second call did not run");
    let result = second.result.to_json();
    assert_eq!(result["status"], "error", "{result}");
    let error = explained(&result, "retry_budget_exhausted");
    let next = error["next"].as_str().unwrap();
    assert!(next.starts_with("stop retrying"), "{next}");
    assert!(!next.contains("later"), "not a wait: {next}");
    assert_renders_everywhere(&[second]);
}

#[tokio::test(start_paused = true)]
async fn a_call_that_already_failed_answers_repeated_call_everywhere() {
    let desk = desk(RunLimits::DEFAULT);
    let session = session();
    let lookup = |id| call(id, "get_customer", json!({"customer_id": "CUS-9"}));
    let first = desk.dispatcher.dispatch(&session, lookup(1)).await.unwrap();
    assert_eq!(first.result.error_kind(), Some(ErrorKind::NotFound));
    let second = desk.dispatcher.dispatch(&session, lookup(2)).await.unwrap();

    assert_eq!(desk.runs.get(), 1, "the repeat did not run");
    let result = second.result.to_json();
    assert_eq!(result["status"], "error", "{result}");
    let error = explained(&result, "repeated_call");
    assert!(
        error["next"]
            .as_str()
            .unwrap()
            .starts_with("that call already failed; change the approach"),
        "{result}"
    );
    assert_renders_everywhere(&[first, second]);
}

#[tokio::test(start_paused = true)]
async fn a_rate_limited_call_answers_rate_limited_with_its_wait_everywhere() {
    let desk = desk(RunLimits::DEFAULT);
    let session = session();
    let export = |id| call(id, "export_report", json!({"month": "2026-10"}));
    let first = desk.dispatcher.dispatch(&session, export(1)).await.unwrap();
    assert!(first.result.is_succeeded(), "{:?}", first.result);
    desk.clock.advance_ms(15_000);
    let second = desk.dispatcher.dispatch(&session, export(2)).await.unwrap();

    assert_eq!(desk.runs.get(), 1, "the limited call did not run");
    let result = second.result.to_json();
    assert_eq!(result["status"], "error", "{result}");
    let error = explained(&result, "rate_limited");
    assert_eq!(
        error["retry_after_ms"], 45_000,
        "a token a minute, 15 s after the first call: {result}"
    );
    assert_renders_everywhere(&[second]);
}

#[tokio::test(start_paused = true)]
async fn a_read_past_its_deadline_answers_timeout_with_after_ms_everywhere() {
    let desk = desk(RunLimits::DEFAULT);
    let session = session();
    let started = tokio::time::Instant::now();
    let report = desk
        .dispatcher
        .dispatch(&session, call(1, "search_archive", json!({"query": "ORD"})))
        .await
        .unwrap();

    assert_eq!(
        started.elapsed(),
        Duration::from_secs(1),
        "stopped at the deadline"
    );
    assert_eq!(desk.runs.get(), 1);
    let result = report.result.to_json();
    assert_eq!(result["status"], "error", "{result}");
    let error = explained(&result, "timeout");
    assert_eq!(error["after_ms"], 1000, "{result}");
    assert_eq!(error["may_still_be_running"], false, "{result}");
    assert_renders_everywhere(&[report]);
}

#[tokio::test(start_paused = true)]
async fn a_write_past_its_deadline_answers_outcome_unknown_with_after_ms_everywhere() {
    let desk = desk(RunLimits::DEFAULT);
    let session = session();
    let report = desk
        .dispatcher
        .dispatch(
            &session,
            call(
                1,
                "issue_refund",
                json!({"order_id": "ORD-1", "amount": 50}),
            ),
        )
        .await
        .unwrap();

    assert_eq!(desk.runs.get(), 1);
    let result = report.result.to_json();
    assert_eq!(result["status"], "outcome_unknown", "{result}");
    assert_eq!(result["replayed"], false, "{result}");
    let error = explained(&result, "outcome_unknown");
    assert_eq!(error["after_ms"], 1000, "{result}");
    assert_eq!(error["may_still_be_running"], true, "{result}");
    assert_renders_everywhere(&[report]);
}
