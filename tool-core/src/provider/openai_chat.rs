//! OpenAI Chat Completions: `tools[]` of `{"type": "function", "function": …}`, calls in the
//! assistant message's `tool_calls` with arguments as JSON text, and one `role: "tool"` message
//! per call id (the format has no error flag: the result object says it). A `null` where a
//! field is optional (`"type": null`, `"choices": null`, `"tool_calls": null`) is an absent one;
//! a turn without calls is answered with no messages.

use serde_json::{Map, Value, json};

use super::parse::{CallParts, ReadCall, describe, missing_id, not_an_object, present, with_ids};
use super::raw_turn::{ArgumentFields, turn_with_raw};
use super::{FormatError, Turn, WireFormat};
use crate::call::{CallReport, ToolCall, json_kind};
use crate::json_text::escape_into;
use crate::registry::{RegisteredTool, Registry};

/// OpenAI Chat Completions (`--format openai`, or `openai-strict` with [`OpenAiChat::strict`]).
///
/// With `strict`, each tool is declared with `"strict": true` and its schema lowered by
/// [`openai_strict`](super::openai_strict). A tool whose schema cannot be lowered (a map, a
/// `#[serde(default)]` field that is not an `Option`, …) is declared with `"strict": false` and
/// its canonical schema instead, and the registry names it and says what to change when the
/// tool is registered ([`Registry::strict_fallbacks`]): one such tool does not break the
/// catalog, and the validator enforces its schema either way. Each schema is lowered once, at
/// registration, and every catalog reuses it.
///
/// ```
/// use serde_json::json;
/// use toolgate::provider::{OpenAiChat, WireFormat};
///
/// let turn = json!({"role": "assistant", "content": null, "tool_calls": [{
///     "id": "call_abc", "type": "function",
///     "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":null}"}
/// }]});
/// let calls = OpenAiChat { strict: true }.parse_calls(&turn)?;
/// assert_eq!(calls[0].id, "call_abc");
/// assert_eq!(calls[0].arguments.as_ref().unwrap(), &json!({"city": "Paris", "unit": null}));
/// # Ok::<(), toolgate::provider::FormatError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenAiChat {
    /// Declare tools in strict mode (Structured Outputs).
    pub strict: bool,
}

