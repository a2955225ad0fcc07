//! The PostgreSQL [`OperationStore`](toolgate_core::store::OperationStore) of toolgate: one
//! database shared by many processes and machines, each of them running the dispatcher.
//!
//! Every write operation an agent asks for is recorded before it runs: a worker
//! claims the operation's key with one atomic insert, and records the outcome carrying the
//! attempt it claimed. PostgreSQL's unique key on `(tenant, key)` decides which of two processes
//! claiming the same key at once acquires it; the other sees the operation in progress, and a
//! worker whose lease was taken over can no longer write.
//!
//! Through the facade, enable the feature `postgres` of `toolgate` and name it
//! `toolgate::store::PostgresStore`. Each process connects once and hands the store to its
//! dispatcher; the write tools' calls of every process are then recorded in the one database:
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use toolgate_store_postgres::PostgresStore;
//! use toolgate::prelude::*;
//!
//! /// Refund an order. The refund is final.
//! #[tool(side_effect = "write", key = [order_id])]
//! async fn issue_refund(ctx: &Ctx, order_id: String, amount: u32) -> Result<String, ToolError> {
//!     // Call the payment provider here, passing it `ctx.idempotency_key()`.
//!     Ok(format!("refunded {amount} on {order_id}"))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Connects and applies the store's migrations (safe while other processes do the same).
//! let store = PostgresStore::connect("postgres://toolgate:secret@127.0.0.1:5432/toolgate").await?;
//! let mut registry = Registry::new();
//! registry.register::<issue_refund>()?;
//! let dispatcher = Dispatcher::builder(registry)
//!     .store(Arc::new(store.clone()))
//!     .build();
//!
//! let session = Session::new(AuthContext::new("acme", "support-agent"), "run-1");
//! let args = serde_json::json!({"order_id": "ORD-1001", "amount": 500});
//! let report = dispatcher.dispatch(&session, ToolCall::new("c1", "issue_refund", args)).await?;
//! println!("{}", report.result.to_json_string());
//! store.close().await;
//! # Ok(()) }
//! ```
//!
//! It keeps the agents' runs too, so every process sees the same counters and a restarted one
//! goes on with a run's limits where they stood: each run's steps, tool calls and abort in the
//! table `toolgate_runs`, its attempts by tool in `toolgate_run_attempts` and its failed calls in
//! `toolgate_run_failures`. Each change to a run is one transaction that holds the lock of the
//! run's row, so two processes never grant past a run's limits.
//!
//! Approvals wait in `toolgate_approvals`, durably: the process that asked, the approver's
//! process and the process that runs an approved operation may all be different ones, and a
//! restart loses none. Every call, decision and outbox delivery attempt is appended to the
//! audit trail, `toolgate_audit`.
//!
//! An outbox tool (`delivery = "outbox"`) runs its body inside a transaction the store opens
//! ([`OutboxStore::begin`](toolgate_core::store::OutboxStore::begin)); the tool writes its
//! own rows with the connection [`connection`] lends it, and its operation record, those rows
//! and its event (a row of `toolgate_outbox`) commit together or not at all. Workers on any
//! number of machines lease the events with `FOR UPDATE SKIP LOCKED` and settle each with its
//! operation in one transaction. The steps of a multi-step tool are journaled in
//! `toolgate_steps`, beside their operation.
//!
//! The schema is those tables and `toolgate_operations`, created by the embedded migrations
//! ([`PostgresStore::migrate`]), which upgrade a database of an earlier release in place,
//! keeping its records. Connections are plain TCP or a Unix socket: this crate is built
//! without TLS.
//!
//! # Connections
//!
//! The store keeps connections of its own, opened with the settings of the sqlx pool it was made
//! with ([`PostgresOptions`], or [`PostgresStore::from_pool`]), and runs every statement on one
//! of them. It checks none when it lends it to a statement or takes it back, where sqlx's pool
//! pings it both times: a statement costs one round trip, not three. A check would tell nothing
//! a failed statement does not: the statement fails as [`StoreError::Unreachable`](toolgate_core::store::StoreError::Unreachable), which the
//! dispatcher tries again. So a connection is lent again only when its last lease ended with the
//! server's answer; one whose statement was cut short (a store call cancelled at its deadline)
//! or that failed itself (reset, lost, the session ended) is closed, and after a connection
//! that failed every idle one is closed too, so that after a server restart the next statement
//! opens a fresh connection rather than fail once for each dead one. A connection idle longer
//! than the pool's `idle_timeout` (5 minutes when it has none) or older than its `max_lifetime`
//! is closed rather than lent blind.
//!
//! `max_connections` ([`PostgresOptions::max_connections`]) bounds the connections the store
//! holds open, and so the statements and outbox transactions that run at once;
//! `acquire_timeout` ([`PostgresOptions::acquire_timeout`]) bounds how long a statement waits
//! for one, whether it waits for another to end or for a new one to open. The pool's own
//! connections, if the application uses it, are apart from these.
//!
//! # When the database is down
//!
//! A statement waits at most [`DEFAULT_ACQUIRE_TIMEOUT`] (3 s; [`PostgresOptions::acquire_timeout`]
//! sets another) for a connection. A server that cannot be reached (no connection in that time,
//! a connection refused, reset or lost, SQLSTATE class `08`, `57P01`–`57P03`, `57P05`) is
//! answered with [`StoreError::Unreachable`](toolgate_core::store::StoreError::Unreachable), which
//! keeps sqlx's error as its source: the dispatcher treats it as a transient fault (it retries,
//! then tells the model the store could not be reached). Any other failure is
//! [`StoreError::Backend`](toolgate_core::store::StoreError::Backend). The store opens new
//! connections by itself once the server is back.

mod approval;
mod audit;
mod claim;
mod connect;
mod connections;
mod error;
mod grant;
mod issuer_keys;
mod migrate;
mod outbox;
mod resolve;
mod row;
mod run;
mod statement;
mod steps;
mod store;
mod take;
mod transaction;
mod turn_claim;

pub use connect::{DEFAULT_ACQUIRE_TIMEOUT, PostgresOptions};
pub use store::PostgresStore;
pub use transaction::connection;

/// The sqlx this crate is built with, to configure a pool for [`PostgresStore::from_pool`]
/// without a second copy of sqlx.
pub use sqlx;
