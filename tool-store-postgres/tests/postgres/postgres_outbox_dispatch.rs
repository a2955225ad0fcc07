//! An outbox tool through the dispatcher on a real PostgreSQL server: its body writes its row
//! with `toolgate_store_postgres::connection`; the row, the operation and the event commit
//! together (the model reads `queued`) or not at all (a failed body leaves nothing); a worker
//! delivers the event; the connection of another store's transaction is refused in words.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::store::prelude::*;
use toolgate::store::{EventStatus, OperationState, OutboxEvent};
use toolgate::{ToolError, outbox::OutboxWorker};
use toolgate_store_postgres::PostgresStore;
use toolgate_store_postgres::sqlx::{self, PgPool};
use toolgate_test::MemoryStore;
use toolgate_test_postgres::test_database;

/// Record a refund request in the application's table; a worker pays it.
#[tool(side_effect = "write", delivery = "outbox", key = [order_id])]
async fn request_refund(ctx: &Ctx, order_id: String, amount: i64) -> Result<Value, ToolError> {
    let mut tx = ctx.transaction().await?;
    let conn = toolgate_store_postgres::connection(&mut tx)?;
    sqlx::query("INSERT INTO refund_requests (order_id, amount) VALUES ($1, $2)")
        .bind(&order_id)
        .bind(amount)
        .execute(conn)
        .await
        .map_err(|e| ToolError::internal(format!("cannot record the refund request: {e}")))?;
    drop(tx);
    if amount > 1_000 {
        // After its row was written: the row must go with the claim.
        return Err(ToolError::refused("refunds over 1000 are not accepted"));
    }
    ctx.enqueue(&json!({"order_id": order_id, "amount": amount}))?;
    Ok(json!({"request": order_id, "amount": amount}))
}

async fn rows(pool: &PgPool, order_id: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM refund_requests WHERE order_id = $1")
        .bind(order_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

fn dispatcher(store: Arc<dyn OperationStore>) -> Dispatcher {
    let mut registry = Registry::new();
    registry.register::<request_refund>().unwrap();
    Dispatcher::builder(registry).store(store).build()
}

async fn call(dispatcher: &Dispatcher, id: &str, order_id: &str, amount: i64) -> Value {
    let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    let call = ToolCall::new(
        id,
        "request_refund",
        json!({"order_id": order_id, "amount": amount}),
    );
    dispatcher
        .dispatch(&session, call)
        .await
        .unwrap()
        .result
        .to_json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outbox_tool_commits_its_row_with_its_operation_and_event_then_a_worker_delivers() {
    let url = test_database().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    let other = PgPool::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE refund_requests (order_id TEXT PRIMARY KEY, amount BIGINT)")
        .execute(&other)
        .await
        .unwrap();
    let dispatcher = dispatcher(Arc::new(store.clone()));

    let answer = call(&dispatcher, "c1", "ORD-1", 25).await;
    assert_eq!(answer["status"], "queued", "{answer}");
    assert_eq!(answer["data"], json!({"request": "ORD-1", "amount": 25}));
    assert_eq!(rows(&other, "ORD-1").await, 1);
    let events = store.list_events(Default::default()).await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    let key = events[0].key.clone();
    assert_eq!(events[0].status, EventStatus::Pending);
    let record = store.get("acme", &key).await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Queued);

    // A body that fails after writing its row leaves no row, no record and no event.
    let refused = call(&dispatcher, "c2", "ORD-2", 5_000).await;
    assert_eq!(refused["status"], "error", "{refused}");
    assert_eq!(rows(&other, "ORD-2").await, 0);
    assert_eq!(
        store.list_events(Default::default()).await.unwrap().len(),
        1
    );
    assert_eq!(
        store
            .list_operations(Default::default())
            .await
            .unwrap()
            .len(),
        1,
        "only ORD-1's operation"
    );

    // A worker delivers it once; a replay of the call reads the operation as it is now.
    let sent = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&sent);
    let worker = OutboxWorker::builder(Arc::new(store.clone()))
        .name("w1")
        .deliver("request_refund", move |event: OutboxEvent| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ToolError>(json!({"paid": event.key}))
            }
        })
        .build()
        .unwrap();
    let report = worker.drain().await.unwrap();
    assert_eq!(report.delivered, 1);
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    let record = store.get("acme", &key).await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Succeeded);
    let replay = call(&dispatcher, "c3", "ORD-1", 25).await;
    assert_eq!(replay["replayed"], true, "{replay}");
    assert_eq!(rows(&other, "ORD-1").await, 1, "the body did not run again");
    assert_eq!(worker.drain().await.unwrap().delivered, 0);
}

#[tokio::test]
async fn the_connection_of_another_stores_transaction_is_refused_in_words() {
    let dispatcher = dispatcher(Arc::new(MemoryStore::new()));
    let answer = call(&dispatcher, "c1", "ORD-1", 25).await;
    assert_eq!(answer["status"], "error", "{answer}");
    let error = &answer["error"];
    let what = error["what"].as_str().unwrap_or_default();
    assert!(
        what.contains("toolgate_store_postgres::connection") && what.contains("memory"),
        "{answer}"
    );
}
