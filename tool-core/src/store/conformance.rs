//! The conformance suite every [`OperationStore`] must pass: one async fn a rule, each on a
//! fresh store from the caller's factory. Store crates run it from their tests:
//!
//! ```text
//! #[tokio::test]
//! async fn conformance() {
//!     tool_core::store::conformance::run_all(|| async { open_a_fresh_store().await }).await;
//! }
//! ```
//!
//! Not a public API of toolgate; it exists for the store crates.

pub mod takeover;
pub mod text;

use std::future::Future;
use std::time::Duration;

use futures_util::future::join_all;

use super::{
    AttemptError, Claim, ClaimRequest, OperationState, OperationStore, Owner, Resolution,
    StoreError,
};

const T0: i64 = 1_700_000_000_000;
const LEASE: Duration = Duration::from_secs(30);

fn request<'a>(tenant: &'a str, key: &'a str, hash: &'a str, now_ms: i64) -> ClaimRequest<'a> {
    ClaimRequest {
        tenant,
        key,
        tool: "issue_refund",
        request_hash: hash,
        arguments: r#"{"amount":500,"order_id":"ORD-1001"}"#,
        now_ms,
        lease: LEASE,
        takeover: false,
    }
}

fn owner(tenant: &str, key: &str, attempt: u32) -> Owner {
    Owner {
        tenant: tenant.into(),
        key: key.into(),
        attempt,
    }
}

fn error(attempt: u32, kind: &str) -> AttemptError {
    AttemptError {
        attempt,
        kind: kind.into(),
        what: format!("attempt {attempt} failed"),
    }
}

async fn acquire(store: &dyn OperationStore, req: ClaimRequest<'_>) -> u32 {
    match store.claim(req).await.expect("claim") {
        Claim::Acquired { attempt } => attempt,
        other => panic!("expected to acquire {}, got {other:?}", req.key),
    }
}

