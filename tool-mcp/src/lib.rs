//! An MCP server for toolgate: a [`Dispatcher`](toolgate_core::Dispatcher)'s tools served over
//! stdio or streamable HTTP with `rmcp`, the official Rust SDK of the Model Context Protocol,
//! every call run through the dispatcher. Use it through the facade, `toolgate::mcp` (feature
//! `mcp`).
//!
//! - **A run per MCP session.** Each MCP session (a stdio connection, a streamable HTTP
//!   session, or a stateless request of protocol 2026-07-28) is a run of its own: its own
//!   counters, limits and abort. A new session is a new run, never born aborted; a write
//!   repeated in it is answered from its record (keys are scoped by tenant). The
//!   [`SessionHook`] can name the run instead ([`Admitted`]).
//! - **`tools/list`** lists the tools the session's caller may call (those whose permission it
//!   holds, and those that need none), each as toolgate's MCP catalog declares it
//!   ([`Mcp`](toolgate_core::provider::Mcp)): the canonical schema as `inputSchema`, and
//!   annotations from the side-effect class (a read `readOnlyHint: true`; a write or destructive
//!   tool `idempotentHint: true`, since a repeated call runs once). The server sends no list
//!   change notification (`listChanged: false`): a client whose permissions change lists again.
//! - **`tools/call`** runs [`Dispatcher::dispatch`](toolgate_core::Dispatcher::dispatch) in the
//!   session's run: validation, permissions, idempotency, approvals, deadlines and the result
//!   object all apply. The arguments are read from the text the client sent, so a key given
//!   twice is `invalid_arguments`, as in every format. The answer is the `CallToolResult` of
//!   [`Mcp::call_result`](toolgate_core::provider::Mcp::call_result): one text item holding the
//!   result object's JSON, that object as `structuredContent`, and `isError` when its status is
//!   flagged; invalid arguments are such a result, which the model reads. An unknown tool, and a
//!   tool the session was never listed and may not call, is the protocol error `-32602 Unknown
//!   tool: NAME`, and nothing runs; a call in an aborted run (a listed tool whose permission the
//!   caller has since lost aborts it) is the protocol error [`RUN_ABORTED`].
//! - **Identity**: the [`SessionHook`] admits each request as a caller, or refuses it: a refused
//!   client cannot initialize, list or call anything. [`StdioSession`] is the hook of a server
//!   on stdio (one caller for the process, from its configuration); over HTTP the hook reads
//!   each request's authorization ([`Peer::bearer_token`]).
//! - **HTTP as the transport spec asks** ([`McpHttpService`]): a refused credential is `401`
//!   with `WWW-Authenticate: Bearer` and makes no session; a foreign `Origin` is `403`; a
//!   session answers only the caller who opened it; malformed messages are `-32700` and
//!   `-32600`.
//! - **Cancellation** (`notifications/cancelled`) drops the call's answer (the SDK sends none),
//!   never the call: a write in flight runs to its end and is recorded, and the same call again
//!   answers its outcome. **Ping** is the SDK's.
//! - **Traces**: each `tools/call` and `tools/list` is answered inside a `tracing` span of the
//!   OpenTelemetry semantic conventions for MCP: kind server, named `tools/call get_order` (the
//!   `otel.name` field), with `mcp.method.name`, `jsonrpc.request.id`, `mcp.session.id` (a legacy
//!   HTTP session's), `mcp.protocol.version`, `network.transport` (`pipe` on stdio, `tcp` over
//!   HTTP), and for a call `gen_ai.tool.name` and `gen_ai.operation.name = "execute_tool"`; the
//!   dispatcher's `execute_tool` span of the call is its child. An answer that is a JSON-RPC
//!   error records its code as `error.type` and `rpc.response.status_code`, and an `ERROR` status
//!   with its message; a result flagged `isError` records `error.type = "tool_error"` and the
//!   result's `error.what`. With the feature **`otel`** (the facade's `mcp-otel`), when the
//!   subscriber has `tracing-opentelemetry`'s layer, a valid W3C `traceparent` in the request's
//!   `_meta` becomes the span's remote parent (with the `tracestate` there), and the span current
//!   when the request arrived is linked. Without the feature, without that layer, or when
//!   `traceparent` is not valid W3C trace context, the span records the `traceparent` and
//!   `tracestate` values as fields of those names, and its parent is the current span.
//!
//! ```no_run
//! use toolgate::mcp::{McpServer, StdioSession};
//! use toolgate::prelude::*;
//!
//! /// Look up an order by its id.
//! #[tool(permission = "orders:read")]
//! async fn get_order(order_id: String) -> Result<String, ToolError> {
//!     Ok(format!("{order_id}: paid"))
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let mut registry = Registry::new();
//!     registry.register::<get_order>()?;
//!     let dispatcher = Dispatcher::builder(registry).build();
//!     let auth = AuthContext::new("acme", "desk").with_permissions(["orders:read"]);
//!     McpServer::builder(dispatcher, StdioSession::new(auth))
//!         .name("shop")
//!         .try_build()?
//!         .serve_stdio()
//!         .await?;
//!     Ok(())
//! }
//! ```
//!
//! A desktop client starts a stdio server as a process of its own; its configuration names the
//! program and its arguments (the demo's `mcp_server` example, built with `cargo build
//! --release --example mcp_server`, keeps its operations in the SQLite file given):
//!
//! ```json
//! {"mcpServers": {"toolgate-shop": {
//!     "command": "/path/to/toolgate/target/release/examples/mcp_server",
//!     "args": ["--db", "/path/to/shop.db", "--tenant", "acme", "--user", "desk"]
//! }}}
//! ```
//!
//! Over HTTP, [`McpServer::serve_http`] runs the server on a listener until told to stop, and
//! [`McpServer::http_service`] hands its endpoint, a tower service, to an HTTP server of your
//! own.
//!
//! The SDK is re-exported as [`rmcp`], for its transports and types.

mod admitted;
mod build_error;
mod calls;
mod catalog;
mod handler;
mod hook;
mod http_service;
mod in_flight;
mod inner;
mod line_transport;
mod mcp_session;
mod origin;
mod peer;
mod protocol_errors;
mod raw_arguments;
mod server;
mod stdio_session;
mod streamable_http;
mod trace;
#[cfg(feature = "otel")]
mod trace_context;

pub use admitted::Admitted;
pub use build_error::BuildError;
pub use handler::McpHandler;
pub use hook::{Refused, SessionHook};
pub use http_service::{HttpResponse, McpHttpService};
pub use peer::{Peer, TransportKind};
pub use protocol_errors::{RUN_ABORTED, SESSION_REFUSED};
pub use server::{McpServer, McpServerBuilder, ServeError};
pub use stdio_session::StdioSession;

#[doc(no_inline)]
pub use rmcp;
