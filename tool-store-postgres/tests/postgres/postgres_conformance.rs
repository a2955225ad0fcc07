//! The store conformance suite of toolgate-test, against a real PostgreSQL server: one test a
//! rule, each on a fresh database.

use tokio::sync::Mutex;
use toolgate_store_postgres::PostgresStore;
use toolgate_test::conformance::Case;
use toolgate_test_postgres::test_database;

/// The rules take turns. All at once, the databases they create and the sixteen concurrent
/// claims of `concurrent_claims_acquire_once` load the server past the pool's bounded wait for a
/// connection (three seconds) on a busy machine, and the claims fail as unreachable.
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

toolgate_test::conformance_tests!(|case: Case| async move {
    let _turn = ONE_AT_A_TIME.lock().await;
    let store = PostgresStore::connect(&test_database().await)
        .await
        .expect("connect to the test database");
    case.run(&store).await;
});
