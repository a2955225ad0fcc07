//! The run ledger: a run's steps, tool calls and attempts against its limits, its failed calls,
//! its abort, and their retention. Each rule checks a store's answers against the rules of
//! [`RunRecord`], which every store follows.

pub(super) mod turn_claims;

use std::collections::{BTreeMap, BTreeSet};

use futures_util::future::{join, join_all};
use toolgate_core::ErrorKind;
use toolgate_core::RunLimits;
use toolgate_core::run::RunAborted;
use toolgate_core::store::{
    AbortRequest, Admission, FailedCall, Grants, OperationStore, RunKey, RunRecord, TurnGrant,
    TurnRequest,
};
use toolgate_core::store::{AttemptCharge, FailureNote};

use super::fixture::T0;

/// The run `run-1` of `tenant`.
fn key(tenant: &str) -> RunKey<'_> {
    RunKey {
        tenant,
        run_id: "run-1",
    }
}

/// A turn of `run` calling `tools`, under `limits`, at `now_ms`.
async fn turn(
    store: &dyn OperationStore,
    run: RunKey<'_>,
    tools: &[(&str, u32)],
    limits: RunLimits,
    now_ms: i64,
) -> TurnGrant {
    store
        .begin_turn(TurnRequest {
            run,
            tools,
            limits,
            now_ms,
        })
        .await
        .expect("begin a turn")
}

/// A turn that must be admitted; answers its admission.
async fn admitted(
    store: &dyn OperationStore,
    run: RunKey<'_>,
    tools: &[(&str, u32)],
    limits: RunLimits,
    now_ms: i64,
) -> Admission {
    match turn(store, run, tools, limits, now_ms).await {
        TurnGrant::Admitted(admission) => admission,
        other => panic!("expected the turn to run, got {other:?}"),
    }
}

/// The stored record of `run`, which must have one.
async fn record(store: &dyn OperationStore, run: RunKey<'_>) -> RunRecord {
    store
        .run(run)
        .await
        .expect("read a run")
        .expect("the run has a record")
}

fn failed(tool: &str, request_hash: &str) -> FailedCall {
    FailedCall {
        tool: tool.into(),
        request_hash: request_hash.into(),
    }
}

fn attempts(of: &[(&str, u32)]) -> BTreeMap<String, u32> {
    of.iter()
        .map(|(tool, attempts)| ((*tool).to_owned(), *attempts))
        .collect()
}

/// Every turn is the run's next step, and every call of it is granted while no limit binds;
/// a run never seen has no record.
pub async fn a_turn_is_the_next_step_and_grants_every_call(store: &dyn OperationStore) {
    let run = key("acme");
    assert_eq!(store.run(run).await.unwrap(), None, "no turn yet");
    let tools = [("get_order", 2), ("issue_refund", 1)];
    let first = admitted(store, run, &tools, RunLimits::DEFAULT, T0).await;
    assert_eq!(
        first,
        Admission {
            step: 1,
            granted: [2, 1].into(),
            failed: vec![],
        }
    );
    let second = admitted(
        store,
        run,
        &[("get_order", 1)],
        RunLimits::UNLIMITED,
        T0 + 1,
    )
    .await;
    assert_eq!((second.step, second.granted), (2, Grants::from([1])));
    let stored = record(store, run).await;
    assert_eq!((stored.steps, stored.tool_calls), (2, 4));
    assert_eq!(
        stored.attempts,
        attempts(&[("get_order", 3), ("issue_refund", 1)])
    );
    assert_eq!(stored.updated_ms, T0 + 1);
}

/// A turn once the run has had `max_steps` turns is refused, and nothing is counted.
pub async fn a_turn_past_the_step_limit_counts_nothing(store: &dyn OperationStore) {
    let run = key("acme");
    let limits = RunLimits::UNLIMITED.max_steps(2).retry_budget(10);
    for step in 1..=2 {
        let admission = admitted(store, run, &[("get_order", 1)], limits, T0 + 1).await;
        assert_eq!(admission.step, step);
    }
    let before = record(store, run).await;
    for now_ms in [T0 + 2, T0 + 3] {
        assert_eq!(
            turn(store, run, &[("get_order", 1)], limits, now_ms).await,
            TurnGrant::StepLimit { max_steps: 2 }
        );
    }
    assert_eq!(record(store, run).await, before, "nothing counted");
}

