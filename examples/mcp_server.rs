//! The demo shop as an MCP server: its tools served to any MCP client, every call run through
//! toolgate's dispatcher on the SQLite store, against the fake payment provider.
//!
//! ```sh
//! cargo run --example mcp_server                                   # stdio
//! cargo run --example mcp_server -- --http 127.0.0.1:8080 \
//!     --token s3cret=acme:desk:orders:read,refund:create           # streamable HTTP
//! ```
//!
//! The server is the library's `toolgate_demo::mcp_server` (`src/mcp_server.rs`), whose docs
//! list every flag and show a desktop client's configuration; the tests run the same code as the
//! `mcp_server` binary.

fn main() -> std::process::ExitCode {
    toolgate_demo::mcp_server::main()
}
