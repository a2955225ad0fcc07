//! The demo's tests, one binary: the refund desk, the fake payment provider and the MCP server
//! run as processes, as a user runs them, on SQLite and on PostgreSQL.
//!
//! One module an area, and `support`, which starts the processes: this package's binaries, which
//! cargo builds before this test, each reached with `env!("CARGO_BIN_EXE_…")`.

mod desk_crash;
mod desk_on_the_kit;
mod desk_operator;
mod desk_outbox;
mod desk_postgres;
mod desk_scripts;
mod desk_steps;
mod mcp_client;
mod mcp_http;
mod mcp_stdio;
mod support;
