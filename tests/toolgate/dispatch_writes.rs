//! Writes run once however often they are called: claim → execute → record on the operation
//! store, replays, conflicts, in-progress duplicates, unknown outcomes and retries below the
//! model. Time is tokio's paused clock.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::store::OperationState;
use toolgate::store::prelude::*;
use toolgate_test::MemoryStore;

/// What the next run of the tool does.
#[derive(Debug, Clone)]
enum Fault {
    /// 503 before applying.
    Unavailable,
    /// 429 with a retry-after.
    RateLimited(Duration),
    /// Takes this long (past the deadline, the outcome is unknown).
    Slow(Duration),
    /// A business rule refuses it.
    Refused,
}

/// The provider behind the tool: a script of faults and a ledger of what was applied.
#[derive(Default)]
struct Provider {
    faults: Mutex<VecDeque<Fault>>,
    applied: Mutex<Vec<(String, String)>>,
    runs: Mutex<u32>,
    keys: Mutex<Vec<String>>,
}

impl Provider {
    fn script(&self, faults: impl IntoIterator<Item = Fault>) {
        self.faults.lock().unwrap().extend(faults);
    }

    fn runs(&self) -> u32 {
        *self.runs.lock().unwrap()
    }

    fn applied(&self) -> Vec<(String, String)> {
        self.applied.lock().unwrap().clone()
    }
}

/// Refund an order.
#[tool(side_effect = "write", key = [order_id], timeout = "2s", retry(max_attempts = 3, base = "100ms", max = "1s"))]
async fn refund(
    ctx: &Ctx,
    key: &IdempotencyKey,
    order_id: String,
    amount: f64,
) -> Result<Value, ToolError> {
    let provider = ctx.state::<Arc<Provider>>()?;
    *provider.runs.lock().unwrap() += 1;
    let key = key.to_string();
    provider.keys.lock().unwrap().push(key.clone());
    let fault = provider.faults.lock().unwrap().pop_front();
    match fault {
        Some(Fault::Unavailable) => {
            return Err(ToolError::unavailable("the provider answered 503"));
        }
        Some(Fault::RateLimited(after)) => {
            return Err(
                ToolError::rate_limited("the provider answered 429").with_retry_after(after)
            );
        }
        Some(Fault::Refused) => return Err(ToolError::refused("over the refundable balance")),
        Some(Fault::Slow(wait)) => {
            provider
                .applied
                .lock()
                .unwrap()
                .push((order_id.clone(), key.clone()));
            tokio::time::sleep(wait).await;
            return Ok(json!({"order_id": order_id, "amount": amount}));
        }
        None => {}
    }
    provider
        .applied
        .lock()
        .unwrap()
        .push((order_id.clone(), key));
    Ok(json!({"order_id": order_id, "amount": amount}))
}

/// Refund an order at a provider that applies one idempotency key once.
#[tool(side_effect = "write", key = [order_id], timeout = "2s", honours_key = true)]
async fn refund_keyed(
    ctx: &Ctx,
    key: &IdempotencyKey,
    order_id: String,
    amount: f64,
) -> Result<Value, ToolError> {
    let provider = ctx.state::<Arc<Provider>>()?;
    *provider.runs.lock().unwrap() += 1;
    let key = key.to_string();
    {
        let mut applied = provider.applied.lock().unwrap();
        if !applied.iter().any(|(_, k)| *k == key) {
            applied.push((order_id.clone(), key));
        }
    }
    let fault = provider.faults.lock().unwrap().pop_front();
    if let Some(Fault::Slow(wait)) = fault {
        tokio::time::sleep(wait).await;
    }
    Ok(json!({"order_id": order_id, "amount": amount}))
}

/// Look up an order.
#[tool(timeout = "1s", retry(max_attempts = 3, base = "50ms"))]
async fn lookup(ctx: &Ctx, order_id: String) -> Result<Value, ToolError> {
    let provider = ctx.state::<Arc<Provider>>()?;
    *provider.runs.lock().unwrap() += 1;
    let fault = provider.faults.lock().unwrap().pop_front();
    if let Some(Fault::Slow(wait)) = fault {
        tokio::time::sleep(wait).await;
    }
    Ok(json!({"order_id": order_id}))
}

