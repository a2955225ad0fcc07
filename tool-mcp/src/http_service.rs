//! [`McpHttpService`]: the server's streamable HTTP endpoint. Each request is checked as the
//! transport and authorization specs ask before it reaches the SDK's transport: its `Origin`,
//! its credential (the [`SessionHook`](crate::SessionHook), asked once per HTTP request), its
//! JSON-RPC message, and that a session's requests come from the client that opened it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Display;
use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes, BytesMut};
use http::header::{AUTHORIZATION, CONTENT_TYPE, ORIGIN, WWW_AUTHENTICATE};
use http::request::Parts;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::admitted::Admitted;
use crate::handler::McpHandler;
use crate::hook::Refused;
use crate::inner::Inner;
use crate::origin::Origins;
use crate::peer::{Peer, TransportKind};
use crate::protocol_errors::SESSION_REFUSED;
use crate::raw_arguments::RawArguments;

/// An HTTP response of the service.
pub type HttpResponse = Response<BoxBody<Bytes, Infallible>>;

/// The name of the header that carries a legacy MCP session's id.
const SESSION_ID: &str = "mcp-session-id";

/// The JSON-RPC error code of text that is not JSON.
const PARSE_ERROR: i32 = -32700;
/// The JSON-RPC error code of JSON that is not a JSON-RPC message the server reads.
const INVALID_REQUEST: i32 = -32600;

/// An [`McpServer`](crate::McpServer)'s streamable HTTP endpoint, as a tower `Service` of
/// `http::Request`s (and [`handle`](Self::handle) for HTTP servers that take a function): what
/// [`McpServer::http_service`](crate::McpServer::http_service) makes, to mount in an HTTP server
/// of your own, and what [`McpServer::serve_http`](crate::McpServer::serve_http) runs.
///
/// Before a request reaches the SDK's transport:
///
/// - **`Origin`**: a request whose `Origin` header is not allowed gets `403 Forbidden`
///   (loopback pages by default; see
///   [`McpServer::http_service_with`](crate::McpServer::http_service_with)). A request without
///   one (any client that is not a browser) passes.
/// - **The credential**: the [`SessionHook`](crate::SessionHook) is asked once for each HTTP
///   request, whatever it is (a `POST` of any message, the `GET` of a session's stream, the
///   `DELETE` that ends a session). A refusal is `401 Unauthorized` with `WWW-Authenticate:
///   Bearer` ([`Refused::new`]) or `403 Forbidden` ([`Refused::forbidden`]), its body a JSON-RPC
///   error ([`SESSION_REFUSED`](crate::SESSION_REFUSED)) saying the reason, and nothing else
///   happens: no session is made. The calls of the request run as the hook said, which is not
///   asked again.
/// - **The message**: text that is not JSON is `400 Bad Request` with the JSON-RPC error
///   `-32700` (parse error); JSON that is not a JSON-RPC message the server reads (a batch, a
///   request without a method, params of the wrong shape) is `400` with `-32600` (invalid
///   request). The text of a `tools/call`'s arguments is kept for the dispatcher, which reads
///   it as every format's: a key given twice is `invalid_arguments`.
/// - **The session**: a request naming a session (`Mcp-Session-Id`) must come from the caller
///   (tenant and user) whom the hook admitted when the session was opened; any other gets
///   `404 Not Found`, as a session that does not exist does, and the session lives on. So only
///   its own client can read a session's stream or end it. Ending it (`DELETE`) answers `204 No
///   Content`.
#[derive(Clone)]
pub struct McpHttpService {
    inner: Arc<Inner>,
    sdk: StreamableHttpService<McpHandler, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
    origins: Arc<Origins>,
    owners: Arc<Mutex<Owners>>,
    max_body: usize,
}

impl std::fmt::Debug for McpHttpService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHttpService")
            .field("server", &self.inner.info.server_info.name)
            .field("origins", &self.origins)
            .finish_non_exhaustive()
    }
}

/// Who opened each open session: its caller's tenant and user.
#[derive(Default)]
struct Owners {
    by_session: HashMap<String, Owner>,
    /// How many sessions there were after the last look for ended ones.
    after_sweep: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    tenant: String,
    user: String,
}

impl Owner {
    fn of(admitted: &Admitted) -> Self {
        let auth = admitted.auth();
        Owner {
            tenant: auth.tenant().to_owned(),
            user: auth.user().to_owned(),
        }
    }
}

/// The parts of a JSON-RPC message the service reads, borrowed from its text.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a str>,
}

/// What is wrong with a `POST`'s message: the JSON-RPC error code and message.
struct Malformed {
    code: i32,
    message: String,
}

impl McpHttpService {
    pub(crate) fn new(
        inner: Arc<Inner>,
        sdk: StreamableHttpService<McpHandler, LocalSessionManager>,
        sessions: Arc<LocalSessionManager>,
        origins: Origins,
    ) -> Self {
        let max_body = sdk.config.max_request_body_bytes;
        McpHttpService {
            inner,
            sdk,
            sessions,
            origins: Arc::new(origins),
            owners: Arc::default(),
            max_body,
        }
    }

