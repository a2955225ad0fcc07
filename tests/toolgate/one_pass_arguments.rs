//! `Dispatcher::answer_turn` reads a call's arguments in one pass: the formats leave the text
//! unread, and a tool that can check text as it reads it (`__private::TextArgs::read_args`) is
//! handed the text first. Text it does not take is checked as `parse_calls_text` checks it, with the same answer.
//! (`hostile_turns` checks, on drawn turns in every format, that the two readings agree in every
//! report.)

use std::sync::{Arc, Mutex};

use crate::support::session;
use serde_json::{Value, json};
use toolgate::prelude::*;
use toolgate::provider::{Anthropic, OpenAiChat, WireFormat};
use toolgate::{
    __private::{ReadArgs, TextArgs},
    Tool,
    tool::{JsonText, ToolDescriptor, ToolFuture},
};

static PEEK: ToolDescriptor = ToolDescriptor::new("peek", "Answers with its query.");

/// A read that notes every text its `read_args` is handed.
#[derive(Clone, Default)]
struct Peek {
    seen: Arc<Mutex<Vec<String>>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PeekArgs {
    q: String,
}

impl Peek {
    fn seen(&self) -> Vec<String> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

impl Tool for Peek {
    fn descriptor(&self) -> &'static ToolDescriptor {
        &PEEK
    }

    fn args_schema(&self) -> Value {
        json!({"type": "object", "properties": {"q": {"type": "string"}},
               "required": ["q"], "additionalProperties": false})
    }

    fn invoke<'a>(&'a self, _ctx: &'a Ctx, args: &'a Value) -> ToolFuture<'a> {
        let q = args["q"].as_str().unwrap_or_default().to_owned();
        Box::pin(async move { Ok(JsonText::of(&q).unwrap()) })
    }

    fn text_args(&self) -> Option<&dyn TextArgs> {
        Some(self)
    }
}

/// The reading `#[tool]` generates, written by hand to see what it is handed.
impl TextArgs for Peek {
    /// The contract: one object (serde's derive reads an array too, so the text must open
    /// one), each key once (the derive refuses a duplicate field), no unknown key.
    fn read_args(&self, text: &str) -> Option<ReadArgs> {
        self.seen.lock().unwrap().push(text.to_owned());
        if !text.trim_start().starts_with('{') {
            return None;
        }
        let args: PeekArgs = serde_json::from_str(text).ok()?;
        Some(ReadArgs::new(args))
    }

    fn invoke_args<'a>(&'a self, _ctx: &'a Ctx, args: ReadArgs) -> ToolFuture<'a> {
        let args: PeekArgs = args.take().expect("the arguments read_args read");
        Box::pin(async move { Ok(JsonText::of(&args.q).unwrap()) })
    }
}

fn desk(limits: RunLimits) -> (Dispatcher, Peek) {
    let peek = Peek::default();
    let mut registry = Registry::new();
    registry.register_tool(peek.clone()).unwrap();
    let dispatcher = Dispatcher::builder(registry).run_limits(limits).build();
    (dispatcher, peek)
}

fn openai_turn(arguments: &[&str]) -> String {
    let calls: Vec<Value> = arguments
        .iter()
        .enumerate()
        .map(|(index, text)| {
            json!({"id": format!("c{index}"), "type": "function",
                   "function": {"name": "peek", "arguments": text}})
        })
        .collect();
    json!({"role": "assistant", "content": null, "tool_calls": calls}).to_string()
}

/// What each report says: the status, and the error's `what` when there is one.
fn outcomes(reports: &[CallReport]) -> Vec<(String, String)> {
    reports
        .iter()
        .map(|report| {
            let result = report.result.to_json();
            let what = result["error"]["what"].as_str().unwrap_or_default();
            (
                result["status"].as_str().unwrap().to_owned(),
                what.to_owned(),
            )
        })
        .collect()
}

async fn parse_then_dispatch(
    format: &dyn WireFormat,
    dispatcher: &Dispatcher,
    session: &Session,
    turn: &str,
) -> Vec<CallReport> {
    let calls = format.parse_calls_text(turn).unwrap();
    dispatcher.dispatch_turn(session, calls).await.unwrap()
}