/// A turn whose calls would pass `max_tool_calls` counts as a step and none of its calls; a
/// smaller turn after it still runs.
pub async fn a_turn_past_the_call_limit_counts_its_step_and_no_call(store: &dyn OperationStore) {
    let run = key("acme");
    let limits = RunLimits::UNLIMITED.max_tool_calls(3);
    admitted(store, run, &[("get_order", 2)], limits, T0).await;
    assert_eq!(
        turn(
            store,
            run,
            &[("get_order", 1), ("issue_refund", 1)],
            limits,
            T0 + 1
        )
        .await,
        TurnGrant::CallLimit {
            used: 2,
            max_tool_calls: 3,
        }
    );
    let stored = record(store, run).await;
    assert_eq!((stored.steps, stored.tool_calls), (2, 2));
    assert_eq!(stored.attempts, attempts(&[("get_order", 2)]), "no attempt");
    assert_eq!(stored.updated_ms, T0 + 1, "the step is written");
    let third = admitted(store, run, &[("issue_refund", 1)], limits, T0 + 2).await;
    assert_eq!((third.step, third.granted), (3, Grants::from([1])));
    assert_eq!(record(store, run).await.tool_calls, 3);
}

/// A tool's retry budget grants its calls until it is spent, the first ones in request order;
/// calls beyond it are still counted as tool calls.
pub async fn the_retry_budget_grants_the_first_calls_in_order(store: &dyn OperationStore) {
    let run = key("acme");
    let limits = RunLimits::UNLIMITED.retry_budget(3);
    let grants = [
        (vec![("issue_refund", 2)], vec![2]),
        (vec![("issue_refund", 2), ("get_order", 1)], vec![1, 1]),
        (vec![("get_order", 3), ("issue_refund", 1)], vec![2, 0]),
        (vec![("get_order", 1)], vec![0]),
    ];
    for (step, (tools, granted)) in (1..).zip(grants) {
        let admission = admitted(store, run, &tools, limits, T0 + i64::from(step)).await;
        assert_eq!(
            (admission.step, &admission.granted),
            (step, &Grants::from(granted))
        );
    }
    let stored = record(store, run).await;
    assert_eq!(stored.tool_calls, 10);
    assert_eq!(
        stored.attempts,
        attempts(&[("get_order", 3), ("issue_refund", 3)])
    );
}

/// `charge_attempt` counts one attempt until the budget is reached, then refuses and counts
/// nothing; without a budget it always counts.
pub async fn charge_attempt_counts_until_the_budget_and_then_nothing(store: &dyn OperationStore) {
    let run = key("acme");
    admitted(store, run, &[("issue_refund", 1)], RunLimits::UNLIMITED, T0).await;
    let charges = [
        (T0 + 1, true),
        (T0 + 2, true),
        (T0 + 3, false),
        (T0 + 4, false),
    ];
    for (now_ms, counted) in charges {
        let charged = store
            .charge_attempt(AttemptCharge {
                run,
                tool: "issue_refund",
                retry_budget: Some(3),
                now_ms,
            })
            .await
            .unwrap();
        assert_eq!(charged, counted, "at {now_ms}");
    }
    let stored = record(store, run).await;
    assert_eq!(stored.attempts, attempts(&[("issue_refund", 3)]));
    assert_eq!(
        stored.updated_ms,
        T0 + 2,
        "a refused attempt writes nothing"
    );
    for now_ms in [T0 + 5, T0 + 6] {
        let charged = store
            .charge_attempt(AttemptCharge {
                run,
                tool: "issue_refund",
                retry_budget: None,
                now_ms,
            })
            .await
            .unwrap();
        assert!(charged, "no budget, no limit");
    }
    let stored = record(store, run).await;
    assert_eq!(stored.attempts, attempts(&[("issue_refund", 5)]));
    assert_eq!(
        (stored.steps, stored.tool_calls),
        (1, 1),
        "no step, no call"
    );
}

/// Noting a failure twice keeps one; a turn lists the failures of the tools it calls, and only
/// those.
pub async fn a_failure_is_noted_once_and_listed_for_the_tools_of_a_turn(
    store: &dyn OperationStore,
) {
    let run = key("acme");
    admitted(store, run, &[("issue_refund", 2)], RunLimits::DEFAULT, T0).await;
    for (tool, hash) in [
        ("issue_refund", "h2"),
        ("issue_refund", "h1"),
        ("issue_refund", "h2"),
        ("cancel_order", "h3"),
    ] {
        store
            .note_failure(FailureNote {
                run,
                tool,
                request_hash: hash,
                now_ms: T0 + 1,
            })
            .await
            .unwrap();
    }
    store
        .note_failure(FailureNote {
            run,
            tool: "issue_refund",
            request_hash: "h2",
            now_ms: T0 + 2,
        })
        .await
        .unwrap();
    let stored = record(store, run).await;
    assert_eq!(
        stored.updated_ms,
        T0 + 2,
        "noting again is a change of the run"
    );
    let every: BTreeSet<FailedCall> = [
        failed("cancel_order", "h3"),
        failed("issue_refund", "h1"),
        failed("issue_refund", "h2"),
    ]
    .into();
    assert_eq!(stored.failed, every);
    let refunds = admitted(
        store,
        run,
        &[("get_order", 1), ("issue_refund", 1)],
        RunLimits::DEFAULT,
        T0 + 3,
    )
    .await;
    assert_eq!(
        refunds.failed,
        vec![failed("issue_refund", "h1"), failed("issue_refund", "h2")]
    );
    let reads = admitted(store, run, &[("get_order", 1)], RunLimits::DEFAULT, T0 + 4).await;
    assert_eq!(reads.failed, vec![]);
}

