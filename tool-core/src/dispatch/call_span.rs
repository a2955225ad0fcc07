//! The `execute_tool` span of a call, per the OpenTelemetry GenAI conventions: every call id the
//! dispatcher answers has one, whether the call ran through the pipeline (the span is made when
//! it starts, and the tool runs inside it) or was answered without running (refused with its
//! turn, not started in an aborted run, a copy of an earlier write of its turn, an id given to
//! several calls, over the run's call limit: the span is made when the answer is known). A call
//! that failed records `error.type` and an `ERROR` status with a sentence saying what failed.

use std::borrow::Cow;

use tracing::Span;
use tracing::field::Empty;

use crate::auth::Session;
use crate::fate::Fate;
use crate::run::RunAborted;

use super::Dispatcher;

impl Dispatcher {
    /// The span of call `id` of the tool named `name`, before the call's end: its status is
    /// recorded by [`record_end`].
    pub(super) fn call_span(&self, session: &Session, id: &str, name: &str) -> Span {
        // No subscriber wants an info span, and `log` (which tracing may forward spans to) is
        // off: the span no one sees, without formatting its fields for nobody.
        if !tracing::level_enabled!(tracing::Level::INFO)
            && log::max_level() < log::LevelFilter::Info
        {
            return Span::none();
        }
        let description = self.description(name);
        tracing::info_span!(
            "execute_tool",
            otel.name = %format_args!("execute_tool {name}"),
            otel.status_code = Empty,
            otel.status_description = Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %name,
            gen_ai.tool.description = description,
            gen_ai.tool.call.id = %id,
            gen_ai.tool.type = "function",
            gen_ai.conversation.id = %session.run_id(),
            toolgate.run.id = %session.run_id(),
            toolgate.status = Empty,
            toolgate.attempts = Empty,
            error.type = Empty,
        )
    }

    /// The span of a call answered without running through the pipeline, closed at once with
    /// its `fate`.
    pub(super) fn trace_unrun(&self, session: &Session, id: &str, name: &str, fate: &Fate) {
        let span = self.call_span(session, id, name);
        record_end(&span, session, fate, 0);
    }

    /// The description of the tool named `name`, as its doc comment says it, when the tool is
    /// registered and has one.
    fn description(&self, name: &str) -> Option<&'static str> {
        let doc = self.inner.registry.get(name)?.descriptor().doc.trim();
        (!doc.is_empty()).then_some(doc)
    }
}

/// Records on `span` how its call ended: the status, the attempts that ran, and what failed
/// ([`failure`]). Nothing is formatted when no one sees the span.
pub(super) fn record_end(span: &Span, session: &Session, fate: &Fate, attempts: u32) {
    if span.is_disabled() {
        return;
    }
    let status = match fate {
        Fate::Answered(result) => result.status.as_str(),
        Fate::Aborted => "run_aborted",
        other => other.status(),
    };
    span.record("toolgate.status", status);
    span.record("toolgate.attempts", attempts);
    if let Some((error_type, description)) = failure(fate, session.aborted()) {
        span.record("error.type", error_type);
        span.record("otel.status_code", "ERROR");
        span.record("otel.status_description", &*description);
    }
}