impl WireFormat for OpenAiChat {
    fn name(&self) -> &'static str {
        if self.strict {
            "openai-strict"
        } else {
            "openai"
        }
    }

    /// `{"type": "function", "function": {"name", "description", "parameters"}}`, plus
    /// `"strict"` in strict mode.
    fn catalog(&self, registry: &Registry) -> Vec<Value> {
        registry
            .iter()
            .map(|tool| {
                let descriptor = tool.descriptor();
                let mut function = Map::new();
                function.insert("name".into(), descriptor.name.into());
                function.insert("description".into(), descriptor.model_description().into());
                if self.strict {
                    let (parameters, strict) = strict_parameters(tool);
                    function.insert("strict".into(), strict.into());
                    function.insert("parameters".into(), parameters);
                } else {
                    function.insert("parameters".into(), tool.schema().clone());
                }
                json!({"type": "function", "function": function})
            })
            .collect()
    }

    /// Reads an assistant message (or a whole completion, from its first choice). A message
    /// without `tool_calls` has no calls. Each entry of `tool_calls` yields one call; an entry
    /// without an id gets `missing_id_N` (N its position, or the next number whose id the turn does not have) and is malformed, as is one with
    /// arguments that are not JSON text of an object.
    ///
    /// A text turn that is a well-formed assistant message is read straight into calls; anything unusual (a whole
    /// completion, a call without an id, arguments that are not text or whose string cannot be
    /// decoded) takes the path of the tree, on a tree in which each call's
    /// `function.arguments` is read on its own, so the answer is the same either way.
    fn read_calls(&self, turn: Turn<'_>) -> Result<Vec<ToolCall>, FormatError> {
        match turn {
            Turn::Text(text) => self.read_text(text, ArgumentFields::Text),
            Turn::Unread(text, _) => self.read_text(text, ArgumentFields::Unread),
            Turn::Tree(tree) => self.read(tree, ArgumentFields::Values),
        }
    }

    /// The same messages as [`WireFormat::render_results`], written without a JSON tree: each
    /// result object is escaped straight into its message, with no string of its own.
    fn render_results_text(&self, reports: &[CallReport]) -> Option<String> {
        if reports.is_empty() {
            return None;
        }
        // Escaping the content adds about one byte in four.
        let size: usize = reports
            .iter()
            .map(|report| report.result.json_len_hint() * 5 / 4 + report.call_id.len() + 48)
            .sum();
        // Bytes, made a string once at the end: escaping is a matter of bytes.
        let mut text = Vec::with_capacity(size + 2);
        text.push(b'[');
        for (index, report) in reports.iter().enumerate() {
            if index > 0 {
                text.push(b',');
            }
            text.extend_from_slice(br#"{"role":"tool","tool_call_id":""#);
            escape_into(&mut text, &report.call_id);
            text.extend_from_slice(br#"","content":""#);
            report.result.write_json_escaped(&mut text);
            text.extend_from_slice(b"\"}");
        }
        text.push(b']');
        Some(String::from_utf8(text).expect("escaped UTF-8 is UTF-8"))
    }

    /// `[{"role": "tool", "tool_call_id", "content": "<result object as JSON text>"}, …]`, or
    /// `None` for no reports.
    fn render_results(&self, reports: &[CallReport]) -> Option<Value> {
        if reports.is_empty() {
            return None;
        }
        let messages = reports
            .iter()
            .map(|report| {
                json!({
                    "role": "tool",
                    "tool_call_id": report.call_id,
                    "content": report.result.to_json_string(),
                })
            })
            .collect();
        Some(messages)
    }
}

/// The field of a call's `function` that holds the arguments.
const ARGUMENTS: &str = "arguments";

impl OpenAiChat {
    /// The calls of the turn's text, with arguments read as `fields` says.
    fn read_text(&self, turn: &str, fields: ArgumentFields) -> Result<Vec<ToolCall>, FormatError> {
        if let Ok(fast) = serde_json::from_str::<fast::Turn>(turn)
            && let Some(calls) = fast.into_calls(fields)
        {
            return Ok(calls);
        }
        let tree = turn_with_raw(self.name(), turn, ARGUMENTS)?;
        self.read(&tree, fields)
    }

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
        let message = match present(message, "choices") {
            None => message,
            Some(choices) => choices
                .get(0)
                .and_then(|choice| choice.get("message"))
                .and_then(Value::as_object)
                .ok_or_else(|| {
                    error("a completion whose `choices[0].message` is missing".into())
                })?,
        };
        match present(message, "tool_calls") {
            None => Ok(Vec::new()),
            Some(Value::Array(calls)) => Ok(with_ids(
                calls.iter().map(|call| parse_call(call, fields)).collect(),
                missing_id,
            )),
            other => Err(error(format!(
                "`tool_calls` is {}, not an array",
                describe(other)
            ))),
        }
    }
}

fn parse_call(call: &Value, fields: ArgumentFields) -> ReadCall {
    let Value::Object(call) = call else {
        return not_an_object("the tool call", call);
    };
    let mut parts = CallParts::read_id("id", call.get("id"));
    let function = present(call, "function").and_then(Value::as_object);
    if function.is_none() {
        let why = format!("`function` is {}", describe(call.get("function")));
        parts = parts.problem("the call has no function", why);
    }
    parts = parts.name("function.name", function.and_then(|f| f.get("name")));
    if let Some(kind) = present(call, "type")
        && kind != "function"
    {
        let why = format!(
            "`type` is {}, and only function tools are declared",
            describe(Some(kind))
        );
        parts = parts.problem("the call is not a function call", why);
    }
    parts.text_arguments(
        "function.arguments",
        fields.field(function.and_then(|f| f.get(ARGUMENTS))),
    )
}

/// The typed reading of a well-formed assistant message, straight into [`ToolCall`]s: each
/// call's arguments are checked as they are read and kept as text, with no tree.
mod fast {
    use serde::de::{self, IgnoredAny};
    use serde::{Deserialize, Deserializer};

    use super::ArgumentFields;
    use crate::call::{Arguments, ToolCall};

