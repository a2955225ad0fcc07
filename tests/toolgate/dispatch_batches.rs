//! A turn is a batch: its calls run concurrently, writes on one resource one after the other,
//! identical writes once; a call that aborts the run loses no applied write, on the SQLite and
//! the PostgreSQL stores, whichever of the write and the abort finishes first.
//!
//! Order is set by gates the test opens (tokio `Notify`), never by sleeps; where a duration
//! matters the clock is paused.

use crate::support::{session_in, stores};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::Notify;
use toolgate::prelude::*;
use toolgate::store::OperationStore;

/// What the tools of these tests share with the test.
#[derive(Default)]
struct World {
    /// Writes applied, in order: what a provider's ledger would hold.
    applied: Mutex<Vec<String>>,
    /// Starts and ends of the writes, in order.
    log: Mutex<Vec<String>>,
    /// A `pay` has started.
    pay_started: Notify,
    /// Lets a `pay` finish.
    pay_gate: Notify,
    /// A `pay` has applied.
    pay_applied: Notify,
    /// Lets `revoked` answer.
    abort_gate: Notify,
    /// The slow read has started.
    slow_started: Notify,
    /// The slow read was dropped before it answered.
    slow_dropped: Notify,
    /// Runs of `adjust`.
    adjusts: AtomicUsize,
    /// The first adjustment of `A` has started.
    a_started: Notify,
    /// An adjustment of `B` has started.
    b_started: Notify,
}

