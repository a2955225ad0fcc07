//! One attempt of a tool under its deadline, and how the future of a call is kept small.
//!
//! The deadline counts from the tool's first wait: a tool that answers on its first poll never
//! waits, so it cannot overrun, and no timer is armed (nor the clock read) for it. A poll that
//! blocks cannot be interrupted by any timer anyway.
//!
//! # Future sizes
//!
//! Every call's future is as large as the largest state any call could reach, and most calls are
//! reads that answer on their first poll. So what only some calls need is on the heap, and every
//! such trick is in this file:
//!
//! - [`Attempts::run`] polls the first attempt once inline; a tool that waits, and the retries
//!   with their backoff, continue in a boxed future ([`Attempts::after_first_poll`]).
//! - [`Dispatcher::write_on_heap`] boxes the write path (store round trips, replays, retries),
//!   which would otherwise set the size of every call's future, reads included.
//! - [`in_span`] builds the call's future in one of two shapes, bare or instrumented, so the
//!   caller holds one of them, not both.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use futures_util::future::Either;
use serde_json::Value;
use tracing::Instrument;
use tracing::instrument::Instrumented;

use crate::auth::Session;
use crate::clock::Clock;
use crate::ctx::Ctx;
use crate::error::ToolError;
use crate::json_text::JsonText;
use crate::registry::RegisteredTool;
use crate::result::CallResult;
use crate::tool::ToolFuture;

use super::failure::Failure;
use super::held_claim::HeldClaim;
use super::ledger::Ledger;
use super::plan::PreparedWrite;
use super::{Dispatcher, answers};

/// The attempts of one call, and what they use: the tool, its context and arguments, the
/// deadline of each attempt, the claim a write's retries are recorded under, the ledger they are
/// charged to, and the clock and seed of their backoff. A few references: the call's future
/// holds it while the tool runs.
pub(super) struct Attempts<'a> {
    pub(super) registered: &'a RegisteredTool,
    pub(super) ctx: &'a Ctx,
    pub(super) args: Input<'a>,
    /// The deadline of one attempt.
    pub(super) timeout: Duration,
    /// The claim of a write: each retry is recorded under it before it is sent.
    pub(super) claim: Option<&'a HeldClaim<'a>>,
    /// Where each retry is charged against the run's retry budget.
    pub(super) ledger: &'a Ledger<'a>,
    /// The clock a retry's renewed lease counts from.
    pub(super) clock: &'a dyn Clock,
    /// The dispatcher's seed of the backoff's jitter, mixed with the call id's.
    pub(super) seed: u64,
}

impl Dispatcher {
    /// The attempts of a call of `registered` with `args`, charged to `ledger`; a write's are
    /// then put under its claim ([`Attempts::under`]).
    pub(super) fn attempts<'a>(
        &'a self,
        registered: &'a RegisteredTool,
        ctx: &'a Ctx,
        args: Input<'a>,
        ledger: &'a Ledger<'a>,
    ) -> Attempts<'a> {
        Attempts {
            registered,
            ctx,
            args,
            timeout: self.timeout_of(registered),
            claim: None,
            ledger,
            clock: &*self.inner.clock,
            seed: self.inner.seed,
        }
    }
}

impl<'a> Attempts<'a> {
    /// These attempts, run under a write's `claim`.
    pub(super) fn under(self, claim: &'a HeldClaim<'a>) -> Self {
        Attempts {
            claim: Some(claim),
            ..self
        }
    }

    /// Runs them: the tool under its deadline, retried on the faults the retry policy allows.
    /// `first` is the first attempt's call, if the arguments were already read into it. The
    /// error carries how many attempts were made. Not an `async fn`: its future holds these
    /// attempts once, where an `async fn` holds them as given and again where its body takes
    /// them.
    #[expect(
        clippy::manual_async_fn,
        reason = "an async fn would hold its arguments twice"
    )]
    pub(super) fn run(
        self,
        first: Option<ToolFuture<'a>>,
    ) -> impl Future<Output = Result<JsonText, Failure>> + 'a {
        async move {
            super::audit::count_attempt(1);
            let mut call = first.unwrap_or_else(|| self.args.invoke(self.registered, self.ctx));
            let first = match poll_once(&mut call).await {
                Poll::Ready(Ok(data)) => return Ok(data),
                Poll::Ready(Err(err)) => Err(err),
                Poll::Pending => Ok(call),
            };
            Box::pin(self.after_first_poll(first)).await
        }
    }

    /// The rest of the attempts, after the first poll of the first one: `first` is that call,
    /// still pending, or its error.
    async fn after_first_poll(
        self,
        first: Result<ToolFuture<'a>, ToolError>,
    ) -> Result<JsonText, Failure> {
        let err = match first {
            Ok(pending) => match within_deadline(self.registered, pending, self.timeout).await {
                Ok(data) => return Ok(data),
                Err(err) => err,
            },
            Err(err) => err,
        };
        self.retries(err).await
    }
}

