//! A write over its tool's approval threshold: the approval it asks for instead of running, what
//! the model reads while it waits or after a rejection, and the checks made again before an
//! approved operation runs.

use serde_json::Value;

use crate::ctx::Ctx;
use crate::descriptor::ToolDescriptor;
use crate::error::ErrorKind;
use crate::idempotency::{approval_id, canonical_json};
use crate::registry::RegisteredTool;
use crate::result::{CallResult, Explanation, Status};
use crate::store::{
    ApprovalRecord, ApprovalStatus, Decision, RUN_ABORTED, Requester, RunKey, SYSTEM_DECIDER,
    Verdict,
};

use super::Dispatcher;
use super::plan::PreparedWrite;

/// What the redacted value of a sensitive argument reads in audit records and approvals.
pub(super) const REDACTED: &str = "[redacted]";

impl Dispatcher {
    /// The approval `write` asks for, pending, when its amount is over its tool's threshold;
    /// `None` under it (or for a tool without one).
    pub(super) fn approval_request(
        &self,
        ctx: &Ctx,
        registered: &RegisteredTool,
        write: &PreparedWrite,
    ) -> Option<ApprovalRecord> {
        let descriptor = registered.descriptor();
        let policy = descriptor.approval?;
        let sent = write
            .args
            .get(policy.field)
            .filter(|value| !value.is_null())?;
        // An amount its own type cannot read is held for a person: never run unchecked.
        let amount = registered.tool().approval_amount(&write.args);
        if amount.is_some_and(|amount| amount <= policy.over) {
            return None;
        }
        let shown = amount.map_or_else(|| canonical_json(sent), |amount| amount.to_string());
        let auth = ctx.auth();
        let now_ms = self.now_ms();
        let ttl = i64::try_from(self.approval_ttl_of(descriptor).as_millis()).unwrap_or(i64::MAX);
        Some(ApprovalRecord {
            id: approval_id(auth.tenant(), &write.key, ctx.call_id(), now_ms),
            tenant: auth.tenant().to_owned(),
            key: write.key.clone(),
            tool: descriptor.name.to_owned(),
            request_hash: write.hash.clone(),
            policy_hash: registered.policy_hash().to_owned(),
            arguments: redacted(descriptor, &write.args),
            amount: shown,
            threshold: policy.over.to_string(),
            requester: Requester::of(auth),
            run_id: ctx.run_id().to_owned(),
            call_id: ctx.call_id().to_owned(),
            approver_permission: approver_permission(descriptor),
            created_ms: now_ms,
            expires_ms: now_ms.saturating_add(ttl),
            status: ApprovalStatus::Pending,
            decisions: Vec::new(),
        })
    }

    /// How long an approval of `descriptor` may wait for a decision.
    fn approval_ttl_of(&self, descriptor: &ToolDescriptor) -> std::time::Duration {
        descriptor
            .approval
            .and_then(|policy| policy.ttl)
            .unwrap_or(self.inner.approval_ttl)
    }

    /// The checks made again before an approved operation runs, against the tool as registered
    /// now: the run that asked for it is not aborted, the arguments against its schema, its
    /// policy against the one approved, the requester's permission now, and its business
    /// check. `Err` holds the reason to reject it ([`RUN_ABORTED`] for an aborted run).
    ///
    /// The run is read from the store (one read, on this path only): the abort rejects its
    /// run's approvals itself, and this check catches one stored after the abort, by a call
    /// that raced it.
    pub(super) async fn revalidate(
        &self,
        registered: &RegisteredTool,
        approval: &ApprovalRecord,
        args: &Value,
        ctx: &Ctx,
    ) -> Result<(), String> {
        self.run_not_aborted(approval).await?;
        let descriptor = registered.descriptor();
        let violations = registered.validator().violations_if_invalid(args);
        if let Some(first) = violations.first() {
            return Err(format!(
                "the arguments no longer match the tool's schema: {}",
                first.message
            ));
        }
        if approval.policy_hash != registered.policy_hash() {
            return Err(format!(
                "the policy of {} changed after the approval was asked (its threshold, permission, key or schema)",
                descriptor.name
            ));
        }
        if let Some(permission) = descriptor.permission {
            self.requester_holds(approval, permission).await?;
        }
        match self.check(registered, ctx, args).await {
            Ok(()) => Ok(()),
            Err(refused) => Err(match refused.why() {
                Some(why) => format!("{} ({why})", refused.what()),
                None => refused.what().to_owned(),
            }),
        }
    }

    /// That the run of `approval` was not aborted, read from the store when there is one; or
    /// why it is rejected.
    async fn run_not_aborted(&self, approval: &ApprovalRecord) -> Result<(), String> {
        let Some(store) = self.inner.store.as_deref() else {
            return Ok(());
        };
        let run = RunKey {
            tenant: &approval.tenant,
            run_id: &approval.run_id,
        };
        match store.run(run).await {
            Ok(Some(record)) if record.aborted.is_some() => Err(RUN_ABORTED.to_owned()),
            Ok(_) => Ok(()),
            Err(err) => Err(format!(
                "the state of its run {} could not be read: {err}",
                approval.run_id
            )),
        }
    }

