//! The write path of a write or destructive call: the operation's key claimed in the store (a
//! duplicate answers the stored outcome), the attempts run under the claim, and the outcome
//! recorded, or kept until the store can take it.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_util::FutureExt;

use crate::auth::Session;
use crate::error::ToolError;
#[cfg(feature = "test-util")]
use crate::failpoint::Failpoint;
use crate::registry::RegisteredTool;
use crate::result::CallResult;
use crate::retry::RetryPolicy;
use crate::store::{Claim, ClaimRequest, ClaimToken, OperationState, OperationStore};

use super::attempt::Input;
use super::failure::Failure;
use super::ledger::Ledger;
use super::outage::Outcome;
use super::plan::PreparedWrite;
use super::recorded::{CLAIM_ROUNDS, Recorded};
use super::retries::seed_of;
use super::{Dispatcher, answers, approval, audit, unwind};

/// The claim a write runs under: where its attempts record their errors, and under which
/// attempt of the operation.
pub(super) struct HeldClaim<'a> {
    pub(super) store: &'a dyn OperationStore,
    pub(super) owner: &'a ClaimToken,
    /// How long the claim holds; each retry renews it.
    pub(super) lease: Duration,
    /// The attempt running now (1 for the first), for a panic to be recorded under.
    pub(super) attempt: AtomicU32,
}

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
        if descriptor.check.is_some() && claim_may_act(store, tenant, &write).await {
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
        let stored = if descriptor.sensitive.is_empty() {
            canonical
        } else {
            approval::redacted(descriptor, &args)
        };
        let policy = RetryPolicy::of(descriptor);
        let lease = self.lease(registered, policy);
        // The store's faults are retried within the tool's deadline (see `outage`).
        let budget = self.timeout_of(registered);
        let seed = self.inner.seed ^ seed_of(call_id);
        // A duplicate waits for the outcome of the call it found running until then.
        let give_up = tokio::time::Instant::now() + self.inner.in_progress_wait;
        let mut rounds = 0;
        let (attempt, approved) = loop {
            let request = ClaimRequest {
                tenant,
                key: &key,
                tool: descriptor.name,
                request_hash: &hash,
                arguments: &stored,
                now_ms: self.inner.clock.now_ms(),
                lease,
                takeover: descriptor.honours_key,
                approval: approval.as_ref(),
            };
            match self.claim_reaching(store, request, seed, budget).await? {
                Claim::Acquired { attempt, approved } => break (attempt, approved),
                Claim::Conflict { .. } => return Err(answers::conflict(descriptor)),
                Claim::Approval(found) => {
                    // Asked by this call, or found from an earlier one.
                    let asked_now = approval.as_ref().is_some_and(|mine| mine.id == found.id);
                    audit::note_approval(&found.id);
                    return Ok(approval::approval_answer(&found, !asked_now));
                }
                Claim::Existing(record) => {
                    match self.answer_recorded(store, record, give_up).await {
                        Recorded::Answer(answer) => return answer,
                        // The call waited on failed, or its record was purged: claim the key again.
                        Recorded::Claimable if rounds < CLAIM_ROUNDS => rounds += 1,
                        Recorded::Claimable => {
                            return Err(answers::claims_exhausted(descriptor.name));
                        }
                    }
                }
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
        let result = match outcome {
            Ok(data) => {
                let recorded = Outcome::Succeeded(data.as_str().to_owned());
                match self.record_outcome(&claim, recorded, seed, budget).await {
                    Ok(()) => Ok(CallResult::succeeded(data)),
                    // Applied, but the store does not hold it: never claim a success it does
                    // not hold.
                    Err(err) => {
                        tracing::warn!(error = %err, tool = descriptor.name, "a write ran and its result could not be recorded");
                        Err(answers::ran_unrecorded(descriptor.name, &err))
                    }
                }
            }
            Err(failure) => {
                // The record keeps the last attempt's own error; the model gets the answer.
                let recorded = if failure.may_have_acted() {
                    Outcome::Unknown(failure.recorded())
                } else {
                    // Every other error proves the operation was not applied.
                    Outcome::Failed(failure.recorded())
                };
                // The answer stays true whether or not it was recorded: the store's error goes
                // to the trace, and an unrecorded outcome is kept to be written later.
                match self.record_outcome(&claim, recorded, seed, budget).await {
                    Ok(()) => Err(failure.into_answer()),
                    Err(store_err) => {
                        tracing::warn!(error = %store_err, tool = descriptor.name, "the outcome of a write could not be recorded");
                        Err(failure.into_answer())
                    }
                }
            }
        };
        #[cfg(feature = "test-util")]
        self.reached(Failpoint::Recorded);
        result
    }

    /// An approved operation that failed the checks before it ran: rejected, with `reason`, in
    /// the store and the audit trail; the model reads the rejection.
    async fn reject_approved(
        &self,
        store: &dyn OperationStore,
        owner: &ClaimToken,
        tool: &str,
        reason: String,
    ) -> Result<CallResult, ToolError> {
        let now_ms = self.now_ms();
        let decision = approval::revalidation_rejected(reason, now_ms);
        match store.reject_claimed(owner, &decision, now_ms).await {
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
    fn reached(&self, point: Failpoint) {
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

/// Whether a claim of `write` may run it or ask for its approval: its key holds no record, or a
/// record a new request takes over (`failed`, or `rejected` under other arguments). A store that
/// cannot answer counts as yes: the check runs, and the claim meets the store's fault.
async fn claim_may_act(store: &dyn OperationStore, tenant: &str, write: &PreparedWrite) -> bool {
    match store.get(tenant, &write.key).await {
        Ok(Some(record)) => match record.state {
            OperationState::Failed => true,
            OperationState::Rejected => record.request_hash != write.hash,
            _ => false,
        },
        Ok(None) | Err(_) => true,
    }
}

/// Added to a claim's lease beyond its attempts and backoffs.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
