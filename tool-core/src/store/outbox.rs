//! The transactional outbox: an outbox tool's body runs in a transaction the store opens; its
//! operation record, its own rows and its one event commit together; workers lease the events
//! and deliver them.

use std::any::Any;
use std::time::Duration;

use async_trait::async_trait;

use super::approval::ApprovalRecord;
use super::attempt_error::AttemptError;
use super::audit::AuditEntry;
use super::claim_token::ClaimToken;
use super::record::{Claim, StoreError};

/// The event an outbox tool enqueued, before the store keeps it. An operation has at most one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    /// What the worker delivers, as JSON text: the tool's own words for the provider call.
    pub payload: String,
}

/// Where an outbox event stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventStatus {
    /// Waiting to be delivered, from `due_ms` on.
    Pending,
    /// A worker holds its lease and may be calling the provider now.
    Leased,
    /// The provider applied it; `result` holds its answer.
    Delivered,
    /// Its attempts are spent, or the provider refused it for good, and none of its deliveries
    /// may have been applied ([`OutboxEvent::maybe_applied`] is `false`); the last error is
    /// kept. An operator resumes it
    /// ([`OutboxStore::resume_event`](super::OutboxStore::resume_event)).
    Dead,
    /// It may have been applied and nobody knows: its operation is `outcome_unknown`, for the
    /// reconciler.
    Unknown,
}

impl serde::Serialize for EventStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl EventStatus {
    /// The stored name: `pending`, `leased`, `delivered`, `dead`, `unknown`.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventStatus::Pending => "pending",
            EventStatus::Leased => "leased",
            EventStatus::Delivered => "delivered",
            EventStatus::Dead => "dead",
            EventStatus::Unknown => "unknown",
        }
    }

    /// Every status.
    pub const ALL: [EventStatus; 5] = [
        EventStatus::Pending,
        EventStatus::Leased,
        EventStatus::Delivered,
        EventStatus::Dead,
        EventStatus::Unknown,
    ];

    /// The status named `name`, as [`EventStatus::as_str`] writes it.
    pub fn parse(name: &str) -> Option<Self> {
        EventStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == name)
    }
}

/// One outbox event as stored: the delivery owed by one operation, under the operation's
/// `(tenant, key)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEvent {
    /// The tenant of its operation.
    pub tenant: String,
    /// Its operation's key; the worker hands it to the provider as the idempotency key.
    pub key: String,
    /// The tool that enqueued it; the worker's handler for that tool delivers it.
    pub tool: String,
    /// What to deliver, as JSON text.
    pub payload: String,
    /// Where it stands.
    pub status: EventStatus,
    /// How many times a worker leased it (1 for the first delivery). Raised by every lease,
    /// never lowered: a worker presents it to record an outcome.
    pub attempt: u32,
    /// `attempt` when an operator last resumed it (0 before): its delivery budget counts the
    /// attempts since.
    pub resumed_at: u32,
    /// Until when the current worker's lease holds, for `leased`.
    pub lease_until_ms: i64,
    /// From when it may be leased, for `pending` (a retry waits for its backoff).
    pub due_ms: i64,
    /// The worker that leased it last.
    pub worker: Option<String>,
    /// The last delivery error.
    pub last_error: Option<AttemptError>,
    /// The provider's answer, as JSON text, once delivered.
    pub result: Option<String>,
    /// Whether one of its deliveries may have been applied: one was sent and its answer lost
    /// (and it was sent again with the same key), or a worker's lease on it ended mid-delivery.
    /// Kept until the reconciler finds it not applied. Such an event is never `dead`: when its
    /// budget is spent or the provider refuses it, it becomes `unknown`, for the reconciler.
    pub maybe_applied: bool,
    /// When it was enqueued (its operation's commit).
    pub created_ms: i64,
    /// When it last changed.
    pub updated_ms: i64,
}

impl OutboxEvent {
    /// The delivery attempts spent since the last resume: what the worker's budget counts.
    pub fn attempts_spent(&self) -> u32 {
        self.attempt.saturating_sub(self.resumed_at)
    }
}

/// An operator's resume of a `dead` event
/// ([`OutboxStore::resume_event`](super::OutboxStore::resume_event)).
#[derive(Debug, Clone, Copy)]
pub struct ResumeRequest<'a> {
    /// The tenant of the event's operation.
    pub tenant: &'a str,
    /// The idempotency key of the event's operation.
    pub key: &'a str,
    /// Now, in milliseconds since the epoch: the event is due then.
    pub now_ms: i64,
}

/// A request to lease due events.
#[derive(Debug, Clone, Copy)]
pub struct EventLease<'a> {
    /// The worker's name, kept on the events it leases.
    pub worker: &'a str,
    /// Only events of these tools (the tools the worker has a handler for).
    pub tools: &'a [&'a str],
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
    /// How long the lease lasts.
    pub lease: Duration,
    /// At most this many events.
    pub limit: u32,
}

impl EventLease<'_> {
    /// `now_ms + lease`, saturating.
    pub fn lease_until_ms(&self) -> i64 {
        let lease = i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX);
        self.now_ms.saturating_add(lease)
    }
}

/// An event a worker leased.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedEvent {
    /// The event after the lease: `leased`, its attempt raised.
    pub event: OutboxEvent,
    /// Whether it was `leased` by another worker whose lease expired: that worker may have sent
    /// it, so unless the provider honours the key, its outcome is unknown.
    pub taken_over: bool,
}

