//! Step 8 of a call: the attempts of a tool under its deadline, and the retries of transient
//! faults below the model (reads on any; writes only on faults that prove nothing was applied,
//! or under a key the provider honours), each retry of a write recorded before it is sent.
//!
//! The futures here are kept small on purpose: a tool that answers on its first poll arms no
//! timer and builds no retry state; what a waiting or failing tool needs lives on the heap.

use std::sync::atomic::{AtomicU32, Ordering};
use std::task::Poll;
use std::time::Duration;

use serde_json::Value;

use crate::backoff::Backoff;
use crate::ctx::Ctx;
use crate::error::{ErrorKind, ToolError};
use crate::json_text::JsonText;
use crate::registry::RegisteredTool;
use crate::retry::RetryPolicy;
use crate::store::{AttemptError, OperationStore, Owner};
use crate::tool::ToolFuture;

use super::Dispatcher;
use super::failure::Failure;
use super::outage::not_retried;

impl Dispatcher {
    /// Step 8: the tool runs under its deadline, retried on transient faults: reads on any,
    /// writes only on those that prove nothing was applied. `first` is the first attempt's
    /// call, if the arguments were already read into it. The error carries how many attempts
    /// were made.
    pub(super) async fn attempts<'a>(
        &self,
        registered: &'a RegisteredTool,
        ctx: &'a Ctx,
        args: Input<'a>,
        first: Option<ToolFuture<'a>>,
        write: Option<&Claimed<'_>>,
    ) -> Result<JsonText, Failure> {
        let mut call = first.unwrap_or_else(|| args.invoke(registered, ctx));
        let first = match poll_once(&mut call).await {
            Poll::Ready(Ok(data)) => return Ok(data),
            Poll::Ready(Err(err)) => Err(err),
            Poll::Pending => Ok(call),
        };
        // A tool that waits, and retries, which wait a backoff: their state lives on the heap,
        // so that the future of a call answered at once stays small.
        Box::pin(self.after_first_poll(registered, ctx, args, write, first)).await
    }

    /// The rest of the attempts, after the first poll of the first one: `first` is that call,
    /// still pending, or its error.
    async fn after_first_poll<'a>(
        &self,
        registered: &'a RegisteredTool,
        ctx: &'a Ctx,
        args: Input<'a>,
        write: Option<&Claimed<'_>>,
        first: Result<ToolFuture<'a>, ToolError>,
    ) -> Result<JsonText, Failure> {
        let timeout = registered
            .descriptor()
            .timeout
            .unwrap_or(self.inner.default_timeout);
        let err = match first {
            Ok(pending) => match self.within_deadline(registered, pending, timeout).await {
                Ok(data) => return Ok(data),
                Err(err) => err,
            },
            Err(err) => err,
        };
        self.retries(registered, ctx, args, write, timeout, err)
            .await
    }

    /// One attempt under the deadline.
    ///
    /// The deadline counts from the tool's first wait: a tool that answers on its first poll
    /// never waits, so it cannot overrun, and no timer is armed (nor the clock read) for it. A
    /// poll that blocks cannot be interrupted by any timer anyway.
    async fn attempt(
        &self,
        registered: &RegisteredTool,
        mut call: ToolFuture<'_>,
        timeout: Duration,
    ) -> Result<JsonText, ToolError> {
        match poll_once(&mut call).await {
            Poll::Ready(outcome) => outcome,
            Poll::Pending => self.within_deadline(registered, call, timeout).await,
        }
    }

    /// A call that waited on its first poll, given `timeout` from now to answer.
    async fn within_deadline(
        &self,
        registered: &RegisteredTool,
        call: ToolFuture<'_>,
        timeout: Duration,
    ) -> Result<JsonText, ToolError> {
        let descriptor = registered.descriptor();
        match tokio::time::timeout(timeout, call).await {
            Ok(outcome) => outcome,
            Err(_elapsed) => Err(deadline_passed(
                descriptor.name,
                descriptor.side_effect.is_read(),
                timeout,
            )),
        }
    }

    /// The attempts after the first failed with `err`, while the fault is transient and the
    /// policy and the total deadline allow.
    async fn retries(
        &self,
        registered: &RegisteredTool,
        ctx: &Ctx,
        args: Input<'_>,
        write: Option<&Claimed<'_>>,
        timeout: Duration,
        mut err: ToolError,
    ) -> Result<JsonText, Failure> {
        let descriptor = registered.descriptor();
        let policy = RetryPolicy::of(descriptor);
        // The total deadline: every remaining attempt's, counted from the first failure.
        let mut budget_end: Option<tokio::time::Instant> = None;
        let mut delays: Option<Backoff> = None;
        let mut attempt = 1;
        loop {
            let transient = match err.kind() {
                ErrorKind::Unavailable | ErrorKind::RateLimited => true,
                ErrorKind::Timeout => descriptor.side_effect.is_read(),
                // Sent, maybe applied: safe to send again only under a key the provider honours.
                ErrorKind::OutcomeUnknown => descriptor.honours_key,
                _ => false,
            };
            if !transient {
                return Err(Failure::new(err, attempt));
            }
            if attempt >= policy.max_attempts {
                return Err(exhausted(descriptor.name, err, attempt));
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
            if let Some(after) = err.get_retry_after() {
                delay = delay.max(after);
            }
            let now = tokio::time::Instant::now();
            let budget_end = *budget_end
                .get_or_insert_with(|| now + timeout.saturating_mul(policy.max_attempts - attempt));
            if now + delay >= budget_end {
                return Err(exhausted(descriptor.name, err, attempt));
            }
            if let Some(claimed) = write {
                let record = AttemptError {
                    attempt,
                    kind: err.kind().as_str().to_owned(),
                    what: err.what().to_owned(),
                };
                let lease_until =
                    self.inner.clock.now_ms().saturating_add(
                        i64::try_from(claimed.lease.as_millis()).unwrap_or(i64::MAX),
                    );
                let recorded = claimed
                    .store
                    .record_retry(claimed.owner, &record, lease_until)
                    .await;
                if let Err(store_err) = recorded {
                    // No retry without its record: stop here, saying what the last attempt did.
                    let answer = not_retried(descriptor.name, err.clone(), &store_err);
                    return Err(Failure::new(err, attempt).answered(answer));
                }
            }
            tokio::time::sleep(delay).await;
            attempt += 1;
            if let Some(claimed) = write {
                claimed.attempt.store(attempt, Ordering::Relaxed);
            }
            err = match self
                .attempt(registered, args.invoke(registered, ctx), timeout)
                .await
            {
                Ok(data) => return Ok(data),
                Err(err) => err,
            };
        }
    }
}

