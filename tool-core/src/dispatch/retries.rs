//! The attempts after a transient fault, below the model: sent again while the retry policy
//! says the fault may be ([`RetryPolicy::may_send_again`]) and its attempts and deadline allow,
//! each retry of a write recorded under its claim before it is sent.

use std::sync::atomic::Ordering;

use crate::backoff::{Backoff, seed_of};
use crate::ctx::Ctx;
use crate::error::ToolError;
use crate::json_text::JsonText;
use crate::registry::RegisteredTool;
use crate::retry::RetryPolicy;
use crate::store::{AttemptError, RetryNote};

use super::attempt::{Input, attempt};
use super::failure::Failure;
use super::held_claim::HeldClaim;
use super::ledger::Ledger;
use super::{Dispatcher, answers};

impl Dispatcher {
    /// The attempts after the first failed with `err`, while the policy allows sending it
    /// again and the total deadline has room.
    pub(super) async fn retries(
        &self,
        registered: &RegisteredTool,
        ctx: &Ctx,
        args: Input<'_>,
        claim: Option<&HeldClaim<'_>>,
        mut err: ToolError,
        ledger: &Ledger<'_>,
    ) -> Result<JsonText, Failure> {
        let descriptor = registered.descriptor();
        let timeout = self.timeout_of(registered);
        let policy = RetryPolicy::of(descriptor);
        // The total deadline: every remaining attempt's, counted from the first failure.
        let mut budget_end: Option<tokio::time::Instant> = None;
        let mut delays: Option<Backoff> = None;
        let mut attempt_number = 1;
        loop {
            let may_send_again = RetryPolicy::may_send_again(
                err.kind(),
                descriptor.side_effect,
                descriptor.honours_key,
            );
            if !may_send_again {
                return Err(Failure::new(err, attempt_number));
            }
            if attempt_number >= policy.max_attempts {
                return Err(exhausted(descriptor.name, err, attempt_number));
            }
            let backoff = delays.get_or_insert_with(|| {
                Backoff::new(
                    policy.base,
                    policy.max,
                    policy.jitter,
                    self.inner.seed ^ seed_of(ctx.call_id()),
                )
            });
            let mut delay = backoff.next().unwrap_or(policy.max);
            if let Some(after) = err.retry_after() {
                delay = delay.max(after);
            }
            let now = tokio::time::Instant::now();
            let budget_end = *budget_end.get_or_insert_with(|| {
                now + timeout.saturating_mul(policy.max_attempts - attempt_number)
            });
            if now + delay >= budget_end {
                return Err(exhausted(descriptor.name, err, attempt_number));
            }
            // Every retry counts against the tool's retry budget in the run.
            if !ledger.charge_attempt(descriptor.name).await {
                let budget = ledger.limits.retry_budget.unwrap_or(u32::MAX);
                let stopped = answers::run_budget_stopped_retries(
                    descriptor.name,
                    &err,
                    attempt_number,
                    budget,
                );
                let failure = Failure::new(err, attempt_number);
                return Err(match stopped {
                    Some(answer) => failure.answered(answer),
                    None => failure,
                });
            }
            if let Some(claim) = claim {
                let record = AttemptError {
                    attempt: attempt_number,
                    kind: err.kind().as_str().to_owned(),
                    what: err.what().to_owned(),
                };
                let lease_until = self
                    .inner
                    .clock
                    .now_ms()
                    .saturating_add(i64::try_from(claim.lease.as_millis()).unwrap_or(i64::MAX));
                let recorded = claim
                    .store
                    .record_retry(RetryNote {
                        owner: claim.owner,
                        error: &record,
                        lease_until_ms: lease_until,
                    })
                    .await;
                if let Err(store_err) = recorded {
                    // No retry without its record: stop here, saying what the last attempt did.
                    tracing::warn!(error = %store_err, tool = descriptor.name, "a retry could not be recorded; the call stops");
                    let answer = answers::not_retried(descriptor.name, err.clone(), &store_err);
                    return Err(Failure::new(err, attempt_number).answered(answer));
                }
            }
            tokio::time::sleep(delay).await;
            attempt_number += 1;
            super::audit::count_attempt(attempt_number);
            if let Some(claim) = claim {
                claim.attempt.store(attempt_number, Ordering::Relaxed);
            }
            err = match attempt(registered, args.invoke(registered, ctx), timeout).await {
                Ok(data) => return Ok(data),
                Err(err) => err,
            };
        }
    }
}

/// How the attempts end after the last one, numbered `attempts`, failed with a fault that may
/// be sent again: the record keeps `err`; the model reads a summary of the spent retries.
fn exhausted(tool: &str, err: ToolError, attempts: u32) -> Failure {
    match answers::retries_spent(tool, &err, attempts) {
        Some(summary) => Failure::new(err, attempts).answered(summary),
        None => Failure::new(err, attempts),
    }
}