    #[derive(Deserialize)]
    pub(super) struct Turn {
        /// Whether the turn is a whole completion: `choices` is there and not `null`.
        #[serde(default)]
        choices: Option<IgnoredAny>,
        tool_calls: Option<Vec<Call>>,
    }

    /// A call the typed reading can take as it is: an id, a name, `type: "function"` (or no
    /// type) and arguments as text, read into the [`ToolCall`] it becomes with its arguments
    /// unread (so that the calls become [`ToolCall`]s in the vector they were read into). Any
    /// other call fails the typed reading, so that the whole turn takes the general one.
    struct Call(ToolCall);

    impl<'de> Deserialize<'de> for Call {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            #[derive(Deserialize)]
            struct Fields {
                id: String,
                /// `None` when the type is left out or `null`: a function call.
                #[serde(rename = "type", default)]
                kind: Option<Kind>,
                function: Function,
            }

            #[derive(Deserialize)]
            struct Function {
                name: String,
                arguments: String,
            }

            let call = Fields::deserialize(deserializer)?;
            let function = call.kind.is_none_or(|Kind(function)| function);
            if call.id.is_empty() || call.function.name.is_empty() || !function {
                return Err(de::Error::custom("a call for the general reading"));
            }
            Ok(Call(ToolCall {
                id: call.id,
                name: call.function.name,
                arguments: Ok(Arguments::unread(call.function.arguments)),
            }))
        }
    }

    /// Whether a call's `type` is `function`, read without copying the text (serde reads an
    /// `Option<Cow<str>>` into an owned string).
    struct Kind(bool);

    impl<'de> Deserialize<'de> for Kind {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct IsFunction;

            impl de::Visitor<'_> for IsFunction {
                type Value = Kind;

                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a call type")
                }

                fn visit_str<E: de::Error>(self, kind: &str) -> Result<Kind, E> {
                    Ok(Kind(kind == "function"))
                }
            }

            deserializer.deserialize_str(IsFunction)
        }
    }

    impl Turn {
        /// The calls, with arguments read as `fields` says (checked as
        /// [`ToolCall::from_json_text`] checks them, or left unread), or `None` when the turn
        /// needs the general reading.
        pub(super) fn into_calls(self, fields: ArgumentFields) -> Option<Vec<ToolCall>> {
            if self.choices.is_some() {
                return None;
            }
            let calls = self.tool_calls.unwrap_or_default().into_iter();
            Some(
                calls
                    .map(|Call(mut call)| {
                        if fields != ArgumentFields::Unread {
                            call.arguments = call.arguments.and_then(Arguments::settle);
                        }
                        call
                    })
                    .collect(),
            )
        }
    }
}

