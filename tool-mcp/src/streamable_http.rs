//! Streamable HTTP: the server's HTTP endpoint, made on the SDK's transport, and a lean hyper
//! server that runs it on a listener until told to stop.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use crate::build_error::BuildError;
use crate::handler::McpHandler;
use crate::http_service::McpHttpService;
use crate::origin::{LOOPBACK_ORIGINS, Origins};
use crate::peer::TransportKind;
use crate::server::McpServer;

/// How long the server waits before accepting again after the listener failed for want of
/// resources (no file descriptor left): the failure would repeat at once.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

impl McpServer {
    /// The server's streamable HTTP endpoint ([`McpHttpService`], a tower `Service` of
    /// `http::Request`s), with the SDK's default configuration: sessions for clients of
    /// protocol versions before 2026-07-28, stateless requests from that version on, only
    /// loopback `Host` headers accepted (against DNS rebinding; a public deployment lists its
    /// own hosts with [`http_service_with`](Self::http_service_with)), and only loopback
    /// `Origin`s. Mount it in an HTTP server of your own, or let
    /// [`serve_http`](Self::serve_http) run it.
    ///
    /// Each request reaches the [`SessionHook`](crate::SessionHook) once, with its own head
    /// ([`Peer::http`](crate::Peer::http)), authorization included; see [`McpHttpService`] for
    /// what is checked before a request reaches the protocol.
    pub fn http_service(&self) -> McpHttpService {
        self.http_service_with(StreamableHttpServerConfig::default())
            .expect("the default configuration's origins are valid")
    }

    /// [`http_service`](Self::http_service) with a configuration of your own (allowed hosts,
    /// keep-alive, legacy sessions, JSON responses, the largest request body, the cancellation
    /// token that ends every session and stream).
    ///
    /// Its `allowed_origins` are the `Origin`s a browser page may call from, each
    /// `SCHEME://HOST` (the scheme's default port only), `SCHEME://HOST:PORT`,
    /// `SCHEME://HOST:*` (any port), `null`, or `*` (any page of any origin: no check). Empty,
    /// the default, allows loopback pages only (`http` and `https` on `localhost`, `127.0.0.1`
    /// and `[::1]`, any port). A request with another `Origin` gets `403 Forbidden`.
    ///
    /// ```
    /// use toolgate::mcp::rmcp::transport::StreamableHttpServerConfig;
    /// # fn server() -> toolgate::mcp::McpServer {
    /// #     let dispatcher = toolgate::Dispatcher::builder(toolgate::Registry::new()).build();
    /// #     toolgate::mcp::McpServer::builder(dispatcher, toolgate::mcp::StdioSession::new(toolgate::AuthContext::new("a", "b"))).build()
    /// # }
    /// let config = StreamableHttpServerConfig::default()
    ///     .with_allowed_hosts(["mcp.example.com"])
    ///     .with_allowed_origins(["https://app.example.com"]);
    /// let service = server().http_service_with(config)?;
    /// # let _ = service;
    /// # Ok::<(), toolgate::mcp::BuildError>(())
    /// ```
    pub fn http_service_with(
        &self,
        config: StreamableHttpServerConfig,
    ) -> Result<McpHttpService, BuildError> {
        let origins = if config.allowed_origins.is_empty() {
            Origins::new(LOOPBACK_ORIGINS)
        } else {
            Origins::new(&config.allowed_origins)
        }
        .map_err(|reason| BuildError::AllowedOrigin { reason })?;
        // The service checks the origins itself, before the credential.
        let config = config.disable_allowed_origins();
        let handler = self.inner.clone();
        let sessions = Arc::new(LocalSessionManager::default());
        let sdk = StreamableHttpService::new(
            move || Ok(McpHandler::new(handler.clone(), TransportKind::Http)),
            sessions.clone(),
            config,
        );
        Ok(McpHttpService::new(
            self.inner.clone(),
            sdk,
            sessions,
            origins,
        ))
    }

    /// Serves streamable HTTP/1.1 on `listener` (every path), with the configuration of
    /// [`http_service`](Self::http_service), until `shutdown` completes. Then it accepts no
    /// more connections and ends every MCP session and event stream (a call still running gets
    /// no answer, but runs to its end and is recorded: the same call again answers its
    /// outcome), waits for the open connections to close, and returns once no call of the
    /// server is running.
    ///
    /// ```no_run
    /// # async fn run(server: toolgate::mcp::McpServer) -> std::io::Result<()> {
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
    /// eprintln!("listening on http://{}", listener.local_addr()?);
    /// // Elsewhere, `stop.send(())` (or dropping `stop`) shuts the server down.
    /// server.serve_http(listener, async { stopped.await.unwrap_or(()) }).await;
    /// # drop(stop);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn serve_http(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let service = self.http_service();
        let graceful = GracefulShutdown::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::warn!(error = %err, "the MCP server could not accept a connection");
                    if !is_per_connection(&err) {
                        tokio::select! {
                            () = &mut shutdown => break,
                            () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                        }
                    }
                    continue;
                }
            };
            let service = service.clone();
            let requests = service_fn(move |request| {
                let service = service.clone();
                async move { Ok::<_, Infallible>(service.handle(request).await) }
            });
            let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), requests);
            let connection = graceful.watch(connection);
            tokio::spawn(async move {
                if let Err(err) = connection.await {
                    tracing::debug!(error = %err, "an MCP connection ended with an error");
                }
            });
        }
        service.end_sessions();
        graceful.shutdown().await;
        self.inner.in_flight.idle().await;
        // The audit records of the last reads, before the process may end.
        self.inner.dispatcher.flush_audit().await;
    }
}

/// Whether an accept error concerns that one connection (the next accept may well succeed),
/// rather than the listener or the process.
fn is_per_connection(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}
