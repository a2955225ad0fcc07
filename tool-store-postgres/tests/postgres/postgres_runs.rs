//! The run ledger on a real PostgreSQL server: turns and retries of one run racing from many
//! tasks on two pools (as two processes would) never grant past the budget, a new connection
//! (a restarted process) reads the run as it was left, and retention deletes a run whole.

use tokio::task::JoinSet;
use toolgate_core::ErrorKind;
use toolgate_core::RunLimits;
use toolgate_core::run::RunAborted;
use toolgate_core::store::prelude::*;
use toolgate_core::store::{AbortRequest, AttemptCharge, FailureNote};
use toolgate_core::store::{RunKey, StoreError, TurnGrant, TurnRequest};
use toolgate_store_postgres::sqlx::postgres::PgPoolOptions;
use toolgate_store_postgres::{PostgresStore, sqlx};
use toolgate_test_postgres::test_database;

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

/// Two processes of 8 tasks each, every task alternating 10 times between a turn of one call
/// and a retry, on one run whose budget is 50: exactly 50 attempts are granted, and every turn
/// is counted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_and_retries_racing_from_two_processes_never_grant_past_the_budget() {
    let url = test_database().await;
    let processes = [process_store(&url).await, process_store(&url).await];
    let limits = RunLimits::UNLIMITED.retry_budget(50);
    let mut tasks = JoinSet::new();
    for task in 0..16 {
        let store = processes[task % 2].clone();
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
        granted += result.expect("every turn and retry is answered");
    }
    assert_eq!(granted, 50);
    let stored = processes[0]
        .run(RUN)
        .await
        .unwrap()
        .expect("the run is stored");
    assert_eq!((stored.steps, stored.tool_calls), (80, 80));
    assert_eq!(stored.attempts.get("issue_refund"), Some(&50));
}

/// What one process wrote of a run, a process started later reads and goes on from.
#[tokio::test]
async fn a_new_process_goes_on_from_the_runs_counters_and_abort() -> Result<(), StoreError> {
    let url = test_database().await;
    let limits = RunLimits::UNLIMITED.max_steps(3).retry_budget(3);
    let going = RunKey {
        tenant: "acme",
        run_id: "run-2",
    };
    let abort = RunAborted {
        kind: ErrorKind::PermissionDenied,
        reason: "get_order needs orders:read".into(),
    };
    let before = {
        let store = PostgresStore::connect(&url).await?;
        for run in [RUN, going] {
            store
                .begin_turn(turn(run, &[("issue_refund", 2)], limits))
                .await?;
            store
                .note_failure(FailureNote {
                    run,
                    tool: "issue_refund",
                    request_hash: "h1",
                    now_ms: T0 + 1,
                })
                .await?;
        }
        store
            .abort_run(AbortRequest {
                run: RUN,
                abort: &abort,
                now_ms: T0 + 2,
            })
            .await?;
        let before = [store.run(RUN).await?, store.run(going).await?];
        store.close().await;
        before
    };
    let store = PostgresStore::connect(&url).await?;
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
    Ok(())
}

/// Retention deletes a run's attempts and failed calls with it: no row of it is left.
#[tokio::test]
async fn a_purged_run_leaves_no_row_behind() -> Result<(), StoreError> {
    let store = PostgresStore::connect(&test_database().await).await?;
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
    for table in [
        "toolgate_runs",
        "toolgate_run_attempts",
        "toolgate_run_failures",
    ] {
        assert_eq!(rows(&store, table).await, 1, "{table}");
    }
    store.purge(T0 + 1).await?;
    for table in [
        "toolgate_runs",
        "toolgate_run_attempts",
        "toolgate_run_failures",
    ] {
        assert_eq!(rows(&store, table).await, 0, "{table}");
    }
    Ok(())
}

/// The number of rows in `table`.
async fn rows(store: &PostgresStore, table: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
        .fetch_one(store.pool())
        .await
        .expect("count rows")
}
