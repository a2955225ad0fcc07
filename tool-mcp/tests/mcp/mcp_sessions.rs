//! The session hook decides who a client is on `initialize` and on every `tools/list` and
//! `tools/call`: a refused client cannot initialize, list or call, and the hook sees each
//! request's transport, method and client. Each MCP session is a run of its own, listed the
//! tools it may call.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::{Shop, call, connect, protocol_error, result_object, server, session};
use rmcp::model::ErrorCode;
use rmcp::service::ClientInitializeError;
use serde_json::json;
use toolgate::mcp::{Peer, RUN_ABORTED, Refused, SESSION_REFUSED, ServeError, TransportKind};
use toolgate::{AuthContext, Session};

#[tokio::test]
async fn a_refused_client_cannot_initialize() {
    let shop = Shop::open();
    let hook = |_: &Peer<'_>| -> Result<Session, Refused> {
        Err(Refused::new(
            "this server knows no one: ask its operator for access",
        ))
    };
    let (client, serving) = connect(&server(&shop, hook), "stranger").await;
    let Err(ClientInitializeError::JsonRpcError(error)) = client else {
        panic!("initialize is refused with a protocol error: {client:?}");
    };
    assert_eq!(error.code, SESSION_REFUSED);
    assert_eq!(
        error.message,
        "Refused: this server knows no one: ask its operator for access"
    );
    let served = serving.await.unwrap();
    assert!(
        matches!(served, Err(ServeError::Initialize(_))),
        "{served:?}"
    );
}

#[tokio::test]
async fn a_client_refused_after_initialize_sees_no_tools_and_calls_nothing() {
    let shop = Shop::open();
    let agent = session("acme", &["orders:read", "refund:create"]);
    // Accepted once, as a credential that is revoked right after would be.
    let hook = move |peer: &Peer<'_>| match peer.method() {
        "initialize" => Ok(agent.clone()),
        _ => Err(Refused::new("the credential was revoked: sign in again")),
    };
    let (client, _serving) = connect(&server(&shop, hook), "probe").await;
    let client = client.unwrap();

    let listed = protocol_error(client.list_all_tools().await);
    assert_eq!(listed.code, SESSION_REFUSED);
    assert_eq!(
        listed.message,
        "Refused: the credential was revoked: sign in again"
    );
    let called = protocol_error(
        client
            .call_tool(call(
                "issue_refund",
                json!({"order_id": "ORD-1", "amount": 5.0}),
            ))
            .await,
    );
    assert_eq!(called.code, SESSION_REFUSED);
    assert_eq!(shop.refunds(), 0);
}

/// What the hook saw of one request: transport, method, client name, whether it had an HTTP head.
type Seen = (TransportKind, String, Option<String>, bool);

#[tokio::test]
async fn the_hook_sees_each_request_with_its_transport_method_and_client() {
    let shop = Shop::open();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let agent = session("acme", &["orders:read"]);
    let record = seen.clone();
    let hook = move |peer: &Peer<'_>| -> Result<Session, Refused> {
        let client = peer.client_info().map(|client| client.name.clone());
        let entry = (
            peer.transport(),
            peer.method().to_owned(),
            client,
            peer.http().is_some(),
        );
        record.lock().unwrap().push(entry);
        Ok(agent.clone())
    };
    let (client, _serving) = connect(&server(&shop, hook), "probe").await;
    let client = client.unwrap();
    client.list_all_tools().await.unwrap();
    client
        .call_tool(call("get_order", json!({"order_id": "ORD-1"})))
        .await
        .unwrap();
    let probe = || Some("probe".to_owned());
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (TransportKind::Stream, "initialize".into(), probe(), false),
            (TransportKind::Stream, "tools/list".into(), probe(), false),
            (TransportKind::Stream, "tools/call".into(), probe(), false),
        ]
    );
}

/// A hook admitting every client as a caller of acme, with `refund:create` while `may_refund`
/// holds.
fn caller_hook(
    may_refund: Arc<AtomicBool>,
) -> impl Fn(&Peer<'_>) -> Result<AuthContext, Refused> + Send + Sync + 'static {
    move |_: &Peer<'_>| {
        let mut permissions = vec!["orders:read"];
        if may_refund.load(Ordering::SeqCst) {
            permissions.push("refund:create");
        }
        Ok(AuthContext::new("acme", "agent").with_permissions(permissions))
    }
}

fn names(tools: &[rmcp::model::Tool]) -> Vec<&str> {
    tools.iter().map(|tool| tool.name.as_ref()).collect()
}

