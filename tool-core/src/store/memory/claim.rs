//! The claim of the [`MemoryStore`](super::MemoryStore), on its tables under their one lock:
//! what `claim` does, and what `begin` does inside its transaction.

use async_trait::async_trait;

use super::MemoryStore;
use super::tables::Tables;
use crate::store::{
    ApprovalRecord, AttemptFailure, AuditStore, Claim, ClaimRequest, ClaimStep, ClaimStore,
    Journal, OperationRecord, OperationState, RetryNote, StoreError, Success,
};

impl Tables {
    /// Claims `request.key`, following [`ClaimRequest::step`].
    pub(super) fn claim(&mut self, request: &ClaimRequest<'_>) -> Claim {
        let id = (request.tenant.to_owned(), request.key.to_owned());
        let Some(record) = self.records.get(&id) else {
            self.records.insert(
                id,
                OperationRecord {
                    tenant: request.tenant.to_owned(),
                    key: request.key.to_owned(),
                    tool: request.tool.to_owned(),
                    request_hash: request.request_hash.to_owned(),
                    arguments: request.arguments.to_owned(),
                    state: request.first_state(),
                    attempt: request.first_attempt(),
                    lease_until_ms: request.lease_until_ms(),
                    result: None,
                    errors: Vec::new(),
                    reconcile_tries: 0,
                    created_ms: request.now_ms,
                    updated_ms: request.now_ms,
                    approval_id: request.approval.map(|a| a.id.clone()),
                },
            );
            return match request.approval {
                Some(approval) => {
                    self.approvals.insert(approval.id.clone(), approval.clone());
                    Claim::Approval(approval.clone())
                }
                None => Claim::Acquired {
                    attempt: 1,
                    approved: None,
                },
            };
        };
        let approval = self.approval_of(record).cloned();
        let journal = if request.needs_journal(record) {
            self.journal(&id)
        } else {
            Journal::Empty
        };
        let step = request.step(record, approval.as_ref(), journal);
        let other_request = !request.same_request(&record.request_hash);
        if other_request && matches!(step, ClaimStep::Reclaim | ClaimStep::Await) {
            // Steps are never answered to other arguments.
            self.steps.remove(&id);
        }
        let Some(record) = self.records.get_mut(&id) else {
            unreachable!("the record was read under the same lock");
        };
        match step {
            ClaimStep::Conflict => Claim::Conflict {
                tool: record.tool.clone(),
            },
            ClaimStep::Reclaim | ClaimStep::RunApproved => {
                record.request_hash = request.request_hash.to_owned();
                record.arguments = request.arguments.to_owned();
                record.state = OperationState::Processing;
                record.attempt += 1;
                record.lease_until_ms = request.lease_until_ms();
                record.updated_ms = request.now_ms;
                Claim::Acquired {
                    attempt: record.attempt,
                    approved: approval.filter(|_| step == ClaimStep::RunApproved),
                }
            }
            ClaimStep::Await => {
                let Some(new) = request.approval else {
                    unreachable!("only a claim with an approval awaits one");
                };
                record.request_hash = request.request_hash.to_owned();
                record.arguments = request.arguments.to_owned();
                record.state = OperationState::AwaitingApproval;
                record.approval_id = Some(new.id.clone());
                record.updated_ms = request.now_ms;
                self.approvals.insert(new.id.clone(), new.clone());
                Claim::Approval(new.clone())
            }
            ClaimStep::ExpireToUnknown => {
                record.state = OperationState::OutcomeUnknown;
                record.updated_ms = request.now_ms;
                Claim::Existing(record.clone())
            }
            ClaimStep::ExpireApproval => {
                let approval = approval.map(|a| a.id).unwrap_or_default();
                match self.reject(&approval, ApprovalRecord::expiry(request.now_ms)) {
                    Some(approval) => Claim::Approval(approval),
                    None => unreachable!("the approval was read under the same lock"),
                }
            }
            ClaimStep::AnswerApproval => match approval {
                Some(approval) => Claim::Approval(approval),
                None => Claim::Existing(record.clone()),
            },
            ClaimStep::Existing => Claim::Existing(record.clone()),
        }
    }

    /// What the steps of `id` say.
    pub(super) fn journal(&self, id: &(String, String)) -> Journal {
        Journal::of(
            self.steps
                .get(id)
                .into_iter()
                .flatten()
                .map(|step| &step.status),
        )
    }
}

#[async_trait]
impl ClaimStore for MemoryStore {
    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Claim, StoreError> {
        Ok(self.tables(|tables| tables.claim(&request)))
    }

    /// With an audit record: the success, then the audit record, as two steps.
    async fn succeed(&self, success: Success<'_>) -> Result<Option<i64>, StoreError> {
        self.owned(success.owner, |record| {
            record.state = OperationState::Succeeded;
            record.result = Some(success.result.to_owned());
            record.updated_ms = success.now_ms;
        })?;
        Ok(match success.audit {
            Some(entry) => self.append_audit(entry).await.ok(),
            None => None,
        })
    }

    async fn fail(&self, failure: AttemptFailure<'_>) -> Result<(), StoreError> {
        self.settle_with_error(failure, OperationState::Failed)
    }

    async fn mark_unknown(&self, failure: AttemptFailure<'_>) -> Result<(), StoreError> {
        self.settle_with_error(failure, OperationState::OutcomeUnknown)
    }

    async fn record_retry(&self, retry: RetryNote<'_>) -> Result<(), StoreError> {
        self.owned(retry.owner, |record| {
            record.errors.push(retry.error.clone());
            record.lease_until_ms = retry.lease_until_ms;
        })
    }

    async fn get(&self, tenant: &str, key: &str) -> Result<Option<OperationRecord>, StoreError> {
        Ok(self.with(|records| records.get(&(tenant.to_owned(), key.to_owned())).cloned()))
    }
}
