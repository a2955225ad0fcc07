//! `ops settle` on a SQLite file: an unknown outcome settled as applied or not by an operator who
//! holds `ops:settle`, what a call again with the key then meets, every refusal with its exit
//! code, and the audit record of each attempt.

use toolgate_core::store::prelude::*;

use toolgate_core::store::{Claim, OperationState};

use crate::support::{
    SqliteFile, operator_trail, refund_claim, sqlite_file, succeeded, toolgate, toolgate_as,
    unknown,
};

/// The token of acme's operator `ops`, who holds `ops:settle`.
fn settler(db: &SqliteFile) -> String {
    db.acme.token("ops", &["ops:settle"])
}

/// A claim of `key` again, as a call again with its key makes one.
async fn claim_again(store: &dyn OperationStore, key: &str) -> Claim {
    let hash = format!("hash-{key}");
    store.claim(refund_claim("acme", key, &hash)).await.unwrap()
}

#[tokio::test]
async fn an_unknown_outcome_settled_as_applied_is_replayed_and_as_not_applied_runs_again() {
    let db = sqlite_file().await;
    unknown(&db.store, "acme", "k1").await;
    unknown(&db.store, "acme", "k2").await;

    let ran = toolgate_as(
        &db.arg,
        &settler(&db),
        &[
            "ops",
            "settle",
            "k1",
            "--applied",
            "--evidence",
            "re_42 in the ledger",
        ],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(
        ran.stdout,
        "operation k1 of tenant acme settled as applied by ops: succeeded\n"
    );
    let record = db.store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Succeeded);
    let result: serde_json::Value =
        serde_json::from_str(record.result.as_deref().unwrap()).unwrap();
    assert_eq!(
        result,
        serde_json::json!({"settled_by": "ops", "evidence": "re_42 in the ledger"})
    );
    // A call again with the key is answered with the settled result, and nothing runs.
    let Claim::Existing(existing) = claim_again(&db.store, "k1").await else {
        panic!("an applied settlement is the key's outcome");
    };
    assert_eq!(existing.state, OperationState::Succeeded);
    assert_eq!(existing.result, record.result);

    let ran = toolgate_as(
        &db.arg,
        &settler(&db),
        &[
            "ops",
            "settle",
            "k2",
            "--not-applied",
            "--evidence",
            "no refund at the provider",
            "--json",
        ],
    );
    assert_eq!(ran.code, 0, "{ran:?}");
    let settled: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(settled["state"], "failed", "{settled}");
    assert_eq!(settled["settled_by"], "ops", "{settled}");
    assert!(
        matches!(claim_again(&db.store, "k2").await, Claim::Acquired { .. }),
        "a call again runs an operation settled as not applied"
    );
}

#[tokio::test]
async fn a_settlement_is_refused_for_any_other_state_tenant_or_operator_and_every_attempt_is_audited()
 {
    let db = sqlite_file().await;
    unknown(&db.store, "acme", "k1").await;
    unknown(&db.store, "globex", "k2").await;
    succeeded(&db.store, "acme", "k3", r#"{"refund_id":"re_3"}"#).await;
    let settle = |key: &str, token: &str| {
        let args = ["ops", "settle", key, "--applied", "--evidence", "seen"];
        toolgate_as(&db.arg, token, &args)
    };
    let settler = settler(&db);

    // What an operator looks at first: every operation, and the unknown ones.
    let listed = |status: &str| {
        let ran = toolgate(&db.arg, &["ops", "list", "--status", status, "--json"]);
        assert_eq!(ran.code, 0, "{ran:?}");
        let listed: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
        listed.as_array().unwrap().len()
    };
    assert_eq!((listed("all"), listed("outcome_unknown")), (3, 2));

    // Without ops:settle.
    let ran = settle("k1", &db.acme.token("ops", &["outbox:resume"]));
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(ran.stderr.contains("`ops:settle`"), "{ran:?}");
    // Under a name that reads as another's but is not an identifier, though the issuer's key
    // signed it: refused at sign-in, and recorded with no actor (no one was proven).
    let renamed = db.acme.hand_signed(serde_json::json!({
        "sub": "ops\u{200b}",
        "permissions": ["ops:settle"],
    }));
    let ran = settle("k1", &renamed);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr.contains("the operator token is refused")
            && ran.stderr.contains("is not an identifier"),
        "{ran:?}"
    );
    // Another tenant's operation is not found for acme's operator.
    let ran = settle("k2", &settler);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr.contains("no operation k2 of tenant acme"),
        "{ran:?}"
    );
    // A settled operation is the store's own account: refused, naming its state.
    let ran = settle("k3", &settler);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr
            .contains("the operation k3 is succeeded, not outcome_unknown"),
        "{ran:?}"
    );
    // No token, or no evidence, is a usage error that never reaches the store.
    let ran = toolgate(
        &db.arg,
        &["ops", "settle", "k1", "--applied", "--evidence", "seen"],
    );
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.stderr.contains("no operator token"), "{ran:?}");
    let args = ["ops", "settle", "k1", "--applied", "--evidence", " "];
    let ran = toolgate_as(&db.arg, &settler, &args);
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.stderr.contains("the evidence is empty"), "{ran:?}");
    let record = db.store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(
        record.state,
        OperationState::OutcomeUnknown,
        "nothing was changed"
    );

    let ran = settle("k1", &settler);
    assert_eq!(ran.code, 0, "{ran:?}");
    // Settled now: a second settlement is refused and says so.
    let ran = settle("k1", &settler);
    assert_eq!(ran.code, 1, "{ran:?}");
    assert!(
        ran.stderr
            .contains("the operation k1 is succeeded, not outcome_unknown"),
        "{ran:?}"
    );

    let trail: Vec<(String, String, String)> = operator_trail(&db.store)
        .await
        .into_iter()
        .map(|(actor, key, outcome, reason)| {
            let at_sign_in = actor.is_empty();
            let says = if at_sign_in {
                "ops settle: the operator token is refused: "
            } else {
                "ops settle applied: "
            };
            assert!(reason.starts_with(says), "{reason}");
            (actor, key, outcome)
        })
        .collect();
    let row = |key: &str, outcome: &str| ("ops".to_owned(), key.to_owned(), outcome.to_owned());
    assert_eq!(
        trail,
        [
            row("k1", "refused"),
            (String::new(), "k1".to_owned(), "refused".to_owned()),
            row("k2", "refused"),
            row("k3", "refused"),
            row("k1", "settled"),
            row("k1", "refused"),
        ]
    );
}
