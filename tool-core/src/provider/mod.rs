//! Provider wire formats: the tool catalog in each format, the calls of a model turn parsed from
//! it, and results rendered back with each format's error flag.
//!
//! Every format starts from the one canonical schema of each tool ([`crate::schema`]); the
//! dialects that cannot take it as it is get it lowered: [`openai_strict`] for OpenAI strict
//! mode, [`anthropic_strict`] for Anthropic strict tool use, [`gemini`] for Gemini's OpenAPI
//! subset.
//!
//! | name | format |
//! |---|---|
//! | `openai` | [`OpenAiChat`] |
//! | `openai-strict` | [`OpenAiChat`] with `strict` |
//! | `openai-responses` | [`OpenAiResponses`] (strict where the schema allows, as the API defaults to) |
//! | `anthropic` | [`Anthropic`] |
//! | `anthropic-strict` | [`Anthropic`] with `strict` |
//! | `gemini` | [`Gemini`] |
//! | `mcp` | [`Mcp`] |
//!
//! Every parser reads a `null` where a field is optional as the field left out, as clients that
//! write every field of their types (Python's `model_dump()`, say) dump a message; a `null`
//! where a field is required is that field missing. A turn without calls is answered with no
//! message at all ([`WireFormat::render_results`] is `None`).
//!
//! ```
//! use serde_json::json;
//! use toolgate::provider::{FORMAT_NAMES, format_by_name};
//!
//! for name in FORMAT_NAMES {
//!     assert_eq!(format_by_name(name).unwrap().name(), name);
//! }
//! let anthropic = format_by_name("anthropic").unwrap();
//! let turn = json!({"role": "assistant", "content": [
//!     {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}}
//! ]});
//! assert_eq!(anthropic.parse_calls(&turn)?[0].name, "get_weather");
//! # Ok::<(), toolgate::provider::FormatError>(())
//! ```

mod anthropic;
mod gemini;
pub(crate) mod lower;
mod mcp;
mod openai_chat;
mod openai_responses;
mod parse;
mod raw_turn;

pub(crate) mod sealed {
    /// The proof that a [`Turn::Unread`](super::Turn) was made by this crate: public, so that it
    /// may appear in the variant, in a module no other crate can reach.
    #[derive(Debug, Clone, Copy)]
    pub struct Unread(pub(crate) ());
}
#[cfg(test)]
mod test_support;

use std::borrow::Cow;

use serde_json::Value;

use crate::call::{CallReport, ToolCall};
use crate::registry::Registry;
use raw_turn::{ArgumentFields, turn_with_raw};

pub use anthropic::Anthropic;
pub use gemini::Gemini;
pub use lower::{
    LoweringError, LoweringErrorKind, LoweringFallback, LoweringTarget, anthropic_strict, gemini,
    openai_strict,
};
pub use mcp::{CallToolAnswer, JsonRpcError, Mcp};
pub use openai_chat::OpenAiChat;
pub use openai_responses::OpenAiResponses;

/// The names [`format_by_name`] knows, as `--format` spells them.
pub const FORMAT_NAMES: [&str; 7] = [
    "openai",
    "openai-strict",
    "openai-responses",
    "anthropic",
    "anthropic-strict",
    "gemini",
    "mcp",
];

/// The format called `name` (one of [`FORMAT_NAMES`]), or `None`.
pub fn format_by_name(name: &str) -> Option<Box<dyn WireFormat>> {
    Some(match name {
        "openai" => Box::new(OpenAiChat { strict: false }),
        "openai-strict" => Box::new(OpenAiChat { strict: true }),
        "openai-responses" => Box::new(OpenAiResponses { strict: true }),
        "anthropic" => Box::new(Anthropic { strict: false }),
        "anthropic-strict" => Box::new(Anthropic { strict: true }),
        "gemini" => Box::new(Gemini),
        "mcp" => Box::new(Mcp),
        _ => return None,
    })
}

/// A model turn that is not a message of this format at all (as opposed to one malformed call
/// inside a well-formed turn, which becomes a [`crate::dispatch::MalformedCall`] and still gets a result).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a turn in the {format} format: {reason}")]
pub struct FormatError {
    /// The format expected.
    pub format: &'static str,
    /// What is wrong.
    pub reason: String,
}

