//! The real stores the dispatch tests run against, each fresh: a SQLite file in a directory of
//! its own, and a database of its own on the test PostgreSQL server.

use std::sync::Arc;

use tempfile::TempDir;
use toolgate::store::{OperationStore, PostgresStore, SqliteStore};
use toolgate_test_postgres::test_database;

/// A SQLite store; the file lives as long as the directory.
pub(crate) async fn sqlite() -> (Arc<dyn OperationStore>, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("operations.db"))
        .await
        .unwrap();
    (Arc::new(store), dir)
}

/// A PostgreSQL store on a fresh database.
pub(crate) async fn postgres() -> Arc<dyn OperationStore> {
    Arc::new(
        PostgresStore::connect(&test_database().await)
            .await
            .unwrap(),
    )
}
