//! [`McpHttpClient`]: the HTTP side of the SDK's streamable HTTP client transport, over plain
//! HTTP/1.1 on hyper (feature `mcp-http-client`), for tests that drive an MCP server over
//! loopback. No TLS, no proxy, no connection pool: one connection per request.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST};
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};
use tokio::net::TcpStream;

const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";
const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";

/// The HTTP client of [`StreamableHttpClientTransport`] for `http://` URLs: each request on a
/// connection of its own, the response's JSON body read up to the transport's limit, its event
/// stream handed on as it arrives (the transport's limit on an event's size is not applied).
///
/// Every request carries `Authorization: Bearer TOKEN` with the client's [`BearerToken`] as it
/// is when the request is sent, so a test can change or take away a client's credential between
/// two requests.
///
/// ```no_run
/// use rmcp::ServiceExt;
/// use toolgate_test::{BearerToken, McpHttpClient};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let token = BearerToken::new(Some("s3cret"));
/// let client = ().serve(McpHttpClient::transport("http://127.0.0.1:8080/mcp", &token)).await?;
/// let tools = client.list_all_tools().await?;
/// token.set(None); // the next requests carry no credential
/// # let _ = tools;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct McpHttpClient {
    token: BearerToken,
}

impl McpHttpClient {
    /// A client sending `token`.
    pub fn new(token: &BearerToken) -> Self {
        McpHttpClient {
            token: token.clone(),
        }
    }

    /// A streamable HTTP transport to `url` on a client sending `token`.
    pub fn transport(url: &str, token: &BearerToken) -> StreamableHttpClientTransport<Self> {
        let config = StreamableHttpClientTransportConfig::with_uri(url);
        StreamableHttpClientTransport::with_client(McpHttpClient::new(token), config)
    }

    /// The token to send: the client's, else the one the transport was configured with.
    fn token(&self, configured: Option<String>) -> Option<String> {
        self.token.get().or(configured)
    }
}

/// The bearer token a [`McpHttpClient`] sends, shared with the test that may change it; clones
/// share it.
///
/// ```
/// use toolgate_test::BearerToken;
///
/// let token = BearerToken::new(Some("a"));
/// let same = token.clone();
/// token.set(Some("b"));
/// assert_eq!(same.get().as_deref(), Some("b"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct BearerToken(Arc<Mutex<Option<String>>>);

impl BearerToken {
    /// `token`, or none.
    pub fn new(token: Option<&str>) -> Self {
        BearerToken(Arc::new(Mutex::new(token.map(str::to_owned))))
    }

    /// Sends `token` (or none) from the next request on.
    pub fn set(&self, token: Option<&str>) {
        *self.0.lock().expect("the token lock is never poisoned") = token.map(str::to_owned);
    }

    /// The token sent now.
    pub fn get(&self) -> Option<String> {
        self.0
            .lock()
            .expect("the token lock is never poisoned")
            .clone()
    }
}

/// What went wrong below HTTP.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpHttpError {
    /// The URL is not an `http://HOST:PORT/PATH` URL.
    #[error("`{0}` is not an http:// URL with a host")]
    Url(String),
    /// The server could not be reached.
    #[error("cannot connect to {authority}: {source}")]
    Connect {
        /// The server's `host:port`.
        authority: String,
        /// The socket's error.
        #[source]
        source: std::io::Error,
    },
    /// HTTP failed (the request, the connection, or reading the body).
    #[error("HTTP failed: {0}")]
    Hyper(#[from] hyper::Error),
    /// The request could not be built (a header value that is not one).
    #[error("the request is not valid HTTP: {0}")]
    Request(#[from] http::Error),
    /// The body is longer than the transport accepts.
    #[error("the response body is longer than {0} bytes")]
    TooLong(usize),
}

type Failure = StreamableHttpError<McpHttpError>;

/// One request on a fresh connection to `uri`'s authority.
async fn send(
    request: http::request::Builder,
    uri: &str,
    body: Bytes,
) -> Result<Response<Incoming>, Failure> {
    let parsed: http::Uri = uri
        .parse()
        .map_err(|_| Failure::Client(McpHttpError::Url(uri.to_owned())))?;
    let authority = match (parsed.scheme_str(), parsed.authority()) {
        (Some("http"), Some(authority)) => authority.clone(),
        _ => return Err(Failure::Client(McpHttpError::Url(uri.to_owned()))),
    };
    let port = authority.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((authority.host(), port))
        .await
        .map_err(|source| {
            Failure::Client(McpHttpError::Connect {
                authority: authority.to_string(),
                source,
            })
        })?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|err| Failure::Client(err.into()))?;
    // The connection is driven on its own task until the response body is read to its end.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let path = parsed
        .path_and_query()
        .map_or("/", http::uri::PathAndQuery::as_str);
    let request = request
        .uri(path)
        .header(HOST, authority.as_str())
        .body(Full::new(body))
        .map_err(|err| Failure::Client(err.into()))?;
    sender
        .send_request(request)
        .await
        .map_err(|err| Failure::Client(err.into()))
}

