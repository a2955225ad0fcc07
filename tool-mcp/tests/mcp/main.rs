//! The MCP server's integration tests, one binary: a module an area, each driving the server
//! with rmcp's client (over an in-memory stream, or HTTP on a loopback port); `common` holds the
//! shop, the server and the client they share.
//!
//! `tests/mcp_trace.rs` (feature `otel`) is a binary of its own: it installs a tracing
//! subscriber for its thread, and tracing caches process-wide whether a callsite is enabled, so a
//! test thread without a subscriber that reaches a callsite first can leave it disabled for the
//! tracing test too.

mod common;
mod mcp_calls;
mod mcp_cancel;
mod mcp_http;
mod mcp_sessions;
