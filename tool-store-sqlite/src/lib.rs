//! The embedded operation store of toolgate: every write operation's record (DESIGN §4) in one
//! durable SQLite file, for one process.
//!
//! [`SqliteStore`] implements [`OperationStore`](tool_core::store::OperationStore): a claim is
//! one atomic insert-or-inspect in an immediate transaction, every later write is one `UPDATE`
//! that carries the attempt it claimed, and a transition is on disk before the call that made it
//! returns (see [Durability](#durability)). Hand it to the dispatcher as its store; it passes the
//! same conformance suite as every other store.
//!
//! ```
//! use std::time::Duration;
//!
//! use tool_core::store::{Claim, ClaimRequest, OperationStore, Owner};
//! use tool_store_sqlite::SqliteStore;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tool_core::store::StoreError> {
//! # let dir = tempfile::tempdir().expect("a temporary directory");
//! // Creates the file, and its schema, on first use.
//! let store = SqliteStore::open(dir.path().join("operations.db")).await?;
//!
//! let request = ClaimRequest {
//!     tenant: "acme",
//!     key: "refund-ORD-1001",
//!     tool: "issue_refund",
//!     request_hash: "3f1c…",
//!     arguments: r#"{"amount":500,"order_id":"ORD-1001"}"#,
//!     now_ms: 1_700_000_000_000,
//!     lease: Duration::from_secs(30),
//!     takeover: false,
//! };
//! let Claim::Acquired { attempt } = store.claim(request).await? else {
//!     unreachable!("a new key is acquired");
//! };
//! // ... call the provider, then record its outcome under the attempt claimed.
//! let owner = Owner { tenant: "acme".into(), key: "refund-ORD-1001".into(), attempt };
//! store.succeed(&owner, r#"{"refund_id":"re_1"}"#, request.now_ms + 120).await?;
//!
//! // The same call again (a retry, or a replay after a restart) gets the stored result back
//! // instead of a second refund.
//! let Claim::Existing(record) = store.claim(request).await? else {
//!     unreachable!("the key is taken");
//! };
//! assert_eq!(record.result.as_deref(), Some(r#"{"refund_id":"re_1"}"#));
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
//!   [`StoreError::Unreachable`](tool_core::store::StoreError::Unreachable). Several processes
//!   or machines share one `tool-store-postgres` database instead.
//! - Never put the file on a network filesystem (NFS, SMB): WAL mode needs shared memory and
//!   working file locks, which those do not give.
//! - Keep the file's `-wal` and `-shm` companions next to it; copying the `.db` file alone while
//!   the store is open can lose the latest records.
//!
//! # Errors
//!
//! A file that cannot be used right now (its lock held past the busy timeout, `SQLITE_BUSY` or
//! `SQLITE_LOCKED`; a disk read or write that failed, `SQLITE_IOERR`; an I/O error) is answered
//! with [`StoreError::Unreachable`](tool_core::store::StoreError::Unreachable), SQLite's error
//! kept as its source: a transient fault the dispatcher tries again, then reports as the store
//! being out of reach. Every other failure is
//! [`StoreError::Backend`](tool_core::store::StoreError::Backend).
//!
//! # Durability
//!
//! The file is in WAL mode with `synchronous = FULL`: each committed transition is fsynced before
//! the call that made it returns, so neither a crash nor a power loss forgets a claim or an
//! outcome. `synchronous = NORMAL` (the usual WAL pairing) would survive a crash of the process
//! but could lose the last commits on power loss, and a lost `processing` or `succeeded` record
//! lets a write run twice: exactly what this store exists to prevent. The price is one fsync per
//! transition, a small part of a call that goes to a provider over the network.
//!
//! # Schema
//!
//! Opening a file migrates it to the schema this version knows (versioned by SQLite's
//! `user_version`, marked as a toolgate store by its `application_id`). A file written by a newer
//! version, or by another program, is refused rather than changed.

mod claim;
mod connect;
mod error;
mod migrate;
mod row;
mod store;

pub use connect::{DEFAULT_BUSY_TIMEOUT, SqliteOptions};
pub use store::SqliteStore;
