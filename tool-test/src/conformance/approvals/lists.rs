//! Approvals as the runner and the operator read them: the approved operations not yet run, an
//! approved operation rejected by its checks before it runs, and the lists of approvals and
//! operations by filter.

use toolgate_core::store::{
    ApprovalQuery, ApprovalRecord, ApprovalStatus, AuditEntry, ClaimedRejection, Decision,
    OperationQuery, OperationState, OperationStore, SYSTEM_DECIDER, StoreError, Success, Verdict,
};

use super::{ask, human, ids, record, stored};
use crate::conformance::fixture::{
    T0, acquire, approval, approval_of, approver, decide, entry, owner, request,
};

/// `list_approved` lists the approved approvals whose operation has not run yet, of every
/// tenant, oldest first, at most the limit.
pub async fn list_approved_lists_only_approved_operations_not_yet_run(store: &dyn OperationStore) {
    let manager = approver("acme", "manager");
    for (id, tenant, key, at) in [
        ("apr_1", "acme", "k1", T0),
        ("apr_2", "acme", "k2", T0 + 1),
        ("apr_3", "acme", "k3", T0 + 2),
        ("apr_4", "acme", "k4", T0 + 3),
        ("apr_5", "globex", "k5", T0 + 4),
        ("apr_6", "acme", "k6", T0 + 5),
    ] {
        ask(store, &approval(id, tenant, key, "h1", at)).await;
    }
    for id in ["apr_2", "apr_3", "apr_6"] {
        decide(store, id, &manager, Verdict::Approve, T0 + 10).await;
    }
    decide(
        store,
        "apr_5",
        &approver("globex", "manager"),
        Verdict::Approve,
        T0 + 10,
    )
    .await;
    decide(store, "apr_4", &manager, Verdict::Reject, T0 + 10).await;
    assert_eq!(
        acquire(store, request("acme", "k3", "h1", T0 + 20)).await,
        1
    );

    let listed = store.list_approved(10).await.unwrap();
    assert_eq!(ids(&listed), ["apr_2", "apr_5", "apr_6"]);
    for approval in &listed {
        assert_eq!(*approval, stored(store, &approval.id).await);
    }
    assert_eq!(
        ids(&store.list_approved(2).await.unwrap()),
        ["apr_2", "apr_5"]
    );
    assert_eq!(
        acquire(store, request("acme", "k2", "h1", T0 + 30)).await,
        1
    );
    assert_eq!(
        ids(&store.list_approved(10).await.unwrap()),
        ["apr_5", "apr_6"]
    );
}

/// An approved operation that failed its revalidation is rejected by its claim's owner: the
/// record `rejected`, the approval `rejected` with the decision after the approver's. A stale
/// attempt, a second rejection, a record without approval or of another tenant: `LostClaim`, and
/// nothing changes.
pub async fn reject_claimed_rejects_an_approved_operation_before_it_runs(
    store: &dyn OperationStore,
) {
    ask(store, &approval("apr_1", "acme", "k1", "h1", T0)).await;
    decide(
        store,
        "apr_1",
        &approver("acme", "manager"),
        Verdict::Approve,
        T0 + 10,
    )
    .await;
    assert_eq!(
        acquire(store, request("acme", "k1", "h1", T0 + 20)).await,
        1
    );
    let revalidation = Decision {
        verdict: Verdict::Reject,
        by: SYSTEM_DECIDER.into(),
        issuer: None,
        at_ms: T0 + 30,
        reason: "the order has 0.00 left to refund".into(),
    };
    let lost = |answer: Result<ApprovalRecord, StoreError>, key: &str, attempt: u32| match answer {
        Err(StoreError::LostClaim {
            key: lost_key,
            attempt: lost_attempt,
        }) => assert_eq!((lost_key.as_str(), lost_attempt), (key, attempt)),
        other => panic!("expected the claim on {key} to be lost, got {other:?}"),
    };
    let before = record(store, "acme", "k1").await;
    lost(
        store
            .reject_claimed(ClaimedRejection {
                owner: &owner("acme", "k1", 2),
                decision: &revalidation,
                now_ms: T0 + 30,
            })
            .await,
        "k1",
        2,
    );
    assert_eq!(record(store, "acme", "k1").await, before);
    assert_eq!(
        stored(store, "apr_1").await.status,
        ApprovalStatus::Approved
    );

    let rejected = store
        .reject_claimed(ClaimedRejection {
            owner: &owner("acme", "k1", 1),
            decision: &revalidation,
            now_ms: T0 + 30,
        })
        .await
        .unwrap();
    assert_eq!(rejected.status, ApprovalStatus::Rejected);
    assert_eq!(
        rejected.decisions,
        vec![
            human(Verdict::Approve, "manager", T0 + 10),
            revalidation.clone()
        ]
    );
    assert_eq!(stored(store, "apr_1").await, rejected);
    let after = record(store, "acme", "k1").await;
    assert_eq!(after.state, OperationState::Rejected);
    assert_eq!(after.attempt, 1);
    assert_eq!(after.updated_ms, T0 + 30);
    lost(
        store
            .reject_claimed(ClaimedRejection {
                owner: &owner("acme", "k1", 1),
                decision: &revalidation,
                now_ms: T0 + 40,
            })
            .await,
        "k1",
        1,
    );
    assert!(matches!(
        store
            .succeed(Success {
                owner: &owner("acme", "k1", 1),
                result: "{}",
                now_ms: T0 + 40,
                audit: None
            })
            .await,
        Err(StoreError::LostClaim { .. })
    ));
    assert_eq!(
        approval_of(store, request("acme", "k1", "h1", T0 + 50)).await,
        rejected
    );

    assert_eq!(acquire(store, request("acme", "k2", "h1", T0)).await, 1);
    lost(
        store
            .reject_claimed(ClaimedRejection {
                owner: &owner("acme", "k2", 1),
                decision: &revalidation,
                now_ms: T0 + 30,
            })
            .await,
        "k2",
        1,
    );
    assert_eq!(
        record(store, "acme", "k2").await.state,
        OperationState::Processing
    );
    lost(
        store
            .reject_claimed(ClaimedRejection {
                owner: &owner("globex", "k1", 1),
                decision: &revalidation,
                now_ms: T0 + 30,
            })
            .await,
        "k1",
        1,
    );
}

