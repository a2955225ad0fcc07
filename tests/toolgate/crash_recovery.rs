//! Crash recovery: a process that dispatches refunds is killed (`SIGKILL`) at each point between
//! the claim, the provider call and the record; after a restart and one reconciler pass, the
//! provider's ledger holds every intended refund exactly once, no record is left `processing`,
//! and replaying the calls answers the provider's refunds.
//!
//! The parent test runs this test binary again as a child for each seeded run, with the role, the
//! seed, the failpoint and the file paths in environment variables. The child dispatches the
//! run's calls on a SQLite store and the fake provider (its ledger a file), prints a marker and
//! blocks when it reaches the failpoint; the parent reads the marker, kills the child, then plays
//! the restarted process in its own address space: it opens the same files, reconciles with a
//! clock past every lease, replays the calls and checks the ledger and the store. A seed decides
//! the number of calls, their orders and amounts, the fault script, the provider's key mode, and
//! at which call the process dies; the failpoint cycles with the seed. No step waits on a timer
//! to learn that another has happened.
//!
//! Run one seed by hand (the child blocks at its failpoint, so stop it with Ctrl-C):
//!
//! ```text
//! TOOLGATE_CRASH_ROLE=child TOOLGATE_CRASH_SEED=17 TOOLGATE_CRASH_POINT=executed \
//! TOOLGATE_CRASH_STORE=/tmp/ops.db TOOLGATE_CRASH_LEDGER=/tmp/ledger.jsonl \
//!   cargo test -p toolgate --test toolgate -- --exact crash_recovery::crash_child --nocapture
//! ```
//!
//! Unix only: it kills with `SIGKILL` and checks the signal.
#![cfg(unix)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::store::SqliteStore;
use toolgate::store::prelude::*;
use toolgate::store::{OperationQuery, OperationState};
use toolgate::{
    dispatch::{DispatcherBuilder, Failpoint},
    reconcile::Reconciler,
};
use toolgate_demo::fake_provider::{FakeProvider, Fault, KeyMode, Operation, Refund};
use toolgate_test::{ManualClock, RecordingFailpoints};

/// Seeded runs, each killed once.
const RUNS: u64 = 200;
/// Runs in flight at once: a child spends most of its life waiting on fsyncs and deadlines.
const WORKERS: usize = 4;
/// How long the parent lets a child take to reach its failpoint before it calls it hung.
const CHILD_DEADLINE: Duration = Duration::from_secs(60);

/// The deadline of an attempt before the crash: short, so timeout faults cost little.
const LIFE_TIMEOUT: Duration = Duration::from_millis(200);
/// The deadline after the restart: long, so a busy machine never turns a replay unknown.
const RESTART_TIMEOUT: Duration = Duration::from_secs(30);
/// The clock of the process that dies (stored times, leases).
const LIFE_CLOCK_MS: i64 = 1_700_000_000_000;
/// The clock of the restarted process: an hour later, past every lease (seconds long) and well
/// inside the retention (days), so the reconciler expires leases and purges nothing.
const RESTART_CLOCK_MS: i64 = LIFE_CLOCK_MS + 3_600_000;

const ROLE_VAR: &str = "TOOLGATE_CRASH_ROLE";
const SEED_VAR: &str = "TOOLGATE_CRASH_SEED";
const POINT_VAR: &str = "TOOLGATE_CRASH_POINT";
const STORE_VAR: &str = "TOOLGATE_CRASH_STORE";
const LEDGER_VAR: &str = "TOOLGATE_CRASH_LEDGER";
/// The path of the child test in this binary, for `--exact`.
const CHILD_TEST: &str = "crash_recovery::crash_child";
/// What the child prints, followed by the point's name, when it stops at its failpoint.
const MARKER: &str = "toolgate-crash-stopped-at: ";
const TENANT: &str = "acme";

/// Refund an order at the payment provider.
#[tool(side_effect = "write", key = [order_id], retry(max_attempts = 3, base = "1ms", max = "4ms"),
       reconcile = find_refund)]
async fn refund(
    ctx: &Ctx,
    key: &IdempotencyKey,
    order_id: String,
    amount_cents: i64,
) -> Result<Refund, ToolError> {
    send_refund(ctx, key, &order_id, amount_cents).await
}

