//! An MCP server for toolgate: a [`Dispatcher`](toolgate_core::Dispatcher)'s tools served over
//! stdio or streamable HTTP with `rmcp`, the official Rust SDK of the Model Context Protocol,
//! every call run through the dispatcher. Use it through the facade, `toolgate::mcp` (feature
//! `mcp`).
//!
//! - **`tools/list`** lists the registry, each tool as toolgate's MCP catalog declares it
//!   ([`Mcp`](toolgate_core::provider::Mcp)): the canonical schema as `inputSchema`, and
//!   annotations from the side-effect class (a read `readOnlyHint: true`; a write or destructive
//!   tool `idempotentHint: true`, since a repeated call runs once). Every tool is listed,
//!   whatever the session may call: permissions are checked per call, as for every other
//!   format. The registry cannot change once the dispatcher is built, so the server says
//!   `listChanged: false` and never announces a change.
//! - **`tools/call`** runs [`Dispatcher::dispatch`](toolgate_core::Dispatcher::dispatch) in the
//!   session the [`SessionHook`] gives the client: validation, permissions, idempotency,
//!   approvals, deadlines and the result object all apply. The answer is the `CallToolResult` of
//!   [`Mcp::call_result`](toolgate_core::provider::Mcp::call_result): one text item holding the
//!   result object's JSON, that object as `structuredContent`, and `isError` when its status is
//!   flagged; invalid arguments are such a result, which the model reads. An unknown tool is
//!   the protocol error `-32602 Unknown tool: NAME`; a call in an aborted run (a missing
//!   permission aborts it) is the protocol error [`RUN_ABORTED`].
//! - **Identity**: the [`SessionHook`] maps each request to a toolgate
//!   [`Session`](toolgate_core::Session), or refuses it with [`SESSION_REFUSED`]: a refused
//!   client cannot initialize, list or call anything. [`StdioSession`] is the hook of a server
//!   on stdio (one session for the process, from its configuration); over HTTP the hook reads
//!   each request's authorization ([`Peer::bearer_token`]). The hook decides the run id; see
//!   [`SessionHook`].
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
//! [`McpServer::http_service`] hands the SDK's tower service to an HTTP server of your own.
//!
//! The SDK is re-exported as [`rmcp`], for its transports and types.

mod calls;
mod catalog;
mod handler;
mod hook;
mod in_flight;
mod peer;
mod protocol_errors;
mod server;
mod stdio_session;
mod streamable_http;
mod trace;
#[cfg(feature = "otel")]
mod trace_context;

pub use handler::McpHandler;
pub use hook::{Refused, SessionHook};
pub use peer::{Peer, TransportKind};
pub use protocol_errors::{RUN_ABORTED, SESSION_REFUSED};
pub use server::{BuildError, McpServer, McpServerBuilder, ServeError};
pub use stdio_session::StdioSession;

#[doc(no_inline)]
pub use rmcp;
