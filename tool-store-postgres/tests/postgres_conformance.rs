//! The store conformance suite of tool-core, against a real PostgreSQL server: each rule on a
//! fresh database.

use tool_store_postgres::PostgresStore;
use tool_store_postgres::testing::test_database;

#[tokio::test]
async fn the_postgres_store_passes_the_conformance_suite() {
    tool_core::store::conformance::run_all(|| async {
        PostgresStore::connect(&test_database().await)
            .await
            .expect("connect to the test database")
    })
    .await;
}