    /// That the requester of `approval` still holds `permission`: as the approval recorded it,
    /// or as the permission source says now, when there is one; or why it is rejected.
    async fn requester_holds(
        &self,
        approval: &ApprovalRecord,
        permission: &str,
    ) -> Result<(), String> {
        let user = &approval.requester.user;
        let held = match &self.inner.permission_source {
            None => approval
                .requester
                .permissions
                .iter()
                .any(|p| p == permission),
            Some(source) => match source.permissions(&approval.tenant, user).await {
                Ok(Some(now)) => now.iter().any(|p| p == permission),
                Ok(None) => false,
                Err(err) => {
                    return Err(format!(
                        "the permissions of {user} could not be checked: {}",
                        err.what()
                    ));
                }
            },
        };
        if !held {
            return Err(format!(
                "{user} no longer holds the permission `{permission}`"
            ));
        }
        Ok(())
    }
}

/// The permission an approver of `descriptor`'s operations must hold.
fn approver_permission(descriptor: &ToolDescriptor) -> String {
    match descriptor.approval {
        Some(policy) => policy.approver_permission(descriptor.name),
        None => format!("{}:approve", descriptor.name),
    }
}

/// The decision of a revalidation that failed for `reason`.
pub(super) fn revalidation_rejected(reason: String, now_ms: i64) -> Decision {
    Decision {
        verdict: Verdict::Reject,
        by: SYSTEM_DECIDER.to_owned(),
        issuer: None,
        at_ms: now_ms,
        reason,
    }
}

/// `args` as canonical JSON, with the tool's sensitive arguments replaced by [`REDACTED`].
pub(super) fn redacted(descriptor: &ToolDescriptor, args: &Value) -> String {
    if descriptor.sensitive.is_empty() {
        return canonical_json(args);
    }
    let mut shown = args.clone();
    if let Some(object) = shown.as_object_mut() {
        for field in descriptor.sensitive {
            if let Some(value) = object.get_mut(*field) {
                *value = Value::String(REDACTED.to_owned());
            }
        }
    }
    canonical_json(&shown)
}

/// What the model reads for an operation whose approval is `approval`: it waits, or it was
/// rejected (by an approver, an expiry, the abort of its run, or the checks before it ran).
/// `replayed` when the call found the approval asked by an earlier one.
pub(super) fn approval_answer(approval: &ApprovalRecord, replayed: bool) -> CallResult {
    let explanation = Explanation {
        approval_id: Some(approval.id.clone()),
        ..approval_words(approval)
    };
    let status = if explanation.kind == ErrorKind::Rejected {
        Status::Rejected
    } else {
        Status::AwaitingApproval
    };
    CallResult {
        status,
        replayed,
        data: None,
        error: Some(Box::new(explanation)),
        steps: None,
        delivery: None,
    }
}

/// What the model reads of an operation whose approval is `approval`, but the approval's id.
fn approval_words(approval: &ApprovalRecord) -> Explanation {
    let tool = &approval.tool;
    match approval.status {
        ApprovalStatus::Pending => Explanation {
            expires_at_ms: Some(approval.expires_ms),
            ..explanation(
                ErrorKind::AwaitingApproval,
                format!(
                    "{tool} waits for a human approval and has not run: its amount {} is over {}",
                    approval.amount, approval.threshold
                ),
                Some(format!(
                    "approval {} must be decided by an approver of the tenant before it runs",
                    approval.id
                )),
                "tell the user the operation waits for approval; do not call it again with other arguments; calling it again with the same arguments later answers its outcome".to_owned(),
            )
        },
        ApprovalStatus::Approved => explanation(
            ErrorKind::AwaitingApproval,
            format!("{tool} is approved and has not run yet"),
            Some(format!(
                "approval {} was approved; the operation runs at the next call with the same arguments",
                approval.id
            )),
            "tell the user it is approved; call it again with the same arguments to run it".to_owned(),
        ),
        ApprovalStatus::Rejected if approval.is_run_aborted() => explanation(
            ErrorKind::Rejected,
            format!("{tool} was rejected and has not run"),
            Some(format!(
                "the run that asked for it was aborted, so its approval was rejected ({RUN_ABORTED}); it never runs"
            )),
            "do not repeat this call: it will not run; tell the user it was not carried out because the run that asked for it was stopped".to_owned(),
        ),
        ApprovalStatus::Rejected => explanation(
            ErrorKind::Rejected,
            format!("{tool} was rejected and has not run"),
            Some(rejection_why(approval)),
            "do not repeat this call; tell the user it was rejected and why".to_owned(),
        ),
    }
}

/// Why `approval` was rejected, by its last decision: it expired, it failed the checks before
/// it ran, or an approver rejected it.
fn rejection_why(approval: &ApprovalRecord) -> String {
    match approval.last_decision() {
        Some(d) if d.reason == crate::store::EXPIRED => {
            "the approval expired before anyone decided".to_owned()
        }
        Some(d) if d.by == SYSTEM_DECIDER => {
            format!(
                "it was approved, then failed the checks before it ran: {}",
                d.reason
            )
        }
        Some(d) => format!("{} rejected it: {}", d.by, d.reason),
        None => "it was rejected".to_owned(),
    }
}

/// `result`, the answer of a call that asked for one of `rejected` (approvals rejected since it
/// was answered), becomes the answer of its rejection.
pub(super) fn answer_late_rejection(result: &mut CallResult, rejected: &[ApprovalRecord]) {
    let asked = result.explanation().and_then(|e| e.approval_id.as_deref());
    if let Some(approval) = rejected.iter().find(|a| Some(a.id.as_str()) == asked) {
        *result = approval_answer(approval, result.replayed);
    }
}

fn explanation(kind: ErrorKind, what: String, why: Option<String>, next: String) -> Explanation {
    let mut explanation = Explanation::from(&crate::ToolError::new(kind, what).with_next(next));
    explanation.why = why;
    explanation
}
