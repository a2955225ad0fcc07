//! Approvals: an operation over its tool's threshold waits, durably, for a human decision.
//!
//! A claim that carries an [`ApprovalRecord`] (the dispatcher's, for a call over the threshold)
//! stores its operation as `awaiting_approval` and the approval as [`ApprovalStatus::Pending`]
//! instead of running it ([`ClaimStep::Await`](super::ClaimStep::Await)). An approver decides
//! through [`ApprovalStore::decide`](super::ApprovalStore::decide), which follows
//! [`ApprovalRecord::decide_step`] in every store. An approved operation runs once: the next
//! claim of its key with the same request takes it into `processing`
//! ([`ClaimStep::RunApproved`](super::ClaimStep::RunApproved)), whoever makes it first. The
//! abort of its run ([`RunLedger::abort_run`](super::RunLedger::abort_run)) rejects an
//! approval that has not run as [`RUN_ABORTED`].

use super::claim_token::ClaimToken;
use crate::auth::AuthContext;
use crate::identity::Operator;

/// Who decided an approval that no human decided: an expiry, the abort of its run, or a
/// revalidation that failed after the approval.
pub const SYSTEM_DECIDER: &str = "toolgate";

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApprovalStatus {
    /// Waiting for a decision.
    Pending,
    /// Approved; the operation runs at the next claim of its key (the model's call again, or the
    /// application's runner), once.
    Approved,
    /// Rejected by an approver, expired, rejected with its aborted run ([`RUN_ABORTED`]), or
    /// refused by the revalidation before it ran.
    Rejected,
}

impl ApprovalStatus {
    /// The stored name: `pending`, `approved`, `rejected`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Rejected => "rejected",
        }
    }

    /// The status named `name`, as [`ApprovalStatus::as_str`] writes it.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "pending" => ApprovalStatus::Pending,
            "approved" => ApprovalStatus::Approved,
            "rejected" => ApprovalStatus::Rejected,
            _ => return None,
        })
    }
}

/// Approve or reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Let the operation run.
    Approve,
    /// Do not run it.
    Reject,
}

impl Verdict {
    /// `approve` or `reject`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Approve => "approve",
            Verdict::Reject => "reject",
        }
    }
}

/// One decision on an approval: who, when, why. An approval holds every decision made on it, in
/// order: a human's, and after an approval possibly [`SYSTEM_DECIDER`]'s rejection when the
/// revalidation failed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Decision {
    /// Approve or reject.
    pub verdict: Verdict,
    /// The approver's subject, or [`SYSTEM_DECIDER`].
    pub by: String,
    /// Who vouched for the approver ([`Operator::issuer`](crate::identity::Operator::issuer)):
    /// the issuer of their token, or the application's login; `None` for the system's
    /// decisions and for those stored before issuers were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// When, in milliseconds since the epoch.
    pub at_ms: i64,
    /// Why, in the approver's words (`expired` for an expiry).
    pub reason: String,
}

/// Who asked for the operation, as they were when they asked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Requester {
    /// The requester's user (the session's).
    pub user: String,
    /// The permissions the session held when the call was made.
    pub permissions: Vec<String>,
}

impl Requester {
    /// The requester of a call made in the session of `auth`.
    pub fn of(auth: &AuthContext) -> Self {
        Requester {
            user: auth.user().to_owned(),
            permissions: auth.permissions().map(str::to_owned).collect(),
        }
    }
}

/// One approval as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRecord {
    /// The approval's id (`apr_` and hex digits), unique across tenants.
    pub id: String,
    /// The tenant of the operation, and of every approver who may decide.
    pub tenant: String,
    /// The operation's idempotency key.
    pub key: String,
    /// The tool's wire name.
    pub tool: String,
    /// The request hash of the call waiting (tool name and canonical arguments).
    pub request_hash: String,
    /// The hash of the tool's policy and schema when the call was made: a changed threshold or
    /// tool no longer matches it, and the revalidation rejects the approval.
    pub policy_hash: String,
    /// The call's arguments as canonical JSON, with the tool's sensitive arguments redacted: what
    /// an approver is shown.
    pub arguments: String,
    /// The amount the threshold was compared with, as the model sent it.
    pub amount: String,
    /// The threshold it exceeded.
    pub threshold: String,
    /// Who asked.
    pub requester: Requester,
    /// The run of the call.
    pub run_id: String,
    /// The call's id in its turn.
    pub call_id: String,
    /// The permission an approver must hold.
    pub approver_permission: String,
    /// When the call asked.
    pub created_ms: i64,
    /// Until when a decision may be made: from then on the approval is rejected as `expired`.
    pub expires_ms: i64,
    /// Where it stands.
    pub status: ApprovalStatus,
    /// Every decision made on it, in order.
    pub decisions: Vec<Decision>,
}

