//! A store behind an [`Arc`] is a store: a caller that keeps a handle on its store (to read
//! records, or to give the same store to a reconciler) hands the dispatcher a clone.

use std::sync::Arc;

use async_trait::async_trait;

use super::{
    AbortedRun, ApprovalQuery, ApprovalRecord, AttemptError, AuditEntry, AuditQuery, AuditRecord,
    Begun, Claim, ClaimRequest, ClaimToken, DecideRequest, Decided, Decision, DeliveryOutcome,
    EventLease, EventQuery, LeasedEvent, OperationQuery, OperationRecord, OperationStore,
    OutboxEvent, Resolution, RunAbort, RunKey, RunRecord, StepOutcome, StepRecord, StepStart,
    StoreError, TurnClaim, TurnGrant, TurnRequest,
};

#[async_trait]
impl<S: OperationStore + ?Sized> OperationStore for Arc<S> {
    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Claim, StoreError> {
        (**self).claim(request).await
    }

    async fn succeed(
        &self,
        owner: &ClaimToken,
        result: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        (**self).succeed(owner, result, now_ms).await
    }

    async fn succeed_audited(
        &self,
        owner: &ClaimToken,
        result: &str,
        now_ms: i64,
        audit: &AuditEntry,
    ) -> Result<Option<i64>, StoreError> {
        (**self).succeed_audited(owner, result, now_ms, audit).await
    }

    async fn fail(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        (**self).fail(owner, error, now_ms).await
    }

    async fn mark_unknown(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        (**self).mark_unknown(owner, error, now_ms).await
    }

    async fn record_retry(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        lease_until_ms: i64,
    ) -> Result<(), StoreError> {
        (**self).record_retry(owner, error, lease_until_ms).await
    }

    async fn get(&self, tenant: &str, key: &str) -> Result<Option<OperationRecord>, StoreError> {
        (**self).get(tenant, key).await
    }

    async fn expire_leases(&self, now_ms: i64) -> Result<u64, StoreError> {
        (**self).expire_leases(now_ms).await
    }

    async fn list_unknown(&self, limit: u32) -> Result<Vec<OperationRecord>, StoreError> {
        (**self).list_unknown(limit).await
    }

    async fn resolve(
        &self,
        tenant: &str,
        key: &str,
        resolution: Resolution<'_>,
        now_ms: i64,
    ) -> Result<Option<OperationRecord>, StoreError> {
        (**self).resolve(tenant, key, resolution, now_ms).await
    }

    async fn purge(&self, before_ms: i64) -> Result<u64, StoreError> {
        (**self).purge(before_ms).await
    }

    async fn begin_turn(&self, request: TurnRequest<'_>) -> Result<TurnGrant, StoreError> {
        (**self).begin_turn(request).await
    }

    async fn begin_turn_and_claim(
        &self,
        turn: TurnRequest<'_>,
        claim: ClaimRequest<'_>,
    ) -> Result<TurnClaim, StoreError> {
        (**self).begin_turn_and_claim(turn, claim).await
    }

    fn claims_with_turn(&self) -> bool {
        (**self).claims_with_turn()
    }

    async fn charge_attempt(
        &self,
        run: RunKey<'_>,
        tool: &str,
        retry_budget: Option<u32>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        (**self)
            .charge_attempt(run, tool, retry_budget, now_ms)
            .await
    }

    async fn note_failure(
        &self,
        run: RunKey<'_>,
        tool: &str,
        request_hash: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        (**self).note_failure(run, tool, request_hash, now_ms).await
    }

    async fn abort_run(
        &self,
        run: RunKey<'_>,
        abort: &RunAbort,
        now_ms: i64,
    ) -> Result<AbortedRun, StoreError> {
        (**self).abort_run(run, abort, now_ms).await
    }

    async fn run(&self, run: RunKey<'_>) -> Result<Option<RunRecord>, StoreError> {
        (**self).run(run).await
    }

    async fn decide(&self, request: DecideRequest<'_>) -> Result<Decided, StoreError> {
        (**self).decide(request).await
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        (**self).approval(id).await
    }

    async fn list_approvals(
        &self,
        query: ApprovalQuery<'_>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        (**self).list_approvals(query).await
    }

    async fn list_approved(&self, limit: u32) -> Result<Vec<ApprovalRecord>, StoreError> {
        (**self).list_approved(limit).await
    }

    async fn expire_approvals(
        &self,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        (**self).expire_approvals(now_ms, limit).await
    }

    async fn reject_claimed(
        &self,
        owner: &ClaimToken,
        decision: &Decision,
        now_ms: i64,
    ) -> Result<ApprovalRecord, StoreError> {
        (**self).reject_claimed(owner, decision, now_ms).await
    }

    async fn list_operations(
        &self,
        query: OperationQuery<'_>,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        (**self).list_operations(query).await
    }

    async fn begin(&self, request: ClaimRequest<'_>) -> Result<Begun, StoreError> {
        (**self).begin(request).await
    }

    async fn lease_events(&self, lease: EventLease<'_>) -> Result<Vec<LeasedEvent>, StoreError> {
        (**self).lease_events(lease).await
    }

    async fn settle_event(
        &self,
        tenant: &str,
        key: &str,
        attempt: u32,
        outcome: DeliveryOutcome<'_>,
        now_ms: i64,
    ) -> Result<OutboxEvent, StoreError> {
        (**self)
            .settle_event(tenant, key, attempt, outcome, now_ms)
            .await
    }

    async fn settle_event_audited(
        &self,
        tenant: &str,
        key: &str,
        attempt: u32,
        outcome: DeliveryOutcome<'_>,
        now_ms: i64,
        audit: &AuditEntry,
    ) -> Result<OutboxEvent, StoreError> {
        (**self)
            .settle_event_audited(tenant, key, attempt, outcome, now_ms, audit)
            .await
    }

    async fn resume_event(
        &self,
        tenant: &str,
        key: &str,
        now_ms: i64,
    ) -> Result<Option<OutboxEvent>, StoreError> {
        (**self).resume_event(tenant, key, now_ms).await
    }

    async fn event(&self, tenant: &str, key: &str) -> Result<Option<OutboxEvent>, StoreError> {
        (**self).event(tenant, key).await
    }

    async fn list_events(&self, query: EventQuery<'_>) -> Result<Vec<OutboxEvent>, StoreError> {
        (**self).list_events(query).await
    }

    async fn begin_step(
        &self,
        owner: &ClaimToken,
        name: &str,
        now_ms: i64,
    ) -> Result<StepStart, StoreError> {
        (**self).begin_step(owner, name, now_ms).await
    }

    async fn finish_step(
        &self,
        owner: &ClaimToken,
        name: &str,
        outcome: StepOutcome<'_>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        (**self).finish_step(owner, name, outcome, now_ms).await
    }

    async fn steps(&self, tenant: &str, key: &str) -> Result<Vec<StepRecord>, StoreError> {
        (**self).steps(tenant, key).await
    }

    async fn partial(
        &self,
        owner: &ClaimToken,
        report: &str,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        (**self).partial(owner, report, error, now_ms).await
    }

    async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        (**self).append_audit(entry).await
    }

    async fn append_audits(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        (**self).append_audits(entries).await
    }

    async fn audit(&self, query: AuditQuery<'_>) -> Result<Vec<AuditRecord>, StoreError> {
        (**self).audit(query).await
    }
}
