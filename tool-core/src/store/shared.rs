//! A store behind an [`Arc`] is a store: a caller that keeps a handle on its store (to read
//! records, or to give the same store to a reconciler) hands the dispatcher a clone.
//!
//! Each capability forwards every method to the store behind, written from one list.

use std::sync::Arc;

use async_trait::async_trait;

use crate::identity::IssuerKey;

use super::{
    AbortReport, AbortRequest, ApprovalQuery, ApprovalRecord, ApprovalStore, ApprovalSweep,
    AttemptCharge, AttemptFailure, AuditEntry, AuditQuery, AuditRecord, AuditStore, Begun, Claim,
    ClaimRequest, ClaimStore, ClaimedRejection, DecideRequest, Decided, EventLease, EventQuery,
    EventSettlement, FailureNote, IssuerKeyStore, LeasedEvent, OperationLog, OperationQuery,
    OperationRecord, OutboxEvent, OutboxStore, PartialOutcome, ResolveRequest, ResumeRequest,
    RetryNote, RunKey, RunLedger, RunRecord, StepOutcome, StepRecord, StepRequest, StepStart,
    StepStore, StoreError, Success, TurnClaim, TurnGrant, TurnRequest,
};

/// `impl<S: Trait + ?Sized> Trait for Arc<S>`, each listed method calling the store behind.
macro_rules! forward {
    ($(
        $trait:ident {
            $(async fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*
            $(fn $sync:ident() -> $sync_ret:ty;)*
        }
    )*) => {$(
        #[async_trait]
        impl<S: $trait + ?Sized> $trait for Arc<S> {
            $(async fn $name(&self, $($arg: $ty),*) -> Result<$ret, StoreError> {
                (**self).$name($($arg),*).await
            })*
            $(fn $sync(&self) -> $sync_ret {
                (**self).$sync()
            })*
        }
    )*};
}

forward! {
    ClaimStore {
        async fn claim(request: ClaimRequest<'_>) -> Claim;
        async fn succeed(success: Success<'_>) -> Option<i64>;
        async fn fail(failure: AttemptFailure<'_>) -> ();
        async fn mark_unknown(failure: AttemptFailure<'_>) -> ();
        async fn record_retry(retry: RetryNote<'_>) -> ();
        async fn get(tenant: &str, key: &str) -> Option<OperationRecord>;
    }
    OperationLog {
        async fn expire_leases(now_ms: i64) -> u64;
        async fn list_unknown(limit: u32) -> Vec<OperationRecord>;
        async fn resolve(request: ResolveRequest<'_>) -> Option<OperationRecord>;
        async fn purge(before_ms: i64) -> u64;
        async fn list_operations(query: OperationQuery<'_>) -> Vec<OperationRecord>;
    }
    RunLedger {
        async fn begin_turn(request: TurnRequest<'_>) -> TurnGrant;
        async fn begin_turn_and_claim(turn: TurnRequest<'_>, claim: ClaimRequest<'_>) -> TurnClaim;
        async fn charge_attempt(charge: AttemptCharge<'_>) -> bool;
        async fn note_failure(failure: FailureNote<'_>) -> ();
        async fn abort_run(request: AbortRequest<'_>) -> AbortReport;
        async fn run(run: RunKey<'_>) -> Option<RunRecord>;
        fn claims_with_turn() -> bool;
    }
    ApprovalStore {
        async fn decide(request: DecideRequest<'_>) -> Decided;
        async fn approval(id: &str) -> Option<ApprovalRecord>;
        async fn list_approvals(query: ApprovalQuery<'_>) -> Vec<ApprovalRecord>;
        async fn list_approved(limit: u32) -> Vec<ApprovalRecord>;
        async fn expire_approvals(sweep: ApprovalSweep) -> Vec<ApprovalRecord>;
        async fn reject_claimed(rejection: ClaimedRejection<'_>) -> ApprovalRecord;
    }
    OutboxStore {
        async fn begin(request: ClaimRequest<'_>) -> Begun;
        async fn lease_events(lease: EventLease<'_>) -> Vec<LeasedEvent>;
        async fn settle_event(settlement: EventSettlement<'_>) -> OutboxEvent;
        async fn resume_event(request: ResumeRequest<'_>) -> Option<OutboxEvent>;
        async fn event(tenant: &str, key: &str) -> Option<OutboxEvent>;
        async fn list_events(query: EventQuery<'_>) -> Vec<OutboxEvent>;
    }
    StepStore {
        async fn begin_step(step: StepRequest<'_>) -> StepStart;
        async fn finish_step(step: StepRequest<'_>, outcome: StepOutcome<'_>) -> ();
        async fn steps(tenant: &str, key: &str) -> Vec<StepRecord>;
        async fn partial(outcome: PartialOutcome<'_>) -> ();
    }
    AuditStore {
        async fn append_audit(entry: &AuditEntry) -> i64;
        async fn append_audits(entries: &[AuditEntry]) -> ();
        async fn audit(query: AuditQuery<'_>) -> Vec<AuditRecord>;
    }
    IssuerKeyStore {
        async fn add_issuer_key(key: &IssuerKey, now_ms: i64) -> bool;
        async fn issuer_keys(tenant: &str) -> Vec<IssuerKey>;
    }
}