impl ApprovalRecord {
    /// Whether a pending approval has passed its expiry at `now_ms`.
    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.status == ApprovalStatus::Pending && self.expires_ms <= now_ms
    }

    /// The last decision, if any.
    pub fn last_decision(&self) -> Option<&Decision> {
        self.decisions.last()
    }

    /// Whether it was rejected because its run was aborted ([`RUN_ABORTED`]).
    pub fn is_run_aborted(&self) -> bool {
        self.status == ApprovalStatus::Rejected
            && self
                .last_decision()
                .is_some_and(|d| d.by == SYSTEM_DECIDER && d.reason == RUN_ABORTED)
    }

    /// Whether the abort of its run rejects it: it waits for a decision, or it is approved and
    /// its operation has not started (`operation_waits`: the operation is still
    /// `awaiting_approval` under this approval).
    pub fn falls_with_its_run(&self, operation_waits: bool) -> bool {
        match self.status {
            ApprovalStatus::Pending => true,
            ApprovalStatus::Approved => operation_waits,
            ApprovalStatus::Rejected => false,
        }
    }

    /// What a decision asked for by `request` does with this approval: the rules of
    /// [`ApprovalStore::decide`](super::ApprovalStore::decide), in one place for every store.
    ///
    /// In order: an approval of another tenant is not found (no tenant learns of another's);
    /// one rejected with its aborted run is refused as [`Refusal::RunAborted`], whatever the
    /// verdict; another decided one is refused; an expired one is rejected as `expired`
    /// (whoever asked); the approver must hold [`ApprovalRecord::approver_permission`] and must
    /// not be the requester.
    pub fn decide_step(&self, request: &DecideRequest<'_>) -> DecideStep {
        if self.tenant != request.approver.tenant() {
            return DecideStep::Refuse(Refusal::NotFound);
        }
        if self.is_run_aborted() {
            return DecideStep::Refuse(Refusal::RunAborted);
        }
        if self.status != ApprovalStatus::Pending {
            return DecideStep::Refuse(Refusal::AlreadyDecided);
        }
        if self.is_expired(request.now_ms) {
            return DecideStep::Expire;
        }
        if !request.approver.has_permission(&self.approver_permission) {
            return DecideStep::Refuse(Refusal::MissingPermission);
        }
        if request.approver.subject() == self.requester.user {
            return DecideStep::Refuse(Refusal::SelfDecision);
        }
        DecideStep::Apply
    }

    /// The decision `request` makes, as stored.
    pub fn decision_of(request: &DecideRequest<'_>) -> Decision {
        Decision {
            verdict: request.verdict,
            by: request.approver.subject().to_owned(),
            issuer: Some(request.approver.issuer().to_owned()),
            at_ms: request.now_ms,
            reason: request.reason.to_owned(),
        }
    }

    /// The decision an expiry at `now_ms` makes.
    pub fn expiry(now_ms: i64) -> Decision {
        Decision {
            verdict: Verdict::Reject,
            by: SYSTEM_DECIDER.to_owned(),
            issuer: None,
            at_ms: now_ms,
            reason: EXPIRED.to_owned(),
        }
    }

    /// The decision the abort of its run at `now_ms` makes ([`RUN_ABORTED`]).
    pub fn run_aborted(now_ms: i64) -> Decision {
        Decision {
            verdict: Verdict::Reject,
            by: SYSTEM_DECIDER.to_owned(),
            issuer: None,
            at_ms: now_ms,
            reason: RUN_ABORTED.to_owned(),
        }
    }
}

/// The reason of an expiry's rejection.
pub const EXPIRED: &str = "expired";

/// The reason of the rejection of an approval whose run was aborted: by the abort itself
/// ([`RunLedger::abort_run`](super::RunLedger::abort_run)), or by the checks made
/// before an approved operation runs. Such an approval never runs and is never decided again.
pub const RUN_ABORTED: &str = "run_aborted";

/// A decision asked of a store.
#[derive(Debug, Clone, Copy)]
pub struct DecideRequest<'a> {
    /// The approval's id.
    pub id: &'a str,
    /// The approver, proven by an [`Authenticator`](crate::identity::Authenticator): tenant,
    /// subject and permissions, never from the approval.
    pub approver: &'a Operator,
    /// Approve or reject.
    pub verdict: Verdict,
    /// Why.
    pub reason: &'a str,
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
}

