//! The attempts after a transient fault, below the model: sent again while the retry policy
//! says the fault may be ([`RetryPolicy::may_send_again`]) and its attempts and deadline allow
//! ([`Schedule::next`]), each retry charged to the run's retry budget and, for a write,
//! recorded under its claim before it is sent.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::{Backoff, seed_of};
use crate::error::ToolError;
use crate::json_text::JsonText;
use crate::retry::RetryPolicy;
use crate::side_effect::SideEffect;
use crate::store::{AttemptError, RetryNote, StoreError};
use crate::tool::ToolDescriptor;

use super::answers;
use super::attempt::{Attempts, attempt};
use super::failure::Failure;

impl Attempts<'_> {
    /// The attempts after the first failed with `err`, while the policy allows sending it
    /// again and the total deadline has room.
    pub(super) async fn retries(&self, mut err: ToolError) -> Result<JsonText, Failure> {
        let descriptor = self.registered.descriptor();
        let mut schedule = Schedule::new(descriptor, self.timeout);
        let mut attempt_number = 1;
        loop {
            let seed = || self.seed ^ seed_of(self.ctx.call_id());
            let delay = match schedule.next(&err, attempt_number, seed, Instant::now()) {
                Next::After(delay) => delay,
                Next::Final => return Err(Failure::new(err, attempt_number)),
                Next::Spent => return Err(exhausted(descriptor.name, err, attempt_number)),
            };
            // Every retry counts against the tool's retry budget in the run.
            if !self.ledger.charge_attempt(descriptor.name).await {
                return Err(self.budget_stopped(err, attempt_number));
            }
            if let Err(store_err) = self.record_retry(&err, attempt_number).await {
                // No retry without its record: stop here, saying what the last attempt did.
                tracing::warn!(error = %store_err, tool = descriptor.name, "a retry could not be recorded; the call stops");
                let answer = answers::not_retried(descriptor.name, err.clone(), &store_err);
                return Err(Failure::new(err, attempt_number).answered(answer));
            }
            tokio::time::sleep(delay).await;
            attempt_number += 1;
            super::audit::count_attempt(attempt_number);
            if let Some(claim) = self.claim {
                claim.attempt.store(attempt_number, Ordering::Relaxed);
            }
            let call = self.args.invoke(self.registered, self.ctx);
            err = match attempt(self.registered, call, self.timeout).await {
                Ok(data) => return Ok(data),
                Err(err) => err,
            };
        }
    }

    /// How the attempts end when the run's retry budget refuses the retry after attempt
    /// `attempts` failed with `err`.
    fn budget_stopped(&self, err: ToolError, attempts: u32) -> Failure {
        let tool = self.registered.descriptor().name;
        let budget = self.ledger.limits.retry_budget.unwrap_or(u32::MAX);
        let stopped = answers::run_budget_stopped_retries(tool, &err, attempts, budget);
        let failure = Failure::new(err, attempts);
        match stopped {
            Some(answer) => failure.answered(answer),
            None => failure,
        }
    }

    /// Records, under a write's claim (if any), that attempt `attempt` failed with `err` and is
    /// sent again, renewing the claim's lease.
    async fn record_retry(&self, err: &ToolError, attempt: u32) -> Result<(), StoreError> {
        let Some(claim) = self.claim else {
            return Ok(());
        };
        let record = AttemptError {
            attempt,
            kind: err.kind().as_str().to_owned(),
            what: err.what().to_owned(),
        };
        let lease = i64::try_from(claim.lease.as_millis()).unwrap_or(i64::MAX);
        let lease_until = self.clock.now_ms().saturating_add(lease);
        claim
            .store
            .record_retry(RetryNote {
                owner: claim.owner,
                error: &record,
                lease_until_ms: lease_until,
            })
            .await
    }
}

/// When a failed attempt is sent again: the retry policy's decision, attempt after attempt.
struct Schedule {
    policy: RetryPolicy,
    side_effect: SideEffect,
    honours_key: bool,
    /// The deadline of one attempt.
    timeout: Duration,
    /// The total deadline: every remaining attempt's, counted from the first failure.
    budget_end: Option<Instant>,
    /// The backoff's delays, from the first retry on.
    delays: Option<Backoff>,
}

/// What follows a failed attempt.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// Send it again after this delay.
    After(Duration),
    /// Not again: the fault may not be sent again (the model reads it as it is).
    Final,
    /// Not again: the attempts or the total deadline are spent.
    Spent,
}

impl Schedule {
    fn new(descriptor: &ToolDescriptor, timeout: Duration) -> Self {
        Schedule {
            policy: RetryPolicy::of(descriptor),
            side_effect: descriptor.side_effect,
            honours_key: descriptor.honours_key,
            timeout,
            budget_end: None,
            delays: None,
        }
    }

