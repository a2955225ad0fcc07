//! A turn's future dropped while its calls run (a client that went away, a timeout around the
//! turn), on a SQLite file: what runs on the caller's task stops there, as a crash would stop
//! it, and a write whose claim is stored is never run again; what runs on tasks of its own runs
//! to its end and is recorded.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::support::session;
use serde_json::json;
use tokio::sync::Semaphore;
use toolgate::prelude::*;
use toolgate::store::prelude::*;
use toolgate::store::{OperationState, SqliteStore};
use toolgate::{dispatch::ManualClock, reconcile::Reconciler};

/// The provider behind `send`: how often it was asked, a permit for each request it has, and
/// the gate each request waits at (a permit each to pass).
struct Mailer {
    sent: AtomicU32,
    started: Semaphore,
    gate: Semaphore,
}

impl Default for Mailer {
    fn default() -> Self {
        Mailer {
            sent: AtomicU32::new(0),
            started: Semaphore::new(0),
            gate: Semaphore::new(0),
        }
    }
}

/// Send a message; the provider answers when the gate lets the request through.
#[tool(side_effect = "write", key = [to], timeout = "60s")]
async fn send(mailer: State<Mailer>, to: String) -> Result<String, ToolError> {
    mailer.sent.fetch_add(1, Ordering::SeqCst);
    mailer.started.add_permits(1);
    mailer
        .gate
        .acquire()
        .await
        .expect("the gate stays open")
        .forget();
    Ok(format!("sent to {to}"))
}

struct Desk {
    dispatcher: Dispatcher,
    store: Arc<SqliteStore>,
    mailer: Arc<Mailer>,
    clock: Arc<ManualClock>,
    _dir: tempfile::TempDir,
}

async fn desk() -> Desk {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteStore::open(dir.path().join("operations.db"))
            .await
            .unwrap(),
    );
    let mailer = Arc::new(Mailer::default());
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let mut registry = Registry::new();
    registry.register::<send>().unwrap();
    let dispatcher = Dispatcher::builder(registry)
        .store(store.clone())
        .state_shared(mailer.clone())
        .clock(clock.clone())
        // A duplicate of a call in flight answers `in_progress` at once.
        .in_progress_wait(std::time::Duration::ZERO)
        .build();
    Desk {
        dispatcher,
        store,
        mailer,
        clock,
        _dir: dir,
    }
}

fn send_call(id: &str, to: &str) -> ToolCall {
    ToolCall::new(id, "send", json!({"to": to}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_write_dropped_after_its_claim_is_never_run_again() {
    let desk = desk().await;
    let dispatcher = desk.dispatcher.clone();
    let turn = tokio::spawn(async move {
        dispatcher
            .dispatch_turn(&session(), vec![send_call("c1", "ada@example.com")])
            .await
    });
    // The provider has the request: the turn's future is dropped there.
    desk.mailer.started.acquire().await.unwrap().forget();
    turn.abort();
    assert!(turn.await.unwrap_err().is_cancelled());
    let records = desk
        .store
        .list_operations(Default::default())
        .await
        .unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].state, OperationState::Processing);
    // Within its lease the same call is in progress, and does not run.
    let meanwhile = desk
        .dispatcher
        .dispatch(&session(), send_call("c2", "ada@example.com"))
        .await
        .unwrap()
        .result
        .to_json();
    assert_eq!(meanwhile["status"], "in_progress", "{meanwhile}");

    // Past its lease, the reconciler makes it unknown: nothing can say whether it was sent.
    desk.clock.advance_ms(60 * 60 * 1000);
    let report = Reconciler::new(&desk.dispatcher).run_once().await.unwrap();
    assert_eq!(report.expired_leases, 1, "{report:?}");
    let again = desk
        .dispatcher
        .dispatch(&session(), send_call("c3", "ada@example.com"))
        .await
        .unwrap()
        .result
        .to_json();
    assert_eq!(again["status"], "outcome_unknown", "{again}");
    assert_eq!(desk.mailer.sent.load(Ordering::SeqCst), 1, "sent again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_calls_of_a_turn_of_several_run_to_their_end_when_the_turn_is_dropped() {
    let desk = desk().await;
    let dispatcher = desk.dispatcher.clone();
    let turn = tokio::spawn(async move {
        let calls = vec![
            send_call("c1", "ada@example.com"),
            send_call("c2", "grace@example.com"),
        ];
        dispatcher.dispatch_turn(&session(), calls).await
    });
    // Both requests reached the provider, each on a task of its own.
    desk.mailer.started.acquire_many(2).await.unwrap().forget();
    turn.abort();
    assert!(turn.await.unwrap_err().is_cancelled());
    // The provider answers both: each write records its outcome.
    desk.mailer.gate.add_permits(2);
    let settled = async {
        loop {
            let records = desk
                .store
                .list_operations(Default::default())
                .await
                .unwrap();
            if records.len() == 2
                && records
                    .iter()
                    .all(|record| record.state == OperationState::Succeeded)
            {
                return records;
            }
            tokio::task::yield_now().await;
        }
    };
    let records = tokio::time::timeout(std::time::Duration::from_secs(60), settled)
        .await
        .expect("both writes recorded their outcome");
    assert_eq!(records.len(), 2);
    assert_eq!(desk.mailer.sent.load(Ordering::SeqCst), 2);
}