/// Runs every rule, each on a fresh store.
pub async fn run_all<S, F, Fut>(make: F)
where
    S: OperationStore,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    first_claim_acquires_attempt_one(&make().await).await;
    a_replay_returns_the_stored_result(&make().await).await;
    reordered_arguments_are_the_same_request(&make().await).await;
    another_request_under_the_same_key_is_a_conflict_and_stores_nothing(&make().await).await;
    tenants_never_share_records(&make().await).await;
    a_stale_attempt_cannot_overwrite(&make().await).await;
    failed_can_be_claimed_again(&make().await).await;
    an_unknown_outcome_is_never_claimed_again(&make().await).await;
    a_live_claim_is_in_progress(&make().await).await;
    an_expired_lease_becomes_unknown_unless_taken_over(&make().await).await;
    expire_leases_turns_only_expired_processing_into_unknown(&make().await).await;
    retries_keep_every_error_and_renew_the_lease(&make().await).await;
    reconciliation_settles_unknown_outcomes(&make().await).await;
    retention_purges_only_terminal_records(&make().await).await;
    concurrent_claims_acquire_once(&make().await).await;
    takeover::a_corrected_request_takes_over_a_failed_record(&make().await).await;
    takeover::a_request_takes_over_a_record_reconciled_as_not_applied(&make().await).await;
    takeover::another_request_is_a_conflict_while_the_first_may_have_acted(&make().await).await;
    text::every_text_round_trips_whatever_its_characters(&make().await).await;
}

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
        .succeed(
            &owner("acme", "k1", attempt),
            r#"{"refund_id":"re_1"}"#,
            T0 + 5,
        )
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
    use crate::idempotency::{canonical_json, request_hash};
    let first: serde_json::Value = serde_json::from_str(
        r#"{"order_id": "ORD-1001", "amount": 500, "note": {"b": 1, "a": 2}}"#,
    )
    .expect("JSON");
    let second: serde_json::Value =
        serde_json::from_str(r#"{ "note":{"a":2,"b":1},"amount":500,"order_id":"ORD-1001" }"#)
            .expect("JSON");
    let (text_1, text_2) = (canonical_json(&first), canonical_json(&second));
    let (hash_1, hash_2) = (
        request_hash("issue_refund", &text_1),
        request_hash("issue_refund", &text_2),
    );
    let mut claim = request("acme", "k1", &hash_1, T0);
    claim.arguments = &text_1;
    let attempt = acquire(store, claim).await;
    store
        .succeed(&owner("acme", "k1", attempt), r#""done""#, T0 + 1)
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
        .succeed(&owner("acme", "k1", a), r#""acme's""#, T0)
        .await
        .unwrap();
    assert_eq!(store.get("globex", "k1").await.unwrap(), None);
    let b = acquire(store, request("globex", "k1", "h1", T0)).await;
    assert_eq!(b, 1);
    store
        .succeed(&owner("globex", "k1", b), r#""globex's""#, T0)
        .await
        .unwrap();
    let acme = store.get("acme", "k1").await.unwrap().unwrap();
    let globex = store.get("globex", "k1").await.unwrap().unwrap();
    assert_eq!(acme.result.as_deref(), Some(r#""acme's""#));
    assert_eq!(globex.result.as_deref(), Some(r#""globex's""#));
    assert_eq!(globex.tenant, "globex");
    // Nor can a worker of one tenant settle the other's record.
    let err = store
        .fail(&owner("globex", "k2", 1), &error(1, "x"), T0)
        .await;
    assert!(matches!(err, Err(StoreError::LostClaim { .. })), "{err:?}");
}

/// A worker that lost its claim (taken over after its lease expired) changes nothing.
pub async fn a_stale_attempt_cannot_overwrite(store: &dyn OperationStore) {
    let first = acquire(store, request("acme", "k1", "h1", T0)).await;
    let mut takeover = request("acme", "k1", "h1", T0 + 31_000);
    takeover.takeover = true;
    let second = acquire(store, takeover).await;
    assert_eq!((first, second), (1, 2));
    let stale = owner("acme", "k1", first);
    for result in [
        store.succeed(&stale, r#""stale""#, T0 + 32_000).await,
        store.fail(&stale, &error(1, "x"), T0 + 32_000).await,
        store
            .mark_unknown(&stale, &error(1, "x"), T0 + 32_000)
            .await,
        store
            .record_retry(&stale, &error(1, "x"), T0 + 99_000)
            .await,
    ] {
        assert!(
            matches!(result, Err(StoreError::LostClaim { attempt: 1, .. })),
            "{result:?}"
        );
    }
    let record = store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Processing);
    assert_eq!(record.attempt, 2);
    assert!(record.result.is_none() && record.errors.is_empty());
    store
        .succeed(&owner("acme", "k1", 2), r#""fresh""#, T0 + 33_000)
        .await
        .unwrap();
    // Once settled, even the owner's attempt cannot write again.
    let again = store
        .fail(&owner("acme", "k1", 2), &error(2, "x"), T0 + 34_000)
        .await;
    assert!(matches!(again, Err(StoreError::LostClaim { .. })));
    let record = store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(record.result.as_deref(), Some(r#""fresh""#));
}

/// `failed` means not applied: the next claim takes it again, keeping the earlier errors.
pub async fn failed_can_be_claimed_again(store: &dyn OperationStore) {
    let first = acquire(store, request("acme", "k1", "h1", T0)).await;
    store
        .fail(
            &owner("acme", "k1", first),
            &error(1, "retry_budget_exhausted"),
            T0 + 1,
        )
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
        .mark_unknown(
            &owner("acme", "k1", attempt),
            &error(1, "outcome_unknown"),
            T0 + 1,
        )
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

/// `expire_leases` moves only expired `processing` records.
pub async fn expire_leases_turns_only_expired_processing_into_unknown(store: &dyn OperationStore) {
    acquire(store, request("acme", "old", "h1", T0)).await;
    acquire(store, request("globex", "old", "h1", T0)).await;
    acquire(store, request("acme", "live", "h1", T0 + 20_000)).await;
    let done = acquire(store, request("acme", "done", "h1", T0)).await;
    store
        .succeed(&owner("acme", "done", done), "1", T0)
        .await
        .unwrap();
    assert_eq!(store.expire_leases(T0 + 40_000).await.unwrap(), 2);
    let state = |tenant: &'static str, key: &'static str| async move {
        store.get(tenant, key).await.unwrap().unwrap().state
    };
    assert_eq!(state("acme", "old").await, OperationState::OutcomeUnknown);
    assert_eq!(state("globex", "old").await, OperationState::OutcomeUnknown);
    assert_eq!(state("acme", "live").await, OperationState::Processing);
    assert_eq!(state("acme", "done").await, OperationState::Succeeded);
    assert_eq!(store.expire_leases(T0 + 40_000).await.unwrap(), 0);
}

/// A retried attempt keeps its error and renews the lease; the outcome keeps them all.
pub async fn retries_keep_every_error_and_renew_the_lease(store: &dyn OperationStore) {
    let attempt = acquire(store, request("acme", "k1", "h1", T0)).await;
    let me = owner("acme", "k1", attempt);
    store
        .record_retry(&me, &error(1, "unavailable"), T0 + 45_000)
        .await
        .unwrap();
    store
        .record_retry(&me, &error(2, "unavailable"), T0 + 50_000)
        .await
        .unwrap();
    let record = store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Processing);
    assert_eq!(record.lease_until_ms, T0 + 50_000);
    store.succeed(&me, "true", T0 + 2).await.unwrap();
    let record = store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(
        record.errors,
        vec![error(1, "unavailable"), error(2, "unavailable")]
    );
    assert_eq!(record.result.as_deref(), Some("true"));
}

/// The reconciler's three answers, and nothing for a record that is not unknown.
pub async fn reconciliation_settles_unknown_outcomes(store: &dyn OperationStore) {
    for (index, key) in ["a", "b", "c"].into_iter().enumerate() {
        let attempt = acquire(store, request("acme", key, "h1", T0)).await;
        store
            .mark_unknown(
                &owner("acme", key, attempt),
                &error(1, "outcome_unknown"),
                T0 + index as i64,
            )
            .await
            .unwrap();
    }
    let other = acquire(store, request("globex", "d", "h1", T0)).await;
    store
        .mark_unknown(
            &owner("globex", "d", other),
            &error(1, "outcome_unknown"),
            T0 + 3,
        )
        .await
        .unwrap();
    let listed: Vec<_> = store
        .list_unknown(10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.tenant, r.key))
        .collect();
    assert_eq!(
        listed,
        [("acme", "a"), ("acme", "b"), ("acme", "c"), ("globex", "d")]
            .map(|(t, k)| (t.to_owned(), k.to_owned()))
    );
    assert_eq!(store.list_unknown(2).await.unwrap().len(), 2);

    let applied = store
        .resolve(
            "acme",
            "a",
            Resolution::Applied(r#"{"refund_id":"re_9"}"#),
            T0 + 10,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(applied.state, OperationState::Succeeded);
    assert_eq!(applied.result.as_deref(), Some(r#"{"refund_id":"re_9"}"#));
    let not_applied = store
        .resolve("acme", "b", Resolution::NotApplied, T0 + 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(not_applied.state, OperationState::Failed);
    assert_eq!(
        acquire(store, request("acme", "b", "h1", T0 + 11)).await,
        2,
        "not applied may run again"
    );
    let unknown = store
        .resolve("acme", "c", Resolution::StillUnknown, T0 + 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (unknown.state, unknown.reconcile_tries),
        (OperationState::OutcomeUnknown, 1)
    );
    let unknown = store
        .resolve("acme", "c", Resolution::StillUnknown, T0 + 20)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(unknown.reconcile_tries, 2);
    // Settled already, or never there: nothing to do.
    assert_eq!(
        store
            .resolve("acme", "a", Resolution::NotApplied, T0 + 30)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .resolve("acme", "zz", Resolution::NotApplied, T0 + 30)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .resolve("globex", "a", Resolution::NotApplied, T0 + 30)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.get("acme", "a").await.unwrap().unwrap().state,
        OperationState::Succeeded
    );
}

/// Retention deletes only old `succeeded` and `failed` records.
pub async fn retention_purges_only_terminal_records(store: &dyn OperationStore) {
    let settle = |key: &'static str, state: OperationState, at: i64| async move {
        let attempt = acquire(store, request("acme", key, "h1", at)).await;
        let me = owner("acme", key, attempt);
        match state {
            OperationState::Succeeded => store.succeed(&me, "1", at).await.unwrap(),
            OperationState::Failed => store.fail(&me, &error(1, "x"), at).await.unwrap(),
            OperationState::OutcomeUnknown => {
                store.mark_unknown(&me, &error(1, "x"), at).await.unwrap()
            }
            _ => {}
        }
    };
    settle("old-succeeded", OperationState::Succeeded, T0).await;
    settle("old-failed", OperationState::Failed, T0).await;
    settle("old-unknown", OperationState::OutcomeUnknown, T0).await;
    settle("old-processing", OperationState::Processing, T0).await;
    settle("new-succeeded", OperationState::Succeeded, T0 + 100_000).await;
    assert_eq!(store.purge(T0 + 50_000).await.unwrap(), 2);
    for (key, kept) in [
        ("old-succeeded", false),
        ("old-failed", false),
        ("old-unknown", true),
        ("old-processing", true),
        ("new-succeeded", true),
    ] {
        assert_eq!(
            store.get("acme", key).await.unwrap().is_some(),
            kept,
            "{key}"
        );
    }
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
