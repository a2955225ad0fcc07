//! Connecting with options and closing: a closed store refuses statements with a backend error
//! that keeps sqlx's error as its source; connecting (migrations included) in a spawned task.
//!
//! And the store's own connections, seen from the server (`pg_stat_activity`, the store's
//! connections named by their `application_name`): a call cut short while its statement waits
//! leaves its connection unused, never lent again; a call that leaves its transaction without
//! a commit leaves no idle connection in a transaction; the store holds at most `max_connections`
//! open, and a call waits for one at most the acquire timeout; connections the server ended cost
//! one failed call at most.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use toolgate_core::store::prelude::*;
use toolgate_core::store::{
    AttemptError, AttemptFailure, Begun, Claim, ClaimRequest, ClaimToken, Resolution,
    ResolveRequest, StoreError, StoreTransaction, Success,
};
use toolgate_store_postgres::PostgresStore;
use toolgate_store_postgres::sqlx::{self, Connection, PgConnection, postgres::PgConnectOptions};
use toolgate_test_postgres::test_database;

/// The `application_name` of the store's connections in these tests.
const STORE_NAME: &str = "toolgate-store-under-test";

const T0: i64 = 1_700_000_000_000;

fn request(key: &str) -> ClaimRequest<'_> {
    ClaimRequest {
        tenant: "acme",
        key,
        tool: "issue_refund",
        request_hash: "h1",
        unkeyed: None,
        arguments: "{}",
        now_ms: T0,
        lease: Duration::from_secs(30),
        takeover: false,
        approval: None,
    }
}

fn owner(key: &str, attempt: u32) -> ClaimToken {
    ClaimToken {
        tenant: "acme".into(),
        key: key.into(),
        attempt,
    }
}

/// A migrated store on a fresh database whose connections are named [`STORE_NAME`], at most
/// `max` of them, each call waiting at most `wait` for one; and a connection of the test's own
/// to that database.
async fn named_store(max: u32, wait: Duration) -> (PostgresStore, PgConnection) {
    let url = test_database().await;
    let named = url
        .parse::<PgConnectOptions>()
        .expect("a URL")
        .application_name(STORE_NAME);
    let pool = PostgresStore::options(&url)
        .max_connections(max)
        .acquire_timeout(wait)
        .pool_options()
        .connect_lazy_with(named);
    let store = PostgresStore::from_pool(pool);
    store.migrate().await.expect("the store migrates");
    let admin = PgConnection::connect(&url)
        .await
        .expect("the test connects");
    (store, admin)
}

/// The store's connections as the server sees them: each backend's process id and state.
async fn backends(admin: &mut PgConnection) -> Vec<(i32, Option<String>)> {
    sqlx::query_as(
        "SELECT pid, state FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = $1 ORDER BY pid",
    )
    .bind(STORE_NAME)
    .fetch_all(admin)
    .await
    .expect("pg_stat_activity")
}

/// Opens the outbox transaction of `key`, which holds one of the store's connections.
async fn hold(store: &PostgresStore, key: &str) -> Box<dyn StoreTransaction> {
    match store.begin(request(key)).await.expect("begin") {
        Begun::Open { tx, .. } => tx,
        Begun::Settled(claim) => panic!("{key} was not acquired: {claim:?}"),
    }
}

/// Connecting, with its migrations, is a future that can run on a task of its own, as an
/// application that opens its store in `tokio::spawn` (or behind an API that asks for `Send`)
/// runs it. That this compiles is most of the test.
#[tokio::test]
async fn connecting_runs_in_a_spawned_task() {
    let url = test_database().await;
    let options = url.clone();
    let connected = tokio::spawn(async move { PostgresStore::connect(&url).await });
    let store = connected.await.unwrap().unwrap();
    store.close().await;
    let built = tokio::spawn(async move { PostgresStore::options(&options).connect().await });
    built.await.unwrap().unwrap().close().await;
}

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

