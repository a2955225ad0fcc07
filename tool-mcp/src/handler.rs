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
use toolgate_core::Session;

use std::fmt;
use std::sync::Arc;

use crate::calls;
use crate::peer::{Peer, TransportKind};
use crate::protocol_errors;
use crate::server::Inner;
use crate::trace;

/// An [`McpServer`](crate::McpServer) as the SDK's [`ServerHandler`]: what
/// [`McpServer::handler`](crate::McpServer::handler) and
/// [`McpServer::http_service`](crate::McpServer::http_service) hand to the SDK. A clone is the
/// same server.
#[derive(Clone)]
pub struct McpHandler {
    inner: Arc<Inner>,
    /// How the requests reach it, unless they carry an HTTP head.
    transport: TransportKind,
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
    pub(crate) fn new(inner: Arc<Inner>, transport: TransportKind) -> Self {
        McpHandler { inner, transport }
    }

    /// The session the hook gives the client of this request, or the error refusing it.
    async fn session_of(
        &self,
        context: &RequestContext<RoleServer>,
        method: &'static str,
        client: Option<Implementation>,
    ) -> Result<Session, ErrorData> {
        let http = context.extensions.get::<http::request::Parts>();
        let transport = match http {
            Some(_) => TransportKind::Http,
            None => self.transport,
        };
        let mut peer = Peer::new(transport, method);
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
        self.session_of(&context, "initialize", Some(request.client_info.clone()))
            .await?;
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        self.session_of(&context, "server/discover", None).await?;
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    /// Every tool of the registry, in one page, whatever the session's permissions: a call
    /// the session may not make is refused when it is made, as for every other format.
    fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + MaybeSendFuture + '_ {
        let span = trace::span_of("tools/list", &context, self.transport, None);
        trace::answered(span, async move {
            self.session_of(&context, "tools/list", None).await?;
            if let Some(cursor) = request.and_then(|request| request.cursor) {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown cursor {cursor:?}: this server lists every tool in one page and \
                         hands out no cursor; list again without one"
                    ),
                    None,
                ));
            }
            // Only clients the hook accepts may see the list: no cache shared between them.
            Ok(ListToolsResult::with_all_items(self.inner.tools.clone())
                .with_cache_scope(CacheScope::Private))
        })
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner
            .tools
            .iter()
            .find(|tool| tool.name == name)
            .cloned()
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + MaybeSendFuture + '_ {
        // The dispatcher's `execute_tool` span is a child of this one.
        let span = trace::span_of("tools/call", &context, self.transport, Some(&request.name));
        trace::answered(span, async move {
            let session = self.session_of(&context, "tools/call", None).await?;
            let call = calls::tool_call(&context.id, request);
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
