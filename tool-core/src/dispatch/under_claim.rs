//! A write that holds its claim: its attempts run under it, and its outcome (a result, a
//! failure, or the report of steps done halfway) is recorded under it before the model reads
//! it, or kept until the store can take it (see `outage`).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::FutureExt;
use serde_json::Value;

use crate::ctx::Ctx;
use crate::error::ToolError;
use crate::json_text::JsonText;
use crate::registry::RegisteredTool;
use crate::result::CallResult;
use crate::steps::StepReport;
use crate::store::PartialOutcome;

use super::attempt::Input;
use super::failure::Failure;
use super::held_claim::HeldClaim;
use super::ledger::Ledger;
use super::outage::Outcome;
use super::{Dispatcher, answers, audit, partial, unwind};

/// A write under its claim, and what recording its outcome uses: the dispatcher's store
/// policy and audit trail, the claim, the tool's name, the seed of the store's retries and how
/// long they may take.
pub(super) struct UnderClaim<'a> {
    pub(super) dispatcher: &'a Dispatcher,
    pub(super) claim: HeldClaim<'a>,
    pub(super) tool: &'static str,
    /// Seeds the jitter of the store's retries.
    pub(super) seed: u64,
    /// The tool's deadline: how long recording the outcome may wait for the store.
    pub(super) budget: Duration,
}

