//! What every case builds its requests from: one tenant's refund, claimed at a fixed time, and
//! the approval of a refund over the threshold.

use std::time::Duration;

use toolgate_core::identity::Operator;
use toolgate_core::store::{
    ApprovalRecord, ApprovalStatus, AttemptError, AuditEntry, AuditKind, Claim, ClaimRequest,
    ClaimToken, DecideRequest, Decided, OperationStore, Requester, Verdict,
};

/// The time of every case's first request, in milliseconds since the Unix epoch.
pub(super) const T0: i64 = 1_700_000_000_000;

/// The lease every claim asks for.
const LEASE: Duration = Duration::from_secs(30);

/// A claim of `key` for `tenant` by a refund, at `now_ms`, without takeover.
pub(super) fn request<'a>(
    tenant: &'a str,
    key: &'a str,
    hash: &'a str,
    now_ms: i64,
) -> ClaimRequest<'a> {
    ClaimRequest {
        tenant,
        key,
        tool: "issue_refund",
        request_hash: hash,
        unkeyed: None,
        arguments: r#"{"amount":500,"order_id":"ORD-1001"}"#,
        now_ms,
        lease: LEASE,
        takeover: false,
        approval: None,
    }
}

/// The claim on `key` held by `attempt`.
pub(super) fn owner(tenant: &str, key: &str, attempt: u32) -> ClaimToken {
    ClaimToken {
        tenant: tenant.into(),
        key: key.into(),
        attempt,
    }
}

/// The error of `attempt`, of `kind`.
pub(super) fn error(attempt: u32, kind: &str) -> AttemptError {
    AttemptError {
        attempt,
        kind: kind.into(),
        what: format!("attempt {attempt} failed"),
    }
}

/// Claims `req`, which must be acquired; answers the attempt.
pub(super) async fn acquire(store: &dyn OperationStore, req: ClaimRequest<'_>) -> u32 {
    match store.claim(req).await.expect("claim") {
        Claim::Acquired { attempt, .. } => attempt,
        other => panic!("expected to acquire {}, got {other:?}", req.key),
    }
}

/// An hour, the life of every approval the cases store.
pub(super) const HOUR: i64 = 3_600_000;

/// The approval `id` of a refund of 8000.00 under `key` for `tenant`, asked by `agent` at
/// `now_ms` and valid for an hour, pending.
pub(super) fn approval(
    id: &str,
    tenant: &str,
    key: &str,
    hash: &str,
    now_ms: i64,
) -> ApprovalRecord {
    ApprovalRecord {
        id: id.into(),
        tenant: tenant.into(),
        key: key.into(),
        tool: "issue_refund".into(),
        request_hash: hash.into(),
        policy_hash: "policy-1".into(),
        arguments: r#"{"amount":"8000.00","note":"«remboursé» \"vite\"","order_id":"ORD-1002"}"#
            .into(),
        amount: "8000.00".into(),
        threshold: "5000".into(),
        requester: Requester {
            user: "agent".into(),
            permissions: vec!["refund:create".into(), "order:read".into()],
        },
        run_id: "run-1".into(),
        call_id: "call_1".into(),
        approver_permission: "refund:approve".into(),
        created_ms: now_ms,
        expires_ms: now_ms + HOUR,
        status: ApprovalStatus::Pending,
        decisions: Vec::new(),
    }
}

/// A claim of `key` carrying `approval` (its hash the approval's), at `now_ms`.
pub(super) fn awaiting<'a>(approval: &'a ApprovalRecord, now_ms: i64) -> ClaimRequest<'a> {
    ClaimRequest {
        approval: Some(approval),
        ..request(
            &approval.tenant,
            &approval.key,
            &approval.request_hash,
            now_ms,
        )
    }
}

/// Claims `req`, which must answer an approval; answers it.
pub(super) async fn approval_of(
    store: &dyn OperationStore,
    req: ClaimRequest<'_>,
) -> ApprovalRecord {
    match store.claim(req).await.expect("claim") {
        Claim::Approval(approval) => approval,
        other => panic!("expected an approval for {}, got {other:?}", req.key),
    }
}

/// `user` of `tenant` holding `refund:approve`.
pub(super) fn approver(tenant: &str, user: &str) -> Operator {
    crate::operator(tenant, user, &["refund:approve"])
}

/// `approver`'s `verdict` on approval `id` at `now_ms`, which must be applied; answers the
/// approval after it.
pub(super) async fn decide(
    store: &dyn OperationStore,
    id: &str,
    approver: &Operator,
    verdict: Verdict,
    now_ms: i64,
) -> ApprovalRecord {
    let answer = store
        .decide(DecideRequest {
            id,
            approver,
            verdict,
            reason: "checked with the customer",
            now_ms,
        })
        .await
        .expect("decide");
    match answer {
        Decided::Applied(approval) => approval,
        other => panic!("expected {id} to be decided, got {other:?}"),
    }
}

/// A call's audit entry: `tenant`'s call `call_id` of `run_id`, naming the operation `key`,
/// at `at_ms`.
pub(super) fn entry(
    tenant: &str,
    run_id: &str,
    call_id: &str,
    key: Option<&str>,
    at_ms: i64,
) -> AuditEntry {
    AuditEntry {
        kind: AuditKind::Call,
        tenant: tenant.into(),
        run_id: run_id.into(),
        call_id: call_id.into(),
        tool: "issue_refund".into(),
        actor: "agent".into(),
        arguments: r#"{"amount":"20.00","card":"[redacted]","order_id":"ORD-1001"}"#.into(),
        attempts: 1,
        duration_ms: 12,
        outcome: "succeeded".into(),
        error_kind: None,
        replayed: false,
        bytes: 64,
        key: key.map(str::to_owned),
        approval_id: None,
        reason: None,
        at_ms,
    }
}
