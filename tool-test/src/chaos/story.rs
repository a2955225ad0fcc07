//! [`Story`]: what happens to a tool, line by line: turns of a model, faults of its provider,
//! restarts, a second process, reconcile passes and approvals. Read from JSON Lines or built in
//! code, and written back as JSON Lines.

use serde_json::Value;
use toolgate_core::RunLimits;
use toolgate_core::store::Verdict;

use super::{Fault, Route, StoryLine, TurnFormat};

/// A script of what happens to a tool, played on a [`Stage`](super::Stage) by
/// [`play`](super::play): one [`StoryLine`] after the other.
///
/// As text, a story is JSON Lines: one object a line, with exactly one key; blank lines are
/// skipped. Line `n` of a story is its `n`-th line, as [`Story::to_jsonl`] writes it.
///
/// | line | what happens |
/// |---|---|
/// | `{"session": {"tenant": "acme", "user": "agent", "permissions": ["refund:create"]}}` | who calls in the turns that follow (before any: tenant `acme`, user `agent`, no permission) |
/// | `{"run": "r1"}` | the turns that follow are a new agent run with this id (before any: `run-1`), under the dispatcher's limits |
/// | `{"run": {"id": "r2", "max_steps": 8, "max_tool_calls": 20, "retry_budget": null}}` | the same, under these limits: a limit left out is `RunLimits::DEFAULT`'s, `null` is none |
/// | `{"openai": msg}`, `{"openai_responses": output}`, `{"anthropic": msg}`, `{"gemini": msg}` | one model turn: the assistant message (for OpenAI Responses, the `output` items) exactly as the provider sends it, answered by [`Dispatcher::answer_turn`](toolgate_core::Dispatcher::answer_turn) |
/// | `{"fault": {"route": "POST /refunds", "kind": "drop_after_apply", "times": 1}}` | the next `times` (default 1) requests of the route take the fault, on the stage's [`FaultPlan`](super::FaultPlan) with [`next`](super::FaultPlan::next); `kind` is `unavailable`, `rate_limited` (with `retry_after_ms`), `drop_after_apply`, `reset_after_apply` or `delay` (with `ms`); a route is a method and a path prefix, or `any` and a prefix |
/// | `{"restart": {}}` | the current process's dispatcher is dropped and the store opened again through the stage |
/// | `{"process": "b"}` | the lines that follow run in process `b`: a dispatcher of its own on the same store, opened through the stage, as a second process would; `{"process": "a"}` goes back to the first |
/// | `{"reconcile": {}}` | one pass of the reconciler |
/// | `{"approve": {"approver": "manager", "permissions": ["refund:approve"], "reason": "…"}}`, `{"reject": …}` | every approval pending in the session's tenant is decided by that operator |
/// | `{"run_approved": {}}` | one pass of the runner of approved operations (100 at most) |
/// | `{"deliver": {}}` | the stage's outbox worker ([`Stage::with_worker`](super::Stage::with_worker)) on the current process's store delivers every event due, pass after pass, until one leases nothing |
/// | `{"act": {"name": "refund_by_hand", "args": {"order_id": "ORD-1"}}}` | the application's act of that name ([`Stage::with_act`](super::Stage::with_act)) is given `args` (`{}` when left out): what the application does between turns that no other line does |
///
/// # Examples
///
/// ```
/// use serde_json::json;
/// use toolgate_test::chaos::{Fault, Route, Story};
///
/// let refund = json!({"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
///     "function": {"name": "refund", "arguments": "{\"order_id\":\"ORD-1\"}"}}]});
/// let story = Story::new()
///     .session("acme", "agent", ["refund:create"])
///     .fault(Route::post("/refunds"), Fault::DropAfterApply, 1)
///     .openai(refund.clone())
///     .openai(refund)
///     .reconcile();
/// let text = story.to_jsonl();
/// assert_eq!(text.lines().nth(1), Some(
///     r#"{"fault":{"route":"POST /refunds","kind":"drop_after_apply","times":1}}"#
/// ));
/// assert_eq!(Story::from_jsonl(&text), Ok(story));
///
/// let err = Story::from_jsonl("{\"run\": \"r1\"}\n\n{\"rerun\": {}}").unwrap_err();
/// assert_eq!(err.line(), 3);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Story {
    lines: Vec<StoryLine>,
}

