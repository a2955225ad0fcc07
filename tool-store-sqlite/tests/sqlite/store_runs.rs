//! The run ledger in a real file: kept across reopening (a restarted process), never granting
//! past a budget under concurrent turns and retries, deleted whole by retention, and added to a
//! file of the first schema version by migration.

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};
use tokio::task::JoinSet;
use toolgate_core::ErrorKind;
use toolgate_core::RunLimits;
use toolgate_core::run::RunAborted;
use toolgate_core::store::prelude::*;
use toolgate_core::store::{AbortRequest, AttemptCharge, FailureNote};
use toolgate_core::store::{RunKey, RunRecord, StoreError, TurnGrant, TurnRequest};
use toolgate_store_sqlite::SqliteStore;

const T0: i64 = 1_700_000_000_000;

const RUN: RunKey<'static> = RunKey {
    tenant: "acme",
    run_id: "run-1",
};

fn turn<'a>(run: RunKey<'a>, tools: &'a [(&'a str, u32)], limits: RunLimits) -> TurnRequest<'a> {
    TurnRequest {
        run,
        tools,
        limits,
        now_ms: T0,
    }
}

/// The number of rows in `table`, read with a plain connection.
async fn rows(path: &std::path::Path, table: &str) -> i64 {
    let mut conn = SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .expect("a plain connection");
    let count = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
        .fetch_one(&mut conn)
        .await
        .expect("count rows");
    conn.close().await.expect("close");
    count
}

#[tokio::test]
async fn a_runs_counters_and_abort_survive_reopening_the_file() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    let limits = RunLimits::UNLIMITED.max_steps(3).retry_budget(4);
    let going = RunKey {
        tenant: "acme",
        run_id: "run-2",
    };
    let abort = RunAborted {
        kind: ErrorKind::PermissionDenied,
        reason: "get_order needs orders:read".into(),
    };
    let before = {
        let store = SqliteStore::open(&path).await?;
        for run in [RUN, going] {
            store
                .begin_turn(turn(run, &[("issue_refund", 2)], limits))
                .await?;
            assert!(
                store
                    .charge_attempt(AttemptCharge {
                        run,
                        tool: "issue_refund",
                        retry_budget: Some(4),
                        now_ms: T0 + 1
                    })
                    .await?
            );
            store
                .note_failure(FailureNote {
                    run,
                    tool: "issue_refund",
                    request_hash: "h1",
                    now_ms: T0 + 2,
                })
                .await?;
        }
        store
            .abort_run(AbortRequest {
                run: RUN,
                abort: &abort,
                now_ms: T0 + 3,
            })
            .await?;
        let before = [store.run(RUN).await?, store.run(going).await?];
        // Dropped without `close`: whatever was committed must be on disk already.
        before
    };
    let store = SqliteStore::open(&path).await?;
    assert_eq!([store.run(RUN).await?, store.run(going).await?], before);
    assert_eq!(
        store
            .begin_turn(turn(RUN, &[("issue_refund", 1)], limits))
            .await?,
        TurnGrant::Aborted(abort)
    );
    match store
        .begin_turn(turn(going, &[("issue_refund", 2)], limits))
        .await?
    {
        TurnGrant::Admitted(admission) => {
            assert_eq!(
                (admission.step, admission.granted.as_slice()),
                (2, &[1][..])
            );
            assert_eq!(admission.failed.len(), 1, "{:?}", admission.failed);
        }
        other => panic!("expected the second turn to run, got {other:?}"),
    }
    store.close().await;
    Ok(())
}

/// 16 tasks, each alternating 10 times between a turn of one call and a retry, on one run
/// whose budget is 50: exactly 50 attempts are granted, and every turn is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_turns_and_retries_never_grant_past_the_budget() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = SqliteStore::open(dir.path().join("operations.db")).await?;
    let limits = RunLimits::UNLIMITED.retry_budget(50);
    let mut tasks = JoinSet::new();
    for _ in 0..16 {
        let store = store.clone();
        tasks.spawn(async move {
            let mut granted = 0u32;
            for round in 0..10 {
                if round % 2 == 0 {
                    match store
                        .begin_turn(turn(RUN, &[("issue_refund", 1)], limits))
                        .await?
                    {
                        TurnGrant::Admitted(admission) => granted += admission.granted[0],
                        other => panic!("expected the turn to run, got {other:?}"),
                    }
                } else if store
                    .charge_attempt(AttemptCharge {
                        run: RUN,
                        tool: "issue_refund",
                        retry_budget: Some(50),
                        now_ms: T0,
                    })
                    .await?
                {
                    granted += 1;
                }
            }
            Ok::<u32, StoreError>(granted)
        });
    }
    let mut granted = 0;
    for result in tasks.join_all().await {
        granted += result?;
    }
    assert_eq!(granted, 50);
    let stored = store.run(RUN).await?.expect("the run is stored");
    assert_eq!((stored.steps, stored.tool_calls), (80, 80));
    assert_eq!(stored.attempts.get("issue_refund"), Some(&50));
    store.close().await;
    Ok(())
}

/// Retention deletes a run's attempts and failed calls with it: no row of it is left.
#[tokio::test]
async fn a_purged_run_leaves_no_row_behind() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    let store = SqliteStore::open(&path).await?;
    store
        .begin_turn(turn(RUN, &[("issue_refund", 1)], RunLimits::DEFAULT))
        .await?;
    store
        .note_failure(FailureNote {
            run: RUN,
            tool: "issue_refund",
            request_hash: "h1",
            now_ms: T0,
        })
        .await?;
    for table in ["runs", "run_attempts", "run_failures"] {
        assert_eq!(rows(&path, table).await, 1, "{table}");
    }
    store.purge(T0 + 1).await?;
    for table in ["runs", "run_attempts", "run_failures"] {
        assert_eq!(rows(&path, table).await, 0, "{table}");
    }
    store.close().await;
    Ok(())
}

/// A file of schema version 1 (written before runs were kept) gains the run tables on open and
/// keeps its records.
#[tokio::test]
async fn a_file_of_version_one_gains_the_run_ledger() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    SqliteStore::options(&path).migrate_to_version(1).await?;
    let mut conn = SqliteConnectOptions::new()
        .filename(&path)
        .connect()
        .await
        .expect("a plain connection");
    sqlx::raw_sql(
        "INSERT INTO operations (tenant_id, idempotency_key, tool, request_hash, arguments, \
                                 state, attempt, lease_until_ms, result, created_ms, updated_ms) \
         VALUES ('acme', 'k1', 'issue_refund', 'h1', '{}', 'succeeded', 1, 0, 'true', 0, 0);",
    )
    .execute(&mut conn)
    .await
    .expect("write a file of version 1");
    conn.close().await.expect("close");

    let store = SqliteStore::open(&path).await?;
    assert!(
        store.get("acme", "k1").await?.is_some(),
        "the record is kept"
    );
    store
        .begin_turn(turn(RUN, &[("get_order", 1)], RunLimits::DEFAULT))
        .await?;
    let stored = store.run(RUN).await?.expect("the run is stored");
    assert_eq!(
        stored,
        RunRecord {
            steps: 1,
            tool_calls: 1,
            attempts: [("get_order".to_owned(), 1)].into(),
            updated_ms: T0,
            ..RunRecord::default()
        }
    );
    store.close().await;
    Ok(())
}