impl Dispatcher {
    /// The write path of a call, on the heap.
    pub(super) fn write_on_heap<'a>(
        &'a self,
        session: &'a Session,
        call_id: &'a str,
        registered: &'a RegisteredTool,
        write: PreparedWrite,
        ledger: &'a Ledger<'a>,
    ) -> Pin<Box<impl Future<Output = Result<CallResult, ToolError>> + 'a>> {
        Box::pin(self.write(session, call_id, registered, write, ledger))
    }
}

/// `call`, inside `span` unless no one can see it: no subscriber wants the span, and `log`
/// (which tracing may forward spans to) is off, so entering it on each poll is work for nothing.
pub(super) fn in_span<F: Future>(span: &tracing::Span, call: F) -> Either<F, Instrumented<F>> {
    if span.is_disabled() && log::max_level() < log::LevelFilter::Info {
        Either::Left(call)
    } else {
        Either::Right(call.instrument(span.clone()))
    }
}

/// One attempt of `call` under the deadline.
pub(super) async fn attempt(
    registered: &RegisteredTool,
    mut call: ToolFuture<'_>,
    timeout: Duration,
) -> Result<JsonText, ToolError> {
    match poll_once(&mut call).await {
        Poll::Ready(outcome) => outcome,
        Poll::Pending => within_deadline(registered, call, timeout).await,
    }
}

/// A call that waited on its first poll, given `timeout` from now to answer.
async fn within_deadline(
    registered: &RegisteredTool,
    call: ToolFuture<'_>,
    timeout: Duration,
) -> Result<JsonText, ToolError> {
    let descriptor = registered.descriptor();
    match tokio::time::timeout(timeout, call).await {
        Ok(outcome) => outcome,
        Err(_elapsed) => Err(answers::deadline_passed(
            descriptor.name,
            descriptor.side_effect.is_read(),
            timeout,
        )),
    }
}

/// Polls `call` once, whatever it answers.
async fn poll_once(call: &mut ToolFuture<'_>) -> Poll<Result<JsonText, ToolError>> {
    std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await
}

