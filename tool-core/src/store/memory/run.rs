//! The run ledger of a [`MemoryStore`](super::MemoryStore): one record a run, behind its own lock.

use async_trait::async_trait;

use super::MemoryStore;
use crate::store::{
    AbortReport, AbortRequest, AttemptCharge, FailureNote, RunKey, RunLedger, RunRecord,
    StoreError, TurnGrant, TurnRequest,
};

#[async_trait]
impl RunLedger for MemoryStore {
    async fn begin_turn(&self, request: TurnRequest<'_>) -> Result<TurnGrant, StoreError> {
        Ok(self.with_run(request.run, |run| run.begin_turn(&request)))
    }

    /// `true`: nothing comes between the two steps of `begin_turn_and_claim` in memory that
    /// could tell them from one transaction, and the dispatcher's tests take the path a store
    /// that does both in one transaction takes.
    fn claims_with_turn(&self) -> bool {
        true
    }

    async fn charge_attempt(&self, charge: AttemptCharge<'_>) -> Result<bool, StoreError> {
        Ok(self.with_run(charge.run, |run| {
            run.charge_attempt(charge.tool, charge.retry_budget, charge.now_ms)
        }))
    }

    async fn note_failure(&self, failure: FailureNote<'_>) -> Result<(), StoreError> {
        self.with_run(failure.run, |run| {
            run.note_failure(failure.tool, failure.request_hash, failure.now_ms)
        });
        Ok(())
    }

    async fn abort_run(&self, request: AbortRequest<'_>) -> Result<AbortReport, StoreError> {
        // The run's lock, then the tables': no other path takes them the other way round.
        Ok(self.with_run(request.run, |record| AbortReport {
            abort: record.abort(request.abort, request.now_ms),
            rejected: self.tables(|tables| {
                tables.reject_run(request.run.tenant, request.run.run_id, request.now_ms)
            }),
        }))
    }

    async fn run(&self, run: RunKey<'_>) -> Result<Option<RunRecord>, StoreError> {
        let runs = self
            .runs
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        Ok(runs
            .get(&(run.tenant.to_owned(), run.run_id.to_owned()))
            .cloned())
    }
}
