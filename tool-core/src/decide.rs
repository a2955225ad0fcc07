//! An approver's decision on an approval, with its record in the audit trail.

use crate::identity::Operator;
use crate::store::{
    ApprovalRecord, AuditEntry, AuditKind, DecideRequest, Decided, Decision, OperationStore,
    Refusal, StoreError, Verdict,
};

/// Decides on an approval as `request.approver`, and appends the decision to the audit trail.
///
/// The store applies the rules of [`ApprovalRecord::decide_step`] atomically: the approver must
/// be of the approval's tenant, hold its approval permission, and not be its requester; a
/// decided approval is not decided again (one rejected with its aborted run answers
/// [`Refusal::RunAborted`]), and one past its expiry is rejected as `expired`
/// instead (that expiry is audited too, by `toolgate`). An approved operation does not run here:
/// it runs at the next claim of its key, the model's call again or the application's runner
/// ([`Dispatcher::run_approved`](crate::Dispatcher::run_approved)).
///
/// The audit record is appended after the decision is stored; if the store fails between the
/// two, the decision stands and the error is returned. A refused attempt to decide has its
/// record too (outcome `refused`): who tried, what they asked, and why it was refused; nothing
/// else is stored for it.
///
/// # Examples
///
/// A refund over its tool's threshold waits for an approver. The application lists what waits
/// and decides as the operator an [`Authenticator`](crate::identity::Authenticator) proved
/// (never as a name the model gives):
///
/// ```
/// use std::sync::Arc;
/// use toolgate::prelude::*;
/// use toolgate::store::prelude::*;
/// use toolgate::identity::{IssuerSecret, Operator, TokenVerifier};
/// use toolgate::store::{ApprovalQuery, ApprovalStatus, DecideRequest, Decided, Verdict};
/// // The in-memory store of the tests; an application passes its SQLite or PostgreSQL store.
/// use toolgate_test::MemoryStore;
///
/// /// Refund an order.
/// #[tool(side_effect = "write", approval_over = 5000, approver = "refund:approve", key = [order_id])]
/// async fn refund(order_id: String, amount: f64) -> Result<String, ToolError> {
///     Ok(format!("refunded {amount} on {order_id}"))
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let store = Arc::new(MemoryStore::new());
/// let mut registry = Registry::new();
/// registry.register::<refund>().unwrap();
/// let dispatcher = Dispatcher::builder(registry).store(store.clone()).build();
/// let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
/// let call = || {
///     let arguments = serde_json::json!({"order_id": "ORD-1", "amount": 8000.0});
///     ToolCall::new("call_1", "refund", arguments)
/// };
/// let report = dispatcher.dispatch(&session, call()).await.unwrap();
/// assert_eq!(report.result.status, Status::AwaitingApproval);
///
/// let query = ApprovalQuery { tenant: Some("acme"), status: Some(ApprovalStatus::Pending), limit: 0 };
/// let waiting = store.list_approvals(query).await.unwrap();
/// let now_ms = std::time::SystemTime::now()
///     .duration_since(std::time::UNIX_EPOCH)
///     .unwrap()
///     .as_millis() as i64;
/// // The supervisor signs in with a token of the tenant's issuer (or the application's own
/// // login, through an `Authenticator` of its own).
/// let issuer = IssuerSecret::generate("acme-ops", "acme").unwrap();
/// let token = issuer
///     .issue("supervisor", &["refund:approve"], std::time::Duration::from_secs(3600), now_ms)
///     .unwrap();
/// let verifier = TokenVerifier::new(vec![issuer.public()]);
/// let supervisor = Operator::authenticate(&verifier, &token, now_ms).unwrap();
/// let request = DecideRequest {
///     id: &waiting[0].id,
///     approver: &supervisor,
///     verdict: Verdict::Approve,
///     reason: "the customer's return arrived",
///     now_ms,
/// };
/// let decided = toolgate::approval::decide(store.as_ref(), request).await.unwrap();
/// assert!(matches!(decided, Decided::Applied(_)));
///
/// // Approved, the refund runs at its next claim: the model's call again, or the
/// // application's runner (`Dispatcher::run_approved`).
/// let report = dispatcher.dispatch(&session, call()).await.unwrap();
/// assert_eq!(report.result.status, Status::Succeeded);
/// # });
/// ```
pub async fn decide(
    store: &dyn OperationStore,
    request: DecideRequest<'_>,
) -> Result<Decided, StoreError> {
    let attempt = (
        request.id,
        request.approver,
        request.verdict,
        request.now_ms,
    );
    let decided = store.decide(request).await?;
    match &decided {
        Decided::Applied(approval) => {
            if let Some(decision) = approval.last_decision() {
                store
                    .append_audit(&decision_entry(approval, decision))
                    .await?;
            }
        }
        Decided::Refused { refusal, approval } => {
            // An expiry found by this attempt is the system's decision: its record first.
            if let (Refusal::Expired, Some(approval)) = (refusal, approval)
                && let Some(decision) = approval.last_decision()
            {
                store
                    .append_audit(&decision_entry(approval, decision))
                    .await?;
            }
            let (id, approver, verdict, now_ms) = attempt;
            let entry = refused_entry(id, approver, verdict, *refusal, approval.as_ref(), now_ms);
            store.append_audit(&entry).await?;
        }
    }
    Ok(decided)
}

/// The audit record of an attempt by `approver` to `verdict` approval `id` that the store
/// refused: outcome `refused`, the refusal in `reason`. Of an approval the approver's tenant
/// does not hold, it names only the id asked.
pub(crate) fn refused_entry(
    id: &str,
    approver: &Operator,
    verdict: Verdict,
    refusal: Refusal,
    approval: Option<&ApprovalRecord>,
    now_ms: i64,
) -> AuditEntry {
    let of = |field: fn(&ApprovalRecord) -> &String| approval.map(field).cloned();
    AuditEntry {
        kind: AuditKind::Decision,
        tenant: of(|a| &a.tenant).unwrap_or_else(|| approver.tenant().to_owned()),
        run_id: of(|a| &a.run_id).unwrap_or_default(),
        call_id: of(|a| &a.call_id).unwrap_or_default(),
        tool: of(|a| &a.tool).unwrap_or_default(),
        actor: approver.subject().to_owned(),
        arguments: of(|a| &a.arguments).unwrap_or_else(|| "null".to_owned()),
        attempts: 0,
        duration_ms: 0,
        outcome: "refused".to_owned(),
        error_kind: None,
        replayed: false,
        bytes: 0,
        key: of(|a| &a.key),
        approval_id: Some(id.to_owned()),
        reason: Some(format!(
            "asked to {}: {}",
            verdict.as_str(),
            refusal.explain(approval)
        )),
        at_ms: now_ms,
    }
}

/// The audit record of `decision` on `approval`.
pub(crate) fn decision_entry(approval: &ApprovalRecord, decision: &Decision) -> AuditEntry {
    AuditEntry {
        kind: AuditKind::Decision,
        tenant: approval.tenant.clone(),
        run_id: approval.run_id.clone(),
        call_id: approval.call_id.clone(),
        tool: approval.tool.clone(),
        actor: decision.by.clone(),
        arguments: approval.arguments.clone(),
        attempts: 0,
        duration_ms: 0,
        outcome: match decision.verdict {
            Verdict::Approve => "approved",
            Verdict::Reject => "rejected",
        }
        .to_owned(),
        error_kind: None,
        replayed: false,
        bytes: 0,
        key: Some(approval.key.clone()),
        approval_id: Some(approval.id.clone()),
        reason: Some(decision.reason.clone()),
        at_ms: decision.at_ms,
    }
}
