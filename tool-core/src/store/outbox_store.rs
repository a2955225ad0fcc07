//! [`OutboxStore`]: outbox operations, their events and the workers that deliver them.

use async_trait::async_trait;

#[cfg(doc)]
use super::ClaimStore;
use super::{
    Begun, ClaimRequest, EventLease, EventQuery, EventSettlement, LeasedEvent, OutboxEvent,
    ResumeRequest, StoreError,
};

/// The transactional outbox: an operation claimed inside a transaction that commits the tool's
/// rows with its event, and the events that workers then lease, deliver and settle.
///
/// An application reads events with [`event`](Self::event) and
/// [`list_events`](Self::list_events), and an operator resumes a dead one with
/// [`resume_event`](Self::resume_event). The rest only a store implements: the dispatcher calls
/// [`begin`](Self::begin), and the [`OutboxWorker`](crate::outbox::OutboxWorker) calls
/// [`lease_events`](Self::lease_events) and [`settle_event`](Self::settle_event).
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Opens a transaction and claims `request.key` inside it, following the rules of
    /// [`ClaimStore::claim`]. An acquired claim answers [`Begun::Open`] with the transaction
    /// still open, the record `processing` inside it (so a concurrent claim of the key waits for
    /// it, or sees it as soon as it commits); every other answer commits what the claim changed
    /// and answers [`Begun::Settled`]. On SQLite the transaction holds the store's one writer
    /// until it ends.
    async fn begin(&self, request: ClaimRequest<'_>) -> Result<Begun, StoreError>;

    /// Leases up to `lease.limit` events of `lease.tools`, oldest first: `pending` ones due at
    /// `lease.now_ms`, and `leased` ones whose lease ended (their worker crashed or stalled;
    /// [`LeasedEvent::taken_over`], and the event becomes
    /// [`maybe_applied`](OutboxEvent::maybe_applied)). Each becomes `leased` by `lease.worker`
    /// until `lease.lease_until_ms()`, its attempt + 1. Concurrent workers never lease the same
    /// event twice (PostgreSQL: `FOR UPDATE SKIP LOCKED`; SQLite: one writer).
    async fn lease_events(&self, lease: EventLease<'_>) -> Result<Vec<LeasedEvent>, StoreError>;

    /// Records what the delivery of the event of `(settlement.tenant, settlement.key)` under
    /// `settlement.attempt` came to (see [`DeliveryOutcome`](super::DeliveryOutcome)), with its
    /// operation, atomically, and the delivery's audit record `settlement.audit` when it has
    /// one. Answers the event after the change. [`StoreError::LostClaim`] when the event is no
    /// longer `leased` under the attempt (its lease ended and another worker took it).
    ///
    /// The audit record is appended only when the outcome is recorded: a lost lease or a fault
    /// writes neither, and the worker appends the record of what happened apart. The stores of
    /// this workspace write both in one statement (PostgreSQL) or one transaction (SQLite); a
    /// store that cannot settles, then appends the record (one that fails to append is logged,
    /// and the settled event stands).
    async fn settle_event(
        &self,
        settlement: EventSettlement<'_>,
    ) -> Result<OutboxEvent, StoreError>;

    /// An operator's resume of the `dead` event of `(request.tenant, request.key)`: `pending`
    /// again, due at `request.now_ms`, its budget
    /// counted afresh from its current attempt ([`OutboxEvent::resumed_at`]). Answers the event
    /// after the change, or `None` when the operation has no event; a `dead` event only is
    /// changed (any other is answered as it is).
    async fn resume_event(
        &self,
        request: ResumeRequest<'_>,
    ) -> Result<Option<OutboxEvent>, StoreError>;

    /// The outbox event of the operation `(tenant, key)`, if it has one.
    async fn event(&self, tenant: &str, key: &str) -> Result<Option<OutboxEvent>, StoreError>;

    /// The events `query` admits, oldest first (by creation, then tenant and key), at most
    /// `query.limit` (0: all).
    async fn list_events(&self, query: EventQuery<'_>) -> Result<Vec<OutboxEvent>, StoreError>;
}
