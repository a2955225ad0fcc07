//! [`SqliteStore`]: opening and closing the file. Each capability of the store is implemented in
//! the module that holds its SQL.

use std::path::Path;

use sqlx::SqlitePool;
#[cfg(doc)]
use toolgate_core::store::OperationStore;
use toolgate_core::store::StoreError;

use crate::connect::SqliteOptions;
use crate::migrate;

/// An [`OperationStore`] in one SQLite file, for one process (see the [crate docs](crate) for its
/// limits and durability).
///
/// Cheap to clone: clones share the file's connections. Writes go through one connection, in
/// order; reads use their own connections beside it.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pub(crate) writer: SqlitePool,
    pub(crate) reader: SqlitePool,
}

impl SqliteStore {
    /// Opens the store in the file at `path`, creating the file if needed (but not its
    /// directory), and migrates its schema to this version's; [`SqliteStore::options`] opens
    /// it with other settings.
    ///
    /// Fails with [`StoreError::Backend`] when the file cannot be opened or created (a missing
    /// directory, no permission; SQLite's error is its source), or when it belongs to another
    /// program or a newer version.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), toolgate_core::store::StoreError> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// let store = toolgate_store_sqlite::SqliteStore::open(dir.path().join("operations.db")).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::options(path).open().await
    }

    /// The settings of the store in the file at `path`, to change before
    /// [`SqliteOptions::open`].
    pub fn options(path: impl AsRef<Path>) -> SqliteOptions {
        SqliteOptions::new(path.as_ref())
    }

    pub(crate) fn from_pools(writer: SqlitePool, reader: SqlitePool) -> SqliteStore {
        SqliteStore { writer, reader }
    }

    /// Migrates the file's schema to this version's. [`SqliteStore::open`] already does; running
    /// it again changes nothing.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        migrate::migrate(&self.writer).await
    }

    /// Closes every connection of this store and its clones, waiting for the writes in flight.
    /// Dropping the last clone closes them too, in the background; every committed write is
    /// on disk either way.
    pub async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}
