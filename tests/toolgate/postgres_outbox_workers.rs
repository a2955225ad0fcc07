//! Outbox workers on one PostgreSQL database: several in one process, several processes, and
//! workers killed with SIGKILL in the middle of a delivery.
//!
//! The "provider" is a table of the same database, `provider_ledger`, written by the handler on
//! its own connection (outside the outbox's transactions) and never deduplicated by key: a
//! delivery sent twice shows as two rows. Its count is authoritative and shared by every process.
//!
//! Needs a PostgreSQL server: `toolgate_test_postgres::test_database` finds or starts one and
//! gives each test a fresh database (a test fails, never skips, without one).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::store::prelude::*;
use toolgate::store::{
    EventQuery, EventStatus, OperationQuery, OperationState, OutboxEvent, PostgresStore,
};
use toolgate::{
    dispatch::Clock, dispatch::ManualClock, dispatch::SystemClock, outbox::Deliver,
    outbox::OutboxWorker, reconcile::Reconciler,
};
use toolgate_store_postgres::sqlx::{self, PgPool};
use toolgate_test_postgres::{ChildTest, test_database};

const CREATE_TABLES: [&str; 2] = [
    "CREATE TABLE refund_requests (order_id TEXT PRIMARY KEY, amount DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE provider_ledger (key TEXT NOT NULL, order_id TEXT NOT NULL, pid BIGINT NOT NULL)",
];

/// Set, to the database's URL, only in the children; [`ROLE`] says what the child does.
const CHILD_DATABASE: &str = "TOOLGATE_TEST_OUTBOX_CHILD_URL";
const ROLE: &str = "TOOLGATE_TEST_OUTBOX_CHILD_ROLE";
const CHILD_TEST: &str = "postgres_outbox_workers::child_outbox_worker";
const DONE: &str = "toolgate-child: done";
const AT: &str = "toolgate-child: at ";
/// How long a worker's lease lasts; the test moves its own clock past it after a kill.
const LEASE: Duration = Duration::from_secs(60);

/// Record a refund request; a worker sends it to the provider.
#[tool(side_effect = "write", delivery = "outbox", key = [order_id], reconcile = delivered(ctx, key))]
async fn refund(
    ctx: &Ctx,
    key: &IdempotencyKey,
    order_id: String,
    amount: f64,
) -> Result<Value, ToolError> {
    let _ = key;
    let mut tx = ctx.transaction().await?;
    sqlx::query("INSERT INTO refund_requests (order_id, amount) VALUES ($1, $2)")
        .bind(&order_id)
        .bind(amount)
        .execute(toolgate_store_postgres::connection(&mut tx)?)
        .await
        .map_err(|err| ToolError::unavailable(err.to_string()))?;
    drop(tx);
    ctx.enqueue(&json!({"order_id": order_id, "amount": amount}))?;
    Ok(json!({"refund_request": order_id}))
}

/// The provider's pool.
struct Provider(PgPool);

/// Whether the provider holds a delivery under `key`.
async fn delivered(ctx: &Ctx, key: &IdempotencyKey) -> Result<Option<Value>, ToolError> {
    let provider = ctx.state::<Arc<Provider>>()?;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM provider_ledger WHERE key = $1")
        .bind(key.as_str())
        .fetch_one(&provider.0)
        .await
        .map_err(|err| ToolError::unavailable(err.to_string()))?;
    Ok((rows > 0).then(|| json!({"deliveries": rows})))
}

/// Where a delivery stops, for a child that is to be killed there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Point {
    /// Leased, nothing sent.
    Claimed,
    /// The provider's insert is sent and not committed.
    Sent,
    /// The provider's insert is committed; the worker has not recorded it.
    Applied,
    /// The worker recorded the delivery.
    Recorded,
}

impl Point {
    const ALL: [Point; 4] = [Point::Claimed, Point::Sent, Point::Applied, Point::Recorded];

