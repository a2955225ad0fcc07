//! Approvals in a real file: one survives the store that made it and is decided and run through
//! another; claims racing through two handles on one file run an approved operation once; the
//! schema refuses an operation awaiting no approval.

use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};
use tokio::task::JoinSet;
use toolgate_core::store::prelude::*;
use toolgate_core::store::{
    ApprovalRecord, ApprovalStatus, Claim, ClaimRequest, DecideRequest, Decided, OperationState,
    Requester, StoreError, Verdict,
};
use toolgate_store_sqlite::SqliteStore;

const T0: i64 = 1_700_000_000_000;

fn asked(id: &str) -> ApprovalRecord {
    ApprovalRecord {
        id: id.into(),
        tenant: "acme".into(),
        key: "refund-ORD-1002".into(),
        tool: "issue_refund".into(),
        request_hash: "h1".into(),
        policy_hash: "p1".into(),
        arguments: r#"{"amount":"8000.00","order_id":"ORD-1002"}"#.into(),
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

fn claim(approval: Option<&ApprovalRecord>, now_ms: i64) -> ClaimRequest<'_> {
    ClaimRequest {
        tenant: "acme",
        key: "refund-ORD-1002",
        tool: "issue_refund",
        request_hash: "h1",
        unkeyed: None,
        arguments: r#"{"amount":"8000.00","order_id":"ORD-1002"}"#,
        now_ms,
        lease: Duration::from_secs(30),
        takeover: false,
        approval,
    }
}

async fn approve(store: &SqliteStore, now_ms: i64) -> Result<ApprovalRecord, StoreError> {
    let manager = toolgate_test::operator("acme", "manager", &["refund:approve"]);
    match store
        .decide(DecideRequest {
            id: "apr_1",
            approver: &manager,
            verdict: Verdict::Approve,
            reason: "the customer called",
            now_ms,
        })
        .await?
    {
        Decided::Applied(approved) => Ok(approved),
        other => panic!("expected the approval to be applied, got {other:?}"),
    }
}

/// The store that stored the approval is closed (its process ended); a store opened on the
/// file afterwards sees it pending, decides it, and runs the operation.
#[tokio::test]
async fn an_approval_survives_its_store_and_is_run_by_another() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    let first = SqliteStore::open(&path).await?;
    let pending = asked("apr_1");
    assert_eq!(
        first.claim(claim(Some(&pending), T0)).await?,
        Claim::Approval(pending.clone())
    );
    first.close().await;

    let second = SqliteStore::open(&path).await?;
    assert_eq!(second.approval("apr_1").await?, Some(pending));
    assert_eq!(
        second
            .get("acme", "refund-ORD-1002")
            .await?
            .map(|r| r.state),
        Some(OperationState::AwaitingApproval)
    );
    let approved = approve(&second, T0 + 10).await?;
    assert_eq!(second.list_approved(10).await?, vec![approved.clone()]);
    assert_eq!(
        second.claim(claim(None, T0 + 20)).await?,
        Claim::Acquired {
            attempt: 1,
            approved: Some(approved)
        }
    );
    second.close().await;
    Ok(())
}

/// Two handles on one file (the desk's and the runner's), on a runtime with several threads,
/// each claiming the approved operation four times at once: one claim runs it, every other sees
/// it running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_claims_through_two_handles_run_an_approval_once() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    let desk = SqliteStore::open(&path).await?;
    let runner = SqliteStore::open(&path).await?;
    let pending = asked("apr_1");
    desk.claim(claim(Some(&pending), T0)).await?;
    approve(&runner, T0 + 10).await?;

    let mut claims = JoinSet::new();
    for i in 0..8 {
        let store = if i % 2 == 0 {
            desk.clone()
        } else {
            runner.clone()
        };
        claims.spawn(async move {
            let again = asked(&format!("apr_again_{i}"));
            store.claim(claim(Some(&again), T0 + 20)).await
        });
    }
    let mut acquired = 0;
    while let Some(answer) = claims.join_next().await {
        match answer.expect("a claim task")? {
            Claim::Acquired {
                attempt: 1,
                approved: Some(approval),
            } => {
                assert_eq!(approval.id, "apr_1");
                acquired += 1;
            }
            Claim::Existing(record) => assert_eq!(record.state, OperationState::Processing),
            other => panic!("expected the approved operation to run or be running, got {other:?}"),
        }
    }
    assert_eq!(acquired, 1, "an approved operation runs once");
    assert_eq!(desk.list_approvals(Default::default()).await?.len(), 1);
    desk.close().await;
    runner.close().await;
    Ok(())
}

/// The schema keeps what the store relies on even against another writer: an operation
/// awaiting approval names its approval, and only a waiting or rejected one has attempt 0.
#[tokio::test]
async fn the_schema_refuses_an_operation_awaiting_no_approval() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("operations.db");
    SqliteStore::open(&path).await?.close().await;
    let mut conn = SqliteConnectOptions::new()
        .filename(&path)
        .connect()
        .await
        .expect("a plain connection");
    for (state, attempt, approval_id) in [
        ("awaiting_approval", 0, None),
        ("processing", 0, None),
        ("succeeded", 0, Some("apr_1")),
        ("waiting", 1, Some("apr_1")),
    ] {
        let inserted = sqlx::query(
            "INSERT INTO operations (tenant_id, idempotency_key, tool, request_hash, arguments, \
                                     state, attempt, lease_until_ms, created_ms, updated_ms, \
                                     approval_id) \
             VALUES ('acme', 'k', 't', 'h', '{}', ?1, ?2, 0, 0, 0, ?3)",
        )
        .bind(state)
        .bind(attempt)
        .bind(approval_id)
        .execute(&mut conn)
        .await;
        assert!(
            inserted.is_err(),
            "{state} attempt {attempt} {approval_id:?}"
        );
    }
    sqlx::query(
        "INSERT INTO operations (tenant_id, idempotency_key, tool, request_hash, arguments, \
                                 state, attempt, lease_until_ms, created_ms, updated_ms, \
                                 approval_id) \
         VALUES ('acme', 'k', 't', 'h', '{}', 'awaiting_approval', 0, 0, 0, 0, 'apr_1')",
    )
    .execute(&mut conn)
    .await
    .expect("a waiting operation with its approval");
    conn.close().await.expect("close");
    Ok(())
}