/// Refund an order at a payment provider that applies one idempotency key once.
#[tool(side_effect = "write", key = [order_id], honours_key = true,
       retry(max_attempts = 3, base = "1ms", max = "4ms"), reconcile = find_refund)]
async fn refund_keyed(
    ctx: &Ctx,
    key: &IdempotencyKey,
    order_id: String,
    amount_cents: i64,
) -> Result<Refund, ToolError> {
    send_refund(ctx, key, &order_id, amount_cents).await
}

async fn send_refund(
    ctx: &Ctx,
    key: &IdempotencyKey,
    order_id: &str,
    amount_cents: i64,
) -> Result<Refund, ToolError> {
    let provider = ctx.state::<Arc<FakeProvider>>()?;
    provider.refund(key, order_id, amount_cents).await
}

/// Asks the provider for the refund under the operation's key.
async fn find_refund(
    ctx: &Ctx,
    key: &IdempotencyKey,
    order_id: String,
    amount_cents: i64,
) -> Result<Option<Refund>, ToolError> {
    let provider = ctx.state::<Arc<FakeProvider>>()?;
    match provider.lookup(key).await? {
        Some(found) if found.order_id != order_id || found.amount_cents != amount_cents => {
            Err(ToolError::internal(format!(
                "the refund under the key is for {}",
                found.order_id
            )))
        }
        found => Ok(found),
    }
}

/// Where the child stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Point {
    /// [`Failpoint::Claimed`]: the key is claimed, the tool has not run.
    Claimed,
    /// The provider applied the refund and has not answered (the provider's hook).
    Applied,
    /// [`Failpoint::Executed`]: the tool returned or gave up, nothing is recorded.
    Executed,
    /// [`Failpoint::Recorded`]: the outcome is recorded.
    Recorded,
}

const POINTS: [Point; 4] = [
    Point::Claimed,
    Point::Applied,
    Point::Executed,
    Point::Recorded,
];

impl Point {
    fn name(self) -> &'static str {
        match self {
            Point::Claimed => "claimed",
            Point::Applied => "applied",
            Point::Executed => "executed",
            Point::Recorded => "recorded",
        }
    }

    fn parse(name: &str) -> Point {
        POINTS
            .into_iter()
            .find(|point| point.name() == name)
            .unwrap_or_else(|| panic!("{POINT_VAR}={name} is none of {POINTS:?}"))
    }

    /// The dispatcher's failpoint, when the point is one.
    fn failpoint(self) -> Option<Failpoint> {
        match self {
            Point::Claimed => Some(Failpoint::Claimed),
            Point::Applied => None,
            Point::Executed => Some(Failpoint::Executed),
            Point::Recorded => Some(Failpoint::Recorded),
        }
    }
}

/// SplitMix64: a few lines, and the same numbers everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One seeded run: what the process does before it dies at `point` during call `kill_at`.
#[derive(Debug)]
struct Scenario {
    point: Point,
    kill_at: usize,
    mode: KeyMode,
    tool: &'static str,
    calls: Vec<Call>,
}

/// One refund the agent asks for, and how the provider misbehaves on its attempts.
#[derive(Debug)]
struct Call {
    order_id: String,
    amount_cents: i64,
    faults: Vec<Fault>,
}

impl Scenario {
    fn new(seed: u64, point: Point) -> Scenario {
        let mut rng = Rng(seed);
        let count = 1 + rng.below(5) as usize;
        let kill_at = rng.below(count as u64) as usize;
        // A tool declares `honours_key` only when its provider does.
        let (mode, tool) = match rng.below(3) {
            0 => (KeyMode::Ignores, "refund"),
            1 => (KeyMode::Honours, "refund"),
            _ => (KeyMode::Honours, "refund_keyed"),
        };
        let mut orders = BTreeSet::new();
        let calls = (0..count)
            .map(|i| {
                let order_id = loop {
                    let id = format!("ORD-{}", 1000 + rng.below(9000));
                    if orders.insert(id.clone()) {
                        break id;
                    }
                };
                let amount_cents = 1 + rng.below(100_000) as i64;
                // The provider's hook stops the process only if the call reaches the provider.
                let must_apply = point == Point::Applied && i == kill_at;
                Call {
                    order_id,
                    amount_cents,
                    faults: faults(&mut rng, must_apply),
                }
            })
            .collect();
        Scenario {
            point,
            kill_at,
            mode,
            tool,
            calls,
        }
    }
}

