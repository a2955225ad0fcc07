//! `McpServer::serve_http` in process: the hook sees each HTTP request with its head, a client
//! whose token the hook refuses gets nothing, and the server stops when told to.

mod common;

use std::sync::{Arc, Mutex};

use common::{PATIENCE, Shop, call, protocol_error, result_object, server, session};
use rmcp::ServiceExt;
use rmcp::service::ClientInitializeError;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::time::timeout;
use toolgate::Session;
use toolgate::mcp::{Peer, Refused, SESSION_REFUSED, TransportKind};
use toolgate_test::{BearerToken, McpHttpClient};

/// What the hook saw of one request: its transport, its method, whether it named a session.
type Seen = (TransportKind, &'static str, bool);

#[tokio::test]
async fn each_http_request_reaches_the_hook_with_its_head_and_the_server_stops_when_told() {
    let shop = Shop::open();
    let agent = session("acme", &["orders:read", "refund:create"]);
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    let hook = move |peer: &Peer<'_>| -> Result<Session, Refused> {
        let session_id = peer.session_id().is_some();
        record
            .lock()
            .unwrap()
            .push((peer.transport(), peer.method(), session_id));
        match peer.bearer_token() {
            Some("s3cret") => Ok(agent.clone()),
            _ => Err(Refused::new("send Authorization: Bearer TOKEN")),
        }
    };
    let server = server(&shop, hook);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        server
            .serve_http(listener, async move {
                let _ = stopped.await;
            })
            .await;
    });

    let refused = timeout(
        PATIENCE,
        ().serve(McpHttpClient::transport(
            &url,
            &BearerToken::new(Some("guess")),
        )),
    )
    .await
    .unwrap();
    let Err(ClientInitializeError::JsonRpcError(error)) = refused else {
        panic!("a wrong token is refused: {refused:?}");
    };
    assert_eq!(error.code, SESSION_REFUSED);

    let token = BearerToken::new(Some("s3cret"));
    let client = timeout(PATIENCE, ().serve(McpHttpClient::transport(&url, &token)))
        .await
        .unwrap()
        .unwrap();
    let refund = call("issue_refund", json!({"order_id": "ORD-1", "amount": 5.0}));
    let answer = result_object(&client.call_tool(refund.clone()).await.unwrap());
    assert_eq!(answer["status"], "succeeded");
    token.set(None);
    let after = protocol_error(client.call_tool(refund).await);
    assert_eq!(after.code, SESSION_REFUSED);
    assert_eq!(shop.refunds(), 1);

    stop.send(()).unwrap();
    timeout(PATIENCE, serving)
        .await
        .expect("the server stops once told")
        .unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (TransportKind::Http, "initialize", false),
            (TransportKind::Http, "initialize", false),
            (TransportKind::Http, "tools/call", true),
            (TransportKind::Http, "tools/call", true),
        ]
    );
}