impl World {
    fn applied(&self) -> Vec<String> {
        self.applied.lock().unwrap().clone()
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// Pay an invoice; waits for the test's gate before it applies.
#[tool(side_effect = "write", timeout = "60s")]
async fn pay(world: State<Arc<World>>, invoice: String) -> Result<String, ToolError> {
    world.pay_started.notify_one();
    world.pay_gate.notified().await;
    world.applied.lock().unwrap().push(invoice.clone());
    world.pay_applied.notify_one();
    Ok(format!("paid {invoice}"))
}

/// Check the session's credentials upstream; they turn out revoked once the test lets it answer.
#[tool(timeout = "60s")]
async fn revoked(world: State<Arc<World>>) -> Result<String, ToolError> {
    world.abort_gate.notified().await;
    Err(ToolError::credentials_revoked(
        "the upstream token was revoked",
    ))
}

/// Says when it is dropped.
struct DropFlag(Arc<World>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.slow_dropped.notify_one();
    }
}

/// A read that never answers by itself.
#[tool(timeout = "60s")]
async fn slow_report(world: State<Arc<World>>) -> Result<String, ToolError> {
    let _flag = DropFlag(Arc::clone(&world));
    world.slow_started.notify_one();
    std::future::pending::<()>().await;
    Ok("never".into())
}

/// Needs a permission no session of these tests holds.
#[tool(permission = "orders:read")]
async fn get_order(order_id: String) -> Result<String, ToolError> {
    Ok(order_id)
}

/// Adjust an account's balance. The first adjustment of `A` and the one of `B` wait for each
/// other to start, which they can only if they run at the same time.
#[tool(side_effect = "write", resource = account, timeout = "20s")]
async fn adjust(world: State<Arc<World>>, account: String, delta: i64) -> Result<i64, ToolError> {
    world.adjusts.fetch_add(1, Ordering::SeqCst);
    let note = |event: &str| {
        let line = format!("{event} {account} {delta}");
        world.log.lock().unwrap().push(line);
    };
    note("start");
    let rendezvous = match (account.as_str(), delta) {
        ("A", 5) => Some((&world.a_started, &world.b_started)),
        ("B", _) => Some((&world.b_started, &world.a_started)),
        _ => None,
    };
    if let Some((mine, other)) = rendezvous {
        mine.notify_one();
        let alongside = tokio::time::timeout(Duration::from_secs(10), other.notified());
        if alongside.await.is_err() {
            return Err(ToolError::refused(
                "the other adjustment never ran alongside",
            ));
        }
    }
    note("end");
    let applied = format!("{account} {delta}");
    world.applied.lock().unwrap().push(applied);
    Ok(delta)
}

/// The seed of the retries' jitter: a read that times out is retried after the same delay on
/// every run (a seed drawn from the clock made the order of answers change one run in a hundred).
const JITTER_SEED: u64 = 7;

/// A read that takes 100 ms.
#[tool(timeout = "1s")]
async fn lookup(id: u32) -> Result<u32, ToolError> {
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(id)
}

/// A read that takes far longer than its deadline.
#[tool(timeout = "50ms")]
async fn stuck(id: u32) -> Result<u32, ToolError> {
    tokio::time::sleep(Duration::from_secs(3600)).await;
    Ok(id)
}

/// A read that blocks its thread until `unblock` runs (the case that spawning each call is for).
#[tool(timeout = "10s")]
async fn blocking(world: State<Arc<BlockingGate>>) -> Result<String, ToolError> {
    // Blocks the thread, not just the task: a sibling joined on this task could never run.
    match world
        .rx
        .lock()
        .unwrap()
        .recv_timeout(Duration::from_secs(5))
    {
        Ok(()) => Ok("unblocked".into()),
        Err(_) => Err(ToolError::internal(
            "no sibling ran while this call held its thread",
        )),
    }
}

/// Lets `blocking` go on.
#[tool(timeout = "10s")]
async fn unblock(world: State<Arc<BlockingGate>>) -> Result<String, ToolError> {
    world.tx.lock().unwrap().send(()).unwrap();
    Ok("sent".into())
}

struct BlockingGate {
    tx: Mutex<std::sync::mpsc::Sender<()>>,
    rx: Mutex<std::sync::mpsc::Receiver<()>>,
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register::<pay>()
        .unwrap()
        .register::<revoked>()
        .unwrap()
        .register::<slow_report>()
        .unwrap()
        .register::<adjust>()
        .unwrap()
        .register::<lookup>()
        .unwrap()
        .register::<stuck>()
        .unwrap();
    registry
}

fn dispatcher(store: Arc<dyn OperationStore>, world: &Arc<World>) -> Dispatcher {
    Dispatcher::builder(registry())
        .jitter_seed(JITTER_SEED)
        .store(store)
        .state(world.clone())
        .build()
}

fn pay_call(id: &str, invoice: &str) -> ToolCall {
    ToolCall::new(id, "pay", json!({"invoice": invoice}))
}

fn statuses(aborted: &TurnAborted) -> Vec<(&str, &str)> {
    aborted
        .calls
        .iter()
        .map(|call| (call.call_id.as_str(), call.fate.status()))
        .collect()
}

/// Awaits `step`, failing the test with `what` when it has not happened within a minute: a step
/// that never comes is a failure to read, not a run that hangs until CI's limit.
async fn within<F: std::future::IntoFuture>(what: &str, step: F) -> F::Output {
    match tokio::time::timeout(Duration::from_secs(60), step.into_future()).await {
        Ok(output) => output,
        Err(_) => panic!("waited a minute for this step, which never came: {what}"),
    }
}

/// Which of the write and the abort finishes first.
#[derive(Debug, Clone, Copy)]
enum First {
    Abort,
    Write,
}

/// A turn of a write, a read that aborts the run and a slow read: whichever of the write and
/// the abort comes first, the write runs to its end and is reported applied, the slow read is
/// stopped, and the reports agree with the ledger. A later turn runs nothing, nor does a new
/// process's session of the same run.
async fn an_abort_loses_no_applied_write(store: Arc<dyn OperationStore>, first: First) {
    let world = Arc::new(World::default());
    let dispatcher = dispatcher(store.clone(), &world);
    let run = format!("run-{first:?}");
    let s = session_in(&run);
    let calls = vec![
        pay_call("w1", "INV-1"),
        ToolCall::new("a", "revoked", json!({})),
        ToolCall::new("r", "slow_report", json!({})),
    ];
    let turn = tokio::spawn({
        let dispatcher = dispatcher.clone();
        let s = s.clone();
        async move { dispatcher.dispatch_turn(&s, calls).await }
    });
    // Both the write and the slow read are running before either gate opens: a read cancelled
    // before its body ran would never say it was dropped.
    within("the write starts", world.pay_started.notified()).await;
    within("the slow read starts", world.slow_started.notified()).await;
    match first {
        First::Abort => {
            world.abort_gate.notify_one();
            // The slow read is dropped once the abort is raised: the write is still waiting.
            within("the slow read is dropped", world.slow_dropped.notified()).await;
            assert!(world.applied().is_empty(), "the write has not applied yet");
            world.pay_gate.notify_one();
        }
        First::Write => {
            world.pay_gate.notify_one();
            within("the write applies", world.pay_applied.notified()).await;
            world.abort_gate.notify_one();
        }
    }
    let aborted = within("the turn ends", turn)
        .await
        .unwrap()
        .expect_err("the run aborts");
    assert_eq!(
        aborted.reason.kind,
        ErrorKind::CredentialsRevoked,
        "{first:?}"
    );
    assert_eq!(
        statuses(&aborted),
        [("w1", "succeeded"), ("a", "aborted"), ("r", "cancelled")],
        "{first:?}"
    );
    // The reports and the ledger agree: every write reported applied is in the ledger, and no
    // other.
    let reported: Vec<&str> = aborted
        .calls
        .iter()
        .filter(|call| matches!(&call.fate, Fate::Answered(r) if r.is_succeeded()))
        .map(|call| call.call_id.as_str())
        .collect();
    assert_eq!(reported, ["w1"]);
    assert_eq!(world.applied(), ["INV-1"]);

    // A later turn of the run runs nothing.
    let later = dispatcher
        .dispatch_turn(&s, vec![pay_call("w2", "INV-2")])
        .await
        .expect_err("the run stays aborted");
    assert!(later.calls.is_empty());
    assert_eq!(later.reason.kind, ErrorKind::CredentialsRevoked);
    // So does a restarted process: the abort is in the store.
    let restarted = self::dispatcher(store.clone(), &world);
    let later = restarted
        .dispatch_turn(&session_in(&run), vec![pay_call("w3", "INV-3")])
        .await
        .expect_err("the store keeps the abort");
    assert_eq!(later.reason.kind, ErrorKind::CredentialsRevoked);
    assert_eq!(world.applied(), ["INV-1"], "nothing ran after the abort");
}

/// The permission of every call is checked before any runs: a turn with a call the session may
/// not make runs none, and says so of each.
async fn a_missing_permission_aborts_before_anything_runs(store: Arc<dyn OperationStore>) {
    let world = Arc::new(World::default());
    let mut registry = registry();
    registry.register::<get_order>().unwrap();
    let dispatcher = Dispatcher::builder(registry)
        .store(store)
        .state(world.clone())
        .build();
    let s = session_in("run-permission");
    // The write would wait for its gate forever: it must never start.
    let calls = vec![
        pay_call("w1", "INV-1"),
        ToolCall::new("g", "get_order", json!({"order_id": "ORD-1"})),
    ];
    let turn = dispatcher.dispatch_turn(&s, calls);
    let aborted = tokio::time::timeout(Duration::from_secs(30), turn)
        .await
        .expect("the write never started, so nothing waits for its gate")
        .unwrap_err();
    assert_eq!(aborted.reason.kind, ErrorKind::PermissionDenied);
    assert_eq!(
        statuses(&aborted),
        [("w1", "not_started"), ("g", "aborted")]
    );
    assert!(world.applied().is_empty());
    assert_eq!(world.log(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_loses_no_applied_write_on_sqlite() {
    for first in [First::Abort, First::Write] {
        let (store, _dir) = stores::sqlite().await;
        an_abort_loses_no_applied_write(store, first).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_loses_no_applied_write_on_postgres() {
    for first in [First::Abort, First::Write] {
        an_abort_loses_no_applied_write(stores::postgres().await, first).await;
    }
}

#[tokio::test]
async fn a_missing_permission_aborts_before_anything_runs_on_sqlite() {
    let (store, _dir) = stores::sqlite().await;
    a_missing_permission_aborts_before_anything_runs(store).await;
}

#[tokio::test]
async fn a_missing_permission_aborts_before_anything_runs_on_postgres() {
    a_missing_permission_aborts_before_anything_runs(stores::postgres().await).await;
}

fn adjust_call(id: &str, account: &str, delta: i64) -> ToolCall {
    ToolCall::new(id, "adjust", json!({"account": account, "delta": delta}))
}

/// Writes on one resource run one after the other in the order emitted; on another resource at
/// the same time; an identical write runs once and answers the same outcome as a replay.
async fn writes_on_one_resource_run_in_order(store: Arc<dyn OperationStore>) {
    let world = Arc::new(World::default());
    let dispatcher = dispatcher(store, &world);
    let s = session_in("run-resources");
    let calls = vec![
        adjust_call("c1", "A", 5),
        adjust_call("c2", "B", 7),
        adjust_call("c3", "A", -2),
        adjust_call("c4", "A", 5),
    ];
    let reports = dispatcher.dispatch_turn(&s, calls).await.unwrap();
    let results: Vec<_> = reports.iter().map(|r| r.result.to_json()).collect();
    assert_eq!(
        results[0],
        json!({"status": "succeeded", "replayed": false, "data": 5})
    );
    assert_eq!(
        results[1],
        json!({"status": "succeeded", "replayed": false, "data": 7})
    );
    assert_eq!(
        results[2],
        json!({"status": "succeeded", "replayed": false, "data": -2})
    );
    // The same key and arguments as c1: run once, answered as a replay.
    assert_eq!(
        results[3],
        json!({"status": "succeeded", "replayed": true, "data": 5})
    );
    assert_eq!(world.adjusts.load(Ordering::SeqCst), 3);
    let log = world.log();
    let at = |event: &str| log.iter().position(|e| e == event).unwrap();
    // A's writes one after the other, in the order emitted.
    assert!(at("end A 5") < at("start A -2"), "{log:?}");
    // B's alongside A's first (each waited for the other to start).
    assert!(at("start B 7") < at("end A 5"), "{log:?}");
    assert!(at("start A 5") < at("end B 7"), "{log:?}");
    assert_eq!(world.applied().len(), 3);
}

#[tokio::test]
async fn writes_on_one_resource_run_in_order_in_memory() {
    writes_on_one_resource_run_in_order(Arc::new(toolgate_test::MemoryStore::new())).await;
}

#[tokio::test]
async fn writes_on_one_resource_run_in_order_on_sqlite() {
    let (store, _dir) = stores::sqlite().await;
    writes_on_one_resource_run_in_order(store).await;
}

#[tokio::test]
async fn writes_on_one_resource_run_in_order_on_postgres() {
    writes_on_one_resource_run_in_order(stores::postgres().await).await;
}

/// 50 reads of 100 ms each take about 100 ms together.
#[tokio::test(start_paused = true)]
async fn fifty_reads_take_as_long_as_one() {
    let dispatcher = Dispatcher::builder(registry())
        .jitter_seed(JITTER_SEED)
        .store(toolgate_test::MemoryStore::new())
        .state(Arc::new(World::default()))
        .build();
    let calls = (0..50)
        .map(|i| ToolCall::new(format!("c{i}"), "lookup", json!({"id": i})))
        .collect();
    let started = tokio::time::Instant::now();
    let reports = dispatcher
        .dispatch_turn(&session_in("run-fifty"), calls)
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(reports.len(), 50);
    for (i, report) in reports.iter().enumerate() {
        assert_eq!(report.call_id, format!("c{i}"));
        assert_eq!(report.result.to_json()["data"], i);
    }
    assert!(
        took >= Duration::from_millis(100) && took < Duration::from_millis(110),
        "{took:?}"
    );
}

/// Each report reaches the caller as soon as its call is answered, once: a call id given to two
/// calls at the start, the 100 ms read, then the read that timed out twice; the turn answers the
/// same reports in the model's order.
#[tokio::test(start_paused = true)]
async fn each_answer_is_sent_as_soon_as_it_is_known_and_once() {
    let dispatcher = Dispatcher::builder(registry())
        .jitter_seed(JITTER_SEED)
        .store(toolgate_test::MemoryStore::new())
        .state(Arc::new(World::default()))
        .build();
    let calls = vec![
        ToolCall::new("c1", "stuck", json!({"id": 1})),
        ToolCall::new("c2", "lookup", json!({"id": 2})),
        ToolCall::new("twice", "lookup", json!({"id": 3})),
        ToolCall::new("twice", "lookup", json!({"id": 4})),
    ];
    // `timed_turn` also checks that each report sent is the one the turn answers, once.
    let (reports, arrivals) =
        toolgate_test::timed_turn(&dispatcher, &session_in("run-answering"), calls).await;
    let order: Vec<(&str, Duration)> = arrivals
        .iter()
        .map(|(report, at)| (report.call_id.as_str(), *at))
        .collect();
    assert_eq!(
        order[..2],
        [
            ("twice", Duration::ZERO),
            ("c2", Duration::from_millis(100))
        ]
    );
    // Two attempts of 50 ms and the backoff between them.
    assert_eq!(order[2].0, "c1");
    assert!(order[2].1 > Duration::from_millis(100), "{order:?}");
    let ids: Vec<&str> = reports.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "twice"]);
}

/// A read that times out inside a batch is a labelled result; its siblings succeed.
#[tokio::test(start_paused = true)]
async fn a_timeout_in_a_batch_is_a_labelled_result() {
    let dispatcher = Dispatcher::builder(registry())
        .jitter_seed(JITTER_SEED)
        .store(toolgate_test::MemoryStore::new())
        .state(Arc::new(World::default()))
        .build();
    let calls = vec![
        ToolCall::new("c1", "lookup", json!({"id": 1})),
        ToolCall::new("c2", "stuck", json!({"id": 2})),
        ToolCall::new("c3", "lookup", json!({"id": 3})),
    ];
    let reports = dispatcher
        .dispatch_turn(&session_in("run-timeout"), calls)
        .await
        .unwrap();
    assert_eq!(reports[0].result.to_json()["data"], 1);
    assert_eq!(reports[2].result.to_json()["data"], 3);
    let timed_out = reports[1].result.to_json();
    assert_eq!(timed_out["status"], "error");
    let error = &timed_out["error"];
    assert_eq!(error["kind"], "timeout");
    assert_eq!(error["what"], "stuck did not answer within 50ms");
    assert_eq!(error["after_ms"], 50);
    assert_eq!(error["may_still_be_running"], false);
    assert!(
        error["why"].as_str().unwrap().contains("stopped"),
        "{error}"
    );
}

/// A tool body that blocks its thread does not stall its siblings: each call of the turn runs
/// on a task of its own (the default). Joined on one task, the sibling it waits for would never
/// run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_call_does_not_stall_its_siblings() {
    let (tx, rx) = std::sync::mpsc::channel();
    let gate = Arc::new(BlockingGate {
        tx: Mutex::new(tx),
        rx: Mutex::new(rx),
    });
    let mut registry = Registry::new();
    registry
        .register::<blocking>()
        .unwrap()
        .register::<unblock>()
        .unwrap();
    let dispatcher = Dispatcher::builder(registry).state(gate).build();
    let calls = vec![
        ToolCall::new("b", "blocking", json!({})),
        ToolCall::new("u", "unblock", json!({})),
    ];
    let reports = dispatcher
        .dispatch_turn(&session_in("run-blocking"), calls)
        .await
        .unwrap();
    assert_eq!(reports[0].result.to_json()["data"], "unblocked");
    assert_eq!(reports[1].result.to_json()["data"], "sent");
}
