//! The tables of the [`MemoryStore`](super::MemoryStore) that change together, and the rules
//! they share.

use std::collections::HashMap;

use crate::store::{
    ApprovalRecord, ApprovalStatus, AuditRecord, Decision, OperationRecord, OperationState,
    OutboxEvent, StepRecord,
};

pub(super) type Records = HashMap<(String, String), OperationRecord>;

/// The tables that change together.
#[derive(Debug, Default)]
pub(super) struct Tables {
    pub(super) records: Records,
    pub(super) approvals: HashMap<String, ApprovalRecord>,
    pub(super) audit: Vec<AuditRecord>,
    /// The `seq` of the last audit record appended, purged or not.
    pub(super) last_seq: i64,
    /// The outbox events, by their operation.
    pub(super) events: HashMap<(String, String), OutboxEvent>,
    /// The step journals, by their operation, each in `seq` order.
    pub(super) steps: HashMap<(String, String), Vec<StepRecord>>,
    /// The issuers' public keys, in the order they were added.
    pub(super) issuer_keys: Vec<crate::identity::IssuerKey>,
}

impl Tables {
    /// The latest approval of `record`, if it has one.
    pub(super) fn approval_of(&self, record: &OperationRecord) -> Option<&ApprovalRecord> {
        record
            .approval_id
            .as_ref()
            .and_then(|id| self.approvals.get(id))
    }

    /// Rejects approval `id` with `decision`, and its operation when it is waiting on it.
    pub(super) fn reject(&mut self, id: &str, decision: Decision) -> Option<ApprovalRecord> {
        let approval = self.approvals.get_mut(id)?;
        approval.status = ApprovalStatus::Rejected;
        let at_ms = decision.at_ms;
        approval.decisions.push(decision);
        let approval = approval.clone();
        if let Some(record) = self
            .records
            .get_mut(&(approval.tenant.clone(), approval.key.clone()))
            && record.approval_id.as_deref() == Some(id)
            && matches!(
                record.state,
                OperationState::AwaitingApproval | OperationState::Processing
            )
        {
            record.state = OperationState::Rejected;
            record.updated_ms = at_ms;
        }
        Some(approval)
    }

    /// Rejects every approval of the run `(tenant, run_id)` that falls with it
    /// ([`ApprovalRecord::falls_with_its_run`]) as [`ApprovalRecord::run_aborted`] at `now_ms`,
    /// with their operations. Answers them after the change, oldest first.
    pub(super) fn reject_run(
        &mut self,
        tenant: &str,
        run_id: &str,
        now_ms: i64,
    ) -> Vec<ApprovalRecord> {
        let mut falling: Vec<(i64, String)> = self
            .approvals
            .values()
            .filter(|a| a.tenant == tenant && a.run_id == run_id)
            .filter(|a| {
                let waits = self
                    .records
                    .get(&(a.tenant.clone(), a.key.clone()))
                    .is_some_and(|r| {
                        r.state == OperationState::AwaitingApproval
                            && r.approval_id.as_deref() == Some(a.id.as_str())
                    });
                a.falls_with_its_run(waits)
            })
            .map(|a| (a.created_ms, a.id.clone()))
            .collect();
        falling.sort_unstable();
        falling
            .into_iter()
            .filter_map(|(_, id)| self.reject(&id, ApprovalRecord::run_aborted(now_ms)))
            .collect()
    }
}

/// Keeps the first `limit` of `items`; a limit of 0 keeps them all.
pub(super) fn truncate<T>(items: &mut Vec<T>, limit: u32) {
    if limit > 0 {
        items.truncate(limit as usize);
    }
}
