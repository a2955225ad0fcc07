//! A turn is a batch: its calls run concurrently. Real time, in one run:
//!
//! - group `batch`, on a multi-thread runtime (one worker per core), a read tool whose body
//!   awaits a 10 ms timer:
//!   - `one_call`: a turn of one call;
//!   - `fifty_calls`: a turn of 50 such calls, each on a task of its own (the default);
//!   - `fifty_calls_joined`: the same turn with `spawn_calls(false)`, the calls polled together
//!     on the dispatching task.
//!
//!   The figure is `fifty_calls / one_call`: what running 50 calls costs beyond the slowest of
//!   them (target ≤ 1.1).
//! - group `batch_blocking`, on a runtime of 2 workers, a read tool whose body blocks its thread
//!   for 2 ms (`std::thread::sleep`: a synchronous client, or CPU work), a turn of 8 calls:
//!   - `eight_spawned`: each call on its own task, so the workers share them (about 4 × 2 ms);
//!   - `eight_joined`: the calls polled together on the dispatching task, so each blocks the
//!     others (about 8 × 2 ms). What spawning costs shows in `fifty_calls` against
//!     `fifty_calls_joined`; what it buys, here.
//!
//! Every dispatcher is given `RunLimits::UNLIMITED`: each bench dispatches many turns in one
//! run, and the default limits would abort it after 50 turns (a session per iteration would
//! measure its set-up instead). Run with `cargo bench --bench batch`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tokio::runtime::Runtime;
use toolgate::prelude::*;

/// How long the awaiting tool's body takes.
const AWAIT: Duration = Duration::from_millis(10);
/// How long the blocking tool's body holds its thread.
const BLOCK: Duration = Duration::from_millis(2);

/// Look up an order (an answer that takes 10 ms to come back).
#[tool(permission = "orders:read", timeout = "5s")]
async fn get_order(
    /// The order id.
    order_id: String,
) -> Result<String, ToolError> {
    tokio::time::sleep(AWAIT).await;
    Ok(order_id)
}

/// Look up an order through a synchronous client that holds the thread for 2 ms.
#[tool(permission = "orders:read", timeout = "5s")]
async fn get_order_blocking(
    /// The order id.
    order_id: String,
) -> Result<String, ToolError> {
    std::thread::sleep(BLOCK);
    Ok(order_id)
}

/// A turn of `calls` calls of `tool`, each on its own order.
fn turn(tool: &str, calls: usize) -> Vec<ToolCall> {
    (0..calls)
        .map(|n| {
            ToolCall::new(
                format!("call_{n}"),
                tool,
                json!({"order_id": format!("ORD-{n}")}),
            )
        })
        .collect()
}

fn dispatcher(registry: Registry, spawn_calls: bool) -> Dispatcher {
    Dispatcher::builder(registry)
        .run_limits(RunLimits::UNLIMITED)
        .spawn_calls(spawn_calls)
        .build()
}

fn session() -> Session {
    Session::new(
        AuthContext::new("acme", "agent").with_permissions(["orders:read"]),
        "run-1",
    )
}

/// Dispatches `tool`'s turn of `calls` calls and checks that every call succeeded.
fn run_turn(
    runtime: &Runtime,
    dispatcher: &Dispatcher,
    session: &Session,
    tool: &str,
    calls: usize,
) {
    let reports = runtime
        .block_on(dispatcher.dispatch_turn(session, black_box(turn(tool, calls))))
        .unwrap();
    assert_eq!(reports.len(), calls);
    assert!(reports.iter().all(|report| report.result.is_succeeded()));
}

fn batch(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = || {
        let mut registry = Registry::new();
        registry.register::<get_order>().unwrap();
        registry
    };
    let spawned = dispatcher(registry(), true);
    let joined = dispatcher(registry(), false);
    let session = session();

    let mut group = c.benchmark_group("batch");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("one_call", |b| {
        b.iter(|| run_turn(&runtime, &spawned, &session, "get_order", 1))
    });
    group.bench_function("fifty_calls", |b| {
        b.iter(|| run_turn(&runtime, &spawned, &session, "get_order", 50))
    });
    group.bench_function("fifty_calls_joined", |b| {
        b.iter(|| run_turn(&runtime, &joined, &session, "get_order", 50))
    });
    group.finish();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let registry = || {
        let mut registry = Registry::new();
        registry.register::<get_order_blocking>().unwrap();
        registry
    };
    let spawned = dispatcher(registry(), true);
    let joined = dispatcher(registry(), false);
    let mut group = c.benchmark_group("batch_blocking");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("eight_spawned", |b| {
        b.iter(|| run_turn(&runtime, &spawned, &session, "get_order_blocking", 8))
    });
    group.bench_function("eight_joined", |b| {
        b.iter(|| run_turn(&runtime, &joined, &session, "get_order_blocking", 8))
    });
    group.finish();
}

criterion_group!(benches, batch);
criterion_main!(benches);
