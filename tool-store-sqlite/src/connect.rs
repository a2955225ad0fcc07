//! How the store connects to its file: the SQLite settings, and the two pools.

use std::path::Path;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use tool_core::store::StoreError;

/// How long a connection waits for another connection's write lock before its statement fails.
/// Writes of one store queue in its writer pool and never wait here; only a second store on the
/// same file does.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections that serve reads (`get`, `list_unknown`), which WAL lets run beside the write.
const READERS: u32 = 4;

/// The settings of every connection: WAL, `synchronous = FULL` (the crate docs say why), and a
/// busy timeout.
fn options(path: &Path) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(BUSY_TIMEOUT)
}

/// The pool every write goes through: one connection, so the store's writes queue fairly in the
/// pool instead of spinning on SQLite's busy handler. Creates the file if needed.
pub(crate) async fn writer(path: &Path) -> Result<SqlitePool, StoreError> {
    SqlitePoolOptions::new()
        .max_connections(1)
        // A local file has no connection to lose: no ping before each use.
        .test_before_acquire(false)
        .connect_with(options(path).create_if_missing(true))
        .await
        .map_err(|err| open_error(path, &err))
}

/// The pool reads go through. Opened after [`writer`] created the file.
pub(crate) async fn reader(path: &Path) -> Result<SqlitePool, StoreError> {
    SqlitePoolOptions::new()
        .max_connections(READERS)
        .test_before_acquire(false)
        .connect_with(options(path))
        .await
        .map_err(|err| open_error(path, &err))
}

/// SQLite says only "unable to open database file"; name the file, and a missing directory.
fn open_error(path: &Path, err: &sqlx::Error) -> StoreError {
    let missing_dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty() && !dir.is_dir());
    let hint = match missing_dir {
        Some(dir) => format!(" (the directory {} does not exist)", dir.display()),
        None => String::new(),
    };
    StoreError::Backend(format!(
        "cannot open the SQLite operation store {}{hint}: {err}",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The durability the crate docs promise is what the connections get.
    #[tokio::test]
    async fn every_connection_is_wal_with_full_sync() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("operations.db");
        let writer = writer(&path).await.expect("open the writer");
        let reader = reader(&path).await.expect("open a reader");
        for pool in [&writer, &reader] {
            let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
                .fetch_one(pool)
                .await
                .expect("journal mode");
            let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
                .fetch_one(pool)
                .await
                .expect("synchronous");
            assert_eq!((journal.as_str(), synchronous), ("wal", 2), "2 is FULL");
        }
    }
}
