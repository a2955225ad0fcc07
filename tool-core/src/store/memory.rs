//! An operation store in memory, for tests only (the `test-util` feature): it forgets everything
//! when the process ends, so it cannot keep a write from running twice across a restart.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

mod approval;
mod audit;
mod claim;
mod issuer_keys;
mod outbox;
mod resolve;
mod run;
mod steps;
mod tables;

use tables::{Records, Tables};

use super::{
    AttemptFailure, ClaimToken, OperationRecord, OperationState, RunKey, RunRecord, StoreError,
};

/// An [`OperationStore`](super::OperationStore) in a `HashMap`. **For tests only**: nothing survives the process, which
/// is exactly what a durable store exists to survive. Use `toolgate-store-sqlite` or
/// `toolgate-store-postgres` in programs.
///
/// Exported with the `test-util` feature, and by the `toolgate-test` crate. It passes the same
/// conformance suite as the durable stores.
#[derive(Debug, Default)]
pub struct MemoryStore {
    tables: Arc<Mutex<Tables>>,
    runs: Mutex<HashMap<(String, String), RunRecord>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Records) -> T) -> T {
        self.tables(|tables| f(&mut tables.records))
    }

    fn tables<T>(&self, f: impl FnOnce(&mut Tables) -> T) -> T {
        let mut tables = self
            .tables
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        f(&mut tables)
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

    /// Moves the owned `processing` record of `failure` to `state`, appending its error.
    fn settle_with_error(
        &self,
        failure: AttemptFailure<'_>,
        state: OperationState,
    ) -> Result<(), StoreError> {
        self.owned(failure.owner, |record| {
            record.state = state;
            record.errors.push(failure.error.clone());
            record.updated_ms = failure.now_ms;
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
