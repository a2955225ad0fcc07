//! The records a store keeps and the words it answers with.

use std::time::Duration;

use crate::idempotency::UnkeyedRequest;

use super::approval::{ApprovalRecord, ApprovalStatus};
use super::attempt_error::AttemptError;
use super::audit::AuditEntry;
use super::claim_token::ClaimToken;
use super::steps::Journal;

/// Where an operation stands. Every transition is persisted before the next step acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OperationState {
    /// A worker holds the lease and may be calling the provider now.
    Processing,
    /// Applied; the result is stored.
    Succeeded,
    /// Definitely not applied; a new call may claim the key again.
    Failed,
    /// Sent, and nobody knows whether it was applied; only the reconciler settles it.
    OutcomeUnknown,
    /// Over its tool's approval threshold: not run, waiting for a human decision on its
    /// approval. Approved, it runs at the next claim of its key with the same request.
    AwaitingApproval,
    /// Not run: its approval was rejected, expired, or failed the revalidation after approval.
    /// A call with other arguments may claim the key again, as after `failed`.
    Rejected,
    /// An outbox tool's body committed with its event: its rows are written and the event's
    /// delivery is owed; a worker delivers it (the event says how far it got). Becomes
    /// `succeeded` once delivered, `outcome_unknown` when a delivery's outcome is unknown.
    Queued,
    /// Some of its journaled steps succeeded and a later one failed (definitely not applied):
    /// the result holds the steps' report. The same request claims it again and runs only the
    /// steps not done; another request is a conflict, since the steps done have acted.
    Partial,
}

impl OperationState {
    /// The name stored in the database: `processing`, `succeeded`, `failed`, `outcome_unknown`,
    /// `awaiting_approval`, `rejected`.
    pub const fn as_str(self) -> &'static str {
        match self {
            OperationState::Processing => "processing",
            OperationState::Succeeded => "succeeded",
            OperationState::Failed => "failed",
            OperationState::OutcomeUnknown => "outcome_unknown",
            OperationState::AwaitingApproval => "awaiting_approval",
            OperationState::Rejected => "rejected",
            OperationState::Queued => "queued",
            OperationState::Partial => "partial",
        }
    }

    /// Every state, in the order of the state machine.
    pub const ALL: [OperationState; 8] = [
        OperationState::Processing,
        OperationState::Succeeded,
        OperationState::Failed,
        OperationState::OutcomeUnknown,
        OperationState::AwaitingApproval,
        OperationState::Rejected,
        OperationState::Queued,
        OperationState::Partial,
    ];

    /// The state named `name`, as [`OperationState::as_str`] writes it.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "processing" => OperationState::Processing,
            "succeeded" => OperationState::Succeeded,
            "failed" => OperationState::Failed,
            "outcome_unknown" => OperationState::OutcomeUnknown,
            "awaiting_approval" => OperationState::AwaitingApproval,
            "rejected" => OperationState::Rejected,
            "queued" => OperationState::Queued,
            "partial" => OperationState::Partial,
            _ => return None,
        })
    }

    /// `succeeded`, `failed` and `rejected`: the settled states, which retention may purge.
    /// (`queued` still owes its delivery; `partial` has acted and may be completed.)
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            OperationState::Succeeded | OperationState::Failed | OperationState::Rejected
        )
    }
}

/// One operation as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationRecord {
    /// The tenant; records are scoped by it.
    pub tenant: String,
    /// The idempotency key (derived by the dispatcher, or given by the application).
    pub key: String,
    /// The tool's wire name.
    pub tool: String,
    /// The hash of the tool name and the canonical arguments.
    pub request_hash: String,
    /// The arguments as canonical JSON text, for the reconcile hook and the runner of approved
    /// operations; the tool's `#[sensitive]` arguments read `"[redacted]"`: their values are
    /// never stored.
    pub arguments: String,
    /// Where the operation stands.
    pub state: OperationState,
    /// How many times it was claimed to run (1 for the first claim; 0 while a new operation
    /// awaits its approval).
    pub attempt: u32,
    /// Until when the current worker's lease holds, for `processing`.
    pub lease_until_ms: i64,
    /// The tool's result as JSON text, for `succeeded`.
    pub result: Option<String>,
    /// Every attempt's error, in order.
    pub errors: Vec<AttemptError>,
    /// How many times the reconciler asked and still did not know.
    pub reconcile_tries: u32,
    /// When it was created.
    pub created_ms: i64,
    /// When it last changed.
    pub updated_ms: i64,
    /// The operation's latest approval, when it needed one.
    pub approval_id: Option<String>,
}

