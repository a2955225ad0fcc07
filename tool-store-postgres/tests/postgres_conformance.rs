//! The store conformance suite of toolgate-test, against a real PostgreSQL server: one test a
//! rule, each on a fresh database.

use tool_store_postgres::PostgresStore;
use toolgate_test::conformance::Case;
use toolgate_test_postgres::test_database;

toolgate_test::conformance_tests!(|case: Case| async move {
    let store = PostgresStore::connect(&test_database().await)
        .await
        .expect("connect to the test database");
    case.run(&store).await;
});
