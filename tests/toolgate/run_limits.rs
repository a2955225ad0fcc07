//! A run has limits: turns, tool calls, each tool's attempts; a call that failed is not run again
//! with the same arguments; a tool's rate limit holds per tenant. The run's counters live in the
//! store, so a restarted process keeps them (SQLite and PostgreSQL); without a store, in the
//! session. Every call id a turn answers has its audit record, whatever became of it.

use crate::support::{session_in, stores};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use toolgate::dispatch::ManualClock;
use toolgate::prelude::*;
use toolgate::store::{OperationStore, RunKey};

/// How often each tool ran.
#[derive(Default)]
struct Counts {
    flaky: AtomicUsize,
    charge: AtomicUsize,
    find: AtomicUsize,
    ping: AtomicUsize,
}

/// Send a message; the service is always unavailable (nothing is ever sent).
#[tool(
    side_effect = "write",
    retry(max_attempts = 3, base = "1ms", max = "2ms")
)]
async fn send(counts: State<Arc<Counts>>, to: String) -> Result<String, ToolError> {
    counts.flaky.fetch_add(1, Ordering::SeqCst);
    Err(ToolError::unavailable(format!(
        "the mail service is down; nothing was sent to {to}"
    )))
}

/// Charge an order; the card refuses more than 100.
#[tool(side_effect = "write", key = [order])]
async fn charge(
    counts: State<Arc<Counts>>,
    order: String,
    amount: u32,
) -> Result<String, ToolError> {
    counts.charge.fetch_add(1, Ordering::SeqCst);
    if amount > 100 {
        return Err(ToolError::refused(format!(
            "the card refuses {amount} for {order}"
        )));
    }
    Ok(format!("charged {amount} for {order}"))
}

/// Find a customer; only `C-1` exists.
#[tool]
async fn find(counts: State<Arc<Counts>>, customer: String) -> Result<String, ToolError> {
    counts.find.fetch_add(1, Ordering::SeqCst);
    match customer.as_str() {
        "C-1" => Ok("Ada".into()),
        other => Err(ToolError::not_found(format!(
            "there is no customer {other}"
        ))),
    }
}

/// Close an account.
#[tool(side_effect = "destructive", permission = "accounts:close")]
async fn close_account(account: String) -> Result<String, ToolError> {
    Ok(format!("closed {account}"))
}

/// Answers pong.
#[tool(rate_limit = "2/s")]
async fn ping(counts: State<Arc<Counts>>) -> Result<String, ToolError> {
    counts.ping.fetch_add(1, Ordering::SeqCst);
    Ok("pong".into())
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register::<send>()
        .unwrap()
        .register::<find>()
        .unwrap()
        .register::<charge>()
        .unwrap()
        .register::<ping>()
        .unwrap()
        .register::<close_account>()
        .unwrap();
    registry
}

fn dispatcher(
    store: &Arc<dyn OperationStore>,
    counts: &Arc<Counts>,
    limits: RunLimits,
) -> Dispatcher {
    Dispatcher::builder(registry())
        .store(store.clone())
        .state(counts.clone())
        .run_limits(limits)
        // These tests read the counts a restarted process finds in the store: on a loaded
        // machine, the default 250 ms could leave a turn counted by the session alone.
        .counter_wait(std::time::Duration::from_secs(30))
        .build()
}

fn find_call(id: &str, customer: &str) -> ToolCall {
    ToolCall::new(id, "find", json!({"customer": customer}))
}

fn kind(report: &CallReport) -> String {
    report.result.to_json()["error"]["kind"]
        .as_str()
        .unwrap_or("none")
        .to_owned()
}

