//! Recording what became of a claimed attempt: only the attempt that holds the claim may, and a
//! retried attempt keeps its error.
use toolgate_core::store::{
    AttemptFailure, OperationState, OperationStore, RetryNote, StoreError, Success,
};

use crate::conformance::fixture::{T0, acquire, error, owner, request};

/// A worker that lost its claim (taken over after its lease expired) changes nothing.
pub async fn a_stale_attempt_cannot_overwrite(store: &dyn OperationStore) {
    let first = acquire(store, request("acme", "k1", "h1", T0)).await;
    let mut takeover = request("acme", "k1", "h1", T0 + 31_000);
    takeover.takeover = true;
    let second = acquire(store, takeover).await;
    assert_eq!((first, second), (1, 2));
    let stale = owner("acme", "k1", first);
    for result in [
        store
            .succeed(Success {
                owner: &stale,
                result: r#""stale""#,
                now_ms: T0 + 32_000,
                audit: None,
            })
            .await
            .map(drop),
        store
            .fail(AttemptFailure {
                owner: &stale,
                error: &error(1, "x"),
                now_ms: T0 + 32_000,
            })
            .await,
        store
            .mark_unknown(AttemptFailure {
                owner: &stale,
                error: &error(1, "x"),
                now_ms: T0 + 32_000,
            })
            .await,
        store
            .record_retry(RetryNote {
                owner: &stale,
                error: &error(1, "x"),
                lease_until_ms: T0 + 99_000,
            })
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
        .succeed(Success {
            owner: &owner("acme", "k1", 2),
            result: r#""fresh""#,
            now_ms: T0 + 33_000,
            audit: None,
        })
        .await
        .unwrap();
    // Once settled, even the owner's attempt cannot write again.
    let again = store
        .fail(AttemptFailure {
            owner: &owner("acme", "k1", 2),
            error: &error(2, "x"),
            now_ms: T0 + 34_000,
        })
        .await;
    assert!(matches!(again, Err(StoreError::LostClaim { .. })));
    let record = store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(record.result.as_deref(), Some(r#""fresh""#));
}

/// A retried attempt keeps its error and renews the lease; the outcome keeps them all.
pub async fn retries_keep_every_error_and_renew_the_lease(store: &dyn OperationStore) {
    let attempt = acquire(store, request("acme", "k1", "h1", T0)).await;
    let me = owner("acme", "k1", attempt);
    store
        .record_retry(RetryNote {
            owner: &me,
            error: &error(1, "unavailable"),
            lease_until_ms: T0 + 45_000,
        })
        .await
        .unwrap();
    store
        .record_retry(RetryNote {
            owner: &me,
            error: &error(2, "unavailable"),
            lease_until_ms: T0 + 50_000,
        })
        .await
        .unwrap();
    let record = store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(record.state, OperationState::Processing);
    assert_eq!(record.lease_until_ms, T0 + 50_000);
    store
        .succeed(Success {
            owner: &me,
            result: "true",
            now_ms: T0 + 2,
            audit: None,
        })
        .await
        .unwrap();
    let record = store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(
        record.errors,
        vec![error(1, "unavailable"), error(2, "unavailable")]
    );
    assert_eq!(record.result.as_deref(), Some("true"));
}
