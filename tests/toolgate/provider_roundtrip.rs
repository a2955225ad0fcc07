//! A model turn in each provider's format: parsed, dispatched against the demo shop, rendered,
//! and the rendering checked against the shapes each provider's API documents, with a success, a
//! tool error and a malformed call in every turn.

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::provider::{Anthropic, Gemini, Mcp, OpenAiChat, OpenAiResponses, WireFormat};
use toolgate_demo::shop;

fn dispatcher() -> Dispatcher {
    Dispatcher::builder(shop::registry())
        .store(toolgate_test::MemoryStore::new())
        .state(shop::Provider::new(shop::Shop::default()))
        .build()
}

fn session() -> Session {
    Session::new(
        crate::support::agent().with_permissions(["orders:read", "refund:create"]),
        "run-1",
    )
}

async fn round_trip(format: &dyn WireFormat, turn: Value) -> Value {
    let calls = format.parse_calls(&turn).unwrap();
    let reports = dispatcher().dispatch_turn(&session(), calls).await.unwrap();
    format
        .render_results(&reports)
        .expect("a turn with calls is answered")
}

const ORDER: &str = r#"{"status":"succeeded","replayed":false,"data":{"order_id":"ORD-1001","paid":"500.00","refunded":"0.00","refundable":"500.00"}}"#;

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

fn assert_not_found(text: &str) {
    let result = parse(text);
    assert_eq!(result["status"], "error", "{text}");
    assert_eq!(result["error"]["kind"], "not_found", "{text}");
    assert_eq!(
        result["error"]["what"], "there is no order ORD-9999",
        "{text}"
    );
}

fn assert_invalid(text: &str, needle: &str) {
    let result = parse(text);
    assert_eq!(result["error"]["kind"], "invalid_arguments", "{text}");
    let explained = format!("{} {}", result["error"]["what"], result["error"]["why"]);
    assert!(explained.contains(needle), "{needle:?} not in {text}");
}

#[tokio::test]
async fn openai_chat_completions() {
    let turn = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "get_order", "arguments": "{\"order_id\":\"ORD-1001\"}"}},
        {"id": "call_b", "type": "function", "function": {"name": "get_order", "arguments": "{\"order_id\":\"ORD-9999\"}"}},
        {"id": "call_c", "type": "function", "function": {"name": "issue_refund", "arguments": "{\"order_id\": \"ORD-1001\", \"amount\": "}},
        {"id": "call_d", "type": "function", "function": {"name": "issue_refund", "arguments": {"order_id": "ORD-1001"}}},
        {"type": "function", "function": {"name": "get_order", "arguments": "{}"}}
    ]});
    let rendered = round_trip(&OpenAiChat { strict: true }, turn).await;
    let messages = rendered.as_array().unwrap();
    assert_eq!(
        messages.len(),
        5,
        "one tool message per call, even the malformed ones"
    );
    assert_eq!(
        messages[0],
        json!({"role": "tool", "tool_call_id": "call_a", "content": ORDER})
    );
    for (message, id) in messages
        .iter()
        .zip(["call_a", "call_b", "call_c", "call_d"])
    {
        assert_eq!(message["role"], "tool");
        assert_eq!(message["tool_call_id"], id);
        assert!(
            message["content"].is_string(),
            "content is a JSON string: {message}"
        );
        assert_eq!(
            message.as_object().unwrap().len(),
            3,
            "no error flag in this format: {message}"
        );
    }
    assert_not_found(messages[1]["content"].as_str().unwrap());
    assert_invalid(messages[2]["content"].as_str().unwrap(), "not valid JSON");
    assert_invalid(messages[3]["content"].as_str().unwrap(), "string");
    assert!(
        messages[4]["tool_call_id"]
            .as_str()
            .unwrap()
            .starts_with("missing_id_")
    );
}

#[tokio::test]
async fn openai_responses() {
    let turn = json!({"output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "get_order", "arguments": "{\"order_id\":\"ORD-1001\"}", "status": "completed"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "get_order", "arguments": "{\"order_id\":\"ORD-9999\"}", "status": "completed"},
        {"type": "function_call", "id": "fc_3", "call_id": "call_c", "name": "get_order", "arguments": "not json", "status": "completed"}
    ]});
    let rendered = round_trip(&OpenAiResponses { strict: true }, turn).await;
    let items = rendered.as_array().unwrap();
    assert_eq!(items.len(), 3, "reasoning items are not calls");
    assert_eq!(
        items[0],
        json!({"type": "function_call_output", "call_id": "call_a", "output": ORDER})
    );
    assert_eq!(items[1]["call_id"], "call_b");
    assert_not_found(items[1]["output"].as_str().unwrap());
    assert_invalid(items[2]["output"].as_str().unwrap(), "not valid JSON");
}

