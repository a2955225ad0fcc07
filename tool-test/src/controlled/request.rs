//! What a [`ControlledStore`](super::ControlledStore) counts and fails: the requests of the
//! [`OperationStore`] trait, one variant a method, the faults a request can be made to meet, and
//! the tally of requests answered.

use toolgate_core::store::StoreError;
#[cfg(doc)]
use toolgate_core::store::{
    ApprovalStore, AuditStore, ClaimStore, IssuerKeyStore, OperationLog, OperationStore, RunLedger,
};

/// A request of the [`OperationStore`] trait: one variant a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Request {
    /// [`ClaimStore::claim`].
    Claim,
    /// [`ClaimStore::succeed`].
    Succeed,
    /// [`ClaimStore::fail`].
    Fail,
    /// [`ClaimStore::mark_unknown`].
    MarkUnknown,
    /// [`ClaimStore::record_retry`].
    RecordRetry,
    /// [`ClaimStore::get`].
    Get,
    /// [`OperationLog::expire_leases`].
    ExpireLeases,
    /// [`OperationLog::list_unknown`].
    ListUnknown,
    /// [`OperationLog::resolve`].
    Resolve,
    /// [`OperationLog::purge`].
    Purge,
    /// [`RunLedger::begin_turn`].
    BeginTurn,
    /// [`RunLedger::charge_attempt`].
    ChargeAttempt,
    /// [`RunLedger::note_failure`].
    NoteFailure,
    /// [`RunLedger::abort_run`].
    AbortRun,
    /// [`RunLedger::run`].
    Run,
    /// [`ApprovalStore::decide`].
    Decide,
    /// [`ApprovalStore::approval`].
    Approval,
    /// [`ApprovalStore::list_approvals`].
    ListApprovals,
    /// [`ApprovalStore::list_approved`].
    ListApproved,
    /// [`ApprovalStore::expire_approvals`].
    ExpireApprovals,
    /// [`ApprovalStore::reject_claimed`].
    RejectClaimed,
    /// [`OperationLog::list_operations`].
    ListOperations,
    /// [`AuditStore::append_audit`].
    AppendAudit,
    /// [`AuditStore::append_audits`].
    AppendAudits,
    /// [`AuditStore::audit`].
    Audit,
    /// [`IssuerKeyStore::add_issuer_key`].
    AddIssuerKey,
    /// [`IssuerKeyStore::issuer_keys`].
    IssuerKeys,
}

/// How many kinds of request there are.
pub(super) const KINDS: usize = 27;

impl Request {
    /// Every request.
    pub const ALL: [Request; KINDS] = [
        Request::Claim,
        Request::Succeed,
        Request::Fail,
        Request::MarkUnknown,
        Request::RecordRetry,
        Request::Get,
        Request::ExpireLeases,
        Request::ListUnknown,
        Request::Resolve,
        Request::Purge,
        Request::BeginTurn,
        Request::ChargeAttempt,
        Request::NoteFailure,
        Request::AbortRun,
        Request::Run,
        Request::Decide,
        Request::Approval,
        Request::ListApprovals,
        Request::ListApproved,
        Request::ExpireApprovals,
        Request::RejectClaimed,
        Request::ListOperations,
        Request::AppendAudit,
        Request::AppendAudits,
        Request::Audit,
        Request::AddIssuerKey,
        Request::IssuerKeys,
    ];

    /// The writes that record what became of a claimed write: `succeed`, `fail` and
    /// `mark_unknown`.
    pub const OUTCOMES: [Request; 3] = [Request::Succeed, Request::Fail, Request::MarkUnknown];

    /// The method's name.
    pub fn name(self) -> &'static str {
        match self {
            Request::Claim => "claim",
            Request::Succeed => "succeed",
            Request::Fail => "fail",
            Request::MarkUnknown => "mark_unknown",
            Request::RecordRetry => "record_retry",
            Request::Get => "get",
            Request::ExpireLeases => "expire_leases",
            Request::ListUnknown => "list_unknown",
            Request::Resolve => "resolve",
            Request::Purge => "purge",
            Request::BeginTurn => "begin_turn",
            Request::ChargeAttempt => "charge_attempt",
            Request::NoteFailure => "note_failure",
            Request::AbortRun => "abort_run",
            Request::Run => "run",
            Request::Decide => "decide",
            Request::Approval => "approval",
            Request::ListApprovals => "list_approvals",
            Request::ListApproved => "list_approved",
            Request::ExpireApprovals => "expire_approvals",
            Request::RejectClaimed => "reject_claimed",
            Request::ListOperations => "list_operations",
            Request::AppendAudit => "append_audit",
            Request::AppendAudits => "append_audits",
            Request::Audit => "audit",
            Request::AddIssuerKey => "add_issuer_key",
            Request::IssuerKeys => "issuer_keys",
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// What a request made to fail answers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// The server refuses connections: [`StoreError::Unreachable`] whose source is an I/O
    /// error of kind `ConnectionRefused`. Transient: the dispatcher retries it.
    Refused,
    /// The connection was lost during the request: [`StoreError::Unreachable`] whose source is
    /// an I/O error of kind `ConnectionReset`. Transient too.
    Reset,
    /// The database answered with an error: [`StoreError::Backend`] with these words. Not
    /// transient.
    Backend(String),
}

impl Fault {
    /// The error `request` answers with this fault.
    pub fn error(&self, request: Request) -> StoreError {
        let io = |kind| std::io::Error::from(kind);
        match self {
            Fault::Refused => {
                StoreError::unreachable(request.name(), io(std::io::ErrorKind::ConnectionRefused))
            }
            Fault::Reset => {
                StoreError::unreachable(request.name(), io(std::io::ErrorKind::ConnectionReset))
            }
            Fault::Backend(words) => StoreError::backend(words.clone()),
        }
    }
}

/// How many requests of each kind a [`ControlledStore`](super::ControlledStore) saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally([u64; KINDS]);

impl Tally {
    /// Counts one more answered `request`.
    pub(super) fn count(&mut self, request: Request) {
        self.0[request.index()] += 1;
    }

    /// How many of `request`.
    pub fn of(&self, request: Request) -> u64 {
        self.0[request.index()]
    }
}
