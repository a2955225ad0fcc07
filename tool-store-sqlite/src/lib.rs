//! The embedded operation store of toolgate: every write operation's record in one durable
//! SQLite file, for one process.
//!
//! [`SqliteStore`] implements [`OperationStore`](toolgate_core::store::OperationStore): a claim is
//! one atomic insert-or-inspect in an immediate transaction, every later write is one `UPDATE`
//! that carries the attempt it claimed, and a transition is on disk before the call that made it
//! returns (see [Durability](#durability)). It passes the same conformance suite as every other
//! store.
//!
//! It keeps the agents' runs too, so a restarted process goes on with their limits where they
//! stood: each run's steps, tool calls and abort in the table `runs`, its attempts by tool in
//! `run_attempts` and its failed calls in `run_failures`, each change one immediate transaction.
//!
//! Approvals and the audit trail are kept the same way. A call over its tool's approval
//! threshold stores its operation `awaiting_approval` and its approval in the table
//! `approvals` (the requester and every decision as JSON text), in the claim's transaction; a
//! decision, an expiry and the claim that runs an approved operation each read the approval and
//! change it and its operation in one immediate transaction, so an approved operation is
//! claimed to run once. The table `audit` holds one row a call, decision or outbox delivery
//! attempt, numbered in the order appended; retention never deletes a row whose operation is
//! still stored.
//!
//! The transactional outbox and the step journal live in the same file. An outbox tool's body
//! runs inside the immediate transaction of its claim
//! ([`begin`](toolgate_core::store::OutboxStore::begin)): it writes its own rows with
//! [`connection`], and the commit stores the operation (`queued`) and its one event in the table `outbox`
//! with them, or the rollback leaves none of the three. The transaction holds the store's one
//! writer while the body runs, so every other write of the process (a claim of the same key
//! too) waits for it, and one that waits longer than 30 s fails as
//! [`StoreError::Unreachable`](toolgate_core::store::StoreError::Unreachable): keep outbox
//! bodies to their database work. Workers lease events in an immediate
//! transaction each, so two never lease the same one (within this one process). The table
//! `steps` holds each operation's step journal; a takeover under other arguments deletes it.
//!
//! Through the facade, enable the feature `sqlite` of `toolgate` and name it
//! `toolgate::store::SqliteStore`. Open the file once and hand the store to the dispatcher;
//! every write tool's calls are then recorded in it:
//!
//! ```
//! use std::sync::Arc;
//!
//! use toolgate_store_sqlite::SqliteStore;
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
//! # let dir = tempfile::tempdir()?;
//! // Creates the file, and its schema, on first use.
//! let store = SqliteStore::open(dir.path().join("operations.db")).await?;
//! let mut registry = Registry::new();
//! registry.register::<issue_refund>()?;
//! let dispatcher = Dispatcher::builder(registry)
//!     .store(Arc::new(store.clone()))
//!     .build();
//!
//! let session = Session::new(AuthContext::new("acme", "support-agent"), "run-1");
//! let args = serde_json::json!({"order_id": "ORD-1001", "amount": 500});
//! let report = dispatcher.dispatch(&session, ToolCall::new("c1", "issue_refund", args.clone())).await?;
//! assert!(report.result.is_succeeded());
//!
//! // The same call again (a retry, or a replay after a restart) gets the stored result back
//! // instead of a second refund.
//! let again = dispatcher.dispatch(&session, ToolCall::new("c2", "issue_refund", args)).await?;
//! assert!(again.result.replayed);
//! assert_eq!(again.result.data(), report.result.data());
//! store.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! # One process
//!
//! This store is for **one process** that owns the file:
//!
//! - Open the file once and share that [`SqliteStore`] (it is `Clone`; clones share its
//!   connections). A second store on the same file in the same process stays correct (every write
//!   takes SQLite's write lock) but its writes wait on the first one's lock instead of queueing.
//! - Other processes must not use the file. SQLite's locks would keep them consistent on one
//!   machine, but this store neither tests nor supports it: their writes contend for one lock,
//!   and a write that waits longer than the busy timeout (5 s) fails with
//!   [`StoreError::Unreachable`](toolgate_core::store::StoreError::Unreachable). Several processes
//!   or machines share one `toolgate-store-postgres` database instead.
//! - Never put the file on a network filesystem (NFS, SMB): WAL mode needs shared memory and
//!   working file locks, which those do not give.
//! - Keep the file's `-wal` and `-shm` companions next to it; copying the `.db` file alone while
//!   the store is open can lose the latest records.
//!
//! # Errors
//!
//! A file that cannot be used right now (its lock held past the busy timeout, `SQLITE_BUSY` or
//! `SQLITE_LOCKED`; a disk read or write that failed, `SQLITE_IOERR`; an I/O error) is answered
//! with [`StoreError::Unreachable`](toolgate_core::store::StoreError::Unreachable), SQLite's error
//! kept as its source: a transient fault the dispatcher tries again, then reports as the store
//! being out of reach. Every other failure is
//! [`StoreError::Backend`](toolgate_core::store::StoreError::Backend).
//!
//! # Durability
//!
//! The file is in WAL mode with `synchronous = FULL`: each committed transition is fsynced before
//! the call that made it returns, so neither a crash nor a power loss forgets a claim or an
//! outcome. `synchronous = NORMAL` (the usual WAL pairing) would survive a crash of the process
//! but could lose the last commits on power loss, and a lost `processing` or `succeeded` record
//! lets a write run twice: exactly what this store exists to prevent. The price is one fsync per
//! transition, a small part of a call that goes to a provider over the network: two for a write
//! call, its claim and its success with the call's audit record. The run ledger's counting of a
//! turn or a retry commits at `NORMAL` instead: the claim or the retry's record that follows
//! it, fsynced, carries it to the disk with it, since the log is one file written in order. A
//! power loss can lose only the counting of a turn that ran reads alone.
//!
//! # Schema
//!
//! Opening a file migrates it to the schema this version knows (versioned by SQLite's
//! `user_version`, marked as a toolgate store by its `application_id`), in one transaction that
//! keeps every record: a file of an earlier version is upgraded in place, and a migration that
//! fails leaves it as it was. A file written by a newer version, or by another program, is
//! refused rather than changed.

mod approval;
mod audit;
mod begin;
mod claim;
mod connect;
mod error;
mod issuer_keys;
mod migrate;
mod outbox;
mod resolve;
mod row;
mod run;
mod steps;
mod store;
mod unflushed;

pub use begin::connection;
pub use connect::{DEFAULT_BUSY_TIMEOUT, SqliteOptions};
pub use store::SqliteStore;
