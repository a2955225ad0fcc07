//! The outbox's delivery rate against a plain `SKIP LOCKED` queue in raw SQL, in one run on one
//! fresh PostgreSQL database:
//!
//! - `outbox/toolgate/{1,4,16}`: that many `OutboxWorker`s at once drain the events of
//!   `EVENTS` operations, each enqueued through the store (`begin`, then `commit` with an event)
//!   before the clock starts. A worker leases a batch (one `UPDATE … FOR UPDATE SKIP LOCKED`),
//!   calls its handler, which answers at once, and settles each event with its operation (one
//!   transaction an event);
//! - `outbox/raw_skip_locked/{1,4,16}`: that many tasks drain as many rows of a table of their
//!   own, the textbook queue loop: in a transaction, `SELECT … ORDER BY id LIMIT batch FOR
//!   UPDATE SKIP LOCKED`, the same no-op provider for each row, `DELETE` the batch, commit.
//!
//! Both use the worker's default batch (16) and pools of the same size. Criterion's throughput
//! is events delivered per second; the figure that matters is the ratio at each worker count.
//! The raw loop records nothing per event (no attempt, lease, error or operation state), which
//! is what the ratio prices. Needs a PostgreSQL server, found or started by
//! `toolgate_test_postgres` (or `DATABASE_URL`); without one it fails saying what to install.
//! Run with `cargo bench --bench outbox`.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use serde_json::Value;
use tokio::runtime::Runtime;
use tokio::task::JoinSet;
use toolgate::store::prelude::*;
use toolgate::store::{
    Begun, ClaimRequest, ClaimToken, Commit, NewEvent, OutboxEvent, PostgresStore,
};
use toolgate::{ToolError, outbox::OutboxWorker};
use toolgate_store_postgres::sqlx::postgres::{PgPool, PgPoolOptions};
use toolgate_store_postgres::sqlx::{self, Connection, Row};
use toolgate_test_postgres::test_database;

const TENANT: &str = "acme";
const TOOL: &str = "request_refund";
const HASH: &str = "sha256:9c1e";
const ARGUMENTS: &str = r#"{"amount":500,"order_id":"ORD-1001"}"#;
const PAYLOAD: &str = r#"{"amount":500,"order_id":"ORD-1001"}"#;
const RESULT: &str = r#"{"accepted":true}"#;
/// Events drained in each timed iteration.
const EVENTS: u64 = 400;
/// Events one lease takes: the worker's default batch.
const BATCH: u32 = 16;
const WORKERS: [usize; 3] = [1, 4, 16];
/// Connections of each pool: one a worker at most, as each holds one at a time.
const POOL_SIZE: u32 = 20;
/// Tasks enqueueing the events before each timed iteration.
const ENQUEUERS: u64 = 8;

/// Numbers the keys, so that every operation is new.
static NEXT_KEY: AtomicU64 = AtomicU64::new(0);

fn now_ms() -> i64 {
    toolgate::dispatch::Clock::now_ms(&toolgate::dispatch::SystemClock)
}

/// The provider both sides call: it accepts the payload at once.
async fn provider(payload: &str) -> Value {
    black_box(payload);
    Value::Null
}

async fn pool(url: &str) -> PgPool {
    PgPoolOptions::new()
        .max_connections(POOL_SIZE)
        .connect(url)
        .await
        .expect("connect")
}

/// One outbox operation, as the dispatcher makes it: claimed in a transaction, committed with
/// its event.
async fn enqueue_one(store: &PostgresStore) {
    let key = format!("op-{}", NEXT_KEY.fetch_add(1, Ordering::Relaxed));
    let now = now_ms();
    let request = ClaimRequest {
        tenant: TENANT,
        key: &key,
        tool: TOOL,
        request_hash: HASH,
        unkeyed: None,
        arguments: ARGUMENTS,
        now_ms: now,
        lease: Duration::from_secs(30),
        takeover: false,
        approval: None,
    };
    let Begun::Open { tx, attempt, .. } = store.begin(request).await.expect("begin") else {
        panic!("a new key is acquired");
    };
    let owner = ClaimToken {
        tenant: TENANT.to_owned(),
        key,
        attempt,
    };
    let event = NewEvent {
        payload: PAYLOAD.to_owned(),
    };
    tx.commit(Commit {
        owner: &owner,
        result: RESULT,
        event: Some(&event),
        now_ms: now,
    })
    .await
    .expect("commit");
}

/// Enqueues `EVENTS` operations with their events, untimed.
async fn enqueue_toolgate(store: &PostgresStore) {
    const _: () = assert!(
        EVENTS.is_multiple_of(ENQUEUERS),
        "the enqueuers share the events evenly"
    );
    let mut set = JoinSet::new();
    for _ in 0..ENQUEUERS {
        let store = store.clone();
        set.spawn(async move {
            for _ in 0..EVENTS / ENQUEUERS {
                enqueue_one(&store).await;
            }
        });
    }
    set.join_all().await;
}