#[tokio::test]
async fn answer_turn_hands_the_tool_text_nothing_has_checked_and_answers_as_parse_calls_text() {
    let format = OpenAiChat::default();
    let turn = openai_turn(&[r#"[1, 2]"#, r#"{"q": "a", "q": "b"}"#, r#"{"q": "ok"}"#]);
    let (dispatcher, peek) = desk(RunLimits::DEFAULT);
    let answered = dispatcher
        .answer_turn(&format, &session(), &turn)
        .await
        .unwrap();
    // Every text reached the tool's reader first, the two it refused included.
    assert_eq!(
        peek.seen(),
        [r#"[1, 2]"#, r#"{"q": "a", "q": "b"}"#, r#"{"q": "ok"}"#]
    );

    let (dispatcher, peek) = desk(RunLimits::DEFAULT);
    let dispatched = parse_then_dispatch(&format, &dispatcher, &session(), &turn).await;
    // `parse_calls_text` refused two texts before any tool saw them.
    assert_eq!(peek.seen(), [r#"{"q": "ok"}"#]);

    assert_eq!(answered.reports, dispatched);
    assert_eq!(
        outcomes(&dispatched),
        [
            ("error".into(), "the arguments are not a JSON object".into()),
            (
                "error".into(),
                r#"the arguments give the key "q" more than once"#.into()
            ),
            ("succeeded".into(), String::new()),
        ]
    );
}

#[tokio::test]
async fn an_object_sent_as_a_value_is_read_once_too() {
    // Anthropic sends the arguments as a JSON object inside the turn: its text goes to the
    // tool unread when it opens an object; anything else is checked as before.
    let format = Anthropic::default();
    let turn = json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "a", "name": "peek", "input": {"q": "ok"}},
        {"type": "tool_use", "id": "b", "name": "peek", "input": [1]},
    ]})
    .to_string();
    let (dispatcher, peek) = desk(RunLimits::DEFAULT);
    let answered = dispatcher
        .answer_turn(&format, &session(), &turn)
        .await
        .unwrap();
    assert_eq!(peek.seen(), [r#"{"q":"ok"}"#]);
    let (dispatcher, _) = desk(RunLimits::DEFAULT);
    let dispatched = parse_then_dispatch(&format, &dispatcher, &session(), &turn).await;
    assert_eq!(answered.reports, dispatched);
    assert_eq!(
        outcomes(&dispatched)[0],
        ("succeeded".into(), String::new())
    );
    assert_eq!(
        outcomes(&dispatched)[1],
        ("error".into(), "the arguments are not a JSON object".into())
    );
}

#[tokio::test]
async fn a_malformed_call_counts_against_no_budget_whichever_way_it_is_read() {
    // Two tool calls in the run: a malformed call is answered before it is counted, so the
    // second turn still runs and the third is over the limit, on both paths.
    let limits = RunLimits::DEFAULT.max_tool_calls(2);
    let turns = [
        openai_turn(&["{\"q\": ", r#"{"q": "one"}"#]),
        openai_turn(&[r#"{"q": "two"}"#]),
        openai_turn(&[r#"{"q": "three"}"#]),
    ];
    let format = OpenAiChat::default();
    let (answering, _) = desk(limits);
    let (dispatching, _) = desk(limits);
    let (answer_session, dispatch_session) = (session(), session());
    let mut answered = Vec::new();
    let mut dispatched = Vec::new();
    for turn in &turns {
        let answer = answering
            .answer_turn(&format, &answer_session, turn)
            .await
            .unwrap();
        answered.push(outcomes(&answer.reports));
        let reports = parse_then_dispatch(&format, &dispatching, &dispatch_session, turn).await;
        dispatched.push(outcomes(&reports));
    }
    assert_eq!(answered, dispatched);
    assert_eq!(dispatched[0][0].1, "the arguments are not valid JSON");
    assert_eq!(dispatched[1], [("succeeded".into(), String::new())]);
    assert_eq!(dispatched[2][0].0, "error", "{dispatched:?}");
}

#[tokio::test]
async fn a_tool_without_read_args_gets_checked_text_as_before() {
    /// Has no reading of text: `answer_turn` checks the text first.
    struct Plain;

    impl Tool for Plain {
        fn descriptor(&self) -> &'static ToolDescriptor {
            &PEEK
        }

        fn args_schema(&self) -> Value {
            json!({"type": "object"})
        }

        fn invoke<'a>(&'a self, _ctx: &'a Ctx, args: &'a Value) -> ToolFuture<'a> {
            let text = args.to_string();
            Box::pin(async move { Ok(JsonText::of(&text).unwrap()) })
        }
    }

    let mut registry = Registry::new();
    registry.register_tool(Plain).unwrap();
    let dispatcher = Dispatcher::builder(registry).build();
    let turn = openai_turn(&[r#"{"a": 1, "a": 2}"#, r#"{"a": 1}"#]);
    let answer = dispatcher
        .answer_turn(&OpenAiChat::default(), &session(), &turn)
        .await
        .unwrap();
    assert_eq!(
        outcomes(&answer.reports),
        [
            (
                "error".into(),
                r#"the arguments give the key "a" more than once"#.into()
            ),
            ("succeeded".into(), String::new()),
        ]
    );
}