/// The parameters of `tool` in strict mode, and whether it can be declared strict: the schema
/// lowered when the tool was registered, or the canonical one when it does not lower.
pub(super) fn strict_parameters(tool: &RegisteredTool) -> (Value, bool) {
    match tool.lowerings().strict() {
        Ok(lowered) => (lowered.clone(), true),
        Err(_) => (tool.schema().clone(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CallResult;
    use crate::provider::test_support::{
        failure, garbage_turns, registry, success, weather_schema,
    };

    const CALL: &str = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"unit\":null}"}}]}"#;

    #[test]
    fn strict_catalog_matches_the_wire_shape() {
        let catalog = OpenAiChat { strict: true }.catalog(&registry());
        assert_eq!(catalog.len(), 5);
        assert_eq!(
            catalog[0],
            json!({"type":"function","function":{"name":"get_weather",
                "description": WEATHER_DESCRIPTION, "strict": true,
                "parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":["string","null"]}},
                "required":["city","unit"],"additionalProperties":false}}})
        );
        // A map cannot be strict: declared non-strict with its canonical schema.
        let tag = &catalog[3]["function"];
        assert_eq!(tag["name"], "tag_order");
        assert_eq!(tag["strict"], false);
        assert_eq!(
            tag["parameters"]["properties"]["tags"]["additionalProperties"]["type"],
            "string"
        );
        // No arguments: an empty closed object.
        assert_eq!(
            catalog[4]["function"]["parameters"],
            json!({"type":"object","properties":{},"required":[],"additionalProperties":false})
        );
        for item in &catalog {
            jsonschema::meta::validate(&item["function"]["parameters"]).unwrap();
        }
    }

    const WEATHER_DESCRIPTION: &str = "Current weather for a city. Read-only: this tool changes \
        nothing and is safe to call again.";

    #[test]
    fn plain_catalog_has_the_canonical_schema_and_no_strict_key() {
        let catalog = OpenAiChat { strict: false }.catalog(&registry());
        let function = catalog[0]["function"].as_object().unwrap();
        assert!(!function.contains_key("strict"));
        assert_eq!(function["parameters"], weather_schema());
        assert_eq!(catalog[0]["type"], "function");
    }

    #[test]
    fn parses_the_example_call() {
        let turn: Value = serde_json::from_str(CALL).unwrap();
        let calls = OpenAiChat::default().parse_calls(&turn).unwrap();
        assert_eq!(
            calls,
            vec![ToolCall::new(
                "call_abc",
                "get_weather",
                json!({"city": "Paris", "unit": null})
            )]
        );
        // The same message inside a whole completion.
        let completion = json!({"choices": [{"message": turn, "finish_reason": "tool_calls"}]});
        assert_eq!(
            OpenAiChat::default().parse_calls(&completion).unwrap(),
            calls
        );
    }

    #[test]
    fn a_message_without_calls_has_none() {
        let format = OpenAiChat::default();
        let text = json!({"role": "assistant", "content": "Hello"});
        assert_eq!(format.parse_calls(&text).unwrap(), vec![]);
        let null = json!({"role": "assistant", "content": "Hello", "tool_calls": null});
        assert_eq!(format.parse_calls(&null).unwrap(), vec![]);
    }

    #[test]
    fn malformed_calls_still_yield_a_call_each() {
        let turn = json!({"role": "assistant", "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"arguments": "{}"}},
            "not a call",
            {"id": "c4", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":"}},
            {"id": "c5", "type": "function", "function": {"name": "get_weather", "arguments": "[1]"}},
            {"id": "c6", "type": "custom", "custom": {"name": "x", "input": "y"}},
            {"id": "c7", "type": "function", "function": {"name": "get_weather"}},
        ]});
        let calls = OpenAiChat { strict: true }.parse_calls(&turn).unwrap();
        let ids: Vec<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "c0",
                "missing_id_1",
                "c2",
                "missing_id_3",
                "c4",
                "c5",
                "c6",
                "c7"
            ]
        );
        let problems: Vec<String> = calls
            .iter()
            .map(|call| call.arguments.clone().unwrap_err().what)
            .collect();
        assert_eq!(
            problems,
            [
                "the arguments are not JSON text",
                "the call has no id",
                "the call names no tool",
                "the tool call is not a JSON object",
                "the arguments are not valid JSON",
                "the arguments are not a JSON object",
                "the call has no function",
                "the call has no arguments",
            ]
        );
        let why = calls[0].arguments.clone().unwrap_err().why;
        assert_eq!(
            why,
            r#"`function.arguments` must be a string holding a JSON object, but it is an object: {"city":"Paris"}"#
        );
        assert_eq!(calls[1].name, "get_weather");
    }

    #[test]
    fn the_text_reading_is_the_tree_reading() {
        let call = |id: Value, kind: Value, name: Value, arguments: Value| {
            let mut call = json!({"id": id, "type": kind,
                "function": {"name": name, "arguments": arguments}});
            for key in ["id", "type"] {
                if call[key].is_null() {
                    call.as_object_mut().unwrap().remove(key);
                }
            }
            call
        };
        let good = call(
            json!("call_\"1\""),
            json!("function"),
            json!("get_weather"),
            json!("{\"city\": \"Paris \\\"Nord\\\" ☃\", \"unit\": null}"),
        );
        let mut turns = garbage_turns();
        turns.extend([
            json!({"role": "assistant", "content": null, "tool_calls": [good.clone()]}),
            json!({"role": "assistant", "content": "no calls"}),
            json!({"role": "assistant", "tool_calls": []}),
            json!({"role": "assistant", "tool_calls": null}),
            json!({"tool_calls": [good.clone(), call(json!("c2"), Value::Null, json!("t"), json!("{}"))]}),
            json!({"choices": [{"message": {"tool_calls": [good.clone()]}}]}),
            json!({"choices": null, "tool_calls": [good.clone()]}),
        ]);
        // Each way a call can be unusable for the typed reading, next to a good one.
        for bad in [
            call(json!(""), json!("function"), json!("t"), json!("{}")),
            call(Value::Null, json!("function"), json!("t"), json!("{}")),
            call(json!(7), json!("function"), json!("t"), json!("{}")),
            call(json!("c"), json!("custom"), json!("t"), json!("{}")),
            call(json!("c"), json!("function"), json!(""), json!("{}")),
            call(json!("c"), json!("function"), Value::Null, json!("{}")),
            call(json!("c"), json!("function"), json!("t"), json!({"a": 1})),
            call(json!("c"), json!("function"), json!("t"), Value::Null),
            call(json!("c"), json!("function"), json!("t"), json!("[1]")),
            call(json!("c"), json!("function"), json!("t"), json!("{\"a\":")),
            call(json!("c"), json!("function"), json!("t"), json!("")),
            json!({"id": "c", "function": 3}),
        ] {
            turns.push(json!({"tool_calls": [good.clone(), bad]}));
        }
        for strict in [false, true] {
            let format = OpenAiChat { strict };
            for turn in &turns {
                assert_eq!(
                    format.parse_calls_text(&turn.to_string()),
                    format.parse_calls(turn),
                    "{turn}"
                );
            }
            // Text that is not JSON, and a field given twice.
            assert!(format.parse_calls_text("{\"tool_calls\": [").is_err());
            let twice = r#"{"tool_calls": [{"id": "a", "id": "b", "function": {"name": "t", "arguments": "{}"}}]}"#;
            assert_eq!(
                format.parse_calls_text(twice),
                format.parse_calls(&serde_json::from_str(twice).unwrap())
            );
        }
    }

    #[test]
    fn garbage_turns_are_errors_or_calls_never_panics() {
        let format = OpenAiChat::default();
        for turn in garbage_turns() {
            if let Ok(calls) = format.parse_calls(&turn) {
                for call in calls {
                    assert!(!call.id.is_empty());
                }
            }
        }
        let err = format.parse_calls(&json!([1])).unwrap_err();
        assert_eq!(err.format, "openai");
        assert_eq!(err.reason, "the turn is an array, not an assistant message");
        let err = format.parse_calls(&json!({"tool_calls": {}})).unwrap_err();
        assert_eq!(err.reason, "`tool_calls` is an object: {}, not an array");
    }

    #[test]
    fn the_text_rendering_is_the_tree_rendering_byte_for_byte() {
        let format = OpenAiChat::default();
        // Text that needs escaping, in the data, the error and the call id.
        let data = json!({"note": "a \"quoted\" back\\slash\n\t\u{1}\u{7f} é ☃ 😀"});
        let mut replayed = CallReport {
            call_id: "call_\"x\"".into(),
            tool: "get_weather".into(),
            result: CallResult::succeeded(crate::tool::JsonText::of(&data).unwrap()),
        };
        replayed.result.replayed = true;
        let err = crate::ToolError::not_found("no \"Pariss\"\n").with_why("tab\there");
        let error = CallReport {
            call_id: "call_err".into(),
            tool: "get_weather".into(),
            result: CallResult::from_error(&err),
        };
        for reports in [
            vec![],
            vec![success("call_abc")],
            vec![success("call_abc"), failure("call_def"), replayed, error],
        ] {
            assert_eq!(
                format.render_results_text(&reports),
                format
                    .render_results(&reports)
                    .map(|message| message.to_string())
            );
        }
    }

    #[test]
    fn results_are_one_tool_message_per_call() {
        let rendered = OpenAiChat::default()
            .render_results(&[success("call_abc"), failure("call_def")])
            .unwrap();
        assert_eq!(
            rendered,
            json!([
                {"role":"tool","tool_call_id":"call_abc","content":"{\"status\":\"succeeded\",\"replayed\":false,\"data\":{\"temp_c\":21}}"},
                {"role":"tool","tool_call_id":"call_def","content":"{\"status\":\"error\",\"error\":{\"kind\":\"not_found\",\"what\":\"city not found\",\"why\":\"no match for 'Pariss'\",\"next\":\"check the spelling\"}}"}
            ])
        );
    }
}
