//! The store conformance suite of tool-core, against real files.

use std::sync::atomic::{AtomicUsize, Ordering};

use tool_store_sqlite::SqliteStore;

/// Every rule on its own new file, all in one temporary directory for this run.
#[tokio::test]
async fn the_sqlite_store_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let opened = AtomicUsize::new(0);
    tool_core::store::conformance::run_all(|| {
        let n = opened.fetch_add(1, Ordering::Relaxed);
        let path = dir.path().join(format!("conformance-{n}.db"));
        async move { SqliteStore::open(path).await.expect("open a fresh store") }
    })
    .await;
    assert!(
        opened.load(Ordering::Relaxed) > 1,
        "the suite opened its stores"
    );
    assert!(dir.path().join("conformance-0.db").is_file(), "a real file");
}