/// The step limit: the turn after the last allowed one aborts the run, and the run stays
/// aborted for a restarted process.
async fn the_step_limit_aborts_the_run(store: Arc<dyn OperationStore>) {
    let counts = Arc::new(Counts::default());
    let limits = RunLimits::UNLIMITED.max_steps(2);
    let d = dispatcher(&store, &counts, limits);
    let s = session_in("run-steps");
    for turn in 0..2 {
        let reports = d
            .dispatch_turn(&s, vec![find_call(&format!("c{turn}"), "C-1")])
            .await
            .unwrap();
        assert!(reports[0].result.is_succeeded());
    }
    let aborted = d
        .dispatch_turn(&s, vec![find_call("c2", "C-1"), find_call("c3", "C-1")])
        .await
        .unwrap_err();
    assert_eq!(aborted.reason.kind, ErrorKind::RunBudgetExhausted);
    assert_eq!(
        aborted.reason.reason,
        "the run reached its limit of 2 model turns"
    );
    let fates: Vec<&str> = aborted.calls.iter().map(|c| c.fate.status()).collect();
    assert_eq!(fates, ["not_started", "not_started"]);
    assert_eq!(counts.find.load(Ordering::SeqCst), 2);
    // A restarted process: a new dispatcher and a new session of the same run.
    let restarted = dispatcher(&store, &counts, limits);
    let again = restarted
        .dispatch_turn(&session_in("run-steps"), vec![find_call("c4", "C-1")])
        .await
        .unwrap_err();
    assert_eq!(again.reason.kind, ErrorKind::RunBudgetExhausted);
    assert!(again.calls.is_empty());
    let run = store
        .run(RunKey {
            tenant: "acme",
            run_id: "run-steps",
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!((run.steps, run.tool_calls), (2, 2));
    assert_eq!(run.aborted.unwrap().kind, "run_budget_exhausted");
}

/// The tool-call limit: a turn that would pass it runs none of its calls.
async fn a_turn_over_the_call_limit_runs_none(store: Arc<dyn OperationStore>) {
    let counts = Arc::new(Counts::default());
    let d = dispatcher(&store, &counts, RunLimits::UNLIMITED.max_tool_calls(3));
    let s = session_in("run-calls");
    let two = || vec![find_call("a", "C-1"), find_call("b", "C-1")];
    assert!(
        d.dispatch_turn(&s, two())
            .await
            .unwrap()
            .iter()
            .all(|r| r.result.is_succeeded())
    );
    let refused = d.dispatch_turn(&s, two()).await.unwrap();
    for report in &refused {
        let result = report.result.to_json();
        assert_eq!(result["error"]["kind"], "call_budget_exhausted", "{result}");
        assert_eq!(
            result["error"]["what"],
            "none of this turn's 2 calls ran: the run's tool-call budget is spent"
        );
        assert_eq!(
            result["error"]["why"],
            "the run allows 3 tool calls; 2 were made before this turn"
        );
    }
    assert_eq!(counts.find.load(Ordering::SeqCst), 2, "none of them ran");
    // One more call fits.
    let one = d
        .dispatch_turn(&s, vec![find_call("c", "C-1")])
        .await
        .unwrap();
    assert!(one[0].result.is_succeeded());
    assert_eq!(counts.find.load(Ordering::SeqCst), 3);
}

/// The retry budget: every attempt of a tool in the run counts, retries below the model
/// included; once spent, a call of it answers `retry_budget_exhausted` without running, telling
/// the model to stop. A restarted process keeps the count.
async fn a_spent_retry_budget_stops_the_tool(store: Arc<dyn OperationStore>) {
    let counts = Arc::new(Counts::default());
    let limits = RunLimits::UNLIMITED.retry_budget(4);
    let d = dispatcher(&store, &counts, limits);
    let s = session_in("run-retries");
    let send_call = |id: &str| ToolCall::new(id, "send", json!({"to": "ada@example.com"}));
    // Three attempts below the model, then the transient fault reaches it as what it is: the
    // service could not be reached, and the same call may succeed in a moment.
    let first = d.dispatch(&s, send_call("c1")).await.unwrap();
    assert_eq!(kind(&first), "unavailable");
    assert_eq!(counts.flaky.load(Ordering::SeqCst), 3);
    // A new process: one attempt left of the run's four; the retry after it is not made.
    let restarted = dispatcher(&store, &counts, limits);
    let second = restarted
        .dispatch(&session_in("run-retries"), send_call("c2"))
        .await
        .unwrap();
    let result = second.result.to_json();
    assert_eq!(
        result["error"]["kind"], "retry_budget_exhausted",
        "{result}"
    );
    assert!(
        result["error"]["next"]
            .as_str()
            .unwrap()
            .starts_with("stop retrying"),
        "{result}"
    );
    assert_eq!(counts.flaky.load(Ordering::SeqCst), 4);
    // Spent: the next call does not run at all.
    let third = restarted
        .dispatch(&session_in("run-retries"), send_call("c3"))
        .await
        .unwrap();
    let result = third.result.to_json();
    assert_eq!(result["error"]["kind"], "retry_budget_exhausted");
    assert_eq!(
        result["error"]["what"],
        "send did not run: it has used its 4 attempts in this run"
    );
    assert!(
        result["error"]["next"]
            .as_str()
            .unwrap()
            .starts_with("stop retrying")
    );
    assert_eq!(
        counts.flaky.load(Ordering::SeqCst),
        4,
        "the spent tool did not run"
    );
    // Another tool of the run has a budget of its own.
    let other = restarted
        .dispatch(&session_in("run-retries"), find_call("f", "C-1"))
        .await
        .unwrap();
    assert!(other.result.is_succeeded());
}

/// The same call after it failed answers `repeated_call` without running, in this process and
/// in a restarted one; other arguments run.
async fn a_failed_call_is_not_run_again(store: Arc<dyn OperationStore>) {
    let counts = Arc::new(Counts::default());
    let d = dispatcher(&store, &counts, RunLimits::DEFAULT);
    let s = session_in("run-repeats");
    let first = d.dispatch(&s, find_call("c1", "C-9")).await.unwrap();
    assert_eq!(kind(&first), "not_found");
    // The same arguments in another order of keys and spacing are the same call.
    let again = d
        .dispatch(
            &s,
            ToolCall::from_json_text("c2", "find", r#"{ "customer" : "C-9" }"#),
        )
        .await
        .unwrap();
    let result = again.result.to_json();
    assert_eq!(result["error"]["kind"], "repeated_call", "{result}");
    assert_eq!(
        result["error"]["next"],
        "that call already failed; change the approach: other arguments, another tool, or tell the user"
    );
    assert_eq!(counts.find.load(Ordering::SeqCst), 1);
    let restarted = dispatcher(&store, &counts, RunLimits::DEFAULT);
    let after_restart = restarted
        .dispatch(&session_in("run-repeats"), find_call("c3", "C-9"))
        .await
        .unwrap();
    assert_eq!(kind(&after_restart), "repeated_call");
    assert_eq!(counts.find.load(Ordering::SeqCst), 1);
    // Other arguments are another call.
    let other = restarted
        .dispatch(&session_in("run-repeats"), find_call("c4", "C-1"))
        .await
        .unwrap();
    assert!(other.result.is_succeeded());
    // Another run has not failed it.
    let other_run = restarted
        .dispatch(&session_in("run-other"), find_call("c5", "C-9"))
        .await
        .unwrap();
    assert_eq!(kind(&other_run), "not_found");
}

/// A turn of one write, whose claim begins the turn (on PostgreSQL, one statement counts the
/// turn and claims the key): the limits and repeat detection hold as for any turn, in the same
/// words, the write runs only when its turn lets it, and every call id is audited.
async fn a_lone_write_is_held_to_every_limit_of_its_turn(store: Arc<dyn OperationStore>) {
    let counts = Arc::new(Counts::default());
    let limits = RunLimits::UNLIMITED.max_steps(4).max_tool_calls(3);
    let d = dispatcher(&store, &counts, limits);
    let s = session_in("run-lone-writes");
    let call = |id: &str, order: &str, amount: u32| {
        ToolCall::new(id, "charge", json!({"order": order, "amount": amount}))
    };
    let ran = || counts.charge.load(Ordering::SeqCst);

    let charged = d.dispatch(&s, call("c1", "O-1", 50)).await.unwrap();
    assert!(
        charged.result.is_succeeded(),
        "{:?}",
        charged.result.to_json()
    );
    let refused = d.dispatch(&s, call("c2", "O-2", 500)).await.unwrap();
    assert_eq!(kind(&refused), "refused");
    // The same write after it failed: not run again.
    let repeated = d.dispatch(&s, call("c3", "O-2", 500)).await.unwrap();
    assert_eq!(kind(&repeated), "repeated_call");
    assert_eq!(ran(), 2);
    // Three calls counted: the fourth would pass the limit.
    let over = d.dispatch(&s, call("c4", "O-4", 10)).await.unwrap();
    let result = over.result.to_json();
    assert_eq!(result["error"]["kind"], "call_budget_exhausted", "{result}");
    assert_eq!(
        result["error"]["why"],
        "the run allows 3 tool calls; 3 were made before this turn"
    );
    assert_eq!(ran(), 2);
    // Four turns counted: the fifth aborts the run, its write not started.
    let aborted = d
        .dispatch_turn(&s, vec![call("c5", "O-5", 10)])
        .await
        .unwrap_err();
    assert_eq!(aborted.reason.kind, ErrorKind::RunBudgetExhausted);
    assert_eq!(
        aborted.reason.reason,
        "the run reached its limit of 4 model turns"
    );
    let fates: Vec<&str> = aborted.calls.iter().map(|c| c.fate.status()).collect();
    assert_eq!(fates, ["not_started"]);
    assert_eq!(ran(), 2);
    // A restarted process finds the run aborted: nothing runs, no call reported.
    let restarted = dispatcher(&store, &counts, limits);
    let again = restarted
        .dispatch_turn(&session_in("run-lone-writes"), vec![call("c6", "O-6", 10)])
        .await
        .unwrap_err();
    assert_eq!(again.reason.kind, ErrorKind::RunBudgetExhausted);
    assert!(again.calls.is_empty(), "{:?}", again.calls);
    assert_eq!(ran(), 2);

    let run = store
        .run(RunKey {
            tenant: "acme",
            run_id: "run-lone-writes",
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!((run.steps, run.tool_calls), (4, 3));
    assert_eq!(run.aborted.unwrap().kind, "run_budget_exhausted");
    d.flush_audit().await;
    restarted.flush_audit().await;
    let records = audited(&store, "run-lone-writes").await;
    assert_eq!(
        ids_of(&records),
        ["c1", "c2", "c3", "c4", "c5", "c6"],
        "{records:?}"
    );
    assert!(
        records.contains(&("c5".into(), "not_started".into())),
        "{records:?}"
    );
}

macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let (store, _dir) = super::stores::sqlite().await;
                    super::$name(store).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::stores::postgres().await).await;
                }
            )*
        }
    };
}