struct Desk {
    dispatcher: Dispatcher,
    provider: Arc<Provider>,
    store: Arc<MemoryStore>,
}

fn desk() -> Desk {
    desk_waiting(Duration::from_secs(2))
}

fn desk_waiting(in_progress_wait: Duration) -> Desk {
    let mut registry = Registry::new();
    registry
        .register::<refund>()
        .unwrap()
        .register::<refund_keyed>()
        .unwrap()
        .register::<lookup>()
        .unwrap();
    let provider = Arc::new(Provider::default());
    let store = Arc::new(MemoryStore::new());
    let dispatcher = Dispatcher::builder(registry)
        .state(provider.clone())
        .store(store.clone())
        .in_progress_wait(in_progress_wait)
        .jitter_seed(7)
        .build();
    Desk {
        dispatcher,
        provider,
        store,
    }
}

fn session(tenant: &str, run: &str) -> Session {
    Session::new(AuthContext::new(tenant, "agent"), run)
}

async fn call(desk: &Desk, session: &Session, id: &str, args: &str) -> Value {
    let call = ToolCall::from_json_text(id, "refund", args);
    desk.dispatcher
        .dispatch(session, call)
        .await
        .unwrap()
        .result
        .to_json()
}

const ARGS: &str = r#"{"order_id": "ORD-1001", "amount": 500}"#;