/// The provider's script for one call's attempts: up to three 503s (three spend the retry
/// budget), then perhaps one fault after or instead of applying. With `must_apply`, one of the
/// call's attempts applies.
fn faults(rng: &mut Rng, must_apply: bool) -> Vec<Fault> {
    let unavailable = match rng.below(8) {
        0 if !must_apply => 3,
        0 | 1 => 2,
        2 | 3 => 1,
        _ => 0,
    };
    let mut faults = vec![Fault::UnavailableBeforeApply; unavailable];
    match rng.below(8) {
        0 => faults.push(Fault::TimeoutAfterApply),
        1 => faults.push(Fault::ResetAfterApply),
        2 => faults.push(Fault::Slow(Duration::from_millis(1 + rng.below(10)))),
        // Past the deadline: the request is dropped before it is applied.
        3 if !must_apply => faults.push(Fault::Slow(LIFE_TIMEOUT + Duration::from_millis(20))),
        _ => {}
    }
    faults
}

fn session(seed: u64) -> Session {
    Session::new(AuthContext::new(TENANT, "agent"), format!("crash-{seed}"))
}

fn arguments(call: &Call) -> Value {
    json!({"order_id": call.order_id, "amount_cents": call.amount_cents})
}

/// A dispatcher on `store` and `provider` whose clock shows `now_ms`.
fn dispatcher(
    store: &SqliteStore,
    provider: &Arc<FakeProvider>,
    now_ms: i64,
    timeout: Duration,
    seed: u64,
) -> DispatcherBuilder {
    let mut registry = Registry::new();
    registry
        .register::<refund>()
        .unwrap()
        .register::<refund_keyed>()
        .unwrap();
    Dispatcher::builder(registry)
        .state(provider.clone())
        .store(Arc::new(store.clone()))
        .clock(Arc::new(ManualClock::new(now_ms)))
        .default_timeout(timeout)
        .jitter_seed(seed)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Tells the parent where the process is, then waits for the kill.
fn stop_here(point: Point) -> ! {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{MARKER}{}", point.name())
        .and_then(|()| out.flush())
        .expect("the parent reads the child's stdout");
    drop(out);
    loop {
        std::thread::park();
    }
}

/// Stops the process at `point` once the call numbered `current` reaches `kill_at`.
struct StopAt {
    point: Point,
    kill_at: usize,
    current: Arc<AtomicUsize>,
}

impl StopAt {
    fn reached(&self, point: Point) {
        if point == self.point && self.current.load(Ordering::SeqCst) >= self.kill_at {
            stop_here(point);
        }
    }
}

/// The child: dispatches the run's calls until it stops at its failpoint. Does nothing unless
/// the parent test started it.
#[test]
fn crash_child() {
    if std::env::var_os(ROLE_VAR).is_none() {
        return;
    }
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    let seed: u64 = var(SEED_VAR).parse().expect("a numeric seed");
    let point = Point::parse(&var(POINT_VAR));
    let scenario = Scenario::new(seed, point);
    let stop = Arc::new(StopAt {
        point,
        kill_at: scenario.kill_at,
        current: Arc::new(AtomicUsize::new(0)),
    });
    let provider = FakeProvider::open(var(LEDGER_VAR), scenario.mode).expect("the ledger opens");
    let provider = Arc::new(provider.on_applied({
        let stop = stop.clone();
        move |_| stop.reached(Point::Applied)
    }));
    runtime().block_on(async {
        let store = SqliteStore::open(var(STORE_VAR))
            .await
            .expect("the store opens");
        let failpoints = match point.failpoint() {
            Some(failpoint) => {
                let stop = stop.clone();
                RecordingFailpoints::new().at(failpoint, move |_| stop.reached(point))
            }
            None => RecordingFailpoints::new(),
        };
        let dispatcher = dispatcher(&store, &provider, LIFE_CLOCK_MS, LIFE_TIMEOUT, seed)
            .failpoints(Arc::new(failpoints))
            .build();
        for (i, call) in scenario.calls.iter().enumerate() {
            stop.current.store(i, Ordering::SeqCst);
            provider.clear_faults();
            for &fault in &call.faults {
                provider.inject(Operation::Refund, fault, 1);
            }
            let call = ToolCall::new(format!("call_{i}"), scenario.tool, arguments(call));
            dispatcher.dispatch(&session(seed), call).await.unwrap();
        }
    });
    panic!("seed {seed}: the run ended without reaching {point:?}");
}

/// Kills the child if the parent gives up on it.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the child for `seed` and kills it once it reports that it stopped at `point`.
fn kill_child_at(seed: u64, point: Point, store: &Path, ledger: &Path) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Reaped(
        Command::new(exe)
            .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
            .env(ROLE_VAR, "child")
            .env(SEED_VAR, seed.to_string())
            .env(POINT_VAR, point.name())
            .env(STORE_VAR, store)
            .env(LEDGER_VAR, ledger)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the child starts"),
    );
    // A thread reads the child's lines so that the wait for the marker can have a deadline.
    let stdout = child.0.stdout.take().expect("a piped stdout");
    let (lines, marker_or_end) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let marker = format!("{MARKER}{}", point.name());
    let deadline = Instant::now() + CHILD_DEADLINE;
    loop {
        match marker_or_end.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            // After the harness's `test crash_child ... `, which has no newline.
            Ok(line) if line.ends_with(&marker) => break,
            Ok(_) => {}
            Err(end) => {
                let status = match end {
                    mpsc::RecvTimeoutError::Timeout => {
                        format!("still running after {CHILD_DEADLINE:?}")
                    }
                    mpsc::RecvTimeoutError::Disconnected => {
                        format!("exited with {:?}", child.0.wait())
                    }
                };
                let _ = child.0.kill();
                let mut stderr = String::new();
                if let Some(mut err) = child.0.stderr.take() {
                    let _ = err.read_to_string(&mut stderr);
                }
                panic!("seed {seed}: the child never reached {point:?}: {status}\n{stderr}");
            }
        }
    }
    child.0.kill().expect("SIGKILL the child");
    let status = child.0.wait().expect("reap the child");
    assert_eq!(status.signal(), Some(9), "seed {seed}: {status}");
    reader
        .join()
        .expect("the reader thread ends with the child");
}