/// The first abort stands: a second one answers the first, and every later turn is refused
/// with it, counting nothing. The reason keeps every character (NUL included).
pub async fn the_first_abort_stands_and_refuses_every_later_turn(store: &dyn OperationStore) {
    let run = key("acme");
    admitted(store, run, &[("get_order", 1)], RunLimits::DEFAULT, T0).await;
    let first = RunAborted {
        kind: ErrorKind::PermissionDenied,
        reason: "get_order needs \"orders:read\"\n\0 (none) \u{1f980}".into(),
    };
    let second = RunAborted {
        kind: ErrorKind::RunBudgetExhausted,
        reason: "the run has had 50 turns".into(),
    };
    assert_eq!(
        store
            .abort_run(AbortRequest {
                run,
                abort: &first,
                now_ms: T0 + 1
            })
            .await
            .unwrap()
            .abort,
        first
    );
    assert_eq!(
        store
            .abort_run(AbortRequest {
                run,
                abort: &second,
                now_ms: T0 + 2
            })
            .await
            .unwrap()
            .abort,
        first
    );
    let aborted = record(store, run).await;
    assert_eq!(aborted.aborted.as_ref(), Some(&first));
    assert_eq!(aborted.updated_ms, T0 + 1, "the second abort wrote nothing");
    assert_eq!(
        turn(
            store,
            run,
            &[("get_order", 1)],
            RunLimits::UNLIMITED,
            T0 + 3
        )
        .await,
        TurnGrant::Aborted(first.clone())
    );
    assert_eq!(record(store, run).await, aborted, "nothing counted");

    // A run aborted before its first turn has a record of its abort alone.
    let early = RunKey {
        tenant: "acme",
        run_id: "run-2",
    };
    assert_eq!(
        store
            .abort_run(AbortRequest {
                run: early,
                abort: &second,
                now_ms: T0 + 4
            })
            .await
            .unwrap()
            .abort,
        second
    );
    let stored = record(store, early).await;
    assert_eq!(
        stored,
        RunRecord {
            aborted: Some(second),
            updated_ms: T0 + 4,
            ..RunRecord::default()
        }
    );
}

/// Two tenants' runs with one run id are two runs: counters, failures and aborts apart.
pub async fn runs_of_two_tenants_never_share_counters(store: &dyn OperationStore) {
    let (acme, globex) = (key("acme"), key("globex"));
    let limits = RunLimits::UNLIMITED.max_steps(2).retry_budget(2);
    admitted(store, acme, &[("issue_refund", 2)], limits, T0).await;
    admitted(store, acme, &[("issue_refund", 1)], limits, T0 + 1).await;
    store
        .note_failure(FailureNote {
            run: acme,
            tool: "issue_refund",
            request_hash: "h1",
            now_ms: T0 + 1,
        })
        .await
        .unwrap();
    let abort = RunAborted {
        kind: ErrorKind::PolicyViolation,
        reason: "refunds over the limit".into(),
    };
    store
        .abort_run(AbortRequest {
            run: acme,
            abort: &abort,
            now_ms: T0 + 2,
        })
        .await
        .unwrap();
    let theirs = admitted(store, globex, &[("issue_refund", 2)], limits, T0 + 3).await;
    assert_eq!(
        theirs,
        Admission {
            step: 1,
            granted: [2].into(),
            failed: vec![],
        }
    );
    assert!(
        store
            .charge_attempt(AttemptCharge {
                run: globex,
                tool: "get_order",
                retry_budget: Some(2),
                now_ms: T0 + 4
            })
            .await
            .unwrap()
    );
    let stored = record(store, globex).await;
    assert_eq!(
        (stored.steps, stored.tool_calls, stored.aborted),
        (1, 2, None)
    );
    assert_eq!(
        stored.attempts,
        attempts(&[("get_order", 1), ("issue_refund", 2)])
    );
    assert!(stored.failed.is_empty());
    let ours = record(store, acme).await;
    assert_eq!((ours.steps, ours.tool_calls), (2, 3));
    assert_eq!(ours.attempts, attempts(&[("issue_refund", 2)]));
}

