//! Claims racing for the same keys, from many tasks on one pool and from two pools (as two
//! processes would), against a real PostgreSQL server.

use std::collections::HashMap;
use std::time::Duration;

use tokio::task::JoinSet;
use toolgate_core::store::prelude::*;
use toolgate_core::store::{
    AttemptError, AttemptFailure, Claim, ClaimRequest, ClaimToken, OperationState,
};
use toolgate_store_postgres::PostgresStore;
use toolgate_store_postgres::sqlx::postgres::PgPoolOptions;
use toolgate_test_postgres::test_database;

const T0: i64 = 1_700_000_000_000;

fn request(key: &str) -> ClaimRequest<'_> {
    ClaimRequest {
        tenant: "acme",
        key,
        tool: "issue_refund",
        request_hash: "h1",
        unkeyed: None,
        arguments: r#"{"amount":500,"order_id":"ORD-1001"}"#,
        now_ms: T0,
        lease: Duration::from_secs(30),
        takeover: false,
        approval: None,
    }
}

/// A store on a pool of its own, as one process would have.
async fn process_store(url: &str) -> PostgresStore {
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect(url)
        .await
        .expect("connect");
    let store = PostgresStore::from_pool(pool);
    store.migrate().await.expect("migrate");
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_tasks_claiming_one_key_acquire_it_once() {
    let store = process_store(&test_database().await).await;
    let mut tasks = JoinSet::new();
    for _ in 0..32 {
        let store = store.clone();
        tasks.spawn(async move { store.claim(request("hot")).await });
    }
    let claims: Vec<Claim> = tasks
        .join_all()
        .await
        .into_iter()
        .map(|claim| claim.expect("claim"))
        .collect();
    let acquired = claims
        .iter()
        .filter(|claim| matches!(claim, Claim::Acquired { attempt: 1, .. }))
        .count();
    let in_progress = claims
        .iter()
        .filter(|claim| {
            matches!(claim, Claim::Existing(record)
                if record.state == OperationState::Processing && record.attempt == 1)
        })
        .count();
    assert_eq!((acquired, in_progress), (1, 31), "{claims:?}");
    let record = store.get("acme", "hot").await.unwrap().expect("stored");
    assert_eq!(
        (record.state, record.attempt),
        (OperationState::Processing, 1)
    );
}

/// Claims `key` from 32 tasks at once and answers the attempts acquired.
async fn race_for(store: &PostgresStore, key: &str, now_ms: i64, takeover: bool) -> Vec<u32> {
    let mut tasks = JoinSet::new();
    for _ in 0..32 {
        let store = store.clone();
        let key = key.to_owned();
        tasks.spawn(async move {
            let mut again = request(&key);
            again.now_ms = now_ms;
            again.takeover = takeover;
            store.claim(again).await
        });
    }
    tasks
        .join_all()
        .await
        .into_iter()
        .filter_map(|claim| match claim.expect("claim") {
            Claim::Acquired { attempt, .. } => Some(attempt),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_tasks_taking_a_key_again_take_it_once() {
    // Several rounds, so that a race the store lost shows up even when one round is lucky.
    const ROUNDS: usize = 8;
    let store = process_store(&test_database().await).await;
    for round in 0..ROUNDS {
        let (failed, expired) = (format!("failed-{round}"), format!("expired-{round}"));
        let (failed, expired) = (failed.as_str(), expired.as_str());
        // A failed operation (definitely not applied) may be claimed again: by one task.
        assert_eq!(
            store.claim(request(failed)).await.unwrap(),
            Claim::Acquired {
                attempt: 1,
                approved: None
            }
        );
        let owner = ClaimToken {
            tenant: "acme".into(),
            key: failed.into(),
            attempt: 1,
        };
        let error = AttemptError {
            attempt: 1,
            kind: "retry_budget_exhausted".into(),
            what: "the provider kept answering 503".into(),
        };
        store
            .fail(AttemptFailure {
                owner: &owner,
                error: &error,
                now_ms: T0 + 1,
            })
            .await
            .unwrap();
        assert_eq!(
            race_for(&store, failed, T0 + 2, false).await,
            [2],
            "{failed}"
        );

        // An expired lease whose tool allows a takeover: taken over by one task.
        assert_eq!(
            store.claim(request(expired)).await.unwrap(),
            Claim::Acquired {
                attempt: 1,
                approved: None
            }
        );
        assert_eq!(
            race_for(&store, expired, T0 + 60_000, true).await,
            [2],
            "{expired}"
        );

        for key in [failed, expired] {
            let record = store.get("acme", key).await.unwrap().expect("stored");
            assert_eq!(
                (record.state, record.attempt),
                (OperationState::Processing, 2),
                "{key}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_racing_for_200_keys_acquire_each_once() {
    const KEYS: usize = 200;
    const WORKERS: usize = 8;
    let url = test_database().await;
    let processes = [process_store(&url).await, process_store(&url).await];

    // Each process runs WORKERS tasks; worker w claims keys w, w + WORKERS, … in order, so the
    // same worker of both processes reaches each key at about the same time.
    let mut tasks = JoinSet::new();
    for store in &processes {
        for worker in 0..WORKERS {
            let store = store.clone();
            tasks.spawn(async move {
                let mut acquired = Vec::new();
                for index in (worker..KEYS).step_by(WORKERS) {
                    let key = format!("key-{index}");
                    match store.claim(request(&key)).await.expect("claim") {
                        Claim::Acquired { attempt, .. } => {
                            assert_eq!(attempt, 1);
                            acquired.push(key);
                        }
                        Claim::Existing(record) => {
                            assert_eq!(record.state, OperationState::Processing);
                        }
                        Claim::Conflict { .. } => panic!("no request conflicts here"),
                        Claim::Approval(_) => panic!("no claim here asks for an approval"),
                    }
                }
                acquired
            });
        }
    }
    let mut times_acquired: HashMap<String, usize> = HashMap::new();
    for key in tasks.join_all().await.into_iter().flatten() {
        *times_acquired.entry(key).or_default() += 1;
    }
    assert_eq!(times_acquired.len(), KEYS, "every key was acquired");
    let twice: Vec<_> = times_acquired.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "acquired more than once: {twice:?}");

    let (rows, attempts): (i64, i64) = toolgate_store_postgres::sqlx::query_as(
        "SELECT count(*), COALESCE(sum(attempt), 0)::bigint FROM toolgate_operations",
    )
    .fetch_one(processes[0].pool())
    .await
    .unwrap();
    assert_eq!((rows, attempts), (KEYS as i64, KEYS as i64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_waited_on_another_uncommitted_claim_answers_its_record() {
    let store = process_store(&test_database().await).await;
    // Another process's claim of the key: inserted, not committed yet.
    let mut other = store.pool().begin().await.unwrap();
    toolgate_store_postgres::sqlx::query(
        "INSERT INTO toolgate_operations (tenant_id, idempotency_key, tool, request_hash, \
         arguments, state, attempt, lease_until_ms, created_ms, updated_ms) \
         VALUES ('acme', 'raced', 'issue_refund', 'h1', '{}', 'processing', 1, $1, $2, $2)",
    )
    .bind(T0 + 30_000)
    .bind(T0)
    .execute(&mut *other)
    .await
    .unwrap();
    let claim = tokio::spawn({
        let store = store.clone();
        async move { store.claim(request("raced")).await }
    });
    // Once the claim waits on the other's row, its statement began before the row was
    // committed, so the statement cannot see the row it collided with.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: bool = toolgate_store_postgres::sqlx::query_scalar(
            "SELECT EXISTS (SELECT FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock')",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        if waiting {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the claim never waited on the uncommitted row"
        );
        tokio::task::yield_now().await;
    }
    other.commit().await.unwrap();
    match claim.await.unwrap().expect("claim") {
        Claim::Existing(record) => assert_eq!(
            (record.state, record.attempt, record.key.as_str()),
            (OperationState::Processing, 1, "raced")
        ),
        other => panic!("expected the other's claim in progress, got {other:?}"),
    }
}