/// What failed in a call that ended in `fate`, in a run aborted for `aborted` (if it is): the
/// span's `error.type` (a low-cardinality class) and its status description (a sentence), or
/// `None` for a call that did not fail.
///
/// - An answer whose status is flagged (`error`, `failed`, `rejected`, `outcome_unknown`): the
///   error's kind (`invalid_arguments`, `unknown_tool`, `timeout`, …) and its `what`.
/// - The call that aborted the run, and a call that did not start because the run is aborted:
///   `run_aborted`, and why the run stopped.
/// - A read stopped before its end (the run aborted while it ran, or the runtime shut down):
///   `cancelled`, and why.
fn failure<'a>(
    fate: &'a Fate,
    aborted: Option<&RunAborted>,
) -> Option<(&'static str, Cow<'a, str>)> {
    let why = |said: &str| match aborted {
        Some(RunAborted { kind, reason }) => Cow::Owned(format!("{said} ({kind}): {reason}")),
        None => Cow::Owned(said.to_owned()),
    };
    match fate {
        Fate::Answered(result) if result.status.is_flagged() => Some(match &result.error {
            Some(error) => (error.kind.as_str(), Cow::Borrowed(error.what.as_str())),
            None => (
                result.status.as_str(),
                Cow::Owned(format!("the call answered {}", result.status.as_str())),
            ),
        }),
        Fate::Answered(_) => None,
        Fate::Aborted => Some(("run_aborted", why("the call aborted the run"))),
        Fate::NotStarted => Some((
            "run_aborted",
            why("the call did not start: the run is aborted"),
        )),
        Fate::Cancelled => Some((
            "cancelled",
            match aborted {
                Some(_) => why("the call was stopped when the run aborted"),
                None => Cow::Borrowed("the call was stopped before its end: the runtime shut down"),
            },
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::error::{ErrorKind, ToolError};
    use crate::json_text::JsonText;
    use crate::result::{CallResult, Status};

    use super::*;

    /// What failed: the span's `error.type` and status description.
    type Failed<'a> = Option<(&'a str, &'a str)>;

    #[test]
    fn what_failed_in_every_fate() {
        let aborted = RunAborted {
            kind: ErrorKind::PermissionDenied,
            reason: "the session may not call issue_refund".into(),
        };
        let answered = |err: ToolError| Fate::Answered(CallResult::from_error(&err));
        let succeeded = Fate::Answered(CallResult::succeeded(JsonText::parse("1").unwrap()));
        let mut partial = CallResult::from_error(&ToolError::new(
            ErrorKind::Internal,
            "the second step failed",
        ));
        partial.status = Status::Partial;
        let mut flagged_bare =
            CallResult::from_error(&ToolError::new(ErrorKind::Internal, "unused"));
        flagged_bare.error = None;
        // (fate, the run's abort, what failed)
        let cases: [(Fate, Option<&RunAborted>, Failed<'_>); 12] = [
            (succeeded, None, None),
            (
                answered(ToolError::new(ErrorKind::AwaitingApproval, "held")),
                None,
                None,
            ),
            (Fate::Answered(partial), None, None),
            (
                answered(ToolError::new(
                    ErrorKind::InvalidArguments,
                    "`amount` must be above 0",
                )),
                None,
                Some(("invalid_arguments", "`amount` must be above 0")),
            ),
            (
                answered(ToolError::new(ErrorKind::UnknownTool, "no tool `nope`")),
                Some(&aborted),
                Some(("unknown_tool", "no tool `nope`")),
            ),
            (
                answered(ToolError::new(ErrorKind::OutcomeUnknown, "no answer in 5s")),
                None,
                Some(("outcome_unknown", "no answer in 5s")),
            ),
            (
                Fate::Answered(flagged_bare),
                None,
                Some(("error", "the call answered error")),
            ),
            (
                Fate::Aborted,
                Some(&aborted),
                Some((
                    "run_aborted",
                    "the call aborted the run (permission_denied): the session may not call \
                     issue_refund",
                )),
            ),
            (
                Fate::Aborted,
                None,
                Some(("run_aborted", "the call aborted the run")),
            ),
            (
                Fate::NotStarted,
                Some(&aborted),
                Some((
                    "run_aborted",
                    "the call did not start: the run is aborted (permission_denied): the \
                     session may not call issue_refund",
                )),
            ),
            (
                Fate::Cancelled,
                Some(&aborted),
                Some((
                    "cancelled",
                    "the call was stopped when the run aborted (permission_denied): the session \
                     may not call issue_refund",
                )),
            ),
            (
                Fate::Cancelled,
                None,
                Some((
                    "cancelled",
                    "the call was stopped before its end: the runtime shut down",
                )),
            ),
        ];
        for (fate, aborted, expected) in &cases {
            let failed = failure(fate, *aborted);
            let failed = failed.as_ref().map(|(kind, what)| (*kind, what.as_ref()));
            assert_eq!(failed, *expected, "{fate:?}");
        }
    }
}
