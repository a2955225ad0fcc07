//! Steps 6, 8 and 9 for a write or destructive call: the operation's key claimed in the store
//! (a duplicate answers the stored outcome), the attempts run under the claim, and the outcome
//! recorded, or kept until the store can take it.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use serde_json::Value;

use crate::auth::Session;
use crate::error::ToolError;
use crate::failpoint::Failpoint;
use crate::idempotency::{canonical_json, operation_key, request_hash};
use crate::registry::RegisteredTool;
use crate::result::CallResult;
use crate::retry::RetryPolicy;
use crate::store::{Claim, ClaimRequest, Owner};

use super::Dispatcher;
use super::attempts::{Claimed, Input, seed_of};
use super::existing::{CLAIM_ROUNDS, Seen, conflict};
use super::failure::Failure;
use super::outage::{Outcome, ran_unrecorded};
use super::unwind;

impl Dispatcher {
    /// Steps 6, 8 and 9 for a write: claim the operation's key, run it (with retries while the
    /// fault proves nothing was applied), record the outcome. A duplicate answers the stored
    /// outcome, marked as a replay.
    pub(super) async fn write(
        &self,
        session: &Session,
        call_id: String,
        registered: &RegisteredTool,
        args: Value,
    ) -> (String, Result<CallResult, ToolError>) {
        let descriptor = registered.descriptor();
        let Some(store) = self.inner.store.as_deref() else {
            let err = ToolError::internal(format!("{} cannot run: no operation store is configured", descriptor.name))
                .why("write and destructive tools run only under an idempotency key kept in a store (DispatcherBuilder::store)")
                .next("do not repeat this call; tell the user the tool is unavailable");
            return (call_id, Err(err));
        };
        let tenant = session.auth().tenant();
        let canonical = canonical_json(&args);
        let hash = request_hash(descriptor.name, &canonical);
        let key = operation_key(descriptor, tenant, session.run_id(), &args);
        let policy = RetryPolicy::of(descriptor);
        let lease = self.lease(registered, policy);
        // The store's faults are retried within the tool's deadline (see `outage`).
        let budget = descriptor.timeout.unwrap_or(self.inner.default_timeout);
        let seed = self.inner.seed ^ seed_of(&call_id);
        // A duplicate waits for the outcome of the call it found running until then.
        let give_up = tokio::time::Instant::now() + self.inner.in_progress_wait;
        let mut rounds = 0;
        let attempt = loop {
            let request = ClaimRequest {
                tenant,
                key: &key,
                tool: descriptor.name,
                request_hash: &hash,
                arguments: &canonical,
                now_ms: self.inner.clock.now_ms(),
                lease,
                takeover: descriptor.honours_key,
            };
            match self.claim_reaching(store, request, seed, budget).await {
                Ok(Claim::Acquired { attempt }) => break attempt,
                Ok(Claim::Conflict { .. }) => return (call_id, Err(conflict(descriptor))),
                Ok(Claim::Existing(record)) => match self.existing(store, record, give_up).await {
                    Seen::Answer(answer) => return (call_id, answer),
                    // The call waited on failed, or its record was purged: claim the key again.
                    Seen::Claimable if rounds < CLAIM_ROUNDS => rounds += 1,
                    Seen::Claimable => {
                        let err = ToolError::internal(format!(
                            "{} did not run: its operation changed under every claim of it",
                            descriptor.name
                        ))
                        .next("try again in a moment, or tell the user the tool is unavailable");
                        return (call_id, Err(err));
                    }
                },
                Err(err) => return (call_id, Err(err)),
            }
        };
        let owner = Owner {
            tenant: tenant.to_owned(),
            key: key.clone(),
            attempt,
        };
        let ctx = self
            .ctx(session, call_id, registered)
            .with_idempotency_key(key);
        self.hit(Failpoint::Claimed);
        let claimed = Claimed {
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
            Some(&claimed),
        ));
        let outcome = match attempts.catch_unwind().await {
            Ok(outcome) => outcome,
            Err(payload) => {
                // The tool may have acted before it panicked: its outcome is unknown.
                unwind::trace(descriptor.name, &*payload);
                let failure = Failure::new(
                    unwind::recorded(descriptor.name),
                    claimed.attempt.load(Ordering::Relaxed),
                );
                Err(failure.answered(unwind::write_panicked(descriptor.name)))
            }
        };
        self.hit(Failpoint::Executed);
        let result = match outcome {
            Ok(data) => {
                let recorded = Outcome::Succeeded(data.as_str().to_owned());
                match self
                    .record_outcome(store, &owner, recorded, seed, budget)
                    .await
                {
                    Ok(()) => Ok(CallResult::succeeded(data)),
                    // Applied, but the store does not hold it: never claim a success it does
                    // not hold.
                    Err(err) => Err(ran_unrecorded(descriptor.name, &err)),
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
                match self
                    .record_outcome(store, &owner, recorded, seed, budget)
                    .await
                {
                    Ok(()) => Err(failure.into_answer()),
                    Err(store_err) => {
                        tracing::warn!(error = %store_err, tool = descriptor.name, "the outcome of a write could not be recorded");
                        Err(failure.into_answer())
                    }
                }
            }
        };
        self.hit(Failpoint::Recorded);
        (ctx.into_call_id(), result)
    }

    pub(super) fn hit(&self, point: Failpoint) {
        if let Some(failpoints) = &self.inner.failpoints {
            failpoints.hit(point);
        }
    }

    /// How long a claim holds: every attempt's deadline and every backoff, plus a margin.
    fn lease(&self, registered: &RegisteredTool, policy: RetryPolicy) -> Duration {
        let timeout = registered
            .descriptor()
            .timeout
            .unwrap_or(self.inner.default_timeout);
        timeout
            .saturating_mul(policy.max_attempts)
            .saturating_add(policy.max.saturating_mul(policy.max_attempts - 1))
            .saturating_add(LEASE_MARGIN)
    }
}

/// Added to a claim's lease beyond its attempts and backoffs.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
