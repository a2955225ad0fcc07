//! Approvals: a claim over its tool's threshold waits, durably, for a human decision; a decision
//! follows [`ApprovalRecord::decide_step`]; an approved operation runs once; an expired approval
//! is rejected as `expired` whichever way the store learns of it.

pub(super) mod aborts;
pub(super) mod lists;

use futures_util::future::join_all;
use toolgate_core::identity::Operator;
use toolgate_core::store::{
    ApprovalQuery, ApprovalRecord, ApprovalStatus, ApprovalSweep, Claim, DecideRequest, Decided,
    Decision, EXPIRED, OperationRecord, OperationState, OperationStore, Refusal, SYSTEM_DECIDER,
    Success, Verdict,
};

use super::fixture::{
    HOUR, T0, acquire, approval, approval_of, approver, awaiting, decide, owner, request,
};

/// The record of `key` for `tenant`, which must exist.
pub(super) async fn record(store: &dyn OperationStore, tenant: &str, key: &str) -> OperationRecord {
    store
        .get(tenant, key)
        .await
        .expect("read a record")
        .unwrap_or_else(|| panic!("{tenant}/{key} has a record"))
}

/// The stored approval `id`, which must exist.
pub(super) async fn stored(store: &dyn OperationStore, id: &str) -> ApprovalRecord {
    store
        .approval(id)
        .await
        .expect("read an approval")
        .unwrap_or_else(|| panic!("{id} is stored"))
}

/// Stores `asked` through a claim of its request at its creation.
pub(super) async fn ask(store: &dyn OperationStore, asked: &ApprovalRecord) {
    assert_eq!(
        approval_of(store, awaiting(asked, asked.created_ms)).await,
        *asked
    );
}

/// A decision by `approver` at `now_ms` on `id`, as the store answers it.
pub(super) async fn decision(
    store: &dyn OperationStore,
    id: &str,
    approver: &Operator,
    verdict: Verdict,
    now_ms: i64,
) -> Decided {
    store
        .decide(DecideRequest {
            id,
            approver,
            verdict,
            reason: "looks fine",
            now_ms,
        })
        .await
        .expect("decide")
}

/// The decision [`decide`] stores.
pub(super) fn human(verdict: Verdict, by: &str, at_ms: i64) -> Decision {
    Decision {
        verdict,
        by: by.into(),
        issuer: Some(crate::TEST_ISSUER.into()),
        at_ms,
        reason: "checked with the customer".into(),
    }
}

/// The ids of `approvals`, in order.
pub(super) fn ids(approvals: &[ApprovalRecord]) -> Vec<&str> {
    approvals.iter().map(|a| a.id.as_str()).collect()
}

/// A claim with an approval stores the operation `awaiting_approval` (attempt 0, bound to the
/// approval) and the approval as given; a duplicate of the waiting request answers that same
/// approval and stores no second one; other arguments under the key are a conflict that
/// changes nothing; another tenant's key is its own.
pub async fn a_claim_over_the_threshold_awaits_its_approval(store: &dyn OperationStore) {
    let asked = approval("apr_1", "acme", "k1", "h1", T0);
    ask(store, &asked).await;
    let waiting = record(store, "acme", "k1").await;
    assert_eq!(waiting.state, OperationState::AwaitingApproval);
    assert_eq!(waiting.attempt, 0);
    assert_eq!(waiting.approval_id.as_deref(), Some("apr_1"));
    assert_eq!(waiting.request_hash, "h1");
    assert_eq!(waiting.result, None);
    assert_eq!((waiting.created_ms, waiting.updated_ms), (T0, T0));
    assert_eq!(stored(store, "apr_1").await, asked);

    let duplicate = approval("apr_2", "acme", "k1", "h1", T0 + 5);
    assert_eq!(
        approval_of(store, awaiting(&duplicate, T0 + 5)).await,
        asked
    );
    assert_eq!(
        approval_of(store, request("acme", "k1", "h1", T0 + 6)).await,
        asked
    );
    assert_eq!(store.approval("apr_2").await.unwrap(), None);

    let other = approval("apr_3", "acme", "k1", "h2", T0 + 7);
    let conflict = Claim::Conflict {
        tool: "issue_refund".into(),
    };
    assert_eq!(
        store.claim(awaiting(&other, T0 + 7)).await.unwrap(),
        conflict
    );
    assert_eq!(
        store
            .claim(request("acme", "k1", "h2", T0 + 7))
            .await
            .unwrap(),
        conflict
    );
    assert_eq!(store.approval("apr_3").await.unwrap(), None);
    assert_eq!(record(store, "acme", "k1").await, waiting);
    assert_eq!(
        store
            .list_approvals(ApprovalQuery::default())
            .await
            .unwrap(),
        vec![asked.clone()]
    );

    let theirs = approval("apr_4", "globex", "k1", "h1", T0 + 8);
    ask(store, &theirs).await;
    assert_eq!(stored(store, "apr_1").await, asked);
    assert_eq!(stored(store, "apr_4").await, theirs);
}

