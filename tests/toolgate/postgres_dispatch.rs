//! Writes through the dispatcher on the PostgreSQL store, raced: 32 tasks of one process
//! submitting the same call at once, and two OS processes submitting the same 500 calls. The
//! tool records each run as a row of the `ledger` table in the store's database, so the count is
//! authoritative and shared by every process.
//!
//! Needs a PostgreSQL server: `toolgate_test_postgres::test_database` finds or starts one
//! and gives each test a fresh database (a test fails, never skips, without one).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Barrier, watch};
use tokio::task::JoinSet;
use toolgate::prelude::*;
use toolgate::store::PostgresStore;
use toolgate_store_postgres::sqlx::{self, PgPool};
use toolgate_test::{ControlledStore, Request, Tally};
use toolgate_test_postgres::{ChildTest, test_database};

/// One row a run of the tool. No unique key, so that a second run of an operation shows as a
/// second row instead of failing.
const CREATE_LEDGER: &str = "CREATE TABLE ledger (entry TEXT NOT NULL, \
     idempotency_key TEXT NOT NULL, pid BIGINT NOT NULL)";

/// What the tool reaches through its context.
struct Ledger {
    pool: PgPool,
    /// Runs of the tool in this process.
    runs: AtomicU32,
    /// When set, a run waits until the store has answered this many claims.
    gate: Option<(watch::Receiver<Tally>, usize)>,
}

impl Ledger {
    fn new(pool: PgPool) -> Ledger {
        Ledger {
            pool,
            runs: AtomicU32::new(0),
            gate: None,
        }
    }
}

/// Post an amount to the ledger.
#[tool(side_effect = "write", key = [entry], timeout = "10s")]
async fn post_entry(
    ctx: &Ctx,
    key: &IdempotencyKey,
    entry: String,
    amount: i64,
) -> Result<Value, ToolError> {
    let ledger = ctx.state::<Arc<Ledger>>()?;
    ledger.runs.fetch_add(1, Ordering::SeqCst);
    if let Some((answered, all)) = &ledger.gate {
        // Bounded by the tool's timeout: a claim that never answers fails the test.
        let mut answered = answered.clone();
        answered
            .wait_for(|tally| tally.of(Request::Claim) >= *all as u64)
            .await
            .map_err(|_| ToolError::internal("the claim counter was dropped"))?;
    }
    let key = key.as_str();
    sqlx::query("INSERT INTO ledger (entry, idempotency_key, pid) VALUES ($1, $2, $3)")
        .bind(&entry)
        .bind(key)
        .bind(i64::from(std::process::id()))
        .execute(&ledger.pool)
        .await
        .map_err(|e| ToolError::internal(format!("the ledger insert failed: {e}")))?;
    Ok(json!({"entry": entry, "amount": amount, "pid": std::process::id()}))
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register::<post_entry>().unwrap();
    registry
}

/// Connects the store (migrating it) and creates the ledger.
async fn store_with_ledger(url: &str) -> PostgresStore {
    // 32 calls at once share the pool for their claims, their waits on the running one, their
    // audit records and the tool's ledger insert: on a loaded machine a call may wait longer than
    // the store's default bound (3 s) for a connection, which this test is not about.
    let store = PostgresStore::options(url)
        .acquire_timeout(Duration::from_secs(30))
        .connect()
        .await
        .expect("connect");
    sqlx::query(CREATE_LEDGER)
        .execute(store.pool())
        .await
        .expect("create the ledger");
    store
}

