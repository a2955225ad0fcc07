//! Quickstart: a write tool with an idempotency key and a reconcile hook, on the SQLite store,
//! answering one model turn; its provider applies the refund and then times out, and the
//! reconciler, running in the background as in a real application, settles the unknown outcome.
//!
//! Run it with `cargo run --example quickstart`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::provider::Anthropic;
use toolgate::store::SqliteStore;
use toolgate::{dispatch::TurnAnswer, reconcile::Reconciler};

/// The payment provider: refunds by idempotency key. It applies the first one and then hangs.
#[derive(Clone, Default)]
struct Payments {
    refunds: Arc<Mutex<HashMap<String, Value>>>,
    asked: Arc<tokio::sync::Notify>,
}

/// Refund an order. The refund is final.
#[tool(side_effect = "write", key = [order_id], timeout = "200ms",
       reconcile = find_refund(payments, key))]
async fn issue_refund(
    payments: State<Payments>,
    key: &IdempotencyKey,
    order_id: String,
    amount: u32,
) -> Result<Value, ToolError> {
    let refund = json!({"refund_id": "re_1", "order_id": order_id, "amount": amount});
    payments
        .refunds
        .lock()
        .unwrap()
        .insert(key.to_string(), refund);
    std::future::pending().await // applied, but the answer never comes: the deadline passes
}

/// Asks the provider whether the refund under this operation's key exists.
async fn find_refund(
    payments: State<Payments>,
    key: &IdempotencyKey,
) -> Result<Option<Value>, ToolError> {
    let found = payments.refunds.lock().unwrap().get(key.as_str()).cloned();
    payments.asked.notify_one();
    Ok(found)
}

/// Answers the same turn twice, before and after the reconciler settled it.
async fn run(store_path: &std::path::Path) -> Result<[TurnAnswer; 2], Box<dyn std::error::Error>> {
    let mut registry = Registry::new();
    registry.register::<issue_refund>()?;
    let payments = Payments::default();
    let store = SqliteStore::open(store_path).await?;
    let dispatcher = Dispatcher::builder(registry)
        .store(store.clone())
        .state(payments.clone())
        .try_build()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let reconciler = Reconciler::new(&dispatcher);
    let background =
        tokio::spawn(async move { reconciler.run(Duration::from_millis(100), stopped).await });

    let session = Session::new(AuthContext::new("acme", "support-agent"), "run-1");
    let turn = r#"{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
        "name": "issue_refund", "input": {"order_id": "ORD-1001", "amount": 500}}]}"#;
    let anthropic = Anthropic::default();
    let first = dispatcher.answer_turn(&anthropic, &session, turn).await?;
    println!("model sees:  {}", first.reports[0].result.to_json_string());

    // The reconciler asked the provider (a ceiling of 30 s, should it never)...
    tokio::time::timeout(Duration::from_secs(30), payments.asked.notified()).await?;
    let _ = stop.send(()); // ...and finishes the pass that settles the record before it stops.
    background.await??;
    let unknown = dispatcher.store().unwrap().list_unknown(10).await?;
    println!(
        "reconciler:  settled; outcomes still unknown: {}",
        unknown.len()
    );

    let again = dispatcher.answer_turn(&anthropic, &session, turn).await?;
    println!("model sees:  {}", again.reports[0].result.to_json_string());
    store.close().await;
    Ok([first, again])
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    run(&dir.path().join("operations.db")).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use toolgate::{ErrorKind, dispatch::Outcome};

    #[tokio::test]
    async fn the_reconciler_settles_the_refund_that_timed_out() {
        let dir = tempfile::tempdir().unwrap();
        let [first, again] = super::run(&dir.path().join("operations.db")).await.unwrap();
        let unknown = first.reports[0].result.outcome();
        assert!(
            matches!(unknown, Outcome::OutcomeUnknown(e) if e.kind == ErrorKind::OutcomeUnknown)
        );
        let Outcome::Succeeded(data) = again.reports[0].result.outcome() else {
            panic!("settled as applied: {again:?}");
        };
        assert_eq!(data.to_value()["refund_id"], "re_1");
        assert!(
            again.reports[0].result.replayed,
            "the refund did not run twice"
        );
    }
}
