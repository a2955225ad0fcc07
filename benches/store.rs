//! The PostgreSQL operation store against the SQL it issues, sent directly through sqlx, in one
//! run on one fresh database:
//!
//! - `store/claim_complete`: a write's two store steps on a new key, `PostgresStore::claim` then
//!   `::succeed` (`toolgate`), against the same two statements (the claim's insert-or-read and
//!   the `UPDATE`) on a pool configured the same way (`sqlx`), with 1 and 16 tasks at once.
//!   Criterion's figure is the time per operation across all tasks; its inverse, the
//!   throughput, is printed too;
//! - `store/replay`: a claim of a key that already succeeded (what a duplicate call costs, one
//!   statement) against one `SELECT` of the row.
//!
//! The figure that matters is the ratio within each group. Needs a PostgreSQL server, found or
//! started by `toolgate_test_postgres` (or `DATABASE_URL`). Run with
//! `cargo bench --bench store`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;
use toolgate::store::PostgresStore;
use toolgate::store::prelude::*;
use toolgate::store::{Claim, ClaimRequest, ClaimToken, OperationState, Success};
use toolgate_store_postgres::sqlx::postgres::{PgPool, PgPoolOptions};
use toolgate_store_postgres::sqlx::{self, Row};
use toolgate_test_postgres::test_database;

const TENANT: &str = "acme";
const TOOL: &str = "issue_refund";
const HASH: &str = "sha256:9c1e";
const ARGUMENTS: &str = r#"{"amount":500,"order_id":"ORD-1001"}"#;
const RESULT: &str = r#"{"refund_id":"re_1"}"#;
const LEASE: Duration = Duration::from_secs(30);
/// The most tasks at once, and the connections of each pool.
const CONCURRENCY: [usize; 2] = [1, 16];
const POOL_SIZE: u32 = 16;

// The statements of tool-store-postgres/src/store.rs: `insert_or_read` (a claim: it inserts a
// new key, or reads the record under it), `succeed`, and the `get`-shaped read of one record.
const CLAIM: &str = "WITH inserted AS (INSERT INTO toolgate_operations (tenant_id, \
     idempotency_key, tool, request_hash, arguments, state, attempt, lease_until_ms, created_ms, \
     updated_ms) VALUES ($1, $2, $3, $4, $5, 'processing', 1, $6, $7, $7) \
     ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING 1) \
     SELECT EXISTS (SELECT FROM inserted) AS acquired, tenant_id, idempotency_key, tool, \
     request_hash, arguments, state, attempt, lease_until_ms, result, errors::text AS errors, \
     reconcile_tries, created_ms, updated_ms \
     FROM (VALUES (1)) AS one LEFT JOIN toolgate_operations \
     ON tenant_id = $1 AND idempotency_key = $2";
const SUCCEED: &str = "UPDATE toolgate_operations SET state = 'succeeded', result = $4, \
     updated_ms = $5 WHERE tenant_id = $1 AND idempotency_key = $2 \
     AND state = 'processing' AND attempt = $3";
const SELECT: &str = "SELECT tenant_id, idempotency_key, tool, request_hash, arguments, state, \
     attempt, lease_until_ms, result, errors::text AS errors, reconcile_tries, created_ms, \
     updated_ms FROM toolgate_operations WHERE tenant_id = $1 AND idempotency_key = $2";

/// Numbers the keys, so that every claim is of a new key.
static NEXT_KEY: AtomicU64 = AtomicU64::new(0);

fn next_key(path: &str) -> String {
    format!("{path}-{}", NEXT_KEY.fetch_add(1, Ordering::Relaxed))
}

fn now_ms() -> i64 {
    toolgate::dispatch::Clock::now_ms(&toolgate::dispatch::SystemClock)
}

fn request(key: &str, now_ms: i64) -> ClaimRequest<'_> {
    ClaimRequest {
        tenant: TENANT,
        key,
        tool: TOOL,
        request_hash: HASH,
        unkeyed: None,
        arguments: ARGUMENTS,
        now_ms,
        lease: LEASE,
        takeover: false,
        approval: None,
    }
}

/// Both paths' pools: the same options.
async fn pool(url: &str) -> PgPool {
    PgPoolOptions::new()
        .max_connections(POOL_SIZE)
        .connect(url)
        .await
        .expect("connect")
}

async fn with_toolgate(store: &PostgresStore) {
    let key = next_key("toolgate");
    let now = now_ms();
    let attempt = match store.claim(request(&key, now)).await.unwrap() {
        Claim::Acquired { attempt, .. } => attempt,
        other => panic!("a new key is acquired: {other:?}"),
    };
    let owner = ClaimToken {
        tenant: TENANT.to_owned(),
        key,
        attempt,
    };
    succeed(store, &owner, now + 1).await;
}