/// What a worker records of a delivery ([`OutboxStore::settle_event`](super::OutboxStore::settle_event)):
/// the event it leased, what came of it, and its audit record.
#[derive(Debug, Clone, Copy)]
pub struct EventSettlement<'a> {
    /// The event's tenant.
    pub tenant: &'a str,
    /// The event's key (its operation's).
    pub key: &'a str,
    /// The attempt the worker leased the event under.
    pub attempt: u32,
    /// What the delivery came to.
    pub outcome: DeliveryOutcome<'a>,
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
    /// The delivery's audit record, appended with the outcome.
    pub audit: Option<&'a AuditEntry>,
}

/// What a delivery came to, recorded by the worker that holds the event's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryOutcome<'a> {
    /// Applied; the provider's answer as JSON text. The event becomes `delivered` and its
    /// operation `succeeded` (the operation's result stays the tool's own).
    Delivered(&'a str),
    /// Worth another try: the event is `pending` again, due at `due_ms`, with its error kept.
    Retry {
        /// The attempt's error.
        error: &'a AttemptError,
        /// When it may be leased again.
        due_ms: i64,
        /// Whether this attempt may have been applied (sent, its answer lost, to a provider
        /// that honours the key): the event's [`OutboxEvent::maybe_applied`] becomes `true`
        /// (`false` leaves it as it is).
        maybe_applied: bool,
    },
    /// Not applied, and no more tries: the event is `dead` with its error kept; its operation
    /// stays `queued` until an operator resumes it. Only for an event none of whose deliveries
    /// may have been applied: the worker records [`DeliveryOutcome::Unknown`] for the others.
    Dead(&'a AttemptError),
    /// Sent, outcome unknown: the event becomes `unknown` (and
    /// [`maybe_applied`](OutboxEvent::maybe_applied)) and its operation `outcome_unknown` with
    /// the error appended, for the reconciler.
    Unknown(&'a AttemptError),
}

impl DeliveryOutcome<'_> {
    /// Whether this outcome marks its event [`maybe_applied`](OutboxEvent::maybe_applied): a
    /// retry that says so, and an unknown outcome. Any other leaves the mark as it is.
    pub fn marks_maybe_applied(&self) -> bool {
        match self {
            DeliveryOutcome::Retry { maybe_applied, .. } => *maybe_applied,
            DeliveryOutcome::Unknown(_) => true,
            DeliveryOutcome::Delivered(_) | DeliveryOutcome::Dead(_) => false,
        }
    }
}

/// Which events to list.
#[derive(Debug, Clone, Copy, Default)]
pub struct EventQuery<'a> {
    /// Only this tenant's.
    pub tenant: Option<&'a str>,
    /// Only those in this status.
    pub status: Option<EventStatus>,
    /// At most this many; 0 means no limit.
    pub limit: u32,
}

/// What [`OutboxStore::begin`](super::OutboxStore::begin) answers.
pub enum Begun {
    /// The claim was acquired inside a transaction that is still open: the outbox tool's body
    /// runs in it, then the dispatcher commits it ([`StoreTransaction::commit`]) or rolls it
    /// back. Dropped without either, it rolls back.
    Open {
        /// The open transaction, holding the `processing` record.
        tx: Box<dyn StoreTransaction>,
        /// The attempt claimed.
        attempt: u32,
        /// The approval the operation runs under, when it waited for one.
        approved: Option<ApprovalRecord>,
    },
    /// Anything but an acquired claim, already committed: answered as
    /// [`ClaimStore::claim`](super::ClaimStore::claim) answers.
    Settled(Claim),
}

impl std::fmt::Debug for Begun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Begun::Open {
                attempt, approved, ..
            } => f
                .debug_struct("Open")
                .field("attempt", attempt)
                .field("approved", approved)
                .finish_non_exhaustive(),
            Begun::Settled(claim) => f.debug_tuple("Settled").field(claim).finish(),
        }
    }
}

/// How an outbox tool's transaction ends well.
#[derive(Debug, Clone, Copy)]
pub struct Commit<'a> {
    /// The claim the body ran under.
    pub owner: &'a ClaimToken,
    /// The tool's result, as JSON text: what the model reads.
    pub result: &'a str,
    /// The event the body enqueued: the operation becomes `queued` with it; without one,
    /// `succeeded` (the body's rows were the whole effect).
    pub event: Option<&'a NewEvent>,
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
}

/// An open transaction of a store, in which an outbox tool's body runs.
///
/// The store crates give the tool their connection inside it (`toolgate_store_sqlite::connection`,
/// `toolgate_store_postgres::connection`), through [`StoreTransaction::connection`].
#[async_trait]
pub trait StoreTransaction: Send + 'static {
    /// The store's own connection inside the transaction, for its crate to downcast.
    fn connection(&mut self) -> &mut (dyn Any + Send);

    /// Which store opened it, in a few words (`"SQLite"`), for an error that names the wrong one.
    fn store_name(&self) -> &'static str;

    /// The operation (still `processing` under `commit.owner.attempt`) becomes `queued` with the
    /// event, or `succeeded` without one, holding `commit.result`; the event is inserted
    /// `pending`, due now; then the transaction commits. Everything or nothing.
    async fn commit(self: Box<Self>, commit: Commit<'_>) -> Result<(), StoreError>;

    /// Rolls back: the operation's claim, the tool's rows and any event are gone, as if the call
    /// had never come (the record under the key is as it was before the claim).
    async fn rollback(self: Box<Self>) -> Result<(), StoreError>;
}
