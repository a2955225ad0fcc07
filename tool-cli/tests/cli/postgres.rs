//! The command line on a PostgreSQL database (a real one, through the tests' harness): an issuer
//! made with `operators init` and listed, listing and approving with a token it issued, a token
//! it did not issue refused, and settling an unknown outcome; and the console on the same
//! database, signing in and approving.

use toolgate_core::store::prelude::*;

use toolgate_core::store::{ApprovalStatus, AuditKind, OperationState};
use toolgate_store_postgres::PostgresStore;
use toolgate_test_postgres::test_database;

use crate::support::{
    HOUR_MS, Issuer, all_audit, approval, ask, now_ms, toolgate, toolgate_as, unknown,
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

    // The issuer, made by the command line: its secret in a file, its public key in the
    // database.
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("acme-ops.jwk");
    let secret = secret.to_str().unwrap();
    let ran = toolgate(
        &url,
        &[
            "operators",
            "init",
            "--issuer",
            "acme-ops",
            "--tenant",
            "acme",
            "--secret-file",
            secret,
        ],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let keys = store.issuer_keys("acme").await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let ran = toolgate(&url, &["operators", "list", "--tenant", "acme", "--json"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let listed: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(listed[0]["kid"], keys[0].kid(), "{listed}");
    let ran = toolgate(
        &url,
        &[
            "operators",
            "issue",
            "--secret-file",
            secret,
            "--subject",
            "manager",
            "--permission",
            "refund:approve",
        ],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let token = ran.stdout.trim_end();

    // A token of a key the database does not hold decides nothing.
    let stranger = Issuer::unknown("acme-ops", "acme").token("manager", &["refund:approve"]);
    let args = ["approvals", "approve", "apr_a1", "--reason", "checked"];
    let ran = toolgate_as(&url, &stranger, &args);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr.contains("the operator token is refused"),
        "{ran:?}"
    );
    let refused = all_audit(&store).await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(
        (
            refused[0].entry.outcome.as_str(),
            refused[0].entry.actor.as_str()
        ),
        ("refused", "")
    );

    let ran = toolgate_as(&url, token, &args);
    assert_eq!(ran.code, 0, "{ran:?}");

    let stored = store.approval("apr_a1").await.unwrap().unwrap();
    assert_eq!(stored.status, ApprovalStatus::Approved);
    assert_eq!(stored.decisions[0].by, "manager");
    // The token's issuer vouches for the decision.
    assert_eq!(stored.decisions[0].issuer.as_deref(), Some("acme-ops"));
    let audit = all_audit(&store).await;
    assert_eq!(audit.len(), 2);
    assert_eq!(audit[1].entry.kind, AuditKind::Decision);
    assert_eq!(audit[1].entry.actor, "manager");

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
    let acme = Issuer::added(&store, "acme-ops", "acme").await;
    let token = acme.token("ops-lead", &["ops:settle"]);

    let settle = |key: &str, outcome: &str| {
        let args = ["ops", "settle", key, outcome, "--evidence", "seen"];
        toolgate_as(&url, &token, &args)
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
    let outcomes: Vec<(String, String)> = all_audit(&store)
        .await
        .into_iter()
        .map(|record| (record.entry.actor, record.entry.outcome))
        .collect();
    let by_lead = |outcome: &str| ("ops-lead".to_owned(), outcome.to_owned());
    assert_eq!(
        outcomes,
        [by_lead("settled"), by_lead("settled"), by_lead("refused")]
    );
}

#[tokio::test]
async fn the_console_signs_in_and_approves_on_postgres() {
    use crate::web::{Client, ConsoleProcess, csrf_of, issuer, token};

    let url = test_database().await;
    let store = PostgresStore::connect(&url).await.unwrap();
    ask(
        &store,
        &approval("apr_p1", "acme", "k1", now_ms() + HOUR_MS),
    )
    .await;
    let acme = issuer(&store, "acme-ops", "acme").await;
    let console = ConsoleProcess::start(&url);

    // A token of a key the database does not hold signs no one in.
    let stranger = toolgate_core::identity::IssuerSecret::generate("acme-ops", "acme").unwrap();
    let mut client = Client::new(&console.addr);
    let refused = client
        .sign_in(&token(&stranger, "manager", &["refund:approve"]))
        .await;
    assert_eq!(refused.status, 403, "{refused:?}");

    let reply = client
        .sign_in(&token(&acme, "manager", &["refund:approve"]))
        .await;
    assert_eq!(reply.location.as_deref(), Some("/approvals"), "{reply:?}");
    let queue = client.get("/approvals").await;
    assert!(queue.body.contains("apr_p1") && queue.body.contains("8000.00"));
    let csrf = csrf_of(&queue.body);
    let form = [
        ("csrf", csrf.as_str()),
        ("id", "apr_p1"),
        ("verdict", "approve"),
        ("reason", "checked on postgres"),
    ];
    client.post("/approvals/decide", &form).await;
    let stored = store.approval("apr_p1").await.unwrap().unwrap();
    assert_eq!(stored.status, ApprovalStatus::Approved);
    let decision = stored.last_decision().unwrap();
    assert_eq!(
        (decision.by.as_str(), decision.issuer.as_deref()),
        ("manager", Some("acme-ops"))
    );
    let audit = all_audit(&store).await;
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(
        (audit[0].entry.kind, audit[0].entry.actor.as_str()),
        (AuditKind::Decision, "manager")
    );
}
