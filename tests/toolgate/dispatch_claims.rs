//! What a write does with a key that already holds a record (DESIGN §4), through the
//! dispatcher on every store: a definitive failure is taken over by the corrected request; and a
//! duplicate that waits on a running call answers truly whatever that call became (succeeded:
//! the replay; failed or purged: it claims the key and runs; unknown: unknown; still running:
//! in progress). A record stored before request hashes were keyed still answers its replays,
//! and another request under its key is still a conflict. And once means once across runs and
//! restarts: the same operation asked from a new run, by a new process on the same database, is
//! a replay (the default `key_scope = "tenant"`), while a `key_scope = "run"` tool acts again in
//! another run.
//!
//! The PostgreSQL tests need a server: `toolgate_test_postgres::test_database` finds or
//! starts one and gives each test a fresh database (a test fails, never skips, without one).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::store::{
    AttemptError, AttemptFailure, Claim, ClaimRequest, ClaimToken, OperationState, OperationStore,
    Success,
};
use toolgate_test::{ControlledStore, ManualClock, MemoryStore, Request};

use crate::support::stores;
use stores::{postgres, sqlite};

/// What the provider lets be refunded on any order.
const REFUNDABLE: f64 = 100.0;

/// Runs of the tools.
#[derive(Default)]
struct Provider {
    runs: AtomicU32,
    notes: AtomicU32,
}

/// Refund an order, up to its refundable balance.
#[tool(side_effect = "write", key = [order_id], timeout = "10s")]
async fn refund(ctx: &Ctx, order_id: String, amount: f64) -> Result<Value, ToolError> {
    let provider = ctx.state::<Arc<Provider>>()?;
    provider.runs.fetch_add(1, Ordering::SeqCst);
    if amount > REFUNDABLE {
        return Err(ToolError::refused(format!(
            "{amount} is over the refundable balance of {REFUNDABLE}"
        ))
        .with_next("call refund again with an amount within the balance"));
    }
    Ok(json!({"refund_id": format!("re_{order_id}"), "amount": amount}))
}

const NOW: i64 = 1_700_000_000_000;

struct Desk {
    dispatcher: Dispatcher,
    provider: Arc<Provider>,
    session: Session,
}

fn desk(store: Arc<dyn OperationStore>, in_progress_wait: Duration) -> Desk {
    let mut registry = Registry::new();
    registry.register::<refund>().unwrap();
    let provider = Arc::new(Provider::default());
    let dispatcher = Dispatcher::builder(registry)
        .state(provider.clone())
        .store(store)
        .clock(Arc::new(ManualClock::new(NOW)))
        .in_progress_wait(in_progress_wait)
        .build();
    let session = crate::support::session();
    Desk {
        dispatcher,
        provider,
        session,
    }
}

impl Desk {
    async fn refund(&self, order_id: &str, amount: f64) -> Value {
        let call = ToolCall::new(
            "call_x",
            "refund",
            json!({"order_id": order_id, "amount": amount}),
        );
        self.dispatcher
            .dispatch(&self.session, call)
            .await
            .expect("no call aborts the run")
            .result
            .to_json()
    }

    fn runs(&self) -> u32 {
        self.provider.runs.load(Ordering::SeqCst)
    }
}

/// The key, request hash and canonical arguments the dispatcher derives for a refund of a
/// whole `amount` (which the dispatcher reads as an integer).
fn derived(order_id: &str, amount: i64) -> (String, String, String) {
    let args = json!({"order_id": order_id, "amount": amount});
    let key = toolgate::idempotency::operation_key(refund::descriptor(), "acme", "run-1", &args);
    let canonical = toolgate::idempotency::canonical_json(&args);
    let hash = toolgate::idempotency::request_hash(
        &toolgate::idempotency::HashSecret::local_default(),
        "refund",
        &canonical,
    );
    (key, hash, canonical)
}

