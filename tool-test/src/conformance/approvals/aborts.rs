//! Approvals of an aborted run: the abort rejects, in its own transaction, every approval of the
//! run that has not run (pending, or approved with its operation still waiting) as
//! `run_aborted`, and such an approval is never decided again nor run.

use toolgate_core::ErrorKind;
use toolgate_core::run::RunAborted;
use toolgate_core::store::{
    AbortReport, AbortRequest, ApprovalRecord, ApprovalStatus, Claim, Decided, OperationState,
    OperationStore, Refusal, RunKey, Verdict,
};

use super::{ask, decision, ids, record, stored};
use crate::conformance::fixture::{T0, acquire, approval, approver, awaiting, decide};

/// Aborts `run_id` of `tenant` at `now_ms`.
async fn abort(
    store: &dyn OperationStore,
    tenant: &str,
    run_id: &str,
    why: &RunAborted,
    now_ms: i64,
) -> AbortReport {
    store
        .abort_run(AbortRequest {
            run: RunKey { tenant, run_id },
            abort: why,
            now_ms,
        })
        .await
        .expect("abort a run")
}

/// `abort_run` rejects the run's pending approvals and its approved ones whose operation has
/// not started, as `run_aborted` at the abort's time, with their operations; it leaves the
/// approvals of other runs and tenants, one already running and one already rejected. Such an
/// approval is refused to an approver ([`Refusal::RunAborted`]) and answered as rejected to the
/// same claim again. Every abort does it, so a second abort rejects an approval asked since.
pub async fn aborting_a_run_rejects_its_approvals_that_have_not_run(store: &dyn OperationStore) {
    let manager = approver("acme", "manager");
    let in_run = |id: &str, tenant: &str, key: &str, run_id: &str, at: i64| ApprovalRecord {
        run_id: run_id.into(),
        ..approval(id, tenant, key, "h1", at)
    };
    for asked in [
        in_run("apr_1", "acme", "k1", "run-1", T0),
        in_run("apr_2", "acme", "k2", "run-1", T0 + 1),
        in_run("apr_3", "acme", "k3", "run-1", T0 + 2),
        in_run("apr_4", "acme", "k4", "run-1", T0 + 3),
        in_run("apr_5", "acme", "k5", "run-2", T0 + 4),
        in_run("apr_6", "globex", "k6", "run-1", T0 + 5),
    ] {
        ask(store, &asked).await;
    }
    decide(store, "apr_2", &manager, Verdict::Approve, T0 + 10).await;
    decide(store, "apr_3", &manager, Verdict::Approve, T0 + 10).await;
    decide(store, "apr_4", &manager, Verdict::Reject, T0 + 10).await;
    // apr_3's operation starts: it is no longer the abort's to stop.
    let running = stored(store, "apr_3").await;
    let attempt = acquire(store, awaiting(&running, T0 + 11)).await;
    assert_eq!(attempt, 1);

    let first = RunAborted {
        kind: ErrorKind::PermissionDenied,
        reason: "close_account needs \"accounts:close\"".into(),
    };
    let aborted = abort(store, "acme", "run-1", &first, T0 + 20).await;
    assert_eq!(aborted.abort, first);
    assert_eq!(ids(&aborted.rejected), ["apr_1", "apr_2"], "oldest first");
    for (id, key) in [("apr_1", "k1"), ("apr_2", "k2")] {
        let rejected = stored(store, id).await;
        assert_eq!(rejected.status, ApprovalStatus::Rejected, "{id}");
        assert_eq!(
            rejected.last_decision(),
            Some(&ApprovalRecord::run_aborted(T0 + 20)),
            "{id}"
        );
        assert!(rejected.is_run_aborted(), "{id}");
        assert!(aborted.rejected.contains(&rejected), "answered as stored");
        assert_eq!(
            record(store, "acme", key).await.state,
            OperationState::Rejected,
            "{id}"
        );
    }
    assert_eq!(
        record(store, "acme", "k3").await.state,
        OperationState::Processing,
        "an approved operation that started is left to finish"
    );
    assert_eq!(
        stored(store, "apr_3").await.status,
        ApprovalStatus::Approved
    );
    let rejected_by_manager = stored(store, "apr_4").await;
    assert_eq!(rejected_by_manager.decisions.len(), 1, "decided once");
    assert!(!rejected_by_manager.is_run_aborted());
    for id in ["apr_5", "apr_6"] {
        assert_eq!(
            stored(store, id).await.status,
            ApprovalStatus::Pending,
            "{id}: another run's, or another tenant's run of the same id"
        );
    }
    assert!(
        ids(&store.list_approved(0).await.expect("list approved")).is_empty(),
        "nothing left for the runner"
    );

    // Never decided again, whatever the verdict.
    for verdict in [Verdict::Approve, Verdict::Reject] {
        match decision(store, "apr_1", &manager, verdict, T0 + 21).await {
            Decided::Refused {
                refusal: Refusal::RunAborted,
                approval: Some(approval),
            } => assert_eq!(approval, stored(store, "apr_1").await),
            other => panic!("{verdict:?} on apr_1 after the abort: {other:?}"),
        }
    }
    // The same claim again reads the rejection.
    let asked = stored(store, "apr_1").await;
    match store.claim(awaiting(&asked, T0 + 22)).await.expect("claim") {
        Claim::Approval(answered) => assert!(answered.is_run_aborted(), "{answered:?}"),
        other => panic!("the same claim after the abort: {other:?}"),
    }

    // The first abort stands; a later one rejects what was asked since, and only that.
    ask(store, &in_run("apr_7", "acme", "k7", "run-1", T0 + 30)).await;
    let second = RunAborted {
        kind: ErrorKind::RunBudgetExhausted,
        reason: "the run has had 50 turns".into(),
    };
    let again = abort(store, "acme", "run-1", &second, T0 + 40).await;
    assert_eq!(again.abort, first);
    assert_eq!(ids(&again.rejected), ["apr_7"]);
    let nothing_left = abort(store, "acme", "run-1", &second, T0 + 50).await;
    assert!(nothing_left.rejected.is_empty());
}