/// The call ids of `run`'s audit records, in the order they were appended, with their outcome.
async fn audited(store: &Arc<dyn OperationStore>, run: &str) -> Vec<(String, String)> {
    let query = toolgate::store::AuditQuery {
        tenant: Some("acme"),
        run_id: Some(run),
        key: None,
        limit: 0,
    };
    store
        .audit(query)
        .await
        .unwrap()
        .into_iter()
        .map(|record| (record.entry.call_id, record.entry.outcome))
        .collect()
}

fn ids_of(records: &[(String, String)]) -> Vec<&str> {
    let mut ids: Vec<&str> = records.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort_unstable();
    ids
}

/// Every call id the dispatcher answers has its audit record (DESIGN §10), whatever the
/// answer: a turn that a missing permission aborts, the turns of the aborted run after it, a
/// turn past the step limit, a turn over the call budget, a turn with a call id given twice.
async fn every_answered_call_id_is_audited(store: Arc<dyn OperationStore>) {
    let counts = Arc::new(Counts::default());
    let d = dispatcher(&store, &counts, RunLimits::UNLIMITED);
    let turn =
        |ids: &[&str]| -> Vec<ToolCall> { ids.iter().map(|id| find_call(id, "C-1")).collect() };

    // A permission abort: the call at fault and the one that never started.
    let s = session_in("run-abort");
    let mut calls = turn(&["a1"]);
    calls.push(ToolCall::new(
        "a2",
        "close_account",
        json!({"account": "X"}),
    ));
    d.dispatch_turn(&s, calls).await.unwrap_err();
    // A later turn of the aborted run: answered, nothing ran.
    d.dispatch_turn(&s, turn(&["a3", "a4"])).await.unwrap_err();
    d.flush_audit().await;
    let records = audited(&store, "run-abort").await;
    assert_eq!(ids_of(&records), ["a1", "a2", "a3", "a4"], "{records:?}");
    assert!(
        records.contains(&("a2".into(), "run_aborted".into())),
        "{records:?}"
    );
    assert!(
        records.contains(&("a4".into(), "not_started".into())),
        "{records:?}"
    );

    // The step limit: the turn past it.
    let steps = dispatcher(&store, &counts, RunLimits::UNLIMITED.max_steps(1));
    let s = session_in("run-steps-audit");
    steps.dispatch_turn(&s, turn(&["s1"])).await.unwrap();
    steps
        .dispatch_turn(&s, turn(&["s2", "s3"]))
        .await
        .unwrap_err();
    steps.flush_audit().await;
    let records = audited(&store, "run-steps-audit").await;
    assert_eq!(ids_of(&records), ["s1", "s2", "s3"], "{records:?}");

    // The call budget: a turn that would pass it runs none of its calls.
    let budget = dispatcher(&store, &counts, RunLimits::UNLIMITED.max_tool_calls(1));
    let s = session_in("run-budget-audit");
    budget.dispatch_turn(&s, turn(&["b1", "b2"])).await.unwrap();
    budget.flush_audit().await;
    let records = audited(&store, "run-budget-audit").await;
    assert_eq!(ids_of(&records), ["b1", "b2"], "{records:?}");

    // A call id given to two calls: one answer for it, and the other call of the turn runs.
    let s = session_in("run-reused-audit");
    d.dispatch_turn(&s, turn(&["r1", "r2", "r1"]))
        .await
        .unwrap();
    d.flush_audit().await;
    let records = audited(&store, "run-reused-audit").await;
    assert_eq!(ids_of(&records), ["r1", "r2"], "{records:?}");
}

