//! sqlx's errors in the store's words: a file that is busy or cannot be read or written right now
//! is told apart from a statement that failed.

use toolgate_core::store::StoreError;

/// SQLite's primary result codes (the low byte of an extended code) that pass with time.
const SQLITE_BUSY: i64 = 5;
const SQLITE_LOCKED: i64 = 6;
const SQLITE_IOERR: i64 = 10;

/// Maps a failed statement to the store's error, saying what the store was doing:
/// [`StoreError::Unreachable`] (transient, the sqlx error kept as its source) when the file
/// could not be used right now (see [`is_unreachable`]), [`StoreError::Backend`] otherwise.
pub(crate) fn backend(doing: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |err| {
        if is_unreachable(&err) {
            StoreError::unreachable(format!("SQLite: {doing}"), err)
        } else {
            StoreError::backend_with_source(format!("SQLite: could not {doing}: {err}"), err)
        }
    }
}

/// Whether `error` says the file could not be used right now: another connection held its lock
/// past the busy timeout (`SQLITE_BUSY`, `SQLITE_LOCKED`), the disk failed a read or write
/// (`SQLITE_IOERR`, any extended code), an I/O error, or no pooled connection in time.
pub(crate) fn is_unreachable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db
            .code()
            .and_then(|code| code.parse::<i64>().ok())
            .is_some_and(|code| matches!(code & 0xff, SQLITE_BUSY | SQLITE_LOCKED | SQLITE_IOERR)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use sqlx::Connection;
    use sqlx::sqlite::SqliteConnection;
    use toolgate_core::store::ClaimRequest;
    use toolgate_core::store::prelude::*;

    use super::*;
    use crate::DEFAULT_BUSY_TIMEOUT as BUSY_TIMEOUT;
    use crate::SqliteStore;

    #[test]
    fn io_and_pool_timeouts_are_transient_and_a_closed_pool_is_not() {
        let io = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::Other));
        assert!(backend("read a record")(io).is_unreachable());
        assert!(backend("read a record")(sqlx::Error::PoolTimedOut).is_unreachable());
        let closed = backend("read a record")(sqlx::Error::PoolClosed);
        assert!(matches!(closed, StoreError::Backend { .. }), "{closed:?}");
        let source = std::error::Error::source(&closed).expect("sqlx's error is kept");
        assert!(source.downcast_ref::<sqlx::Error>().is_some(), "{source:?}");
    }

    /// Another connection holds the file's write lock past the busy timeout: the claim answers
    /// that the store could not be reached, keeping SQLite's error as its source.
    #[tokio::test]
    async fn a_claim_behind_a_held_write_lock_is_unreachable() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("operations.db");
        let store = SqliteStore::open(&path).await.expect("open the store");
        let mut other = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("a second connection");
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut other)
            .await
            .expect("take the write lock");
        let started = Instant::now();
        let claim = store
            .claim(ClaimRequest {
                tenant: "acme",
                key: "k",
                tool: "issue_refund",
                request_hash: "h",
                unkeyed: None,
                arguments: "{}",
                now_ms: 0,
                lease: Duration::from_secs(30),
                takeover: false,
                approval: None,
            })
            .await;
        let err = claim.expect_err("the file is locked");
        assert!(err.is_unreachable(), "{err:?}");
        let source = std::error::Error::source(&err).expect("SQLite's error is kept");
        assert!(source.to_string().contains("locked"), "{source}");
        // A ceiling, not a synchronisation: the claim gave up after the busy timeout.
        assert!(
            started.elapsed() < BUSY_TIMEOUT * 3,
            "{:?}",
            started.elapsed()
        );
        sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    }
}
