//! `McpServer::serve_http` in process: each HTTP request reaches the hook once with its head,
//! and what the transport spec asks is checked before the protocol: a refused credential is
//! `401` with `WWW-Authenticate` and makes no session, a foreign `Origin` is `403`, a session
//! answers only the caller who opened it, malformed messages get `-32700` and `-32600`. Each
//! MCP session is a run of its own, listed the tools it may call.

use crate::common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::raw_http::{Answer, post_reading_until, request};
use common::{PATIENCE, Shop, call, protocol_error, result_object, server};
use rmcp::ServiceExt;
use rmcp::model::ErrorCode;
use rmcp::service::RunningService;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::timeout;
use toolgate::AuthContext;
use toolgate::mcp::{Peer, RUN_ABORTED, Refused, SESSION_REFUSED, SessionHook, TransportKind};
use toolgate_test::{BearerToken, McpHttpClient};

/// A server on a loopback port, and how to stop it.
struct Running {
    addr: SocketAddr,
    url: String,
    stop: oneshot::Sender<()>,
    serving: JoinHandle<()>,
}

impl Running {
    async fn start(shop: &Arc<Shop>, hook: impl SessionHook) -> Running {
        let server = server(shop, hook);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = tokio::spawn(async move {
            server
                .serve_http(listener, async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Running {
            addr,
            url: format!("http://{addr}/mcp"),
            stop,
            serving,
        }
    }

    async fn client(&self, token: &BearerToken) -> RunningService<rmcp::RoleClient, ()> {
        timeout(
            PATIENCE,
            ().serve(McpHttpClient::transport(&self.url, token)),
        )
        .await
        .unwrap()
        .unwrap()
    }

    /// Opens a session by hand with `token`: its id.
    async fn open_session(&self, token: &str) -> String {
        let answer = self
            .post(&[("authorization", &format!("Bearer {token}"))], INITIALIZE)
            .await;
        assert_eq!(answer.status, 200, "{answer:?}");
        answer
            .header("mcp-session-id")
            .expect("a session is opened")
            .to_owned()
    }

    async fn post(&self, headers: &[(&str, &str)], body: &str) -> Answer {
        let mut all = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ];
        all.extend_from_slice(headers);
        request(self.addr, "POST", &all, body).await
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        timeout(PATIENCE, self.serving).await.unwrap().unwrap();
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// Admits `s3cret` as acme's clerk (with `refund:create` while `may_refund` holds) and `other`
/// as acme's auditor; refuses every other request.
fn tokens(
    may_refund: Arc<AtomicBool>,
) -> impl Fn(&Peer<'_>) -> Result<AuthContext, Refused> + Send + Sync + 'static {
    move |peer: &Peer<'_>| match peer.bearer_token() {
        Some("s3cret") => {
            let mut permissions = vec!["orders:read"];
            if may_refund.load(Ordering::SeqCst) {
                permissions.push("refund:create");
            }
            Ok(AuthContext::new("acme", "clerk").with_permissions(permissions))
        }
        Some("other") => Ok(AuthContext::new("acme", "auditor").with_permissions(["orders:read"])),
        Some(_) => Err(Refused::new("the bearer token is not known: ask for one")),
        None => Err(Refused::new("send Authorization: Bearer TOKEN")),
    }
}

fn refund() -> rmcp::model::CallToolRequestParams {
    call("issue_refund", json!({"order_id": "ORD-1", "amount": 5.0}))
}

/// What the hook saw of one HTTP request: its method, whether it named a session.
type Seen = (String, bool);

#[tokio::test]
async fn each_http_request_reaches_the_hook_once_with_its_head_and_the_server_stops_when_told() {
    let shop = Shop::open();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    let admit = tokens(Arc::new(AtomicBool::new(true)));
    let hook = move |peer: &Peer<'_>| {
        assert_eq!(peer.transport(), TransportKind::Http);
        let entry = (peer.method().to_owned(), peer.session_id().is_some());
        record.lock().unwrap().push(entry);
        admit(peer)
    };
    let running = Running::start(&shop, hook).await;

    let refused = timeout(
        PATIENCE,
        ().serve(McpHttpClient::transport(
            &running.url,
            &BearerToken::new(Some("guess")),
        )),
    )
    .await
    .unwrap();
    assert!(refused.is_err(), "a wrong token is refused");

    let token = BearerToken::new(Some("s3cret"));
    let client = running.client(&token).await;
    let answer = result_object(&client.call_tool(refund()).await.unwrap());
    assert_eq!(answer["status"], "succeeded");
    token.set(None);
    assert!(client.call_tool(refund()).await.is_err());
    assert_eq!(shop.refunds(), 1);

    running.stop().await;
    let seen = seen.lock().unwrap();
    let calls: Vec<&Seen> = seen
        .iter()
        .filter(|(method, _)| method == "tools/call")
        .collect();
    assert_eq!(
        calls,
        [
            &("tools/call".to_owned(), true),
            &("tools/call".to_owned(), true)
        ]
    );
    let opened: Vec<&Seen> = seen
        .iter()
        .filter(|(method, _)| method == "initialize")
        .collect();
    assert_eq!(
        opened,
        [
            &("initialize".to_owned(), false),
            &("initialize".to_owned(), false)
        ]
    );
}

#[tokio::test]
async fn a_request_without_a_known_token_is_401_with_a_challenge_and_opens_no_session() {
    let shop = Shop::open();
    let opened = Arc::new(Mutex::new(0));
    let count = opened.clone();
    let admit = tokens(Arc::new(AtomicBool::new(true)));
    let hook = move |peer: &Peer<'_>| {
        let admitted = admit(peer);
        if admitted.is_ok() && peer.method() == "initialize" {
            *count.lock().unwrap() += 1;
        }
        admitted
    };
    let running = Running::start(&shop, hook).await;

    let missing = running.post(&[], INITIALIZE).await;
    assert_eq!(missing.status, 401, "{missing:?}");
    assert_eq!(
        missing.header("www-authenticate"),
        Some("Bearer realm=\"mcp\"")
    );
    assert_eq!(missing.header("mcp-session-id"), None);
    let error = missing.json();
    assert_eq!(error["error"]["code"], SESSION_REFUSED.0);
    assert_eq!(
        error["error"]["message"],
        "Refused: send Authorization: Bearer TOKEN"
    );
    assert_eq!(error["id"], 1);

    let wrong = running
        .post(&[("authorization", "Bearer guess")], INITIALIZE)
        .await;
    assert_eq!(wrong.status, 401);
    let challenge = wrong.header("www-authenticate").unwrap();
    assert!(
        challenge.starts_with("Bearer realm=\"mcp\", error=\"invalid_token\""),
        "{challenge}"
    );
    assert_eq!(wrong.header("mcp-session-id"), None);

    // A call without a token is refused the same way, whatever session it names.
    let session = running.open_session("s3cret").await;
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"issue_refund","arguments":{"order_id":"ORD-1","amount":5}}}"#;
    let refused = running.post(&[("mcp-session-id", &session)], call).await;
    assert_eq!(refused.status, 401);
    assert_eq!(
        *opened.lock().unwrap(),
        1,
        "only the admitted initialize made a session"
    );
    assert_eq!(shop.refunds(), 0);
    running.stop().await;
}