/// Approved, the operation stays `awaiting_approval` until a claim of its request: of claims
/// made together, exactly one acquires it (attempt 1, with the approval); the others see it
/// `processing`; once it succeeded, every claim answers its result.
pub async fn an_approved_operation_runs_exactly_once(store: &dyn OperationStore) {
    let asked = approval("apr_1", "acme", "k1", "h1", T0);
    ask(store, &asked).await;
    let manager = approver("acme", "manager");
    let approved = decide(store, "apr_1", &manager, Verdict::Approve, T0 + 10).await;
    assert_eq!(approved.status, ApprovalStatus::Approved);
    assert_eq!(
        approved.decisions,
        vec![human(Verdict::Approve, "manager", T0 + 10)]
    );
    assert_eq!(stored(store, "apr_1").await, approved);
    let waiting = record(store, "acme", "k1").await;
    assert_eq!(waiting.state, OperationState::AwaitingApproval);
    assert_eq!(waiting.attempt, 0);

    let again: Vec<_> = (0..4)
        .map(|i| approval(&format!("apr_again_{i}"), "acme", "k1", "h1", T0 + 20))
        .collect();
    let claims = join_all(again.iter().map(|a| store.claim(awaiting(a, T0 + 20)))).await;
    let mut acquired = 0;
    for claim in claims {
        match claim.expect("claim") {
            Claim::Acquired {
                attempt,
                approved: with,
            } => {
                acquired += 1;
                assert_eq!(attempt, 1);
                assert_eq!(with.as_ref(), Some(&approved));
            }
            Claim::Existing(record) => {
                assert_eq!(record.state, OperationState::Processing);
                assert_eq!(record.attempt, 1);
            }
            other => panic!("expected one claim to run the approved operation, got {other:?}"),
        }
    }
    assert_eq!(acquired, 1, "an approved operation runs exactly once");
    for a in &again {
        assert_eq!(store.approval(&a.id).await.unwrap(), None);
    }
    let running = record(store, "acme", "k1").await;
    assert_eq!(running.state, OperationState::Processing);
    assert_eq!(running.attempt, 1);
    assert_eq!(running.lease_until_ms, T0 + 20 + 30_000);
    assert_eq!(running.approval_id.as_deref(), Some("apr_1"));
    assert_eq!(store.list_approved(10).await.unwrap(), vec![]);

    store
        .succeed(Success {
            owner: &owner("acme", "k1", 1),
            result: r#"{"refund_id":"re_1"}"#,
            now_ms: T0 + 30,
            audit: None,
        })
        .await
        .unwrap();
    match store
        .claim(request("acme", "k1", "h1", T0 + 40))
        .await
        .unwrap()
    {
        Claim::Existing(done) => {
            assert_eq!(done.state, OperationState::Succeeded);
            assert_eq!(done.result.as_deref(), Some(r#"{"refund_id":"re_1"}"#));
            assert_eq!(done.attempt, 1);
        }
        other => panic!("expected the stored result, got {other:?}"),
    }
    assert_eq!(stored(store, "apr_1").await, approved);
}

/// Rejected, the approval and its operation are `rejected`; the same request is answered the
/// rejection and stores nothing new; other arguments take the key again: to run, or to wait for
/// an approval of their own (attempt unchanged).
pub async fn a_rejected_approval_answers_its_rejection(store: &dyn OperationStore) {
    let manager = approver("acme", "manager");
    ask(store, &approval("apr_1", "acme", "k1", "h1", T0)).await;
    let rejected = decide(store, "apr_1", &manager, Verdict::Reject, T0 + 10).await;
    assert_eq!(rejected.status, ApprovalStatus::Rejected);
    assert_eq!(
        rejected.decisions,
        vec![human(Verdict::Reject, "manager", T0 + 10)]
    );
    let after = record(store, "acme", "k1").await;
    assert_eq!(after.state, OperationState::Rejected);
    assert_eq!(after.attempt, 0);
    assert_eq!(after.updated_ms, T0 + 10);

    let again = approval("apr_2", "acme", "k1", "h1", T0 + 20);
    assert_eq!(
        approval_of(store, awaiting(&again, T0 + 20)).await,
        rejected
    );
    assert_eq!(
        approval_of(store, request("acme", "k1", "h1", T0 + 20)).await,
        rejected
    );
    assert_eq!(store.approval("apr_2").await.unwrap(), None);
    assert_eq!(record(store, "acme", "k1").await, after);

    assert_eq!(
        store
            .claim(request("acme", "k1", "h2", T0 + 30))
            .await
            .unwrap(),
        Claim::Acquired {
            attempt: 1,
            approved: None
        }
    );
    let taken = record(store, "acme", "k1").await;
    assert_eq!(taken.state, OperationState::Processing);
    assert_eq!(taken.request_hash, "h2");

    ask(store, &approval("apr_3", "acme", "k2", "h1", T0)).await;
    let first = decide(store, "apr_3", &manager, Verdict::Reject, T0 + 10).await;
    let other = approval("apr_4", "acme", "k2", "h2", T0 + 30);
    assert_eq!(approval_of(store, awaiting(&other, T0 + 30)).await, other);
    let waiting = record(store, "acme", "k2").await;
    assert_eq!(waiting.state, OperationState::AwaitingApproval);
    assert_eq!(waiting.attempt, 0);
    assert_eq!(waiting.request_hash, "h2");
    assert_eq!(waiting.approval_id.as_deref(), Some("apr_4"));
    assert_eq!(stored(store, "apr_3").await, first);
    assert_eq!(stored(store, "apr_4").await, other);
}

/// The requester, an approver without the permission and another tenant's approver are
/// refused and change nothing (another tenant does not even learn the approval exists); a
/// decided approval is not decided again.
pub async fn a_decision_is_refused_to_the_requester_a_stranger_and_twice(
    store: &dyn OperationStore,
) {
    let asked = approval("apr_1", "acme", "k1", "h1", T0);
    ask(store, &asked).await;
    let refusals = [
        (
            approver("acme", "agent"),
            "apr_1",
            Verdict::Approve,
            Refusal::SelfDecision,
        ),
        (
            approver("acme", "agent"),
            "apr_1",
            Verdict::Reject,
            Refusal::SelfDecision,
        ),
        (
            crate::operator("acme", "clerk", &["refund:create"]),
            "apr_1",
            Verdict::Approve,
            Refusal::MissingPermission,
        ),
        (
            approver("globex", "manager"),
            "apr_1",
            Verdict::Approve,
            Refusal::NotFound,
        ),
        (
            approver("acme", "manager"),
            "apr_missing",
            Verdict::Approve,
            Refusal::NotFound,
        ),
    ];
    for (who, id, verdict, refusal) in refusals {
        let shown = (refusal != Refusal::NotFound).then(|| asked.clone());
        assert_eq!(
            decision(store, id, &who, verdict, T0 + 10).await,
            Decided::Refused {
                refusal,
                approval: shown
            },
            "{} on {id}",
            who.subject()
        );
    }
    assert_eq!(stored(store, "apr_1").await, asked);
    assert_eq!(
        record(store, "acme", "k1").await.state,
        OperationState::AwaitingApproval
    );

    let approved = decide(
        store,
        "apr_1",
        &approver("acme", "manager"),
        Verdict::Approve,
        T0 + 20,
    )
    .await;
    for verdict in [Verdict::Approve, Verdict::Reject] {
        assert_eq!(
            decision(store, "apr_1", &approver("acme", "lead"), verdict, T0 + 30).await,
            Decided::Refused {
                refusal: Refusal::AlreadyDecided,
                approval: Some(approved.clone())
            }
        );
    }
    assert_eq!(stored(store, "apr_1").await, approved);
}

/// A pending approval past its expiry is rejected as `expired` by `toolgate`, its operation
/// `rejected`: when a decision comes (refused as expired), when its request is claimed again,
/// and by `expire_approvals` (oldest first, at most the limit). A later approval and an approved
/// one are left alone, and an approved one still runs after its expiry.
pub async fn an_expired_approval_is_rejected_as_expired(store: &dyn OperationStore) {
    let manager = approver("acme", "manager");
    for (id, tenant, key, at) in [
        ("apr_1", "acme", "k1", T0),
        ("apr_2", "acme", "k2", T0 + 1),
        ("apr_3", "acme", "k3", T0 + 2),
        ("apr_5", "globex", "k5", T0 + 3),
        ("apr_6", "acme", "k6", T0 + 4),
        ("apr_4", "acme", "k4", T0 + HOUR),
    ] {
        ask(store, &approval(id, tenant, key, "h1", at)).await;
    }
    let approved = decide(store, "apr_6", &manager, Verdict::Approve, T0 + 5).await;
    let expired_at = |at_ms: i64| {
        let expiry = Decision {
            verdict: Verdict::Reject,
            by: SYSTEM_DECIDER.into(),
            issuer: None,
            at_ms,
            reason: EXPIRED.into(),
        };
        (ApprovalStatus::Rejected, vec![expiry])
    };
    let state = |a: &ApprovalRecord| (a.status, a.decisions.clone());

    match decision(store, "apr_1", &manager, Verdict::Approve, T0 + HOUR).await {
        Decided::Refused {
            refusal: Refusal::Expired,
            approval: Some(expired),
        } => assert_eq!(state(&expired), expired_at(T0 + HOUR)),
        other => panic!("expected the decision to be refused as expired, got {other:?}"),
    }
    assert_eq!(state(&stored(store, "apr_1").await), expired_at(T0 + HOUR));
    let rejected = record(store, "acme", "k1").await;
    assert_eq!(rejected.state, OperationState::Rejected);
    assert_eq!(rejected.updated_ms, T0 + HOUR);

    let claimed = approval_of(store, request("acme", "k2", "h1", T0 + HOUR + 1)).await;
    assert_eq!(claimed.id, "apr_2");
    assert_eq!(state(&claimed), expired_at(T0 + HOUR + 1));
    assert_eq!(stored(store, "apr_2").await, claimed);
    assert_eq!(
        record(store, "acme", "k2").await.state,
        OperationState::Rejected
    );

    let now = T0 + HOUR + 10;
    let swept = store
        .expire_approvals(ApprovalSweep {
            now_ms: now,
            limit: 1,
        })
        .await
        .unwrap();
    assert_eq!(ids(&swept), ["apr_3"]);
    let swept_rest = store
        .expire_approvals(ApprovalSweep {
            now_ms: now,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(ids(&swept_rest), ["apr_5"]);
    assert_eq!(
        store
            .expire_approvals(ApprovalSweep {
                now_ms: now,
                limit: 10
            })
            .await
            .unwrap(),
        vec![]
    );
    for (tenant, key, id) in [("acme", "k3", "apr_3"), ("globex", "k5", "apr_5")] {
        assert_eq!(state(&stored(store, id).await), expired_at(now));
        assert_eq!(
            record(store, tenant, key).await.state,
            OperationState::Rejected
        );
    }
    assert_eq!(swept[0], stored(store, "apr_3").await);
    assert_eq!(swept_rest[0], stored(store, "apr_5").await);

    assert_eq!(stored(store, "apr_4").await.status, ApprovalStatus::Pending);
    assert_eq!(
        record(store, "acme", "k4").await.state,
        OperationState::AwaitingApproval
    );
    assert_eq!(stored(store, "apr_6").await, approved);
    assert_eq!(
        decision(store, "apr_1", &manager, Verdict::Approve, now).await,
        Decided::Refused {
            refusal: Refusal::AlreadyDecided,
            approval: Some(stored(store, "apr_1").await)
        }
    );
    assert_eq!(acquire(store, request("acme", "k6", "h1", now)).await, 1);
}