/// What one run showed.
#[derive(Debug, Default)]
struct Tally {
    runs: u64,
    kills: [u64; 4],
    effects: usize,
    settled_applied: u32,
    settled_not_applied: u32,
    replays_stored: usize,
    replays_run: usize,
    faults_scripted: usize,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.runs += other.runs;
        for (total, kills) in self.kills.iter_mut().zip(other.kills) {
            *total += kills;
        }
        self.effects += other.effects;
        self.settled_applied += other.settled_applied;
        self.settled_not_applied += other.settled_not_applied;
        self.replays_stored += other.replays_stored;
        self.replays_run += other.replays_run;
        self.faults_scripted += other.faults_scripted;
    }
}

/// One seeded run: the child killed at its failpoint, then the restart and the checks.
fn run(seed: u64) -> Tally {
    let which = (seed % POINTS.len() as u64) as usize;
    let point = POINTS[which];
    let scenario = Scenario::new(seed, point);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store_path = dir.path().join("operations.db");
    let ledger_path = dir.path().join("ledger.jsonl");
    kill_child_at(seed, point, &store_path, &ledger_path);
    let mut tally = runtime().block_on(restart(seed, &scenario, &store_path, &ledger_path));
    tally.kills[which] = 1;
    tally.faults_scripted = scenario.calls[..=scenario.kill_at]
        .iter()
        .map(|call| call.faults.len())
        .sum();
    tally
}