#[tokio::test]
async fn a_session_is_listed_what_it_may_call_and_anything_else_is_an_unknown_tool() {
    let shop = Shop::open();
    let server = server(&shop, caller_hook(Arc::new(AtomicBool::new(false))));
    let (client, _serving) = connect(&server, "reader").await;
    let client = client.unwrap();
    assert_eq!(
        names(&client.list_all_tools().await.unwrap()),
        ["get_order"]
    );

    let hidden = protocol_error(
        client
            .call_tool(call(
                "issue_refund",
                json!({"order_id": "ORD-1", "amount": 5.0}),
            ))
            .await,
    );
    assert_eq!(hidden.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(hidden.message, "Unknown tool: issue_refund");
    // Nothing ran and the run goes on.
    let read = client
        .call_tool(call("get_order", json!({"order_id": "ORD-1"})))
        .await
        .unwrap();
    assert_eq!(result_object(&read)["status"], "succeeded");
    assert_eq!(shop.refunds(), 0);
}

#[tokio::test]
async fn a_permission_lost_after_listing_aborts_that_sessions_run_alone() {
    let shop = Shop::open();
    let may_refund = Arc::new(AtomicBool::new(true));
    let server = server(&shop, caller_hook(may_refund.clone()));
    let read = || call("get_order", json!({"order_id": "ORD-1"}));
    let refund = || call("issue_refund", json!({"order_id": "ORD-1", "amount": 5.0}));

    let (first, _serving) = connect(&server, "first").await;
    let first = first.unwrap();
    assert_eq!(
        names(&first.list_all_tools().await.unwrap()),
        ["get_order", "issue_refund"]
    );
    let refunded = result_object(&first.call_tool(refund()).await.unwrap());
    assert_eq!(refunded["replayed"], false);
    // The caller's permissions change: the tool it was shown now aborts its run.
    may_refund.store(false, Ordering::SeqCst);
    let aborted = protocol_error(first.call_tool(refund()).await);
    assert_eq!(aborted.code, RUN_ABORTED);
    assert_eq!(aborted.data.unwrap()["kind"], "permission_denied");
    assert_eq!(
        protocol_error(first.call_tool(read()).await).code,
        RUN_ABORTED
    );

    // A new session of the same caller is a new run, never born aborted.
    let (second, _serving) = connect(&server, "second").await;
    let second = second.unwrap();
    let answer = result_object(&second.call_tool(read()).await.unwrap());
    assert_eq!(answer["status"], "succeeded");
    let hidden = protocol_error(second.call_tool(refund()).await);
    assert_eq!(hidden.message, "Unknown tool: issue_refund");

    // Allowed again, the new session's refund is the first one's operation: a replay.
    may_refund.store(true, Ordering::SeqCst);
    let again = result_object(&second.call_tool(refund()).await.unwrap());
    assert_eq!(again["replayed"], true);
    assert_eq!(again["data"], refunded["data"]);
    assert_eq!(shop.refunds(), 1);
    // The first session's run stays aborted.
    assert_eq!(
        protocol_error(first.call_tool(read()).await).code,
        RUN_ABORTED
    );
}

#[tokio::test]
async fn a_run_the_hook_names_is_shared_by_every_session_in_it() {
    let shop = Shop::open();
    let named = session("acme", &["orders:read"]);
    let may_refund = Arc::new(AtomicBool::new(true));
    let allowed = may_refund.clone();
    let hook = move |_: &Peer<'_>| -> Result<Session, Refused> {
        let mut permissions = vec!["orders:read"];
        if allowed.load(Ordering::SeqCst) {
            permissions.push("refund:create");
        }
        let auth = AuthContext::new("acme", "agent").with_permissions(permissions);
        Ok(named.with_auth(auth))
    };
    let server = server(&shop, hook);
    let (first, _serving) = connect(&server, "first").await;
    let first = first.unwrap();
    first.list_all_tools().await.unwrap();
    may_refund.store(false, Ordering::SeqCst);
    let aborted = protocol_error(
        first
            .call_tool(call(
                "issue_refund",
                json!({"order_id": "ORD-1", "amount": 5.0}),
            ))
            .await,
    );
    assert_eq!(aborted.code, RUN_ABORTED);

    // The application's run is aborted for every session it hands it to.
    let (second, _serving) = connect(&server, "second").await;
    let second = second.unwrap();
    let after = protocol_error(
        second
            .call_tool(call("get_order", json!({"order_id": "ORD-1"})))
            .await,
    );
    assert_eq!(after.code, RUN_ABORTED);
    assert_eq!(shop.refunds(), 0);
}
