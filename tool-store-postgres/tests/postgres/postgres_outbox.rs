//! The transactional outbox on a real PostgreSQL server: an outbox tool's rows, written with
//! the store's connection inside the transaction `begin` opens, commit with the operation record
//! and the event or not at all; a claim of the key waits for the transaction; concurrent workers
//! lease every event exactly once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use toolgate_core::store::prelude::*;

use toolgate_core::store::EventSettlement;

use toolgate_core::store::{
    AttemptFailure, Begun, Claim, ClaimRequest, ClaimToken, Commit, DeliveryOutcome, EventLease,
    EventStatus, NewEvent, OperationState, StoreError, StoreTransaction,
};
use toolgate_store_postgres::PostgresStore;
use toolgate_store_postgres::sqlx::{self, PgConnection, PgPool};
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

fn owner(key: &str, attempt: u32) -> ClaimToken {
    ClaimToken {
        tenant: "acme".into(),
        key: key.into(),
        attempt,
    }
}

/// A fresh database with the store's schema and the application's own table, and a pool apart
/// from the store's, to look from another connection.
async fn setup() -> (PostgresStore, PgPool) {
    let url = test_database().await;
    let store = PostgresStore::connect(&url)
        .await
        .expect("connect the store");
    let other = PgPool::connect(&url).await.expect("connect another pool");
    sqlx::query("CREATE TABLE refunds (order_id TEXT PRIMARY KEY, amount BIGINT NOT NULL)")
        .execute(&other)
        .await
        .unwrap();
    (store, other)
}

/// Opens the transaction of `key`, which must be acquired; answers it with the attempt.
async fn open(store: &PostgresStore, key: &str) -> (Box<dyn StoreTransaction>, u32) {
    match store.begin(request(key)).await.expect("begin") {
        Begun::Open { tx, attempt, .. } => (tx, attempt),
        other => panic!("expected an open transaction for {key}, got {other:?}"),
    }
}

/// The body of an outbox tool: writes its row through the store's connection.
async fn write_refund(tx: &mut Box<dyn StoreTransaction>, order_id: &str) {
    assert_eq!(tx.store_name(), "PostgreSQL");
    let conn = tx
        .connection()
        .downcast_mut::<PgConnection>()
        .expect("the PostgreSQL store lends a PgConnection");
    sqlx::query("INSERT INTO refunds (order_id, amount) VALUES ($1, 500)")
        .bind(order_id)
        .execute(conn)
        .await
        .unwrap();
}