/// The rejection of an approved operation that failed its revalidation, by the claim's holder
/// ([`ApprovalStore::reject_claimed`](super::ApprovalStore::reject_claimed)).
#[derive(Debug, Clone, Copy)]
pub struct ClaimedRejection<'a> {
    /// The claim of the operation.
    pub owner: &'a ClaimToken,
    /// The decision appended to its approval.
    pub decision: &'a Decision,
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
}

/// A sweep of the pending approvals past their expiry
/// ([`ApprovalStore::expire_approvals`](super::ApprovalStore::expire_approvals)).
#[derive(Debug, Clone, Copy)]
pub struct ApprovalSweep {
    /// Now, in milliseconds since the epoch: approvals that expired before it are rejected.
    pub now_ms: i64,
    /// At most this many approvals are rejected.
    pub limit: u32,
}

/// What a decision does with an approval ([`ApprovalRecord::decide_step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecideStep {
    /// Store the decision: an approval becomes `approved` (its operation still
    /// `awaiting_approval`, to run at its next claim); a rejection makes both `rejected`.
    Apply,
    /// Past its expiry: store the rejection as [`EXPIRED`] (the operation `rejected`), and
    /// answer [`Refusal::Expired`].
    Expire,
    /// Change nothing and answer the refusal.
    Refuse(Refusal),
}

/// Why a decision was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No approval with this id in the approver's tenant.
    NotFound,
    /// It was decided already (or expired earlier).
    AlreadyDecided,
    /// It expired before this decision; it is now rejected as `expired`.
    Expired,
    /// The approver does not hold the approval permission.
    MissingPermission,
    /// The approver is the requester.
    SelfDecision,

    /// Its run was aborted, and the approval was rejected with it ([`RUN_ABORTED`]): it never
    /// runs, whatever an approver decides.
    RunAborted,
}

impl Refusal {
    /// A sentence for the approver: what was refused and what to do instead.
    pub fn explain(self, approval: Option<&ApprovalRecord>) -> String {
        match (self, approval) {
            (Refusal::NotFound, _) => {
                "there is no approval with this id in your tenant; list the waiting ones with `approvals list`".to_owned()
            }
            (Refusal::AlreadyDecided, Some(a)) => format!(
                "approval {} was already decided ({}); a decision stands and is not made twice",
                a.id,
                a.status.as_str()
            ),
            (Refusal::AlreadyDecided, None) => {
                "the approval was already decided; a decision stands and is not made twice".to_owned()
            }
            (Refusal::Expired, _) => {
                "the approval expired before this decision and is now rejected as `expired`; the call must be made again to ask anew".to_owned()
            }
            (Refusal::MissingPermission, Some(a)) => format!(
                "deciding on approval {} takes the permission `{}`, which the approver does not hold",
                a.id, a.approver_permission
            ),
            (Refusal::MissingPermission, None) => {
                "the approver does not hold the approval permission".to_owned()
            }
            (Refusal::SelfDecision, Some(a)) => format!(
                "{} asked for approval {} and cannot decide on it; another approver of the tenant must",
                a.requester.user, a.id
            ),
            (Refusal::SelfDecision, None) => {
                "the requester cannot decide on their own approval; another approver must".to_owned()
            }
            (Refusal::RunAborted, Some(a)) => format!(
                "approval {} was rejected (`run_aborted`) when its run {} was aborted; it never runs, and no decision changes that",
                a.id, a.run_id
            ),
            (Refusal::RunAborted, None) => {
                "the approval was rejected (`run_aborted`) when its run was aborted; it never runs, and no decision changes that".to_owned()
            }
        }
    }
}

/// The answer to [`ApprovalStore::decide`](super::ApprovalStore::decide).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// The decision was stored; the approval after it.
    Applied(ApprovalRecord),
    /// Nothing was decided (an expiry was stored, for [`Refusal::Expired`]); the approval as it
    /// stands, unless it was not found.
    Refused {
        /// Why.
        refusal: Refusal,
        /// The approval, when the approver may see it.
        approval: Option<ApprovalRecord>,
    },
}

/// Which approvals to list.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApprovalQuery<'a> {
    /// Only this tenant's.
    pub tenant: Option<&'a str>,
    /// Only those in this status.
    pub status: Option<ApprovalStatus>,
    /// At most this many; 0 means no limit.
    pub limit: u32,
}