#[tokio::test]
async fn a_call_cut_short_while_its_statement_waits_leaves_its_connection_unused() {
    let (store, mut admin) = named_store(1, Duration::from_secs(10)).await;
    assert!(matches!(
        store.claim(request("k1")).await.unwrap(),
        Claim::Acquired { attempt: 1, .. }
    ));
    let failed = AttemptError {
        attempt: 1,
        kind: "unavailable".into(),
        what: "503".into(),
    };
    store
        .fail(AttemptFailure {
            owner: &owner("k1", 1),
            error: &failed,
            now_ms: T0,
        })
        .await
        .unwrap();
    let first = backends(&mut admin).await;
    let [(cut, _)] = first[..] else {
        panic!("one connection: {first:?}")
    };

    // The claim of the failed record waits for its row lock, held here, and is cut short.
    let mut lock = admin.begin().await.unwrap();
    sqlx::query("SELECT FROM toolgate_operations WHERE idempotency_key = 'k1' FOR UPDATE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let claim = tokio::time::timeout(Duration::from_millis(300), store.claim(request("k1"))).await;
    assert!(claim.is_err(), "the claim waits for the lock: {claim:?}");
    lock.rollback().await.unwrap();

    // The next claim runs on a new connection, though the store may hold only one: the cut
    // claim gave its permit back with its connection, whose transaction never commits.
    assert!(matches!(
        store.claim(request("k1")).await.unwrap(),
        Claim::Acquired { attempt: 2, .. }
    ));
    let after = backends(&mut admin).await;
    let idle: Vec<i32> = after
        .iter()
        .filter(|(_, state)| state.as_deref() == Some("idle"))
        .map(|(pid, _)| *pid)
        .collect();
    assert_eq!(idle.len(), 1, "{after:?}");
    assert_ne!(
        idle[0], cut,
        "the cut connection is not lent again: {after:?}"
    );
}

#[tokio::test]
async fn a_transaction_left_without_a_commit_leaves_no_idle_connection_in_a_transaction() {
    let (store, mut admin) = named_store(1, Duration::from_secs(10)).await;
    store.claim(request("k1")).await.unwrap();
    // Not `outcome_unknown`: the verdict's transaction finds nothing to settle and is left.
    let resolved = store
        .resolve(ResolveRequest {
            tenant: "acme",
            key: "k1",
            resolution: Resolution::NotApplied,
            now_ms: T0,
        })
        .await
        .unwrap();
    assert_eq!(resolved, None);
    let after = backends(&mut admin).await;
    assert!(
        matches!(&after[..], [(_, Some(state))] if state == "idle"),
        "the transaction was rolled back as the call ended: {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_holds_at_most_max_connections_and_a_call_waits_for_one_at_most_the_timeout() {
    const MAX: usize = 3;
    let wait = Duration::from_secs(2);
    let (store, mut admin) = named_store(MAX as u32, wait).await;

    // Sixteen tasks claim and settle at once; the server is asked meanwhile how many
    // connections the store holds.
    let calls = tokio::spawn({
        let store = store.clone();
        async move {
            join_all((0..16).map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    for round in 0..4 {
                        let key = format!("k{i}-{round}");
                        let claim = store.claim(request(&key)).await?;
                        assert!(matches!(claim, Claim::Acquired { .. }), "{claim:?}");
                        store
                            .succeed(Success {
                                owner: &owner(&key, 1),
                                result: "{}",
                                now_ms: T0,
                                audit: None,
                            })
                            .await?;
                        store.get("acme", &key).await?;
                    }
                    Ok::<_, StoreError>(())
                })
            }))
            .await
        }
    });
    let mut most = 0;
    while !calls.is_finished() {
        most = most.max(backends(&mut admin).await.len());
    }
    for task in calls.await.unwrap() {
        task.unwrap().expect("every call succeeds");
    }
    most = most.max(backends(&mut admin).await.len());
    assert!(
        (1..=MAX).contains(&most),
        "the store held {most} connections"
    );

    // With every connection held by an outbox transaction, a call waits the acquire timeout
    // and is answered that the store could not be reached.
    let mut held = Vec::new();
    for i in 0..MAX {
        held.push(hold(&store, &format!("held-{i}")).await);
    }
    assert_eq!(backends(&mut admin).await.len(), MAX);
    let started = Instant::now();
    let err = store.get("acme", "k0-0").await.expect_err("no connection");
    assert!(started.elapsed() >= wait, "waited {:?}", started.elapsed());
    assert!(err.is_unreachable(), "{err:?}");
    let source = std::error::Error::source(&err).expect("sqlx's error is kept");
    assert!(
        matches!(
            source.downcast_ref::<sqlx::Error>(),
            Some(sqlx::Error::PoolTimedOut)
        ),
        "{source:?}"
    );

    // A transaction that ends gives its connection to the next call.
    held.pop().unwrap().rollback().await.unwrap();
    assert!(store.get("acme", "k0-0").await.unwrap().is_some());
    for tx in held {
        tx.rollback().await.unwrap();
    }
    assert_eq!(backends(&mut admin).await.len(), MAX);
}

#[tokio::test]
async fn connections_the_server_ended_cost_one_failed_call_at_most() {
    const MAX: usize = 4;
    let (store, mut admin) = named_store(MAX as u32, Duration::from_secs(10)).await;
    // Four connections, idle once their transactions roll back.
    let mut held = Vec::new();
    for i in 0..MAX {
        held.push(hold(&store, &format!("held-{i}")).await);
    }
    for tx in held {
        tx.rollback().await.unwrap();
    }
    let before = backends(&mut admin).await;
    assert_eq!(before.len(), MAX, "{before:?}");

    // The server ends them all (as a restart would), and waits until they are gone.
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = $1",
    )
    .bind(STORE_NAME)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(ended, [true; MAX]);
    assert!(backends(&mut admin).await.is_empty());

    let mut failed = Vec::new();
    for _ in 0..2 * MAX {
        if let Err(err) = store.get("acme", "k1").await {
            assert!(err.is_unreachable(), "{err:?}");
            failed.push(err);
        }
    }
    assert!(failed.len() <= 1, "{failed:?}");
    let after = backends(&mut admin).await;
    assert_eq!(after.len(), 1, "one new connection serves them: {after:?}");
}