/// A refund refused as over the balance stores nothing applied; the corrected call takes the
/// operation over, runs and succeeds; the first arguments again are then refused without
/// running: that call already failed in this run (a repeat), and its key is held by the
/// corrected one.
async fn a_corrected_call_runs_after_a_definitive_failure(store: Arc<dyn OperationStore>) {
    let desk = desk(store.clone(), Duration::from_secs(2));
    let refused = desk.refund("ORD-1", 150.0).await;
    assert_eq!(refused["error"]["kind"], "refused", "{refused}");

    let corrected = desk.refund("ORD-1", 80.0).await;
    assert_eq!(
        corrected,
        json!({"status": "succeeded", "replayed": false,
               "data": {"refund_id": "re_ORD-1", "amount": 80.0}})
    );
    assert_eq!(desk.runs(), 2);
    let (key, hash, canonical) = derived("ORD-1", 80);
    let record = store.get("acme", &key).await.unwrap().expect("recorded");
    assert_eq!(record.state, OperationState::Succeeded);
    assert_eq!(record.attempt, 2);
    assert_eq!((record.request_hash, record.arguments), (hash, canonical));
    assert_eq!(record.errors.len(), 1, "the refusal stays in the history");
    assert_eq!(record.errors[0].kind, "refused");

    let again = desk.refund("ORD-1", 150.0).await;
    assert_eq!(again["error"]["kind"], "repeated_call", "{again}");
    assert_eq!(desk.runs(), 2);
    let replay = desk.refund("ORD-1", 80.0).await;
    assert_eq!(replay["replayed"], true, "{replay}");
}

#[tokio::test]
async fn a_corrected_call_runs_after_a_definitive_failure_on_sqlite() {
    let (store, _dir) = sqlite().await;
    a_corrected_call_runs_after_a_definitive_failure(store).await;
}

#[tokio::test]
async fn a_corrected_call_runs_after_a_definitive_failure_on_postgres() {
    a_corrected_call_runs_after_a_definitive_failure(postgres().await).await;
}

/// What becomes of the other worker's claim while the duplicate waits on it.
#[derive(Debug, Clone, Copy)]
enum Then {
    /// It succeeds with the other worker's result.
    Succeeds,
    /// It fails: definitely not applied.
    Fails,
    /// Its outcome becomes unknown.
    BecomesUnknown,
    /// It fails, and retention purges the record.
    IsPurged,
    /// It is still running when the wait ends.
    KeepsRunning,
}

/// Settles the other worker's claim as `then` says.
async fn settle(store: &dyn OperationStore, owner: &ClaimToken, then: Then) {
    let error = AttemptError {
        attempt: 1,
        kind: "refused".into(),
        what: "the other worker's attempt was refused".into(),
    };
    match then {
        Then::Succeeds => {
            let result = r#"{"refund_id":"re_other"}"#;
            store
                .succeed(Success {
                    owner,
                    result,
                    now_ms: NOW,
                    audit: None,
                })
                .await
                .unwrap();
        }
        Then::Fails => store
            .fail(AttemptFailure {
                owner,
                error: &error,
                now_ms: NOW,
            })
            .await
            .unwrap(),
        Then::BecomesUnknown => store
            .mark_unknown(AttemptFailure {
                owner,
                error: &error,
                now_ms: NOW,
            })
            .await
            .unwrap(),
        Then::IsPurged => {
            store
                .fail(AttemptFailure {
                    owner,
                    error: &error,
                    now_ms: NOW,
                })
                .await
                .unwrap();
            assert!(store.purge(NOW + 1).await.unwrap() >= 1);
        }
        Then::KeepsRunning => {}
    }
}

/// A duplicate of a running refund waits; the other worker's claim then goes as `then` says;
/// answers what the duplicate said and the record after it.
async fn wait_on(store: &Arc<dyn OperationStore>, order_id: &str, then: Then) -> (Value, u32) {
    let (key, hash, canonical) = derived(order_id, 50);
    let claimed = store
        .claim(ClaimRequest {
            tenant: "acme",
            key: &key,
            tool: "refund",
            request_hash: &hash,
            unkeyed: None,
            arguments: &canonical,
            now_ms: NOW,
            lease: Duration::from_secs(3600),
            takeover: false,
            approval: None,
        })
        .await
        .unwrap();
    assert_eq!(
        claimed,
        Claim::Acquired {
            attempt: 1,
            approved: None
        },
        "{order_id}"
    );
    let other = ClaimToken {
        tenant: "acme".into(),
        key,
        attempt: 1,
    };
    // Another worker holds the claim and settles it the moment the duplicate first looks
    // again (its first `get`): the change happens while it waits, at no particular time.
    let worker = Arc::new(ControlledStore::new(store.clone()));
    let inner = store.clone();
    worker.before_next(Request::Get, move || async move {
        settle(&*inner, &other, then).await;
    });
    // Long enough that a claim slowed by a loaded database still leaves the duplicate time to
    // look again; only `KeepsRunning` waits it out (in paused time on the memory store).
    let desk = desk(worker.clone(), Duration::from_secs(2));
    let answer = desk.refund(order_id, 50.0).await;
    assert!(
        worker.asked(Request::Get) > 0,
        "{order_id}: the duplicate did not wait"
    );
    (answer, desk.runs())
}