/// Which operations to list.
#[derive(Debug, Clone, Copy, Default)]
pub struct OperationQuery<'a> {
    /// Only this tenant's.
    pub tenant: Option<&'a str>,
    /// Only those in this state.
    pub state: Option<OperationState>,
    /// Only those a call of this run touched: the keys its audit records name.
    pub run_id: Option<&'a str>,
    /// At most this many; 0 means no limit.
    pub limit: u32,
}

/// A request to claim a key.
#[derive(Debug, Clone, Copy)]
pub struct ClaimRequest<'a> {
    /// The tenant.
    pub tenant: &'a str,
    /// The idempotency key.
    pub key: &'a str,
    /// The tool's wire name.
    pub tool: &'a str,
    /// The hash of the tool name and the canonical arguments
    /// ([`request_hash`](crate::idempotency::request_hash)).
    pub request_hash: &'a str,
    /// The request as its unkeyed (version-1) hash saw it, when the caller knows its arguments:
    /// a record stored before request hashes were keyed still matches it
    /// ([`ClaimRequest::same_request`]). `None` compares `request_hash` alone.
    pub unkeyed: Option<UnkeyedRequest<'a>>,
    /// The canonical arguments, kept for the reconcile hook, sensitive ones redacted.
    pub arguments: &'a str,
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
    /// How long the lease of a new claim lasts.
    pub lease: Duration,
    /// Whether an expired lease may be taken over (the tool's downstream honours the key, so
    /// running again with the same key is safe); otherwise it becomes `outcome_unknown`.
    pub takeover: bool,
    /// For a call over its tool's approval threshold: the approval to store, pending, with the
    /// operation `awaiting_approval` instead of `processing` (where a new claim would run it).
    pub approval: Option<&'a ApprovalRecord>,
}