    /// Ends every session and stream of the service.
    pub(crate) fn end_sessions(&self) {
        self.sdk.config.cancellation_token.cancel();
    }

    /// Answers one HTTP request.
    pub async fn handle<B>(&self, request: Request<B>) -> HttpResponse
    where
        B: Body + Send + 'static,
        B::Error: Display,
    {
        let (parts, body) = request.into_parts();
        if let Some(origin) = parts.headers.get(ORIGIN)
            && !origin
                .to_str()
                .is_ok_and(|origin| self.origins.allow(origin))
        {
            return plain(
                StatusCode::FORBIDDEN,
                "Forbidden: this page's Origin may not use this MCP server",
            );
        }
        match parts.method {
            Method::POST => self.post(parts, body).await,
            Method::GET | Method::DELETE => self.session_request(parts, body).await,
            // The SDK says which methods it takes.
            _ => self.sdk.handle(Request::from_parts(parts, body)).await,
        }
    }

    async fn post<B>(&self, mut parts: Parts, body: B) -> HttpResponse
    where
        B: Body + Send + 'static,
        B::Error: Display,
    {
        let text = match read_body(body, self.max_body).await {
            Ok(text) => text,
            Err(response) => return response,
        };
        // A body that is not JSON by its type is the SDK's to refuse (415), once the client is
        // known.
        let json = is_json(&parts);
        let envelope = json.then(|| serde_json::from_slice::<Envelope<'_>>(&text));
        let (id, method) = match &envelope {
            Some(Ok(envelope)) => (envelope.id, envelope.method.unwrap_or("")),
            _ => (None, ""),
        };
        let admitted = match self.admit(&parts, method).await {
            Ok(admitted) => admitted,
            Err(refused) => return refusal(&parts, &refused, id),
        };
        if json && let Err(malformed) = read_message(&text, envelope) {
            return jsonrpc_error(
                StatusCode::BAD_REQUEST,
                id,
                malformed.code,
                &malformed.message,
            );
        }
        if let Some(session) = session_id(&parts)
            && !self.owned_by(session, &admitted)
        {
            return session_not_found();
        }
        let owner = (method == "initialize").then(|| Owner::of(&admitted));
        parts.extensions.insert(admitted);
        if method == "tools/call"
            && let Some(raw) = RawArguments::of_call(&text)
        {
            parts.extensions.insert(raw);
        }
        let response = self
            .sdk
            .handle(Request::from_parts(parts, Full::new(text)))
            .await;
        if let Some(owner) = owner
            && let Some(session) = response.headers().get(SESSION_ID)
            && let Ok(session) = session.to_str()
        {
            self.opened(session.to_owned(), owner).await;
        }
        response
    }

    /// A `GET` (the session's stream) or `DELETE` (its end): from the session's own client only.
    async fn session_request<B>(&self, parts: Parts, body: B) -> HttpResponse
    where
        B: Body + Send + 'static,
        B::Error: Display,
    {
        let method = parts.method.as_str().to_owned();
        let admitted = match self.admit(&parts, &method).await {
            Ok(admitted) => admitted,
            Err(refused) => return refusal(&parts, &refused, None),
        };
        let session = session_id(&parts).map(str::to_owned);
        if let Some(session) = &session
            && !self.owned_by(session, &admitted)
        {
            return session_not_found();
        }
        let ending = parts.method == Method::DELETE;
        let mut response = self.sdk.handle(Request::from_parts(parts, body)).await;
        if ending && response.status().is_success() {
            if let Some(session) = &session {
                self.owners().by_session.remove(session);
            }
            // The official clients take 200 or 204 as a session ended, and warn on 202.
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
        response
    }

    /// The hook's answer for the request `parts`, whose message's method is `method`.
    async fn admit(&self, parts: &Parts, method: &str) -> Result<Admitted, Refused> {
        let peer = Peer::new(TransportKind::Http, method).with_http(parts);
        self.inner.hook.session(&peer).await
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, Owners> {
        self.owners
            .lock()
            .expect("the owners of sessions are never poisoned")
    }

    /// Whether `admitted` may use the session `session`: it opened it, or the session is not
    /// one this service opened (the SDK answers it as unknown).
    fn owned_by(&self, session: &str, admitted: &Admitted) -> bool {
        let owners = self.owners();
        owners.by_session.get(session).is_none_or(|owner| {
            let auth = admitted.auth();
            owner.tenant == auth.tenant() && owner.user == auth.user()
        })
    }

    /// Notes that `owner` opened `session`; now and then forgets the sessions that ended
    /// without a `DELETE` (the service stopped them, or their client went away).
    async fn opened(&self, session: String, owner: Owner) {
        let sweep = {
            let mut owners = self.owners();
            owners.by_session.insert(session, owner);
            let sweep = owners.by_session.len() > (2 * owners.after_sweep).max(64);
            sweep.then(|| owners.by_session.keys().cloned().collect::<Vec<_>>())
        };
        let Some(sessions) = sweep else {
            return;
        };
        let mut ended = Vec::new();
        for session in sessions {
            if !self
                .sessions
                .has_session(&session.clone().into())
                .await
                .unwrap_or(true)
            {
                ended.push(session);
            }
        }
        let mut owners = self.owners();
        for session in &ended {
            owners.by_session.remove(session);
        }
        owners.after_sweep = owners.by_session.len();
    }
}

impl<B> tower_service::Service<Request<B>> for McpHttpService
where
    B: Body + Send + 'static,
    B::Error: Display,
{
    type Response = HttpResponse;
    type Error = Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<HttpResponse, Infallible>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let service = self.clone();
        Box::pin(async move { Ok(service.handle(request).await) })
    }
}

/// The body, up to `max` bytes; else the answer saying why not.
async fn read_body<B>(body: B, max: usize) -> Result<Bytes, HttpResponse>
where
    B: Body,
    B::Error: Display,
{
    let mut body = std::pin::pin!(body);
    let mut text = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| {
            plain(
                StatusCode::BAD_REQUEST,
                &format!("Bad Request: the request body could not be read: {err}"),
            )
        })?;
        let Ok(mut data) = frame.into_data() else {
            continue;
        };
        if data.remaining() > max.saturating_sub(text.len()) {
            return Err(plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("Payload Too Large: the request body exceeds {max} bytes"),
            ));
        }
        while data.has_remaining() {
            let chunk = data.chunk();
            let len = chunk.len();
            text.extend_from_slice(chunk);
            data.advance(len);
        }
    }
    Ok(text.freeze())
}

