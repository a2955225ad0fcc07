//! [`Peer`]: what the server knows of the client behind one request, for the
//! [`SessionHook`](crate::SessionHook) to decide who it is.

use std::fmt;
use std::sync::OnceLock;

use http::HeaderMap;
use http::request::Parts;
use rmcp::RoleServer;
use rmcp::model::Implementation;
use rmcp::service::RequestContext;

/// How a request reached the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportKind {
    /// The process's standard input and output ([`McpServer::serve_stdio`](crate::McpServer::serve_stdio)):
    /// the client is whoever started the process.
    Stdio,
    /// Streamable HTTP ([`McpServer::http_service`](crate::McpServer::http_service),
    /// [`McpServer::serve_http`](crate::McpServer::serve_http)): each request carries its own
    /// headers, and so its own authorization.
    Http,
    /// Any other transport given to [`McpServer::serve`](crate::McpServer::serve) (a byte
    /// stream, a pair of channels).
    Stream,
}

/// How a request reached a server served over `served`: over HTTP when it came with an HTTP
/// head (`http`), else over `served`.
pub(crate) fn transport_of(http: Option<&Parts>, served: TransportKind) -> TransportKind {
    match http {
        Some(_) => TransportKind::Http,
        None => served,
    }
}

/// The name of the header that carries a legacy MCP session's id.
const SESSION_ID: &str = "mcp-session-id";

/// The client behind one request, as the server knows it: the transport, the request's method,
/// the HTTP request's head (headers, URI) over streamable HTTP, and the client's `initialize`
/// info when known.
///
/// A [`SessionHook`](crate::SessionHook) reads it to decide which toolgate
/// [`Session`](toolgate_core::Session) the request runs in. Tests of a hook build one by hand:
///
/// ```
/// use toolgate::mcp::{Peer, TransportKind};
///
/// let request = http::Request::post("/mcp")
///     .header("authorization", "Bearer s3cret")
///     .body(())
///     .unwrap();
/// let (parts, ()) = request.into_parts();
/// let peer = Peer::new(TransportKind::Http, "tools/call").with_http(&parts);
/// assert_eq!(peer.bearer_token(), Some("s3cret"));
/// assert_eq!(peer.session_id(), None);
/// assert_eq!(Peer::new(TransportKind::Stdio, "initialize").bearer_token(), None);
/// ```
#[derive(Clone)]
pub struct Peer<'a> {
    transport: TransportKind,
    method: &'a str,
    http: Option<&'a Parts>,
    /// The request, whose client info is read only when a hook asks for it: reading it costs
    /// more than the rest of a call's way through the server.
    context: Option<&'a RequestContext<RoleServer>>,
    client: OnceLock<Option<Implementation>>,
}

impl fmt::Debug for Peer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Peer")
            .field("transport", &self.transport)
            .field("method", &self.method)
            .field("http", &self.http)
            .field("client", &self.client_info())
            .finish()
    }
}

impl<'a> Peer<'a> {
    /// A request of `method` (see [`Peer::method`]) over `transport`, with no HTTP head and no
    /// client info.
    pub fn new(transport: TransportKind, method: &'a str) -> Self {
        Peer {
            transport,
            method,
            http: None,
            context: None,
            client: OnceLock::new(),
        }
    }

    /// With the request whose client info [`Peer::client_info`] reads, when asked.
    pub(crate) fn with_request(mut self, context: &'a RequestContext<RoleServer>) -> Self {
        self.context = Some(context);
        self
    }

    /// With the HTTP request's head.
    pub fn with_http(mut self, parts: &'a Parts) -> Self {
        self.http = Some(parts);
        self
    }

    /// With the client's implementation info (its name and version).
    pub fn with_client(self, client: Implementation) -> Self {
        let _ = self.client.set(Some(client));
        self
    }

    /// How the request reached the server.
    pub fn transport(&self) -> TransportKind {
        self.transport
    }

