//! A store behind an [`Arc`] is a store: a caller that keeps a handle on its store (to read
//! records, or to give the same store to a reconciler) hands the dispatcher a clone.

use std::sync::Arc;

use async_trait::async_trait;

use super::{
    AttemptError, Claim, ClaimRequest, ClaimToken, OperationRecord, OperationStore, Resolution,
    RunAbort, RunKey, RunRecord, StoreError, TurnGrant, TurnRequest,
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
    ) -> Result<RunAbort, StoreError> {
        (**self).abort_run(run, abort, now_ms).await
    }

    async fn run(&self, run: RunKey<'_>) -> Result<Option<RunRecord>, StoreError> {
        (**self).run(run).await
    }
}