/// `(rows, distinct keys)` of the ledger, and `(rows, succeeded at attempt 1)` of the store.
async fn counts(pool: &PgPool) -> ((i64, i64), (i64, i64)) {
    let ledger = sqlx::query_as("SELECT count(*), count(DISTINCT idempotency_key) FROM ledger")
        .fetch_one(pool)
        .await
        .unwrap();
    let operations = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE state = 'succeeded' AND attempt = 1) \
         FROM toolgate_operations",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    (ledger, operations)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_tasks_submitting_one_write_run_it_once() {
    const TASKS: usize = 32;
    let store = store_with_ledger(&test_database().await).await;
    // The tool's one run waits until every claim was answered, so all 31 duplicates meet the
    // operation while it is `processing`: the race the store must win is the hardest one.
    let counting = Arc::new(ControlledStore::new(Arc::new(store.clone())));
    let ledger = Arc::new(Ledger {
        gate: Some((counting.watch_answered(), TASKS)),
        ..Ledger::new(store.pool().clone())
    });
    let dispatcher = Dispatcher::builder(registry())
        .state(ledger.clone())
        .store(counting)
        .build();
    let session = Arc::new(crate::support::session());
    let start = Arc::new(Barrier::new(TASKS));
    let mut tasks = JoinSet::new();
    for i in 0..TASKS {
        let (dispatcher, session, start) = (dispatcher.clone(), session.clone(), start.clone());
        tasks.spawn(async move {
            let call = ToolCall::new(
                format!("call_{i}"),
                "post_entry",
                json!({"entry": "ORD-1001", "amount": 500}),
            );
            start.wait().await;
            dispatcher.dispatch(&session, call).await.unwrap().result
        });
    }
    let results = tasks.join_all().await;

    assert_eq!(ledger.runs.load(Ordering::SeqCst), 1, "the body ran once");
    assert_eq!(counts(store.pool()).await, ((1, 1), (1, 1)));
    let data = json!({"entry": "ORD-1001", "amount": 500, "pid": std::process::id()});
    let (mut fresh, mut replayed, mut in_progress) = (0, 0, 0);
    for result in &results {
        match (result.status, result.replayed) {
            (Status::Succeeded, again) => {
                assert_eq!(result.to_json()["data"], data, "the one outcome");
                if again { replayed += 1 } else { fresh += 1 }
            }
            (Status::InProgress, _) => in_progress += 1,
            _ => panic!("neither the outcome nor in_progress: {}", result.to_json()),
        }
    }
    assert_eq!(fresh, 1, "one caller ran it");
    assert_eq!(replayed + in_progress, TASKS - 1);
}

/// Set, to the database's URL, only in the children of the two-process test.
const CHILD_DATABASE: &str = "TOOLGATE_TEST_CHILD_DATABASE_URL";
/// The test each child runs.
const CHILD_TEST: &str = "postgres_dispatch::child_of_two_processes_submitting_the_same_writes";
/// Printed by a child before each turn, which it starts when the parent says go.
const READY: &str = "toolgate-child: ready";
/// Starts a child's summary line: `fresh=… replayed=… in_progress=… pid=…`.
const SUMMARY: &str = "toolgate-child: summary";
const KEYS: usize = 500;
/// Calls a child submits at once, as one turn.
const BATCH: usize = 50;

/// What one child saw.
#[derive(Debug, Default, PartialEq)]
struct Summary {
    fresh: usize,
    replayed: usize,
    in_progress: usize,
    pid: u32,
}

impl Summary {
    fn line(&self) -> String {
        format!(
            "{SUMMARY} fresh={} replayed={} in_progress={} pid={}",
            self.fresh, self.replayed, self.in_progress, self.pid
        )
    }

    fn parse(line: &str) -> Option<Summary> {
        let mut summary = Summary::default();
        for field in line.strip_prefix(SUMMARY)?.split_whitespace() {
            let (name, value) = field.split_once('=')?;
            let slot = match name {
                "fresh" => &mut summary.fresh,
                "replayed" => &mut summary.replayed,
                "in_progress" => &mut summary.in_progress,
                "pid" => {
                    summary.pid = value.parse().ok()?;
                    continue;
                }
                _ => return None,
            };
            *slot = value.parse().ok()?;
        }
        Some(summary)
    }
}