/// Every state a waiting duplicate can see gets a true answer.
async fn a_waiting_duplicate_answers_what_the_call_became(store: Arc<dyn OperationStore>) {
    let record = |order_id: &'static str| {
        let store = store.clone();
        async move {
            let (key, ..) = derived(order_id, 50);
            store.get("acme", &key).await.unwrap()
        }
    };

    let (answer, runs) = wait_on(&store, "ORD-S", Then::Succeeds).await;
    assert_eq!(
        (answer, runs),
        (
            json!({"status": "succeeded", "replayed": true, "data": {"refund_id": "re_other"}}),
            0
        )
    );

    let (answer, runs) = wait_on(&store, "ORD-F", Then::Fails).await;
    assert_eq!(
        answer,
        json!({"status": "succeeded", "replayed": false,
               "data": {"refund_id": "re_ORD-F", "amount": 50.0}})
    );
    assert_eq!(
        runs, 1,
        "the duplicate claimed the failed operation and ran it"
    );
    let taken = record("ORD-F").await.expect("recorded");
    assert_eq!((taken.state, taken.attempt), (OperationState::Succeeded, 2));

    let (answer, runs) = wait_on(&store, "ORD-U", Then::BecomesUnknown).await;
    assert_eq!(answer["status"], "outcome_unknown", "{answer}");
    assert_eq!(answer["error"]["kind"], "outcome_unknown", "{answer}");
    assert_eq!(runs, 0);

    let (answer, runs) = wait_on(&store, "ORD-P", Then::KeepsRunning).await;
    assert_eq!(answer["status"], "in_progress", "{answer}");
    assert_eq!(runs, 0);

    let (answer, runs) = wait_on(&store, "ORD-G", Then::IsPurged).await;
    assert_eq!(answer["status"], "succeeded", "{answer}");
    assert_eq!(answer["replayed"], false, "{answer}");
    assert_eq!(runs, 1, "the duplicate claimed the purged key anew and ran");
    let fresh = record("ORD-G").await.expect("recorded");
    assert_eq!((fresh.state, fresh.attempt), (OperationState::Succeeded, 1));
    assert!(fresh.errors.is_empty(), "{:?}", fresh.errors);
}

