//! Approved operations claimed at once from two pools (as two processes would) on one
//! PostgreSQL database: each runs exactly once, and every other claim sees it running.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Barrier;
use tokio::task::JoinSet;
use toolgate_core::store::prelude::*;
use toolgate_core::store::{
    ApprovalRecord, ApprovalStatus, Claim, ClaimRequest, DecideRequest, Decided, OperationState,
    Requester, Verdict,
};
use toolgate_store_postgres::PostgresStore;
use toolgate_store_postgres::sqlx::postgres::PgPoolOptions;
use toolgate_test_postgres::test_database;

const T0: i64 = 1_700_000_000_000;
const ARGUMENTS: &str = r#"{"amount":"8000.00","order_id":"ORD-1002"}"#;

/// Claims at once on each key: half on each store.
const CLAIMS: usize = 16;
/// Keys raced for, one after the other, so that a lost race shows even when one round is lucky.
const ROUNDS: usize = 6;

fn approval(id: &str, key: &str) -> ApprovalRecord {
    ApprovalRecord {
        id: id.into(),
        tenant: "acme".into(),
        key: key.into(),
        tool: "issue_refund".into(),
        request_hash: "h1".into(),
        policy_hash: "p1".into(),
        arguments: ARGUMENTS.into(),
        amount: "8000.00".into(),
        threshold: "5000".into(),
        requester: Requester {
            user: "agent".into(),
            permissions: vec!["refund:create".into()],
        },
        run_id: "run-1".into(),
        call_id: "call_1".into(),
        approver_permission: "refund:approve".into(),
        created_ms: T0,
        expires_ms: T0 + 3_600_000,
        status: ApprovalStatus::Pending,
        decisions: Vec::new(),
    }
}

fn request<'a>(
    key: &'a str,
    approval: Option<&'a ApprovalRecord>,
    now_ms: i64,
) -> ClaimRequest<'a> {
    ClaimRequest {
        tenant: "acme",
        key,
        tool: "issue_refund",
        request_hash: "h1",
        unkeyed: None,
        arguments: ARGUMENTS,
        now_ms,
        lease: Duration::from_secs(30),
        takeover: false,
        approval,
    }
}

/// A store on a pool of its own, as one process would have.
async fn process_store(url: &str) -> PostgresStore {
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect(url)
        .await
        .expect("connect");
    let store = PostgresStore::from_pool(pool);
    store.migrate().await.expect("migrate");
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_operation_claimed_from_two_processes_runs_once() {
    let url = test_database().await;
    let stores = [process_store(&url).await, process_store(&url).await];
    let manager = toolgate_test::operator("acme", "manager", &["refund:approve"]);
    for round in 0..ROUNDS {
        let key = format!("refund-{round}");
        let id = format!("apr_{round}");
        let asked = approval(&id, &key);
        // The call over the threshold waits, on one store; the approver decides on the other.
        let waiting = stores[round % 2]
            .claim(request(&key, Some(&asked), T0))
            .await
            .unwrap();
        assert_eq!(waiting, Claim::Approval(asked.clone()));
        let decided = stores[(round + 1) % 2]
            .decide(DecideRequest {
                id: &id,
                approver: &manager,
                verdict: Verdict::Approve,
                reason: "checked the order",
                now_ms: T0 + 1,
            })
            .await
            .unwrap();
        let Decided::Applied(approved) = decided else {
            panic!("the manager's approval is applied: {decided:?}");
        };
        assert_eq!(approved.status, ApprovalStatus::Approved);

        // Every claim starts at once, half on each pool.
        let gate = Arc::new(Barrier::new(CLAIMS));
        let mut tasks = JoinSet::new();
        for task in 0..CLAIMS {
            let store = stores[task % 2].clone();
            let (gate, key) = (Arc::clone(&gate), key.clone());
            tasks.spawn(async move {
                gate.wait().await;
                store.claim(request(&key, None, T0 + 2)).await
            });
        }
        let claims: Vec<Claim> = tasks
            .join_all()
            .await
            .into_iter()
            .map(|claim| claim.expect("claim"))
            .collect();
        let ran: Vec<&ApprovalRecord> = claims
            .iter()
            .filter_map(|claim| match claim {
                Claim::Acquired {
                    attempt: 1,
                    approved: Some(approval),
                } => Some(approval),
                _ => None,
            })
            .collect();
        assert_eq!(ran, [&approved], "round {round}: {claims:?}");
        let running = claims
            .iter()
            .filter(|claim| {
                matches!(claim, Claim::Existing(record)
                    if record.state == OperationState::Processing && record.attempt == 1)
            })
            .count();
        assert_eq!(running, CLAIMS - 1, "round {round}: {claims:?}");
        let record = stores[0].get("acme", &key).await.unwrap().expect("stored");
        assert_eq!(
            (record.state, record.attempt, record.approval_id.as_deref()),
            (OperationState::Processing, 1, Some(id.as_str()))
        );
        assert!(stores[1].list_approved(0).await.unwrap().is_empty());
    }
}

/// A decision and claims of the same waiting operation, at once from two pools: the claims
/// that come before the approval are answered it pending, and at most one claim runs it, never
/// before it was approved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_racing_the_approval_never_run_it_twice_nor_before_it() {
    let url = test_database().await;
    let stores = [process_store(&url).await, process_store(&url).await];
    let manager = toolgate_test::operator("acme", "manager", &["refund:approve"]);
    for round in 0..ROUNDS {
        let key = format!("refund-{round}");
        let id = format!("apr_{round}");
        let asked = approval(&id, &key);
        stores[0]
            .claim(request(&key, Some(&asked), T0))
            .await
            .unwrap();
        let gate = Arc::new(Barrier::new(CLAIMS + 1));
        let mut tasks = JoinSet::new();
        for task in 0..CLAIMS {
            let store = stores[task % 2].clone();
            let (gate, key) = (Arc::clone(&gate), key.clone());
            tasks.spawn(async move {
                gate.wait().await;
                store.claim(request(&key, None, T0 + 2)).await
            });
        }
        let approver = stores[round % 2].clone();
        let (decide_gate, decide_id, manager) = (Arc::clone(&gate), id.clone(), manager.clone());
        let decision = tokio::spawn(async move {
            decide_gate.wait().await;
            approver
                .decide(DecideRequest {
                    id: &decide_id,
                    approver: &manager,
                    verdict: Verdict::Approve,
                    reason: "checked the order",
                    now_ms: T0 + 1,
                })
                .await
        });
        let claims: Vec<Claim> = tasks
            .join_all()
            .await
            .into_iter()
            .map(|claim| claim.expect("claim"))
            .collect();
        let decided = decision.await.unwrap().unwrap();
        assert!(matches!(decided, Decided::Applied(_)), "{decided:?}");
        let ran = claims
            .iter()
            .filter(|claim| matches!(claim, Claim::Acquired { .. }))
            .count();
        for claim in &claims {
            match claim {
                Claim::Acquired { attempt, approved } => {
                    assert_eq!(*attempt, 1);
                    let approved = approved.as_ref().expect("runs under its approval");
                    assert_eq!(approved.status, ApprovalStatus::Approved);
                }
                Claim::Approval(waiting) => assert_eq!(waiting.status, ApprovalStatus::Pending),
                Claim::Existing(record) => {
                    assert_eq!(
                        (record.state, record.attempt),
                        (OperationState::Processing, 1)
                    );
                }
                Claim::Conflict { .. } => panic!("the same request is no conflict: {claims:?}"),
            }
        }
        assert!(ran <= 1, "round {round}: {claims:?}");
        // Whoever claims next runs it if no racing claim did, and nobody after that.
        let next = stores[1].claim(request(&key, None, T0 + 3)).await.unwrap();
        let ran_next = matches!(next, Claim::Acquired { .. });
        assert_eq!(ran + usize::from(ran_next), 1, "round {round}: {next:?}");
        let record = stores[0].get("acme", &key).await.unwrap().expect("stored");
        assert_eq!(
            (record.state, record.attempt),
            (OperationState::Processing, 1)
        );
    }
}