/// One child process running [`CHILD_TEST`].
#[test]
fn two_processes_submitting_the_same_500_writes_run_each_once() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let url = runtime.block_on(async {
        let url = test_database().await;
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
            .await
            .unwrap();
        sqlx::query(CREATE_LEDGER).execute(&mut conn).await.unwrap();
        url
    });
    // Both connect (and migrate) at once; then they submit each turn in lockstep, so that the
    // same 50 calls race in both processes, whichever process was faster at the turn before.
    let spawn = || ChildTest::spawn(CHILD_TEST, &[(CHILD_DATABASE, &url)]);
    let mut children = [spawn(), spawn()];
    for _turn in 0..KEYS / BATCH {
        for child in &mut children {
            child.expect(READY);
        }
        for child in &mut children {
            child.send("go");
        }
    }
    let summaries = children.map(|child| {
        let line = child.finish(SUMMARY);
        Summary::parse(&line).unwrap_or_else(|| panic!("cannot read {line:?}"))
    });
    eprintln!("children: {summaries:?}");

    for summary in &summaries {
        assert_eq!(
            summary.fresh + summary.replayed + summary.in_progress,
            KEYS,
            "one result a call: {summary:?}"
        );
    }
    assert!(
        summaries.iter().all(|s| s.fresh > 0),
        "both processes ran some of the calls, or they did not race: {summaries:?}"
    );
    assert_eq!(
        summaries.iter().map(|s| s.fresh).sum::<usize>(),
        KEYS,
        "every key ran in exactly one of the processes: {summaries:?}"
    );
    runtime.block_on(async {
        let pool = PgPool::connect(&url).await.unwrap();
        let (ledger, operations) = counts(&pool).await;
        assert_eq!(ledger, (KEYS as i64, KEYS as i64), "one ledger row a key");
        assert_eq!(
            operations,
            (KEYS as i64, KEYS as i64),
            "all succeeded at once"
        );
        for summary in &summaries {
            let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM ledger WHERE pid = $1")
                .bind(i64::from(summary.pid))
                .fetch_one(&pool)
                .await
                .unwrap();
            assert_eq!(rows as usize, summary.fresh, "{summary:?}");
        }
    });
}

/// A child of the test above: connects, submits the 500 calls in turns of 50, each when the
/// parent says go on stdin, and prints its summary. Run alone (without the variable) it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_of_two_processes_submitting_the_same_writes() {
    let Ok(url) = std::env::var(CHILD_DATABASE) else {
        return;
    };
    // 50 calls at once share this pool with their tool's ledger inserts: on a loaded machine a
    // call may wait longer than the store's default bound (3 s) for a connection, which this
    // test is not about.
    let store = PostgresStore::options(&url)
        .acquire_timeout(Duration::from_secs(30))
        .connect()
        .await
        .expect("connect");
    let ledger = Arc::new(Ledger::new(store.pool().clone()));
    // One run of 1,000 calls: more than the default limits of a run allow, which this test is
    // not about.
    let dispatcher = Dispatcher::builder(registry())
        .state(ledger.clone())
        .store(Arc::new(store))
        .run_limits(RunLimits::UNLIMITED)
        .build();
    // The same tenant and run in both processes: the same idempotency keys.
    let session = crate::support::session_in("run-two-processes");
    let pid = std::process::id();
    let mut summary = Summary {
        pid,
        ..Summary::default()
    };
    let work = async {
        for first in (0..KEYS).step_by(BATCH) {
            wait_for_go().await;
            let calls = (first..first + BATCH)
                .map(|i| {
                    let args = json!({"entry": format!("entry-{i}"), "amount": i});
                    ToolCall::new(format!("call_{i}"), "post_entry", args)
                })
                .collect();
            let reports = dispatcher.dispatch_turn(&session, calls).await.unwrap();
            for (i, report) in (first..).zip(reports) {
                let result = report.result;
                let data = result.to_json()["data"].clone();
                match (result.status, result.replayed) {
                    (Status::Succeeded, false) => {
                        assert_eq!(
                            data,
                            json!({"entry": format!("entry-{i}"), "amount": i, "pid": pid})
                        );
                        summary.fresh += 1;
                    }
                    (Status::Succeeded, true) => {
                        assert_eq!(
                            (&data["entry"], &data["amount"]),
                            (&json!(format!("entry-{i}")), &json!(i)),
                            "the outcome of this call"
                        );
                        summary.replayed += 1;
                    }
                    (Status::InProgress, _) => summary.in_progress += 1,
                    _ => panic!("call {i}: {}", result.to_json()),
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), work)
        .await
        .expect("the child finishes within a minute");
    assert_eq!(
        ledger.runs.load(Ordering::SeqCst) as usize,
        summary.fresh,
        "every run here answered a fresh result"
    );
    println!("{}", summary.line());
}

/// Says the child is ready for its next turn and waits until the parent says go.
async fn wait_for_go() {
    println!("{READY}");
    let go = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    });
    assert_eq!(
        go.await.unwrap().unwrap().trim(),
        "go",
        "the parent went away"
    );
}