/// The restarted process: reconcile, replay every call, and check the ledger and the store.
async fn restart(seed: u64, scenario: &Scenario, store_path: &Path, ledger_path: &Path) -> Tally {
    let store = SqliteStore::open(store_path)
        .await
        .expect("the store reopens");
    let provider = Arc::new(FakeProvider::open(ledger_path, scenario.mode).expect("the ledger"));
    let dispatcher = dispatcher(&store, &provider, RESTART_CLOCK_MS, RESTART_TIMEOUT, seed).build();
    let context = format!("seed {seed}: {scenario:?}");

    let processing = store
        .list_operations(OperationQuery {
            tenant: None,
            state: Some(OperationState::Processing),
            run_id: None,
            limit: 0,
        })
        .await
        .unwrap();
    let report = Reconciler::new(&dispatcher).run_once().await.unwrap();
    // Only the call that died before recording left a `processing` record behind.
    let dead_leases = u64::from(scenario.point != Point::Recorded);
    assert_eq!(
        report.expired_leases, dead_leases,
        "{context}: {report:?}, the records left processing: {processing:#?}"
    );
    assert_eq!(
        (report.still_unknown, report.purged),
        (0, 0),
        "{context}: the lookup answers for every unknown outcome: {report:?}"
    );

    let mut replays = Vec::new();
    for (i, call) in scenario.calls.iter().enumerate() {
        let tool_call = ToolCall::new(format!("replay_{i}"), scenario.tool, arguments(call));
        let report = dispatcher
            .dispatch(&session(seed), tool_call)
            .await
            .unwrap();
        replays.push(report.result.to_json());
    }

    let ledger = provider.ledger();
    assert_eq!(
        ledger.len(),
        scenario.calls.len(),
        "{context}: one refund per call, none other: {ledger:#?}"
    );
    let descriptor = dispatcher
        .registry()
        .get(scenario.tool)
        .expect("registered")
        .descriptor();
    for (call, replay) in scenario.calls.iter().zip(&replays) {
        let effects: Vec<&Refund> = ledger
            .iter()
            .filter(|refund| refund.order_id == call.order_id)
            .collect();
        let [effect] = effects[..] else {
            panic!(
                "{context}: {} refunded {} times: {ledger:#?}",
                call.order_id,
                effects.len()
            );
        };
        let key = toolgate::idempotency::operation_key(
            descriptor,
            TENANT,
            &format!("crash-{seed}"),
            &arguments(call),
        );
        assert_eq!(
            (effect.amount_cents, effect.key.as_str()),
            (call.amount_cents, key.as_str()),
            "{context}"
        );
        assert_eq!(replay["status"], "succeeded", "{context}: {replay}");
        assert_eq!(
            replay["data"],
            serde_json::to_value(effect).unwrap(),
            "{context}: a replay answers the provider's refund"
        );
        let record = store.get(TENANT, &key).await.unwrap().expect("a record");
        assert_eq!(record.state, OperationState::Succeeded, "{context}");
    }
    assert!(
        store.list_unknown(10).await.unwrap().is_empty(),
        "{context}"
    );
    store.close().await;

    let replays_stored = replays.iter().filter(|r| r["replayed"] == true).count();
    Tally {
        runs: 1,
        effects: ledger.len(),
        settled_applied: report.succeeded,
        settled_not_applied: report.failed,
        replays_stored,
        replays_run: replays.len() - replays_stored,
        ..Tally::default()
    }
}

#[test]
fn every_refund_lands_exactly_once_wherever_the_process_is_killed() {
    let started = Instant::now();
    let next_seed = AtomicU64::new(0);
    let total = Mutex::new(Tally::default());
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                loop {
                    let seed = next_seed.fetch_add(1, Ordering::SeqCst);
                    if seed >= RUNS {
                        break;
                    }
                    let tally = run(seed);
                    total.lock().unwrap().add(&tally);
                }
            });
        }
    });
    let total = total.into_inner().unwrap();
    let kills = POINTS
        .iter()
        .zip(total.kills)
        .map(|(point, kills)| format!("{}={kills}", point.name()))
        .collect::<Vec<_>>()
        .join(" ");
    println!(
        "crash_recovery: {} runs in {:.1?}; kills {kills}; {} refunds checked, each exactly once; \
         reconciler settled {} applied, {} not applied; replays: {} from the store, {} ran; \
         {} faults scripted before the kills",
        total.runs,
        started.elapsed(),
        total.effects,
        total.settled_applied,
        total.settled_not_applied,
        total.replays_stored,
        total.replays_run,
        total.faults_scripted,
    );
    assert_eq!(total.runs, RUNS);
    assert_eq!(total.kills, [RUNS / 4; 4], "every point killed as often");
}
