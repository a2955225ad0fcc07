//! Approved operations raced by two OS processes on one PostgreSQL database: one plays the model
//! calling each approved refund again, the other the application's runner of approved operations.
//! The tool records each run as a row of the `ledger` table in the store's database, so the count
//! is authoritative and shared by both processes: each operation runs exactly once.
//!
//! Needs a PostgreSQL server: `toolgate_test_postgres::test_database` finds or starts one
//! and gives each test a fresh database (a test fails, never skips, without one).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::dispatch::Clock;
use toolgate::prelude::*;
use toolgate::store::{
    ApprovalQuery, ApprovalStatus, DecideRequest, Decided, PostgresStore, Verdict,
};
use toolgate_store_postgres::sqlx::{self, PgPool};
use toolgate_test_postgres::{ChildTest, test_database};

const CREATE_LEDGER: &str = "CREATE TABLE ledger (order_id TEXT NOT NULL, pid BIGINT NOT NULL)";

/// Set, to the database's URL, only in the children; the value of [`ROLE`] says which one.
const CHILD_DATABASE: &str = "TOOLGATE_TEST_APPROVAL_CHILD_URL";
const ROLE: &str = "TOOLGATE_TEST_APPROVAL_CHILD_ROLE";
const CHILD_TEST: &str = "postgres_approval_processes::child_racing_for_approved_operations";
const READY: &str = "toolgate-child: ready";
const DONE: &str = "toolgate-child: done";
/// Approved operations raced.
const OPERATIONS: usize = 40;

/// The store's pool, for the tool's ledger rows.
struct Ledger(PgPool);

/// Refund an order.
#[tool(side_effect = "write", permission = "refund:create", approval_over = 5000,
       approver = "refund:approve", key = [order_id], timeout = "10s")]
async fn refund(ctx: &Ctx, order_id: String, amount: f64) -> Result<Value, ToolError> {
    let ledger = ctx.state::<Arc<Ledger>>()?;
    sqlx::query("INSERT INTO ledger (order_id, pid) VALUES ($1, $2)")
        .bind(&order_id)
        .bind(i64::from(std::process::id()))
        .execute(&ledger.0)
        .await
        .map_err(|err| ToolError::unavailable(err.to_string()))?;
    Ok(json!({"order_id": order_id, "amount": amount}))
}

async fn dispatcher(url: &str) -> Dispatcher {
    let store = PostgresStore::options(url)
        .acquire_timeout(Duration::from_secs(30))
        .connect()
        .await
        .expect("connect");
    let mut registry = Registry::new();
    registry.register::<refund>().unwrap();
    Dispatcher::builder(registry)
        .state(Arc::new(Ledger(store.pool().clone())))
        .store(Arc::new(store))
        .run_limits(RunLimits::UNLIMITED)
        .build()
}

fn agent() -> Session {
    Session::new(
        crate::support::agent().with_permissions(["refund:create"]),
        "run-approvals",
    )
}

fn ask(i: usize) -> ToolCall {
    let args = json!({"order_id": format!("ORD-{i}"), "amount": 8000});
    ToolCall::new(format!("call_{i}"), "refund", args)
}

#[test]
fn the_models_calls_and_another_processs_runner_run_each_approval_once() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let url = runtime.block_on(async {
        let url = test_database().await;
        let pool = PgPool::connect(&url).await.unwrap();
        sqlx::query(CREATE_LEDGER).execute(&pool).await.unwrap();
        // Every refund asked and approved before the race.
        let dispatcher = dispatcher(&url).await;
        let store = dispatcher.store().unwrap();
        let manager = toolgate_test::operator("acme", "manager", &["refund:approve"]);
        for i in 0..OPERATIONS {
            let asked = dispatcher.dispatch(&agent(), ask(i)).await.unwrap().result;
            assert_eq!(
                asked.status,
                Status::AwaitingApproval,
                "{}",
                asked.to_json_string()
            );
        }
        let query = ApprovalQuery {
            status: Some(ApprovalStatus::Pending),
            ..ApprovalQuery::default()
        };
        for approval in store.list_approvals(query).await.unwrap() {
            let request = DecideRequest {
                id: &approval.id,
                approver: &manager,
                verdict: Verdict::Approve,
                reason: "checked",
                now_ms: toolgate::dispatch::SystemClock.now_ms(),
            };
            let decided = toolgate::approval::decide(store, request).await.unwrap();
            assert!(matches!(decided, Decided::Applied(_)), "{decided:?}");
        }
        url
    });
    let spawn = |role| ChildTest::spawn(CHILD_TEST, &[(CHILD_DATABASE, &url), (ROLE, role)]);
    let mut children = [spawn("model"), spawn("runner")];
    for child in &mut children {
        child.expect(READY);
    }
    for child in &mut children {
        child.send("go");
    }
    for child in children {
        child.finish(DONE);
    }
    runtime.block_on(async {
        let pool = PgPool::connect(&url).await.unwrap();
        let (rows, orders, processes): (i64, i64, i64) = sqlx::query_as(
            "SELECT count(*), count(DISTINCT order_id), count(DISTINCT pid) FROM ledger",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(
            (rows, orders),
            (OPERATIONS as i64, OPERATIONS as i64),
            "each ran once"
        );
        eprintln!("the runs were shared by {processes} process(es)");
        let succeeded: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM toolgate_operations WHERE state = 'succeeded'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(succeeded, OPERATIONS as i64);
    });
}

/// A child of the test above: the model calling every approved refund again, or the runner
/// running them. Run alone (without the variable) it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_racing_for_approved_operations() {
    let (Ok(url), Ok(role)) = (std::env::var(CHILD_DATABASE), std::env::var(ROLE)) else {
        return;
    };
    let dispatcher = dispatcher(&url).await;
    println!("{READY}");
    let go = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    });
    assert_eq!(go.await.unwrap().unwrap().trim(), "go");
    let work = async {
        match role.as_str() {
            "model" => {
                for i in 0..OPERATIONS {
                    let again = dispatcher.dispatch(&agent(), ask(i)).await.unwrap().result;
                    // It ran here, or the runner ran it (a replay), or is running it now.
                    assert!(
                        matches!(again.status, Status::Succeeded | Status::InProgress),
                        "{}",
                        again.to_json_string()
                    );
                }
            }
            _ => loop {
                let pass = dispatcher.run_approved(4).await.unwrap();
                for done in &pass.executed {
                    assert!(
                        matches!(done.result.status, Status::Succeeded | Status::InProgress),
                        "{}",
                        done.result.to_json_string()
                    );
                }
                if pass.executed.is_empty() {
                    break;
                }
            },
        }
    };
    tokio::time::timeout(Duration::from_secs(120), work)
        .await
        .expect("the child finishes within two minutes");
    println!("{DONE}");
}
