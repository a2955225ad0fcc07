//! [`OperationLog`]: the operation records as a whole, for recovery, operators and retention.

use async_trait::async_trait;

#[cfg(doc)]
use super::Resolution;
use super::{OperationQuery, OperationRecord, ResolveRequest, StoreError};
#[cfg(doc)]
use super::{OutboxEvent, OutboxStore};

/// The operation records as a whole: the writes whose outcome is not known, how they were
/// settled, and what is kept.
///
/// An application (or its reconciler, see [`Reconciler`](crate::reconcile::Reconciler)) calls
/// every method: [`list_unknown`](Self::list_unknown) and [`resolve`](Self::resolve) settle
/// what a crash left unknown, [`list_operations`](Self::list_operations) is what an operator
/// reads, [`expire_leases`](Self::expire_leases) and [`purge`](Self::purge) are the sweeps.
#[async_trait]
pub trait OperationLog: Send + Sync {
    /// Every `processing` record whose lease expired before `now_ms` becomes `outcome_unknown`
    /// (its worker crashed after it may have acted). Answers how many.
    async fn expire_leases(&self, now_ms: i64) -> Result<u64, StoreError>;

    /// Up to `limit` `outcome_unknown` records of every tenant, oldest first, for the
    /// reconciler.
    async fn list_unknown(&self, limit: u32) -> Result<Vec<OperationRecord>, StoreError>;

    /// Settles the `outcome_unknown` record of `(request.tenant, request.key)` as
    /// [`request.resolution`](Resolution) says: applied → `succeeded` with the result, not applied →
    /// `failed`, still unknown → stays, with its reconcile count + 1. Answers the record after
    /// the change, or `None` when it was not `outcome_unknown` any more (someone else settled it).
    ///
    /// For an operation with an outbox event (see [`OutboxStore::settle_event`]): applied →
    /// `succeeded` with the record's result unchanged (the tool's own) and the event `delivered`
    /// with the resolution's result; not applied → `queued` again with the event `pending`, due
    /// at `request.now_ms` and no longer [`maybe_applied`](OutboxEvent::maybe_applied) (its rows are
    /// committed; the delivery is still owed). For an operation with a step journal, not
    /// applied turns its `started` steps `failed`, and the record becomes `partial` instead of
    /// `failed` when a step of it succeeded.
    async fn resolve(
        &self,
        request: ResolveRequest<'_>,
    ) -> Result<Option<OperationRecord>, StoreError>;

    /// Deletes `succeeded`, `failed` and `rejected` records last changed before `before_ms`,
    /// with their approvals, outbox events and step journals. `processing`, `outcome_unknown`
    /// and `awaiting_approval` records are never purged. Answers how many records. Also
    /// deleted, not counted in the answer: runs last changed before `before_ms` (their
    /// counters, failed calls and abort), and audit records appended before `before_ms` whose
    /// operation, if they name one, has no record any more (an audit record never goes before
    /// its operation).
    async fn purge(&self, before_ms: i64) -> Result<u64, StoreError>;

    /// The operations `query` admits, oldest first (by creation, then tenant and key), at most
    /// `query.limit` (0: all).
    async fn list_operations(
        &self,
        query: OperationQuery<'_>,
    ) -> Result<Vec<OperationRecord>, StoreError>;
}
