//! The approvals of a [`MemoryStore`](super::MemoryStore): decided, listed and expired in its tables.

use async_trait::async_trait;

use super::MemoryStore;
use super::tables::truncate;
use crate::store::{
    ApprovalQuery, ApprovalRecord, ApprovalStatus, ApprovalStore, ApprovalSweep, ClaimedRejection,
    DecideRequest, DecideStep, Decided, OperationState, Refusal, StoreError, Verdict,
};

#[async_trait]
impl ApprovalStore for MemoryStore {
    async fn decide(&self, request: DecideRequest<'_>) -> Result<Decided, StoreError> {
        Ok(self.tables(|tables| {
            let Some(approval) = tables.approvals.get(request.id) else {
                return Decided::Refused {
                    refusal: Refusal::NotFound,
                    approval: None,
                };
            };
            match approval.decide_step(&request) {
                DecideStep::Refuse(refusal) => Decided::Refused {
                    refusal,
                    approval: (refusal != Refusal::NotFound).then(|| approval.clone()),
                },
                DecideStep::Expire => Decided::Refused {
                    refusal: Refusal::Expired,
                    approval: tables.reject(request.id, ApprovalRecord::expiry(request.now_ms)),
                },
                DecideStep::Apply => {
                    let decision = ApprovalRecord::decision_of(&request);
                    match request.verdict {
                        Verdict::Reject => match tables.reject(request.id, decision) {
                            Some(approval) => Decided::Applied(approval),
                            None => unreachable!("the approval was read under the same lock"),
                        },
                        Verdict::Approve => {
                            let Some(approval) = tables.approvals.get_mut(request.id) else {
                                unreachable!("the approval was read under the same lock");
                            };
                            approval.status = ApprovalStatus::Approved;
                            approval.decisions.push(decision);
                            Decided::Applied(approval.clone())
                        }
                    }
                }
            }
        }))
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        Ok(self.tables(|tables| tables.approvals.get(id).cloned()))
    }

    async fn list_approvals(
        &self,
        query: ApprovalQuery<'_>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        Ok(self.tables(|tables| {
            let mut listed: Vec<_> = tables
                .approvals
                .values()
                .filter(|a| query.admits(a))
                .cloned()
                .collect();
            listed.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
            truncate(&mut listed, query.limit);
            listed
        }))
    }

    async fn list_approved(&self, limit: u32) -> Result<Vec<ApprovalRecord>, StoreError> {
        Ok(self.tables(|tables| {
            let mut approved: Vec<_> = tables
                .approvals
                .values()
                .filter(|a| {
                    a.status == ApprovalStatus::Approved
                        && tables
                            .records
                            .get(&(a.tenant.clone(), a.key.clone()))
                            .is_some_and(|r| {
                                r.state == OperationState::AwaitingApproval
                                    && r.approval_id.as_deref() == Some(a.id.as_str())
                            })
                })
                .cloned()
                .collect();
            approved.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
            truncate(&mut approved, limit);
            approved
        }))
    }

    async fn expire_approvals(
        &self,
        sweep: ApprovalSweep,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let (now_ms, limit) = (sweep.now_ms, sweep.limit);
        Ok(self.tables(|tables| {
            let mut due: Vec<_> = tables
                .approvals
                .values()
                .filter(|a| a.is_expired(now_ms))
                .map(|a| (a.created_ms, a.id.clone()))
                .collect();
            due.sort();
            truncate(&mut due, limit);
            due.into_iter()
                .filter_map(|(_, id)| tables.reject(&id, ApprovalRecord::expiry(now_ms)))
                .collect()
        }))
    }

    async fn reject_claimed(
        &self,
        rejection: ClaimedRejection<'_>,
    ) -> Result<ApprovalRecord, StoreError> {
        let owner = rejection.owner;
        self.tables(|tables| {
            let approval = tables
                .records
                .get(&(owner.tenant.clone(), owner.key.clone()))
                .filter(|r| r.state == OperationState::Processing && r.attempt == owner.attempt)
                .and_then(|r| r.approval_id.clone());
            let lost = || StoreError::LostClaim {
                key: owner.key.clone(),
                attempt: owner.attempt,
            };
            let approval = approval.ok_or_else(lost)?;
            let rejected = tables
                .reject(&approval, rejection.decision.clone())
                .ok_or_else(lost)?;
            if let Some(record) = tables
                .records
                .get_mut(&(owner.tenant.clone(), owner.key.clone()))
            {
                record.updated_ms = rejection.now_ms;
            }
            Ok(rejected)
        })
    }
}
