//! [`StepStore`]: the journal of a multi-step operation's steps.

use async_trait::async_trait;

#[cfg(doc)]
use super::ClaimStore;
use super::{PartialOutcome, StepOutcome, StepRecord, StepRequest, StepStart, StoreError};

/// The step journal of an operation whose tool runs in steps: each step begun and finished
/// under the claim of its operation, so a step that succeeded is never run again.
///
/// An application reads a journal with [`steps`](Self::steps). The rest only a store
/// implements, and the dispatcher calls, as a tool's steps run.
#[async_trait]
pub trait StepStore: Send + Sync {
    /// Begins the step `step.name` of the operation `step.owner` holds, atomically (see
    /// [`StepStart`]): a step never begun, or `failed`, becomes `started` under the owner's
    /// attempt (a new one takes the next `seq`) and answers [`StepStart::Run`]; a `succeeded` one
    /// answers [`StepStart::Done`]; a `started` one answers [`StepStart::Unknown`] and is not
    /// changed. [`StoreError::LostClaim`] when the record is no longer `processing` under the
    /// owner's attempt.
    async fn begin_step(&self, step: StepRequest<'_>) -> Result<StepStart, StoreError>;

    /// Records `outcome` for the step `step.name` (`started`, or `failed` when a check found
    /// that an unknown step was not applied) of the operation `step.owner` holds. Same
    /// ownership rule as [`begin_step`](Self::begin_step).
    async fn finish_step(
        &self,
        step: StepRequest<'_>,
        outcome: StepOutcome<'_>,
    ) -> Result<(), StoreError>;

    /// The step journal of `(tenant, key)`, by `seq`.
    async fn steps(&self, tenant: &str, key: &str) -> Result<Vec<StepRecord>, StoreError>;

    /// `processing` → `partial`: some steps succeeded and a later one failed. `outcome.report`
    /// (JSON text, the steps as the model reads them) becomes the record's result and
    /// `outcome.error` is appended. Same ownership rule as [`ClaimStore::succeed`].
    async fn partial(&self, outcome: PartialOutcome<'_>) -> Result<(), StoreError>;
}
