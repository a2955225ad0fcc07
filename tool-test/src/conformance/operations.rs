//! The requests of the reconciler and of retention, across records: expiring dead leases,
//! listing and settling unknown outcomes, purging old terminal records.
use toolgate_core::store::{
    AttemptFailure, OperationState, OperationStore, Resolution, ResolveRequest, Success,
};

use super::fixture::{T0, acquire, error, owner, request};

/// `expire_leases` moves only expired `processing` records.
pub async fn expire_leases_turns_only_expired_processing_into_unknown(store: &dyn OperationStore) {
    acquire(store, request("acme", "old", "h1", T0)).await;
    acquire(store, request("globex", "old", "h1", T0)).await;
    acquire(store, request("acme", "live", "h1", T0 + 20_000)).await;
    let done = acquire(store, request("acme", "done", "h1", T0)).await;
    store
        .succeed(Success {
            owner: &owner("acme", "done", done),
            result: "1",
            now_ms: T0,
            audit: None,
        })
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

/// The reconciler's three answers, and nothing for a record that is not unknown.
pub async fn reconciliation_settles_unknown_outcomes(store: &dyn OperationStore) {
    for (index, key) in ["a", "b", "c"].into_iter().enumerate() {
        let attempt = acquire(store, request("acme", key, "h1", T0)).await;
        store
            .mark_unknown(AttemptFailure {
                owner: &owner("acme", key, attempt),
                error: &error(1, "outcome_unknown"),
                now_ms: T0 + index as i64,
            })
            .await
            .unwrap();
    }
    let other = acquire(store, request("globex", "d", "h1", T0)).await;
    store
        .mark_unknown(AttemptFailure {
            owner: &owner("globex", "d", other),
            error: &error(1, "outcome_unknown"),
            now_ms: T0 + 3,
        })
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
        .resolve(ResolveRequest {
            tenant: "acme",
            key: "a",
            resolution: Resolution::Applied(r#"{"refund_id":"re_9"}"#),
            now_ms: T0 + 10,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(applied.state, OperationState::Succeeded);
    assert_eq!(applied.result.as_deref(), Some(r#"{"refund_id":"re_9"}"#));
    let not_applied = store
        .resolve(ResolveRequest {
            tenant: "acme",
            key: "b",
            resolution: Resolution::NotApplied,
            now_ms: T0 + 10,
        })
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
        .resolve(ResolveRequest {
            tenant: "acme",
            key: "c",
            resolution: Resolution::StillUnknown,
            now_ms: T0 + 10,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (unknown.state, unknown.reconcile_tries),
        (OperationState::OutcomeUnknown, 1)
    );
    let unknown = store
        .resolve(ResolveRequest {
            tenant: "acme",
            key: "c",
            resolution: Resolution::StillUnknown,
            now_ms: T0 + 20,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(unknown.reconcile_tries, 2);
    // Settled already, or never there: nothing to do.
    assert_eq!(
        store
            .resolve(ResolveRequest {
                tenant: "acme",
                key: "a",
                resolution: Resolution::NotApplied,
                now_ms: T0 + 30
            })
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .resolve(ResolveRequest {
                tenant: "acme",
                key: "zz",
                resolution: Resolution::NotApplied,
                now_ms: T0 + 30
            })
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .resolve(ResolveRequest {
                tenant: "globex",
                key: "a",
                resolution: Resolution::NotApplied,
                now_ms: T0 + 30
            })
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
            OperationState::Succeeded => {
                store
                    .succeed(Success {
                        owner: &me,
                        result: "1",
                        now_ms: at,
                        audit: None,
                    })
                    .await
                    .unwrap();
            }
            OperationState::Failed => store
                .fail(AttemptFailure {
                    owner: &me,
                    error: &error(1, "x"),
                    now_ms: at,
                })
                .await
                .unwrap(),
            OperationState::OutcomeUnknown => store
                .mark_unknown(AttemptFailure {
                    owner: &me,
                    error: &error(1, "x"),
                    now_ms: at,
                })
                .await
                .unwrap(),
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
