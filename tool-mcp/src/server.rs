//! [`McpServer`]: a dispatcher and a session hook, built once, then served on any transport.

use std::fmt;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig, Tool};
use rmcp::service::{QuitReason, ServerInitializeError};
use rmcp::transport::IntoTransport;
use tokio::io::{AsyncRead, AsyncWrite};
use toolgate_core::Dispatcher;

use crate::build_error::BuildError;
use crate::catalog::Catalog;
use crate::handler::McpHandler;
use crate::hook::SessionHook;
use crate::in_flight::InFlight;
use crate::inner::Inner;
use crate::line_transport::LineTransport;
use crate::peer::TransportKind;

/// An MCP server on a [`Dispatcher`]: `tools/list` lists the tools of its registry the session's
/// caller may call, `tools/call` runs each call through it, and a [`SessionHook`] says who each
/// client is. Each MCP session is a run of its own (see [`Admitted`](crate::Admitted)).
///
/// Built with [`McpServer::builder`], then served on the process's stdio
/// ([`serve_stdio`](Self::serve_stdio)), on a byte stream ([`serve`](Self::serve)), on any
/// transport of the SDK ([`serve_transport`](Self::serve_transport)), or over streamable HTTP ([`serve_http`](Self::serve_http), or
/// [`http_service`](Self::http_service) to mount in an HTTP server of your own). A clone is the
/// same server: its tools, hook and calls in flight.
///
/// Each `tools/call` runs through [`Dispatcher::dispatch`] in the session's run, so
/// validation, permissions, idempotency, approvals, deadlines and the result object all apply
/// as for any other format; the call runs on its request's task, which the SDK never aborts, so a
/// client that cancels the request (`notifications/cancelled`) or goes away gets no answer (the
/// SDK drops it) and never stops the call: a write runs to its end and is recorded, and the same
/// call again answers its outcome. The serving methods return only once no call of the server is running, so a
/// program that exits after them never cuts a write in half.
///
/// Ping and cancellation are the SDK's. For programs that drive the SDK themselves,
/// [`handler`](Self::handler) is the server as the SDK's
/// [`ServerHandler`](rmcp::ServerHandler).
#[derive(Clone)]
pub struct McpServer {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("server", &self.inner.info.server_info.name)
            .field("tools", &self.inner.catalog.len())
            .field("calls_in_flight", &self.inner.in_flight.running())
            .finish_non_exhaustive()
    }
}

/// Configures an [`McpServer`]: its name, version and instructions, as clients show them.
pub struct McpServerBuilder {
    dispatcher: Dispatcher,
    hook: Box<dyn SessionHook>,
    name: String,
    version: String,
    title: Option<String>,
    instructions: Option<String>,
    additional_properties: bool,
}

impl fmt::Debug for McpServerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServerBuilder")
            .field("name", &self.name)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Why a server stopped serving with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The client did not get through `initialize`: the hook refused it (it was answered with
    /// [`SESSION_REFUSED`](crate::SESSION_REFUSED)), it sent something else first, or the
    /// transport closed.
    #[error("the MCP client did not initialize: {0}")]
    Initialize(#[source] Box<ServerInitializeError>),
    /// The task serving the client failed.
    #[error("the MCP service failed: {0}")]
    Task(#[source] tokio::task::JoinError),
}

impl McpServer {
    /// Starts configuring a server for `dispatcher`'s tools, its clients identified by `hook`
    /// (a [`StdioSession`](crate::StdioSession), a closure, or a hook of your own).
    ///
    /// ```
    /// use toolgate::mcp::{McpServer, StdioSession};
    /// use toolgate::prelude::*;
    ///
    /// /// Look up an order by its id.
    /// #[tool(permission = "orders:read")]
    /// async fn get_order(order_id: String) -> Result<String, ToolError> {
    ///     Ok(format!("{order_id}: paid"))
    /// }
    ///
    /// let mut registry = Registry::new();
    /// registry.register::<get_order>()?;
    /// let dispatcher = Dispatcher::builder(registry).build();
    /// let auth = AuthContext::new("acme", "desk").with_permissions(["orders:read"]);
    /// let server = McpServer::builder(dispatcher, StdioSession::new(auth))
    ///     .name("shop")
    ///     .version("1.0.0")
    ///     .instructions("Look orders up by their id, such as ORD-1001.")
    ///     .try_build()?;
    /// # let _ = server;
    /// // tokio: server.serve_stdio().await?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(dispatcher: Dispatcher, hook: impl SessionHook) -> McpServerBuilder {
        McpServerBuilder {
            dispatcher,
            hook: Box::new(hook),
            name: "toolgate".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            title: None,
            instructions: None,
            additional_properties: true,
        }
    }

    /// The dispatcher every call runs through.
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.inner.dispatcher
    }

    /// Every tool, as `tools/list` declares them; a session is listed those it may call.
    pub fn tools(&self) -> &[Tool] {
        self.inner.catalog.tools()
    }

    /// What `initialize` answers: the server's name and version, its capabilities (tools; the
    /// server sends no list change notification, so `listChanged` is `false`: a client whose
    /// permissions change lists again) and its instructions.
    pub fn info(&self) -> &ServerConfig {
        &self.inner.info
    }

    /// Serves the one client on the process's standard input and output, until it closes
    /// them, then waits until no call of the server is running. Stdout is the protocol's
    /// channel: log to stderr.
    ///
    /// The connection is one MCP session, so one run (see [`Admitted`](crate::Admitted)).
    /// Messages are read one a line, as MCP's stdio transport frames them; a line that is not
    /// JSON is ignored, JSON that is not a message the server reads is answered `-32600`, and
    /// a line over 16 MiB is dropped.
    ///
    /// `Err(ServeError::Initialize)` when the client did not initialize (the hook refused it,
    /// or stdin closed first).
    pub async fn serve_stdio(&self) -> Result<(), ServeError> {
        let (stdin, stdout) = rmcp::transport::stdio();
        self.serve_on(TransportKind::Stdio, LineTransport::new(stdin, stdout))
            .await
    }

    /// Serves one client on a byte stream (a socket, a pipe's two ends, `tokio::io::duplex` in
    /// tests), framed as on stdio: one MCP session. Returns once the client closes it and no
    /// call of the server is running.
    pub async fn serve<S>(&self, stream: S) -> Result<(), ServeError>
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (read, write) = tokio::io::split(stream);
        self.serve_on(TransportKind::Stream, LineTransport::new(read, write))
            .await
    }

    /// Serves one client on any transport of the SDK (a sink and stream of messages, a
    /// transport value): one MCP session. The messages reach the server as the transport made
    /// them, arguments as a tree: an argument key given twice reaches it as its last value, so
    /// prefer [`serve`](Self::serve) for a byte stream.
    pub async fn serve_transport<T, E, A>(&self, transport: T) -> Result<(), ServeError>
    where
        T: IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        self.serve_on(TransportKind::Stream, transport).await
    }

    /// The server as the SDK's [`ServerHandler`](rmcp::ServerHandler), for a program that
    /// serves it with the SDK itself (`rmcp::ServiceExt::serve`); its requests reach the hook as
    /// [`TransportKind::Stream`], or [`TransportKind::Http`] when they carry an HTTP head.
    ///
    /// Each handler is one MCP session: a run of its own and a catalog of its own (see
    /// [`Admitted`](crate::Admitted)). Take one for each connection; a handler given to the
    /// SDK's streamable HTTP service would make every session of it one.
    pub fn handler(&self) -> McpHandler {
        McpHandler::new(self.inner.clone(), TransportKind::Stream)
    }

    async fn serve_on<T, E, A>(&self, transport: TransportKind, io: T) -> Result<(), ServeError>
    where
        T: IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let handler = McpHandler::new(self.inner.clone(), transport);
        let running = rmcp::serve_server(handler, io)
            .await
            .map_err(|err| ServeError::Initialize(Box::new(err)))?;
        let quit = running.waiting().await;
        self.inner.in_flight.idle().await;
        // The audit records of the last reads, before the process may end.
        self.inner.dispatcher.flush_audit().await;
        match quit {
            Ok(QuitReason::JoinError(err)) | Err(err) => Err(ServeError::Task(err)),
            Ok(_) => Ok(()),
        }
    }
}

