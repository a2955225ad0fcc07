//! The MCP server's integration tests, one binary: a module an area, each driving the server
//! with rmcp's client (over an in-memory stream, or HTTP on a loopback port); `common` holds the
//! shop, the server and the client they share.

mod common;
mod mcp_calls;
mod mcp_cancel;
mod mcp_http;
mod mcp_sessions;
// Traces continued through OpenTelemetry: the feature `otel`.
#[cfg(feature = "otel")]
mod mcp_trace;
