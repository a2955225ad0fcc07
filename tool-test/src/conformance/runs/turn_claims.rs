//! A write's claim that begins its turn (`begin_turn_and_claim`): the turn is counted as
//! `begin_turn` counts it, and the key is claimed exactly when the grant lets the write claim
//! ([`grant_lets_claim`]); a refused turn claims nothing.

use toolgate_core::ErrorKind;
use toolgate_core::RunLimits;
use toolgate_core::run::RunAborted;
use toolgate_core::store::FailureNote;
use toolgate_core::store::{
    AbortRequest, Admission, Claim, ClaimRequest, FailedCall, OperationState, OperationStore,
    RunKey, TurnClaim, TurnGrant, TurnRequest, grant_lets_claim,
};

use crate::conformance::fixture::{T0, approval, request};

/// The run `run-1` of `acme`.
const RUN: RunKey<'static> = RunKey {
    tenant: "acme",
    run_id: "run-1",
};

/// The refund of the fixture's claims, one call in a turn of its own.
const TOOLS: &[(&str, u32)] = &[("issue_refund", 1)];

/// The claim of `key` (request `hash`) beginning its turn under `limits` at `now_ms`.
async fn turn_claim(
    store: &dyn OperationStore,
    key: &str,
    hash: &str,
    limits: RunLimits,
    now_ms: i64,
) -> TurnClaim {
    turn_claim_of(store, request("acme", key, hash, now_ms), limits).await
}

async fn turn_claim_of(
    store: &dyn OperationStore,
    claim: ClaimRequest<'_>,
    limits: RunLimits,
) -> TurnClaim {
    let turn = TurnRequest {
        run: RUN,
        tools: TOOLS,
        limits,
        now_ms: claim.now_ms,
    };
    let answered = store
        .begin_turn_and_claim(turn, claim)
        .await
        .expect("begin a turn and claim");
    assert_eq!(
        answered.claim.is_some(),
        grant_lets_claim(&answered.grant, &claim),
        "a key is claimed exactly when the grant lets the write claim: {answered:?}"
    );
    answered
}

fn admission(step: u32, granted: u32, failed: Vec<FailedCall>) -> TurnGrant {
    TurnGrant::Admitted(Admission {
        step,
        granted: [granted].into(),
        failed,
    })
}

/// The turn is counted as `begin_turn` counts one, and the key claimed; the same key in the next
/// turn is counted too and finds its record.
pub async fn a_claim_that_begins_its_turn_counts_it_and_claims_the_key(store: &dyn OperationStore) {
    let limits = RunLimits::DEFAULT;
    let first = turn_claim(store, "k1", "h1", limits, T0).await;
    assert_eq!(first.grant, admission(1, 1, vec![]));
    assert_eq!(
        first.claim,
        Some(Claim::Acquired {
            attempt: 1,
            approved: None
        })
    );
    let record = store.get("acme", "k1").await.unwrap().expect("claimed");
    assert_eq!(
        (record.state, record.attempt),
        (OperationState::Processing, 1)
    );
    let run = store.run(RUN).await.unwrap().expect("the run is counted");
    assert_eq!((run.steps, run.tool_calls), (1, 1));
    assert_eq!(run.attempts.get("issue_refund"), Some(&1));

    let again = turn_claim(store, "k1", "h1", limits, T0 + 1).await;
    assert_eq!(again.grant, admission(2, 1, vec![]));
    match again.claim {
        Some(Claim::Existing(found)) => assert_eq!(found.state, OperationState::Processing),
        other => panic!("expected the record in progress, got {other:?}"),
    }
    let run = store.run(RUN).await.unwrap().unwrap();
    assert_eq!((run.steps, run.tool_calls), (2, 2));
}

/// An aborted run, the step limit, the call limit, a spent retry budget and a repeated request
/// each refuse the claim: no record is written, and the turn is counted as `begin_turn` counts
/// it.
pub async fn a_turn_that_does_not_let_the_write_claim_claims_nothing(store: &dyn OperationStore) {
    let step_limit = RunLimits::DEFAULT.max_steps(1);
    assert_eq!(
        turn_claim(store, "k1", "h1", step_limit, T0).await.grant,
        admission(1, 1, vec![])
    );
    let refused = turn_claim(store, "k2", "h2", step_limit, T0 + 1).await;
    assert_eq!(refused.grant, TurnGrant::StepLimit { max_steps: 1 });
    assert_eq!(store.get("acme", "k2").await.unwrap(), None);
    assert_eq!(store.run(RUN).await.unwrap().unwrap().steps, 1);

    let call_limit = RunLimits::DEFAULT.max_tool_calls(1);
    let refused = turn_claim(store, "k3", "h3", call_limit, T0 + 2).await;
    assert_eq!(
        refused.grant,
        TurnGrant::CallLimit {
            used: 1,
            max_tool_calls: 1
        }
    );
    assert_eq!(store.get("acme", "k3").await.unwrap(), None);
    let run = store.run(RUN).await.unwrap().unwrap();
    assert_eq!(
        (run.steps, run.tool_calls),
        (2, 1),
        "the step counted, no call"
    );

    let budget = RunLimits::DEFAULT.retry_budget(1);
    let refused = turn_claim(store, "k4", "h4", budget, T0 + 3).await;
    assert_eq!(
        refused.grant,
        admission(3, 0, vec![]),
        "the one attempt is spent"
    );
    assert_eq!(store.get("acme", "k4").await.unwrap(), None);

    store
        .note_failure(FailureNote {
            run: RUN,
            tool: "issue_refund",
            request_hash: "h5",
            now_ms: T0 + 4,
        })
        .await
        .unwrap();
    let repeated = turn_claim(store, "k5", "h5", RunLimits::DEFAULT, T0 + 5).await;
    let failed = FailedCall {
        tool: "issue_refund".into(),
        request_hash: "h5".into(),
    };
    assert_eq!(repeated.grant, admission(4, 1, vec![failed]));
    assert_eq!(store.get("acme", "k5").await.unwrap(), None);

    let abort = RunAborted {
        kind: ErrorKind::PermissionDenied,
        reason: "the session lost orders:refund".into(),
    };
    store
        .abort_run(AbortRequest {
            run: RUN,
            abort: &abort,
            now_ms: T0 + 6,
        })
        .await
        .unwrap();
    let refused = turn_claim(store, "k6", "h6", RunLimits::DEFAULT, T0 + 7).await;
    assert_eq!(refused.grant, TurnGrant::Aborted(abort));
    assert_eq!(store.get("acme", "k6").await.unwrap(), None);
    assert_eq!(store.run(RUN).await.unwrap().unwrap().steps, 4);
}

/// A claim over the threshold that begins its turn awaits its approval, as `claim` does.
pub async fn a_claim_that_begins_its_turn_can_ask_for_an_approval(store: &dyn OperationStore) {
    let asked = approval("apr-1", "acme", "k1", "h1", T0);
    let mut claim = request("acme", "k1", "h1", T0);
    claim.approval = Some(&asked);
    let answered = turn_claim_of(store, claim, RunLimits::DEFAULT).await;
    assert_eq!(answered.grant, admission(1, 1, vec![]));
    match answered.claim {
        Some(Claim::Approval(found)) => assert_eq!(found.id, asked.id),
        other => panic!("expected the approval asked for, got {other:?}"),
    }
    let record = store.get("acme", "k1").await.unwrap().expect("stored");
    assert_eq!(record.state, OperationState::AwaitingApproval);
}
