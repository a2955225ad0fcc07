//! What the tests of the `mcp_server` example share: calls as the SDK's client makes them, the
//! result object of an answer, a protocol error, and the payment provider's ledger.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use serde_json::{Value, json};
use toolgate_demo::payments::client::HttpPayments;

/// A call of `tool` with `arguments` (a JSON object).
pub fn call(tool: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = Some(arguments);
    params
}

/// A refund of 5.00 on ORD-1001.
pub fn refund() -> CallToolRequestParams {
    call(
        "issue_refund",
        json!({"order_id": "ORD-1001", "amount": 5.0}),
    )
}

/// The result object of an answer: its `structuredContent`, checked to be what its one text
/// item says.
pub fn result_object(result: &CallToolResult) -> Value {
    let structured = result
        .structured_content
        .clone()
        .expect("every answer carries structuredContent");
    assert_eq!(result.content.len(), 1, "{result:?}");
    let text = result.content[0].as_text().expect("the one item is text");
    assert_eq!(
        serde_json::from_str::<Value>(&text.text).unwrap(),
        structured
    );
    structured
}

/// The protocol error of a request answered with one.
pub fn protocol_error(answer: Result<impl std::fmt::Debug, ServiceError>) -> ErrorData {
    match answer {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("not a protocol error: {other:?}"),
    }
}

/// The shop's tools as listed, checked: their names, and the annotations of a read and of a
/// write that a repeated call runs once.
pub fn assert_shop_listed(tools: &[Tool]) {
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        ["get_order", "issue_refund", "update_crm_and_notify"]
    );
    let read = tools[0].annotations.as_ref().expect("annotated");
    assert_eq!(read.read_only_hint, Some(true));
    let refund = tools[1].annotations.as_ref().expect("annotated");
    assert_eq!(
        (
            refund.read_only_hint,
            refund.destructive_hint,
            refund.idempotent_hint,
            refund.open_world_hint
        ),
        (Some(false), Some(false), Some(true), Some(true))
    );
    assert_eq!(tools[1].input_schema["type"], "object");
    assert!(
        tools[1]
            .description
            .as_deref()
            .is_some_and(|text| text.contains("Refund part or all of a paid order")),
        "{:?}",
        tools[1].description
    );
}

/// The provider's ledger and request counts at `url`.
pub async fn ledger(url: &str) -> Value {
    HttpPayments::new(url, Duration::from_secs(10))
        .expect("a provider URL")
        .ledger()
        .await
        .expect("the provider answers its ledger")
}
