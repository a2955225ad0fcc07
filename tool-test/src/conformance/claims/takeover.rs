//! A `failed` record is taken over by the next request under its key, corrected or not; another
//! request is a conflict only while the first may have acted.

use crate::conformance::fixture::{T0, acquire, error, owner, request};
use toolgate_core::store::{
    AttemptFailure, Claim, OperationState, OperationStore, Resolution, ResolveRequest, Success,
};

/// The arguments a model sends after it corrected them.
const CORRECTED: &str = r#"{"amount":300,"order_id":"ORD-1001"}"#;

/// A corrected request takes a `failed` record over: its hash and arguments replace the old,
/// attempt + 1, the failed attempt's error stays; once it succeeded, the first request again
/// is a conflict that changes nothing.
pub async fn a_corrected_request_takes_over_a_failed_record(store: &dyn OperationStore) {
    let first = acquire(store, request("acme", "k1", "h1", T0)).await;
    store
        .fail(AttemptFailure {
            owner: &owner("acme", "k1", first),
            error: &error(1, "refused"),
            now_ms: T0 + 1,
        })
        .await
        .unwrap();
    let mut corrected = request("acme", "k1", "h2", T0 + 2);
    corrected.arguments = CORRECTED;
    assert_eq!(acquire(store, corrected).await, 2);
    let record = store.get("acme", "k1").await.unwrap().expect("stored");
    assert_eq!(record.state, OperationState::Processing);
    assert_eq!(record.attempt, 2);
    assert_eq!(record.request_hash, "h2");
    assert_eq!(record.arguments, CORRECTED);
    assert_eq!(record.lease_until_ms, T0 + 2 + 30_000);
    assert_eq!(record.errors, vec![error(1, "refused")]);
    store
        .succeed(Success {
            owner: &owner("acme", "k1", 2),
            result: r#"{"refund_id":"re_2"}"#,
            now_ms: T0 + 3,
            audit: None,
        })
        .await
        .unwrap();
    let before = store.get("acme", "k1").await.unwrap();
    assert_eq!(
        store
            .claim(request("acme", "k1", "h1", T0 + 4))
            .await
            .unwrap(),
        Claim::Conflict {
            tool: "issue_refund".into()
        }
    );
    assert_eq!(store.get("acme", "k1").await.unwrap(), before);
}

/// A `failed` record that the reconciler settled (not applied) is taken over the same way.
pub async fn a_request_takes_over_a_record_reconciled_as_not_applied(store: &dyn OperationStore) {
    let first = acquire(store, request("acme", "k1", "h1", T0)).await;
    store
        .mark_unknown(AttemptFailure {
            owner: &owner("acme", "k1", first),
            error: &error(1, "outcome_unknown"),
            now_ms: T0 + 1,
        })
        .await
        .unwrap();
    store
        .resolve(ResolveRequest {
            tenant: "acme",
            key: "k1",
            resolution: Resolution::NotApplied,
            now_ms: T0 + 2,
        })
        .await
        .unwrap()
        .expect("settled");
    let mut corrected = request("acme", "k1", "h2", T0 + 3);
    corrected.arguments = CORRECTED;
    assert_eq!(acquire(store, corrected).await, 2);
    let record = store.get("acme", "k1").await.unwrap().expect("stored");
    assert_eq!(
        (record.request_hash.as_str(), record.arguments.as_str()),
        ("h2", CORRECTED)
    );
}

/// Another request while the first may have acted (`succeeded`, `outcome_unknown`, and
/// `processing`, live or expired) is a conflict, and the record is exactly as it was.
pub async fn another_request_is_a_conflict_while_the_first_may_have_acted(
    store: &dyn OperationStore,
) {
    let succeeded = acquire(store, request("acme", "done", "h1", T0)).await;
    store
        .succeed(Success {
            owner: &owner("acme", "done", succeeded),
            result: "1",
            now_ms: T0 + 1,
            audit: None,
        })
        .await
        .unwrap();
    let unknown = acquire(store, request("acme", "unknown", "h1", T0)).await;
    store
        .mark_unknown(AttemptFailure {
            owner: &owner("acme", "unknown", unknown),
            error: &error(1, "outcome_unknown"),
            now_ms: T0 + 1,
        })
        .await
        .unwrap();
    acquire(store, request("acme", "running", "h1", T0)).await;
    for key in ["done", "unknown", "running"] {
        let before = store.get("acme", key).await.unwrap();
        for now in [T0 + 2, T0 + 3_600_000] {
            let mut other = request("acme", key, "h2", now);
            other.arguments = CORRECTED;
            other.takeover = true;
            assert!(
                matches!(store.claim(other).await.unwrap(), Claim::Conflict { .. }),
                "{key} at {now}"
            );
            assert_eq!(store.get("acme", key).await.unwrap(), before, "{key}");
        }
    }
}
