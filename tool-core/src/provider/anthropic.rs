//! Anthropic Messages: tools with an `input_schema` (lowered for strict tool use with
//! `anthropic-strict`), calls as `tool_use` content blocks whose `input` is an object, and every
//! result in one user message of `tool_result` blocks with `is_error` on the flagged ones; a
//! turn without calls gets no message. A `null` where a field is optional is an absent one.

use serde_json::{Map, Value, json};

use super::parse::{CallParts, calls_among, describe, missing_id, present, str_field};
use super::raw_turn::ArgumentFields;
use super::{FormatError, Turn, WireFormat};
use crate::call::{CallReport, ToolCall, json_kind};
use crate::registry::{RegisteredTool, Registry};

/// Anthropic Messages (`--format anthropic`, or `anthropic-strict` with
/// [`Anthropic::strict`]).
///
/// **Declarations** carry the canonical schema as it is (`input_schema` takes JSON Schema).
/// With `strict`, each tool is declared with `"strict": true` and its schema lowered by
/// [`anthropic_strict`](super::anthropic_strict) to the subset strict tool use takes. A tool
/// whose schema cannot be lowered (a map, a recursive type, …), or that would pass one of the
/// limits Anthropic sets on the strict tools of one request (20 tools, 24 optional properties,
/// 16 properties of a union type, counted over the tools registered before it), is declared
/// with `"strict": false` and its canonical schema instead; the registry names it and says why
/// when it is registered ([`Registry::strict_fallbacks`]). Each schema is lowered once, at
/// registration, and every catalog reuses it.
///
/// **Calls.** A `null` where a field is optional reads as the field left out, as a client
/// that writes every field of its types dumps them.
///
/// **Results.** All the results of a turn go in one user message, as Anthropic requires for
/// parallel calls; a result whose status is flagged
/// ([`Status::is_flagged`](crate::Status::is_flagged)) sets `"is_error": true`, and the key is
/// left out otherwise. A turn without calls gets no message (the Messages API refuses a user
/// message with empty `content`).
///
/// ```
/// use serde_json::json;
/// use toolgate::provider::{Anthropic, WireFormat};
///
/// let turn = json!({"role": "assistant", "content": [
///     {"type": "text", "text": "Let me check."},
///     {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}}
/// ]});
/// let calls = Anthropic::default().parse_calls(&turn)?;
/// assert_eq!(calls[0].id, "toolu_01A");
/// assert_eq!(calls[0].arguments.as_ref().unwrap(), &json!({"city": "Paris"}));
/// assert_eq!(Anthropic { strict: true }.name(), "anthropic-strict");
/// # Ok::<(), toolgate::provider::FormatError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Anthropic {
    /// Declare tools with strict tool use where their schema allows it.
    pub strict: bool,
}

impl WireFormat for Anthropic {
    fn name(&self) -> &'static str {
        if self.strict {
            "anthropic-strict"
        } else {
            "anthropic"
        }
    }

    /// `{"name", "description", "input_schema"}`, plus `"strict"` with
    /// [`Anthropic::strict`].
    fn catalog(&self, registry: &Registry) -> Vec<Value> {
        registry
            .iter()
            .map(|tool| {
                let descriptor = tool.descriptor();
                let mut declaration = Map::new();
                declaration.insert("name".into(), descriptor.name.into());
                declaration.insert("description".into(), descriptor.model_description().into());
                if self.strict {
                    let (input_schema, strict) = strict_input_schema(tool);
                    declaration.insert("strict".into(), strict.into());
                    declaration.insert("input_schema".into(), input_schema);
                } else {
                    declaration.insert("input_schema".into(), tool.schema().clone());
                }
                Value::Object(declaration)
            })
            .collect()
    }

    /// Reads an assistant message (or a whole Messages response, which has the same
    /// `content`). Each `tool_use` block is a call; other blocks (text, thinking) are skipped. A
    /// block without an id gets `missing_id_N` (N its position among the calls, or the next number whose id the turn
    /// does not have) and is
    /// malformed, as is one whose `input` is not an object.
    ///
    /// From text, each call's arguments are read on their own.
    fn read_calls(&self, turn: Turn<'_>) -> Result<Vec<ToolCall>, FormatError> {
        turn.read_with(self.name(), ARGUMENTS, |tree, fields| {
            self.read(tree, fields)
        })
    }

    /// `{"role": "user", "content": [{"type": "tool_result", "tool_use_id", "content",
    /// "is_error"?}, …]}`, the content being the result object as JSON text; `None` for no
    /// reports (the Messages API refuses a user message with empty `content`).
    fn render_results(&self, reports: &[CallReport]) -> Option<Value> {
        if reports.is_empty() {
            return None;
        }
        let blocks = reports
            .iter()
            .map(|report| {
                let mut block = Map::new();
                block.insert("type".into(), "tool_result".into());
                block.insert("tool_use_id".into(), report.call_id.clone().into());
                block.insert("content".into(), report.result.to_json_string().into());
                if report.result.status.is_flagged() {
                    block.insert("is_error".into(), true.into());
                }
                Value::Object(block)
            })
            .collect::<Vec<_>>();
        Some(json!({"role": "user", "content": blocks}))
    }
}