/// An unshared run is counted in its session, with a store too: its limits and repeat detection
/// hold, the store holds none of its counts but keeps its abort, and a new unshared session of
/// the same run id counts afresh.
async fn an_unshared_run_is_counted_in_its_session(store: Arc<dyn OperationStore>) {
    let counts = Arc::new(Counts::default());
    let d = dispatcher(&store, &counts, RunLimits::DEFAULT.max_steps(3));
    let s = session_in("run-unshared").unshared();
    let key = RunKey {
        tenant: "acme",
        run_id: "run-unshared",
    };
    let failed = d.dispatch(&s, find_call("c1", "C-9")).await.unwrap();
    assert_eq!(kind(&failed), "not_found");
    let again = d.dispatch(&s, find_call("c2", "C-9")).await.unwrap();
    assert_eq!(kind(&again), "repeated_call");
    assert_eq!(counts.find.load(Ordering::SeqCst), 1);
    assert!(
        d.dispatch(&s, find_call("c3", "C-1"))
            .await
            .unwrap()
            .result
            .is_succeeded()
    );
    assert_eq!(store.run(key).await.unwrap(), None, "the store counted it");
    let aborted = d.dispatch(&s, find_call("c4", "C-1")).await.unwrap_err();
    assert_eq!(aborted.kind, ErrorKind::RunBudgetExhausted);
    assert_eq!(counts.find.load(Ordering::SeqCst), 2);
    // The abort is stored, for the run's approvals in every process; no count is.
    let run = store.run(key).await.unwrap().expect("the abort is stored");
    assert_eq!(run.aborted.unwrap().kind, "run_budget_exhausted");
    assert_eq!((run.steps, run.tool_calls), (0, 0));
    // A new unshared session of the run id is another run: it counts afresh, and the stored
    // abort of the first does not stop it.
    let fresh = session_in("run-unshared").unshared();
    for id in ["d1", "d2", "d3"] {
        assert!(d.dispatch(&fresh, find_call(id, "C-1")).await.is_ok());
    }
    assert!(d.dispatch(&fresh, find_call("d4", "C-1")).await.is_err());
}

