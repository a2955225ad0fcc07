//! The store conformance suite of toolgate-test, against real files: one test a rule, each on a
//! new file in a temporary directory of its own.

use toolgate_store_sqlite::SqliteStore;
use toolgate_test::conformance::Case;

toolgate_test::conformance_tests!(|case: Case| async move {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    let store = SqliteStore::open(&path).await.expect("open a fresh store");
    case.run(&store).await;
    assert!(path.is_file(), "{}: a real file", case.name());
});
