//! The embedded migrations: harmless when run again, and when several processes connect to an
//! empty database at once.

use std::time::Duration;

use futures_util::future::join_all;
use toolgate_core::store::prelude::*;
use toolgate_core::store::{AttemptFailure, Claim, ClaimRequest};
use toolgate_store_postgres::PostgresStore;
use toolgate_store_postgres::sqlx;
use toolgate_test_postgres::test_database;

fn request(key: &str) -> ClaimRequest<'_> {
    ClaimRequest {
        tenant: "acme",
        key,
        tool: "issue_refund",
        request_hash: "h1",
        unkeyed: None,
        arguments: "{}",
        now_ms: 1_700_000_000_000,
        lease: Duration::from_secs(30),
        takeover: false,
        approval: None,
    }
}

async fn applied_migrations(store: &PostgresStore) -> Vec<i64> {
    sqlx::query_scalar("SELECT version FROM _toolgate_store_migrations ORDER BY version")
        .fetch_all(store.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn migrating_again_changes_nothing() {
    let store = PostgresStore::connect(&test_database().await)
        .await
        .unwrap();
    assert_eq!(
        store.claim(request("k1")).await.unwrap(),
        Claim::Acquired {
            attempt: 1,
            approved: None
        }
    );
    store.migrate().await.unwrap();
    store.migrate().await.unwrap();
    assert_eq!(
        applied_migrations(&store).await,
        [1, 2, 3, 4, 5, 6, 7, 8, 9]
    );
    let kept = store
        .get("acme", "k1")
        .await
        .unwrap()
        .expect("the record survives");
    assert_eq!(kept.attempt, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_connecting_at_once_to_an_empty_database_all_start() {
    let url = test_database().await;
    let stores: Vec<PostgresStore> = join_all((0..6).map(|_| PostgresStore::connect(&url)))
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("every process connects and migrates");
    assert_eq!(
        applied_migrations(&stores[0]).await,
        [1, 2, 3, 4, 5, 6, 7, 8, 9]
    );
    let claims = join_all(stores.iter().map(|store| store.claim(request("k1")))).await;
    let acquired = claims
        .iter()
        .filter(|claim| matches!(claim, Ok(Claim::Acquired { .. })))
        .count();
    assert_eq!(acquired, 1, "{claims:?}");
}

/// A database an earlier release left at version 1, with attempt errors in `jsonb`, migrates
/// to version 2 keeping them, and its records then take errors holding NUL.
#[tokio::test]
async fn errors_recorded_before_migration_two_are_kept_and_nul_is_stored_after() {
    use std::borrow::Cow;
    use toolgate_core::store::{AttemptError, ClaimToken, OperationState};
    use toolgate_store_postgres::sqlx::SqlSafeStr;
    use toolgate_store_postgres::sqlx::migrate::{Migration, MigrationType, Migrator};

    let url = test_database().await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let mut version_one = Migrator::with_migrations(vec![Migration::new(
        1,
        Cow::Borrowed("operations"),
        MigrationType::Simple,
        include_str!("../../migrations/0001_operations.sql").into_sql_str(),
        false,
    )]);
    version_one.dangerous_set_table_name("_toolgate_store_migrations");
    version_one.run(&pool).await.unwrap();
    sqlx::query(
        "INSERT INTO toolgate_operations (tenant_id, idempotency_key, tool, request_hash, \
         arguments, state, attempt, lease_until_ms, errors, created_ms, updated_ms) \
         VALUES ('acme', 'k1', 'issue_refund', 'h1', '{}', 'processing', 1, \
                 9000000000000, '[{\"attempt\": 1, \"kind\": \"unavailable\", \"what\": \"503\"}]', \
                 1, 1)",
    )
    .execute(&pool)
    .await
    .unwrap();

    let store = PostgresStore::connect(&url).await.unwrap();
    assert_eq!(
        applied_migrations(&store).await,
        [1, 2, 3, 4, 5, 6, 7, 8, 9]
    );
    let earlier = AttemptError {
        attempt: 1,
        kind: "unavailable".into(),
        what: "503".into(),
    };
    let record = store.get("acme", "k1").await.unwrap().expect("kept");
    assert_eq!(record.errors, std::slice::from_ref(&earlier));
    let with_nul = AttemptError {
        attempt: 2,
        kind: "refused".into(),
        what: "amount\0invalid".into(),
    };
    let owner = ClaimToken {
        tenant: "acme".into(),
        key: "k1".into(),
        attempt: 1,
    };
    store
        .fail(AttemptFailure {
            owner: &owner,
            error: &with_nul,
            now_ms: 2,
        })
        .await
        .unwrap();
    let record = store.get("acme", "k1").await.unwrap().expect("kept");
    assert_eq!(record.state, OperationState::Failed);
    assert_eq!(record.errors, [earlier, with_nul]);
}
