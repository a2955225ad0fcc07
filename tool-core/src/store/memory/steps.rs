//! The step journals of the [`MemoryStore`](super::MemoryStore).

use async_trait::async_trait;

use super::MemoryStore;
use super::tables::Tables;
use crate::store::{
    ClaimToken, OperationState, PartialOutcome, StepOutcome, StepRecord, StepRequest, StepStart,
    StepStatus, StepStore, StoreError,
};

impl Tables {
    /// Whether `owner` holds its record: `processing` under its attempt.
    fn holds(&self, owner: &ClaimToken) -> Result<(String, String), StoreError> {
        let id = (owner.tenant.clone(), owner.key.clone());
        match self.records.get(&id) {
            Some(r) if r.state == OperationState::Processing && r.attempt == owner.attempt => {
                Ok(id)
            }
            _ => Err(StoreError::LostClaim {
                key: owner.key.clone(),
                attempt: owner.attempt,
            }),
        }
    }

    pub(super) fn begin_step(
        &mut self,
        owner: &ClaimToken,
        name: &str,
        now_ms: i64,
    ) -> Result<StepStart, StoreError> {
        let id = self.holds(owner)?;
        let steps = self.steps.entry(id).or_default();
        let Some(step) = steps.iter_mut().find(|s| s.name == name) else {
            let seq = u32::try_from(steps.len() + 1).unwrap_or(u32::MAX);
            steps.push(StepRecord {
                name: name.to_owned(),
                seq,
                status: StepStatus::Started,
                attempt: owner.attempt,
                output: None,
                error: None,
                updated_ms: now_ms,
            });
            return Ok(StepStart::Run);
        };
        Ok(match step.status {
            StepStatus::Succeeded => StepStart::Done(step.clone()),
            StepStatus::Started => StepStart::Unknown(step.clone()),
            StepStatus::Failed => {
                step.status = StepStatus::Started;
                step.attempt = owner.attempt;
                step.updated_ms = now_ms;
                StepStart::Run
            }
        })
    }

    pub(super) fn finish_step(
        &mut self,
        owner: &ClaimToken,
        name: &str,
        outcome: StepOutcome<'_>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let id = self.holds(owner)?;
        let step = self
            .steps
            .get_mut(&id)
            .and_then(|steps| steps.iter_mut().find(|s| s.name == name))
            .filter(|s| s.status == StepStatus::Started)
            .ok_or_else(|| StoreError::LostClaim {
                key: owner.key.clone(),
                attempt: owner.attempt,
            })?;
        match outcome {
            StepOutcome::Succeeded(output) => {
                step.status = StepStatus::Succeeded;
                step.output = Some(output.to_owned());
                step.error = None;
            }
            StepOutcome::Failed(error) => {
                step.status = StepStatus::Failed;
                step.error = Some(error.clone());
            }
        }
        step.updated_ms = now_ms;
        Ok(())
    }

    /// After a resolution found `id` not applied: its `started` steps failed. Answers whether a
    /// step of it succeeded.
    pub(super) fn steps_not_applied(&mut self, id: &(String, String), now_ms: i64) -> bool {
        let Some(steps) = self.steps.get_mut(id) else {
            return false;
        };
        let mut any_succeeded = false;
        for step in steps.iter_mut() {
            match step.status {
                StepStatus::Started => {
                    step.status = StepStatus::Failed;
                    step.updated_ms = now_ms;
                }
                StepStatus::Succeeded => any_succeeded = true,
                StepStatus::Failed => {}
            }
        }
        any_succeeded
    }
}

#[async_trait]
impl StepStore for MemoryStore {
    async fn begin_step(&self, step: StepRequest<'_>) -> Result<StepStart, StoreError> {
        self.tables(|tables| tables.begin_step(step.owner, step.name, step.now_ms))
    }

    async fn finish_step(
        &self,
        step: StepRequest<'_>,
        outcome: StepOutcome<'_>,
    ) -> Result<(), StoreError> {
        self.tables(|tables| tables.finish_step(step.owner, step.name, outcome, step.now_ms))
    }

    async fn steps(&self, tenant: &str, key: &str) -> Result<Vec<StepRecord>, StoreError> {
        let id = (tenant.to_owned(), key.to_owned());
        Ok(self.tables(|tables| tables.steps.get(&id).cloned().unwrap_or_default()))
    }

    async fn partial(&self, outcome: PartialOutcome<'_>) -> Result<(), StoreError> {
        self.owned(outcome.owner, |record| {
            record.state = OperationState::Partial;
            record.result = Some(outcome.report.to_owned());
            record.errors.push(outcome.error.clone());
            record.updated_ms = outcome.now_ms;
        })
    }
}