#[tokio::test]
async fn a_page_of_a_foreign_origin_is_403_and_a_loopback_page_passes() {
    let shop = Shop::open();
    let running = Running::start(&shop, tokens(Arc::new(AtomicBool::new(true)))).await;
    let auth = ("authorization", "Bearer s3cret");
    let foreign = running
        .post(&[auth, ("origin", "https://evil.example")], INITIALIZE)
        .await;
    assert_eq!(foreign.status, 403, "{foreign:?}");
    assert_eq!(foreign.header("mcp-session-id"), None);
    // Checked before the credential: a foreign page learns nothing of it.
    let foreign = running
        .post(&[("origin", "https://evil.example")], INITIALIZE)
        .await;
    assert_eq!(foreign.status, 403);
    let local = running
        .post(&[auth, ("origin", "http://localhost:5173")], INITIALIZE)
        .await;
    assert_eq!(local.status, 200, "{local:?}");
    running.stop().await;
}

#[tokio::test]
async fn only_the_caller_who_opened_a_session_can_end_it() {
    let shop = Shop::open();
    let running = Running::start(&shop, tokens(Arc::new(AtomicBool::new(true)))).await;
    let session = running.open_session("s3cret").await;
    let delete = |token: Option<&'static str>| {
        let session = session.clone();
        let addr = running.addr;
        async move {
            let authorization = token.map(|token| format!("Bearer {token}"));
            let mut headers = vec![("mcp-session-id", session.as_str())];
            if let Some(authorization) = &authorization {
                headers.push(("authorization", authorization.as_str()));
            }
            request(addr, "DELETE", &headers, "").await
        }
    };
    assert_eq!(delete(None).await.status, 401);
    assert_eq!(delete(Some("guess")).await.status, 401);
    // Another caller, known to the server, is told there is no such session.
    assert_eq!(delete(Some("other")).await.status, 404);

    // The session lives on: its own caller lists the tools in it.
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let auth = ("authorization", "Bearer s3cret");
    let listed = running
        .post(&[auth, ("mcp-session-id", &session)], list)
        .await;
    assert_eq!(listed.status, 200, "{listed:?}");
    let stream = running
        .post(
            &[
                ("authorization", "Bearer other"),
                ("mcp-session-id", &session),
            ],
            list,
        )
        .await;
    assert_eq!(stream.status, 404);

    let ended = delete(Some("s3cret")).await;
    assert_eq!(
        ended.status, 204,
        "the official clients warn on anything but 200 and 204"
    );
    let after = running
        .post(&[auth, ("mcp-session-id", &session)], list)
        .await;
    assert_eq!(after.status, 404);
    running.stop().await;
}

