//! Google Gemini (generateContent): function declarations with `parameters` lowered to the
//! OpenAPI subset, calls as `functionCall` parts (or `function_call`, as Python's google-genai
//! dumps them) whose `args` is an object, and one `functionResponse` part per call with the
//! result under `output`, or under `error` when flagged. A `null` field is an absent one.

use serde_json::{Map, Value, json};

use super::parse::{CallParts, ReadCall, calls_among, describe, not_an_object, present};
use super::raw_turn::ArgumentFields;
use super::{FormatError, Turn, WireFormat};
use crate::call::{CallReport, ToolCall, json_kind};
use crate::registry::{RegisteredTool, Registry};

/// The prefix of the ids given to calls that arrived without one.
const GENERATED_ID_PREFIX: &str = "gemini_call_";

/// Google Gemini (`--format gemini`).
///
/// **Declarations.** [`WireFormat::catalog`] returns the function declarations, the array that
/// goes in `tools[0].functionDeclarations`. `parameters` is the schema lowered by
/// [`gemini`](super::gemini); a tool without arguments has none; a tool whose schema cannot be
/// lowered (a recursive type, a map) is declared with `parametersJsonSchema`, the canonical
/// schema, instead (the two are mutually exclusive); the registry names it when the tool is
/// registered ([`Registry::lowering_fallbacks`]). Each schema is lowered once, at
/// registration, and every catalog reuses it.
///
/// **Call ids.** Older models send calls without an `id`. Such a call is not malformed: it gets
/// the id `gemini_call_N` (N its position among the turn's calls, or the next number whose id
/// the turn does not have), and rendering leaves `id` out
/// of the response for any id of exactly that form ([`Gemini::is_generated_id`]), so Gemini
/// matches responses to calls by order and name, as it does for calls without ids.
///
/// **Spellings.** A part's call is read from `functionCall`, as the REST API writes it, or from
/// `function_call`, as Python's google-genai dumps a part by default (the fields inside a call,
/// `id`, `name` and `args`, are spelled alike in both). A part with both is one malformed call,
/// since which of the two is meant is not clear. A `null` field reads as the field left out, as
/// such a dump writes every field: a text part with `"functionCall": null` is no call, and
/// `"candidates": null` (a blocked prompt) is a turn without calls.
///
/// **Replay.** Gemini 3 requires the model's parts to be sent back verbatim, `thoughtSignature`
/// (or `thought_signature`) included: keep the model's content as received in the conversation,
/// in whichever spelling it came; this format only reads it.
///
/// **Results.** One `functionResponse` part per report, in one user content; a turn without
/// calls gets no content at all (Gemini refuses a content without parts).
///
/// ```
/// use serde_json::json;
/// use toolgate::provider::{Gemini, WireFormat};
///
/// let turn = json!({"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]});
/// let calls = Gemini.parse_calls(&turn)?;
/// assert_eq!(calls[0].id, "gemini_call_0");
/// assert!(Gemini::is_generated_id(&calls[0].id));
/// # Ok::<(), toolgate::provider::FormatError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gemini;

impl Gemini {
    /// The id given to call number `index` of a turn that arrived without one.
    pub fn generated_id(index: usize) -> String {
        format!("{GENERATED_ID_PREFIX}{index}")
    }

    /// Whether `id` has the form of [`Gemini::generated_id`]; rendering omits such ids.
    pub fn is_generated_id(id: &str) -> bool {
        id.strip_prefix(GENERATED_ID_PREFIX)
            .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
    }
}

impl WireFormat for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    /// `{"name", "description", "parameters"}`, or `parametersJsonSchema` in place of
    /// `parameters` when the schema cannot be lowered, or neither for a tool without arguments.
    fn catalog(&self, registry: &Registry) -> Vec<Value> {
        registry.iter().map(declaration).collect()
    }

    /// Reads a model content (`{"role": "model", "parts": […]}`) or a whole generateContent
    /// response (its first candidate's content). Each part with a `functionCall` (or
    /// `function_call`) is a call; a call whose `args` is absent or `null` has no arguments
    /// (`{}`), one whose `args` is not an object or that names no tool is malformed.
    ///
    /// From text, each call's arguments are read on their own.
    fn read_calls(&self, turn: Turn<'_>) -> Result<Vec<ToolCall>, FormatError> {
        turn.read_with(self.name(), ARGUMENTS, |tree, fields| {
            self.read(tree, fields)
        })
    }

    /// `{"role": "user", "parts": [{"functionResponse": {"id"?, "name", "response":
    /// {"output": result}}}, …]}`, with `"error"` in place of `"output"` when the status is
    /// flagged. `id` is left out for generated ids. `None` for no reports (Gemini refuses a
    /// content without parts).
    fn render_results(&self, reports: &[CallReport]) -> Option<Value> {
        if reports.is_empty() {
            return None;
        }
        let parts = reports
            .iter()
            .map(|report| {
                let key = if report.result.status.is_flagged() {
                    "error"
                } else {
                    "output"
                };
                let mut response = Map::new();
                if !Gemini::is_generated_id(&report.call_id) {
                    response.insert("id".into(), report.call_id.clone().into());
                }
                response.insert("name".into(), report.tool.clone().into());
                response.insert("response".into(), json!({ key: report.result.to_json() }));
                json!({"functionResponse": response})
            })
            .collect::<Vec<_>>();
        Some(json!({"role": "user", "parts": parts}))
    }
}

