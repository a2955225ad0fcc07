//! How a [`SqliteStore`] opens its file: the settings of [`SqliteStore::options`], the SQLite
//! settings every connection gets, and the two pools.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use toolgate_core::store::StoreError;

use crate::SqliteStore;

/// How long a connection waits for another connection's write lock before its statement fails
/// with [`StoreError::Unreachable`]: 5 seconds.
///
/// Writes of one store queue in its writer pool and never wait here; only a second store on the
/// same file does. Set it with [`SqliteOptions::busy_timeout`].
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections that serve reads (`get`, the lists, approvals and the audit trail) by default,
/// which WAL lets run beside the write. Set it with [`SqliteOptions::max_readers`].
const DEFAULT_READERS: u32 = 4;

/// Settings for [`SqliteStore::open`], made by [`SqliteStore::options`].
///
/// ```
/// use std::time::Duration;
/// use toolgate_store_sqlite::SqliteStore;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), toolgate_core::store::StoreError> {
/// # let dir = tempfile::tempdir().expect("a temporary directory");
/// let store = SqliteStore::options(dir.path().join("operations.db"))
///     .busy_timeout(Duration::from_secs(1))
///     .open()
///     .await?;
/// store.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    path: PathBuf,
    busy_timeout: Duration,
    max_readers: u32,
}

impl SqliteOptions {
    pub(crate) fn new(path: &Path) -> Self {
        SqliteOptions {
            path: path.to_owned(),
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            max_readers: DEFAULT_READERS,
        }
    }

    /// How long a statement waits for another connection's write lock on the file, then fails
    /// with [`StoreError::Unreachable`] (default [`DEFAULT_BUSY_TIMEOUT`]).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// The most connections that serve reads beside the one that writes (default 4; at least
    /// 1).
    pub fn max_readers(mut self, max: u32) -> Self {
        self.max_readers = max.max(1);
        self
    }

    /// Opens the file, creating it if needed (but not its directory), and migrates its schema
    /// to this version's. See [`SqliteStore::open`].
    pub async fn open(self) -> Result<SqliteStore, StoreError> {
        let writer = self.writer().await?;
        crate::migrate::migrate(&writer).await?;
        let reader = self.reader().await?;
        Ok(SqliteStore::from_pools(writer, reader))
    }

    /// Creates the file if needed and brings its schema to `version` only, without opening a
    /// store: for tests that upgrade a file written by an earlier release. Not part of the
    /// supported API.
    #[doc(hidden)]
    pub async fn migrate_to_version(self, version: i64) -> Result<(), StoreError> {
        let writer = self.writer().await?;
        let migrated = crate::migrate::migrate_to(&writer, version).await;
        writer.close().await;
        migrated
    }

    /// The settings of every connection: WAL, `synchronous = FULL` (the crate docs say why), a
    /// busy timeout, and foreign keys enforced.
    fn connection(&self) -> SqliteConnectOptions {
        SqliteConnectOptions::new()
            .filename(&self.path)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(self.busy_timeout)
            // A run's attempts and failed calls are deleted with it.
            .foreign_keys(true)
    }

    /// The pool every write goes through: one connection, so the store's writes queue fairly in
    /// the pool instead of spinning on SQLite's busy handler. Creates the file if needed.
    pub(crate) async fn writer(&self) -> Result<SqlitePool, StoreError> {
        SqlitePoolOptions::new()
            .max_connections(1)
            // A local file has no connection to lose: no ping before each use.
            .test_before_acquire(false)
            .connect_with(self.connection().create_if_missing(true))
            .await
            .map_err(|err| open_error(&self.path, err))
    }

    /// The pool reads go through. Opened after [`SqliteOptions::writer`] created the file.
    pub(crate) async fn reader(&self) -> Result<SqlitePool, StoreError> {
        SqlitePoolOptions::new()
            .max_connections(self.max_readers)
            .test_before_acquire(false)
            .connect_with(self.connection())
            .await
            .map_err(|err| open_error(&self.path, err))
    }
}

/// SQLite says only "unable to open database file"; name the file, and a missing directory.
fn open_error(path: &Path, err: sqlx::Error) -> StoreError {
    let missing_dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty() && !dir.is_dir());
    let hint = match missing_dir {
        Some(dir) => format!(" (the directory {} does not exist)", dir.display()),
        None => String::new(),
    };
    StoreError::backend_with_source(
        format!(
            "cannot open the SQLite operation store {}{hint}: {err}",
            path.display()
        ),
        err,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings of the options are the settings of the connections and pools.
    #[tokio::test]
    async fn the_options_set_the_busy_timeout_and_the_readers() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("operations.db");
        for (options, busy_ms, readers) in [
            (SqliteOptions::new(&path), 5000, 4),
            (
                SqliteOptions::new(&path)
                    .busy_timeout(Duration::from_millis(250))
                    .max_readers(2),
                250,
                2,
            ),
        ] {
            let writer = options.writer().await.expect("open the writer");
            let reader = options.reader().await.expect("open a reader");
            for pool in [&writer, &reader] {
                let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
                    .fetch_one(pool)
                    .await
                    .expect("busy timeout");
                assert_eq!(busy, busy_ms);
            }
            assert_eq!(reader.options().get_max_connections(), readers);
            assert_eq!(writer.options().get_max_connections(), 1);
        }
    }

    /// The durability the crate docs promise is what the connections get.
    #[tokio::test]
    async fn every_connection_is_wal_with_full_sync() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("operations.db");
        let options = SqliteOptions::new(&path);
        let writer = options.writer().await.expect("open the writer");
        let reader = options.reader().await.expect("open a reader");
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
