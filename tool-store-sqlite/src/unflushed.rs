//! The writer's connection for a transaction that commits without an fsync of its own: the run
//! ledger's counting of a turn or a retry.
//!
//! In WAL mode a commit appends the transaction's frames to the log; `synchronous = FULL` then
//! fsyncs the log, `NORMAL` does not. The log is one file written in order, so the next `FULL`
//! commit's fsync (a write's claim, which comes before its tool runs; a retry's record, before
//! the retry is sent) carries the frames of every commit before it to the disk: no write runs
//! on counters the disk does not hold. A crash of the process loses nothing (the frames are in
//! the file); a power loss can lose the counting of a turn that ran only reads, in the moments
//! before it. The transaction is as atomic and isolated as any other.
//!
//! The connection goes back to `FULL` before it returns to the pool. If that cannot be seen to
//! happen (a statement failed, or the future was dropped halfway), the connection is closed
//! instead of returned, and the pool opens a new one with the store's settings.

use std::ops::{Deref, DerefMut};

use sqlx::pool::PoolConnection;
use sqlx::{Sqlite, SqliteConnection, SqlitePool};
use toolgate_core::store::StoreError;

use crate::error::backend;

/// The writer's connection, at `synchronous = NORMAL` until [`Unflushed::restore`].
pub(crate) struct Unflushed {
    conn: PoolConnection<Sqlite>,
    restored: bool,
}

impl Unflushed {
    /// Takes the writer's connection and stops its commits' fsyncs.
    pub(crate) async fn acquire(writer: &SqlitePool) -> Result<Unflushed, StoreError> {
        let conn = writer
            .acquire()
            .await
            .map_err(backend("take the writer's connection"))?;
        let mut unflushed = Unflushed {
            conn,
            restored: false,
        };
        sqlx::query("PRAGMA synchronous = NORMAL")
            .execute(&mut *unflushed.conn)
            .await
            .map_err(backend("count without an fsync"))?;
        Ok(unflushed)
    }

    /// Puts the connection back to `synchronous = FULL`, for the writes after it.
    pub(crate) async fn restore(mut self) -> Result<(), StoreError> {
        sqlx::query("PRAGMA synchronous = FULL")
            .execute(&mut *self.conn)
            .await
            .map_err(backend("fsync every commit again"))?;
        self.restored = true;
        Ok(())
    }
}

impl Deref for Unflushed {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        &self.conn
    }
}

impl DerefMut for Unflushed {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        &mut self.conn
    }
}

impl Drop for Unflushed {
    fn drop(&mut self) {
        if !self.restored {
            // Never back in the pool without its fsyncs.
            self.conn.close_on_drop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::SqliteOptions;

    async fn synchronous(writer: &SqlitePool) -> i64 {
        sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(writer)
            .await
            .expect("read synchronous")
    }

    /// Whatever becomes of the unflushed connection, the writer's next statement runs at
    /// `FULL` (2): restored, or closed and opened again.
    #[tokio::test]
    async fn the_writer_is_back_at_full_sync_restored_or_dropped_halfway() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let writer = SqliteOptions::new(&dir.path().join("operations.db"))
            .writer()
            .await
            .expect("open the writer");
        let mut conn = Unflushed::acquire(&writer).await.expect("take the writer");
        let during: i64 = sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&mut *conn)
            .await
            .expect("read synchronous");
        assert_eq!(during, 1, "NORMAL while it counts");
        conn.restore().await.expect("restore");
        assert_eq!(synchronous(&writer).await, 2, "restored");

        // Dropped before it was restored, as a cancelled call drops it.
        let conn = Unflushed::acquire(&writer).await.expect("take the writer");
        drop(conn);
        assert_eq!(synchronous(&writer).await, 2, "closed, and opened again");
    }
}