/// The field of a `tool_use` block that holds the arguments.
const ARGUMENTS: &str = "input";

impl Anthropic {
    fn read(&self, turn: &Value, fields: ArgumentFields) -> Result<Vec<ToolCall>, FormatError> {
        let error = |reason: String| FormatError {
            format: self.name(),
            reason,
        };
        let Value::Object(message) = turn else {
            return Err(error(format!(
                "the turn is {}, not an assistant message",
                json_kind(turn)
            )));
        };
        let blocks = match present(message, "content") {
            None | Some(Value::String(_)) => return Ok(Vec::new()),
            Some(Value::Array(blocks)) => blocks,
            other => {
                return Err(error(format!(
                    "`content` is {}, not an array of blocks",
                    describe(other)
                )));
            }
        };
        calls_among(self.name(), "content block", blocks, missing_id, |block| {
            (str_field(block, "type") == Some("tool_use")).then(|| {
                CallParts::read_id("id", block.get("id"))
                    .name("name", block.get("name"))
                    .object_arguments(ARGUMENTS, fields.field(block.get(ARGUMENTS)), None)
            })
        })
    }
}

/// The input schema of `tool` with strict tool use, and whether it can be declared strict: the
/// schema lowered when the tool was registered, or the canonical one when it does not lower or
/// does not fit the request's limits.
fn strict_input_schema(tool: &RegisteredTool) -> (Value, bool) {
    match tool.lowerings().anthropic_strict() {
        Ok(lowered) => (lowered.clone(), true),
        Err(_) => (tool.schema().clone(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::LoweringTarget;
    use crate::provider::test_support::{
        failure, garbage_turns, registry, success, weather_schema,
    };
    use crate::{CallResult, ToolError};

    const ANTHROPIC: Anthropic = Anthropic { strict: false };

    #[test]
    fn declarations_carry_the_canonical_schema() {
        let catalog = ANTHROPIC.catalog(&registry());
        assert_eq!(
            catalog[0],
            json!({"name":"get_weather",
                "description":"Current weather for a city. Read-only: this tool changes nothing and is safe to call again.",
                "input_schema": weather_schema()})
        );
        assert_eq!(catalog.len(), 5);
    }

    #[test]
    fn strict_declarations_are_lowered_or_say_they_are_not_strict() {
        let registry = registry();
        let catalog = Anthropic { strict: true }.catalog(&registry);
        assert_eq!(catalog.len(), 5);
        // Optional properties stay optional; the `null` an `Option` allows stays allowed.
        assert_eq!(
            catalog[0],
            json!({"name":"get_weather",
                "description":"Current weather for a city. Read-only: this tool changes nothing and is safe to call again.",
                "strict": true,
                "input_schema": weather_schema()})
        );
        // No numeric bounds, no integer formats.
        assert_eq!(
            catalog[1]["input_schema"]["properties"],
            json!({"order_id": {"type": "string"}, "amount": {"type": "integer"}})
        );
        assert_eq!(catalog[1]["strict"], true);
        // A map cannot be strict: declared non-strict with its canonical schema.
        assert_eq!(catalog[3]["name"], "tag_order");
        assert_eq!(catalog[3]["strict"], false);
        assert_eq!(
            catalog[3]["input_schema"],
            *registry.get("tag_order").unwrap().schema()
        );
        // No arguments: an empty closed object.
        assert_eq!(
            catalog[4]["input_schema"],
            json!({"type":"object","properties":{},"required":[],"additionalProperties":false})
        );
        let fallbacks: Vec<_> = registry
            .strict_fallbacks()
            .map(|fallback| (fallback.tool, fallback.error.target))
            .collect();
        assert_eq!(
            fallbacks,
            [
                ("tag_order", LoweringTarget::OpenAiStrict),
                ("tag_order", LoweringTarget::AnthropicStrict)
            ]
        );
        // Without strict, the canonical schema and no `strict` key.
        let plain = ANTHROPIC.catalog(&registry);
        assert!(plain.iter().all(|item| item.get("strict").is_none()));
        assert_eq!(
            plain[1]["input_schema"],
            *registry.get("issue_refund").unwrap().schema()
        );
    }

    #[test]
    fn parses_the_example_call() {
        let turn = json!({"role":"assistant","content":[{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Paris"}}]});
        assert_eq!(
            ANTHROPIC.parse_calls(&turn).unwrap(),
            vec![ToolCall::new(
                "toolu_01A",
                "get_weather",
                json!({"city": "Paris"})
            )]
        );
        let text_only = json!({"role": "assistant", "content": "Hi"});
        assert_eq!(ANTHROPIC.parse_calls(&text_only).unwrap(), vec![]);
        let response = json!({"id": "msg_1", "type": "message", "role": "assistant",
        "stop_reason": "tool_use", "content": [
            {"type": "thinking", "thinking": "…", "signature": "s"},
            {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {"city": "Oslo"}}
        ]});
        let calls = ANTHROPIC.parse_calls(&response).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].id, "toolu_01B");
    }

    #[test]
    fn malformed_calls_still_yield_a_call_each() {
        let turn = json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "t0", "name": "get_weather", "input": "{\"city\":\"Paris\"}"},
            {"type": "tool_use", "name": "get_weather", "input": {}},
            {"type": "tool_use", "id": "t2", "input": {}},
            {"type": "tool_use", "id": "t3", "name": "get_weather"},
            {"type": "tool_use", "id": 4, "name": "get_weather", "input": {}},
        ]});
        let calls = ANTHROPIC.parse_calls(&turn).unwrap();
        let ids: Vec<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(ids, ["t0", "missing_id_1", "t2", "t3", "missing_id_4"]);
        let problems: Vec<String> = calls
            .iter()
            .map(|call| call.arguments.clone().unwrap_err().what)
            .collect();
        assert_eq!(
            problems,
            [
                "the arguments are not a JSON object",
                "the call has no id",
                "the call names no tool",
                "the call has no arguments",
                "the call id is not usable",
            ]
        );
        assert_eq!(
            calls[0].arguments.clone().unwrap_err().why,
            r#"`input` is a string: "{\"city\":\"Paris\"}""#
        );
    }

    #[test]
    fn garbage_turns_are_errors_or_calls_never_panics() {
        for turn in garbage_turns() {
            if let Ok(calls) = ANTHROPIC.parse_calls(&turn) {
                assert!(calls.iter().all(|call| !call.id.is_empty()));
            }
        }
        assert!(ANTHROPIC.parse_calls(&json!({"content": [1]})).is_err());
        assert!(ANTHROPIC.parse_calls(&json!({"content": 1})).is_err());
    }

    #[test]
    fn results_go_in_one_user_message_with_is_error_only_when_flagged() {
        let unknown = CallReport {
            call_id: "toolu_01C".into(),
            tool: "issue_refund".into(),
            result: CallResult::from_error(&ToolError::outcome_unknown("the provider timed out")),
        };
        let unknown_text = unknown.result.to_json_string();
        assert!(unknown_text.starts_with(r#"{"status":"outcome_unknown""#));
        let rendered = ANTHROPIC
            .render_results(&[success("toolu_01A"), failure("toolu_01B"), unknown])
            .unwrap();
        assert_eq!(
            rendered,
            json!({"role":"user","content":[
                {"type":"tool_result","tool_use_id":"toolu_01A","content":"{\"status\":\"succeeded\",\"replayed\":false,\"data\":{\"temp_c\":21}}"},
                {"type":"tool_result","tool_use_id":"toolu_01B","content":"{\"status\":\"error\",\"error\":{\"kind\":\"not_found\",\"what\":\"city not found\",\"why\":\"no match for 'Pariss'\",\"next\":\"check the spelling\"}}","is_error":true},
                {"type":"tool_result","tool_use_id":"toolu_01C","content": unknown_text,"is_error":true}
            ]})
        );
        assert!(
            !rendered["content"][0]
                .as_object()
                .unwrap()
                .contains_key("is_error")
        );
    }
}
