//! An MCP client of the SDK drives the server in process: the server's info, `tools/list` with
//! the annotations of each side-effect class, and `tools/call` through the dispatcher (a read,
//! a write replayed, invalid arguments, an unknown tool, a missing permission, two tenants).

mod common;

use common::{Shop, call, connect, protocol_error, result_object, server, session};
use rmcp::model::ErrorCode;
use serde_json::json;
use toolgate::mcp::{Peer, RUN_ABORTED, Refused, StdioSession};
use toolgate::{AuthContext, Session};

#[tokio::test]
async fn initialize_answers_the_server_and_a_tool_list_that_never_changes() {
    let shop = Shop::open();
    let hook = StdioSession::new(AuthContext::new("acme", "agent"));
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
async fn a_missing_permission_aborts_the_run_and_every_call_after_it() {
    let shop = Shop::open();
    let hook = StdioSession::from_session(session("acme", &["orders:read"]));
    let (client, _serving) = connect(&server(&shop, hook), "probe").await;
    let client = client.unwrap();

    let refused = protocol_error(
        client
            .call_tool(call(
                "issue_refund",
                json!({"order_id": "ORD-1", "amount": 5.0}),
            ))
            .await,
    );
    assert_eq!(refused.code, RUN_ABORTED);
    let data = refused.data.expect("the abort says why");
    assert_eq!(data["kind"], "permission_denied");
    assert!(
        refused.message.contains("issue_refund"),
        "{}",
        refused.message
    );

    // The run is over: a read the session may make is refused too.
    let after = protocol_error(
        client
            .call_tool(call("get_order", json!({"order_id": "ORD-1"})))
            .await,
    );
    assert_eq!(after.code, RUN_ABORTED);
    assert_eq!(after.data.unwrap()["kind"], "permission_denied");
    assert_eq!(shop.refunds(), 0);
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
