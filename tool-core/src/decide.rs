//! An approver's decision on an approval, with its record in the audit trail.

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
/// two, the decision stands and the error is returned.
pub async fn decide(
    store: &dyn OperationStore,
    request: DecideRequest<'_>,
) -> Result<Decided, StoreError> {
    let decided = store.decide(request).await?;
    let audited = match &decided {
        Decided::Applied(approval) => approval.last_decision().map(|d| (approval, d)),
        Decided::Refused {
            refusal: Refusal::Expired,
            approval: Some(approval),
        } => approval.last_decision().map(|d| (approval, d)),
        Decided::Refused { .. } => None,
    };
    if let Some((approval, decision)) = audited {
        store
            .append_audit(&decision_entry(approval, decision))
            .await?;
    }
    Ok(decided)
}

/// The audit record of `decision` on `approval`.
pub fn decision_entry(approval: &ApprovalRecord, decision: &Decision) -> AuditEntry {
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