#[tokio::test(start_paused = true)]
async fn a_write_runs_once_and_a_replay_returns_the_stored_result() {
    let desk = desk();
    let s = session("acme", "run-1");
    let first = call(&desk, &s, "c1", ARGS).await;
    assert_eq!(
        first,
        json!({"status": "succeeded", "replayed": false, "data": {"order_id": "ORD-1001", "amount": 500.0}})
    );
    let again = call(
        &desk,
        &s,
        "c2",
        r#"{ "amount":500.0, "order_id":"ORD-1001" }"#,
    )
    .await;
    assert_eq!(again["status"], "succeeded");
    assert_eq!(
        again["replayed"], true,
        "reordered keys and 500.0 are the same request"
    );
    assert_eq!(again["data"], first["data"]);
    assert_eq!(desk.provider.runs(), 1);
    assert_eq!(desk.provider.applied().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_same_key_with_other_arguments_is_a_conflict_and_stores_nothing() {
    let desk = desk();
    let s = session("acme", "run-1");
    call(&desk, &s, "c1", ARGS).await;
    let key = desk.provider.keys.lock().unwrap()[0].clone();
    let before = desk.store.get("acme", &key).await.unwrap();
    let other = call(
        &desk,
        &s,
        "c2",
        r#"{"order_id": "ORD-1001", "amount": 900}"#,
    )
    .await;
    assert_eq!(other["status"], "error");
    assert_eq!(other["error"]["kind"], "conflict");
    assert!(
        other["error"]["why"].as_str().unwrap().contains("order_id"),
        "{other}"
    );
    assert_eq!(desk.store.get("acme", &key).await.unwrap(), before);
    assert_eq!(desk.provider.runs(), 1);
}

/// Keys are scoped by tenant by default: another run of the tenant asking the same operation
/// is answered from its record, another tenant's is an operation of its own.
#[tokio::test(start_paused = true)]
async fn keys_are_shared_by_the_runs_of_a_tenant_and_never_across_tenants() {
    let desk = desk();
    let first = call(&desk, &session("acme", "run-1"), "c1", ARGS).await;
    let other_run = call(&desk, &session("acme", "run-2"), "c1", ARGS).await;
    call(&desk, &session("globex", "run-1"), "c1", ARGS).await;
    assert_eq!(other_run["replayed"], true, "{other_run}");
    assert_eq!(other_run["data"], first["data"]);
    assert_eq!(desk.provider.runs(), 2);
    let keys = desk.provider.keys.lock().unwrap().clone();
    assert_ne!(keys[0], keys[1]);
    assert!(
        desk.store.get("globex", &keys[0]).await.unwrap().is_none(),
        "another tenant never sees it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_write_past_its_deadline_is_unknown_and_never_run_again_by_a_replay() {
    let desk = desk();
    let s = session("acme", "run-1");
    desk.provider.script([Fault::Slow(Duration::from_secs(5))]);
    let first = call(&desk, &s, "c1", ARGS).await;
    assert_eq!(first["status"], "outcome_unknown");
    assert_eq!(first["replayed"], false);
    let again = call(&desk, &s, "c2", ARGS).await;
    assert_eq!(again["status"], "outcome_unknown");
    assert_eq!(again["replayed"], true);
    assert_eq!(
        desk.provider.runs(),
        1,
        "an unknown outcome is not retried, nor replayed by running"
    );
    let key = desk.provider.keys.lock().unwrap()[0].clone();
    let record = desk.store.get("acme", &key).await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::OutcomeUnknown);
    assert_eq!(record.errors.len(), 1);
    assert_eq!(record.errors[0].kind, "outcome_unknown");
}

#[tokio::test(start_paused = true)]
async fn a_fault_that_proves_nothing_was_applied_is_retried_with_the_same_key() {
    let desk = desk();
    let s = session("acme", "run-1");
    desk.provider
        .script([Fault::Unavailable, Fault::Unavailable]);
    let started = tokio::time::Instant::now();
    let result = call(&desk, &s, "c1", ARGS).await;
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(desk.provider.runs(), 3);
    let keys = desk.provider.keys.lock().unwrap().clone();
    assert!(
        keys.iter().all(|k| *k == keys[0]),
        "one key on every attempt: {keys:?}"
    );
    // Full jitter: the two waits are at most 100 ms and 200 ms.
    assert!(
        started.elapsed() <= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    let record = desk.store.get("acme", &keys[0]).await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Succeeded);
    let kinds: Vec<_> = record
        .errors
        .iter()
        .map(|e| (e.attempt, e.kind.as_str()))
        .collect();
    assert_eq!(kinds, [(1, "unavailable"), (2, "unavailable")]);
}

#[tokio::test(start_paused = true)]
async fn a_spent_retry_budget_is_a_failure_that_may_be_claimed_again() {
    let desk = desk();
    let s = session("acme", "run-1");
    desk.provider
        .script([Fault::Unavailable, Fault::Unavailable, Fault::Unavailable]);
    let result = call(&desk, &s, "c1", ARGS).await;
    assert_eq!(result["status"], "error");
    assert_eq!(result["error"]["kind"], "unavailable");
    assert!(
        result["error"]["what"]
            .as_str()
            .unwrap()
            .contains("3 times"),
        "{result}"
    );
    assert_eq!(desk.provider.runs(), 3);
    let key = desk.provider.keys.lock().unwrap()[0].clone();
    assert_eq!(
        desk.store.get("acme", &key).await.unwrap().unwrap().state,
        OperationState::Failed
    );
    // Failed means not applied: the next call runs it.
    let again = call(&desk, &s, "c2", ARGS).await;
    assert_eq!(again["status"], "succeeded");
    assert_eq!(again["replayed"], false);
    assert_eq!(desk.provider.applied().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_business_refusal_is_not_retried() {
    let desk = desk();
    let s = session("acme", "run-1");
    desk.provider.script([Fault::Refused]);
    let result = call(&desk, &s, "c1", ARGS).await;
    assert_eq!(result["error"]["kind"], "refused");
    assert_eq!(desk.provider.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_hint_is_honoured() {
    let desk = desk();
    let s = session("acme", "run-1");
    desk.provider
        .script([Fault::RateLimited(Duration::from_millis(1500))]);
    let started = tokio::time::Instant::now();
    let result = call(&desk, &s, "c1", ARGS).await;
    assert_eq!(result["status"], "succeeded");
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(desk.provider.runs(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_duplicate_of_a_running_write_waits_then_answers_in_progress() {
    let desk = desk_waiting(Duration::from_millis(200));
    let s = session("acme", "run-1");
    desk.provider.script([Fault::Slow(Duration::from_secs(1))]);
    let (first, second) = tokio::join!(call(&desk, &s, "c1", ARGS), async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        call(&desk, &s, "c2", ARGS).await
    });
    assert_eq!(first["status"], "succeeded");
    assert_eq!(second["status"], "in_progress", "{second}");
    assert_eq!(second["error"]["kind"], "in_progress");
    assert_eq!(desk.provider.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_duplicate_that_waits_long_enough_gets_the_outcome() {
    let desk = desk_waiting(Duration::from_secs(5));
    let s = session("acme", "run-1");
    desk.provider.script([Fault::Slow(Duration::from_secs(1))]);
    let (first, second) = tokio::join!(call(&desk, &s, "c1", ARGS), async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        call(&desk, &s, "c2", ARGS).await
    });
    assert_eq!(first["replayed"], false);
    assert_eq!(second["status"], "succeeded");
    assert_eq!(second["replayed"], true);
    assert_eq!(desk.provider.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn thirty_two_concurrent_duplicates_run_the_tool_once() {
    let desk = desk();
    let s = session("acme", "run-1");
    desk.provider
        .script([Fault::Slow(Duration::from_millis(300))]);
    let results = futures_util::future::join_all((0..32).map(|i| {
        let (desk, s) = (&desk, &s);
        async move { call(desk, s, &format!("c{i}"), ARGS).await }
    }))
    .await;
    assert_eq!(desk.provider.runs(), 1);
    for result in &results {
        let status = result["status"].as_str().unwrap();
        assert!(status == "succeeded" || status == "in_progress", "{result}");
        if status == "succeeded" {
            assert_eq!(
                result["data"],
                json!({"order_id": "ORD-1001", "amount": 500.0})
            );
        }
    }
    assert_eq!(
        results
            .iter()
            .filter(|r| r["replayed"] == false && r["status"] == "succeeded")
            .count(),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn reads_are_retried_on_timeouts_and_never_stored() {
    let desk = desk();
    let s = session("acme", "run-1");
    desk.provider.script([Fault::Slow(Duration::from_secs(5))]);
    let call = ToolCall::new("c1", "lookup", json!({"order_id": "ORD-1"}));
    let result = desk
        .dispatcher
        .dispatch(&s, call)
        .await
        .unwrap()
        .result
        .to_json();
    assert_eq!(result["status"], "succeeded");
    assert_eq!(desk.provider.runs(), 2);
    assert!(desk.store.list_unknown(10).await.unwrap().is_empty());
}

#[test]
fn a_write_without_a_store_is_a_build_error() {
    let mut registry = Registry::new();
    registry.register::<refund>().unwrap();
    let provider = Arc::new(Provider::default());
    let refused = Dispatcher::builder(registry)
        .state(provider.clone())
        .try_build()
        .unwrap_err();
    assert_eq!(
        refused,
        toolgate::dispatch::BuildError::MissingStore {
            tool: "refund",
            side_effect: SideEffect::Write,
        }
    );
    let message = refused.to_string();
    assert!(
        message.starts_with("the tool `refund` is a write tool"),
        "{message}"
    );
    assert!(
        message.contains("add `DispatcherBuilder::store(...)`"),
        "{message}"
    );
    assert!(
        message.contains("`toolgate::store::SqliteStore` (feature `sqlite`)"),
        "{message}"
    );
    assert_eq!(provider.runs(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_outcome_is_retried_only_under_a_key_the_provider_honours() {
    let desk = desk();
    let s = session("acme", "run-1");
    desk.provider.script([Fault::Slow(Duration::from_secs(5))]);
    let call = ToolCall::from_json_text("c1", "refund_keyed", ARGS);
    let result = desk
        .dispatcher
        .dispatch(&s, call)
        .await
        .unwrap()
        .result
        .to_json();
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(
        desk.provider.runs(),
        2,
        "the timed-out attempt was sent again"
    );
    assert_eq!(
        desk.provider.applied().len(),
        1,
        "under one key, applied once"
    );
    assert!(refund_keyed::descriptor().honours_key);
    assert!(!refund::descriptor().honours_key);
}