/// A model turn as [`WireFormat::read_calls`] gets it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Turn<'a> {
    /// A tree the caller parsed ([`WireFormat::parse_calls`]).
    Tree(&'a Value),
    /// The JSON text the provider sent ([`WireFormat::parse_calls_text`]).
    Text(&'a str),
    /// The text, each call's arguments left for the tool to check as it reads them
    /// ([`Dispatcher::answer_turn`](crate::Dispatcher::answer_turn)). Only this crate makes one;
    /// a format outside it reads it as [`Turn::Text`].
    #[doc(hidden)]
    Unread(&'a str, sealed::Unread),
}

impl<'a> Turn<'a> {
    /// The turn as a tree: the tree itself, or the text parsed (a [`FormatError`] naming
    /// `format` when it is not JSON). This is how a format outside this crate reads any turn.
    pub fn tree(self, format: &'static str) -> Result<Cow<'a, Value>, FormatError> {
        match self {
            Turn::Tree(tree) => Ok(Cow::Borrowed(tree)),
            Turn::Text(text) | Turn::Unread(text, _) => turn_json(format, text).map(Cow::Owned),
        }
    }

    /// The reading of this crate's formats: `read` on the tree, or on the text read as a tree
    /// in which the members named `arguments` keep their JSON text, for each call to read its
    /// arguments on its own.
    fn read_with(
        self,
        format: &'static str,
        arguments: &'static str,
        read: impl FnOnce(&Value, ArgumentFields) -> Result<Vec<ToolCall>, FormatError>,
    ) -> Result<Vec<ToolCall>, FormatError> {
        match self {
            Turn::Tree(tree) => read(tree, ArgumentFields::Values),
            Turn::Text(text) => read(
                &turn_with_raw(format, text, arguments)?,
                ArgumentFields::Text,
            ),
            Turn::Unread(text, _) => read(
                &turn_with_raw(format, text, arguments)?,
                ArgumentFields::Unread,
            ),
        }
    }
}

/// One provider's wire format. `Send + Sync`, so that one format serves every task of an
/// application (an `Arc<dyn WireFormat>`, or a `&'static` one).
pub trait WireFormat: Send + Sync {
    /// The format's name, as `--format` spells it (`openai`, `anthropic`, …).
    fn name(&self) -> &'static str;

    /// One tool declaration per registered tool, in registration order.
    fn catalog(&self, registry: &Registry) -> Vec<Value>;

    /// The one reading every format implements: the calls of one model turn, in the order the
    /// model emitted them, from a tree or from the provider's text ([`Turn`]). Every call the
    /// turn contains yields a [`ToolCall`], malformed ones included; a call that came without
    /// a usable id gets one that no other call of the turn has. [`WireFormat::parse_calls`]
    /// and [`WireFormat::parse_calls_text`] are this, written once.
    fn read_calls(&self, turn: Turn<'_>) -> Result<Vec<ToolCall>, FormatError>;

    /// The calls of one model turn, in the order the model emitted them. Every call the turn
    /// contains yields a [`ToolCall`], malformed ones included. A call that came without a
    /// usable id gets one that no other call of the turn has.
    ///
    /// A tree cannot show a key that the model gave twice in one object (`{"amount": 5,
    /// "amount": 5000}`): the parser that built it kept one of the values. With the provider's
    /// bytes, use [`WireFormat::parse_calls_text`], which refuses such arguments.
    fn parse_calls(&self, turn: &Value) -> Result<Vec<ToolCall>, FormatError> {
        self.read_calls(Turn::Tree(turn))
    }

    /// The calls of one model turn given as JSON text, as it arrives from the provider: the
    /// same calls as [`WireFormat::parse_calls`] on the parsed text, except that each call's
    /// arguments are read on their own. Arguments that a [`Value`] cannot hold (nesting deeper
    /// than serde_json's limit, a number beyond `f64` such as `1e999`, a lone surrogate escape)
    /// or that give a key twice in one object, at any depth, make that call malformed
    /// ([`crate::dispatch::MalformedCall`]: it gets an `invalid_arguments` result and does not run) and
    /// leave its siblings alone. Only a turn whose own JSON, outside the arguments, cannot be
    /// read is a [`FormatError`]. This is the reading to use with what the provider sent.
    ///
    /// A format outside this crate that reads a text turn as a tree ([`Turn::tree`]) has
    /// neither property.
    ///
    /// ```
    /// use toolgate::provider::format_by_name;
    ///
    /// let anthropic = format_by_name("anthropic").unwrap();
    /// let turn = r#"{"role": "assistant", "content": [
    ///     {"type": "tool_use", "id": "a", "name": "issue_refund", "input": {"amount": 5, "amount": 5000}},
    ///     {"type": "tool_use", "id": "b", "name": "get_order", "input": {"order_id": [[[[1e999]]]]}},
    ///     {"type": "tool_use", "id": "c", "name": "get_order", "input": {"order_id": "ORD-1"}}
    /// ]}"#;
    /// let calls = anthropic.parse_calls_text(turn)?;
    /// let what = |i: usize| calls[i].arguments.as_ref().map_err(|bad| bad.what.as_str()).err();
    /// assert_eq!(what(0), Some(r#"the arguments give the key "amount" more than once"#));
    /// assert_eq!(what(1), Some("the arguments hold a value that cannot be read"));
    /// assert_eq!(what(2), None);
    /// # Ok::<(), toolgate::provider::FormatError>(())
    /// ```
    fn parse_calls_text(&self, turn: &str) -> Result<Vec<ToolCall>, FormatError> {
        self.read_calls(Turn::Text(turn))
    }

    /// The message (or messages) that answer a turn: one result per report, in order; `None`
    /// when there are no reports (a turn without calls), since there is nothing to send back.
    /// A message without results is no answer at all, and providers refuse one (Anthropic a
    /// user message with empty `content`, Gemini a content with no `parts`, JSON-RPC an empty
    /// batch), so no format renders one.
    ///
    /// ```
    /// use toolgate::provider::format_by_name;
    ///
    /// let anthropic = format_by_name("anthropic").unwrap();
    /// assert_eq!(anthropic.render_results(&[]), None);
    /// ```
    fn render_results(&self, reports: &[CallReport]) -> Option<Value>;

    /// [`WireFormat::render_results`] as the JSON text that goes back to the provider; `None`
    /// when there are no reports.
    fn render_results_text(&self, reports: &[CallReport]) -> Option<String> {
        self.render_results(reports)
            .map(|message| message.to_string())
    }
}

/// A turn's JSON text parsed, or the error saying it is not JSON.
pub(crate) fn turn_json(format: &'static str, turn: &str) -> Result<Value, FormatError> {
    serde_json::from_str(turn).map_err(|err| FormatError {
        format,
        reason: format!("the turn is not valid JSON: {err}"),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_name_finds_its_format() {
        for name in FORMAT_NAMES {
            let format = format_by_name(name).unwrap();
            assert_eq!(format.name(), name);
        }
        assert!(format_by_name("openai_strict").is_none());
        assert!(format_by_name("anthropic_strict").is_none());
        assert!(format_by_name("").is_none());
    }

    /// A `null` where a field is optional reads as the field left out, in every format: each
    /// pair is a turn as a client that writes every field dumps it, and the same turn without
    /// the nulls.
    #[test]
    fn a_null_optional_field_reads_as_an_absent_one() {
        let chat_call = json!({"id": "c", "function": {"name": "t", "arguments": "{}"}});
        let pairs = [
            (
                "openai",
                json!({"role": "assistant", "content": null, "refusal": null, "function_call": null,
                    "tool_calls": [{"id": "c", "type": null, "function": {"name": "t", "arguments": "{}"}}]}),
                json!({"role": "assistant", "tool_calls": [chat_call.clone()]}),
            ),
            (
                "openai",
                json!({"choices": null, "tool_calls": [chat_call.clone()]}),
                json!({"tool_calls": [chat_call]}),
            ),
            (
                "openai-responses",
                json!({"type": "function_call", "id": null, "call_id": "c", "name": "t",
                    "arguments": "{}", "status": null, "output": null}),
                json!({"type": "function_call", "call_id": "c", "name": "t", "arguments": "{}"}),
            ),
            (
                "anthropic",
                json!({"role": "assistant", "content": [{"type": "text", "text": "Hi", "citations": null},
                    {"type": "tool_use", "id": "c", "name": "t", "input": {}, "caller": null}],
                    "stop_sequence": null}),
                json!({"role": "assistant", "content": [{"type": "text", "text": "Hi"},
                    {"type": "tool_use", "id": "c", "name": "t", "input": {}}]}),
            ),
            (
                "gemini",
                json!({"role": "model", "parts": [{"text": "Hi", "functionCall": null},
                    {"functionCall": {"id": null, "name": "t", "args": null}, "thoughtSignature": null}]}),
                json!({"role": "model", "parts": [{"text": "Hi"}, {"functionCall": {"name": "t"}}]}),
            ),
            (
                "gemini",
                json!({"candidates": null, "promptFeedback": null}),
                json!({}),
            ),
            (
                "mcp",
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "t", "arguments": null, "_meta": null}}),
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}),
            ),
        ];
        for (name, with_nulls, without) in pairs {
            let format = format_by_name(name).unwrap();
            let expected = format.parse_calls(&without).unwrap();
            assert_eq!(expected.len(), usize::from(without != json!({})), "{name}");
            assert_eq!(
                format.parse_calls(&with_nulls).as_ref(),
                Ok(&expected),
                "{name}: {with_nulls}"
            );
            assert_eq!(
                format.parse_calls_text(&with_nulls.to_string()).as_ref(),
                Ok(&expected),
                "{name}: {with_nulls}"
            );
        }
    }

    #[test]
    fn a_turn_with_nothing_to_answer_renders_nothing() {
        for name in FORMAT_NAMES {
            let format = format_by_name(name).unwrap();
            assert_eq!(format.render_results(&[]), None, "{name}");
            assert_eq!(format.render_results_text(&[]), None, "{name}");
            let one = [test_support::success("1")];
            let rendered = format.render_results(&one).expect("a report is answered");
            assert_eq!(format.render_results_text(&one), Some(rendered.to_string()));
        }
    }

    #[test]
    fn every_format_answers_every_garbage_turn_without_panicking() {
        let registry = test_support::registry();
        for name in FORMAT_NAMES {
            let format = format_by_name(name).unwrap();
            assert_eq!(format.catalog(&registry).len(), registry.len());
            for turn in test_support::garbage_turns() {
                if let Ok(calls) = format.parse_calls(&turn) {
                    assert!(
                        calls.iter().all(|call| !call.id.is_empty()),
                        "{name}: {turn}"
                    );
                }
            }
            let rendered = format
                .render_results(&[test_support::success("1")])
                .expect("a report is answered");
            assert!(rendered.is_object() || rendered.is_array(), "{name}");
        }
    }
}