/// A line of a story's text that is not a line of the format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct StoryError {
    line: usize,
    why: String,
}

impl StoryError {
    /// The line's number in the text, from 1, blank lines counted.
    pub fn line(&self) -> usize {
        self.line
    }

    /// What is wrong with it.
    pub fn why(&self) -> &str {
        &self.why
    }
}

impl Story {
    /// A story with no line.
    pub fn new() -> Story {
        Story::default()
    }

    /// The story written in `text`, JSON Lines; a bad line is an error naming its number. A
    /// byte-order mark at the start is skipped, and so is a `\r` at the end of a line.
    ///
    /// # Errors
    ///
    /// The first line that is not one JSON object with one of the keys of the format, or
    /// whose object is not what that key takes.
    pub fn from_jsonl(text: &str) -> Result<Story, StoryError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut lines = Vec::new();
        for (index, line) in text.split('\n').enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.trim().is_empty() {
                continue;
            }
            let line = StoryLine::parse(line).map_err(|why| StoryError {
                line: index + 1,
                why,
            })?;
            lines.push(line);
        }
        Ok(Story { lines })
    }

    /// The story as JSON Lines: each line as [`StoryLine::to_json`] writes it, each ended by
    /// `\n`. [`Story::from_jsonl`] reads it back as the same story.
    pub fn to_jsonl(&self) -> String {
        self.lines
            .iter()
            .map(|line| line.to_json() + "\n")
            .collect()
    }

    /// The lines, in order.
    pub fn lines(&self) -> &[StoryLine] {
        &self.lines
    }

    /// How many lines there are.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The story with `line` after its last.
    pub fn line(mut self, line: StoryLine) -> Story {
        self.lines.push(line);
        self
    }

    /// A `session` line.
    pub fn session<P: Into<String>>(
        self,
        tenant: impl Into<String>,
        user: impl Into<String>,
        permissions: impl IntoIterator<Item = P>,
    ) -> Story {
        self.line(StoryLine::Session {
            tenant: tenant.into(),
            user: user.into(),
            permissions: permissions.into_iter().map(Into::into).collect(),
        })
    }

    /// A `run` line.
    pub fn run(self, id: impl Into<String>) -> Story {
        self.line(StoryLine::Run {
            id: id.into(),
            limits: None,
        })
    }

    /// The turns that follow belong to a new run `id`, under `limits`.
    pub fn run_with_limits(self, id: impl Into<String>, limits: RunLimits) -> Story {
        self.line(StoryLine::Run {
            id: id.into(),
            limits: Some(limits),
        })
    }

    /// A model turn in `format`, `message` as the provider sends it.
    pub fn turn(self, format: TurnFormat, message: &Value) -> Story {
        self.line(StoryLine::Turn {
            format,
            message: message.to_string(),
        })
    }

    /// An `openai` turn: an OpenAI Chat Completions assistant message.
    pub fn openai(self, message: Value) -> Story {
        self.turn(TurnFormat::OpenAi, &message)
    }

    /// An `openai_responses` turn: the `output` items of an OpenAI Responses answer.
    pub fn openai_responses(self, output: Value) -> Story {
        self.turn(TurnFormat::OpenAiResponses, &output)
    }

    /// An `anthropic` turn: an Anthropic Messages assistant message.
    pub fn anthropic(self, message: Value) -> Story {
        self.turn(TurnFormat::Anthropic, &message)
    }

    /// A `gemini` turn: a Gemini model content.
    pub fn gemini(self, message: Value) -> Story {
        self.turn(TurnFormat::Gemini, &message)
    }

    /// A `fault` line: the next `times` requests of `route` take `fault`.
    pub fn fault(self, route: Route, fault: Fault, times: u64) -> Story {
        self.line(StoryLine::Fault {
            route,
            fault,
            times,
        })
    }

    /// A `restart` line.
    pub fn restart(self) -> Story {
        self.line(StoryLine::Restart)
    }

    /// A `process` line: what follows runs in process `name` (`a` is the first).
    pub fn process(self, name: impl Into<String>) -> Story {
        self.line(StoryLine::Process(name.into()))
    }

    /// A `reconcile` line.
    pub fn reconcile(self) -> Story {
        self.line(StoryLine::Reconcile)
    }

    /// An `approve` line.
    pub fn approve<P: Into<String>>(
        self,
        approver: impl Into<String>,
        permissions: impl IntoIterator<Item = P>,
        reason: impl Into<String>,
    ) -> Story {
        self.decide(Verdict::Approve, approver, permissions, reason)
    }

    /// A `reject` line.
    pub fn reject<P: Into<String>>(
        self,
        approver: impl Into<String>,
        permissions: impl IntoIterator<Item = P>,
        reason: impl Into<String>,
    ) -> Story {
        self.decide(Verdict::Reject, approver, permissions, reason)
    }

    fn decide<P: Into<String>>(
        self,
        verdict: Verdict,
        approver: impl Into<String>,
        permissions: impl IntoIterator<Item = P>,
        reason: impl Into<String>,
    ) -> Story {
        self.line(StoryLine::Decide {
            verdict,
            approver: approver.into(),
            permissions: permissions.into_iter().map(Into::into).collect(),
            reason: reason.into(),
        })
    }

    /// A `run_approved` line.
    pub fn run_approved(self) -> Story {
        self.line(StoryLine::RunApproved)
    }

    /// A `deliver` line.
    pub fn deliver(self) -> Story {
        self.line(StoryLine::Deliver)
    }

    /// An `act` line: the application's act `name`, given `args`.
    pub fn act(self, name: impl Into<String>, args: Value) -> Story {
        self.line(StoryLine::Act {
            name: name.into(),
            args,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_story_reads_line_by_line_and_names_a_bad_line() {
        let text = "\u{feff}{\"run\": \"r1\"}\r\n\n  \n{\"reconcile\": {}}\n{\"run\": 1}\n";
        let err = Story::from_jsonl(text).unwrap_err();
        assert_eq!(err.line(), 5, "{err}");
        assert!(err.to_string().starts_with("line 5: "), "{err}");
        let story = Story::from_jsonl("{\"run\": \"r1\"}\r\n\n  \n{\"reconcile\": {}}").unwrap();
        assert_eq!(story, Story::new().run("r1").reconcile());
        assert_eq!(story.to_jsonl(), "{\"run\":\"r1\"}\n{\"reconcile\":{}}\n");
    }

    #[test]
    fn an_act_line_names_the_act_and_what_it_is_given() {
        let text = "{\"act\": {\"name\": \"refund_by_hand\", \"args\": {\"order_id\": \"ORD-1\"}}}\n\
                    {\"act\": {\"name\": \"switch\"}}";
        let story = Story::from_jsonl(text).unwrap();
        let expected = Story::new()
            .act("refund_by_hand", serde_json::json!({"order_id": "ORD-1"}))
            .act("switch", serde_json::json!({}));
        assert_eq!(story, expected);
        assert_eq!(Story::from_jsonl(&story.to_jsonl()), Ok(expected));
        for (bad, why) in [
            ("{\"act\": {\"name\": \"\"}}", "non-empty"),
            ("{\"act\": {\"args\": {}}}", "name"),
            (
                "{\"act\": {\"name\": \"a\", \"with\": 1}}",
                "unknown field `with`",
            ),
        ] {
            let err = Story::from_jsonl(bad).unwrap_err();
            assert!(err.why().contains(why), "{bad}: {err}");
        }
    }
}
