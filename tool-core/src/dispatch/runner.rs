//! The application's runner of approved operations: each one whose call has not come back runs
//! once, under its original key, as its requester, through the write path.

use serde_json::Value;

use crate::auth::{AuthContext, Session};
use crate::decide::decision_entry;
use crate::fate::Fate;
use crate::result::CallResult;
use crate::run_limits::RunLimits;
use crate::store::{ApprovalRecord, ApprovalSweep, OperationStore, StoreError};

use super::audit::{self, CallAudit, Subject};
use super::plan::PreparedWrite;
use super::{Dispatcher, answers, approval};

/// What [`Dispatcher::run_approved`] did with one approved operation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Executed {
    /// The approval.
    pub approval: ApprovalRecord,
    /// What the requester's call would read now: `succeeded` when it ran, `rejected` when it
    /// failed the checks made before it ran, a replay when another call ran it first.
    pub result: CallResult,
}

/// What one pass of [`Dispatcher::run_approved`] did.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ApprovedRun {
    /// Pending approvals that passed their expiry and are now rejected as `expired`.
    pub expired: Vec<ApprovalRecord>,
    /// Approved operations, each with its result.
    pub executed: Vec<Executed>,
}

impl Dispatcher {
    /// One pass of the runner of approved operations: up to `limit` pending approvals past their
    /// expiry are rejected as `expired`, then up to `limit` approved operations that have not
    /// run run now, each once, under its original key, as its requester (tenant, user and the
    /// permissions recorded with the approval) in its run, through the same path as a model's
    /// call: the checks made again before it runs, its deadline, retries, `outcome_unknown`.
    ///
    /// An approved operation runs at whichever comes first: the model's call again with the same
    /// arguments, or this runner; the store lets one of them claim it, and the other reads its
    /// outcome as a replay. Call it from a loop of the application (a background task, or beside
    /// the [`Reconciler`](crate::reconcile::Reconciler)'s pass), as often as approvals should take effect.
    /// Every execution and expiry is added to the audit trail.
    ///
    /// An approval of a tool this dispatcher does not have is left approved, for a dispatcher
    /// that has it; its result says so. So is one of a tool with `#[sensitive]` arguments: the
    /// store never keeps their values, so it runs at the model's next call with the same
    /// arguments only.
    pub async fn run_approved(&self, limit: u32) -> Result<ApprovedRun, StoreError> {
        let Some(store) = self.inner.store.as_deref() else {
            return Ok(ApprovedRun::default());
        };
        let expired = store
            .expire_approvals(ApprovalSweep {
                now_ms: self.now_ms(),
                limit,
            })
            .await?;
        for approval in &expired {
            if let Some(decision) = approval.last_decision() {
                store
                    .append_audit(&decision_entry(approval, decision))
                    .await?;
            }
        }
        let mut executed = Vec::new();
        for approval in store.list_approved(limit).await? {
            let result = self.run_one_approved(store, &approval).await?;
            executed.push(Executed { approval, result });
        }
        Ok(ApprovedRun { expired, executed })
    }

    /// Runs `approval`'s operation as its requester.
    async fn run_one_approved(
        &self,
        store: &dyn OperationStore,
        approval: &ApprovalRecord,
    ) -> Result<CallResult, StoreError> {
        let Some(registered) = self.inner.registry.get(&approval.tool) else {
            return Ok(CallResult::from_error(&answers::unknown_tool(
                &approval.tool,
                self.inner.registry.names(),
            )));
        };
        if !registered.descriptor().sensitive.is_empty() {
            // Its sensitive arguments are not stored: only the model's call brings them.
            return Ok(approval::approval_answer(approval, true));
        }
        let Some(record) = store.get(&approval.tenant, &approval.key).await? else {
            // Purged or taken over meanwhile: nothing to run.
            return Ok(CallResult::from_error(&answers::claims_exhausted(
                &approval.tool,
            )));
        };
        let args: Value = serde_json::from_str(&record.arguments).map_err(|err| {
            StoreError::Corrupt(format!(
                "the arguments of {}/{} are not JSON: {err}",
                approval.tenant, approval.key
            ))
        })?;
        let requester = &approval.requester;
        let auth = AuthContext::new(&approval.tenant, &requester.user)
            .with_permissions(requester.permissions.iter().cloned());
        // The runner acts for the application, not the model: the run's limits do not stop it.
        let session = Session::new(auth, approval.run_id.clone()).with_limits(RunLimits::UNLIMITED);
        let write = PreparedWrite {
            tool: registered.descriptor().name,
            args,
            canonical: record.arguments,
            hash: approval.request_hash.clone(),
            key: approval.key.clone(),
            resource: None,
        };
        let ledger = self.ledger(&session);
        let started_ms = self.now_ms();
        let path = self.write_on_heap(&session, &approval.call_id, registered, write, &ledger);
        let (outcome, notes) = audit::noted(None, path).await;
        let result = outcome.unwrap_or_else(|err| CallResult::from_error(&err));
        let fate = Fate::Answered(result.clone());
        let call = CallAudit {
            id: &approval.call_id,
            name: &approval.tool,
            subject: Some(Subject {
                arguments: approval.arguments.clone(),
                key: Some(approval.key.clone()),
            }),
            fate: &fate,
            notes,
            started_ms,
        };
        self.audit_call(&session, call).await;
        Ok(result)
    }
}
