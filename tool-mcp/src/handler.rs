//! The MCP methods the server answers itself: `initialize` (and `server/discover`),
//! `tools/list` and `tools/call`, each asking the session hook first. Ping, cancellation and
//! the rest of the protocol are the SDK's.

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, DiscoverResult, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ServerConfig, Tool,
};
use rmcp::service::{MaybeSendFuture, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use std::fmt;
use std::sync::Arc;

use crate::admitted::Admitted;
use crate::calls;
use crate::inner::Inner;
use crate::mcp_session::McpSession;
use crate::peer::{Peer, TransportKind, transport_of};
use crate::protocol_errors;
use crate::raw_arguments::RawArguments;
use crate::trace;

/// An [`McpServer`](crate::McpServer) as the SDK's [`ServerHandler`], for one MCP session: what
/// [`McpServer::handler`](crate::McpServer::handler) hands out, and what the server gives the
/// SDK for each connection and each streamable HTTP session. The session is a run of its own
/// (see [`Admitted`]) and has a catalog of its own (the tools it was listed); a clone is the
/// same session.
#[derive(Clone)]
pub struct McpHandler {
    inner: Arc<Inner>,
    /// How the requests reach it, unless they carry an HTTP head.
    transport: TransportKind,
    session: Arc<McpSession>,
}

impl fmt::Debug for McpHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpHandler")
            .field("server", &self.inner.info.server_info.name)
            .field("transport", &self.transport)
            .finish_non_exhaustive()
    }
}

impl McpHandler {
    /// A handler for a new MCP session.
    pub(crate) fn new(inner: Arc<Inner>, transport: TransportKind) -> Self {
        let session = Arc::new(McpSession::new(inner.catalog.clone()));
        McpHandler {
            inner,
            transport,
            session,
        }
    }

    /// Whom the hook admits as the client of this request, or the error refusing it. Over
    /// streamable HTTP the server's HTTP service asked the hook before the request reached the
    /// SDK, and left its answer in the request's head.
    async fn admitted(
        &self,
        context: &RequestContext<RoleServer>,
        method: &'static str,
        client: Option<Implementation>,
    ) -> Result<Admitted, ErrorData> {
        let http = context.extensions.get::<http::request::Parts>();
        if let Some(admitted) = http.and_then(|parts| parts.extensions.get::<Admitted>()) {
            return Ok(admitted.clone());
        }
        let mut peer = Peer::new(transport_of(http, self.transport), method);
        if let Some(parts) = http {
            peer = peer.with_http(parts);
        }
        peer = match client {
            Some(client) => peer.with_client(client),
            None => peer.with_request(context),
        };
        self.inner
            .hook
            .session(&peer)
            .await
            .map_err(|refused| protocol_errors::refused(&refused))
    }
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        self.inner.info.clone()
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.admitted(&context, "initialize", Some(request.client_info.clone()))
            .await?;
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        self.admitted(&context, "server/discover", None).await?;
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    /// The tools the session may call, in one page; the session is taken to have been shown
    /// them from then on.
    fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + MaybeSendFuture + '_ {
        let span = trace::span_of("tools/list", &context, self.transport, None);
        trace::answered(span, async move {
            let admitted = self.admitted(&context, "tools/list", None).await?;
            if let Some(cursor) = request.and_then(|request| request.cursor) {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown cursor {cursor:?}: this server lists every tool in one page and \
                         hands out no cursor; list again without one"
                    ),
                    None,
                ));
            }
            let (tools, places) = self.inner.catalog.listed_for(admitted.auth());
            self.session.show(places.into_iter());
            // Each client is listed what it may call: no cache shared between them.
            Ok(ListToolsResult::with_all_items(tools).with_cache_scope(CacheScope::Private))
        })
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let catalog = &self.inner.catalog;
        catalog
            .place(name)
            .map(|place| catalog.tools()[place].clone())
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + MaybeSendFuture + '_ {
        // The dispatcher's `execute_tool` span is a child of this one.
        let span = trace::span_of("tools/call", &context, self.transport, Some(&request.name));
        trace::answered(span, async move {
            let admitted = self.admitted(&context, "tools/call", None).await?;
            let session = self.session.session(admitted);
            let raw = RawArguments::of_request(&context.extensions);
            let call = calls::tool_call(&context.id, request, raw);
            // On the request's own task, which the SDK never aborts: a cancelled request has its
            // answer dropped by the SDK, and the call runs to its end (see `in_flight`).
            let dispatched = self
                .inner
                .in_flight
                .run(self.inner.dispatcher.dispatch(&session, call))
                .await
                .map_err(|_panic| protocol_errors::lost())?;
            match dispatched {
                Ok(report) => calls::answer(&report).map(CallToolResponse::from),
                Err(aborted) => Err(protocol_errors::run_aborted(&aborted)),
            }
        })
    }
}
