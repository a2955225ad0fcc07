//! [`ClaimStore`]: a write's claim on its key, and the outcome recorded under it.

use async_trait::async_trait;

use super::{AttemptFailure, Claim, ClaimRequest, OperationRecord, RetryNote, StoreError, Success};
#[cfg(doc)]
use super::{ClaimStep, EXPIRED, Journal};

/// Claims of keys and the outcomes of the writes that hold them: one record per
/// `(tenant, key)`, its state machine, its lease and its attempt counter.
///
/// An application reads a record with [`get`](Self::get). The rest only a store implements,
/// and the dispatcher calls: it claims a key before a write runs, then records the outcome
/// carrying the attempt it claimed ([`ClaimToken`](super::ClaimToken)), so a worker that lost its lease changes
/// nothing.
#[async_trait]
pub trait ClaimStore: Send + Sync {
    /// Claims `request.key` for `request.tenant`, atomically, following
    /// [`ClaimRequest::step`] with the record's latest approval and, when
    /// [`ClaimRequest::needs_journal`], the [`Journal`] of its steps:
    ///
    /// - no record, and `request.approval` is `None`: inserts one in `processing` with attempt 1
    ///   and a lease until `now + lease`, and answers [`Claim::Acquired`];
    /// - no record, with `request.approval`: inserts the record `awaiting_approval` (attempt 0,
    ///   its `approval_id` the approval's) and the approval as given (pending), and answers
    ///   [`Claim::Approval`] with it; the same for a `failed` record, or a `rejected` one under
    ///   another hash ([`ClaimStep::Await`], attempt unchanged);
    /// - `awaiting_approval` with the same hash: approved, it becomes `processing` (attempt + 1,
    ///   leased) and answers [`Claim::Acquired`] with the approval, for exactly one claim;
    ///   pending past its expiry, the approval becomes rejected as [`EXPIRED`] and the record
    ///   `rejected`; otherwise nothing changes; all but the first answer [`Claim::Approval`];
    /// - `rejected` with the same hash: [`Claim::Approval`] with its approval;
    /// - `failed` (definitely not applied): takes it again for this request, whatever its
    ///   hash: stores `request.request_hash` and `request.arguments`, attempt + 1, keeps the
    ///   earlier errors, [`Claim::Acquired`];
    /// - any other record with another `request_hash`: [`Claim::Conflict`], and nothing is
    ///   written;
    /// - `partial` with the same hash: takes it again as `failed` is taken (the steps done
    ///   stay in the journal and are skipped);
    /// - `processing` whose lease has expired: with `request.takeover` (the tool's downstream
    ///   honours the key), or a [`Journal::Settled`] journal, takes it over, attempt + 1,
    ///   [`Claim::Acquired`]; otherwise turns it into `outcome_unknown` and answers
    ///   [`Claim::Existing`] with the updated record;
    /// - a takeover under another request hash (`failed`, `rejected`) clears the record's step
    ///   journal: steps are never answered to other arguments;
    /// - any other record (`succeeded`, `outcome_unknown`, a live `processing`, …):
    ///   [`Claim::Existing`] with the record as it is.
    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Claim, StoreError>;

    /// `processing` → `succeeded` with `success.result` and, with `success.audit`, the call's
    /// audit record appended in the same transaction: both or neither, one commit.
    /// [`StoreError::LostClaim`] when the record is no longer `processing` under
    /// `success.owner.attempt`.
    ///
    /// Answers the audit record's `seq`: `None` without an audit record, or when the success was
    /// recorded and the audit record was not (the dispatcher then appends it itself; a store
    /// that cannot write both at once records the success, then appends the record).
    async fn succeed(&self, success: Success<'_>) -> Result<Option<i64>, StoreError>;

    /// `processing` → `failed` (definitely not applied), appending `failure.error` to the record's
    /// attempt errors. Same ownership rule as [`succeed`](Self::succeed).
    async fn fail(&self, failure: AttemptFailure<'_>) -> Result<(), StoreError>;

    /// `processing` → `outcome_unknown` (sent, outcome not known), appending `failure.error`. Same
    /// ownership rule as [`succeed`](Self::succeed).
    async fn mark_unknown(&self, failure: AttemptFailure<'_>) -> Result<(), StoreError>;

    /// Appends `retry.error`, of an attempt that will be retried; the record stays `processing`
    /// and its lease is renewed until `retry.lease_until_ms`. Same ownership rule.
    async fn record_retry(&self, retry: RetryNote<'_>) -> Result<(), StoreError>;

    /// The record of `key` for `tenant`. A tenant never sees another tenant's record.
    async fn get(&self, tenant: &str, key: &str) -> Result<Option<OperationRecord>, StoreError>;
}
