//! One call for what every application does with a model turn: read its calls in the
//! provider's format, run them, and render the results as the message that answers it.

use crate::call::CallReport;
use crate::fate::TurnAborted;
use crate::provider::{FormatError, WireFormat};
use crate::{Dispatcher, Session, tool::JsonText};

/// Why a turn got no answer: it could not be read, or the run stopped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TurnError {
    /// The turn is not a message of the format at all; no call of it ran. (A turn whose calls
    /// are malformed one by one is answered: each such call gets an `invalid_arguments` result.)
    #[error(transparent)]
    Unreadable(#[from] FormatError),
    /// The run is aborted (a missing permission, revoked credentials, a policy violation, a
    /// run budget spent): end the run; the model is not told the detail. What became of each
    /// call of the turn is in [`TurnAborted::calls`].
    #[error(transparent)]
    Aborted(#[from] TurnAborted),
}

/// The answer to one model turn: the message to send back, and the reports it was rendered
/// from, for the application to read.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnAnswer {
    /// The message (or messages, as the format has it) that answers the turn, one result per
    /// call, as the JSON text to send back to the provider
    /// ([`WireFormat::render_results_text`]; [`JsonText::to_value`] for a tree); `None` for a
    /// turn without calls, which has nothing to send back.
    pub message: Option<JsonText>,
    /// One report per call id, in the order the model emitted the calls; match on
    /// [`CallResult::outcome`](crate::CallResult::outcome) to learn what happened.
    pub reports: Vec<CallReport>,
}

impl Dispatcher {
    /// Answers one model turn given as the JSON text the provider sent: reads its calls in
    /// `format` ([`WireFormat::parse_calls_text`]), runs them as
    /// [`Dispatcher::dispatch_turn`] does, and renders the results in the same format, as text
    /// ([`WireFormat::render_results_text`]: the text of
    /// [`WireFormat::render_results`], written directly where the format can).
    ///
    /// Each call's arguments are read in one pass. The formats of this crate leave their text
    /// unread, and a read the session may make hands it to its tool's own reading of text
    /// (which `#[tool]` generates for parameters whose types decide exactly as the schema
    /// does), whose reading is the check; text the tool does not take, and the arguments of every other call, are checked as
    /// [`WireFormat::parse_calls_text`] checks them. The answers are the same either way.
    ///
    /// `Err(TurnError::Unreadable)` when the turn is not a message of the format (nothing ran);
    /// `Err(TurnError::Aborted)` when the run is aborted, with what became of each call (the
    /// session stays aborted).
    ///
    /// ```
    /// use toolgate::prelude::*;
    /// use toolgate::provider::Anthropic;
    /// use toolgate::{dispatch::{Outcome, TurnError}};
    ///
    /// /// Look up an order by its id.
    /// #[tool]
    /// async fn get_order(order_id: String) -> Result<String, ToolError> {
    ///     Ok(format!("{order_id}: paid"))
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let mut registry = Registry::new();
    /// registry.register::<get_order>().unwrap();
    /// let dispatcher = Dispatcher::builder(registry).build();
    /// let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    ///
    /// let turn = r#"{"role": "assistant", "content": [
    ///     {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {"order_id": "ORD-1"}}
    /// ]}"#;
    /// let anthropic = Anthropic::default();
    /// let answer = dispatcher.answer_turn(&anthropic, &session, turn).await.unwrap();
    /// let message = answer.message.expect("a turn with a call is answered").to_value();
    /// assert_eq!(message["role"], "user");
    /// assert_eq!(message["content"][0]["tool_use_id"], "toolu_1");
    /// let Outcome::Succeeded(data) = answer.reports[0].result.outcome() else {
    ///     panic!("get_order succeeds");
    /// };
    /// assert_eq!(data.as_str(), r#""ORD-1: paid""#);
    ///
    /// let unreadable = dispatcher.answer_turn(&anthropic, &session, "not json").await;
    /// assert!(matches!(unreadable, Err(TurnError::Unreadable(_))));
    /// # });
    /// ```
    pub async fn answer_turn(
        &self,
        format: &dyn WireFormat,
        session: &Session,
        turn: &str,
    ) -> Result<TurnAnswer, TurnError> {
        // Each call's arguments are left for the tool to check as it reads them: one pass over
        // their text, and the same answers as `parse_calls_text` and `dispatch_turn` give.
        let unread = crate::provider::Turn::Unread(turn, crate::provider::sealed::Unread(()));
        let calls = format.read_calls(unread)?;
        let reports = self.dispatch_turn(session, calls).await?;
        Ok(TurnAnswer {
            message: format.render_results_text(&reports).map(JsonText::written),
            reports,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::{Value, json};

    use super::*;
    use crate::provider::{Anthropic, OpenAiChat};
    use crate::{
        AuthContext, Ctx, ErrorKind, Registry, Status, Tool,
        dispatch::Outcome,
        tool::{JsonText, ToolDescriptor, ToolFuture},
    };

    const ANTHROPIC: Anthropic = Anthropic { strict: false };

    /// Answers with its arguments; counts its runs.
    struct Echo(Arc<AtomicUsize>);

    static ECHO: ToolDescriptor = ToolDescriptor::new("echo", "Answers with its arguments.");

    impl Tool for Echo {
        fn descriptor(&self) -> &'static ToolDescriptor {
            &ECHO
        }

        fn args_schema(&self) -> Value {
            json!({"type": "object", "properties": {"text": {"type": "string"}},
                   "required": ["text"], "additionalProperties": false})
        }

        fn invoke<'a>(&'a self, _ctx: &'a Ctx, args: &'a Value) -> ToolFuture<'a> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move { Ok(JsonText::of(args).expect("a value serializes")) })
        }
    }

