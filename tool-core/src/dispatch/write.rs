//! The write path of a write or destructive call: the operation's key claimed in the store (a
//! duplicate answers the stored outcome), the attempts run under the claim, and the outcome
//! recorded, or kept until the store can take it.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use serde_json::Value;

use crate::auth::Session;
use crate::backoff::seed_of;
use crate::delivery::Delivery;
use crate::error::ToolError;
#[cfg(feature = "test-util")]
use crate::failpoint::Failpoint;
use crate::idempotency::UnkeyedRequest;
use crate::json_text::JsonText;
use crate::registry::RegisteredTool;
use crate::result::CallResult;
use crate::retry::RetryPolicy;
use crate::steps::{StepJournal, StepReport};
use crate::store::{
    ApprovalRecord, Claim, ClaimRequest, ClaimToken, ClaimedRejection, OperationState,
    OperationStore, PartialOutcome,
};

use super::attempt::Input;
use super::failure::Failure;
use super::held_claim::HeldClaim;
use super::ledger::Ledger;
use super::outage::Outcome;
use super::plan::PreparedWrite;
use super::reach::StoreWait;
use super::recorded::{CLAIM_ROUNDS, Recorded};
use super::{Dispatcher, answers, approval, audit, partial, unwind};

impl Dispatcher {
    /// A write: claim the operation's key, run it (with retries while the fault proves nothing
    /// was applied), record the outcome. A duplicate answers the stored outcome, marked as a
    /// replay.
    pub(super) async fn write(
        &self,
        session: &Session,
        call_id: &str,
        registered: &RegisteredTool,
        write: PreparedWrite,
        ledger: &Ledger<'_>,
    ) -> Result<CallResult, ToolError> {
        let descriptor = registered.descriptor();
        let Some(store) = self.inner.store.as_deref() else {
            return Err(answers::no_store(descriptor.name));
        };
        let tenant = session.auth().tenant();
        // Over the rate limit, a write is refused before it claims its key.
        self.inner.rate_limits.check(descriptor, tenant)?;
        let ctx = self
            .ctx(session, call_id, registered)
            .with_idempotency_key(write.key.clone());
        // The business check: a refusal stores nothing and sends nothing. A call whose key
        // already holds its request is answered from the record instead (a replay is never
        // refused because the state it changed no longer passes the check).
        // The store's faults are retried within the tool's deadline and the call's store wait,
        // of which the turn's counters may have spent some (see `reach`).
        let budget = self.timeout_of(registered);
        let mut wait = self.store_wait(budget);
        wait.spend(ledger.store_waited());
        if descriptor.check.is_some() && self.claim_may_act(store, tenant, &write, &mut wait).await
        {
            self.check(registered, &ctx, &write.args).await?;
        }
        let approval = self.approval_request(&ctx, registered, &write);
        let PreparedWrite {
            args,
            canonical,
            hash,
            key,
            ..
        } = write;
        // The record keeps the arguments for the reconcile hook and the runner of approved
        // operations, but never a sensitive one.
        let redacted =
            (!descriptor.sensitive.is_empty()).then(|| approval::redacted(descriptor, &args));
        let stored = redacted.as_deref().unwrap_or(&canonical);
        let policy = RetryPolicy::of(descriptor);
        let lease = self.lease(registered, policy);
        let seed = self.inner.seed ^ seed_of(call_id);
        // A duplicate waits for the outcome of the call it found running until then.
        let give_up = tokio::time::Instant::now() + self.inner.in_progress_wait;
        let call = WriteCall {
            store,
            registered,
            tenant,
            key: &key,
            hash: &hash,
            canonical: &canonical,
            stored,
            args: &args,
            approval: approval.as_ref(),
            lease,
            seed,
            wait,
            give_up,
        };
        if descriptor.delivery == Delivery::Outbox {
            return self.write_outbox(&call, ctx).await;
        }
        let mut rounds = 0;
        let (attempt, approved) = loop {
            let request = call.request(self.now_ms());
            let claim = match ledger.take_turn_at_claim() {
                // The first claim of a lone write begins its turn (see `turn_claim`).
                Some(turn) => {
                    self.claim_with_turn(store, ledger, turn, request, seed, &mut wait)
                        .await?
                }
                None => self.claim_reaching(store, request, seed, &mut wait).await?,
            };
            match self.on_claim(&call, claim).await {
                Claimed::Run { attempt, approved } => break (attempt, approved),
                Claimed::Answer(answer) => return answer,
                // The call waited on failed, or its record was purged: claim the key again.
                Claimed::Again if rounds < CLAIM_ROUNDS => rounds += 1,
                Claimed::Again => return Err(answers::claims_exhausted(descriptor.name)),
            }
        };
        let owner = ClaimToken {
            tenant: tenant.to_owned(),
            key: key.clone(),
            attempt,
        };
        if let Some(approved) = approved {
            audit::note_approval(&approved.id);
            if let Err(reason) = self.revalidate(registered, &approved, &args, &ctx).await {
                return self
                    .reject_approved(store, &owner, descriptor.name, reason)
                    .await;
            }
        }
        // Its steps are journaled under the claim: a retry or a takeover skips those done.
        let journal = self.inner.store.as_ref().map(|store| {
            Arc::new(StepJournal::new(
                store.clone(),
                owner.clone(),
                self.inner.clock.clone(),
            ))
        });
        let ctx = match &journal {
            Some(journal) => ctx.with_journal(journal.clone()),
            None => ctx,
        };
        #[cfg(feature = "test-util")]
        self.reached(Failpoint::Claimed);
        let claim = HeldClaim {
            store,
            owner: &owner,
            lease,
            attempt: AtomicU32::new(1),
        };
        let attempts = AssertUnwindSafe(self.attempts(
            registered,
            &ctx,
            Input::Tree(&args),
            None,
            Some(&claim),
            ledger,
        ));
        let outcome = match attempts.catch_unwind().await {
            Ok(outcome) => outcome,
            Err(payload) => {
                // The tool may have acted before it panicked: its outcome is unknown.
                unwind::trace(descriptor.name, &*payload);
                let failure = Failure::new(
                    unwind::recorded(descriptor.name),
                    claim.attempt.load(Ordering::Relaxed),
                );
                Err(failure.answered(answers::write_panicked(descriptor.name)))
            }
        };
        #[cfg(feature = "test-util")]
        self.reached(Failpoint::Executed);
        let mut steps = journal.map(|journal| journal.reports()).unwrap_or_default();
        if let Err(failure) = &outcome {
            partial::note_error_after_steps(descriptor.name, &mut steps, failure.answer());
        }
        let result = if partial::is_partial(&steps) {
            // A step succeeded and a later one failed (or the tool failed after it), whether
            // the tool answered the failure or swallowed it: never a success, never a failure.
            Ok(self
                .record_partial(&claim, descriptor.name, steps, seed, budget)
                .await)
        } else {
            self.record(&claim, descriptor.name, outcome, steps, seed, budget)
                .await
        };
        #[cfg(feature = "test-util")]
        self.reached(Failpoint::Recorded);
        result
    }

