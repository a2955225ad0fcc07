//! The OpenAI Responses API: flattened function declarations with an explicit `strict`, calls as
//! `function_call` output items answered by `call_id`, and one `function_call_output` item per
//! call (no error flag: the result object says it). A `null` where a field is optional is an
//! absent one; a turn without calls is answered with no items.

use serde_json::{Map, Value, json};

use super::openai_chat::strict_parameters;
use super::parse::{CallParts, calls_among, describe, missing_id, present, str_field};
use super::raw_turn::ArgumentFields;
use super::{FormatError, Turn, WireFormat};
use crate::call::{CallReport, ToolCall, json_kind};
use crate::registry::Registry;

/// The OpenAI Responses API (`--format openai-responses`).
///
/// The API takes a declaration without `strict` as strict, so every declaration says it: `true`
/// when [`OpenAiResponses::strict`] is on and the schema lowers with
/// [`openai_strict`](super::openai_strict), `false` (with the canonical schema; the registry
/// names the tool when it is registered, [`Registry::strict_fallbacks`]) otherwise. The default, and the format `openai-responses` names, is strict,
/// as the API's own default.
///
/// ```
/// use serde_json::json;
/// use toolgate::provider::{OpenAiResponses, WireFormat};
///
/// let output = json!([{"type": "function_call", "id": "fc_123", "call_id": "call_abc",
///     "name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":null}", "status": "completed"}]);
/// let calls = OpenAiResponses::default().parse_calls(&output)?;
/// assert_eq!(calls[0].id, "call_abc");
/// # Ok::<(), toolgate::provider::FormatError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenAiResponses {
    /// Declare tools in strict mode where their schema allows it.
    pub strict: bool,
}

impl Default for OpenAiResponses {
    /// Strict, as the API defaults to.
    fn default() -> Self {
        OpenAiResponses { strict: true }
    }
}

impl WireFormat for OpenAiResponses {
    fn name(&self) -> &'static str {
        "openai-responses"
    }

    /// `{"type": "function", "name", "description", "parameters", "strict"}`.
    fn catalog(&self, registry: &Registry) -> Vec<Value> {
        registry
            .iter()
            .map(|tool| {
                let descriptor = tool.descriptor();
                let (parameters, strict) = if self.strict {
                    strict_parameters(tool)
                } else {
                    (tool.schema().clone(), false)
                };
                let mut declaration = Map::new();
                declaration.insert("type".into(), "function".into());
                declaration.insert("name".into(), descriptor.name.into());
                declaration.insert("description".into(), descriptor.model_description().into());
                declaration.insert("parameters".into(), parameters);
                declaration.insert("strict".into(), strict.into());
                Value::Object(declaration)
            })
            .collect()
    }

    /// Reads a response object (its `output`), an array of output items, or one
    /// `function_call` item. Only `function_call` items are calls; the id to answer with is
    /// their `call_id` (a call without one gets `missing_id_N`, N its position among the calls or the next number free,
    /// and is malformed). Other items (messages, reasoning) are skipped.
    ///
    /// From text, each call's arguments are read on their own.
    fn read_calls(&self, turn: Turn<'_>) -> Result<Vec<ToolCall>, FormatError> {
        turn.read_with(self.name(), ARGUMENTS, |tree, fields| {
            self.read(tree, fields)
        })
    }

    /// `[{"type": "function_call_output", "call_id", "output": "<result object as JSON text>"}, …]`,
    /// or `None` for no reports.
    fn render_results(&self, reports: &[CallReport]) -> Option<Value> {
        if reports.is_empty() {
            return None;
        }
        let items = reports
            .iter()
            .map(|report| {
                json!({
                    "type": "function_call_output",
                    "call_id": report.call_id,
                    "output": report.result.to_json_string(),
                })
            })
            .collect();
        Some(items)
    }
}

/// The field of a `function_call` item that holds the arguments.
const ARGUMENTS: &str = "arguments";

