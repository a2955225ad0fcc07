//! The refund desk demo of toolgate: a shop whose tools an LLM agent calls, a payment provider
//! that misbehaves on cue, and the programs that put them together. Not published: it is the code
//! the examples, their binaries and the tests share.
//!
//! | module | what it holds |
//! |---|---|
//! | [`shop`] | the shop's four orders and its tools: `get_order`, `issue_refund` (direct or through the outbox), `update_crm_and_notify` |
//! | [`fake_provider`] | the fake payment provider: a durable ledger, idempotency keys, scripted faults |
//! | [`payments`] | that provider over loopback HTTP: its server and the client the tools call it with |
//! | [`refund_desk`] | the refund desk: plays a story of model turns and faults against the shop |
//! | [`mcp_server`] | the shop as an MCP server, on stdio or streamable HTTP |
//! | [`fake_payments`] | the fake payment provider as a process of its own |
//! | [`wire_samples`] | the sample tools and results the provider wire fixtures are recorded from |
//!
//! The examples, run from the repository's root:
//!
//! ```sh
//! cargo run --example refund_desk                       # the seed story, told on stderr
//! cargo run --example refund_desk -- --script examples/scenarios/bad-arguments.jsonl
//! cargo run --example fake_payments -- --port 7070      # the provider as a process of its own
//! cargo run --example catalog -- --format openai-strict # the tools as the model sees them
//! cargo run --example mcp_server                        # the shop as an MCP server, on stdio
//! cargo run --example wire_samples                      # the wire samples in every format
//! ```
//!
//! The refund desk, the MCP server and the fake provider are also binaries of this package
//! (`src/bin/`), one line each, so that its tests run them as processes through
//! `env!("CARGO_BIN_EXE_…")`. The script format of the refund desk is in
//! `examples/scenarios/README.md`.

pub mod fake_payments;
pub mod fake_provider;
pub mod mcp_server;
pub mod payments;
pub mod refund_desk;
pub mod shop;
pub mod wire_samples;
