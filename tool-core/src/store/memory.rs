//! An operation store in memory, for tests only (the `test-util` feature): it forgets everything
//! when the process ends, so it cannot keep a write from running twice across a restart.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{
    AttemptError, Claim, ClaimRequest, ClaimStep, ClaimToken, OperationRecord, OperationState,
    OperationStore, Resolution, RunAbort, RunKey, RunRecord, StoreError, TurnGrant, TurnRequest,
};

/// An [`OperationStore`] in a `HashMap`. **For tests only**: nothing survives the process, which
/// is exactly what a durable store exists to survive. Use `toolgate-store-sqlite` or
/// `toolgate-store-postgres` in programs.
///
/// Exported with the `test-util` feature, and by the `toolgate-test` crate. It passes the same
/// conformance suite as the durable stores.
#[derive(Debug, Default)]
pub struct MemoryStore {
    records: Mutex<HashMap<(String, String), OperationRecord>>,
    runs: Mutex<HashMap<(String, String), RunRecord>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<(String, String), OperationRecord>) -> T) -> T {
        let mut records = self
            .records
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        f(&mut records)
    }

    /// `f` on the record of `run` (an empty one if it has none), kept only when `f` changed
    /// it: a refusal writes nothing, as in the durable stores.
    fn with_run<T>(&self, run: RunKey<'_>, f: impl FnOnce(&mut RunRecord) -> T) -> T {
        let mut runs = self
            .runs
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let id = (run.tenant.to_owned(), run.run_id.to_owned());
        let mut record = runs.get(&id).cloned().unwrap_or_default();
        let answer = f(&mut record);
        let changed = match runs.get(&id) {
            Some(before) => *before != record,
            None => record != RunRecord::default(),
        };
        if changed {
            runs.insert(id, record);
        }
        answer
    }

    /// Moves an owned `processing` record to `state`, appending `error`.
    fn settle_with_error(
        &self,
        owner: &ClaimToken,
        state: OperationState,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.owned(owner, |record| {
            record.state = state;
            record.errors.push(error.clone());
            record.updated_ms = now_ms;
        })
    }

    fn owned<T>(
        &self,
        owner: &ClaimToken,
        f: impl FnOnce(&mut OperationRecord) -> T,
    ) -> Result<T, StoreError> {
        self.with(
            |records| match records.get_mut(&(owner.tenant.clone(), owner.key.clone())) {
                Some(record)
                    if record.state == OperationState::Processing
                        && record.attempt == owner.attempt =>
                {
                    Ok(f(record))
                }
                _ => Err(StoreError::LostClaim {
                    key: owner.key.clone(),
                    attempt: owner.attempt,
                }),
            },
        )
    }
}

#[async_trait]
impl OperationStore for MemoryStore {
    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Claim, StoreError> {
        self.with(|records| {
            let id = (request.tenant.to_owned(), request.key.to_owned());
            let Some(record) = records.get_mut(&id) else {
                records.insert(
                    id,
                    OperationRecord {
                        tenant: request.tenant.to_owned(),
                        key: request.key.to_owned(),
                        tool: request.tool.to_owned(),
                        request_hash: request.request_hash.to_owned(),
                        arguments: request.arguments.to_owned(),
                        state: OperationState::Processing,
                        attempt: 1,
                        lease_until_ms: request.lease_until_ms(),
                        result: None,
                        errors: Vec::new(),
                        reconcile_tries: 0,
                        created_ms: request.now_ms,
                        updated_ms: request.now_ms,
                    },
                );
                return Ok(Claim::Acquired { attempt: 1 });
            };
            Ok(match request.step(record) {
                ClaimStep::Conflict => Claim::Conflict {
                    tool: record.tool.clone(),
                },
                ClaimStep::Reclaim => {
                    record.request_hash = request.request_hash.to_owned();
                    record.arguments = request.arguments.to_owned();
                    record.state = OperationState::Processing;
                    record.attempt += 1;
                    record.lease_until_ms = request.lease_until_ms();
                    record.updated_ms = request.now_ms;
                    Claim::Acquired {
                        attempt: record.attempt,
                    }
                }
                ClaimStep::ExpireToUnknown => {
                    record.state = OperationState::OutcomeUnknown;
                    record.updated_ms = request.now_ms;
                    Claim::Existing(record.clone())
                }
                ClaimStep::Existing => Claim::Existing(record.clone()),
            })
        })
    }