/// The field of a `functionCall` that holds the arguments.
const ARGUMENTS: &str = "args";

impl Gemini {
    fn read(&self, turn: &Value, fields: ArgumentFields) -> Result<Vec<ToolCall>, FormatError> {
        let error = |reason: String| FormatError {
            format: self.name(),
            reason,
        };
        let Value::Object(object) = turn else {
            return Err(error(format!(
                "the turn is {}, not a model content",
                json_kind(turn)
            )));
        };
        let content = match present(object, "candidates") {
            None => object,
            Some(Value::Array(candidates)) => match candidates.first().map(|c| c.get("content")) {
                // No candidate, or one without content (blocked, say): no calls.
                None | Some(None) | Some(Some(Value::Null)) => return Ok(Vec::new()),
                Some(Some(Value::Object(content))) => content,
                Some(other) => {
                    return Err(error(format!(
                        "`candidates[0].content` is {}, not an object",
                        describe(other)
                    )));
                }
            },
            other => {
                return Err(error(format!(
                    "`candidates` is {}, not an array",
                    describe(other)
                )));
            }
        };
        let parts = match present(content, "parts") {
            None => return Ok(Vec::new()),
            Some(Value::Array(parts)) => parts,
            other => {
                return Err(error(format!(
                    "`parts` is {}, not an array",
                    describe(other)
                )));
            }
        };
        calls_among(self.name(), "part", parts, Gemini::generated_id, |part| {
            read_part(part, fields)
        })
    }
}

/// The two spellings of the part's field that holds a call: the REST API's camelCase, and the
/// proto field's snake_case, which Python's google-genai writes when it dumps a part. The
/// fields inside a call (`id`, `name`, `args`) are spelled alike in both.
const CALL_FIELDS: [&str; 2] = ["functionCall", "function_call"];

/// The call of one part, if it has one, in either spelling.
fn read_part(part: &Map<String, Value>, fields: ArgumentFields) -> Option<ReadCall> {
    let [camel, snake] = CALL_FIELDS.map(|key| present(part, key));
    Some(match (camel, snake) {
        (None, None) => return None,
        (Some(call), None) => parse_call(CALL_FIELDS[0], call, fields, false),
        (None, Some(call)) => parse_call(CALL_FIELDS[1], call, fields, false),
        (Some(call), Some(_)) => parse_call(CALL_FIELDS[0], call, fields, true),
    })
}

/// The call under `key`; `twice` when the part also has the call in the other spelling, which
/// makes it malformed (which of the two is meant is not clear).
fn parse_call(key: &str, call: &Value, fields: ArgumentFields, twice: bool) -> ReadCall {
    let Value::Object(call) = call else {
        return not_an_object(&format!("`{key}`"), call);
    };
    let mut parts = match present(call, "id") {
        Some(Value::String(id)) if !id.is_empty() => CallParts::with_id(id.as_str()),
        None | Some(Value::String(_)) => CallParts::generated_id(),
        other => CallParts::unusable_id(&format!("{key}.id"), other),
    };
    if twice {
        parts = parts.problem(
            "the part gives its call twice",
            format!(
                "it has both `{}` and `{}`; send one of them",
                CALL_FIELDS[0], CALL_FIELDS[1]
            ),
        );
    }
    parts
        .name(&format!("{key}.name"), call.get("name"))
        .object_arguments(
            &format!("{key}.args"),
            fields.field(call.get(ARGUMENTS)),
            Some(json!({})),
        )
}

