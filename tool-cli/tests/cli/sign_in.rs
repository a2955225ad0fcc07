//! Signing in with an operator token, for each command that acts (`approvals approve`, `ops
//! settle`, `outbox resume`): the token's subject is the operator, recorded as the actor of what
//! it does; an expired token, one signed by a key the store does not hold, one signed by another
//! tenant's key, an unsigned one and one that does not read are refused (exit 1) before anything
//! is decided, settled or resumed. A refused token is a refused attempt to act: it leaves an
//! audit record, with no actor, in the tenant it claims, when it reads that far.

use toolgate_core::store::prelude::*;
use toolgate_core::store::{ApprovalStatus, AuditKind, EventStatus, OperationState};

use crate::support::{
    HOUR_MS, Issuer, Ran, SqliteFile, all_audit, approval, ask, dead_event, now_ms, sqlite_file,
    toolgate_as, unknown,
};

/// A store with something waiting for each command: the approval `apr_a1`, the unknown outcome
/// `k1` and the dead outbox event `k2`, all of acme.
async fn waiting() -> SqliteFile {
    let db = sqlite_file().await;
    ask(
        &db.store,
        &approval("apr_a1", "acme", "k0", now_ms() + HOUR_MS),
    )
    .await;
    unknown(&db.store, "acme", "k1").await;
    dead_event(&db.store, "acme", "k2").await;
    db
}

/// Each command that acts, with the permission it needs.
const ACTS: [(&[&str], &str); 3] = [
    (
        &["approvals", "approve", "apr_a1", "--reason", "checked"],
        "refund:approve",
    ),
    (
        &["ops", "settle", "k1", "--applied", "--evidence", "re_42"],
        "ops:settle",
    ),
    (
        &["outbox", "resume", "k2", "--reason", "back up"],
        "outbox:resume",
    ),
];

/// Asserts that `ran`, the command `args`, was refused at sign-in, saying `says`, and that
/// nothing in `db` changed: the approval pending, the outcome unknown, the event dead. Every
/// audit record is a refusal with no actor; when `recorded`, the last one is this refusal's, on
/// what the command was asked to act on.
async fn refused_and_unchanged(db: &SqliteFile, args: &[&str], ran: &Ran, says: &str) {
    refused_as(db, args, ran, says, true).await;
}

/// [`refused_and_unchanged`] of a token that does not say its tenant: no record.
async fn refused_unrecorded(db: &SqliteFile, args: &[&str], ran: &Ran, says: &str) {
    refused_as(db, args, ran, says, false).await;
}

async fn refused_as(db: &SqliteFile, args: &[&str], ran: &Ran, says: &str, recorded: bool) {
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(ran.stdout.is_empty(), "{ran:?}");
    for part in [
        "error: the operator token is refused",
        "why: ",
        "next: ",
        says,
    ] {
        assert!(ran.stderr.contains(part), "{part:?} in {}", ran.stderr);
    }
    let approval = db.store.approval("apr_a1").await.unwrap().unwrap();
    assert_eq!(approval.status, ApprovalStatus::Pending);
    assert!(approval.decisions.is_empty(), "{approval:?}");
    let operation = db.store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(operation.state, OperationState::OutcomeUnknown);
    let event = db.store.event("acme", "k2").await.unwrap().unwrap();
    assert_eq!(event.status, EventStatus::Dead);
    let audit = all_audit(&db.store).await;
    for record in &audit {
        let entry = &record.entry;
        assert_eq!(
            (entry.outcome.as_str(), entry.actor.as_str()),
            ("refused", "")
        );
        let reason = entry.reason.as_deref().unwrap_or_default();
        assert!(reason.contains("the operator token is refused"), "{reason}");
    }
    if !recorded {
        return;
    }
    let last = &audit.last().expect("the refusal is recorded").entry;
    assert!(last.reason.as_deref().unwrap().contains(says), "{last:?}");
    assert!(
        last.reason
            .as_deref()
            .unwrap()
            .starts_with(&format!("{} {}", args[0], args[1]))
    );
    let on = args[2];
    if args[0] == "approvals" {
        assert_eq!(last.kind, AuditKind::Decision);
        assert_eq!(last.approval_id.as_deref(), Some(on));
        // In the approval's run's trail.
        assert_eq!(
            (last.run_id.as_str(), last.key.as_deref()),
            ("run-1", Some("k0"))
        );
    } else {
        assert_eq!(last.kind, AuditKind::Operator);
        assert_eq!(last.key.as_deref(), Some(on));
    }
}