    /// What a write does with the store's answer to its claim (of the plain path or the
    /// outbox's): run, answer, or claim again.
    pub(super) async fn on_claim(&self, call: &WriteCall<'_>, claim: Claim) -> Claimed {
        let descriptor = call.registered.descriptor();
        match claim {
            Claim::Acquired { attempt, approved } => Claimed::Run {
                attempt,
                approved: approved.map(Box::new),
            },
            Claim::Conflict { .. } => Claimed::Answer(Err(answers::conflict(descriptor))),
            Claim::Approval(found) => {
                // Asked by this call, or found from an earlier one.
                let asked_now = call.approval.is_some_and(|mine| mine.id == found.id);
                audit::note_approval(&found.id);
                Claimed::Answer(Ok(approval::approval_answer(&found, !asked_now)))
            }
            Claim::Existing(record) => {
                match self.answer_recorded(call.store, record, call.give_up).await {
                    Recorded::Answer(answer) => Claimed::Answer(answer),
                    Recorded::Claimable => Claimed::Again,
                }
            }
        }
    }

    /// Records the outcome of a write's attempts and answers it.
    async fn record(
        &self,
        claim: &HeldClaim<'_>,
        tool: &str,
        outcome: Result<JsonText, Failure>,
        steps: Vec<StepReport>,
        seed: u64,
        budget: Duration,
    ) -> Result<CallResult, ToolError> {
        match outcome {
            Ok(data) => {
                let recorded = Outcome::Succeeded(data.as_str().to_owned());
                let answer = CallResult::succeeded(data);
                // The call's audit record goes with its success, in one transaction.
                let audit = self
                    .audit_goes_with_outcome()
                    .then(|| audit::take_success(&answer, self.now_ms()))
                    .flatten();
                if audit.is_some() {
                    // After the records of reads that ended before it.
                    self.reads_first().await;
                }
                let written = self
                    .record_outcome(claim, recorded, audit.as_ref(), seed, budget)
                    .await;
                if let Some(audit) = audit
                    && !matches!(written, Ok(true))
                {
                    audit::give_back(audit);
                }
                match written {
                    Ok(_) => Ok(answer),
                    // Applied, but the store does not hold it: never claim a success it does
                    // not hold.
                    Err(err) => {
                        tracing::warn!(error = %err, tool, "a write ran and its result could not be recorded");
                        Err(answers::ran_unrecorded(tool, &err))
                    }
                }
            }
            Err(failure) => {
                // The record keeps the last attempt's own error; the model gets the answer.
                let unknown = failure.may_have_acted();
                let recorded = if unknown {
                    Outcome::Unknown(failure.recorded())
                } else {
                    // Every other error proves the operation was not applied.
                    Outcome::Failed(failure.recorded())
                };
                // The answer stays true whether or not it was recorded: the store's error goes
                // to the trace, and an unrecorded outcome is kept to be written later.
                if let Err(store_err) = self
                    .record_outcome(claim, recorded, None, seed, budget)
                    .await
                {
                    tracing::warn!(error = %store_err, tool, "the outcome of a write could not be recorded");
                }
                if unknown && !steps.is_empty() {
                    // Which steps are done and which one may have acted.
                    let mut result = CallResult::from_error(&failure.into_answer());
                    result.steps = Some(Box::new(steps));
                    return Ok(result);
                }
                Err(failure.into_answer())
            }
        }
    }

