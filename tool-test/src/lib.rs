//! Test support for toolgate, for its own tests and for those of programs and stores built on
//! it. Add it to `[dev-dependencies]` only: nothing here belongs in a program.
//!
//! - [`conformance`]: the rules every operation store must keep, to run against a store of
//!   your own ([`conformance_tests!`] writes one test a rule);
//! - [`MemoryStore`]: an operation store in memory, and [`ManualClock`]: a clock moved by hand,
//!   so a test decides when a lease expires;
//! - [`RecordingFailpoints`]: records each step a write reaches (claimed, executed, recorded)
//!   and can stop there, to play a crash at that point;
//! - [`ControlledStore`]: a store wrapped so that a test can make its requests fail, or the
//!   whole store go down, and count what was asked of it;
//! - `McpHttpClient` (feature `mcp-http-client`): the HTTP side of the MCP SDK's streamable HTTP
//!   client, over plain HTTP/1.1, for tests that drive a `toolgate::mcp` server over loopback;
//! - `chaos` (feature `chaos`): faults for a tool's own provider, planned per route and per
//!   request count (a `503`, a `429`, an answer dropped or a connection reset after the
//!   provider applied the request, a delay), played by a reverse proxy in front of an HTTP
//!   provider or by a hook around any other, with a record of every request and its
//!   idempotency key; and stories (turns, faults, restarts, a second process, reconcile passes,
//!   approvals) played on the application's own dispatcher and store, checked against what
//!   its provider applied; and storms of stories drawn from the tools' schemas, the first
//!   failure shrunk to the shortest story that fails the same way, with a command to replay it.
//!
//! Depending on this crate turns on the `test-util` feature of `toolgate-core`, which exports the
//! same [`MemoryStore`] and [`ManualClock`] and the failpoint hooks of the dispatcher.
//!
//! ```
//! use std::sync::Arc;
//!
//! use toolgate_core::store::prelude::*;
//! use toolgate_core::store::{Claim, ClaimRequest};
//! use toolgate_test::{ControlledStore, MemoryStore, Request};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let store = ControlledStore::new(Arc::new(MemoryStore::new()));
//! let claim = ClaimRequest {
//!     tenant: "acme",
//!     key: "refund-ORD-1",
//!     tool: "issue_refund",
//!     request_hash: "h1",
//!     unkeyed: None,
//!     arguments: "{}",
//!     now_ms: 1_700_000_000_000,
//!     lease: std::time::Duration::from_secs(30),
//!     takeover: false,
//!     approval: None,
//! };
//! store.set_down(true);
//! assert!(store.claim(claim).await.unwrap_err().is_unreachable());
//! store.set_down(false);
//! assert_eq!(store.claim(claim).await.unwrap(), Claim::Acquired { attempt: 1, approved: None });
//! assert_eq!(store.asked(Request::Claim), 2);
//! # }
//! ```

#[cfg(feature = "chaos")]
pub mod chaos;
pub mod conformance;
mod controlled;
mod failpoints;
#[cfg(feature = "mcp-http-client")]
mod mcp_http_client;
mod operator;
mod timed_turn;

pub use controlled::{ControlledStore, Fault, Request, Tally};
pub use failpoints::RecordingFailpoints;
#[cfg(feature = "mcp-http-client")]
pub use mcp_http_client::{BearerToken, McpHttpClient, McpHttpError};
pub use operator::{TEST_ISSUER, operator};
pub use timed_turn::timed_turn;
#[doc(inline)]
pub use toolgate_core::dispatch::ManualClock;
#[doc(inline)]
pub use toolgate_core::store::MemoryStore;

/// What the code written by [`conformance_tests!`] refers to. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use toolgate_core::store::OperationStore;
}
