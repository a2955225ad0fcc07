//! A write call on PostgreSQL, wall clock: `Dispatcher::dispatch` of a write tool (the claim,
//! which counts the turn, and the success with its audit record, in a run counted in the store, under
//! finite limits it never reaches), the same call in an unshared run (`Session::unshared`, its
//! counters in the session), and the store's own claim and success of one operation
//! (`PostgresStore::claim` then `::succeed`), in interleaved rounds: each round times one of
//! each, in turns, so all meet the server, its caches and the machine's noise alike. Prints each
//! one's median and its ratio to the store's own. Every call is of a new key.
//!
//! Needs a PostgreSQL server, found or started by `toolgate_test_postgres` (or
//! `DATABASE_URL`). Run with `cargo bench --bench write_call` (`TOOLGATE_WRITE_ROUNDS`, 500 by
//! default).

use std::sync::Arc;
use std::time::{Duration, Instant};

use toolgate::prelude::*;
use toolgate::store::prelude::*;
use toolgate::store::{Claim, ClaimRequest, ClaimToken, PostgresStore, Success};
use toolgate_test_postgres::test_database;

/// Refund an order.
#[tool(side_effect = "write", key = [order_id])]
async fn refund(order_id: String, amount: u64) -> Result<u64, ToolError> {
    let _ = order_id;
    Ok(amount)
}

const TENANT: &str = "acme";

/// The median of `times`, sorted in place.
fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// One claim and success of a new operation, as the write path stores it.
async fn claim_and_succeed(store: &PostgresStore, key: &str) {
    let now = toolgate::dispatch::Clock::now_ms(&toolgate::dispatch::SystemClock);
    let request = ClaimRequest {
        tenant: TENANT,
        key,
        tool: "refund",
        request_hash: "sha256:9c1e",
        unkeyed: None,
        arguments: r#"{"amount":500,"order_id":"ORD-1"}"#,
        now_ms: now,
        lease: Duration::from_secs(30),
        takeover: false,
        approval: None,
    };
    let attempt = match store.claim(request).await.expect("claim") {
        Claim::Acquired { attempt, .. } => attempt,
        other => panic!("a new key is acquired: {other:?}"),
    };
    let owner = ClaimToken {
        tenant: TENANT.to_owned(),
        key: key.to_owned(),
        attempt,
    };
    store
        .succeed(Success {
            owner: &owner,
            result: "500",
            now_ms: now + 1,
            audit: None,
        })
        .await
        .expect("succeed");
}

fn main() {
    let rounds: usize = std::env::var("TOOLGATE_WRITE_ROUNDS")
        .map(|rounds| rounds.parse().expect("TOOLGATE_WRITE_ROUNDS is a number"))
        .unwrap_or(500);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let url = test_database().await;
        let store = PostgresStore::options(&url)
            .connect()
            .await
            .expect("the store connects");
        let shared: Arc<dyn OperationStore> = Arc::new(store.clone());
        let mut registry = Registry::new();
        registry.register::<refund>().unwrap();
        // Limits counted on every call, never reached in the rounds.
        let limits = RunLimits::DEFAULT
            .max_steps(u32::MAX)
            .max_tool_calls(u32::MAX)
            .retry_budget(u32::MAX);
        let dispatcher = Dispatcher::builder(registry)
            .store(shared)
            .run_limits(limits)
            .build();
        let run = format!("write-call-{}", std::process::id());
        let session = Session::new(AuthContext::new(TENANT, "agent"), run);
        // The same calls in an unshared run: counted in the session, not the store.
        let unshared = Session::new(
            AuthContext::new(TENANT, "agent"),
            format!("write-call-unshared-{}", std::process::id()),
        )
        .unshared();
        let (mut calls, mut alone, mut stored) = (Vec::new(), Vec::new(), Vec::new());
        // A few rounds first, untimed: connections opened, statements prepared.
        let pid = std::process::id();
        // A refund of a new order, so of a new key.
        let refund_of = |order: String| {
            let args = serde_json::json!({"order_id": order, "amount": 500});
            ToolCall::new(format!("call_{order}"), "refund", args)
        };
        for round in 0..rounds + 20 {
            let call = refund_of(format!("ORD-{round}-{pid}"));
            let started = Instant::now();
            let report = dispatcher.dispatch(&session, call).await.expect("no abort");
            let call_took = started.elapsed();
            assert!(report.result.is_succeeded(), "{:?}", report.result);
            let call = refund_of(format!("ORD-{round}-{pid}-u"));
            let started = Instant::now();
            let report = dispatcher
                .dispatch(&unshared, call)
                .await
                .expect("no abort");
            let alone_took = started.elapsed();
            assert!(report.result.is_succeeded(), "{:?}", report.result);
            let started = Instant::now();
            claim_and_succeed(&store, &format!("bench-{round}-{pid}")).await;
            let store_took = started.elapsed();
            if round >= 20 {
                calls.push(call_took);
                alone.push(alone_took);
                stored.push(store_took);
            }
        }
        let own = median(&mut stored);
        println!("{rounds} interleaved rounds, medians:");
        println!("  the store's claim + succeed  {own:?}");
        for (what, times) in [
            ("write call", &mut calls),
            ("write call, unshared run", &mut alone),
        ] {
            let took = median(times);
            println!(
                "  {what:<27}  {took:?}  ({:.2}x)",
                took.as_secs_f64() / own.as_secs_f64()
            );
        }
        store.close().await;
    });
}
