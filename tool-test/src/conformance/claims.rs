//! What a claim answers: a new key, a replay, a conflict, another tenant, a record that failed,
//! an unknown outcome, a live or an expired lease, many claims at once.
pub(super) mod outcomes;
pub(super) mod takeover;
pub(super) mod text;

use futures_util::future::join_all;
use toolgate_core::store::{
    AttemptFailure, Claim, OperationState, OperationStore, StoreError, Success,
};

use super::fixture::{T0, acquire, error, owner, request};

/// A new key is acquired at attempt 1 and stored as `processing` with its lease.
pub async fn first_claim_acquires_attempt_one(store: &dyn OperationStore) {
    assert_eq!(acquire(store, request("acme", "k1", "h1", T0)).await, 1);
    let record = store.get("acme", "k1").await.unwrap().expect("stored");
    assert_eq!(record.state, OperationState::Processing);
    assert_eq!(record.attempt, 1);
    assert_eq!(record.tool, "issue_refund");
    assert_eq!(record.request_hash, "h1");
    assert_eq!(record.arguments, r#"{"amount":500,"order_id":"ORD-1001"}"#);
    assert_eq!(record.lease_until_ms, T0 + 30_000);
    assert_eq!((record.created_ms, record.updated_ms), (T0, T0));
    assert!(record.result.is_none() && record.errors.is_empty());
    assert_eq!(store.get("acme", "other").await.unwrap(), None);
}

/// A finished operation claimed again answers its record: the stored result, not a new run.
pub async fn a_replay_returns_the_stored_result(store: &dyn OperationStore) {
    let attempt = acquire(store, request("acme", "k1", "h1", T0)).await;
    store
        .succeed(Success {
            owner: &owner("acme", "k1", attempt),
            result: r#"{"refund_id":"re_1"}"#,
            now_ms: T0 + 5,
            audit: None,
        })
        .await
        .unwrap();
    for now in [T0 + 10, T0 + 60_000] {
        match store.claim(request("acme", "k1", "h1", now)).await.unwrap() {
            Claim::Existing(record) => {
                assert_eq!(record.state, OperationState::Succeeded);
                assert_eq!(record.result.as_deref(), Some(r#"{"refund_id":"re_1"}"#));
                assert_eq!(record.attempt, 1, "a replay is not a new attempt");
                assert_eq!(record.updated_ms, T0 + 5);
            }
            other => panic!("expected the stored result, got {other:?}"),
        }
    }
}

/// Arguments whose keys come in another order, with other spacing, are the same request: the
/// runtime's canonical hash makes them one, and the store answers the stored outcome.
pub async fn reordered_arguments_are_the_same_request(store: &dyn OperationStore) {
    use toolgate_core::idempotency::HashSecret;
    use toolgate_core::idempotency::{canonical_json, request_hash};
    let first: serde_json::Value = serde_json::from_str(
        r#"{"order_id": "ORD-1001", "amount": 500, "note": {"b": 1, "a": 2}}"#,
    )
    .expect("JSON");
    let second: serde_json::Value =
        serde_json::from_str(r#"{ "note":{"a":2,"b":1},"amount":500,"order_id":"ORD-1001" }"#)
            .expect("JSON");
    let (text_1, text_2) = (canonical_json(&first), canonical_json(&second));
    let (hash_1, hash_2) = (
        request_hash(&HashSecret::local_default(), "issue_refund", &text_1),
        request_hash(&HashSecret::local_default(), "issue_refund", &text_2),
    );
    let mut claim = request("acme", "k1", &hash_1, T0);
    claim.arguments = &text_1;
    let attempt = acquire(store, claim).await;
    store
        .succeed(Success {
            owner: &owner("acme", "k1", attempt),
            result: r#""done""#,
            now_ms: T0 + 1,
            audit: None,
        })
        .await
        .unwrap();
    let mut again = request("acme", "k1", &hash_2, T0 + 2);
    again.arguments = &text_2;
    match store.claim(again).await.unwrap() {
        Claim::Existing(record) => {
            assert_eq!(record.result.as_deref(), Some(r#""done""#));
            assert_eq!(record.arguments, text_1);
        }
        other => panic!("reordered arguments were not the same request: {other:?}"),
    }
}

/// Same key, other arguments: a conflict, and the record is exactly as it was.
pub async fn another_request_under_the_same_key_is_a_conflict_and_stores_nothing(
    store: &dyn OperationStore,
) {
    acquire(store, request("acme", "k1", "h1", T0)).await;
    let before = store.get("acme", "k1").await.unwrap();
    let mut other = request("acme", "k1", "h2", T0 + 1);
    other.arguments = r#"{"amount":900,"order_id":"ORD-1001"}"#;
    other.takeover = true;
    assert_eq!(
        store.claim(other).await.unwrap(),
        Claim::Conflict {
            tool: "issue_refund".into()
        }
    );
    assert_eq!(store.get("acme", "k1").await.unwrap(), before);
    // A conflict after the lease expired still changes nothing.
    other.now_ms = T0 + 3_600_000;
    assert!(matches!(
        store.claim(other).await.unwrap(),
        Claim::Conflict { .. }
    ));
    assert_eq!(store.get("acme", "k1").await.unwrap(), before);
}

/// Another tenant with the same key runs independently and never sees the first's record.
pub async fn tenants_never_share_records(store: &dyn OperationStore) {
    let a = acquire(store, request("acme", "k1", "h1", T0)).await;
    store
        .succeed(Success {
            owner: &owner("acme", "k1", a),
            result: r#""acme's""#,
            now_ms: T0,
            audit: None,
        })
        .await
        .unwrap();
    assert_eq!(store.get("globex", "k1").await.unwrap(), None);
    let b = acquire(store, request("globex", "k1", "h1", T0)).await;
    assert_eq!(b, 1);
    store
        .succeed(Success {
            owner: &owner("globex", "k1", b),
            result: r#""globex's""#,
            now_ms: T0,
            audit: None,
        })
        .await
        .unwrap();
    let acme = store.get("acme", "k1").await.unwrap().unwrap();
    let globex = store.get("globex", "k1").await.unwrap().unwrap();
    assert_eq!(acme.result.as_deref(), Some(r#""acme's""#));
    assert_eq!(globex.result.as_deref(), Some(r#""globex's""#));
    assert_eq!(globex.tenant, "globex");
    // Nor can a worker of one tenant settle the other's record.
    let err = store
        .fail(AttemptFailure {
            owner: &owner("globex", "k2", 1),
            error: &error(1, "x"),
            now_ms: T0,
        })
        .await;
    assert!(matches!(err, Err(StoreError::LostClaim { .. })), "{err:?}");
}

/// `failed` means not applied: the next claim takes it again, keeping the earlier errors.
pub async fn failed_can_be_claimed_again(store: &dyn OperationStore) {
    let first = acquire(store, request("acme", "k1", "h1", T0)).await;
    store
        .fail(AttemptFailure {
            owner: &owner("acme", "k1", first),
            error: &error(1, "retry_budget_exhausted"),
            now_ms: T0 + 1,
        })
        .await
        .unwrap();
    let record = store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Failed);
    let second = acquire(store, request("acme", "k1", "h1", T0 + 2)).await;
    assert_eq!(second, 2);
    let record = store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Processing);
    assert_eq!(record.lease_until_ms, T0 + 2 + 30_000);
    assert_eq!(record.errors, vec![error(1, "retry_budget_exhausted")]);
}

/// `outcome_unknown` is never run again by a replay, whatever the claim asks.
pub async fn an_unknown_outcome_is_never_claimed_again(store: &dyn OperationStore) {
    let attempt = acquire(store, request("acme", "k1", "h1", T0)).await;
    store
        .mark_unknown(AttemptFailure {
            owner: &owner("acme", "k1", attempt),
            error: &error(1, "outcome_unknown"),
            now_ms: T0 + 1,
        })
        .await
        .unwrap();
    for takeover in [false, true] {
        let mut again = request("acme", "k1", "h1", T0 + 3_600_000);
        again.takeover = takeover;
        match store.claim(again).await.unwrap() {
            Claim::Existing(record) => {
                assert_eq!(record.state, OperationState::OutcomeUnknown);
                assert_eq!(record.attempt, 1);
                assert_eq!(record.errors, vec![error(1, "outcome_unknown")]);
            }
            other => panic!("an unknown outcome was claimed: {other:?}"),
        }
    }
}

/// A duplicate while the first worker's lease holds sees `processing`.
pub async fn a_live_claim_is_in_progress(store: &dyn OperationStore) {
    acquire(store, request("acme", "k1", "h1", T0)).await;
    let mut duplicate = request("acme", "k1", "h1", T0 + 29_999);
    duplicate.takeover = true;
    match store.claim(duplicate).await.unwrap() {
        Claim::Existing(record) => {
            assert_eq!(record.state, OperationState::Processing);
            assert_eq!(record.attempt, 1);
        }
        other => panic!("expected in progress, got {other:?}"),
    }
}

/// An expired lease (a crashed worker) becomes `outcome_unknown`, durably, unless the tool
/// allows a takeover.
pub async fn an_expired_lease_becomes_unknown_unless_taken_over(store: &dyn OperationStore) {
    acquire(store, request("acme", "k1", "h1", T0)).await;
    match store
        .claim(request("acme", "k1", "h1", T0 + 30_000))
        .await
        .unwrap()
    {
        Claim::Existing(record) => assert_eq!(record.state, OperationState::OutcomeUnknown),
        other => panic!("expected an unknown outcome, got {other:?}"),
    }
    let record = store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(
        record.state,
        OperationState::OutcomeUnknown,
        "the transition is stored"
    );
    assert_eq!(record.updated_ms, T0 + 30_000);

    acquire(store, request("acme", "k2", "h1", T0)).await;
    let mut takeover = request("acme", "k2", "h1", T0 + 30_000);
    takeover.takeover = true;
    assert_eq!(acquire(store, takeover).await, 2);
    let record = store.get("acme", "k2").await.unwrap().unwrap();
    assert_eq!(record.lease_until_ms, T0 + 60_000);
}

/// Many claims of one key at once: exactly one acquires.
pub async fn concurrent_claims_acquire_once(store: &dyn OperationStore) {
    let claims = join_all((0..16).map(|_| store.claim(request("acme", "hot", "h1", T0)))).await;
    let acquired = claims
        .iter()
        .filter(|c| matches!(c, Ok(Claim::Acquired { .. })))
        .count();
    assert_eq!(acquired, 1, "{claims:?}");
    assert!(claims.iter().all(Result::is_ok), "{claims:?}");
}