    /// What the request asks. On stdio and other byte streams, its JSON-RPC method:
    /// `"initialize"`, `"server/discover"`, `"tools/list"` or `"tools/call"`. Over streamable
    /// HTTP, where the hook is asked for every HTTP request: the JSON-RPC method of a `POST`'s
    /// message (any method, a notification's too, such as `"notifications/cancelled"`; `""`
    /// for a client's answer to a request of the server), or the HTTP method of a request
    /// without one: `"GET"` (the session's stream of messages from the server) or `"DELETE"`
    /// (the end of the session).
    pub fn method(&self) -> &'a str {
        self.method
    }

    /// The HTTP request's head (method, URI, headers, and the extensions an HTTP layer in
    /// front of the service put there), for a request over streamable HTTP.
    pub fn http(&self) -> Option<&'a Parts> {
        self.http
    }

    /// The HTTP request's headers, for a request over streamable HTTP.
    pub fn headers(&self) -> Option<&'a HeaderMap> {
        self.http.map(|parts| &parts.headers)
    }

    /// The token of an `Authorization: Bearer TOKEN` header (the scheme in any case, the token
    /// without surrounding spaces); `None` without one, or when the header is not a bearer
    /// token, holds no token, or is not visible ASCII.
    pub fn bearer_token(&self) -> Option<&'a str> {
        let value = self.headers()?.get(http::header::AUTHORIZATION)?;
        let (scheme, token) = value.to_str().ok()?.split_once(' ')?;
        let token = token.trim();
        (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
    }

    /// The `Mcp-Session-Id` header: the id of the legacy MCP session the request belongs to
    /// (protocol versions before 2026-07-28 over streamable HTTP; the `initialize` request has
    /// none yet). Requests of 2026-07-28 and later carry none: they stand alone.
    pub fn session_id(&self) -> Option<&'a str> {
        self.headers()?.get(SESSION_ID)?.to_str().ok()
    }

    /// The client's implementation info (name, version) from its `initialize` request or the
    /// request's own metadata, when it sent one.
    pub fn client_info(&self) -> Option<&Implementation> {
        self.client
            .get_or_init(|| self.context.and_then(RequestContext::client_info))
            .as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Request headers, by name and raw value.
    type Headers<'a> = &'a [(&'a str, &'a [u8])];

    fn parts(headers: Headers<'_>) -> Parts {
        let mut request = http::Request::post("/mcp");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn bearer_tokens_are_read_from_the_authorization_header_only() {
        let cases: [(Headers<'_>, Option<&str>); 9] = [
            (&[("authorization", b"Bearer abc")], Some("abc")),
            (&[("authorization", b"bearer  abc ")], Some("abc")),
            (&[("Authorization", b"BEARER abc")], Some("abc")),
            (&[("authorization", b"Basic YWxhZGRpbjpvcGVu")], None),
            (&[("authorization", b"Bearer ")], None),
            (&[("authorization", b"Bearer")], None),
            (&[("authorization", b"Bearer \xff")], None),
            (&[("x-token", b"Bearer abc")], None),
            (&[], None),
        ];
        for (headers, token) in cases {
            let parts = parts(headers);
            let peer = Peer::new(TransportKind::Http, "tools/list").with_http(&parts);
            assert_eq!(peer.bearer_token(), token, "{headers:?}");
        }
    }

    #[test]
    fn the_session_id_is_the_mcp_session_id_header() {
        let parts = parts(&[("Mcp-Session-Id", b"s-1")]);
        let peer = Peer::new(TransportKind::Http, "tools/call").with_http(&parts);
        assert_eq!(peer.session_id(), Some("s-1"));
        assert_eq!(peer.method(), "tools/call");
        assert!(peer.headers().is_some());
        let stdio = Peer::new(TransportKind::Stdio, "tools/call");
        assert_eq!(stdio.session_id(), None);
        assert!(stdio.http().is_none());
        assert!(stdio.client_info().is_none());
    }
}