#[tokio::test]
async fn anthropic_messages() {
    let turn = json!({"role": "assistant", "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_01A", "name": "get_order", "input": {"order_id": "ORD-1001"}},
        {"type": "tool_use", "id": "toolu_01B", "name": "get_order", "input": {"order_id": "ORD-9999"}},
        {"type": "tool_use", "id": "toolu_01C", "name": "get_order", "input": "ORD-1001"}
    ]});
    let rendered = round_trip(&Anthropic::default(), turn).await;
    assert_eq!(rendered["role"], "user", "all results in one user message");
    let blocks = rendered["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 3);
    assert_eq!(
        blocks[0],
        json!({"type": "tool_result", "tool_use_id": "toolu_01A", "content": ORDER})
    );
    assert_eq!(blocks[1]["tool_use_id"], "toolu_01B");
    assert_eq!(blocks[1]["is_error"], true);
    assert_not_found(blocks[1]["content"].as_str().unwrap());
    assert_eq!(blocks[2]["is_error"], true);
    assert_invalid(blocks[2]["content"].as_str().unwrap(), "object");
}

#[tokio::test]
async fn gemini_generate_content() {
    let turn = json!({"role": "model", "parts": [
        {"functionCall": {"id": "fc_1", "name": "get_order", "args": {"order_id": "ORD-1001"}}, "thoughtSignature": "opaque"},
        {"functionCall": {"id": "fc_2", "name": "get_order", "args": {"order_id": "ORD-9999"}}},
        {"functionCall": {"id": "fc_3", "name": "get_order", "args": ["ORD-1001"]}},
        {"functionCall": {"name": "get_order", "args": {"order_id": "ORD-1001"}}}
    ]});
    let rendered = round_trip(&Gemini, turn).await;
    assert_eq!(rendered["role"], "user");
    let parts = rendered["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 4);
    assert_eq!(
        parts[0],
        json!({"functionResponse": {"id": "fc_1", "name": "get_order", "response": {"output": parse(ORDER)}}})
    );
    let error = &parts[1]["functionResponse"]["response"]["error"];
    assert_eq!(error["error"]["kind"], "not_found", "{error}");
    assert!(
        parts[1]["functionResponse"]["response"]
            .get("output")
            .is_none()
    );
    assert_eq!(
        parts[2]["functionResponse"]["response"]["error"]["error"]["kind"],
        "invalid_arguments"
    );
    assert!(
        parts[3]["functionResponse"].get("id").is_none(),
        "a call without id is answered without one"
    );
    assert_eq!(
        parts[3]["functionResponse"]["response"]["output"],
        parse(ORDER)
    );
}

#[tokio::test]
async fn mcp_tools_call() {
    let mcp = Mcp;
    let requests = [
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_order", "arguments": {"order_id": "ORD-1001"}}}),
        json!({"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": {"name": "get_order", "arguments": {"order_id": "ORD-9999"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get_order", "arguments": "ORD-1001"}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "invalid_tool_name", "arguments": {}}}),
    ];
    let mut responses = Vec::new();
    for request in requests {
        responses.push(round_trip(&mcp, request).await);
    }
    assert_eq!(
        responses[0],
        json!({"jsonrpc": "2.0", "id": 2, "result": {"resultType": "complete",
            "content": [{"type": "text", "text": ORDER}], "structuredContent": parse(ORDER), "isError": false}})
    );
    assert_eq!(responses[1]["id"], "b");
    assert_eq!(responses[1]["result"]["isError"], true);
    assert_not_found(
        responses[1]["result"]["content"][0]["text"]
            .as_str()
            .unwrap(),
    );
    assert_eq!(
        responses[2]["result"]["isError"], true,
        "bad arguments are a tool error the model sees"
    );
    assert_eq!(
        responses[3],
        json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32602, "message": "Unknown tool: invalid_tool_name"}})
    );
}
