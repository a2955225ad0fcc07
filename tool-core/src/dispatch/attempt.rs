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
//! - [`Dispatcher::attempts`] polls the first attempt once inline; a tool that waits, and the
//!   retries with their backoff, continue in a boxed future ([`Dispatcher::after_first_poll`]).
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

impl Dispatcher {
    /// The attempts of a call: the tool runs under its deadline, retried on the faults the
    /// retry policy allows. `first` is the first attempt's call, if the arguments were already
    /// read into it; `claim` is the claim of a write. The error carries how many attempts were
    /// made.
    pub(super) async fn attempts<'a>(
        &self,
        registered: &'a RegisteredTool,
        ctx: &'a Ctx,
        args: Input<'a>,
        first: Option<ToolFuture<'a>>,
        claim: Option<&HeldClaim<'_>>,
        ledger: &Ledger<'_>,
    ) -> Result<JsonText, Failure> {
        super::audit::count_attempt(1);
        let mut call = first.unwrap_or_else(|| args.invoke(registered, ctx));
        let first = match poll_once(&mut call).await {
            Poll::Ready(Ok(data)) => return Ok(data),
            Poll::Ready(Err(err)) => Err(err),
            Poll::Pending => Ok(call),
        };
        Box::pin(self.after_first_poll(registered, ctx, args, claim, first, ledger)).await
    }

    /// The rest of the attempts, after the first poll of the first one: `first` is that call,
    /// still pending, or its error.
    async fn after_first_poll<'a>(
        &self,
        registered: &'a RegisteredTool,
        ctx: &'a Ctx,
        args: Input<'a>,
        claim: Option<&HeldClaim<'_>>,
        first: Result<ToolFuture<'a>, ToolError>,
        ledger: &Ledger<'_>,
    ) -> Result<JsonText, Failure> {
        let timeout = self.timeout_of(registered);
        let err = match first {
            Ok(pending) => match within_deadline(registered, pending, timeout).await {
                Ok(data) => return Ok(data),
                Err(err) => err,
            },
            Err(err) => err,
        };
        self.retries(registered, ctx, args, claim, err, ledger)
            .await
    }

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
                Box::pin(async move { Err(answers::refused_accepted_arguments(name)) })
            }),
        }
    }
}