#[tokio::test]
async fn malformed_messages_are_400_with_the_json_rpc_codes_of_the_spec() {
    let shop = Shop::open();
    let running = Running::start(&shop, tokens(Arc::new(AtomicBool::new(true)))).await;
    let auth = ("authorization", "Bearer s3cret");
    let cases = [
        ("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ", -32700),
        ("not json", -32700),
        ("[]", -32600),
        (r#"{"jsonrpc":"2.0","id":7}"#, -32600),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[]}"#,
            -32600,
        ),
        (r#"{"id":7,"method":"tools/list"}"#, -32600),
    ];
    for (body, code) in cases {
        let answer = running.post(&[auth], body).await;
        assert_eq!(answer.status, 400, "{body}: {answer:?}");
        assert_eq!(answer.json()["error"]["code"], code, "{body}: {answer:?}");
    }
    let answer = running.post(&[auth], r#"{"jsonrpc":"2.0","id":7}"#).await;
    assert_eq!(answer.json()["id"], 7);
    running.stop().await;
}

#[tokio::test]
async fn a_key_given_twice_in_a_calls_arguments_is_invalid_arguments() {
    let shop = Shop::open();
    let running = Running::start(&shop, tokens(Arc::new(AtomicBool::new(true)))).await;
    let session = running.open_session("s3cret").await;
    let auth = ("authorization", "Bearer s3cret");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let accepted = running
        .post(&[auth, ("mcp-session-id", &session)], initialized)
        .await;
    assert_eq!(accepted.status, 202, "{accepted:?}");
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"issue_refund","arguments":{"order_id":"ORD-1","amount":5,"amount":5000}}}"#;
    let headers = [
        auth,
        ("mcp-session-id", session.as_str()),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    let answered = post_reading_until(running.addr, &headers, call, "more than once");
    let answer = timeout(PATIENCE, answered).await.unwrap();
    assert!(
        answer.contains(r#"\"kind\":\"invalid_arguments\""#),
        "{answer}"
    );
    assert!(answer.contains("more than once"), "{answer}");
    assert_eq!(shop.refunds(), 0);
    running.stop().await;
}

#[tokio::test]
async fn each_http_session_is_a_run_listed_what_it_may_call() {
    let shop = Shop::open();
    let may_refund = Arc::new(AtomicBool::new(true));
    let running = Running::start(&shop, tokens(may_refund.clone())).await;
    let read = || call("get_order", json!({"order_id": "ORD-1"}));

    let auditor = running.client(&BearerToken::new(Some("other"))).await;
    let names: Vec<String> = auditor
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    assert_eq!(names, ["get_order"]);
    let hidden = protocol_error(auditor.call_tool(refund()).await);
    assert_eq!(hidden.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(hidden.message, "Unknown tool: issue_refund");
    assert_eq!(
        result_object(&auditor.call_tool(read()).await.unwrap())["status"],
        "succeeded"
    );

    let token = BearerToken::new(Some("s3cret"));
    let first = running.client(&token).await;
    assert_eq!(first.list_all_tools().await.unwrap().len(), 2);
    may_refund.store(false, Ordering::SeqCst);
    let aborted = protocol_error(first.call_tool(refund()).await);
    assert_eq!(aborted.code, RUN_ABORTED);
    assert_eq!(
        protocol_error(first.call_tool(read()).await).code,
        RUN_ABORTED
    );

    // The same token's next session is a new run.
    let second = running.client(&token).await;
    assert_eq!(
        result_object(&second.call_tool(read()).await.unwrap())["status"],
        "succeeded"
    );
    assert_eq!(shop.refunds(), 0);
    for client in [auditor, first, second] {
        client.cancel().await.unwrap();
    }
    running.stop().await;
}