impl ClaimRequest<'_> {
    /// The state a new record of this claim starts in: `awaiting_approval` with an approval,
    /// otherwise `processing` (attempt 1, leased).
    pub fn first_state(&self) -> OperationState {
        if self.approval.is_some() {
            OperationState::AwaitingApproval
        } else {
            OperationState::Processing
        }
    }

    /// The attempt a new record of this claim starts at: 0 while it awaits its approval, 1 when
    /// it runs now.
    pub fn first_attempt(&self) -> u32 {
        u32::from(self.approval.is_none())
    }

    /// Whether `stored`, the request hash of a record under the key, is this request's: equal to
    /// `request_hash`, or a version-1 hash of the same request ([`ClaimRequest::unkeyed`]).
    /// Stores compare hashes with it, never with `==`.
    pub fn same_request(&self, stored: &str) -> bool {
        stored == self.request_hash || self.unkeyed.is_some_and(|request| request.matches(stored))
    }

    /// `now_ms + lease`, saturating.
    pub fn lease_until_ms(&self) -> i64 {
        let lease = i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX);
        self.now_ms.saturating_add(lease)
    }

    /// Whether [`ClaimRequest::step`] needs the journal of `record`'s steps: only for a
    /// `processing` record whose lease has ended and that the tool does not let be taken over.
    /// Otherwise a store may pass [`Journal::Empty`] without reading it.
    pub fn needs_journal(&self, record: &OperationRecord) -> bool {
        record.state == OperationState::Processing
            && record.lease_until_ms <= self.now_ms
            && !self.takeover
    }

    /// What this claim does with `record`, the record already under its key, `approval`, the
    /// record's latest approval ([`OperationRecord::approval_id`]) if it has one, and `journal`,
    /// what its steps say (see [`ClaimRequest::needs_journal`]): the rules of
    /// [`ClaimStore::claim`](super::ClaimStore::claim), in one place for every store.
    ///
    /// An ended lease is taken over (attempt + 1) when the tool's downstream honours the key, or
    /// when the journal is [`Journal::Settled`]: every step the crashed worker began has its
    /// outcome recorded, so the new attempt skips the succeeded ones and runs the rest. A
    /// `partial` record is claimed again by the same request, as a `failed` one; a `queued` one
    /// is answered as it is.
    ///
    /// A `failed` record (definitely not applied) is taken over by any request under its key,
    /// with the same or with corrected arguments: the claim stores this request's hash and
    /// arguments. So is a `rejected` one by a request with other arguments; the same request
    /// is answered its rejection. Another request is a conflict only while the earlier one may
    /// have acted or may still act (`processing`, `succeeded`, `outcome_unknown`,
    /// `awaiting_approval`).
    pub fn step(
        &self,
        record: &OperationRecord,
        approval: Option<&ApprovalRecord>,
        journal: Journal,
    ) -> ClaimStep {
        let same = self.same_request(&record.request_hash);
        let take = if self.approval.is_some() {
            ClaimStep::Await
        } else {
            ClaimStep::Reclaim
        };
        match record.state {
            OperationState::Failed => return take,
            OperationState::Rejected if !same => return take,
            _ if !same => return ClaimStep::Conflict,
            OperationState::Partial => return take,
            _ => {}
        }
        let expired =
            record.state == OperationState::Processing && record.lease_until_ms <= self.now_ms;
        match (record.state, approval) {
            (OperationState::Rejected, Some(_)) => ClaimStep::AnswerApproval,
            (OperationState::AwaitingApproval, Some(a)) => match a.status {
                ApprovalStatus::Approved => ClaimStep::RunApproved,
                ApprovalStatus::Pending if a.is_expired(self.now_ms) => ClaimStep::ExpireApproval,
                _ => ClaimStep::AnswerApproval,
            },
            _ if expired && (self.takeover || journal == Journal::Settled) => ClaimStep::Reclaim,
            _ if expired => ClaimStep::ExpireToUnknown,
            _ => ClaimStep::Existing,
        }
    }
}

/// What a claim does with the record already under its key ([`ClaimRequest::step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimStep {
    /// Another request under the key: answer the conflict, write nothing.
    Conflict,
    /// `failed`, or an expired lease the tool lets be taken over: attempt + 1, a new lease, and
    /// this request's hash and arguments (which differ from the stored ones only for `failed`).
    Reclaim,
    /// An expired lease that may not be taken over: store `outcome_unknown`, answer the record.
    ExpireToUnknown,
    /// Anything else: answer the record as it is.
    Existing,
    /// `failed`, or `rejected` under other arguments, and this claim carries an approval: store
    /// it, pending, with the record `awaiting_approval` under this request (attempt unchanged),
    /// and answer [`Claim::Approval`].
    Await,
    /// `awaiting_approval` and its approval approved: attempt + 1, a new lease, `processing`;
    /// answer [`Claim::Acquired`] with the approval. Only one claim ever makes this step.
    RunApproved,
    /// `awaiting_approval` and its approval pending past its expiry: store the approval
    /// rejected as `expired` and the record `rejected`; answer [`Claim::Approval`].
    ExpireApproval,
    /// `awaiting_approval` (pending) or `rejected`: answer [`Claim::Approval`] with the approval
    /// as it stands.
    AnswerApproval,
}

/// The answer to a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This worker owns the operation now and must present `attempt` on every later write.
    Acquired {
        /// The attempt claimed (1 for a new operation).
        attempt: u32,
        /// The approval the operation runs under, when it waited for one: the dispatcher
        /// revalidates the call before it runs.
        approved: Option<ApprovalRecord>,
    },
    /// The operation exists with the same request; the record as it stands.
    Existing(OperationRecord),
    /// The key exists with other arguments; nothing was written.
    Conflict {
        /// The tool of the existing record.
        tool: String,
    },
    /// The operation waits for its approval (stored by this claim, or earlier), or was
    /// rejected: the approval as it stands.
    Approval(ApprovalRecord),
}

