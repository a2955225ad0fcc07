//! Streamable HTTP: the SDK's tower service for the server, and a lean hyper server that runs it
//! on a listener until told to stop.

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

use crate::handler::McpHandler;
use crate::peer::TransportKind;
use crate::server::McpServer;

/// How long the server waits before accepting again after the listener failed for want of
/// resources (no file descriptor left): the failure would repeat at once.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

impl McpServer {
    /// The server as the SDK's streamable HTTP service (a tower `Service` of
    /// `http::Request`s), with the SDK's default configuration: sessions for clients of protocol
    /// versions before 2026-07-28, stateless requests from that version on, and only loopback
    /// `Host` headers accepted (against DNS rebinding; a public deployment lists its own hosts
    /// with [`http_service_with`](Self::http_service_with)). Mount it in an HTTP server of your
    /// own, or let [`serve_http`](Self::serve_http) run it.
    ///
    /// Each request reaches the [`SessionHook`](crate::SessionHook) with its own head
    /// ([`Peer::http`](crate::Peer::http)), authorization included.
    pub fn http_service(&self) -> StreamableHttpService<McpHandler, LocalSessionManager> {
        self.http_service_with(StreamableHttpServerConfig::default())
    }

    /// [`http_service`](Self::http_service) with a configuration of your own (allowed hosts
    /// and origins, keep-alive, legacy sessions, JSON responses, the cancellation token that
    /// ends every session and stream).
    pub fn http_service_with(
        &self,
        config: StreamableHttpServerConfig,
    ) -> StreamableHttpService<McpHandler, LocalSessionManager> {
        let handler = McpHandler::new(self.inner.clone(), TransportKind::Http);
        StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        )
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
        let ended = service.config.cancellation_token.clone();
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
        ended.cancel();
        graceful.shutdown().await;
        self.inner.in_flight.idle().await;
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