/// The request hash as toolgate wrote it before hashes were keyed (version 1): the unkeyed
/// SHA-256 of the length-prefixed parts, in hex.
fn unkeyed_hash(tool: &str, canonical: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in ["request", tool, canonical] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A refund that succeeded under the version-1 hash, stored as the runtime stored it then (the
/// key has not changed): the same call replays it without running, and other arguments under
/// its key are a conflict; the record keeps what it held.
async fn a_record_hashed_before_keying_still_replays_and_conflicts(store: Arc<dyn OperationStore>) {
    let desk = desk(store.clone(), Duration::from_secs(2));
    let (key, _, canonical) = derived("ORD-L", 50);
    let old_hash = unkeyed_hash("refund", &canonical);
    let claimed = store
        .claim(ClaimRequest {
            tenant: "acme",
            key: &key,
            tool: "refund",
            request_hash: &old_hash,
            unkeyed: None,
            arguments: &canonical,
            now_ms: NOW,
            lease: Duration::from_secs(30),
            takeover: false,
            approval: None,
        })
        .await
        .unwrap();
    assert!(
        matches!(claimed, Claim::Acquired { attempt: 1, .. }),
        "{claimed:?}"
    );
    let owner = ClaimToken {
        tenant: "acme".into(),
        key: key.clone(),
        attempt: 1,
    };
    let result = r#"{"refund_id":"re_ORD-L","amount":50.0}"#;
    store
        .succeed(Success {
            owner: &owner,
            result,
            now_ms: NOW,
            audit: None,
        })
        .await
        .unwrap();

    let replay = desk.refund("ORD-L", 50.0).await;
    assert_eq!(
        replay,
        json!({"status": "succeeded", "replayed": true,
               "data": {"refund_id": "re_ORD-L", "amount": 50.0}})
    );
    let conflict = desk.refund("ORD-L", 60.0).await;
    assert_eq!(conflict["error"]["kind"], "conflict", "{conflict}");
    assert_eq!(desk.runs(), 0);
    let record = store.get("acme", &key).await.unwrap().expect("kept");
    assert_eq!(
        (record.state, record.request_hash, record.attempt),
        (OperationState::Succeeded, old_hash, 1)
    );
}

#[tokio::test]
async fn a_record_hashed_before_keying_still_replays_and_conflicts_in_memory() {
    a_record_hashed_before_keying_still_replays_and_conflicts(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn a_record_hashed_before_keying_still_replays_and_conflicts_on_sqlite() {
    let (store, _dir) = sqlite().await;
    a_record_hashed_before_keying_still_replays_and_conflicts(store).await;
}

#[tokio::test]
async fn a_record_hashed_before_keying_still_replays_and_conflicts_on_postgres() {
    a_record_hashed_before_keying_still_replays_and_conflicts(postgres().await).await;
}

#[tokio::test(start_paused = true)]
async fn a_waiting_duplicate_answers_what_the_call_became_in_memory() {
    a_waiting_duplicate_answers_what_the_call_became(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn a_waiting_duplicate_answers_what_the_call_became_on_sqlite() {
    let (store, _dir) = sqlite().await;
    a_waiting_duplicate_answers_what_the_call_became(store).await;
}

#[tokio::test]
async fn a_waiting_duplicate_answers_what_the_call_became_on_postgres() {
    a_waiting_duplicate_answers_what_the_call_became(postgres().await).await;
}

/// Keep a note for this conversation: the same note in another conversation is kept again.
#[tool(side_effect = "write", key_scope = "run", timeout = "10s")]
async fn scratch_note(ctx: &Ctx, text: String) -> Result<Value, ToolError> {
    let provider = ctx.state::<Arc<Provider>>()?;
    let number = provider.notes.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(json!({"note": number, "text": text}))
}

/// A process of the application: a dispatcher of both tools on `store`, with the provider
/// (which outlives processes).
fn process(store: Arc<dyn OperationStore>, provider: &Arc<Provider>) -> Dispatcher {
    let mut registry = Registry::new();
    registry.register::<refund>().unwrap();
    registry.register::<scratch_note>().unwrap();
    Dispatcher::builder(registry)
        .state(provider.clone())
        .store(store)
        .clock(Arc::new(ManualClock::new(NOW)))
        .build()
}

async fn ask(dispatcher: &Dispatcher, run: &str, tool: &str, arguments: Value) -> Value {
    let session = crate::support::session_in(run);
    dispatcher
        .dispatch(&session, ToolCall::new("call_1", tool, arguments))
        .await
        .expect("no call aborts the run")
        .result
        .to_json()
}

/// The same refund asked from a new run by a new process on the same database (a restarted
/// agent, a new MCP session) answers the original outcome and is applied once; other arguments
/// under its key (an 8000 refund split into two of 4000 across runs) are a conflict. A
/// `key_scope = "run"` tool acts again in the new run. `reopen` opens the database as a new
/// process would.
async fn once_across_runs_and_processes<F, Fut>(reopen: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Arc<dyn OperationStore>>,
{
    let provider = Arc::new(Provider::default());
    let first = process(reopen().await, &provider);
    let refund = json!({"order_id": "ORD-1", "amount": 40});
    let note = json!({"text": "the customer prefers email"});
    let refunded = ask(&first, "run-1", "refund", refund.clone()).await;
    let noted = ask(&first, "run-1", "scratch_note", note.clone()).await;
    assert_eq!(refunded["status"], "succeeded", "{refunded}");
    assert_eq!(noted["status"], "succeeded", "{noted}");
    drop(first);

    let second = process(reopen().await, &provider);
    let again = ask(&second, "run-2", "refund", refund).await;
    assert_eq!(again["status"], "succeeded", "{again}");
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(again["data"], refunded["data"]);
    assert_eq!(provider.runs.load(Ordering::SeqCst), 1, "refunded once");

    let split = ask(
        &second,
        "run-3",
        "refund",
        json!({"order_id": "ORD-1", "amount": 30}),
    )
    .await;
    assert_eq!(split["error"]["kind"], "conflict", "{split}");
    assert_eq!(provider.runs.load(Ordering::SeqCst), 1, "nothing more ran");

    let noted_again = ask(&second, "run-2", "scratch_note", note).await;
    assert_eq!(noted_again["status"], "succeeded", "{noted_again}");
    assert_eq!(noted_again["replayed"], false, "{noted_again}");
    assert_eq!(noted_again["data"]["note"], 2, "kept again in the new run");
}

#[tokio::test]
async fn once_across_runs_and_processes_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("operations.db");
    once_across_runs_and_processes(|| async {
        let store = toolgate::store::SqliteStore::open(&path).await.unwrap();
        Arc::new(store) as Arc<dyn OperationStore>
    })
    .await;
}

#[tokio::test]
async fn once_across_runs_and_processes_on_postgres() {
    let url = toolgate_test_postgres::test_database().await;
    once_across_runs_and_processes(|| async {
        let store = toolgate::store::PostgresStore::connect(&url).await.unwrap();
        Arc::new(store) as Arc<dyn OperationStore>
    })
    .await;
}