    fn name(self) -> &'static str {
        match self {
            Point::Claimed => "claimed",
            Point::Sent => "sent",
            Point::Applied => "applied",
            Point::Recorded => "recorded",
        }
    }

    fn parse(name: &str) -> Option<Point> {
        Point::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// The handler: inserts the delivery into the provider's ledger; stops for good at `stop`
/// (with the `n`th delivery of this process) after saying so on stdout.
struct Handler {
    provider: PgPool,
    stop: Option<(Point, usize)>,
    seen: std::sync::atomic::AtomicUsize,
}

impl Handler {
    fn new(provider: PgPool, stop: Option<(Point, usize)>) -> Handler {
        Handler {
            provider,
            stop,
            seen: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    async fn halt(&self, point: Point) -> ! {
        println!("{AT}{}", point.name());
        std::future::pending::<()>().await;
        unreachable!("a pending future never completes")
    }
}

#[async_trait::async_trait]
impl Deliver for Handler {
    async fn deliver(&self, event: &OutboxEvent) -> Result<Value, ToolError> {
        let n = self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let stop = self.stop.filter(|&(_, at)| at == n).map(|(point, _)| point);
        if stop == Some(Point::Claimed) {
            self.halt(Point::Claimed).await;
        }
        let payload: Value = serde_json::from_str(&event.payload).unwrap();
        let unavailable = |err: sqlx::Error| ToolError::unavailable(err.to_string());
        let mut provider = self.provider.begin().await.map_err(unavailable)?;
        sqlx::query("INSERT INTO provider_ledger (key, order_id, pid) VALUES ($1, $2, $3)")
            .bind(&event.key)
            .bind(payload["order_id"].as_str().unwrap_or_default())
            .bind(i64::from(std::process::id()))
            .execute(&mut *provider)
            .await
            .map_err(unavailable)?;
        if stop == Some(Point::Sent) {
            self.halt(Point::Sent).await;
        }
        provider
            .commit()
            .await
            .map_err(|err| ToolError::outcome_unknown(err.to_string()))?;
        if stop == Some(Point::Applied) {
            self.halt(Point::Applied).await;
        }
        Ok(json!({"applied": event.key}))
    }
}

async fn store(url: &str) -> Arc<PostgresStore> {
    let store = PostgresStore::options(url)
        .acquire_timeout(Duration::from_secs(30))
        .connect()
        .await
        .expect("connect");
    Arc::new(store)
}

fn dispatcher(store: &Arc<PostgresStore>, provider: &PgPool, clock: Arc<dyn Clock>) -> Dispatcher {
    let mut registry = Registry::new();
    registry.register::<refund>().unwrap();
    Dispatcher::builder(registry)
        .state(Arc::new(Provider(provider.clone())))
        .store(Arc::clone(store))
        .clock(clock)
        .run_limits(RunLimits::UNLIMITED)
        .build()
}

fn worker(
    store: &Arc<PostgresStore>,
    handler: Handler,
    name: &str,
    clock: Arc<dyn Clock>,
    batch: u32,
) -> OutboxWorker {
    let store: Arc<dyn OperationStore> = store.clone();
    OutboxWorker::builder(store)
        .name(name)
        .deliver("refund", handler)
        .lease(LEASE)
        .batch(batch)
        .clock(clock)
        .build()
        .expect("a worker with a handler")
}

/// A fresh database with the tables and `events` refunds enqueued through the dispatcher.
async fn enqueued(events: usize) -> (String, Arc<PostgresStore>, PgPool) {
    let url = test_database().await;
    let provider = PgPool::connect(&url).await.unwrap();
    for create in CREATE_TABLES {
        sqlx::query(create).execute(&provider).await.unwrap();
    }
    let store = store(&url).await;
    let dispatcher = dispatcher(&store, &provider, Arc::new(SystemClock));
    let session = crate::support::session_in("run-outbox");
    for i in 0..events {
        let call = ToolCall::new(
            format!("call_{i}"),
            "refund",
            json!({"order_id": format!("ORD-{i}"), "amount": 10}),
        );
        let result = dispatcher.dispatch(&session, call).await.unwrap().result;
        assert_eq!(result.status, Status::Queued, "{}", result.to_json_string());
    }
    (url, store, provider)
}

/// Every one of `events` refunds delivered exactly once: one ledger row per key, every event
/// delivered, every operation succeeded, nothing leased.
async fn assert_each_delivered_once(store: &PostgresStore, provider: &PgPool, events: usize) {
    let (rows, keys): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT key) FROM provider_ledger")
            .fetch_one(provider)
            .await
            .unwrap();
    assert_eq!(
        (rows, keys),
        (events as i64, events as i64),
        "each event reaches the provider once"
    );
    let all = store.list_events(EventQuery::default()).await.unwrap();
    assert_eq!(all.len(), events);
    let undelivered: Vec<_> = all
        .iter()
        .filter(|e| e.status != EventStatus::Delivered)
        .map(|e| (&e.key, e.status))
        .collect();
    assert!(undelivered.is_empty(), "{undelivered:?}");
    let query = OperationQuery {
        state: Some(OperationState::Succeeded),
        ..OperationQuery::default()
    };
    assert_eq!(store.list_operations(query).await.unwrap().len(), events);
    // The ledger agrees with the store: the keys delivered are the operations' keys.
    let ledger_keys: Vec<String> =
        sqlx::query_scalar("SELECT key FROM provider_ledger ORDER BY key")
            .fetch_all(provider)
            .await
            .unwrap();
    let mut event_keys: Vec<String> = all.into_iter().map(|e| e.key).collect();
    event_keys.sort();
    assert_eq!(ledger_keys, event_keys);
}

/// Events of the acceptance runs.
const EVENTS: usize = 1_000;
/// Workers racing.
const WORKERS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_workers_in_one_process_deliver_a_thousand_events_once_each() {
    let (_url, store, provider) = enqueued(EVENTS).await;
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let worker = worker(
            &store,
            Handler::new(provider.clone(), None),
            &format!("thread-{w}"),
            Arc::new(SystemClock),
            16,
        );
        tasks.push(tokio::spawn(async move { worker.drain().await.unwrap() }));
    }
    let mut delivered = 0;
    let mut shares = Vec::new();
    for task in tasks {
        let report = task.await.unwrap();
        assert_eq!((report.dead, report.unknown, report.lost), (0, 0, 0));
        delivered += report.delivered;
        shares.push(report.delivered);
    }
    assert_eq!(delivered as usize, EVENTS, "the reports add up: {shares:?}");
    assert_each_delivered_once(&store, &provider, EVENTS).await;
}

#[test]
fn four_worker_processes_deliver_a_thousand_events_once_each() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (url, store, provider) = runtime.block_on(enqueued(EVENTS));
    let children: Vec<ChildTest> = (0..WORKERS)
        .map(|w| {
            ChildTest::spawn(
                CHILD_TEST,
                &[(CHILD_DATABASE, &url), (ROLE, &format!("drain:{w}"))],
            )
        })
        .collect();
    for child in children {
        child.finish(DONE);
    }
    runtime.block_on(async {
        let pids: i64 = sqlx::query_scalar("SELECT count(DISTINCT pid) FROM provider_ledger")
            .fetch_one(&provider)
            .await
            .unwrap();
        eprintln!("the deliveries were shared by {pids} process(es)");
        assert_each_delivered_once(&store, &provider, EVENTS).await;
    });
}

