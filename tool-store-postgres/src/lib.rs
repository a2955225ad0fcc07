//! The PostgreSQL [`OperationStore`](tool_core::store::OperationStore) of toolgate: one
//! database shared by many processes and machines, each of them running the dispatcher.
//!
//! Every write operation an agent asks for is recorded before it runs (DESIGN §4): a worker
//! claims the operation's key with one atomic insert, and records the outcome carrying the
//! attempt it claimed. PostgreSQL's unique key on `(tenant, key)` decides which of two processes
//! claiming the same key at once acquires it; the other sees the operation in progress, and a
//! worker whose lease was taken over can no longer write.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use tool_core::store::{Claim, ClaimRequest, OperationStore, Owner};
//! use tool_store_postgres::PostgresStore;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tool_core::store::StoreError> {
//! // Connects and applies the store's migrations (safe while other processes do the same).
//! let store = PostgresStore::connect("postgres://toolgate:secret@127.0.0.1:5432/toolgate").await?;
//!
//! // What the dispatcher does around a write:
//! let now_ms = 1_700_000_000_000;
//! let request = ClaimRequest {
//!     tenant: "acme",
//!     key: "op-7f3a",
//!     tool: "issue_refund",
//!     request_hash: "sha256:9c1e",
//!     arguments: r#"{"amount":500,"order_id":"ORD-1001"}"#,
//!     now_ms,
//!     lease: Duration::from_secs(30),
//!     takeover: false,
//! };
//! if let Claim::Acquired { attempt } = store.claim(request).await? {
//!     let owner = Owner { tenant: "acme".into(), key: "op-7f3a".into(), attempt };
//!     // ... call the provider, then:
//!     store.succeed(&owner, r#"{"refund_id":"re_1"}"#, now_ms + 420).await?;
//! }
//!
//! // The dispatcher holds it as a trait object.
//! let store: Arc<dyn OperationStore> = Arc::new(store);
//! # let _ = store;
//! # Ok(()) }
//! ```
//!
//! The schema is the table `toolgate_operations`, created by the embedded migrations
//! ([`PostgresStore::migrate`]). Connections are plain TCP or a Unix socket: this crate is built
//! without TLS.
//!
//! # When the database is down
//!
//! A statement waits at most [`DEFAULT_ACQUIRE_TIMEOUT`] (3 s; [`PostgresOptions::acquire_timeout`]
//! sets another) for a connection. A server that cannot be reached (no connection in that time,
//! a connection refused, reset or lost, SQLSTATE class `08`, `57P01`–`57P03`, `57P05`) is
//! answered with [`StoreError::Unreachable`](tool_core::store::StoreError::Unreachable), which
//! keeps sqlx's error as its source: the dispatcher treats it as a transient fault (it retries,
//! then tells the model the store could not be reached). Any other failure is
//! [`StoreError::Backend`](tool_core::store::StoreError::Backend). The pool reconnects by itself
//! once the server is back.

mod connect;
mod error;
mod migrate;
mod row;
mod store;

#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;

pub use connect::{DEFAULT_ACQUIRE_TIMEOUT, PostgresOptions};
pub use store::PostgresStore;

/// The sqlx this crate is built with, to configure a pool for [`PostgresStore::from_pool`]
/// without a second copy of sqlx.
pub use sqlx;