async fn refund_rows(pool: &PgPool, order_id: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM refunds WHERE order_id = $1")
        .bind(order_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn commit(tx: Box<dyn StoreTransaction>, key: &str, attempt: u32) -> Result<(), StoreError> {
    let event = NewEvent {
        payload: format!(r#"{{"order_id":"{key}"}}"#),
    };
    tx.commit(Commit {
        owner: &owner(key, attempt),
        result: r#"{"accepted":true}"#,
        event: Some(&event),
        now_ms: T0 + 5,
    })
    .await
}

/// Asserts that `key` left nothing: no record, no row, no event.
async fn assert_nothing(store: &PostgresStore, other: &PgPool, key: &str) {
    assert_eq!(
        store.get("acme", key).await.unwrap(),
        None,
        "record of {key}"
    );
    assert_eq!(refund_rows(other, key).await, 0, "row of {key}");
    assert_eq!(
        store.event("acme", key).await.unwrap(),
        None,
        "event of {key}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_makes_the_record_the_rows_and_the_event_visible_together() {
    let (store, other) = setup().await;
    let (mut tx, attempt) = open(&store, "ORD-1").await;
    assert_eq!(attempt, 1);
    write_refund(&mut tx, "ORD-1").await;
    // Before the commit, another connection sees none of the three.
    assert_nothing(&store, &other, "ORD-1").await;

    commit(tx, "ORD-1", attempt).await.expect("commit");

    let record = store.get("acme", "ORD-1").await.unwrap().expect("record");
    assert_eq!(record.state, OperationState::Queued);
    assert_eq!(record.result.as_deref(), Some(r#"{"accepted":true}"#));
    assert_eq!(refund_rows(&other, "ORD-1").await, 1);
    let event = store.event("acme", "ORD-1").await.unwrap().expect("event");
    assert_eq!(event.status, EventStatus::Pending);
    assert_eq!(event.tool, "issue_refund");
    assert_eq!(event.payload, r#"{"order_id":"ORD-1"}"#);
    assert_eq!((event.attempt, event.due_ms), (0, T0 + 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_without_an_event_succeeds_the_operation() {
    let (store, other) = setup().await;
    let (mut tx, attempt) = open(&store, "ORD-2").await;
    write_refund(&mut tx, "ORD-2").await;
    tx.commit(Commit {
        owner: &owner("ORD-2", attempt),
        result: r#""done""#,
        event: None,
        now_ms: T0 + 5,
    })
    .await
    .unwrap();
    let record = store.get("acme", "ORD-2").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Succeeded);
    assert_eq!(refund_rows(&other, "ORD-2").await, 1);
    assert_eq!(store.event("acme", "ORD-2").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_or_a_dropped_transaction_leaves_nothing() {
    let (store, other) = setup().await;
    let (mut tx, _) = open(&store, "ORD-3").await;
    write_refund(&mut tx, "ORD-3").await;
    tx.rollback().await.expect("rollback");
    assert_nothing(&store, &other, "ORD-3").await;

    let (mut tx, _) = open(&store, "ORD-4").await;
    write_refund(&mut tx, "ORD-4").await;
    drop(tx);
    assert_nothing(&store, &other, "ORD-4").await;
    // The key is free again: a new claim acquires it as a first attempt.
    let (tx, attempt) = open(&store, "ORD-4").await;
    assert_eq!(attempt, 1);
    commit(tx, "ORD-4", attempt).await.unwrap();
    assert_eq!(
        refund_rows(&other, "ORD-4").await,
        0,
        "the dropped body's row"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_reclaim_leaves_the_record_as_it_was() {
    let (store, other) = setup().await;
    let Claim::Acquired { attempt, .. } = store.claim(request("ORD-5")).await.unwrap() else {
        panic!("acquire")
    };
    let error = toolgate_core::store::AttemptError {
        attempt,
        kind: "unavailable".into(),
        what: "503".into(),
    };
    store
        .fail(AttemptFailure {
            owner: &owner("ORD-5", attempt),
            error: &error,
            now_ms: T0 + 1,
        })
        .await
        .unwrap();
    let before = store.get("acme", "ORD-5").await.unwrap().unwrap();

    let (mut tx, attempt) = open(&store, "ORD-5").await;
    assert_eq!(attempt, 2);
    write_refund(&mut tx, "ORD-5").await;
    tx.rollback().await.unwrap();

    assert_eq!(store.get("acme", "ORD-5").await.unwrap(), Some(before));
    assert_eq!(refund_rows(&other, "ORD-5").await, 0);
    assert_eq!(store.event("acme", "ORD-5").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_killed_mid_transaction_leaves_nothing() {
    let (store, other) = setup().await;
    let (mut tx, attempt) = open(&store, "ORD-6").await;
    write_refund(&mut tx, "ORD-6").await;
    let pid: i32 = {
        let conn = tx.connection().downcast_mut::<PgConnection>().unwrap();
        sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(conn)
            .await
            .unwrap()
    };
    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1, 10000)")
        .bind(pid)
        .fetch_one(&other)
        .await
        .unwrap();
    assert!(killed, "the transaction's backend was terminated");

    let committed = commit(tx, "ORD-6", attempt).await;
    assert!(
        matches!(committed, Err(StoreError::Unreachable { .. })),
        "a commit on a killed connection is unreachable, got {committed:?}"
    );
    assert_nothing(&store, &other, "ORD-6").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_the_key_waits_for_the_open_transaction_then_sees_it_committed() {
    let (store, other) = setup().await;
    let (mut tx, attempt) = open(&store, "ORD-7").await;
    write_refund(&mut tx, "ORD-7").await;

    let racing = store.clone();
    let claim = tokio::spawn(async move { racing.claim(request("ORD-7")).await });
    // The claim's insert waits on the open transaction's uncommitted record: bounded polling of
    // the server's own view of waiting sessions, no sleep standing in for an event.
    let mut waiting = false;
    for _ in 0..1_000 {
        let blocked: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&other)
        .await
        .unwrap();
        if blocked == 1 {
            waiting = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(
        waiting,
        "the second claim waits on the open transaction's lock"
    );
    assert!(!claim.is_finished());

    commit(tx, "ORD-7", attempt).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), claim)
        .await
        .expect("the claim ends once the transaction commits")
        .unwrap()
        .unwrap();
    match answer {
        Claim::Existing(record) => {
            assert_eq!(record.state, OperationState::Queued);
            assert_eq!(record.attempt, 1);
        }
        other => panic!("expected the committed record, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_workers_lease_four_hundred_events_each_exactly_once() {
    const EVENTS: usize = 400;
    const WORKERS: usize = 8;
    let (store, _other) = setup().await;
    for i in 0..EVENTS {
        let key = format!("ORD-{i:04}");
        let (tx, attempt) = open(&store, &key).await;
        commit(tx, &key, attempt).await.unwrap();
    }

    let counts: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let store = store.clone();
        let counts = Arc::clone(&counts);
        workers.push(tokio::spawn(async move {
            let name = format!("worker-{w}");
            // Bounded: every round that leases anything settles at least one event.
            for _ in 0..=EVENTS {
                let leased = store
                    .lease_events(EventLease {
                        worker: &name,
                        tools: &["issue_refund"],
                        now_ms: T0 + 10,
                        lease: Duration::from_secs(60),
                        limit: 7,
                    })
                    .await
                    .unwrap();
                if leased.is_empty() {
                    return;
                }
                for lease in leased {
                    assert!(!lease.taken_over);
                    let event = lease.event;
                    *counts.lock().unwrap().entry(event.key.clone()).or_default() += 1;
                    let settled = store
                        .settle_event(EventSettlement {
                            tenant: &event.tenant,
                            key: &event.key,
                            attempt: event.attempt,
                            outcome: DeliveryOutcome::Delivered(r#"{"paid":true}"#),
                            now_ms: T0 + 11,
                            audit: None,
                        })
                        .await
                        .unwrap();
                    assert_eq!(settled.status, EventStatus::Delivered);
                }
            }
            panic!("{name} was still leasing after {EVENTS} rounds");
        }));
    }
    for worker in workers {
        worker.await.unwrap();
    }

    let counts = counts.lock().unwrap().clone();
    assert_eq!(counts.len(), EVENTS, "every event was leased");
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "events leased more than once: {twice:?}");
    for event in store.list_events(Default::default()).await.unwrap() {
        assert_eq!((event.status, event.attempt), (EventStatus::Delivered, 1));
        let record = store.get("acme", &event.key).await.unwrap().unwrap();
        assert_eq!(record.state, OperationState::Succeeded, "{}", event.key);
        assert_eq!(record.result.as_deref(), Some(r#"{"accepted":true}"#));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_lease_is_taken_over_and_the_first_worker_can_no_longer_settle() {
    let (store, _other) = setup().await;
    let (tx, attempt) = open(&store, "ORD-8").await;
    commit(tx, "ORD-8", attempt).await.unwrap();
    let lease = |worker: &'static str, now_ms| EventLease {
        worker,
        tools: &["issue_refund"],
        now_ms,
        lease: Duration::from_secs(30),
        limit: 10,
    };
    let first = store.lease_events(lease("w1", T0 + 10)).await.unwrap();
    assert_eq!(first.len(), 1);
    assert!(!first[0].taken_over);
    assert!(
        store
            .lease_events(lease("w2", T0 + 20))
            .await
            .unwrap()
            .is_empty(),
        "a live lease is not leased again"
    );
    let second = store
        .lease_events(lease("w2", T0 + 10 + 30_000))
        .await
        .unwrap();
    assert_eq!(second.len(), 1);
    assert!(second[0].taken_over);
    assert_eq!(second[0].event.attempt, 2);
    assert_eq!(second[0].event.worker.as_deref(), Some("w2"));

    let late = store
        .settle_event(EventSettlement {
            tenant: "acme",
            key: "ORD-8",
            attempt: 1,
            outcome: DeliveryOutcome::Delivered("{}"),
            now_ms: T0 + 40_000,
            audit: None,
        })
        .await;
    assert!(
        matches!(late, Err(StoreError::LostClaim { .. })),
        "{late:?}"
    );
    let record = store.get("acme", "ORD-8").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Queued);
}