/// The message `text` checked: `envelope` is its first reading.
fn read_message(
    text: &[u8],
    envelope: Option<Result<Envelope<'_>, serde_json::Error>>,
) -> Result<(), Malformed> {
    let first = match envelope {
        Some(Err(err)) if err.is_syntax() || err.is_eof() => {
            return Err(Malformed {
                code: PARSE_ERROR,
                message: format!("Parse error: the request body is not JSON: {err}"),
            });
        }
        _ => Ok(()),
    };
    first?;
    match serde_json::from_slice::<ClientJsonRpcMessage>(text) {
        Ok(_) => Ok(()),
        Err(err) => Err(Malformed {
            code: INVALID_REQUEST,
            message: format!(
                "Invalid Request: the body is not one JSON-RPC 2.0 message this server reads \
                 (send one request, notification or response per POST): {err}"
            ),
        }),
    }
}

fn is_json(parts: &Parts) -> bool {
    parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            let essence = value.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("application/json")
        })
}

fn session_id(parts: &Parts) -> Option<&str> {
    parts.headers.get(SESSION_ID)?.to_str().ok()
}

/// The answer to a request the hook refused: `401` with `WWW-Authenticate`, or `403`.
fn refusal(parts: &Parts, refused: &Refused, id: Option<&RawValue>) -> HttpResponse {
    let message = format!("Refused: {}", refused.reason());
    if refused.is_forbidden() {
        return jsonrpc_error(StatusCode::FORBIDDEN, id, SESSION_REFUSED.0, &message);
    }
    let mut response = jsonrpc_error(StatusCode::UNAUTHORIZED, id, SESSION_REFUSED.0, &message);
    let mut challenge = String::from("Bearer realm=\"mcp\"");
    if parts.headers.contains_key(AUTHORIZATION) {
        challenge.push_str(", error=\"invalid_token\", error_description=\"");
        challenge.extend(
            refused
                .reason()
                .chars()
                .filter(|c| c.is_ascii_graphic() || *c == ' ')
                .filter(|c| !matches!(c, '"' | '\\')),
        );
        challenge.push('"');
    }
    let challenge = HeaderValue::from_str(&challenge)
        .unwrap_or_else(|_| HeaderValue::from_static("Bearer realm=\"mcp\""));
    response.headers_mut().insert(WWW_AUTHENTICATE, challenge);
    response
}

fn session_not_found() -> HttpResponse {
    plain(StatusCode::NOT_FOUND, "Not Found: Session not found")
}

fn plain(status: StatusCode, text: &str) -> HttpResponse {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(text.to_owned())).boxed())
        .expect("a response of a status and a text")
}

/// A JSON-RPC error response, for the request `id` (`null` when it is not known).
fn jsonrpc_error(
    status: StatusCode,
    id: Option<&RawValue>,
    code: i32,
    message: &str,
) -> HttpResponse {
    let id = id
        .and_then(|id| serde_json::from_str::<serde_json::Value>(id.get()).ok())
        .unwrap_or(serde_json::Value::Null);
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .expect("a response of a status and a JSON body")
}