    /// Needs a permission no session of these tests holds.
    struct Admin;

    static ADMIN: ToolDescriptor =
        ToolDescriptor::new("admin", "Only for admins.").with_permission("admin");

    impl Tool for Admin {
        fn descriptor(&self) -> &'static ToolDescriptor {
            &ADMIN
        }

        fn args_schema(&self) -> Value {
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        }

        fn invoke<'a>(&'a self, _ctx: &'a Ctx, _args: &'a Value) -> ToolFuture<'a> {
            Box::pin(async { Ok(JsonText::of(&Value::Null).expect("null serializes")) })
        }
    }

    fn dispatcher() -> Dispatcher {
        counted(Arc::default())
    }

    fn counted(runs: Arc<AtomicUsize>) -> Dispatcher {
        let mut registry = Registry::new();
        registry
            .register_tool(Echo(runs))
            .unwrap()
            .register_tool(Admin)
            .unwrap();
        Dispatcher::builder(registry).build()
    }

    fn session() -> Session {
        Session::new(AuthContext::new("acme", "agent"), "run-1")
    }

    /// Both calls answered, in order, each in the format's shape, with typed reports.
    fn assert_two_answers(answer: &TurnAnswer) {
        let [echoed, unknown] = answer.reports.as_slice() else {
            panic!("two reports: {answer:?}");
        };
        assert_eq!(
            echoed.result.outcome(),
            Outcome::Succeeded(&JsonText::parse(r#"{"text":"hi"}"#).unwrap())
        );
        assert_eq!(unknown.result.status, Status::Error);
        assert_eq!(unknown.result.error_kind(), Some(ErrorKind::UnknownTool));
    }

    #[tokio::test]
    async fn an_openai_chat_turn_is_answered_with_one_tool_message_per_call() {
        let turn = r#"{"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "echo", "arguments": "{\"text\": \"hi\"}"}},
            {"id": "call_2", "type": "function",
             "function": {"name": "nope", "arguments": "{}"}}
        ]}"#;
        let format = OpenAiChat { strict: false };
        let answer = dispatcher()
            .answer_turn(&format, &session(), turn)
            .await
            .unwrap();
        assert_two_answers(&answer);
        let message = answer.message.as_ref().map(JsonText::to_value);
        assert_eq!(message, format.render_results(&answer.reports));
        let messages = message.as_ref().and_then(Value::as_array);
        let messages = messages.expect("one message per call");
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0]["role"], "tool");
        assert_eq!(messages[0]["tool_call_id"], "call_1");
        assert_eq!(
            messages[0]["content"],
            r#"{"status":"succeeded","replayed":false,"data":{"text":"hi"}}"#
        );
        assert_eq!(messages[1]["tool_call_id"], "call_2");
    }

    #[tokio::test]
    async fn an_anthropic_turn_is_answered_with_one_user_message() {
        let turn = r#"{"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "hi"}},
            {"type": "tool_use", "id": "toolu_2", "name": "nope", "input": {}}
        ]}"#;
        let answer = dispatcher()
            .answer_turn(&ANTHROPIC, &session(), turn)
            .await
            .unwrap();
        assert_two_answers(&answer);
        let message = answer.message.as_ref().expect("a message").to_value();
        assert_eq!(message["role"], "user");
        let blocks = message["content"].as_array().expect("result blocks");
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0]["tool_use_id"], "toolu_1");
        assert_eq!(blocks[1]["tool_use_id"], "toolu_2");
        assert_eq!(blocks[1]["is_error"], true);
    }

    #[tokio::test]
    async fn a_turn_without_calls_is_answered_with_no_message() {
        let runs = Arc::new(AtomicUsize::new(0));
        let dispatcher = counted(runs.clone());
        let turn = r#"{"role": "assistant", "content": [{"type": "text", "text": "Done."}]}"#;
        let answer = dispatcher
            .answer_turn(&ANTHROPIC, &session(), turn)
            .await
            .unwrap();
        assert_eq!(answer.message, None);
        assert!(answer.reports.is_empty());
        assert_eq!(runs.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_turn_that_cannot_be_read_runs_nothing_and_says_so() {
        let runs = Arc::new(AtomicUsize::new(0));
        let dispatcher = counted(runs.clone());
        // JSON, but not an Anthropic message: its calls are not where the format has them.
        let turn = r#"{"tool_calls": [{"id": "c", "type": "function",
            "function": {"name": "echo", "arguments": "{\"text\": \"hi\"}"}}], "content": 5}"#;
        for turn in ["{\"role\": \"assistant\", \"content\": [", turn] {
            let err = dispatcher
                .answer_turn(&ANTHROPIC, &session(), turn)
                .await
                .expect_err("not an Anthropic turn");
            let TurnError::Unreadable(format_error) = err else {
                panic!("unreadable, got {err:?}");
            };
            assert_eq!(format_error.format, "anthropic");
        }
        assert_eq!(runs.load(Ordering::SeqCst), 0, "no call ran");
        // The same dispatcher runs the call of a turn it can read.
        let turn = r#"{"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "hi"}}
        ]}"#;
        dispatcher
            .answer_turn(&ANTHROPIC, &session(), turn)
            .await
            .unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_call_that_aborts_the_run_is_an_abort_not_an_answer() {
        let session = session();
        let turn = r#"{"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "admin", "input": {}}
        ]}"#;
        let err = dispatcher()
            .answer_turn(&ANTHROPIC, &session, turn)
            .await
            .expect_err("the run aborts");
        let TurnError::Aborted(aborted) = err else {
            panic!("aborted, got {err:?}");
        };
        assert_eq!(aborted.reason.kind, ErrorKind::PermissionDenied);
        assert_eq!(aborted.calls.len(), 1);
        assert_eq!(aborted.calls[0].fate, crate::run::Fate::Aborted);
        assert!(session.aborted().is_some());
    }
}