/// Events of each kill run.
const KILL_EVENTS: usize = 12;

/// A worker killed at each point of a delivery, the delivery picked by a fixed seed: after its
/// lease ends, another worker and the reconciler finish the work, and every event reaches the
/// provider exactly once (the provider does not deduplicate by key), none is lost, and nothing
/// stays leased.
#[test]
fn a_worker_killed_at_each_point_of_a_delivery_loses_and_doubles_nothing() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for (seed, point) in Point::ALL.into_iter().enumerate() {
        // Deterministic: which delivery of the child is interrupted.
        let at = (seed * 7 + 3) % KILL_EVENTS;
        let (url, store, provider) = runtime.block_on(enqueued(KILL_EVENTS));
        let role = format!("kill:{}:{at}", point.name());
        let mut child = ChildTest::spawn(CHILD_TEST, &[(CHILD_DATABASE, &url), (ROLE, &role)]);
        child.expect(&format!("{AT}{}", point.name()));
        child.kill();
        runtime.block_on(async {
            // Past the dead worker's lease, by a clock of the test's own.
            let clock = Arc::new(ManualClock::new(
                SystemClock.now_ms() + i64::try_from(LEASE.as_millis()).unwrap() + 1_000,
            ));
            let dispatcher = dispatcher(&store, &provider, clock.clone());
            let survivor = worker(
                &store,
                Handler::new(provider.clone(), None),
                "survivor",
                clock.clone(),
                16,
            );
            // Bounded: deliver, reconcile what the dead worker left unknown, deliver again.
            for _ in 0..3 {
                survivor.drain().await.unwrap();
                Reconciler::new(&dispatcher).run_once().await.unwrap();
            }
            survivor.drain().await.unwrap();
            let leased = EventQuery {
                status: Some(EventStatus::Leased),
                ..EventQuery::default()
            };
            assert!(
                store.list_events(leased).await.unwrap().is_empty(),
                "{point:?}: nothing stays leased"
            );
            assert_each_delivered_once(&store, &provider, KILL_EVENTS).await;
        });
    }
}

/// A child: a worker process. `drain:N` delivers until nothing is due; `kill:POINT:N` delivers
/// one event at a time and stops for good at `POINT` of its `N`th delivery (the parent kills it
/// there). Run alone (without the variable) it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_outbox_worker() {
    let (Ok(url), Ok(role)) = (std::env::var(CHILD_DATABASE), std::env::var(ROLE)) else {
        return;
    };
    let store = store(&url).await;
    let provider = PgPool::connect(&url).await.unwrap();
    let mut parts = role.split(':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("drain"), Some(n), None) => {
            let handler = Handler::new(provider, None);
            let worker = worker(
                &store,
                handler,
                &format!("process-{n}"),
                Arc::new(SystemClock),
                16,
            );
            let report = tokio::time::timeout(Duration::from_secs(300), worker.drain())
                .await
                .expect("a child drains within five minutes")
                .unwrap();
            assert_eq!((report.dead, report.unknown, report.lost), (0, 0, 0));
        }
        (Some("kill"), Some(point), Some(at)) => {
            let point = Point::parse(point).expect("a point");
            let at: usize = at.parse().expect("a delivery number");
            let handler = Handler::new(provider, Some((point, at)));
            let worker = worker(&store, handler, "doomed", Arc::new(SystemClock), 1);
            for n in 0..=at {
                worker.run_once().await.unwrap();
                if n == at && point == Point::Recorded {
                    println!("{AT}{}", point.name());
                    std::future::pending::<()>().await;
                }
            }
            panic!("the child passed its stop without stopping");
        }
        other => panic!("unknown role {other:?}"),
    }
    println!("{DONE}");
}