    /// Records a partial outcome: the steps' report becomes the record's result, so that the
    /// same call again reads it, and claims the operation again to run only what is not done.
    async fn record_partial(
        &self,
        claim: &HeldClaim<'_>,
        tool: &str,
        steps: Vec<StepReport>,
        seed: u64,
        budget: Duration,
    ) -> CallResult {
        let HeldClaim { store, owner, .. } = *claim;
        let report = partial::report_json(&steps);
        let error = partial::recorded_error(owner.attempt, &steps);
        let mut wait = self.store_wait(budget);
        let written = self
            .reaching(seed, &mut wait, "record a partial outcome", || {
                store.partial(PartialOutcome {
                    owner,
                    report: &report,
                    error: &error,
                    now_ms: self.now_ms(),
                })
            })
            .await;
        if let Err(err) = written {
            // The journal holds each step's outcome: the answer is true, and the record, left
            // `processing`, is taken over at the end of its lease by the same call again.
            tracing::warn!(error = %err, tool, "a partial outcome could not be recorded");
        }
        partial::answer(tool, steps, false)
    }

    /// An approved operation that failed the checks before it ran: rejected, with `reason`, in
    /// the store and the audit trail; the model reads the rejection.
    pub(super) async fn reject_approved(
        &self,
        store: &dyn OperationStore,
        owner: &ClaimToken,
        tool: &str,
        reason: String,
    ) -> Result<CallResult, ToolError> {
        let now_ms = self.now_ms();
        let decision = approval::revalidation_rejected(reason, now_ms);
        match store
            .reject_claimed(ClaimedRejection {
                owner,
                decision: &decision,
                now_ms,
            })
            .await
        {
            Ok(rejected) => {
                let entry = crate::decide::decision_entry(&rejected, &decision);
                if let Err(err) = store.append_audit(&entry).await {
                    tracing::warn!(error = %err, tool, "a rejection could not be added to the audit trail");
                }
                Ok(approval::approval_answer(&rejected, false))
            }
            Err(err) => {
                tracing::warn!(error = %err, tool, "an approved operation failed its checks and its rejection could not be recorded");
                Err(answers::store_failed(tool, &err))
            }
        }
    }