on_both_stores!(
    a_lone_write_is_held_to_every_limit_of_its_turn,
    an_unshared_run_is_counted_in_its_session,
    every_answered_call_id_is_audited,
    the_step_limit_aborts_the_run,
    a_turn_over_the_call_limit_runs_none,
    a_spent_retry_budget_stops_the_tool,
    a_failed_call_is_not_run_again,
);

/// Without a store the counters live in the session: its clones share them, a new session of
/// the same run id starts afresh.
#[tokio::test]
async fn without_a_store_the_session_keeps_the_counters() {
    let counts = Arc::new(Counts::default());
    let mut registry = Registry::new();
    registry.register::<find>().unwrap();
    let d = Dispatcher::builder(registry)
        .state(counts.clone())
        .run_limits(RunLimits::UNLIMITED.max_steps(1))
        .build();
    let s = session_in("run-local");
    assert!(
        d.dispatch(&s, find_call("a", "C-1"))
            .await
            .unwrap()
            .result
            .is_succeeded()
    );
    let aborted = d
        .dispatch(&s.clone(), find_call("b", "C-1"))
        .await
        .unwrap_err();
    assert_eq!(aborted.kind, ErrorKind::RunBudgetExhausted);
    assert!(
        d.dispatch(&session_in("run-local"), find_call("c", "C-1"))
            .await
            .is_ok()
    );
    // A session's own limits replace the dispatcher's.
    let roomy = session_in("run-roomy").with_limits(RunLimits::UNLIMITED.max_steps(3));
    for id in ["x", "y", "z"] {
        assert!(d.dispatch(&roomy, find_call(id, "C-1")).await.is_ok());
    }
    assert!(d.dispatch(&roomy, find_call("w", "C-1")).await.is_err());
}