/// Words a model or a person may write: NUL, controls, quotes, a backslash, beyond the BMP.
const AWKWARD: &str = "nul \0 bell \u{7} quote \" backslash \\ seps \u{2028} crab \u{1f980} end \0";

/// An approval made by one process (its pool closed, as when it exits) is decided by a second
/// and run by a third; every text of it, of its decisions and of the audit trail comes back as
/// it was written, NUL included.
#[tokio::test]
async fn an_approval_outlives_its_process_and_keeps_every_character() {
    use toolgate_core::store::{AuditEntry, AuditKind, AuditQuery};

    let url = test_database().await;
    let mut asked = approval("apr_awkward", "refund-awkward");
    asked.call_id = format!("call {AWKWARD}");
    asked.requester.user = format!("agent {AWKWARD}");
    asked.requester.permissions = vec![format!("refund:{AWKWARD}")];
    let first = process_store(&url).await;
    let waiting = first
        .claim(request("refund-awkward", Some(&asked), T0))
        .await
        .unwrap();
    assert_eq!(waiting, Claim::Approval(asked.clone()));
    first.close().await;

    let second = process_store(&url).await;
    assert_eq!(
        second.approval("apr_awkward").await.unwrap().as_ref(),
        Some(&asked)
    );
    let manager = toolgate_test::operator("acme", "manager", &["refund:approve"]);
    let reason = format!("checked {AWKWARD}");
    let decided = second
        .decide(DecideRequest {
            id: "apr_awkward",
            approver: &manager,
            verdict: Verdict::Approve,
            reason: &reason,
            now_ms: T0 + 1,
        })
        .await
        .unwrap();
    let Decided::Applied(approved) = decided else {
        panic!("applied: {decided:?}");
    };
    assert_eq!(approved.decisions[0].reason, reason);
    let entry = AuditEntry {
        kind: AuditKind::Decision,
        tenant: "acme".into(),
        run_id: "run-1".into(),
        call_id: asked.call_id.clone(),
        tool: format!("issue_refund {AWKWARD}"),
        actor: format!("manager {AWKWARD}"),
        arguments: ARGUMENTS.into(),
        attempts: 0,
        duration_ms: 0,
        outcome: "approved".into(),
        error_kind: None,
        replayed: false,
        bytes: 0,
        key: Some("refund-awkward".into()),
        approval_id: Some("apr_awkward".into()),
        reason: Some(reason.clone()),
        at_ms: T0 + 1,
    };
    let seq = second.append_audit(&entry).await.unwrap();
    second.close().await;

    let third = process_store(&url).await;
    let ran = third
        .claim(request("refund-awkward", None, T0 + 2))
        .await
        .unwrap();
    assert_eq!(
        ran,
        Claim::Acquired {
            attempt: 1,
            approved: Some(approved.clone())
        }
    );
    let trail = third
        .audit(AuditQuery {
            key: Some("refund-awkward"),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(trail.len(), 1);
    assert_eq!((trail[0].seq, &trail[0].entry), (seq, &entry));
}