/// A success recorded by the claim's holder ([`ClaimStore::succeed`](super::ClaimStore::succeed)).
#[derive(Debug, Clone, Copy)]
pub struct Success<'a> {
    /// The claim of the operation.
    pub owner: &'a ClaimToken,
    /// The tool's result, as JSON text.
    pub result: &'a str,
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
    /// The call's audit record, appended with the success when given.
    pub audit: Option<&'a AuditEntry>,
}

/// An attempt that ended in an error, recorded by the claim's holder
/// ([`ClaimStore::fail`](super::ClaimStore::fail),
/// [`ClaimStore::mark_unknown`](super::ClaimStore::mark_unknown)).
#[derive(Debug, Clone, Copy)]
pub struct AttemptFailure<'a> {
    /// The claim of the operation.
    pub owner: &'a ClaimToken,
    /// The attempt's error, appended to the record's.
    pub error: &'a AttemptError,
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
}

/// An attempt that failed and will be retried under the same claim
/// ([`ClaimStore::record_retry`](super::ClaimStore::record_retry)).
#[derive(Debug, Clone, Copy)]
pub struct RetryNote<'a> {
    /// The claim of the operation.
    pub owner: &'a ClaimToken,
    /// The attempt's error, appended to the record's.
    pub error: &'a AttemptError,
    /// The renewed lease's end, in milliseconds since the epoch.
    pub lease_until_ms: i64,
}

/// What the reconcile hook found out about an `outcome_unknown` operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution<'a> {
    /// It was applied; the provider's result as JSON text.
    Applied(&'a str),
    /// It was not applied: safe to claim again.
    NotApplied,
    /// Still unknown: ask again later.
    StillUnknown,
}

/// The settlement of an `outcome_unknown` operation
/// ([`OperationLog::resolve`](super::OperationLog::resolve)).
#[derive(Debug, Clone, Copy)]
pub struct ResolveRequest<'a> {
    /// The operation's tenant.
    pub tenant: &'a str,
    /// The operation's idempotency key.
    pub key: &'a str,
    /// What the reconcile hook found out.
    pub resolution: Resolution<'a>,
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
}