fn declaration(tool: &RegisteredTool) -> Value {
    let descriptor = tool.descriptor();
    let mut declaration = Map::new();
    declaration.insert("name".into(), descriptor.name.into());
    declaration.insert("description".into(), descriptor.model_description().into());
    match tool.lowerings().gemini() {
        Some(Ok(parameters)) => {
            declaration.insert("parameters".into(), parameters.clone());
        }
        Some(Err(_)) => {
            declaration.insert("parametersJsonSchema".into(), tool.schema().clone());
        }
        None => {}
    }
    Value::Object(declaration)
}

/// Whether a tool with the canonical schema `schema` is declared with parameters: a tool
/// without arguments (no properties, no other keys allowed) has none.
pub(super) fn declares_parameters(schema: &Value) -> bool {
    let has_properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|properties| !properties.is_empty());
    let open = schema
        .get("additionalProperties")
        .is_some_and(|additional| additional != &Value::Bool(false));
    has_properties || open
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::test_support::{failure, garbage_turns, registry, success};

    #[test]
    fn declarations_match_the_wire_shape() {
        let catalog = Gemini.catalog(&registry());
        assert_eq!(
            catalog[0],
            json!({"name":"get_weather",
                "description":"Current weather for a city. Read-only: this tool changes nothing and is safe to call again.",
                "parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","nullable":true}},"required":["city"]}})
        );
        // A map falls back to the canonical schema under parametersJsonSchema.
        let tag = catalog[3].as_object().unwrap();
        assert!(!tag.contains_key("parameters"));
        assert_eq!(
            tag["parametersJsonSchema"]["properties"]["tags"]["type"],
            "object"
        );
        // No arguments: no parameters at all.
        assert_eq!(
            catalog[4],
            json!({"name":"ping","description":"Check the service. Read-only: this tool changes nothing and is safe to call again."})
        );
        for parameters in catalog.iter().filter_map(|item| item.get("parameters")) {
            assert!(!parameters.to_string().contains("$ref"), "{parameters}");
        }
    }

    #[test]
    fn parses_the_example_call_and_a_whole_response() {
        let turn = json!({"role":"model","parts":[{"functionCall":{"id":"fc_1","name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"<opaque>"}]});
        let expected = vec![ToolCall::new(
            "fc_1",
            "get_weather",
            json!({"city": "Paris"}),
        )];
        assert_eq!(Gemini.parse_calls(&turn).unwrap(), expected);
        let response = json!({"candidates": [{"content": turn, "finishReason": "STOP"}]});
        assert_eq!(Gemini.parse_calls(&response).unwrap(), expected);
        assert_eq!(
            Gemini.parse_calls(&json!({"candidates": []})).unwrap(),
            vec![]
        );
        let text = json!({"role": "model", "parts": [{"text": "Hi"}]});
        assert_eq!(Gemini.parse_calls(&text).unwrap(), vec![]);
    }

    #[test]
    fn calls_without_ids_get_generated_ones_that_rendering_omits() {
        let turn = json!({"role": "model", "parts": [
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
            {"text": "and"},
            {"functionCall": {"name": "ping"}}
        ]});
        let calls = Gemini.parse_calls(&turn).unwrap();
        assert_eq!(
            calls,
            vec![
                ToolCall::new("gemini_call_0", "get_weather", json!({"city": "Paris"})),
                ToolCall::new("gemini_call_1", "ping", json!({})),
            ]
        );
        let rendered = Gemini
            .render_results(&[success("gemini_call_0"), success("fc_9")])
            .unwrap();
        assert_eq!(rendered["parts"][0]["functionResponse"].get("id"), None);
        assert_eq!(rendered["parts"][1]["functionResponse"]["id"], "fc_9");
        assert!(Gemini::is_generated_id("gemini_call_12"));
        assert!(!Gemini::is_generated_id("gemini_call_"));
        assert!(!Gemini::is_generated_id("gemini_call_1a"));
        assert!(!Gemini::is_generated_id("fc_1"));
    }

    #[test]
    fn malformed_calls_still_yield_a_call_each() {
        let turn = json!({"role": "model", "parts": [
            {"functionCall": {"id": "a", "name": "get_weather", "args": "{\"city\":\"Paris\"}"}},
            {"functionCall": {"id": "b", "args": {}}},
            {"functionCall": 7},
            {"functionCall": {"id": 3, "name": "get_weather", "args": {}}},
        ]});
        let calls = Gemini.parse_calls(&turn).unwrap();
        let ids: Vec<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "gemini_call_2", "gemini_call_3"]);
        let problems: Vec<String> = calls
            .iter()
            .map(|call| call.arguments.clone().unwrap_err().what)
            .collect();
        assert_eq!(
            problems,
            [
                "the arguments are not a JSON object",
                "the call names no tool",
                "`functionCall` is not a JSON object",
                "the call id is not usable",
            ]
        );
    }

    #[test]
    fn garbage_turns_are_errors_or_calls_never_panics() {
        for turn in garbage_turns() {
            if let Ok(calls) = Gemini.parse_calls(&turn) {
                assert!(calls.iter().all(|call| !call.id.is_empty()));
            }
        }
        assert!(Gemini.parse_calls(&json!({"parts": [1]})).is_err());
        assert!(
            Gemini
                .parse_calls(&json!({"candidates": [{"content": 1}]}))
                .is_err()
        );
    }

    #[test]
    fn a_null_field_is_an_absent_one() {
        // Parts as a client that writes every field dumps them: `null` for each absent one.
        let turn = json!({"role": "model", "parts": [
            {"text": "Let me look.", "functionCall": null, "thoughtSignature": null},
            {"text": null, "functionCall": {"id": null, "name": "get_weather", "args": {"city": "Paris"}}},
            {"text": null, "functionCall": {"id": null, "name": "ping", "args": null}}
        ]});
        let expected = vec![
            ToolCall::new("gemini_call_0", "get_weather", json!({"city": "Paris"})),
            ToolCall::new("gemini_call_1", "ping", json!({})),
        ];
        assert_eq!(Gemini.parse_calls(&turn).unwrap(), expected);
        assert_eq!(
            Gemini.parse_calls_text(&turn.to_string()).unwrap(),
            expected
        );
        // A response blocked before any candidate.
        let blocked = json!({"candidates": null, "promptFeedback": {"blockReason": "SAFETY"}});
        assert_eq!(Gemini.parse_calls(&blocked).unwrap(), vec![]);
    }

    #[test]
    fn parts_in_snake_case_read_as_parts_in_camel_case() {
        // A whole response as google-genai's `model_dump()` writes it: snake_case, every
        // field, `null` where one is absent.
        let response = json!({"candidates": [{"content": {"role": "model", "parts": [
            {"function_call": {"id": "fc_1", "name": "get_weather", "args": {"city": "Paris"},
                "partial_args": null, "will_continue": null},
             "thought_signature": "c2lnbmF0dXJl", "thought": null, "text": null,
             "function_response": null, "inline_data": null},
            {"function_call": {"id": null, "name": "ping", "args": {}}, "thought_signature": null}
        ]}, "finish_reason": "STOP", "citation_metadata": null}],
        "prompt_feedback": null, "usage_metadata": null});
        let expected = vec![
            ToolCall::new("fc_1", "get_weather", json!({"city": "Paris"})),
            ToolCall::new("gemini_call_1", "ping", json!({})),
        ];
        assert_eq!(Gemini.parse_calls(&response).unwrap(), expected);
        assert_eq!(
            Gemini.parse_calls_text(&response.to_string()).unwrap(),
            expected
        );
        // A call malformed in snake_case names its field as the part spelled it.
        let bad = json!({"role": "model", "parts": [{"function_call": {"id": "a", "args": {}}}]});
        let problem = Gemini.parse_calls(&bad).unwrap()[0]
            .arguments
            .clone()
            .unwrap_err();
        assert_eq!(problem.what, "the call names no tool");
        assert_eq!(problem.why, "`function_call.name` is missing");
        // Both spellings on one part: which call is meant is not clear, and the call says so.
        let both = json!({"role": "model", "parts": [
            {"functionCall": {"id": "a", "name": "get_weather", "args": {"city": "Paris"}},
             "function_call": {"id": "a", "name": "get_weather", "args": {"city": "Oslo"}}}
        ]});
        let calls = Gemini.parse_calls(&both).unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("a", "get_weather")
        );
        let problem = calls[0].arguments.clone().unwrap_err();
        assert_eq!(problem.what, "the part gives its call twice");
        assert_eq!(
            problem.why,
            "it has both `functionCall` and `function_call`; send one of them"
        );
    }

    #[test]
    fn responses_put_the_result_under_output_or_error() {
        let rendered = Gemini
            .render_results(&[success("fc_1"), failure("fc_2")])
            .unwrap();
        assert_eq!(
            rendered,
            json!({"role":"user","parts":[
                {"functionResponse":{"id":"fc_1","name":"get_weather","response":{"output":
                    {"status":"succeeded","replayed":false,"data":{"temp_c":21}}}}},
                {"functionResponse":{"id":"fc_2","name":"get_weather","response":{"error":
                    {"status":"error","error":{"kind":"not_found","what":"city not found","why":"no match for 'Pariss'","next":"check the spelling"}}}}}
            ]})
        );
    }
}