impl McpServerBuilder {
    /// The server's name, as clients show it (default `toolgate`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The server's version (default: this crate's).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// A title for people, shown by clients in place of the name.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Instructions for the model, sent with the server's info.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// The server.
    ///
    /// # Panics
    ///
    /// When a tool cannot be declared over MCP, with the message of the [`BuildError`] that
    /// [`try_build`](Self::try_build) returns.
    pub fn build(self) -> McpServer {
        match self.try_build() {
            Ok(server) => server,
            Err(err) => panic!("{err}"),
        }
    }

    /// Serves each tool's `inputSchema` without its `additionalProperties` keywords, for MCP
    /// clients that cannot read them: google-genai's MCP bridge fails on every schema holding
    /// `additionalProperties: false` (`'bool' object has no attribute 'items'`), which every
    /// toolgate schema does. Off by default.
    ///
    /// Validation does not change: the dispatcher checks each call against the tool's full
    /// schema, so an argument the tool does not take is still refused (`invalid_arguments`,
    /// naming it), though the schema the client shows no longer says so.
    ///
    /// ```
    /// use toolgate::mcp::{McpServer, StdioSession};
    /// use toolgate::prelude::*;
    ///
    /// /// Look up an order by its id.
    /// #[tool]
    /// async fn get_order(order_id: String) -> Result<String, ToolError> {
    ///     Ok(format!("{order_id}: paid"))
    /// }
    ///
    /// let mut registry = Registry::new();
    /// registry.register::<get_order>().unwrap();
    /// let dispatcher = Dispatcher::builder(registry).build();
    /// let server = McpServer::builder(dispatcher, StdioSession::new(AuthContext::new("acme", "agent")))
    ///     .schemas_without_additional_properties()
    ///     .build();
    /// assert!(server.tools()[0].input_schema.get("additionalProperties").is_none());
    /// ```
    pub fn schemas_without_additional_properties(mut self) -> Self {
        self.additional_properties = false;
        self
    }

    /// The server, or the first tool (in registration order) that MCP cannot declare.
    pub fn try_build(self) -> Result<McpServer, BuildError> {
        let catalog = Catalog::of(self.dispatcher.registry(), self.additional_properties)?;
        let mut capabilities = ServerCapabilities::builder().enable_tools().build();
        if let Some(tools) = capabilities.tools.as_mut() {
            // No list change is announced: the registry cannot change once the dispatcher is
            // built, and a session whose caller's permissions change lists again.
            tools.list_changed = Some(false);
        }
        let mut implementation = Implementation::new(self.name, self.version);
        implementation.title = self.title;
        let mut info = ServerConfig::new(capabilities).with_server_info(implementation);
        info.instructions = self.instructions;
        Ok(McpServer {
            inner: Arc::new(Inner {
                dispatcher: self.dispatcher,
                hook: self.hook,
                catalog: Arc::new(catalog),
                info,
                in_flight: InFlight::default(),
            }),
        })
    }
}
