//! An MCP client of the SDK drives the server in process: the server's info, `tools/list` with
//! the annotations of each side-effect class, and `tools/call` through the dispatcher (a read,
//! a write replayed, invalid arguments (a key given twice among them), an unknown tool, two
//! tenants).

use crate::common;

use common::{PATIENCE, Shop, call, connect, protocol_error, result_object, server, session};
use rmcp::model::ErrorCode;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::time::timeout;
use toolgate::mcp::{Peer, Refused, StdioSession};
use toolgate::{AuthContext, Session};

#[tokio::test]
async fn initialize_answers_the_server_and_the_tools_a_caller_of_every_permission_may_call() {
    let shop = Shop::open();
    let auth = AuthContext::new("acme", "agent").with_permissions(["orders:read", "refund:create"]);
    let hook = StdioSession::new(auth);
    let (client, _serving) = connect(&server(&shop, hook), "probe").await;
    let client = client.unwrap();
    let info = client.peer_info().expect("the server answered initialize");
    let server_info = info.server_info.as_ref().expect("the server names itself");
    assert_eq!(
        (server_info.name.as_str(), server_info.version.as_str()),
        ("test-shop", "1.2.3")
    );
    assert_eq!(info.instructions.as_deref(), Some("Refund orders."));
    let tools = info
        .capabilities
        .tools
        .as_ref()
        .expect("the server has tools");
    assert_eq!(tools.list_changed, Some(false));

    let listed = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["get_order", "issue_refund"]);
    let read = listed[0].annotations.as_ref().unwrap();
    assert_eq!(read.read_only_hint, Some(true));
    let write = listed[1].annotations.as_ref().unwrap();
    assert_eq!(
        (
            write.read_only_hint,
            write.destructive_hint,
            write.idempotent_hint
        ),
        (Some(false), Some(false), Some(true))
    );
    assert_eq!(
        listed[1].input_schema["required"],
        json!(["order_id", "amount"])
    );
}

#[tokio::test]
async fn calls_answer_the_result_object_and_flag_errors() {
    let shop = Shop::open();
    let hook = StdioSession::from_session(session("acme", &["orders:read", "refund:create"]));
    let (client, _serving) = connect(&server(&shop, hook), "probe").await;
    let client = client.unwrap();

    let read = client
        .call_tool(call("get_order", json!({"order_id": "ORD-1"})))
        .await
        .unwrap();
    assert_eq!(read.is_error, Some(false));
    assert_eq!(
        result_object(&read),
        json!({"status": "succeeded", "replayed": false, "data": {"order_id": "ORD-1", "paid": "500.00"}})
    );

    let bad = client
        .call_tool(call(
            "issue_refund",
            json!({"order_id": "ORD-1", "amount": -5}),
        ))
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    let bad = result_object(&bad);
    assert_eq!(bad["status"], "error");
    assert_eq!(bad["error"]["kind"], "invalid_arguments");
    assert_eq!(shop.refunds(), 0);

    let unknown = protocol_error(client.call_tool(call("refund_everything", json!({}))).await);
    assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(unknown.message, "Unknown tool: refund_everything");
}

#[tokio::test]
async fn a_write_called_twice_runs_once_and_the_second_answer_is_a_replay() {
    let shop = Shop::open();
    let hook = StdioSession::from_session(session("acme", &["refund:create"]));
    let (client, _serving) = connect(&server(&shop, hook), "probe").await;
    let client = client.unwrap();
    let refund = || call("issue_refund", json!({"order_id": "ORD-1", "amount": 5.0}));

    let first = result_object(&client.call_tool(refund()).await.unwrap());
    let second = result_object(&client.call_tool(refund()).await.unwrap());
    assert_eq!(
        (first["status"].clone(), first["replayed"].clone()),
        (json!("succeeded"), json!(false))
    );
    assert_eq!(second["replayed"], true);
    assert_eq!(second["data"], first["data"]);
    assert_eq!(shop.refunds(), 1);
}