/// Records the success of the claim `owner` holds, with the bench's result.
async fn succeed(store: &PostgresStore, owner: &ClaimToken, now_ms: i64) {
    let success = Success {
        owner,
        result: RESULT,
        now_ms,
        audit: None,
    };
    store.succeed(success).await.unwrap();
}

async fn with_sqlx(pool: &PgPool) {
    let key = next_key("sqlx");
    let now = now_ms();
    let lease_until = request(&key, now).lease_until_ms();
    let claimed = sqlx::query(CLAIM)
        .bind(TENANT)
        .bind(&key)
        .bind(TOOL)
        .bind(HASH)
        .bind(ARGUMENTS)
        .bind(lease_until)
        .bind(now)
        .fetch_one(pool)
        .await
        .unwrap();
    assert!(claimed.get::<bool, _>("acquired"));
    let done = sqlx::query(SUCCEED)
        .bind(TENANT)
        .bind(&key)
        .bind(1_i64)
        .bind(RESULT)
        .bind(now + 1)
        .execute(pool)
        .await
        .unwrap();
    assert_eq!(done.rows_affected(), 1);
}

/// Runs `iters` operations split over `tasks` tasks at once; answers the time they all took.
fn concurrently<S, F, Fut>(runtime: &Runtime, iters: u64, tasks: usize, on: &S, op: F) -> Duration
where
    S: Clone + Send + 'static,
    F: Fn(S) -> Fut + Copy + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    runtime.block_on(async {
        let tasks = tasks as u64;
        let started = Instant::now();
        let mut set = JoinSet::new();
        for task in 0..tasks {
            let share = iters / tasks + u64::from(task < iters % tasks);
            let on = on.clone();
            set.spawn(async move {
                for _ in 0..share {
                    op(on.clone()).await;
                }
            });
        }
        set.join_all().await;
        started.elapsed()
    })
}

async fn state_of(store: &PostgresStore, key: &str) -> OperationState {
    store.get(TENANT, key).await.unwrap().expect("stored").state
}

fn store(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (store, raw) = runtime.block_on(async {
        let url = test_database().await;
        let store = PostgresStore::from_pool(pool(&url).await);
        store.migrate().await.expect("migrate");
        (store, pool(&url).await)
    });
    // Both paths leave the same record behind.
    runtime.block_on(async {
        let before = NEXT_KEY.load(Ordering::Relaxed);
        with_toolgate(&store).await;
        with_sqlx(&raw).await;
        let ours = store.get(TENANT, &format!("toolgate-{before}")).await;
        let theirs = store.get(TENANT, &format!("sqlx-{}", before + 1)).await;
        let (ours, theirs) = (ours.unwrap().unwrap(), theirs.unwrap().unwrap());
        assert_eq!(
            (ours.state, ours.attempt, ours.result.as_deref()),
            (theirs.state, theirs.attempt, theirs.result.as_deref())
        );
        assert_eq!(ours.state, OperationState::Succeeded);
    });

    let mut group = c.benchmark_group("store/claim_complete");
    group.throughput(Throughput::Elements(1));
    for tasks in CONCURRENCY {
        group.bench_with_input(BenchmarkId::new("toolgate", tasks), &tasks, |b, &tasks| {
            b.iter_custom(|iters| {
                concurrently(&runtime, iters, tasks, &store, |store| async move {
                    with_toolgate(&store).await
                })
            })
        });
        group.bench_with_input(BenchmarkId::new("sqlx", tasks), &tasks, |b, &tasks| {
            b.iter_custom(|iters| {
                concurrently(&runtime, iters, tasks, &raw, |pool| async move {
                    with_sqlx(&pool).await
                })
            })
        });
    }
    group.finish();

    // A key that succeeded; every claim of it again is a replay.
    let done = next_key("replayed");
    runtime.block_on(async {
        let now = now_ms();
        assert_eq!(
            store.claim(request(&done, now)).await.unwrap(),
            Claim::Acquired {
                attempt: 1,
                approved: None
            }
        );
        let owner = ClaimToken {
            tenant: TENANT.to_owned(),
            key: done.clone(),
            attempt: 1,
        };
        succeed(&store, &owner, now + 1).await;
        assert_eq!(state_of(&store, &done).await, OperationState::Succeeded);
    });
    let mut group = c.benchmark_group("store/replay");
    group.bench_function("toolgate", |b| {
        b.iter(|| {
            runtime.block_on(async {
                match store.claim(request(black_box(&done), now_ms())).await {
                    Ok(Claim::Existing(record)) => record,
                    other => panic!("a replay: {other:?}"),
                }
            })
        })
    });
    group.bench_function("sqlx", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let row = sqlx::query(SELECT)
                    .bind(TENANT)
                    .bind(black_box(&done))
                    .fetch_one(&raw)
                    .await
                    .unwrap();
                row.get::<Option<String>, _>("result")
            })
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .sample_size(20);
    targets = store
}
criterion_main!(benches);