    /// Tells the test hooks, if any, that a write reached `point`.
    #[cfg(feature = "test-util")]
    pub(super) fn reached(&self, point: Failpoint) {
        if let Some(failpoints) = &self.inner.failpoints {
            failpoints.hit(point);
        }
    }

    /// How long a claim holds: every attempt's deadline and every backoff, plus a margin.
    fn lease(&self, registered: &RegisteredTool, policy: RetryPolicy) -> Duration {
        self.timeout_of(registered)
            .saturating_mul(policy.max_attempts)
            .saturating_add(policy.max.saturating_mul(policy.max_attempts - 1))
            .saturating_add(LEASE_MARGIN)
    }
}

/// What a write does with the store's answer to its claim.
pub(super) enum Claimed {
    /// Run it under the claim: the attempt claimed, and the approval it runs under.
    Run {
        attempt: u32,
        approved: Option<Box<ApprovalRecord>>,
    },
    /// Answer this without running.
    Answer(Result<CallResult, ToolError>),
    /// Claim the key again: the record failed, or was purged, while it waited.
    Again,
}

/// A write on its way to its claim: what the plain path and the outbox's share.
pub(super) struct WriteCall<'a> {
    pub(super) store: &'a dyn OperationStore,
    pub(super) registered: &'a RegisteredTool,
    pub(super) tenant: &'a str,
    pub(super) key: &'a str,
    pub(super) hash: &'a str,
    /// The canonical arguments, none redacted: a record stored under their unkeyed hash
    /// (before hashes were keyed) is recognised by them.
    pub(super) canonical: &'a str,
    /// The arguments the record keeps (sensitive ones redacted).
    pub(super) stored: &'a str,
    /// The validated arguments the tool runs with.
    pub(super) args: &'a Value,
    /// The approval this call asks for, over its tool's threshold.
    pub(super) approval: Option<&'a ApprovalRecord>,
    pub(super) lease: Duration,
    pub(super) seed: u64,
    /// What is left of the call's wait for a store that cannot be reached, for its claim.
    pub(super) wait: StoreWait,
    /// Until when a duplicate waits for the outcome of the call it found running.
    pub(super) give_up: tokio::time::Instant,
}

impl WriteCall<'_> {
    /// The claim of its key at `now_ms`.
    pub(super) fn request(&self, now_ms: i64) -> ClaimRequest<'_> {
        let descriptor = self.registered.descriptor();
        ClaimRequest {
            tenant: self.tenant,
            key: self.key,
            tool: descriptor.name,
            request_hash: self.hash,
            unkeyed: Some(UnkeyedRequest::new(descriptor.name, self.canonical)),
            arguments: self.stored,
            now_ms,
            lease: self.lease,
            takeover: descriptor.honours_key,
            approval: self.approval,
        }
    }
}

impl Dispatcher {
    /// Whether a claim of `write` may run it or ask for its approval: its key holds no record,
    /// or a record a new request takes over (`failed`, or `rejected` under other arguments). A
    /// store that cannot answer (or is known to be out of reach) counts as yes: the check runs,
    /// and the claim meets the store's fault.
    async fn claim_may_act(
        &self,
        store: &dyn OperationStore,
        tenant: &str,
        write: &PreparedWrite,
        wait: &mut StoreWait,
    ) -> bool {
        if self.inner.reach.is_down() {
            return true;
        }
        let found = wait
            .run("read a record", store.get(tenant, &write.key))
            .await;
        self.inner.reach.note(&found);
        match found {
            Ok(Some(record)) => match record.state {
                OperationState::Failed => true,
                OperationState::Rejected => {
                    record.request_hash != write.hash
                        && !UnkeyedRequest::new(write.tool, &write.canonical)
                            .matches(&record.request_hash)
                }
                _ => false,
            },
            Ok(None) | Err(_) => true,
        }
    }
}

/// Added to a claim's lease beyond its attempts and backoffs.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
