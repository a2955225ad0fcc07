//! The `mcp_server` example over streamable HTTP, a process of its own, driven by the MCP SDK's
//! client: each request is identified by its bearer token, so a client without a token the
//! server knows cannot initialize, list or call; each session is listed what its token may
//! call; two tenants never share an operation; a refund a manager approves with the operator's
//! command line runs while the client waits. The payment provider is the fake one, as a process
//! too, so that a test can read its ledger.

use crate::mcp_client::{assert_shop_listed, call, ledger, protocol_error, refund, result_object};
use crate::support::{FakePayments, McpHttpServer, PATIENCE, operator_cli, operator_token};
use rmcp::model::{ErrorCode, ProtocolVersion};
use rmcp::service::{ClientInitializeError, RunningService};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::json;
use tokio::time::timeout;
use toolgate::mcp::SESSION_REFUSED;
use toolgate_test::{BearerToken, McpHttpClient};

/// Who the server knows: a clerk and a reader of acme, and a clerk of globex.
const TOKENS: [&str; 6] = [
    "--token",
    "acme-clerk=acme:clerk:orders:read,refund:create,crm:write",
    "--token",
    "acme-reader=acme:reader:orders:read",
    "--token",
    "globex-clerk=globex:clerk:orders:read,refund:create",
];

/// The server, its operations in `dir`, on the provider at `provider_url`.
fn start(dir: &tempfile::TempDir, provider_url: &str) -> McpHttpServer {
    let db = dir.path().join("shop.db");
    let mut args = vec!["--db", db.to_str().unwrap(), "--provider-url", provider_url];
    args.extend(TOKENS);
    McpHttpServer::start(&args)
}

/// A client of the server at `url` sending `token`, initialized (or why not).
async fn connect(
    url: &str,
    token: &BearerToken,
) -> Result<RunningService<RoleClient, ()>, ClientInitializeError> {
    timeout(PATIENCE, ().serve(McpHttpClient::transport(url, token)))
        .await
        .expect("the server answers initialize in time")
}

#[tokio::test]
async fn initialize_list_and_call_over_http() {
    let provider = FakePayments::start();
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir, &provider.url);
    let client = connect(&server.url, &BearerToken::new(Some("acme-clerk")))
        .await
        .unwrap();
    let info = client.peer_info().expect("initialized");
    assert_eq!(info.server_info.as_ref().unwrap().name, "toolgate-shop");
    assert_shop_listed(&client.list_all_tools().await.unwrap());

    let read = result_object(
        &client
            .call_tool(call("get_order", json!({"order_id": "ORD-1002"})))
            .await
            .unwrap(),
    );
    assert_eq!(read["data"]["paid"], "8000.00");

    let first = result_object(&client.call_tool(refund()).await.unwrap());
    let second = result_object(&client.call_tool(refund()).await.unwrap());
    assert_eq!(
        (&first["replayed"], &second["replayed"]),
        (&json!(false), &json!(true))
    );
    assert_eq!(second["data"], first["data"]);

    let bad = client
        .call_tool(call("get_order", json!({"order_id": "1001"})))
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    assert_eq!(result_object(&bad)["error"]["kind"], "invalid_arguments");
    let unknown = protocol_error(client.call_tool(call("refund_all", json!({}))).await);
    assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(unknown.message, "Unknown tool: refund_all");

    let ledger = ledger(&provider.url).await;
    assert_eq!(ledger["ledger"]["ORD-1001"]["refunds"], 1, "{ledger}");
    assert_eq!(ledger["provider_requests"]["refund"], 1, "{ledger}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_session_is_listed_what_its_token_may_call_and_nothing_else_runs() {
    let provider = FakePayments::start();
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir, &provider.url);
    let reader = connect(&server.url, &BearerToken::new(Some("acme-reader")))
        .await
        .unwrap();
    let listed = reader.list_all_tools().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["get_order"]);

    let hidden = protocol_error(reader.call_tool(refund()).await);
    assert_eq!(hidden.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(hidden.message, "Unknown tool: issue_refund");
    let read = reader
        .call_tool(call("get_order", json!({"order_id": "ORD-1001"})))
        .await
        .unwrap();
    assert_eq!(result_object(&read)["status"], "succeeded");

    let ledger = ledger(&provider.url).await;
    assert_eq!(ledger["provider_requests"]["refund"], 0, "{ledger}");
    reader.cancel().await.unwrap();
}

#[tokio::test]
async fn a_client_without_a_known_token_cannot_initialize_list_or_call() {
    let provider = FakePayments::start();
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir, &provider.url);

    // The server answers 401 with the refusal as a JSON-RPC error, which the client reads.
    for token in [None, Some("not-a-token")] {
        let refused = connect(&server.url, &BearerToken::new(token)).await;
        let Err(ClientInitializeError::JsonRpcError(error)) = refused else {
            panic!("initialize with {token:?} is refused: {refused:?}");
        };
        assert_eq!(error.code, SESSION_REFUSED);
        assert!(!error.message.contains("acme"), "{}", error.message);
    }

    // A client whose credential goes away after it initialized: every request stands alone.
    let token = BearerToken::new(Some("acme-clerk"));
    let client = connect(&server.url, &token).await.unwrap();
    for gone in [None, Some("not-a-token")] {
        token.set(gone);
        let listed = protocol_error(client.list_all_tools().await);
        assert_eq!(listed.code, SESSION_REFUSED, "{gone:?}");
        let called = protocol_error(client.call_tool(refund()).await);
        assert_eq!(called.code, SESSION_REFUSED, "{gone:?}");
    }

    let ledger = ledger(&provider.url).await;
    assert_eq!(ledger["provider_requests"]["refund"], 0, "{ledger}");
    assert_eq!(ledger["ledger"]["ORD-1001"]["refunds"], 0, "{ledger}");
}