    async fn succeed(
        &self,
        owner: &ClaimToken,
        result: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.owned(owner, |record| {
            record.state = OperationState::Succeeded;
            record.result = Some(result.to_owned());
            record.updated_ms = now_ms;
        })
    }

    async fn fail(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.settle_with_error(owner, OperationState::Failed, error, now_ms)
    }

    async fn mark_unknown(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.settle_with_error(owner, OperationState::OutcomeUnknown, error, now_ms)
    }

    async fn record_retry(
        &self,
        owner: &ClaimToken,
        error: &AttemptError,
        lease_until_ms: i64,
    ) -> Result<(), StoreError> {
        self.owned(owner, |record| {
            record.errors.push(error.clone());
            record.lease_until_ms = lease_until_ms;
        })
    }

    async fn get(&self, tenant: &str, key: &str) -> Result<Option<OperationRecord>, StoreError> {
        Ok(self.with(|records| records.get(&(tenant.to_owned(), key.to_owned())).cloned()))
    }

    async fn expire_leases(&self, now_ms: i64) -> Result<u64, StoreError> {
        Ok(self.with(|records| {
            let mut count = 0;
            for record in records.values_mut() {
                if record.state == OperationState::Processing && record.lease_until_ms <= now_ms {
                    record.state = OperationState::OutcomeUnknown;
                    record.updated_ms = now_ms;
                    count += 1;
                }
            }
            count
        }))
    }

    async fn list_unknown(&self, limit: u32) -> Result<Vec<OperationRecord>, StoreError> {
        Ok(self.with(|records| {
            let mut unknown: Vec<_> = records
                .values()
                .filter(|r| r.state == OperationState::OutcomeUnknown)
                .cloned()
                .collect();
            unknown.sort_by(|a, b| {
                (a.updated_ms, &a.tenant, &a.key).cmp(&(b.updated_ms, &b.tenant, &b.key))
            });
            unknown.truncate(limit as usize);
            unknown
        }))
    }

    async fn resolve(
        &self,
        tenant: &str,
        key: &str,
        resolution: Resolution<'_>,
        now_ms: i64,
    ) -> Result<Option<OperationRecord>, StoreError> {
        Ok(self.with(|records| {
            let record = records.get_mut(&(tenant.to_owned(), key.to_owned()))?;
            if record.state != OperationState::OutcomeUnknown {
                return None;
            }
            match resolution {
                Resolution::Applied(result) => {
                    record.state = OperationState::Succeeded;
                    record.result = Some(result.to_owned());
                }
                Resolution::NotApplied => record.state = OperationState::Failed,
                Resolution::StillUnknown => record.reconcile_tries += 1,
            }
            record.updated_ms = now_ms;
            Some(record.clone())
        }))
    }

    async fn purge(&self, before_ms: i64) -> Result<u64, StoreError> {
        let purged = self.with(|records| {
            let before = records.len();
            records.retain(|_, r| !(r.state.is_terminal() && r.updated_ms < before_ms));
            (before - records.len()) as u64
        });
        let mut runs = self
            .runs
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        runs.retain(|_, run| run.updated_ms >= before_ms);
        Ok(purged)
    }

    async fn begin_turn(&self, request: TurnRequest<'_>) -> Result<TurnGrant, StoreError> {
        Ok(self.with_run(request.run, |run| run.begin_turn(&request)))
    }

    async fn charge_attempt(
        &self,
        run: RunKey<'_>,
        tool: &str,
        retry_budget: Option<u32>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        Ok(self.with_run(run, |run| run.charge_attempt(tool, retry_budget, now_ms)))
    }

    async fn note_failure(
        &self,
        run: RunKey<'_>,
        tool: &str,
        request_hash: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.with_run(run, |run| run.note_failure(tool, request_hash, now_ms));
        Ok(())
    }

    async fn abort_run(
        &self,
        run: RunKey<'_>,
        abort: &RunAbort,
        now_ms: i64,
    ) -> Result<RunAbort, StoreError> {
        Ok(self.with_run(run, |run| run.abort(abort, now_ms)))
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