/// `run` reads back every part of the record as the rules wrote it.
pub async fn a_run_reads_back_every_counter(store: &dyn OperationStore) {
    let run = key("acme");
    let limits = RunLimits::DEFAULT.retry_budget(4);
    admitted(
        store,
        run,
        &[("get_order", 1), ("issue_refund", 3)],
        limits,
        T0,
    )
    .await;
    assert!(
        store
            .charge_attempt(AttemptCharge {
                run,
                tool: "issue_refund",
                retry_budget: Some(4),
                now_ms: T0 + 1
            })
            .await
            .unwrap()
    );
    store
        .note_failure(FailureNote {
            run,
            tool: "issue_refund",
            request_hash: "9f86d081",
            now_ms: T0 + 2,
        })
        .await
        .unwrap();
    admitted(store, run, &[("issue_refund", 1)], limits, T0 + 3).await;
    let abort = RunAborted {
        kind: ErrorKind::CredentialsRevoked,
        reason: "the agent's token was revoked".into(),
    };
    store
        .abort_run(AbortRequest {
            run,
            abort: &abort,
            now_ms: T0 + 4,
        })
        .await
        .unwrap();
    assert_eq!(
        record(store, run).await,
        RunRecord {
            steps: 2,
            tool_calls: 5,
            attempts: attempts(&[("get_order", 1), ("issue_refund", 4)]),
            failed: [failed("issue_refund", "9f86d081")].into(),
            aborted: Some(abort),
            updated_ms: T0 + 4,
        }
    );
}

/// `purge` deletes the runs last changed before its time, with their attempts, failures and
/// abort (a run of that id starts afresh), and keeps the others whole. It counts only records.
pub async fn retention_purges_old_runs_and_keeps_recent_ones(store: &dyn OperationStore) {
    let (old, recent) = (
        key("acme"),
        RunKey {
            tenant: "acme",
            run_id: "run-2",
        },
    );
    let limits = RunLimits::UNLIMITED.retry_budget(1);
    for run in [old, recent] {
        admitted(store, run, &[("issue_refund", 1)], limits, T0).await;
        store
            .note_failure(FailureNote {
                run,
                tool: "issue_refund",
                request_hash: "h1",
                now_ms: T0,
            })
            .await
            .unwrap();
        let abort = RunAborted {
            kind: ErrorKind::PermissionDenied,
            reason: "no refunds".into(),
        };
        store
            .abort_run(AbortRequest {
                run,
                abort: &abort,
                now_ms: T0,
            })
            .await
            .unwrap();
    }
    store
        .note_failure(FailureNote {
            run: recent,
            tool: "issue_refund",
            request_hash: "h2",
            now_ms: T0 + 10,
        })
        .await
        .unwrap();
    let kept = record(store, recent).await;
    assert_eq!(
        store.purge(T0 + 5).await.unwrap(),
        0,
        "runs are not counted"
    );
    assert_eq!(store.run(old).await.unwrap(), None);
    assert_eq!(record(store, recent).await, kept);
    let again = admitted(store, old, &[("issue_refund", 1)], limits, T0 + 20).await;
    assert_eq!(
        again,
        Admission {
            step: 1,
            granted: [1].into(),
            failed: vec![],
        },
        "nothing of the purged run is left"
    );
}

/// Many turns and retries of one run at once never grant more attempts than the budget, and
/// count every turn.
pub async fn concurrent_turns_never_grant_past_the_budget(store: &dyn OperationStore) {
    let run = key("acme");
    let limits = RunLimits::UNLIMITED.retry_budget(12);
    let turns = join_all((0..16).map(|_| {
        store.begin_turn(TurnRequest {
            run,
            tools: &[("issue_refund", 1)],
            limits,
            now_ms: T0,
        })
    }));
    let charges = join_all((0..16).map(|_| {
        store.charge_attempt(AttemptCharge {
            run,
            tool: "issue_refund",
            retry_budget: Some(12),
            now_ms: T0,
        })
    }));
    let (turns, charges) = join(turns, charges).await;
    let granted: u32 = turns
        .into_iter()
        .map(|grant| match grant.expect("begin a turn") {
            TurnGrant::Admitted(admission) => admission.granted[0],
            other => panic!("expected the turn to run, got {other:?}"),
        })
        .sum();
    let charged = charges
        .into_iter()
        .filter(|charged| *charged.as_ref().expect("charge an attempt"))
        .count();
    assert_eq!(granted + u32::try_from(charged).unwrap(), 12);
    let stored = record(store, run).await;
    assert_eq!((stored.steps, stored.tool_calls), (16, 16));
    assert_eq!(stored.attempts, attempts(&[("issue_refund", 12)]));
}