#[tokio::test]
async fn an_expired_token_is_refused_by_every_command() {
    let db = waiting().await;
    for (args, permission) in ACTS {
        // Issued two hours ago for an hour.
        let token = db
            .acme
            .token_at("manager", &[permission], now_ms() - 2 * HOUR_MS);
        let ran = toolgate_as(&db.arg, &token, args);
        refused_and_unchanged(&db, args, &ran, "the token expired at ").await;
        assert!(ran.stderr.contains("toolgate operators issue"), "{ran:?}");
    }
}

#[tokio::test]
async fn a_token_of_a_key_the_store_does_not_hold_is_refused_by_every_command() {
    let db = waiting().await;
    // The same issuer's name and tenant, another key pair.
    let stranger = Issuer::unknown("acme-ops", "acme");
    for (args, permission) in ACTS {
        let token = stranger.token("manager", &[permission]);
        let ran = toolgate_as(&db.arg, &token, args);
        refused_and_unchanged(&db, args, &ran, "which is not one of the issuer keys held").await;
        assert!(
            ran.stderr.contains("toolgate operators list --tenant acme"),
            "{ran:?}"
        );
    }
}

#[tokio::test]
async fn a_token_signed_with_another_tenants_key_is_refused_by_every_command() {
    let db = waiting().await;
    // Globex's issuer, whose key the store holds for globex, signs claims of acme.
    let globex = Issuer::added(&db.store, "globex-ops", "globex").await;
    for (args, permission) in ACTS {
        for issuer in ["globex-ops", "acme-ops"] {
            let token = globex.hand_signed(serde_json::json!({
                "iss": issuer,
                "sub": "manager",
                "tenant": "acme",
                "permissions": [permission],
            }));
            let ran = toolgate_as(&db.arg, &token, args);
            let says = "which is not one of the issuer keys held";
            refused_and_unchanged(&db, args, &ran, says).await;
        }
    }
}

#[tokio::test]
async fn an_unsigned_or_unreadable_token_is_refused_by_every_command() {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;

    let db = waiting().await;
    for (args, permission) in ACTS {
        // `alg: none`, no signature: claims anyone can write.
        let claims = serde_json::json!({
            "iss": "acme-ops",
            "sub": "manager",
            "tenant": "acme",
            "permissions": [permission],
            "iat": now_ms() / 1000,
            "exp": now_ms() / 1000 + 3600,
        });
        let unsigned = format!(
            "{}.{}.",
            B64.encode(r#"{"alg":"none","typ":"JWT"}"#),
            B64.encode(claims.to_string())
        );
        let ran = toolgate_as(&db.arg, &unsigned, args);
        refused_and_unchanged(&db, args, &ran, "not signed with EdDSA").await;
        for garbage in ["manager", "a.b.c"] {
            let ran = toolgate_as(&db.arg, garbage, args);
            refused_unrecorded(&db, args, &ran, "the token is not an operator token").await;
        }
    }
}

#[tokio::test]
async fn the_tokens_subject_is_the_actor_and_its_issuer_vouches_for_the_decision() {
    let db = waiting().await;
    let lead = db.acme.token(
        "ops-lead",
        &["refund:approve", "ops:settle", "outbox:resume"],
    );
    for (args, _) in ACTS {
        let ran = toolgate_as(&db.arg, &lead, args);
        assert_eq!(ran.code, 0, "{args:?}: {ran:?}");
    }
    let approval = db.store.approval("apr_a1").await.unwrap().unwrap();
    let decision = approval.last_decision().unwrap();
    assert_eq!(
        (decision.by.as_str(), decision.issuer.as_deref()),
        ("ops-lead", Some("acme-ops"))
    );
    let audit: Vec<(AuditKind, String, String, String)> = all_audit(&db.store)
        .await
        .into_iter()
        .map(|record| {
            let entry = record.entry;
            let key = entry.key.unwrap_or_default();
            (entry.kind, entry.actor, key, entry.outcome)
        })
        .collect();
    let row = |kind, key: &str, outcome: &str| {
        (
            kind,
            "ops-lead".to_owned(),
            key.to_owned(),
            outcome.to_owned(),
        )
    };
    assert_eq!(
        audit,
        [
            row(AuditKind::Decision, "k0", "approved"),
            row(AuditKind::Operator, "k1", "settled"),
            row(AuditKind::Operator, "k2", "resumed"),
        ]
    );
}
