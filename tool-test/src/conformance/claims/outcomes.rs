//! Recording what became of a claimed attempt: only the attempt that holds the claim may, and a
//! retried attempt keeps its error.
use toolgate_core::store::{OperationState, OperationStore, StoreError};

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
            .succeed(&stale, r#""stale""#, T0 + 32_000, None)
            .await
            .map(drop),
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
        .succeed(&owner("acme", "k1", 2), r#""fresh""#, T0 + 33_000, None)
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
    store.succeed(&me, "true", T0 + 2, None).await.unwrap();
    let record = store.get("acme", "k1").await.unwrap().unwrap();
    assert_eq!(
        record.errors,
        vec![error(1, "unavailable"), error(2, "unavailable")]
    );
    assert_eq!(record.result.as_deref(), Some("true"));
}
