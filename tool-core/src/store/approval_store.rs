//! [`ApprovalStore`]: the approvals a write waits for, and the decisions on them.

use async_trait::async_trait;

use super::{
    ApprovalQuery, ApprovalRecord, ApprovalSweep, ClaimedRejection, DecideRequest, Decided,
    StoreError,
};
#[cfg(doc)]
use super::{DecideStep, EXPIRED, Refusal};

/// The approvals of writes over their tool's threshold: asked by a claim (see
/// [`ClaimStore::claim`](super::ClaimStore::claim)), decided by a person, run once approved.
///
/// An application calls [`decide`](Self::decide) (through [`decide`](crate::approval::decide), which
/// checks the decider), reads with [`approval`](Self::approval) and
/// [`list_approvals`](Self::list_approvals), and its runner runs what
/// [`list_approved`](Self::list_approved) lists and sweeps with
/// [`expire_approvals`](Self::expire_approvals). Only the dispatcher calls
/// [`reject_claimed`](Self::reject_claimed).
#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Decides on an approval, atomically, following [`ApprovalRecord::decide_step`]:
    ///
    /// - [`DecideStep::Apply`]: appends the decision; approve makes the approval `approved`
    ///   (its operation stays `awaiting_approval` until a claim runs it); reject makes the
    ///   approval and its operation `rejected`. Answers [`Decided::Applied`];
    /// - [`DecideStep::Expire`]: stores the expiry ([`ApprovalRecord::expiry`]) as
    ///   [`expire_approvals`](Self::expire_approvals) would, and answers [`Refusal::Expired`]
    ///   with the approval after it;
    /// - [`DecideStep::Refuse`]: changes nothing; the approval is given back unless the refusal
    ///   is [`Refusal::NotFound`] (no approval with this id, or one of another tenant).
    async fn decide(&self, request: DecideRequest<'_>) -> Result<Decided, StoreError>;

    /// The approval `id`, of whichever tenant: the caller checks the tenant before showing it.
    async fn approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError>;

    /// The approvals `query` admits, oldest first (by creation, then id), at most `query.limit`
    /// (0: all).
    async fn list_approvals(
        &self,
        query: ApprovalQuery<'_>,
    ) -> Result<Vec<ApprovalRecord>, StoreError>;

    /// Up to `limit` approved approvals whose operation has not run yet (still
    /// `awaiting_approval` under this approval), of every tenant, oldest first: what the
    /// application's runner executes.
    async fn list_approved(&self, limit: u32) -> Result<Vec<ApprovalRecord>, StoreError>;

    /// Up to `sweep.limit` pending approvals past their expiry at `sweep.now_ms` become rejected as
    /// [`EXPIRED`] ([`ApprovalRecord::expiry`]), their operations `rejected`. Answers them after
    /// the change, oldest first.
    async fn expire_approvals(
        &self,
        sweep: ApprovalSweep,
    ) -> Result<Vec<ApprovalRecord>, StoreError>;

    /// An approved operation that failed its revalidation: `processing` (under
    /// `rejection.owner.attempt`) → `rejected`, and its approval → `rejected` with
    /// `rejection.decision` appended. Answers the
    /// approval after the change. [`StoreError::LostClaim`] when the record is no longer
    /// `processing` under the owner's attempt, or has no approval.
    async fn reject_claimed(
        &self,
        rejection: ClaimedRejection<'_>,
    ) -> Result<ApprovalRecord, StoreError>;
}
