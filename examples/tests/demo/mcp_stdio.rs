//! The `mcp_server` example on stdio, as a desktop client runs it: a process of its own, started
//! by the MCP SDK's client, which initializes, lists the shop's tools and calls them. The
//! payment provider is the fake one, as a process too, so that a test can read its ledger.

use std::path::Path;

use crate::mcp_client::{assert_shop_listed, call, ledger, protocol_error, refund, result_object};
use crate::support::{FakePayments, PATIENCE, mcp_server};
use rmcp::model::ErrorCode;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;
use tokio::time::timeout;

/// `mcp_server` on stdio with its operations in `dir`, `args` after, initialized.
async fn start(dir: &Path, args: &[&str]) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::from(mcp_server());
    command.arg("--db").arg(dir.join("shop.db")).args(args);
    let transport = TokioChildProcess::new(command).expect("mcp_server starts");
    timeout(PATIENCE, ().serve(transport))
        .await
        .expect("mcp_server answers initialize in time")
        .expect("mcp_server initializes")
}

#[tokio::test]
async fn initialize_and_list_the_shop_with_its_annotations() {
    let dir = tempfile::tempdir().unwrap();
    let client = start(dir.path(), &[]).await;
    let info = client.peer_info().expect("initialized");
    let server = info.server_info.as_ref().expect("the server names itself");
    assert_eq!(server.name, "toolgate-shop");
    assert_eq!(
        info.capabilities.tools.as_ref().unwrap().list_changed,
        Some(false)
    );
    assert!(info.instructions.as_deref().unwrap().contains("ORD-1001"));
    assert_shop_listed(&client.list_all_tools().await.unwrap());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_read_and_a_refund_asked_twice_which_the_provider_applies_once() {
    let provider = FakePayments::start();
    let dir = tempfile::tempdir().unwrap();
    let client = start(dir.path(), &["--provider-url", &provider.url]).await;

    let read = client
        .call_tool(call("get_order", json!({"order_id": "ORD-1001"})))
        .await
        .unwrap();
    assert_eq!(read.is_error, Some(false));
    let read = result_object(&read);
    assert_eq!(read["status"], "succeeded");
    assert_eq!(read["data"]["paid"], "500.00");

    let first = client.call_tool(refund()).await.unwrap();
    let second = client.call_tool(refund()).await.unwrap();
    assert_eq!(
        (first.is_error, second.is_error),
        (Some(false), Some(false))
    );
    let (first, second) = (result_object(&first), result_object(&second));
    assert_eq!(first["replayed"], false);
    assert_eq!(second["replayed"], true);
    assert_eq!(second["data"], first["data"]);
    assert_eq!(first["data"]["amount"], "5.00");

    let ledger = ledger(&provider.url).await;
    assert_eq!(ledger["ledger"]["ORD-1001"]["refunds"], 1, "{ledger}");
    assert_eq!(ledger["provider_requests"]["refund"], 1, "{ledger}");
    client.cancel().await.unwrap();
}

/// Desktop MCP clients start a new server process for every session: the same refund asked of
/// a second `mcp_server` process on the same `--db` is the same operation, answered from its
/// record, never applied again.
#[tokio::test]
async fn a_refund_asked_again_of_a_new_server_process_is_a_replay() {
    let provider = FakePayments::start();
    let dir = tempfile::tempdir().unwrap();
    let args = ["--provider-url", provider.url.as_str()];

    let client = start(dir.path(), &args).await;
    let first = result_object(&client.call_tool(refund()).await.unwrap());
    client.cancel().await.unwrap();

    let client = start(dir.path(), &args).await;
    let second = result_object(&client.call_tool(refund()).await.unwrap());
    client.cancel().await.unwrap();

    assert_eq!(first["status"], "succeeded", "{first}");
    assert_eq!(first["replayed"], false, "{first}");
    assert_eq!(second["status"], "succeeded", "{second}");
    assert_eq!(second["replayed"], true, "{second}");
    assert_eq!(second["data"], first["data"]);
    let ledger = ledger(&provider.url).await;
    assert_eq!(ledger["ledger"]["ORD-1001"]["refunds"], 1, "{ledger}");
    assert_eq!(ledger["provider_requests"]["refund"], 1, "{ledger}");
}

#[tokio::test]
async fn bad_arguments_are_a_tool_error_and_an_unknown_tool_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    let client = start(dir.path(), &[]).await;

    let bad = client
        .call_tool(call(
            "issue_refund",
            json!({"order_id": "ORD-1001", "amount": "lots"}),
        ))
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    let bad = result_object(&bad);
    assert_eq!(bad["status"], "error");
    assert_eq!(bad["error"]["kind"], "invalid_arguments");
    assert!(
        bad["error"]["why"].as_str().unwrap().contains("/amount"),
        "{bad}"
    );

    let unknown = protocol_error(client.call_tool(call("refund_all", json!({}))).await);
    assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(unknown.message, "Unknown tool: refund_all");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_tool_the_client_may_not_call_is_not_listed_and_is_unknown_to_it() {
    let provider = FakePayments::start();
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--provider-url",
        &provider.url,
        "--permission",
        "orders:read",
    ];
    let client = start(dir.path(), &args).await;
    let listed = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["get_order"]);

    let hidden = protocol_error(client.call_tool(refund()).await);
    assert_eq!(hidden.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(hidden.message, "Unknown tool: issue_refund");
    // Nothing ran, and the run goes on: a read the client may make runs.
    let read = client
        .call_tool(call("get_order", json!({"order_id": "ORD-1001"})))
        .await
        .unwrap();
    assert_eq!(result_object(&read)["status"], "succeeded");

    let ledger = ledger(&provider.url).await;
    assert_eq!(ledger["provider_requests"]["refund"], 0, "{ledger}");
    client.cancel().await.unwrap();
}