/// Polls `call` once, whatever it answers.
async fn poll_once(call: &mut ToolFuture<'_>) -> Poll<Result<JsonText, ToolError>> {
    std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await
}

/// The arguments an attempt reads: the validated tree, or the text that the tool's types
/// validated (see [`Tool::invoke_text`](crate::Tool::invoke_text)).
#[derive(Clone, Copy)]
pub(super) enum Input<'a> {
    Tree(&'a Value),
    Text(&'a str),
}

impl<'a> Input<'a> {
    /// The call of one attempt.
    pub(super) fn invoke(self, registered: &'a RegisteredTool, ctx: &'a Ctx) -> ToolFuture<'a> {
        let tool = registered.tool();
        match self {
            Input::Tree(args) => tool.invoke(ctx, args),
            // Deserializing the same text gives the same answer as before the first attempt.
            Input::Text(text) => tool.invoke_text(ctx, text).unwrap_or_else(|| {
                let name = registered.descriptor().name;
                Box::pin(async move {
                    Err(ToolError::internal(format!(
                        "{name} refused arguments it had accepted on an earlier attempt"
                    )))
                })
            }),
        }
    }
}

/// The claim a write runs under, for its attempts to record their errors under.
pub(super) struct Claimed<'a> {
    pub(super) store: &'a dyn OperationStore,
    pub(super) owner: &'a Owner,
    /// How long the claim holds; each retry renews it.
    pub(super) lease: Duration,
    /// The attempt running now (1 for the first), for a panic to be recorded under.
    pub(super) attempt: AtomicU32,
}

/// A seed for one call's jitter.
pub(super) fn seed_of(call_id: &str) -> u64 {
    call_id.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// How the attempts end after the last one, numbered `attempts`, failed with a transient
/// fault: the record keeps `err`; the model reads a summary of the spent retries.
fn exhausted(tool: &str, err: ToolError, attempts: u32) -> Failure {
    if attempts <= 1 || err.kind() != ErrorKind::Unavailable {
        return Failure::new(err, attempts);
    }
    let why = match err.get_why() {
        Some(why) => format!("{}: {why}", err.what()),
        None => err.what().to_owned(),
    };
    let summary = ToolError::new(
        ErrorKind::RetryBudgetExhausted,
        format!("{tool} failed {attempts} times in a row; nothing was applied"),
    )
    .why(why)
    .next("try again later, or tell the user the service is unavailable");
    Failure::new(err, attempts).answered(summary)
}

/// The error for a call that ran past its deadline: a read timed out; a write may have been
/// applied, so its outcome is unknown, never a failure.
fn deadline_passed(tool: &str, is_read: bool, deadline: Duration) -> ToolError {
    if is_read {
        ToolError::timeout(format!("{tool} did not answer within {deadline:?}")).next(format!(
            "call {tool} again, or tell the user the system is slow"
        ))
    } else {
        ToolError::outcome_unknown(format!("{tool} did not finish within {deadline:?}"))
            .why("the request may have been applied before the deadline passed")
            .next("do not repeat the call or assume it failed; tell the user the outcome is being checked")
    }
}