impl OpenAiResponses {
    fn read(&self, turn: &Value, fields: ArgumentFields) -> Result<Vec<ToolCall>, FormatError> {
        let error = |reason: String| FormatError {
            format: self.name(),
            reason,
        };
        let items = match turn {
            Value::Array(items) => items.as_slice(),
            Value::Object(object) => match present(object, "output") {
                Some(Value::Array(items)) => items.as_slice(),
                None if str_field(object, "type") == Some("function_call") => {
                    std::slice::from_ref(turn)
                }
                other => {
                    return Err(error(format!(
                        "`output` is {}, not an array of output items",
                        describe(other)
                    )));
                }
            },
            other => {
                return Err(error(format!(
                    "the turn is {}, not a response or its output items",
                    json_kind(other)
                )));
            }
        };
        calls_among(self.name(), "output item", items, missing_id, |item| {
            (str_field(item, "type") == Some("function_call")).then(|| {
                CallParts::read_id("call_id", item.get("call_id"))
                    .name("name", item.get("name"))
                    .text_arguments(ARGUMENTS, fields.field(item.get(ARGUMENTS)))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::test_support::{
        failure, garbage_turns, registry, success, weather_schema,
    };

    const CALL: &str = r#"{"type":"function_call","id":"fc_123","call_id":"call_abc","name":"get_weather","arguments":"{\"city\":\"Paris\",\"unit\":null}","status":"completed"}"#;

    #[test]
    fn declarations_are_flat_and_always_say_strict() {
        let catalog = OpenAiResponses::default().catalog(&registry());
        assert_eq!(
            catalog[0],
            json!({"type":"function","name":"get_weather",
                "description":"Current weather for a city. Read-only: this tool changes nothing and is safe to call again.",
                "strict":true,
                "parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":["string","null"]}},
                "required":["city","unit"],"additionalProperties":false}})
        );
        assert_eq!(catalog[3]["name"], "tag_order");
        assert_eq!(catalog[3]["strict"], false);

        let plain = OpenAiResponses { strict: false }.catalog(&registry());
        assert!(plain.iter().all(|item| item["strict"] == false));
        assert_eq!(plain[0]["parameters"], weather_schema());
    }

    #[test]
    fn parses_output_items_a_response_or_one_item() {
        let item: Value = serde_json::from_str(CALL).unwrap();
        let expected = vec![ToolCall::new(
            "call_abc",
            "get_weather",
            json!({"city": "Paris", "unit": null}),
        )];
        let format = OpenAiResponses::default();
        let response = json!({"id": "resp_1", "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            item,
            {"type": "message", "role": "assistant", "content": []}
        ]});
        assert_eq!(format.parse_calls(&response).unwrap(), expected);
        assert_eq!(format.parse_calls(&json!([item])).unwrap(), expected);
        assert_eq!(format.parse_calls(&item).unwrap(), expected);
        assert_eq!(format.parse_calls(&json!({"output": []})).unwrap(), vec![]);
    }

    #[test]
    fn malformed_calls_still_yield_a_call_each() {
        let output = json!([
            {"type": "function_call", "id": "fc_1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}},
            {"type": "function_call", "call_id": "c2", "arguments": "{}"},
            {"type": "function_call", "call_id": "c3", "name": "get_weather", "arguments": "nope"},
        ]);
        let calls = OpenAiResponses::default().parse_calls(&output).unwrap();
        let ids: Vec<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(ids, ["missing_id_0", "c1", "c2", "c3"]);
        let problems: Vec<String> = calls
            .iter()
            .map(|call| call.arguments.clone().unwrap_err().what)
            .collect();
        assert_eq!(
            problems,
            [
                "the call has no id",
                "the arguments are not JSON text",
                "the call names no tool",
                "the arguments are not valid JSON",
            ]
        );
    }

    #[test]
    fn garbage_turns_are_errors_or_calls_never_panics() {
        let format = OpenAiResponses::default();
        for turn in garbage_turns() {
            if let Ok(calls) = format.parse_calls(&turn) {
                assert!(calls.iter().all(|call| !call.id.is_empty()));
            }
        }
        assert!(format.parse_calls(&json!({"role": "assistant"})).is_err());
        assert!(format.parse_calls(&json!([1])).is_err());
    }

    #[test]
    fn results_are_function_call_output_items() {
        let rendered = OpenAiResponses::default()
            .render_results(&[success("call_abc"), failure("call_def")])
            .unwrap();
        assert_eq!(
            rendered,
            json!([
                {"type":"function_call_output","call_id":"call_abc","output":"{\"status\":\"succeeded\",\"replayed\":false,\"data\":{\"temp_c\":21}}"},
                {"type":"function_call_output","call_id":"call_def","output":"{\"status\":\"error\",\"error\":{\"kind\":\"not_found\",\"what\":\"city not found\",\"why\":\"no match for 'Pariss'\",\"next\":\"check the spelling\"}}"}
            ])
        );
    }
}