/// A request with the transport's common headers.
fn builder(
    method: Method,
    session_id: Option<&str>,
    auth_token: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
) -> http::request::Builder {
    let mut builder = Request::builder().method(method);
    for (name, value) in custom_headers {
        builder = builder.header(name, value);
    }
    if let Some(token) = auth_token {
        builder = builder.header(AUTHORIZATION, format!("Bearer {token}"));
    }
    if let Some(session_id) = session_id {
        builder = builder.header(SESSION_ID, session_id);
    }
    builder
}

/// Whether `response` says its body is of media type `expected`.
fn is_media(response: &Response<Incoming>, expected: &str) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(expected))
}

/// The body, whole, up to `limit` bytes.
async fn body(response: Response<Incoming>, limit: usize) -> Result<Bytes, Failure> {
    match Limited::new(response.into_body(), limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) => match err.downcast::<hyper::Error>() {
            Ok(err) => Err(Failure::Client((*err).into())),
            Err(_) => Err(Failure::Client(McpHttpError::TooLong(limit))),
        },
    }
}

/// The response's event stream.
fn events(response: Response<Incoming>) -> BoxStream<'static, Result<Sse, SseError>> {
    SseStream::from_bytes_stream(response.into_body().into_data_stream()).boxed()
}

impl StreamableHttpClient for McpHttpClient {
    type Error = McpHttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_token,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let awaits_answer = matches!(message, ClientJsonRpcMessage::Request(_));
        let json = serde_json::to_vec(&message)?;
        let request = builder(
            Method::POST,
            session_id.as_deref(),
            self.token(auth_token),
            custom_headers,
        )
        .header(CONTENT_TYPE, JSON)
        .header(ACCEPT, format!("{JSON}, {EVENT_STREAM}"));
        let response = send(request, &uri, Bytes::from(json)).await?;
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(Failure::SessionExpired);
        }
        let new_session = response
            .headers()
            .get(SESSION_ID)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        if status.is_success() && is_media(&response, EVENT_STREAM) {
            return Ok(StreamableHttpPostResponse::Sse(
                events(response),
                new_session,
            ));
        }
        let json = is_media(&response, JSON);
        let bytes = body(response, limits.max_json_response_size).await?;
        if !awaits_answer && status.is_success() {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        match serde_json::from_slice::<ServerJsonRpcMessage>(&bytes) {
            Ok(answer @ ServerJsonRpcMessage::Error(_)) if json => {
                Ok(StreamableHttpPostResponse::Json(answer, new_session))
            }
            Ok(answer) if json && status.is_success() => {
                Ok(StreamableHttpPostResponse::Json(answer, new_session))
            }
            _ => Err(Failure::UnexpectedServerResponse(Cow::Owned(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&bytes)
            )))),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failure> {
        let request = builder(
            Method::DELETE,
            Some(&session_id),
            self.token(auth_token),
            custom_headers,
        );
        let response = send(request, &uri, Bytes::new()).await?;
        match response.status() {
            status if status.is_success() => Ok(()),
            StatusCode::METHOD_NOT_ALLOWED => Err(Failure::ServerDoesNotSupportDeleteSession),
            status => Err(Failure::UnexpectedServerResponse(Cow::Owned(format!(
                "HTTP {status} to DELETE"
            )))),
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failure> {
        let mut request = builder(
            Method::GET,
            session_id.as_deref(),
            self.token(auth_token),
            custom_headers,
        )
        .header(ACCEPT, EVENT_STREAM);
        if let Some(last_event_id) = last_event_id {
            request = request.header(LAST_EVENT_ID, last_event_id);
        }
        let response = send(request, &uri, Bytes::new()).await?;
        match response.status() {
            StatusCode::METHOD_NOT_ALLOWED => Err(Failure::ServerDoesNotSupportSse),
            StatusCode::NOT_FOUND if session_id.is_some() => Err(Failure::SessionExpired),
            status if status.is_success() && is_media(&response, EVENT_STREAM) => {
                Ok(events(response))
            }
            status => Err(Failure::UnexpectedServerResponse(Cow::Owned(format!(
                "HTTP {status} to GET, not an event stream"
            )))),
        }
    }
}