impl UnderClaim<'_> {
    /// The attempts of `registered` with `args`, under the claim; a panic is an outcome too:
    /// the tool may have acted before it, so its outcome is unknown.
    pub(super) async fn attempts(
        &self,
        registered: &RegisteredTool,
        ctx: &Ctx,
        args: &Value,
        ledger: &Ledger<'_>,
    ) -> Result<JsonText, Failure> {
        let attempts = self
            .dispatcher
            .attempts(registered, ctx, Input::Tree(args), ledger);
        match AssertUnwindSafe(attempts.under(&self.claim).run(None))
            .catch_unwind()
            .await
        {
            Ok(outcome) => outcome,
            Err(payload) => {
                unwind::trace(self.tool, &*payload);
                let attempt = self.claim.attempt.load(Ordering::Relaxed);
                let failure = Failure::new(unwind::recorded(self.tool), attempt);
                Err(failure.answered(answers::write_panicked(self.tool)))
            }
        }
    }

    /// Records the outcome of the attempts, given the journal's `steps`, and answers it: a
    /// step that succeeded before a later one failed (or the tool failed after it), whether the
    /// tool answered the failure or swallowed it, is `partial`, never a success, never a
    /// failure.
    pub(super) async fn settle(
        &self,
        outcome: Result<JsonText, Failure>,
        mut steps: Vec<StepReport>,
    ) -> Result<CallResult, ToolError> {
        if let Err(failure) = &outcome {
            partial::note_error_after_steps(self.tool, &mut steps, failure.answer());
        }
        if partial::is_partial(&steps) {
            return Ok(self.record_partial(steps).await);
        }
        match outcome {
            Ok(data) => self.record_success(data).await,
            Err(failure) => self.record_failure(failure, steps).await,
        }
    }

    /// Records a success, with the call's audit record when it goes with the outcome (one
    /// transaction), and answers it; one the store does not hold is never answered a success.
    async fn record_success(&self, data: JsonText) -> Result<CallResult, ToolError> {
        let dispatcher = self.dispatcher;
        let recorded = Outcome::Succeeded(data.as_str().to_owned());
        let answer = CallResult::succeeded(data);
        let audit = dispatcher
            .audit_goes_with_outcome()
            .then(|| audit::take_success(&answer, dispatcher.now_ms()))
            .flatten();
        if audit.is_some() {
            // After the records of reads that ended before it.
            dispatcher.reads_first().await;
        }
        let written = dispatcher
            .record_outcome(
                &self.claim,
                recorded,
                audit.as_ref(),
                self.seed,
                self.budget,
            )
            .await;
        if let Some(audit) = audit
            && !matches!(written, Ok(true))
        {
            audit::give_back(audit);
        }
        match written {
            Ok(_) => Ok(answer),
            // Applied, but the store does not hold it: never claim a success it does not hold.
            Err(err) => {
                tracing::warn!(error = %err, tool = self.tool, "a write ran and its result could not be recorded");
                Err(answers::ran_unrecorded(self.tool, &err))
            }
        }
    }

    /// Records a failure and answers it: the record keeps the last attempt's own error, the
    /// model gets the answer, with the steps done when the outcome is unknown.
    async fn record_failure(
        &self,
        failure: Failure,
        steps: Vec<StepReport>,
    ) -> Result<CallResult, ToolError> {
        let unknown = failure.may_have_acted();
        let recorded = if unknown {
            Outcome::Unknown(failure.recorded())
        } else {
            // Every other error proves the operation was not applied.
            Outcome::Failed(failure.recorded())
        };
        // The answer stays true whether or not it was recorded: the store's error goes to the
        // trace, and an unrecorded outcome is kept to be written later.
        let written = self
            .dispatcher
            .record_outcome(&self.claim, recorded, None, self.seed, self.budget)
            .await;
        if let Err(store_err) = written {
            tracing::warn!(error = %store_err, tool = self.tool, "the outcome of a write could not be recorded");
        }
        if unknown && !steps.is_empty() {
            // Which steps are done and which one may have acted.
            let mut result = CallResult::from_error(&failure.into_answer());
            result.steps = Some(Box::new(steps));
            return Ok(result);
        }
        Err(failure.into_answer())
    }

    /// Records a partial outcome: the steps' report becomes the record's result, so that the
    /// same call again reads it, and claims the operation again to run only what is not done.
    async fn record_partial(&self, steps: Vec<StepReport>) -> CallResult {
        let dispatcher = self.dispatcher;
        let HeldClaim { store, owner, .. } = self.claim;
        let report = partial::report_json(&steps);
        let error = partial::recorded_error(owner.attempt, &steps);
        let mut wait = dispatcher.store_wait(self.budget);
        let written = dispatcher
            .reaching(self.seed, &mut wait, "record a partial outcome", || {
                store.partial(PartialOutcome {
                    owner,
                    report: &report,
                    error: &error,
                    now_ms: dispatcher.now_ms(),
                })
            })
            .await;
        if let Err(err) = written {
            // The journal holds each step's outcome: the answer is true, and the record, left
            // `processing`, is taken over at the end of its lease by the same call again.
            tracing::warn!(error = %err, tool = self.tool, "a partial outcome could not be recorded");
        }
        partial::answer(self.tool, steps, false)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use serde_json::json;

    use super::*;
    use crate::error::ErrorKind;
    use crate::result::Status;
    use crate::steps::{StepReport, StepState};
    use crate::store::{MemoryStore, OperationRecord, OperationState};

    use super::super::held_claim::claim_for_test;
    use crate::tool::{Tool, ToolDescriptor, ToolFuture};
    use crate::{Registry, SideEffect};

    struct Refund;

    static REFUND: ToolDescriptor =
        ToolDescriptor::new("refund", "Refunds.").with_side_effect(SideEffect::Write);

    impl Tool for Refund {
        fn descriptor(&self) -> &'static ToolDescriptor {
            &REFUND
        }

        fn args_schema(&self) -> Value {
            json!({"type": "object"})
        }

        fn invoke<'a>(&'a self, _ctx: &'a Ctx, args: &'a Value) -> ToolFuture<'a> {
            Box::pin(async move { Ok(JsonText::of(args).expect("a value serializes")) })
        }
    }

    /// Settles `outcome` with `steps` under a fresh claim of key `k1`; answers the call's
    /// answer and the record it left.
    async fn settled(
        outcome: Result<JsonText, Failure>,
        steps: Vec<StepReport>,
    ) -> (Result<CallResult, ToolError>, OperationRecord) {
        let mut registry = Registry::new();
        registry.register_tool(Refund).unwrap();
        let dispatcher = Dispatcher::builder(registry)
            .store(MemoryStore::new())
            .build();
        let store = dispatcher.store().expect("a store");
        let owner = claim_for_test(store, dispatcher.now_ms()).await;
        let under = UnderClaim {
            dispatcher: &dispatcher,
            claim: HeldClaim {
                store,
                owner: &owner,
                lease: Duration::from_secs(30),
                attempt: AtomicU32::new(1),
            },
            tool: "refund",
            seed: 7,
            budget: Duration::from_secs(1),
        };
        let answer = under.settle(outcome, steps).await;
        let record = store.get("acme", "k1").await.unwrap().expect("the record");
        (answer, record)
    }

    fn step(name: &str, status: StepState) -> StepReport {
        StepReport {
            name: name.to_owned(),
            status,
            replayed: false,
            output: None,
            error: None,
        }
    }

    fn failure(kind: ErrorKind) -> Failure {
        Failure::new(ToolError::new(kind, "the provider failed"), 1)
    }

    #[tokio::test(start_paused = true)]
    async fn a_success_is_recorded_before_it_is_answered() {
        let data = JsonText::of(&json!({"refund": "R-1"})).unwrap();
        let (answer, record) = settled(Ok(data), Vec::new()).await;
        assert_eq!(answer.unwrap().status, Status::Succeeded);
        assert_eq!(record.state, OperationState::Succeeded);
        assert_eq!(record.result.as_deref(), Some(r#"{"refund":"R-1"}"#));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_that_proves_nothing_applied_is_recorded_failed() {
        let (answer, record) = settled(Err(failure(ErrorKind::Conflict)), Vec::new()).await;
        assert_eq!(answer.unwrap_err().kind(), ErrorKind::Conflict);
        assert_eq!(record.state, OperationState::Failed);
        assert_eq!(record.errors[0].kind, "conflict");
    }

    #[tokio::test(start_paused = true)]
    async fn an_unknown_outcome_is_recorded_unknown_and_answered_with_its_steps() {
        let steps = vec![step("charge", StepState::OutcomeUnknown)];
        let (answer, record) = settled(Err(failure(ErrorKind::OutcomeUnknown)), steps).await;
        let answer = answer.expect("the steps are answered");
        assert_eq!(answer.status, Status::OutcomeUnknown);
        assert_eq!(answer.steps.expect("its steps").len(), 1);
        assert_eq!(record.state, OperationState::OutcomeUnknown);
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_done_before_a_failure_is_partial() {
        let steps = vec![step("charge", StepState::Succeeded)];
        let (answer, record) = settled(Err(failure(ErrorKind::Conflict)), steps).await;
        let answer = answer.expect("a partial outcome is an answer");
        assert_eq!(answer.status, Status::Partial);
        let steps = answer.steps.expect("its steps");
        let names: Vec<_> = steps.iter().map(|step| step.name.as_str()).collect();
        assert_eq!(names, ["charge", "rest of refund"]);
        // The record keeps the report, to run only what is not done when called again.
        assert!(
            record
                .result
                .is_some_and(|report| report.contains("charge"))
        );
    }
}
