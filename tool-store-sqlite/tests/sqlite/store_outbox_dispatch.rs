//! An outbox tool on the SQLite store through the real dispatcher and worker: the body writes
//! its row with `toolgate_store_sqlite::connection`, the model reads `queued`, the row, the
//! record and the event are committed together (or, when the body fails, none of them), and a
//! worker delivers the event once.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqliteConnection};
use toolgate::outbox::{Deliver, OutboxWorker};
use toolgate::prelude::*;
use toolgate::store::prelude::*;
use toolgate::store::{EventStatus, OperationState, OutboxEvent};
use toolgate_store_sqlite::SqliteStore;
use toolgate_test::{ManualClock, MemoryStore};

/// Record a refund request; a worker sends it to the payment provider. Over 1000, the body
/// writes its row and then refuses.
#[tool(side_effect = "write", delivery = "outbox", key = [order_id])]
async fn request_refund(ctx: &Ctx, order_id: String, amount: u32) -> Result<Value, ToolError> {
    let mut tx = ctx.transaction().await?;
    let conn = toolgate_store_sqlite::connection(&mut tx)?;
    sqlx::query("INSERT INTO refund_requests (order_id, amount) VALUES (?1, ?2)")
        .bind(&order_id)
        .bind(amount)
        .execute(&mut *conn)
        .await
        .map_err(|err| ToolError::internal(format!("could not record the refund: {err}")))?;
    drop(tx);
    if amount > 1000 {
        return Err(ToolError::refused("refunds over 1000 need a manager"));
    }
    ctx.enqueue(&json!({"order_id": order_id, "amount": amount}))?;
    Ok(json!({"request": order_id, "amount": amount}))
}

/// The payment provider: counts what it was sent.
#[derive(Default)]
struct Provider {
    sent: AtomicU32,
}

/// The worker's handler, sending to the provider with the operation's key.
struct Handler(Arc<Provider>);

#[async_trait::async_trait]
impl Deliver for Handler {
    async fn deliver(&self, event: &OutboxEvent) -> Result<Value, ToolError> {
        self.0.sent.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"refund_id": format!("re_{}", event.payload.len())}))
    }

    fn honours_key(&self) -> bool {
        true
    }
}

async fn connect(path: &Path) -> SqliteConnection {
    SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .expect("a plain connection")
}

fn dispatcher(store: Arc<dyn OperationStore>, clock: Arc<ManualClock>) -> Dispatcher {
    let mut registry = Registry::new();
    registry.register::<request_refund>().expect("register");
    Dispatcher::builder(registry)
        .store(store)
        .clock(clock)
        .build()
}

async fn call(dispatcher: &Dispatcher, id: &str, order_id: &str, amount: u32) -> Value {
    let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    let call = ToolCall::new(
        id,
        "request_refund",
        json!({"order_id": order_id, "amount": amount}),
    );
    dispatcher
        .dispatch(&session, call)
        .await
        .expect("dispatch")
        .result
        .to_json()
}

/// What a second connection sees: the operations' states, the tool's rows and the events'
/// statuses.
async fn seen(path: &Path) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut conn = connect(path).await;
    let mut all = Vec::new();
    for sql in [
        "SELECT state FROM operations ORDER BY created_ms",
        "SELECT order_id FROM refund_requests ORDER BY order_id",
        "SELECT status FROM outbox ORDER BY created_ms",
    ] {
        let rows: Vec<String> = sqlx::query_scalar(sql)
            .fetch_all(&mut conn)
            .await
            .expect(sql);
        all.push(rows);
    }
    conn.close().await.expect("close");
    let events = all.pop().unwrap_or_default();
    let rows = all.pop().unwrap_or_default();
    let states = all.pop().unwrap_or_default();
    (states, rows, events)
}

#[tokio::test]
async fn an_outbox_call_commits_its_row_record_and_event_and_a_worker_delivers_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let mut conn = connect(&path).await;
    sqlx::raw_sql("CREATE TABLE refund_requests (order_id TEXT PRIMARY KEY, amount INTEGER)")
        .execute(&mut conn)
        .await
        .expect("the application's table");
    conn.close().await.expect("close");
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let store = Arc::new(store);
    let dispatcher = dispatcher(store.clone(), clock.clone());

    let refused = call(&dispatcher, "c1", "ORD-BIG", 5000).await;
    assert_eq!(refused["status"], "error", "{refused}");
    assert_eq!(
        seen(&path).await,
        (vec![], vec![], vec![]),
        "nothing of it remains"
    );

    let answer = call(&dispatcher, "c2", "ORD-1", 25).await;
    assert_eq!(answer["status"], "queued", "{answer}");
    assert_eq!(answer["data"], json!({"request": "ORD-1", "amount": 25}));
    assert_eq!(
        seen(&path).await,
        (
            vec!["queued".to_owned()],
            vec!["ORD-1".to_owned()],
            vec!["pending".to_owned()]
        )
    );

    let provider = Arc::new(Provider::default());
    let worker = OutboxWorker::builder(store.clone())
        .name("w1")
        .clock(clock.clone())
        .lease(Duration::from_secs(30))
        .deliver("request_refund", Handler(provider.clone()))
        .build()
        .expect("a worker");
    let report = worker.drain().await.expect("drain");
    assert_eq!(report.delivered, 1);
    assert_eq!(provider.sent.load(Ordering::SeqCst), 1);
    let key = answer["delivery"]["operation"]
        .as_str()
        .expect("the operation's key");
    let record = store.get("acme", key).await.unwrap().expect("stored");
    assert_eq!(record.state, OperationState::Succeeded);
    let event = store.event("acme", key).await.unwrap().expect("stored");
    assert_eq!(event.status, EventStatus::Delivered);
    assert_eq!(worker.drain().await.expect("drain").delivered, 0);
    assert_eq!(provider.sent.load(Ordering::SeqCst), 1, "delivered once");
    store.close().await;
}

/// `connection` on another store's transaction is an internal error that names that store,
/// and the call leaves nothing behind.
#[tokio::test]
async fn the_sqlite_connection_of_another_stores_transaction_is_an_error() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let store = Arc::new(MemoryStore::new());
    let dispatcher = dispatcher(store.clone(), clock);
    let answer = call(&dispatcher, "c1", "ORD-1", 25).await;
    assert_eq!(answer["status"], "error", "{answer}");
    assert_eq!(answer["error"]["kind"], "internal", "{answer}");
    let what = answer["error"]["what"].as_str().expect("what");
    assert!(
        what.contains("SQLite connection") && what.contains("memory store"),
        "{what}"
    );
    let records = store.list_operations(Default::default()).await.unwrap();
    assert_eq!(records, vec![]);
    assert_eq!(store.list_events(Default::default()).await.unwrap(), vec![]);
}