/// `workers` outbox workers drain every due event; answers how long they took.
async fn drain_toolgate(store: &PostgresStore, workers: usize) -> Duration {
    let started = Instant::now();
    let mut set = JoinSet::new();
    for w in 0..workers {
        let worker = OutboxWorker::builder(Arc::new(store.clone()) as Arc<dyn OperationStore>)
            .name(format!("bench-{w}"))
            .batch(BATCH)
            .deliver(TOOL, |event: OutboxEvent| async move {
                Ok::<_, ToolError>(provider(&event.payload).await)
            })
            .build()
            .expect("a worker with a handler");
        set.spawn(async move { worker.drain().await.expect("drain").delivered });
    }
    let delivered: u32 = set.join_all().await.into_iter().sum();
    let took = started.elapsed();
    assert_eq!(u64::from(delivered), EVENTS, "every event delivered once");
    took
}

/// Counts the events not delivered yet: none, after a drain.
async fn undelivered(store: &PostgresStore) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM toolgate_outbox WHERE status <> 'delivered'")
        .fetch_one(store.pool())
        .await
        .expect("count")
}

const RAW_TABLE: &str = "CREATE TABLE bench_queue (id BIGINT GENERATED ALWAYS AS IDENTITY \
     PRIMARY KEY, idempotency_key TEXT NOT NULL, payload TEXT NOT NULL)";
const RAW_TAKE: &str = "SELECT id, idempotency_key, payload FROM bench_queue ORDER BY id \
     LIMIT $1 FOR UPDATE SKIP LOCKED";
const RAW_DONE: &str = "DELETE FROM bench_queue WHERE id = ANY($1)";

/// Inserts `EVENTS` rows into the raw queue, untimed.
async fn enqueue_raw(raw: &PgPool) {
    sqlx::query(
        "INSERT INTO bench_queue (idempotency_key, payload) \
         SELECT 'raw-' || n, $1 FROM generate_series(1, $2) AS n",
    )
    .bind(PAYLOAD)
    .bind(i64::try_from(EVENTS).expect("fits"))
    .execute(raw)
    .await
    .expect("enqueue");
}

/// One raw worker: batches until the queue has none it can lock. Answers how many it delivered.
async fn raw_worker(raw: PgPool) -> u64 {
    let mut delivered = 0;
    let mut conn = raw.acquire().await.expect("a connection");
    loop {
        let mut tx = conn.begin().await.expect("begin");
        let rows = sqlx::query(RAW_TAKE)
            .bind(i64::from(BATCH))
            .fetch_all(&mut *tx)
            .await
            .expect("take");
        if rows.is_empty() {
            tx.commit().await.expect("commit");
            return delivered;
        }
        let mut ids = Vec::with_capacity(rows.len());
        for row in &rows {
            let payload: String = row.get("payload");
            black_box(row.get::<String, _>("idempotency_key"));
            provider(&payload).await;
            ids.push(row.get::<i64, _>("id"));
        }
        sqlx::query(RAW_DONE)
            .bind(&ids)
            .execute(&mut *tx)
            .await
            .expect("done");
        tx.commit().await.expect("commit");
        delivered += ids.len() as u64;
    }
}

/// `workers` raw workers drain the queue; answers how long they took.
async fn drain_raw(raw: &PgPool, workers: usize) -> Duration {
    let started = Instant::now();
    let mut set = JoinSet::new();
    for _ in 0..workers {
        set.spawn(raw_worker(raw.clone()));
    }
    let delivered: u64 = set.join_all().await.into_iter().sum();
    let took = started.elapsed();
    assert_eq!(delivered, EVENTS, "every row delivered once");
    took
}

/// A future borrowing the bench's store or pool.
type Step<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + 'a>>;

/// Runs `iters` timed drains, each after an untimed enqueue.
fn timed<'a, E, D>(runtime: &Runtime, iters: u64, mut enqueue: E, mut drain: D) -> Duration
where
    E: FnMut() -> Step<'a, ()>,
    D: FnMut() -> Step<'a, Duration>,
{
    runtime.block_on(async {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            enqueue().await;
            total += drain().await;
        }
        total
    })
}

fn outbox(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (store, raw) = runtime.block_on(async {
        let url = test_database().await;
        let store = PostgresStore::from_pool(pool(&url).await);
        store.migrate().await.expect("migrate");
        let raw = pool(&url).await;
        sqlx::query(RAW_TABLE)
            .execute(&raw)
            .await
            .expect("the raw queue's table");
        (store, raw)
    });

    let mut group = c.benchmark_group("outbox");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(EVENTS));
    for workers in WORKERS {
        group.bench_with_input(
            BenchmarkId::new("toolgate", workers),
            &workers,
            |b, &workers| {
                b.iter_custom(|iters| {
                    timed(
                        &runtime,
                        iters,
                        || Box::pin(enqueue_toolgate(&store)),
                        || Box::pin(drain_toolgate(&store, workers)),
                    )
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("raw_skip_locked", workers),
            &workers,
            |b, &workers| {
                b.iter_custom(|iters| {
                    timed(
                        &runtime,
                        iters,
                        || Box::pin(enqueue_raw(&raw)),
                        || Box::pin(drain_raw(&raw, workers)),
                    )
                })
            },
        );
    }
    group.finish();
    assert_eq!(runtime.block_on(undelivered(&store)), 0);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(10);
    targets = outbox
}
criterion_main!(benches);
