//! The session hook decides who a client is on `initialize` and on every `tools/list` and
//! `tools/call`: a refused client cannot initialize, list or call, and the hook sees each
//! request's transport, method and client.

mod common;

use std::sync::{Arc, Mutex};

use common::{Shop, call, connect, protocol_error, server, session};
use rmcp::service::ClientInitializeError;
use serde_json::json;
use toolgate::Session;
use toolgate::mcp::{Peer, Refused, SESSION_REFUSED, ServeError, TransportKind};

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
type Seen = (TransportKind, &'static str, Option<String>, bool);

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
            peer.method(),
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
            (TransportKind::Stream, "initialize", probe(), false),
            (TransportKind::Stream, "tools/list", probe(), false),
            (TransportKind::Stream, "tools/call", probe(), false),
        ]
    );
}