    /// What follows attempt `made` (1 for the first), failed with `err`, at `now`: the fault
    /// may be sent again, the policy has attempts left, and the delay (the backoff's, or the
    /// fault's `retry_after` when longer) ends before the total deadline. `seed` seeds the
    /// backoff's jitter, asked once.
    fn next(
        &mut self,
        err: &ToolError,
        made: u32,
        seed: impl FnOnce() -> u64,
        now: Instant,
    ) -> Next {
        let policy = self.policy;
        if !RetryPolicy::may_send_again(err.kind(), self.side_effect, self.honours_key) {
            return Next::Final;
        }
        if made >= policy.max_attempts {
            return Next::Spent;
        }
        let backoff = self
            .delays
            .get_or_insert_with(|| Backoff::new(policy.base, policy.max, policy.jitter, seed()));
        let mut delay = backoff.next().unwrap_or(policy.max);
        if let Some(after) = err.retry_after() {
            delay = delay.max(after);
        }
        let timeout = self.timeout;
        let budget_end = *self
            .budget_end
            .get_or_insert_with(|| now + timeout.saturating_mul(policy.max_attempts - made));
        if now + delay >= budget_end {
            return Next::Spent;
        }
        Next::After(delay)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::tool::RetrySpec;

    const MS: Duration = Duration::from_millis(1);

    /// A schedule of 3 attempts of 1 s each, delays from 100 ms to 400 ms, no jitter.
    fn schedule(side_effect: SideEffect, honours_key: bool) -> Schedule {
        let mut schedule = Schedule::new(
            &ToolDescriptor::new("t", "A tool.")
                .with_side_effect(side_effect)
                .with_honours_key(honours_key),
            Duration::from_secs(1),
        );
        schedule.policy = RetryPolicy {
            max_attempts: 3,
            base: 100 * MS,
            max: 400 * MS,
            jitter: false,
        };
        schedule
    }

    fn fault(kind: ErrorKind) -> ToolError {
        ToolError::new(kind, "it failed")
    }

    #[test]
    fn which_failed_attempt_is_sent_again_and_when() {
        use ErrorKind::*;
        use SideEffect::{Read, Write};
        let slow = |after: u32| fault(Unavailable).with_retry_after(after * MS);
        // (side effect, honours its key, the fault, attempts made, what follows)
        let cases = [
            (Read, false, fault(Unavailable), 1, Next::After(100 * MS)),
            (Read, false, fault(RateLimited), 2, Next::After(100 * MS)),
            (Read, false, fault(Timeout), 1, Next::After(100 * MS)),
            (Write, false, fault(Timeout), 1, Next::Final),
            (Write, true, fault(Unavailable), 1, Next::After(100 * MS)),
            (Write, false, fault(OutcomeUnknown), 1, Next::Final),
            (Write, true, fault(OutcomeUnknown), 1, Next::After(100 * MS)),
            (Read, false, fault(InvalidArguments), 1, Next::Final),
            (Read, false, fault(Internal), 1, Next::Final),
            (Write, false, fault(Conflict), 1, Next::Final),
            // The policy's attempts are spent.
            (Read, false, fault(Unavailable), 3, Next::Spent),
            (Read, false, fault(Timeout), 3, Next::Spent),
            // A fault may ask for a longer delay than the backoff's.
            (Read, false, slow(300), 1, Next::After(300 * MS)),
            (Read, false, slow(50), 1, Next::After(100 * MS)),
            // A delay that ends past the total deadline (2 attempts of 1 s left) is not waited.
            (Read, false, slow(1_999), 1, Next::After(1_999 * MS)),
            (Read, false, slow(2_000), 1, Next::Spent),
            (Read, false, slow(1_000), 2, Next::Spent),
        ];
        let now = Instant::now();
        for (side_effect, honours_key, err, made, expected) in cases {
            let next = schedule(side_effect, honours_key).next(&err, made, || 7, now);
            assert_eq!(
                next,
                expected,
                "{side_effect:?} (honours its key: {honours_key}), {:?} after {made}",
                err.kind()
            );
        }
    }

    #[test]
    fn the_delays_grow_and_the_deadline_counts_from_the_first_failure() {
        let mut retries = schedule(SideEffect::Read, false);
        let start = Instant::now();
        let err = fault(ErrorKind::Unavailable);
        let mut seeds = 0;
        let mut seed = || {
            seeds += 1;
            7
        };
        assert_eq!(
            retries.next(&err, 1, &mut seed, start),
            Next::After(100 * MS)
        );
        // The second retry's delay doubles; the deadline is still the first failure's + 2 s.
        assert_eq!(
            retries.next(&err, 2, &mut seed, start + 1_700 * MS),
            Next::After(200 * MS)
        );
        assert_eq!(seeds, 1, "the backoff is seeded once");
        let mut late = schedule(SideEffect::Read, false);
        late.next(&err, 1, || 7, start);
        assert_eq!(late.next(&err, 2, || 7, start + 1_800 * MS), Next::Spent);
    }

    #[test]
    fn a_tool_retry_spec_sets_the_policy() {
        static ONCE: ToolDescriptor = ToolDescriptor::new("t", "A tool.").with_retry(RetrySpec {
            max_attempts: Some(1),
            ..RetrySpec::new()
        });
        let mut schedule = Schedule::new(&ONCE, Duration::from_secs(1));
        let next = schedule.next(&fault(ErrorKind::Unavailable), 1, || 7, Instant::now());
        assert_eq!(next, Next::Spent);
    }
}