/// A tool's rate limit holds per tenant: calls over it answer `rate_limited` with
/// `retry_after_ms` and never run; time refills the bucket.
#[tokio::test]
async fn a_rate_limited_burst_runs_only_what_the_limit_allows() {
    let counts = Arc::new(Counts::default());
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let d = Dispatcher::builder(registry())
        .store(toolgate_test::MemoryStore::new())
        .state(counts.clone())
        .clock(clock.clone())
        .build();
    let s = session_in("run-burst");
    let burst = (0..4)
        .map(|i| ToolCall::new(format!("p{i}"), "ping", json!({})))
        .collect();
    let reports = d.dispatch_turn(&s, burst).await.unwrap();
    let passed = reports.iter().filter(|r| r.result.is_succeeded()).count();
    assert_eq!(passed, 2);
    for report in reports.iter().filter(|r| !r.result.is_succeeded()) {
        let result = report.result.to_json();
        assert_eq!(result["error"]["kind"], "rate_limited", "{result}");
        let wait = result["error"]["retry_after_ms"].as_u64().unwrap();
        assert!((1..=500).contains(&wait), "{result}");
    }
    assert_eq!(counts.ping.load(Ordering::SeqCst), 2);
    // Another tenant has a bucket of its own.
    let other = Session::new(AuthContext::new("globex", "agent"), "run-burst");
    assert!(
        d.dispatch(&other, ToolCall::new("g", "ping", json!({})))
            .await
            .unwrap()
            .result
            .is_succeeded()
    );
    // Half a second later, one more passes for acme.
    clock.advance_ms(500);
    let later = d
        .dispatch(&s, ToolCall::new("p9", "ping", json!({})))
        .await
        .unwrap();
    assert!(later.result.is_succeeded(), "{:?}", later.result.to_json());
    assert_eq!(counts.ping.load(Ordering::SeqCst), 4);
}
