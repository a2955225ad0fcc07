//! `outbox list | show | resume` on a SQLite file: events made through the store API (an outbox
//! operation committed with its event, leased, and dead-lettered), what the commands print, and
//! every refusal of a resume with its exit code.

use toolgate_core::store::prelude::*;

use toolgate_core::store::{AuditKind, EventStatus};

use crate::support::{
    SqliteFile, call_entry, dead_event, operator_trail, sqlite_file, toolgate, toolgate_as,
};

/// The token of acme's operator `ops`, who holds `outbox:resume`.
fn operator(db: &SqliteFile) -> String {
    db.acme.token("ops", &["outbox:resume"])
}

#[tokio::test]
async fn list_and_show_print_the_events_as_a_table_and_as_json() {
    let db = sqlite_file().await;
    dead_event(&db.store, "acme", "k1").await;
    dead_event(&db.store, "globex", "k2").await;

    let ran = toolgate(&db.arg, &["outbox", "list"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", ran.stdout);
    assert!(
        lines[0].starts_with("TENANT  KEY  TOOL          STATUS  ATTEMPT  DUE"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("acme    k1   issue_refund  dead    1"),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].ends_with("unavailable: the payment provider answered 503"),
        "{}",
        lines[1]
    );

    let ran = toolgate(
        &db.arg,
        &[
            "outbox", "list", "--tenant", "acme", "--status", "dead", "--json",
        ],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let listed: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["key"], "k1");
    assert_eq!(listed[0]["payload"]["amount_cents"], 5000);
    assert_eq!(listed[0]["last_error"]["kind"], "unavailable");

    let ran = toolgate(&db.arg, &["outbox", "list", "--limit", "1", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let ran = toolgate(&db.arg, &["outbox", "list", "--status", "pending"]);
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (0, "no pending outbox events\n")
    );

    let ran = toolgate(&db.arg, &["outbox", "show", "k1"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(ran.stdout.contains("status       dead\n"), "{}", ran.stdout);
    assert!(ran.stdout.contains("tenant       acme\n"), "{}", ran.stdout);
    let ran = toolgate(&db.arg, &["outbox", "show", "k1", "--tenant", "globex"]);
    assert_eq!(ran.code, 1, "another tenant's key is not found: {ran:?}");
    assert!(
        ran.stderr.contains("no outbox event k1 of tenant globex"),
        "{ran:?}"
    );
}

#[tokio::test]
async fn resume_makes_a_dead_event_pending_and_refuses_anything_else() {
    let db = sqlite_file().await;
    dead_event(&db.store, "acme", "k1").await;
    dead_event(&db.store, "globex", "k2").await;

    // Without outbox:resume.
    let ran = toolgate_as(
        &db.arg,
        &db.acme.token("ops", &["ops:settle"]),
        &["outbox", "resume", "k1"],
    );
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(ran.stderr.contains("`outbox:resume`"), "{ran:?}");
    // Another tenant's event is not found for acme's operator.
    let ran = toolgate_as(&db.arg, &operator(&db), &["outbox", "resume", "k2"]);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr.contains("no outbox event k2 of tenant acme"),
        "{ran:?}"
    );
    // No token at all is a usage error.
    let ran = toolgate(&db.arg, &["outbox", "resume", "k1"]);
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.stderr.contains("no operator token"), "{ran:?}");
    let event = db.store.event("acme", "k1").await.unwrap().unwrap();
    assert_eq!(event.status, EventStatus::Dead, "nothing was changed");

    let ran = toolgate_as(
        &db.arg,
        &operator(&db),
        &["outbox", "resume", "k1", "--json", "--reason", "back up"],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let resumed: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(resumed["status"], "pending", "{resumed}");
    assert_eq!(
        resumed["attempts_spent"], 0,
        "the budget counts afresh: {resumed}"
    );
    let event = db.store.event("acme", "k1").await.unwrap().unwrap();
    assert_eq!(event.status, EventStatus::Pending);
    assert_eq!(event.resumed_at, event.attempt);

    // Pending now: a second resume is refused and says so.
    let ran = toolgate_as(&db.arg, &operator(&db), &["outbox", "resume", "k1"]);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr
            .contains("the outbox event k1 is pending, not dead"),
        "{ran:?}"
    );

    // Every operator action, and every refused attempt at one, is in the audit trail; the
    // attempt with no token never reached the store.
    let trail: Vec<(String, String, String)> = operator_trail(&db.store)
        .await
        .into_iter()
        .map(|(actor, key, outcome, _)| (actor, key, outcome))
        .collect();
    let row = |actor: &str, key: &str, outcome: &str| {
        (actor.to_owned(), key.to_owned(), outcome.to_owned())
    };
    assert_eq!(
        trail,
        [
            row("ops", "k1", "refused"),
            row("ops", "k2", "refused"),
            row("ops", "k1", "resumed"),
            row("ops", "k1", "refused"),
        ]
    );
}

#[tokio::test]
async fn audit_of_a_run_shows_the_deliveries_and_operator_actions_on_its_operations() {
    let db = sqlite_file().await;
    let store: &dyn OperationStore = &db.store;
    dead_event(store, "acme", "k1").await;
    dead_event(store, "acme", "k2").await;
    let run_call = call_entry("acme", "run-7", "call_1", "issue_refund", Some("k1"));
    let mut delivery = call_entry("acme", "", "", "issue_refund", Some("k1"));
    delivery.kind = AuditKind::Delivery;
    delivery.outcome = "dead".into();
    delivery.actor = "worker-1".into();
    // Not run-7's: another operation's delivery, and another run's call of the same key.
    let mut elsewhere = delivery.clone();
    elsewhere.key = Some("k2".into());
    let other_run = call_entry("acme", "run-8", "call_1", "issue_refund", Some("k1"));
    for entry in [&run_call, &elsewhere, &delivery, &other_run] {
        store.append_audit(entry).await.unwrap();
    }
    let ran = toolgate_as(&db.arg, &operator(&db), &["outbox", "resume", "k1"]);
    assert_eq!(ran.code, 0, "{ran:?}");

    let ran = toolgate(&db.arg, &["audit", "run-7", "--json"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let trail: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    let rows: Vec<(&str, &str, &str)> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|record| {
            assert_eq!(record["key"], "k1", "{record}");
            (
                record["kind"].as_str().unwrap(),
                record["actor"].as_str().unwrap(),
                record["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("call", "agent", "succeeded"),
            ("delivery", "worker-1", "dead"),
            ("operator", "ops", "resumed"),
        ]
    );
    let ran = toolgate(&db.arg, &["audit", "run-7"]);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(
        ran.stdout.lines().count(),
        5,
        "a title, a header, three rows: {}",
        ran.stdout
    );
}
