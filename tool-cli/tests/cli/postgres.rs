//! The command line on a PostgreSQL database (a real one, through the tests' harness): listing
//! approving, and settling an unknown outcome.

use toolgate_core::store::prelude::*;

use toolgate_core::store::{ApprovalStatus, AuditKind, OperationState};
use toolgate_store_postgres::PostgresStore;
use toolgate_test_postgres::test_database;

use crate::support::{
    HOUR_MS, MANAGER, SETTLER, all_audit, approval, ask, now_ms, toolgate, unknown,
};

#[tokio::test]
async fn lists_and_approves_on_postgres() {
    let url = test_database().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    ask(
        &store,
        &approval("apr_a1", "acme", "k1", now_ms() + HOUR_MS),
    )
    .await;

    let ran = toolgate(&url, &["approvals", "list", "--json"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let listed: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["id"], "apr_a1");
    assert_eq!(listed[0]["status"], "pending");

    let mut args = vec!["approvals", "approve", "apr_a1", "--reason", "checked"];
    args.extend(MANAGER);
    let ran = toolgate(&url, &args);
    assert_eq!(ran.code, 0, "{ran:?}");

    let stored = store.approval("apr_a1").await.unwrap().unwrap();
    assert_eq!(stored.status, ApprovalStatus::Approved);
    assert_eq!(stored.decisions[0].by, "manager");
    // Typed on the command line, vouched for by nobody: its issuer says so.
    assert_eq!(stored.decisions[0].issuer.as_deref(), Some("typed"));
    let audit = all_audit(&store).await;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].entry.kind, AuditKind::Decision);

    let ran = toolgate(&url, &["approvals", "list"]);
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (0, "no pending approvals\n")
    );
}

#[tokio::test]
async fn settles_an_unknown_outcome_on_postgres() {
    let url = test_database().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    unknown(&store, "acme", "k1").await;
    unknown(&store, "acme", "k2").await;

    let settle = |key: &str, outcome: &str| {
        let args = [
            &["ops", "settle", key, outcome, "--evidence", "seen"][..],
            &SETTLER,
        ]
        .concat();
        toolgate(&url, &args)
    };
    let ran = settle("k1", "--applied");
    assert_eq!(ran.code, 0, "{ran:?}");
    let ran = settle("k2", "--not-applied");
    assert_eq!(ran.code, 0, "{ran:?}");
    let ran = settle("k1", "--not-applied");
    assert_eq!(ran.code, 1, "settled once: {ran:?}");

    let state = async |key| store.get("acme", key).await.unwrap().unwrap().state;
    assert_eq!(state("k1").await, OperationState::Succeeded);
    assert_eq!(state("k2").await, OperationState::Failed);
    let outcomes: Vec<String> = all_audit(&store)
        .await
        .into_iter()
        .map(|record| record.entry.outcome)
        .collect();
    assert_eq!(outcomes, ["settled", "settled", "refused"]);
}