/// `list_approvals` and `list_operations` admit by tenant, status or state, and (operations) by
/// the keys a run's audit records name; oldest first, ties by id (approvals) or by tenant and
/// key (operations); at most the limit.
pub async fn approvals_and_operations_are_listed_by_filter_in_order(store: &dyn OperationStore) {
    assert_eq!(acquire(store, request("acme", "p1", "h1", T0)).await, 1);
    assert_eq!(acquire(store, request("globex", "a0", "h1", T0)).await, 1);
    for (id, tenant, key, at) in [
        ("apr_b", "acme", "k1", T0 + 2),
        ("apr_a", "acme", "k2", T0 + 2),
        ("apr_c", "globex", "k3", T0 + 1),
        ("apr_d", "acme", "k4", T0 + 3),
    ] {
        ask(store, &approval(id, tenant, key, "h1", at)).await;
    }
    decide(
        store,
        "apr_d",
        &approver("acme", "manager"),
        Verdict::Reject,
        T0 + 10,
    )
    .await;
    let done = acquire(store, request("globex", "s1", "h1", T0 + 4)).await;
    store
        .succeed(Success {
            owner: &owner("globex", "s1", done),
            result: "{}",
            now_ms: T0 + 5,
            audit: None,
        })
        .await
        .unwrap();

    let approvals = |tenant, status, limit| async move {
        let listed = store
            .list_approvals(ApprovalQuery {
                tenant,
                status,
                limit,
            })
            .await
            .unwrap();
        for approval in &listed {
            assert_eq!(*approval, stored(store, &approval.id).await);
        }
        listed.into_iter().map(|a| a.id).collect::<Vec<_>>()
    };
    assert_eq!(
        approvals(None, None, 0).await,
        ["apr_c", "apr_a", "apr_b", "apr_d"]
    );
    assert_eq!(
        approvals(Some("acme"), None, 0).await,
        ["apr_a", "apr_b", "apr_d"]
    );
    assert_eq!(
        approvals(None, Some(ApprovalStatus::Pending), 0).await,
        ["apr_c", "apr_a", "apr_b"]
    );
    assert_eq!(
        approvals(Some("acme"), Some(ApprovalStatus::Rejected), 0).await,
        ["apr_d"]
    );
    assert_eq!(approvals(None, None, 2).await, ["apr_c", "apr_a"]);
    assert_eq!(
        approvals(Some("initech"), None, 0).await,
        Vec::<String>::new()
    );
    assert_eq!(
        approvals(None, Some(ApprovalStatus::Approved), 0).await,
        Vec::<String>::new()
    );

    let touched: [(&str, &str, Option<&str>); 6] = [
        ("acme", "run-7", Some("k2")),
        ("acme", "run-7", Some("p1")),
        ("acme", "run-7", None),
        ("acme", "run-7", Some("k3")),
        ("acme", "run-8", Some("k1")),
        ("globex", "run-7", Some("s1")),
    ];
    for (tenant, run, key) in touched {
        let audited: AuditEntry = entry(tenant, run, "call_1", key, T0 + 6);
        store.append_audit(&audited).await.unwrap();
    }
    let operations = |tenant, state, run_id, limit| async move {
        let listed = store
            .list_operations(OperationQuery {
                tenant,
                state,
                run_id,
                limit,
            })
            .await
            .unwrap();
        for operation in &listed {
            assert_eq!(
                *operation,
                record(store, &operation.tenant, &operation.key).await
            );
        }
        listed
            .into_iter()
            .map(|r| format!("{}/{}", r.tenant, r.key))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        operations(None, None, None, 0).await,
        [
            "acme/p1",
            "globex/a0",
            "globex/k3",
            "acme/k1",
            "acme/k2",
            "acme/k4",
            "globex/s1"
        ]
    );
    assert_eq!(
        operations(None, Some(OperationState::AwaitingApproval), None, 0).await,
        ["globex/k3", "acme/k1", "acme/k2"]
    );
    assert_eq!(
        operations(Some("globex"), None, None, 0).await,
        ["globex/a0", "globex/k3", "globex/s1"]
    );
    assert_eq!(
        operations(None, Some(OperationState::Processing), None, 0).await,
        ["acme/p1", "globex/a0"]
    );
    assert_eq!(
        operations(None, Some(OperationState::Rejected), None, 0).await,
        ["acme/k4"]
    );
    assert_eq!(
        operations(None, None, None, 3).await,
        ["acme/p1", "globex/a0", "globex/k3"]
    );
    assert_eq!(
        operations(None, None, Some("run-7"), 0).await,
        ["acme/p1", "acme/k2", "globex/s1"]
    );
    assert_eq!(
        operations(Some("acme"), None, Some("run-7"), 0).await,
        ["acme/p1", "acme/k2"]
    );
    assert_eq!(
        operations(None, Some(OperationState::Processing), Some("run-7"), 0).await,
        ["acme/p1"]
    );
    assert_eq!(
        operations(None, None, Some("run-9"), 0).await,
        Vec::<String>::new()
    );
}