/// The arguments an attempt reads: the validated tree, or the text that the tool's types
/// validated (see [`TextArgs`](crate::__private::TextArgs)).
#[derive(Clone, Copy)]
pub(super) enum Input<'a> {
    Tree(&'a Value),
    Text(&'a str),
}

impl<'a> Input<'a> {
    /// The call of one attempt.
    pub(super) fn invoke(self, registered: &'a RegisteredTool, ctx: &'a Ctx) -> ToolFuture<'a> {
        match self {
            Input::Tree(args) => registered.tool().invoke(ctx, args),
            // Deserializing the same text gives the same answer as before the first attempt.
            Input::Text(text) => registered.invoke_text(ctx, text).unwrap_or_else(|| {
                let name = registered.descriptor().name;
                Box::pin(async move { Err(answers::refused_accepted_arguments(name)) })
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use serde_json::json;

    use super::*;
    use crate::error::ErrorKind;
    use crate::store::MemoryStore;

    use super::super::held_claim::claim_for_test;
    use crate::tool::{RetrySpec, Tool, ToolDescriptor};
    use crate::{AuthContext, Registry, SideEffect};

    /// A tool that fails with `fault` on its first `failures` runs, then answers `"done"`.
    struct Flaky {
        descriptor: &'static ToolDescriptor,
        fault: ErrorKind,
        failures: u32,
        runs: Arc<AtomicU32>,
    }

    impl Tool for Flaky {
        fn descriptor(&self) -> &'static ToolDescriptor {
            self.descriptor
        }

        fn args_schema(&self) -> Value {
            json!({"type": "object"})
        }

        fn invoke<'a>(&'a self, _ctx: &'a Ctx, _args: &'a Value) -> ToolFuture<'a> {
            let run = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
            let outcome = if run <= self.failures {
                Err(ToolError::new(self.fault, "the service failed"))
            } else {
                Ok(JsonText::of(&json!("done")).expect("a value serializes"))
            };
            Box::pin(async move { outcome })
        }
    }

    const NO_JITTER: RetrySpec = RetrySpec {
        jitter: Some(false),
        ..RetrySpec::new()
    };
    static LOOKUP: ToolDescriptor =
        ToolDescriptor::new("lookup", "Looks up.").with_retry(NO_JITTER);
    static REFUND: ToolDescriptor = ToolDescriptor::new("refund", "Refunds.")
        .with_side_effect(SideEffect::Write)
        .with_retry(NO_JITTER);

    /// A dispatcher with a store, whose one tool fails `failures` times with `fault`; and
    /// the tool's runs.
    fn dispatcher(
        descriptor: &'static ToolDescriptor,
        fault: ErrorKind,
        failures: u32,
    ) -> (Dispatcher, Arc<AtomicU32>) {
        let runs = Arc::new(AtomicU32::new(0));
        let mut registry = Registry::new();
        let tool = Flaky {
            descriptor,
            fault,
            failures,
            runs: runs.clone(),
        };
        registry.register_tool(tool).unwrap();
        let dispatcher = Dispatcher::builder(registry)
            .store(MemoryStore::new())
            .build();
        (dispatcher, runs)
    }

    /// The attempts of one call of `dispatcher`'s tool `name` with no arguments.
    async fn run(dispatcher: &Dispatcher, name: &str) -> Result<JsonText, Failure> {
        let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
        let ledger = dispatcher.ledger(&session);
        let registered = dispatcher.registered(name);
        let ctx = dispatcher.ctx(&session, "c1", registered);
        let args = json!({});
        let attempts = dispatcher.attempts(registered, &ctx, Input::Tree(&args), &ledger);
        attempts.run(None).await
    }

    #[tokio::test(start_paused = true)]
    async fn a_tool_that_answers_is_attempted_once() {
        let (dispatcher, runs) = dispatcher(&LOOKUP, ErrorKind::Unavailable, 0);
        let data = run(&dispatcher, "lookup").await.unwrap();
        assert_eq!(data.as_str(), r#""done""#);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_fault_is_sent_again_within_the_policy() {
        let (dispatcher, runs) = dispatcher(&LOOKUP, ErrorKind::Unavailable, 2);
        let started = tokio::time::Instant::now();
        let data = run(&dispatcher, "lookup").await.unwrap();
        assert_eq!(data.as_str(), r#""done""#);
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        // A read's backoff: 100 ms, then 200 ms.
        assert_eq!(started.elapsed(), Duration::from_millis(300));
    }

    #[tokio::test(start_paused = true)]
    async fn the_attempts_end_when_the_policy_has_none_left() {
        let (dispatcher, runs) = dispatcher(&LOOKUP, ErrorKind::Unavailable, 5);
        let failure = run(&dispatcher, "lookup").await.unwrap_err();
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        assert_eq!(failure.recorded().attempt, 3);
        assert_eq!(failure.recorded().kind, "unavailable");
    }

    #[tokio::test(start_paused = true)]
    async fn a_fault_that_may_not_be_sent_again_is_answered_as_it_is() {
        let (dispatcher, runs) = dispatcher(&REFUND, ErrorKind::Timeout, 1);
        let failure = run(&dispatcher, "refund").await.unwrap_err();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(failure.answer().kind(), ErrorKind::Timeout);
        assert_eq!(failure.recorded().attempt, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_retry_is_recorded_under_its_claim_before_it_is_sent() {
        let (dispatcher, runs) = dispatcher(&REFUND, ErrorKind::Unavailable, 1);
        let store = dispatcher.store().expect("a store");
        let owner = claim_for_test(store, dispatcher.now_ms()).await;
        let claim = HeldClaim {
            store,
            owner: &owner,
            lease: Duration::from_secs(30),
            attempt: AtomicU32::new(1),
        };
        let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
        let ledger = dispatcher.ledger(&session);
        let registered = dispatcher.registered("refund");
        let ctx = dispatcher.ctx(&session, "c1", registered);
        let args = json!({});
        let attempts = dispatcher.attempts(registered, &ctx, Input::Tree(&args), &ledger);
        attempts.under(&claim).run(None).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert_eq!(claim.attempt.load(Ordering::Relaxed), 2);
        let record = store.get("acme", "k1").await.unwrap().expect("the record");
        assert_eq!(record.errors.len(), 1, "{:?}", record.errors);
        assert_eq!(
            (record.errors[0].attempt, &*record.errors[0].kind),
            (1, "unavailable")
        );
    }
}