#[tokio::test]
async fn a_key_given_twice_in_the_arguments_text_is_invalid_arguments_and_nothing_runs() {
    let shop = Shop::open();
    let hook =
        StdioSession::new(AuthContext::new("acme", "agent").with_permissions(["refund:create"]));
    let server = server(&shop, hook);
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn(async move { server.serve(server_io).await });
    let (read, mut write) = tokio::io::split(client_io);
    let mut lines = tokio::io::BufReader::new(read).lines();
    for message in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"issue_refund","arguments":{"order_id":"ORD-1","amount":5,"amount":5000}}}"#,
    ] {
        write
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    let mut answer = None;
    while let Some(line) = timeout(PATIENCE, lines.next_line()).await.unwrap().unwrap() {
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            answer = Some(message);
            break;
        }
    }
    let answer = answer.expect("the call is answered");
    let result = &answer["result"]["structuredContent"];
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(result["error"]["kind"], "invalid_arguments", "{answer}");
    assert!(
        result["error"]["what"]
            .as_str()
            .unwrap()
            .contains("\"amount\" more than once"),
        "{answer}"
    );
    assert_eq!(shop.refunds(), 0);
    drop(write);
    drop(lines);
    timeout(PATIENCE, serving).await.unwrap().unwrap().unwrap();
}

#[tokio::test]
async fn two_tenants_calling_the_same_write_get_two_operations() {
    let shop = Shop::open();
    let sessions = [
        session("acme", &["refund:create"]),
        session("globex", &["refund:create"]),
    ];
    // The hook tells the tenants apart by the name each client gave at `initialize`.
    let hook = move |peer: &Peer<'_>| -> Result<Session, Refused> {
        match peer.client_info().map(|client| client.name.as_str()) {
            Some("acme-desk") => Ok(sessions[0].clone()),
            Some("globex-desk") => Ok(sessions[1].clone()),
            _ => Err(Refused::new(
                "introduce yourself as acme-desk or globex-desk",
            )),
        }
    };
    let server = server(&shop, hook);
    let (acme, _acme_serving) = connect(&server, "acme-desk").await;
    let (globex, _globex_serving) = connect(&server, "globex-desk").await;
    let refund = || call("issue_refund", json!({"order_id": "ORD-1", "amount": 5.0}));

    let by_acme = result_object(&acme.unwrap().call_tool(refund()).await.unwrap());
    let by_globex = result_object(&globex.unwrap().call_tool(refund()).await.unwrap());
    assert_eq!(by_acme["replayed"], false);
    assert_eq!(by_globex["replayed"], false);
    assert_ne!(by_acme["data"]["key"], by_globex["data"]["key"]);
    assert_ne!(by_acme["data"]["refund"], by_globex["data"]["refund"]);
    assert_eq!(shop.refunds(), 2);
}

/// For clients that cannot read `additionalProperties` (google-genai's MCP bridge): the schemas
/// served hold none, and an argument the tool does not take is refused all the same.
#[tokio::test]
async fn schemas_served_without_additional_properties_are_still_enforced() {
    let shop = Shop::open();
    let hook = StdioSession::from_session(session("acme", &["orders:read", "refund:create"]));
    let server = toolgate::mcp::McpServer::builder(common::dispatcher(&shop), hook)
        .schemas_without_additional_properties()
        .build();
    let (client, _serving) = connect(&server, "probe").await;
    let client = client.unwrap();
    let listed = client.list_all_tools().await.unwrap();
    assert_eq!(listed.len(), 2);
    for tool in &listed {
        let schema = serde_json::to_string(&tool.input_schema).unwrap();
        assert!(!schema.contains("additionalProperties"), "{schema}");
    }
    let extra = client
        .call_tool(call(
            "issue_refund",
            json!({"order_id": "ORD-1", "amount": 5, "note": "rush"}),
        ))
        .await
        .unwrap();
    assert_eq!(extra.is_error, Some(true));
    let extra = result_object(&extra);
    assert_eq!(extra["error"]["kind"], "invalid_arguments", "{extra}");
    assert!(extra.to_string().contains("note"), "{extra}");
    assert_eq!(shop.refunds(), 0);
}
