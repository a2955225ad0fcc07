//! Connecting with options and closing: a closed store refuses statements with a backend error
//! that keeps sqlx's error as its source.

use std::time::Duration;

use toolgate_core::store::{OperationStore, StoreError};
use toolgate_store_postgres::PostgresStore;
use toolgate_store_postgres::sqlx;
use toolgate_test_postgres::test_database;

#[tokio::test]
async fn a_closed_store_answers_a_backend_error_with_sqlx_as_its_source() {
    let store = PostgresStore::options(&test_database().await)
        .acquire_timeout(Duration::from_secs(5))
        .max_connections(2)
        .connect()
        .await
        .unwrap();
    assert_eq!(store.pool().options().get_max_connections(), 2);
    assert_eq!(store.get("acme", "k1").await.unwrap(), None);

    store.clone().close().await;
    assert!(store.pool().is_closed(), "clones share the pool");
    let err = store
        .get("acme", "k1")
        .await
        .expect_err("the pool is closed");
    assert!(matches!(err, StoreError::Backend { .. }), "{err:?}");
    assert!(!err.is_unreachable(), "closing is not an outage: {err:?}");
    let source = std::error::Error::source(&err).expect("sqlx's error is kept");
    assert!(
        matches!(
            source.downcast_ref::<sqlx::Error>(),
            Some(sqlx::Error::PoolClosed)
        ),
        "{source:?}"
    );
}
