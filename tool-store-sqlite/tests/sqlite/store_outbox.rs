//! The outbox transaction on a real file: the tool's own row, written with the store's
//! connection inside the transaction, commits with the operation and its event or not at all;
//! a claim of the same key waits for the transaction and then sees what it committed.

use std::path::Path;
use std::time::Duration;

use futures_util::FutureExt;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqliteConnection};
use toolgate_core::store::prelude::*;
use toolgate_core::store::{
    Begun, Claim, ClaimRequest, ClaimToken, Commit, NewEvent, OperationState, StoreError,
    StoreTransaction,
};
use toolgate_store_sqlite::SqliteStore;

const T0: i64 = 1_700_000_000_000;

/// The tool's result, as the model reads it.
const ACCEPTED: &str = r#"{"refund_request":"accepted"}"#;

/// A plain connection to `path`: a second reader, outside the store.
async fn connect(path: &Path) -> SqliteConnection {
    SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .expect("a plain connection")
}

/// A new store at `path` with the application's own table.
async fn store(path: &Path) -> SqliteStore {
    let store = SqliteStore::open(path).await.expect("open");
    let mut conn = connect(path).await;
    sqlx::raw_sql(
        "CREATE TABLE refund_requests (order_id TEXT NOT NULL PRIMARY KEY, amount INTEGER NOT NULL)",
    )
    .execute(&mut conn)
    .await
    .expect("the application's table");
    conn.close().await.expect("close");
    store
}

fn request(key: &str, now_ms: i64) -> ClaimRequest<'_> {
    ClaimRequest {
        tenant: "acme",
        key,
        tool: "issue_refund",
        request_hash: "h1",
        unkeyed: None,
        arguments: r#"{"order_id":"ORD-1"}"#,
        now_ms,
        lease: Duration::from_secs(30),
        takeover: false,
        approval: None,
    }
}

/// Begins `key`, which must open a transaction, and writes the tool's row for `key` in it.
async fn begin_and_write(store: &SqliteStore, key: &str) -> (Box<dyn StoreTransaction>, u32) {
    let Begun::Open {
        mut tx, attempt, ..
    } = store.begin(request(key, T0)).await.expect("begin")
    else {
        panic!("{key}: a new key opens a transaction");
    };
    assert_eq!(tx.store_name(), "SQLite");
    let conn = tx
        .connection()
        .downcast_mut::<SqliteConnection>()
        .expect("the SQLite store's connection");
    sqlx::query("INSERT INTO refund_requests (order_id, amount) VALUES (?1, 500)")
        .bind(key)
        .execute(&mut *conn)
        .await
        .expect("the tool's row");
    (tx, attempt)
}

/// What a second connection sees of `key`: its operation's state, whether the tool's row and
/// the event exist.
async fn seen(path: &Path, key: &str) -> (Option<String>, bool, Option<String>) {
    let mut conn = connect(path).await;
    let state = sqlx::query_scalar(
        "SELECT state FROM operations WHERE tenant_id = 'acme' AND idempotency_key = ?1",
    )
    .bind(key)
    .fetch_optional(&mut conn)
    .await
    .expect("the operation");
    let row: Option<i64> = sqlx::query_scalar("SELECT 1 FROM refund_requests WHERE order_id = ?1")
        .bind(key)
        .fetch_optional(&mut conn)
        .await
        .expect("the tool's row");
    let event = sqlx::query_scalar(
        "SELECT status FROM outbox WHERE tenant_id = 'acme' AND idempotency_key = ?1",
    )
    .bind(key)
    .fetch_optional(&mut conn)
    .await
    .expect("the event");
    conn.close().await.expect("close");
    (state, row.is_some(), event)
}

fn commit<'a>(owner: &'a ClaimToken, event: &'a NewEvent) -> Commit<'a> {
    Commit {
        owner,
        result: ACCEPTED,
        event: Some(event),
        now_ms: T0 + 1,
    }
}

/// A rolled-back transaction, and a dropped one, leave no operation, no row of the tool and no
/// event; the store goes on, and nothing of them is committed later.
#[tokio::test]
async fn a_rolled_back_or_dropped_transaction_leaves_nothing() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    let store = store(&path).await;

    let (tx, _) = begin_and_write(&store, "rolled_back").await;
    tx.rollback().await?;
    let (tx, _) = begin_and_write(&store, "dropped").await;
    drop(tx);
    // The writer is free again: a claim commits, and does not commit the dropped body with it.
    assert!(matches!(
        store.claim(request("after", T0 + 2)).await?,
        Claim::Acquired { attempt: 1, .. }
    ));
    for key in ["rolled_back", "dropped"] {
        assert_eq!(seen(&path, key).await, (None, false, None), "{key}");
        assert_eq!(store.get("acme", key).await?, None, "{key}");
    }
    assert_eq!(
        seen(&path, "after").await,
        (Some("processing".into()), false, None)
    );
    store.close().await;
    Ok(())
}

/// A committed transaction makes the operation `queued` with the tool's result, the tool's row
/// and the `pending` event visible together to another connection.
#[tokio::test]
async fn a_committed_transaction_writes_all_three() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    let store = store(&path).await;

    let (tx, attempt) = begin_and_write(&store, "k1").await;
    assert_eq!(attempt, 1);
    let owner = ClaimToken {
        tenant: "acme".into(),
        key: "k1".into(),
        attempt,
    };
    let event = NewEvent {
        payload: r#"{"order_id":"k1","amount":500}"#.into(),
    };
    tx.commit(commit(&owner, &event)).await?;
    assert_eq!(
        seen(&path, "k1").await,
        (Some("queued".into()), true, Some("pending".into()))
    );
    let record = store.get("acme", "k1").await?.expect("committed");
    assert_eq!(record.result.as_deref(), Some(ACCEPTED));
    store.close().await;
    Ok(())
}

/// While the transaction is open, a claim of the same key waits for it (the store's one writer
/// is the transaction's); once it commits, the claim answers the committed record.
#[tokio::test]
async fn a_claim_waits_for_the_open_transaction_and_sees_its_commit() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    let store = store(&path).await;

    let (tx, attempt) = begin_and_write(&store, "k1").await;
    let racing = store.clone();
    let mut claim = tokio::spawn(async move { racing.claim(request("k1", T0 + 1)).await });
    for _ in 0..50 {
        tokio::task::yield_now().await;
        assert!(
            (&mut claim).now_or_never().is_none(),
            "the claim must wait for the open transaction"
        );
    }
    let owner = ClaimToken {
        tenant: "acme".into(),
        key: "k1".into(),
        attempt,
    };
    let event = NewEvent {
        payload: "{}".into(),
    };
    tx.commit(commit(&owner, &event)).await?;
    let answered = tokio::time::timeout(Duration::from_secs(10), claim)
        .await
        .expect("the claim ends once the transaction did")
        .expect("the claim's task")?;
    let Claim::Existing(record) = answered else {
        panic!("the committed record is answered, got {answered:?}");
    };
    assert_eq!(record.state, OperationState::Queued);
    assert_eq!(record.result.as_deref(), Some(ACCEPTED));
    store.close().await;
    Ok(())
}
