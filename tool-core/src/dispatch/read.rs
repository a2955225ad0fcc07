//! The read path: no store, no key; the attempts run as soon as the arguments are valid and the
//! tenant is within the tool's rate limit (the session's permission was checked when the turn
//! was planned).

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

use crate::call::{Arguments, parse_checked};
use crate::ctx::Ctx;
use crate::error::ToolError;
use crate::registry::RegisteredTool;
use crate::result::CallResult;
use crate::text_args::ReadArgs;

use super::attempt::Input;
use super::failure::Failure;
use super::ledger::Ledger;
use super::{Dispatcher, answers, unwind};

impl Dispatcher {
    /// A read: its arguments validated, its rate limit checked, its attempts run. Arguments
    /// that arrived as text are validated as the tool's types read them, when those decide
    /// exactly as the schema would ([`TextArgs`](crate::text_args::TextArgs)), with no tree;
    /// any others as a tree, against the schema.
    pub(super) async fn read(
        &self,
        registered: &RegisteredTool,
        ctx: &Ctx,
        arguments: &Arguments,
        read: Option<ReadArgs>,
        ledger: &Ledger<'_>,
    ) -> Result<CallResult, ToolError> {
        let name = registered.descriptor().name;
        let read_from_text = match (arguments.as_text(), read) {
            // Read already, as the call was planned.
            (Some(text), Some(read)) => Ok((Input::Text(text), registered.invoke_args(ctx, read))),
            (Some(text), None) => {
                match unwind::reading(name, || registered.invoke_text(ctx, text))? {
                    Some(call) => Ok((Input::Text(text), call)),
                    None => Err(parse_checked(text)),
                }
            }
            (None, _) => Err(arguments.to_value()),
        };
        let tree;
        let (input, first) = match read_from_text {
            Ok((input, call)) => (input, Some(call)),
            Err(value) => {
                tree = self.validated(registered, value)?;
                (Input::Tree(&tree), None)
            }
        };
        self.inner
            .rate_limits
            .check(registered.descriptor(), ctx.auth().tenant())?;
        if registered.descriptor().check.is_some() {
            let args = match input {
                Input::Tree(args) => args.clone(),
                Input::Text(_) => arguments.to_value(),
            };
            // On the heap: only a tool with a check runs one.
            Box::pin(self.check(registered, ctx, &args)).await?;
        }
        let attempts = AssertUnwindSafe(self.attempts(registered, ctx, input, ledger).run(first));
        match attempts.catch_unwind().await {
            Ok(outcome) => outcome
                .map(CallResult::succeeded)
                .map_err(Failure::into_answer),
            Err(payload) => {
                unwind::trace(name, &*payload);
                Err(answers::read_panicked(name))
            }
        }
    }
}