/// A store could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The record is no longer `processing` under the attempt presented: another worker took
    /// it over, or it was settled. Nothing was changed.
    #[error("the claim on {key} (attempt {attempt}) is no longer held; nothing was changed")]
    LostClaim {
        /// The key.
        key: String,
        /// The attempt presented.
        attempt: u32,
    },
    /// The database answered with an error, or failed in a way that is not known to pass.
    #[error("the operation store failed: {what}")]
    Backend {
        /// What failed, in words for the operator.
        what: String,
        /// The backend's error, when one caused it (a `sqlx::Error` in the stores of toolgate),
        /// also returned by [`std::error::Error::source`].
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// The database could not be reached: no connection within the store's bounded wait, a
    /// connection lost, a server shutting down or not yet accepting connections. Transient: the
    /// same request may succeed in a moment. A write that failed this way may or may not have
    /// been applied by the database; a claim that failed this way never ran its tool.
    #[error("the operation store could not be reached ({doing}): {source}")]
    Unreachable {
        /// What the store was doing, in a few words ("claim a key").
        doing: String,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A stored value could not be read back.
    #[error("the operation store holds a record it cannot read: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// A [`StoreError::Unreachable`] while the store did `doing`, keeping `source`.
    pub fn unreachable(
        doing: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        StoreError::Unreachable {
            doing: doing.into(),
            source: source.into(),
        }
    }

    /// A [`StoreError::Backend`] saying `what` failed, with no error of the backend's behind it
    /// (a file that belongs to another program, a stored value that cannot be encoded).
    pub fn backend(what: impl Into<String>) -> Self {
        StoreError::Backend {
            what: what.into(),
            source: None,
        }
    }

    /// A [`StoreError::Backend`] saying `what` failed, keeping the backend's error as its
    /// [`source`](std::error::Error::source).
    pub fn backend_with_source(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        StoreError::Backend {
            what: what.into(),
            source: Some(source.into()),
        }
    }

    /// Whether the store could not be reached: a transient fault worth trying again.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, StoreError::Unreachable { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000;

    fn record(state: OperationState, lease_until_ms: i64) -> OperationRecord {
        OperationRecord {
            tenant: "acme".into(),
            key: "k".into(),
            tool: "issue_refund".into(),
            request_hash: "h1".into(),
            arguments: "{}".into(),
            state,
            attempt: 1,
            lease_until_ms,
            result: None,
            errors: Vec::new(),
            reconcile_tries: 0,
            created_ms: 0,
            updated_ms: 0,
            approval_id: None,
        }
    }

    fn request(hash: &str, takeover: bool) -> ClaimRequest<'_> {
        ClaimRequest {
            tenant: "acme",
            key: "k",
            tool: "issue_refund",
            request_hash: hash,
            unkeyed: None,
            arguments: "{}",
            now_ms: NOW,
            lease: Duration::from_secs(30),
            takeover,
            approval: None,
        }
    }

    /// Another request is a conflict only while the earlier one may have acted or
    /// may still act; a `failed` record is taken over by it.
    #[test]
    fn another_hash_is_a_conflict_unless_the_record_failed() {
        for state in [
            OperationState::Processing,
            OperationState::Succeeded,
            OperationState::OutcomeUnknown,
            OperationState::AwaitingApproval,
        ] {
            for takeover in [false, true] {
                for lease_until_ms in [0, NOW + 1] {
                    assert_eq!(
                        request("h2", takeover).step(
                            &record(state, lease_until_ms),
                            None,
                            Journal::Empty
                        ),
                        ClaimStep::Conflict,
                        "{state:?}"
                    );
                }
            }
        }
        for takeover in [false, true] {
            assert_eq!(
                request("h2", takeover).step(
                    &record(OperationState::Failed, 0),
                    None,
                    Journal::Empty
                ),
                ClaimStep::Reclaim
            );
        }
    }

    #[test]
    fn failed_is_claimed_again_and_settled_states_are_answered() {
        for takeover in [false, true] {
            let req = request("h1", takeover);
            assert_eq!(
                req.step(&record(OperationState::Failed, 0), None, Journal::Empty),
                ClaimStep::Reclaim
            );
            for state in [OperationState::Succeeded, OperationState::OutcomeUnknown] {
                assert_eq!(
                    req.step(&record(state, 0), None, Journal::Empty),
                    ClaimStep::Existing,
                    "{state:?}"
                );
            }
        }
    }

    #[test]
    fn a_lease_ends_at_its_last_millisecond() {
        let live = record(OperationState::Processing, NOW + 1);
        let ended = record(OperationState::Processing, NOW);
        assert_eq!(
            request("h1", true).step(&live, None, Journal::Empty),
            ClaimStep::Existing
        );
        assert_eq!(
            request("h1", false).step(&ended, None, Journal::Empty),
            ClaimStep::ExpireToUnknown
        );
        assert_eq!(
            request("h1", true).step(&ended, None, Journal::Empty),
            ClaimStep::Reclaim
        );
    }

    /// An approval is answered while pending, run once approved, rejected once expired, and a
    /// claim that carries one stores it instead of running.
    #[test]
    fn approvals_wait_run_once_approved_and_expire() {
        use crate::store::approval::{ApprovalRecord, ApprovalStatus, Requester};
        let mut approval = ApprovalRecord {
            id: "apr_1".into(),
            tenant: "acme".into(),
            key: "k".into(),
            tool: "issue_refund".into(),
            request_hash: "h1".into(),
            policy_hash: "p".into(),
            arguments: "{}".into(),
            amount: "8000".into(),
            threshold: "5000".into(),
            requester: Requester {
                user: "agent".into(),
                permissions: Vec::new(),
            },
            run_id: "r".into(),
            call_id: "c".into(),
            approver_permission: "refund:approve".into(),
            created_ms: 0,
            expires_ms: NOW + 1,
            status: ApprovalStatus::Pending,
            decisions: Vec::new(),
        };
        let waiting = record(OperationState::AwaitingApproval, 0);
        let req = request("h1", false);
        assert_eq!(
            req.step(&waiting, Some(&approval), Journal::Empty),
            ClaimStep::AnswerApproval
        );
        approval.expires_ms = NOW;
        assert_eq!(
            req.step(&waiting, Some(&approval), Journal::Empty),
            ClaimStep::ExpireApproval
        );
        approval.status = ApprovalStatus::Approved;
        assert_eq!(
            req.step(&waiting, Some(&approval), Journal::Empty),
            ClaimStep::RunApproved
        );
        let rejected = record(OperationState::Rejected, 0);
        assert_eq!(
            req.step(&rejected, Some(&approval), Journal::Empty),
            ClaimStep::AnswerApproval
        );
        // Other arguments take a rejected record over, as a failed one.
        assert_eq!(
            request("h2", false).step(&rejected, Some(&approval), Journal::Empty),
            ClaimStep::Reclaim
        );
        let asking = ClaimRequest {
            approval: Some(&approval),
            ..request("h2", false)
        };
        assert_eq!(
            asking.step(&rejected, None, Journal::Empty),
            ClaimStep::Await
        );
        assert_eq!(
            asking.step(&record(OperationState::Failed, 0), None, Journal::Empty),
            ClaimStep::Await
        );
        assert_eq!(asking.first_state(), OperationState::AwaitingApproval);
        assert_eq!(asking.first_attempt(), 0);
        assert_eq!(req.first_attempt(), 1);
    }

    /// An ended lease is taken over when every step the crashed worker began is recorded; a
    /// step in flight, or no journal, makes it unknown.
    #[test]
    fn a_settled_journal_lets_an_ended_lease_be_taken_over() {
        let ended = record(OperationState::Processing, NOW);
        let req = request("h1", false);
        assert!(req.needs_journal(&ended));
        assert!(!request("h1", true).needs_journal(&ended));
        assert!(!req.needs_journal(&record(OperationState::Processing, NOW + 1)));
        assert_eq!(req.step(&ended, None, Journal::Settled), ClaimStep::Reclaim);
        assert_eq!(
            req.step(&ended, None, Journal::InFlight),
            ClaimStep::ExpireToUnknown
        );
        assert_eq!(
            req.step(&ended, None, Journal::Empty),
            ClaimStep::ExpireToUnknown
        );
        use crate::store::StepStatus::{Failed, Started, Succeeded};
        assert_eq!(Journal::of(&[]), Journal::Empty);
        assert_eq!(Journal::of(&[Succeeded, Failed]), Journal::Settled);
        assert_eq!(Journal::of(&[Succeeded, Started]), Journal::InFlight);
    }

    /// A `partial` record is resumed by its own request only; a `queued` one is answered.
    #[test]
    fn partial_is_resumed_by_the_same_request_and_queued_is_answered() {
        let partial = record(OperationState::Partial, 0);
        assert_eq!(
            request("h1", false).step(&partial, None, Journal::Settled),
            ClaimStep::Reclaim
        );
        assert_eq!(
            request("h2", false).step(&partial, None, Journal::Settled),
            ClaimStep::Conflict
        );
        let queued = record(OperationState::Queued, 0);
        assert_eq!(
            request("h1", true).step(&queued, None, Journal::Empty),
            ClaimStep::Existing
        );
        assert_eq!(
            request("h2", true).step(&queued, None, Journal::Empty),
            ClaimStep::Conflict
        );
        for state in OperationState::ALL {
            assert_eq!(OperationState::parse(state.as_str()), Some(state));
        }
        assert!(!OperationState::Queued.is_terminal() && !OperationState::Partial.is_terminal());
    }
}
