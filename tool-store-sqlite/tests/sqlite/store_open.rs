//! Opening a file: where it may be, what it may already hold, and several handles on it.

use std::time::Duration;

use futures_util::future::join_all;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};
use toolgate_core::store::prelude::*;
use toolgate_core::store::{Claim, ClaimRequest, ClaimToken, OperationState, StoreError, Success};
use toolgate_store_sqlite::SqliteStore;

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

fn backend_message(opened: Result<SqliteStore, StoreError>) -> String {
    match opened {
        Err(StoreError::Backend { what, .. }) => what,
        Err(other) => panic!("expected a backend error, got {other:?}"),
        Ok(store) => panic!("expected the open to fail, got {store:?}"),
    }
}

/// Runs `sql` on `path` through a plain connection, as another program would.
async fn write_raw(path: &std::path::Path, sql: &'static str) {
    let mut conn = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .connect()
        .await
        .expect("a plain connection");
    sqlx::raw_sql(sql).execute(&mut conn).await.expect(sql);
    conn.close().await.expect("close");
}

#[tokio::test]
async fn opening_in_a_directory_that_does_not_exist_says_which() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let missing = dir.path().join("no-such-dir");
    let path = missing.join("operations.db");
    let opened = SqliteStore::open(&path).await;
    let err = opened.as_ref().expect_err("the directory is missing");
    let source = std::error::Error::source(err).expect("SQLite's error is kept as the source");
    assert!(source.downcast_ref::<sqlx::Error>().is_some(), "{source:?}");
    let message = backend_message(opened);
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(
        message.contains(&format!(
            "the directory {} does not exist",
            missing.display()
        )),
        "{message}"
    );
    assert!(!missing.exists(), "the directory is not created");
}

#[tokio::test]
async fn a_second_store_on_the_same_file_sees_and_settles_the_first_ones_records()
-> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    let first = SqliteStore::open(&path).await?;
    let Claim::Acquired { attempt, .. } = first.claim(request("refund")).await? else {
        panic!("a new key is acquired");
    };

    let second = SqliteStore::open(&path).await?;
    let seen = second.get("acme", "refund").await?.expect("shared file");
    assert_eq!(seen.state, OperationState::Processing);
    let me = ClaimToken {
        tenant: "acme".into(),
        key: "refund".into(),
        attempt,
    };
    second
        .succeed(Success {
            owner: &me,
            result: r#""done""#,
            now_ms: T0 + 1,
            audit: None,
        })
        .await?;
    let Claim::Existing(record) = first.claim(request("refund")).await? else {
        panic!("the second store's outcome is seen by the first");
    };
    assert_eq!(record.result.as_deref(), Some(r#""done""#));

    // Both stores claiming one key at once: still exactly one owner.
    let claims = join_all((0..8).map(|i| {
        let store = if i % 2 == 0 { &first } else { &second };
        store.claim(request("hot"))
    }))
    .await;
    let acquired = claims
        .iter()
        .filter(|c| matches!(c, Ok(Claim::Acquired { .. })))
        .count();
    assert_eq!(acquired, 1, "{claims:?}");
    assert!(claims.iter().all(Result::is_ok), "{claims:?}");
    Ok(())
}

#[tokio::test]
async fn migrating_again_or_reopening_changes_nothing() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    let store = SqliteStore::open(&path).await?;
    store.claim(request("refund")).await?;
    store.migrate().await?;
    store.migrate().await?;
    let before = store.get("acme", "refund").await?;
    store.close().await;

    let store = SqliteStore::open(&path).await?;
    store.migrate().await?;
    assert_eq!(store.get("acme", "refund").await?, before);
    assert!(before.is_some());
    Ok(())
}

#[tokio::test]
async fn a_file_of_another_program_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("theirs.db");
    write_raw(
        &path,
        "PRAGMA application_id = 42; CREATE TABLE theirs (id INTEGER PRIMARY KEY);",
    )
    .await;
    let message = backend_message(SqliteStore::open(&path).await);
    assert!(
        message.contains("not a toolgate operation store"),
        "{message}"
    );
}

#[tokio::test]
async fn a_schema_newer_than_this_build_is_refused() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    SqliteStore::open(&path).await?.close().await;
    write_raw(&path, "PRAGMA user_version = 1000;").await;
    let message = backend_message(SqliteStore::open(&path).await);
    assert!(message.contains("schema is version 1000"), "{message}");
    Ok(())
}

#[tokio::test]
async fn a_file_that_is_not_sqlite_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("notes.txt");
    std::fs::write(
        &path,
        "not a database, just some text that is long enough ".repeat(20),
    )
    .expect("write a text file");
    let message = backend_message(SqliteStore::open(&path).await);
    assert!(
        message.contains("cannot open the SQLite operation store"),
        "{message}"
    );
}
