//! What the kit is for: a write tool of one's own, run by toolgate's dispatcher, put through the
//! faults. A `503` is retried under the same key; an answer lost after the provider applied the
//! request is `outcome_unknown`, never `failed`, and the provider applied it once. Through the
//! proxy for a tool with an HTTP client, through the hook for one without.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http::StatusCode;
use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate_test::MemoryStore;
use toolgate_test::chaos::{Fault, FaultHook, FaultPlan, FaultProxy, Route, Upstream as Reached};

use super::client::{Outcome, post, send};
use super::patiently;
use super::upstream::Upstream;

/// Where the refund tool sends its requests: the proxy's address.
struct PaymentsUrl(SocketAddr);

/// Refund an order at the payment provider.
#[tool(
    side_effect = "write",
    key = [order_id],
    timeout = "1s",
    retry(max_attempts = 3, base = "1ms", max = "2ms")
)]
async fn refund(ctx: &Ctx, key: &IdempotencyKey, order_id: String) -> Result<Value, ToolError> {
    let PaymentsUrl(addr) = ctx.state::<PaymentsUrl>()?;
    let body = json!({"order_id": order_id}).to_string();
    // No deadline of the client's own: the tool's timeout drops this future, and the
    // connection with it.
    match send(*addr, post("/refunds", key.as_str(), &body), None).await {
        Outcome::Answered(answer) if answer.status() == StatusCode::OK => {
            Ok(serde_json::from_slice(answer.body()).map_err(|err| {
                ToolError::internal("the provider's answer is not JSON").with_why(err.to_string())
            })?)
        }
        Outcome::Answered(answer) if answer.status() == StatusCode::SERVICE_UNAVAILABLE => {
            Err(ToolError::unavailable("the payment provider answered 503"))
        }
        Outcome::Answered(answer) => Err(ToolError::internal(format!(
            "the payment provider answered {}",
            answer.status()
        ))),
        Outcome::Broke(err) => {
            Err(ToolError::outcome_unknown("the connection broke").with_why(err.to_string()))
        }
        Outcome::TimedOut => unreachable!("the tool sets no deadline of its own"),
    }
}

/// The e-mails a provider that is not HTTP has sent, by key.
#[derive(Default)]
struct Mailer(Mutex<Vec<String>>);

/// Send the receipt of an order by e-mail.
#[tool(
    side_effect = "write",
    key = [order_id],
    timeout = "10s",
    retry(max_attempts = 3, base = "1ms", max = "2ms")
)]
async fn email_receipt(
    ctx: &Ctx,
    key: &IdempotencyKey,
    order_id: String,
) -> Result<Value, ToolError> {
    let hook = ctx.state::<FaultHook>()?;
    let mailer = ctx.state::<Arc<Mailer>>()?;
    let sent = hook
        .before_send(http::Method::POST, "/emails", Some(key.as_str()))
        .await?;
    mailer.0.lock().unwrap().push(key.to_string());
    hook.after_apply(sent)?;
    Ok(json!({"sent": order_id}))
}

fn session() -> Session {
    Session::new(AuthContext::new("acme", "agent"), "run-1")
}

async fn call(dispatcher: &Dispatcher, name: &str, args: Value) -> Value {
    dispatcher
        .dispatch(&session(), ToolCall::new("call_1", name, args))
        .await
        .expect("no call aborts the run")
        .result
        .to_json()
}

#[tokio::test]
async fn through_the_proxy_a_lost_answer_is_outcome_unknown_and_applied_once() {
    let upstream = Upstream::start().await;
    let proxy = FaultProxy::start(upstream.addr()).await.unwrap();
    let refunds = Route::post("/refunds");
    proxy
        .plan()
        .at(refunds.clone(), [1], Fault::Unavailable)
        .at(refunds.clone(), [2], Fault::DropAfterApply);
    let mut registry = Registry::new();
    registry.register::<refund>().unwrap();
    let dispatcher = Dispatcher::builder(registry)
        .state(PaymentsUrl(proxy.addr()))
        .store(Arc::new(MemoryStore::new()))
        .jitter_seed(7)
        .build();

    let result = call(&dispatcher, "refund", json!({"order_id": "ORD-1"})).await;
    assert_eq!(result["status"], "outcome_unknown", "{result}");
    let keys = proxy.plan().keys(&refunds);
    assert_eq!(keys.len(), 2, "the 503 was retried once: {keys:?}");
    assert_eq!(keys[0], keys[1], "under the same key");
    patiently(proxy.plan().wait_for(|records| {
        records.get(1).map(|record| record.upstream) == Some(Reached::Answered(StatusCode::OK))
    }))
    .await;
    assert_eq!(upstream.applied_under(&keys[0]), 1);

    let again = call(&dispatcher, "refund", json!({"order_id": "ORD-1"})).await;
    assert_eq!(again["status"], "outcome_unknown", "{again}");
    assert_eq!(
        proxy.plan().count(&refunds),
        2,
        "an unknown outcome is never run again"
    );
}

#[tokio::test]
async fn through_the_hook_a_reset_is_outcome_unknown_and_applied_once() {
    let plan = FaultPlan::new();
    let emails = Route::post("/emails");
    plan.at(emails.clone(), [1], Fault::Unavailable).at(
        emails.clone(),
        [2],
        Fault::ResetAfterApply,
    );
    let mailer = Arc::new(Mailer::default());
    let mut registry = Registry::new();
    registry.register::<email_receipt>().unwrap();
    let dispatcher = Dispatcher::builder(registry)
        .state(FaultHook::new(plan.clone()))
        .state(mailer.clone())
        .store(Arc::new(MemoryStore::new()))
        .jitter_seed(7)
        .build();

    let result = call(&dispatcher, "email_receipt", json!({"order_id": "ORD-1"})).await;
    assert_eq!(result["status"], "outcome_unknown", "{result}");
    let keys = plan.keys(&emails);
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!(keys[0], keys[1]);
    assert_eq!(*mailer.0.lock().unwrap(), [keys[0].clone()], "sent once");
}
