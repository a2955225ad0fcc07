//! Durable records of write operations: their state machine behind small traits, one a
//! capability, and their union [`OperationStore`].
//!
//! A store keeps one record per `(tenant, key)`. The dispatcher claims a key before a write runs
//! (one atomic insert-or-inspect, with a lease and an attempt counter), then records the outcome
//! carrying the attempt it claimed, so a worker that lost its lease changes nothing. Stores:
//! `toolgate-store-sqlite` (the embedded default), `toolgate-store-postgres` (many processes, one
//! database) and `MemoryStore` (tests only: the `test-util` feature, or the `toolgate-test`
//! crate). Every store passes the conformance suite of `toolgate-test`, which a store of your
//! own can run too.
//!
//! # The capabilities
//!
//! | Trait | What it keeps | An application calls | Only the dispatcher (or a worker) calls |
//! |---|---|---|---|
//! | [`ClaimStore`] | a write's claim and outcome | [`get`](ClaimStore::get) | `claim`, `succeed`, `fail`, `mark_unknown`, `record_retry` |
//! | [`OperationLog`] | the records as a whole | [`list_unknown`](OperationLog::list_unknown), [`resolve`](OperationLog::resolve), [`list_operations`](OperationLog::list_operations), [`expire_leases`](OperationLog::expire_leases), [`purge`](OperationLog::purge) (or its [`Reconciler`](crate::reconcile::Reconciler)) | |
//! | [`RunLedger`] | an agent's runs | [`run`](RunLedger::run) | `begin_turn`, `begin_turn_and_claim`, `claims_with_turn`, `charge_attempt`, `note_failure`, `abort_run` |
//! | [`ApprovalStore`] | approvals | [`decide`](ApprovalStore::decide), [`approval`](ApprovalStore::approval), [`list_approvals`](ApprovalStore::list_approvals), [`list_approved`](ApprovalStore::list_approved), [`expire_approvals`](ApprovalStore::expire_approvals) | `reject_claimed` |
//! | [`OutboxStore`] | the outbox's events | [`event`](OutboxStore::event), [`list_events`](OutboxStore::list_events), [`resume_event`](OutboxStore::resume_event) | `begin`, `lease_events`, `settle_event` |
//! | [`StepStore`] | step journals | [`steps`](StepStore::steps) | `begin_step`, `finish_step`, `partial` |
//! | [`AuditStore`] | the audit trail | [`audit`](AuditStore::audit) | `append_audit`, `append_audits` |
//! | [`IssuerKeyStore`] | the public keys of operator tokens' issuers | [`add_issuer_key`](IssuerKeyStore::add_issuer_key), [`issuer_keys`](IssuerKeyStore::issuer_keys) | |
//!
//! A store implements each of them; [`OperationStore`] is every one at once, implemented for
//! any type that has them all, and is what the dispatcher holds (`Arc<dyn OperationStore>`).
//! On a `dyn OperationStore`, or a type known only as `S: OperationStore`, every method is
//! called as it is. On a concrete store (`SqliteStore`, `PostgresStore`, `MemoryStore`, an
//! `Arc` of one), a method is called with its trait in scope: [`prelude`] brings them all.
//!
//! ```
//! use toolgate_core::store::{OperationRecord, OperationStore, StoreError};
//!
//! /// What an operator reads of a write, whichever store keeps it: no import needed.
//! async fn show(
//!     store: &dyn OperationStore,
//!     key: &str,
//! ) -> Result<Option<OperationRecord>, StoreError> {
//!     store.get("acme", key).await
//! }
//! ```

mod approval;
mod approval_store;
mod attempt_error;
mod audit;
mod audit_store;
mod claim_store;
mod claim_token;
mod grants;
mod issuer_key_store;
#[cfg(feature = "test-util")]
mod memory;
mod operation_log;
mod outbox;
mod outbox_store;
mod record;
mod run;
mod run_ledger;
mod shared;
mod step_store;
mod steps;
mod turn_claim;

pub use approval::{
    ApprovalQuery, ApprovalRecord, ApprovalStatus, ApprovalSweep, ClaimedRejection, DecideRequest,
    DecideStep, Decided, Decision, EXPIRED, RUN_ABORTED, Refusal, Requester, SYSTEM_DECIDER,
    Verdict,
};
pub use approval_store::ApprovalStore;
pub use attempt_error::AttemptError;
pub use audit::{AuditEntry, AuditKind, AuditQuery, AuditRecord};
pub use audit_store::AuditStore;
pub use claim_store::ClaimStore;
pub use claim_token::ClaimToken;
pub use grants::Grants;
pub use issuer_key_store::IssuerKeyStore;
#[cfg(feature = "test-util")]
pub use memory::MemoryStore;
pub use operation_log::OperationLog;
pub use outbox::{
    Begun, Commit, DeliveryOutcome, EventLease, EventQuery, EventSettlement, EventStatus,
    LeasedEvent, NewEvent, OutboxEvent, ResumeRequest, StoreTransaction,
};
pub use outbox_store::OutboxStore;
pub use record::{
    AttemptFailure, Claim, ClaimRequest, ClaimStep, OperationQuery, OperationRecord,
    OperationState, Resolution, ResolveRequest, RetryNote, StoreError, Success,
};
pub use run::{
    AbortReport, AbortRequest, Admission, AttemptCharge, FailedCall, FailureNote, RunKey,
    RunRecord, TurnGrant, TurnRequest,
};
pub use run_ledger::RunLedger;
pub use step_store::StepStore;
pub use steps::{
    Journal, PartialOutcome, StepOutcome, StepRecord, StepRequest, StepStart, StepStatus,
};
pub use turn_claim::{TurnClaim, begin_turn_then_claim, grant_lets_claim};

/// Where write operations are recorded: every capability of a store at once, what the
/// dispatcher holds (`Arc<dyn OperationStore>`; the traits are object safe).
///
/// Implemented for every type that implements the capabilities (see [the module's
/// docs](self)): a store implements [`ClaimStore`], [`OperationLog`], [`RunLedger`],
/// [`ApprovalStore`], [`OutboxStore`], [`StepStore`], [`AuditStore`] and [`IssuerKeyStore`],
/// and is an
/// `OperationStore`. An [`Arc`](std::sync::Arc) of a store is a store too.
///
/// Times are milliseconds since the Unix epoch, given by the caller (the dispatcher's clock), so
/// that every store agrees on what "expired" means and tests can move time by hand.
pub trait OperationStore:
    ClaimStore
    + OperationLog
    + RunLedger
    + ApprovalStore
    + OutboxStore
    + StepStore
    + AuditStore
    + IssuerKeyStore
    + 'static
{
}

impl<T> OperationStore for T where
    T: ClaimStore
        + OperationLog
        + RunLedger
        + ApprovalStore
        + OutboxStore
        + StepStore
        + AuditStore
        + IssuerKeyStore
        + ?Sized
        + 'static
{
}

/// The store's traits, to call their methods on a store or a `dyn OperationStore`:
/// `use toolgate_core::store::prelude::*;`.
pub mod prelude {
    pub use super::{
        ApprovalStore, AuditStore, ClaimStore, IssuerKeyStore, OperationLog, OperationStore,
        OutboxStore, RunLedger, StepStore,
    };
}