impl ApprovalQuery<'_> {
    /// Whether `approval` is listed.
    pub fn admits(&self, approval: &ApprovalRecord) -> bool {
        self.tenant.is_none_or(|tenant| approval.tenant == tenant)
            && self.status.is_none_or(|status| approval.status == status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval() -> ApprovalRecord {
        ApprovalRecord {
            id: "apr_1".into(),
            tenant: "acme".into(),
            key: "k".into(),
            tool: "issue_refund".into(),
            request_hash: "h".into(),
            policy_hash: "p".into(),
            arguments: "{}".into(),
            amount: "8000".into(),
            threshold: "5000".into(),
            requester: Requester {
                user: "agent".into(),
                permissions: vec!["refund:create".into()],
            },
            run_id: "r1".into(),
            call_id: "call_1".into(),
            approver_permission: "refund:approve".into(),
            created_ms: 0,
            expires_ms: 100,
            status: ApprovalStatus::Pending,
            decisions: Vec::new(),
        }
    }

    fn step(approver: &AuthContext, now_ms: i64, approval: &ApprovalRecord) -> DecideStep {
        let approver = Operator::for_test(approver.clone());
        approval.decide_step(&DecideRequest {
            id: "apr_1",
            approver: &approver,
            verdict: Verdict::Approve,
            reason: "ok",
            now_ms,
        })
    }

    #[test]
    fn the_rules_of_a_decision_in_order() {
        let manager = AuthContext::new("acme", "manager").with_permissions(["refund:approve"]);
        let a = approval();
        assert_eq!(step(&manager, 99, &a), DecideStep::Apply);
        assert_eq!(step(&manager, 100, &a), DecideStep::Expire);
        let other_tenant =
            AuthContext::new("globex", "manager").with_permissions(["refund:approve"]);
        assert_eq!(
            step(&other_tenant, 0, &a),
            DecideStep::Refuse(Refusal::NotFound)
        );
        let clerk = AuthContext::new("acme", "clerk");
        assert_eq!(
            step(&clerk, 0, &a),
            DecideStep::Refuse(Refusal::MissingPermission)
        );
        let requester = AuthContext::new("acme", "agent").with_permissions(["refund:approve"]);
        assert_eq!(
            step(&requester, 0, &a),
            DecideStep::Refuse(Refusal::SelfDecision)
        );
        let decided = ApprovalRecord {
            status: ApprovalStatus::Approved,
            ..approval()
        };
        assert_eq!(
            step(&manager, 0, &decided),
            DecideStep::Refuse(Refusal::AlreadyDecided)
        );
        // A decided approval is not expired again.
        assert_eq!(
            step(&manager, 1000, &decided),
            DecideStep::Refuse(Refusal::AlreadyDecided)
        );
        // Rejected with its run: refused as such, whoever asks and whatever the verdict.
        let fallen = ApprovalRecord {
            status: ApprovalStatus::Rejected,
            decisions: vec![ApprovalRecord::run_aborted(5)],
            ..approval()
        };
        assert!(fallen.is_run_aborted());
        assert_eq!(
            step(&manager, 0, &fallen),
            DecideStep::Refuse(Refusal::RunAborted)
        );
        assert_eq!(
            step(&requester, 1000, &fallen),
            DecideStep::Refuse(Refusal::RunAborted)
        );
        let expired = ApprovalRecord {
            status: ApprovalStatus::Rejected,
            decisions: vec![ApprovalRecord::expiry(5)],
            ..approval()
        };
        assert!(!expired.is_run_aborted());
        assert_eq!(
            step(&manager, 0, &expired),
            DecideStep::Refuse(Refusal::AlreadyDecided)
        );
    }

    #[test]
    fn what_the_abort_of_a_run_rejects() {
        let pending = approval();
        assert!(pending.falls_with_its_run(true) && pending.falls_with_its_run(false));
        let approved = ApprovalRecord {
            status: ApprovalStatus::Approved,
            ..approval()
        };
        assert!(approved.falls_with_its_run(true), "approved, not run yet");
        assert!(
            !approved.falls_with_its_run(false),
            "approved, already running or run"
        );
        let rejected = ApprovalRecord {
            status: ApprovalStatus::Rejected,
            ..approval()
        };
        assert!(!rejected.falls_with_its_run(true));
    }

    #[test]
    fn statuses_round_trip_their_names() {
        for status in [
            ApprovalStatus::Pending,
            ApprovalStatus::Approved,
            ApprovalStatus::Rejected,
        ] {
            assert_eq!(ApprovalStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(ApprovalStatus::parse("maybe"), None);
    }
}