#[tokio::test]
async fn two_tenants_calling_the_same_refund_get_two_operations() {
    let provider = FakePayments::start();
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir, &provider.url);
    let acme = connect(&server.url, &BearerToken::new(Some("acme-clerk")))
        .await
        .unwrap();
    let globex = connect(&server.url, &BearerToken::new(Some("globex-clerk")))
        .await
        .unwrap();

    let by_acme = result_object(&acme.call_tool(refund()).await.unwrap());
    let by_globex = result_object(&globex.call_tool(refund()).await.unwrap());
    assert_eq!(
        (&by_acme["replayed"], &by_globex["replayed"]),
        (&json!(false), &json!(false))
    );
    assert_ne!(by_acme["data"]["refund_id"], by_globex["data"]["refund_id"]);

    let ledger = ledger(&provider.url).await;
    assert_eq!(ledger["ledger"]["ORD-1001"]["refunds"], 2, "{ledger}");
    assert_eq!(ledger["provider_requests"]["refund"], 2, "{ledger}");
    acme.cancel().await.unwrap();
    globex.cancel().await.unwrap();
}

#[tokio::test]
async fn stateless_requests_of_protocol_2026_07_28_are_each_identified() {
    let provider = FakePayments::start();
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir, &provider.url);
    let discover = || ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let stateless = |token: Option<&str>| {
        let transport = McpHttpClient::transport(&server.url, &BearerToken::new(token));
        timeout(PATIENCE, ().serve_with_lifecycle(transport, discover()))
    };

    let refused = stateless(Some("not-a-token"))
        .await
        .expect("answered in time");
    let Err(ClientInitializeError::JsonRpcError(error)) = refused else {
        panic!("discovery with an unknown token is refused: {refused:?}");
    };
    assert_eq!(error.code, SESSION_REFUSED);

    let client = stateless(Some("acme-clerk"))
        .await
        .expect("answered in time")
        .unwrap();
    assert_shop_listed(&client.list_all_tools().await.unwrap());
    // No session between the two requests, so each is a run of its own: keys are per tenant,
    // so the second is a replay all the same.
    let first = result_object(&client.call_tool(refund()).await.unwrap());
    let second = result_object(&client.call_tool(refund()).await.unwrap());
    assert_eq!(
        (&first["replayed"], &second["replayed"]),
        (&json!(false), &json!(true))
    );
    let ledger = ledger(&provider.url).await;
    assert_eq!(ledger["provider_requests"]["refund"], 1, "{ledger}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_refund_approved_with_the_command_line_runs_while_the_client_waits() {
    let provider = FakePayments::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.db");
    let store = format!("sqlite:{}", db.display());
    let mut args = vec![
        "--db",
        db.to_str().unwrap(),
        "--provider-url",
        &provider.url,
    ];
    args.extend(["--approvals-every-ms", "50"]);
    args.extend(TOKENS);
    let server = McpHttpServer::start(&args);
    let client = connect(&server.url, &BearerToken::new(Some("acme-clerk")))
        .await
        .unwrap();
    let large = || {
        call(
            "issue_refund",
            json!({"order_id": "ORD-1002", "amount": 8000}),
        )
    };
    let waiting = result_object(&client.call_tool(large()).await.unwrap());
    assert_eq!(waiting["status"], "awaiting_approval", "{waiting}");
    let id = waiting["error"]["approval_id"].as_str().unwrap().to_owned();

    // The client waits; a manager approves on the same database.
    let manager = operator_token(&store, dir.path(), "manager", "refund:approve");
    let approved = operator_cli()
        .args(["--store", &store, "approvals", "approve", &id])
        .args(["--reason", "the customer returned the whole order"])
        .env("TOOLGATE_TOKEN", &manager)
        .output()
        .unwrap();
    assert!(approved.status.success(), "{approved:?}");
    let ran = server.said(&format!("of approval {id}"));
    assert!(ran.ends_with("succeeded"), "{ran}");
    let ledger_now = ledger(&provider.url).await;
    assert_eq!(
        ledger_now["ledger"]["ORD-1002"]["refunds"], 1,
        "{ledger_now}"
    );

    // The client's next call with the same arguments reads the outcome: run once, by the runner.
    let outcome = result_object(&client.call_tool(large()).await.unwrap());
    assert_eq!(outcome["status"], "succeeded", "{outcome}");
    assert_eq!(outcome["replayed"], true, "{outcome}");
    assert_eq!(
        ledger(&provider.url).await["provider_requests"]["refund"],
        1
    );
    client.cancel().await.unwrap();
}
