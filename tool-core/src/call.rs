//! One call the model emitted, as every provider format parses into, and its report.

use serde_json::Value;

use crate::result::CallResult;

/// A call the provider format could not read: the call still gets a result, an
/// `invalid_arguments` error saying what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedCall {
    /// What is wrong, in words the model can act on.
    pub what: String,
    /// The detail (the parser's message, the raw text).
    pub why: String,
}

/// One tool call of a model turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The provider's call id; the result is matched to the call by it. A format whose call had
    /// no id gets a generated one (`missing_id_N`) and the call a [`MalformedCall`].
    pub id: String,
    /// The tool name the model used.
    pub name: String,
    /// The arguments as a JSON object, or what made them unreadable.
    pub arguments: Result<Value, MalformedCall>,
}

impl ToolCall {
    /// A well-formed call.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: Ok(arguments),
        }
    }

    /// A call whose arguments arrived as JSON text (OpenAI's formats): the text is parsed here,
    /// and text that is not a JSON object becomes a [`MalformedCall`].
    pub fn from_json_text(id: impl Into<String>, name: impl Into<String>, text: &str) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments_from_json_text(text),
        }
    }

    /// A call the format could not read at all.
    pub fn malformed(
        id: impl Into<String>,
        name: impl Into<String>,
        what: impl Into<String>,
        why: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: Err(MalformedCall {
                what: what.into(),
                why: why.into(),
            }),
        }
    }
}

/// Arguments sent as JSON text: the object, or what is wrong with the text.
pub(crate) fn arguments_from_json_text(text: &str) -> Result<Value, MalformedCall> {
    match serde_json::from_str::<Value>(text) {
        Ok(value) if value.is_object() => Ok(value),
        Ok(value) => Err(MalformedCall {
            what: "the arguments are not a JSON object".into(),
            why: format!("they are {} in {}", json_kind(&value), excerpt(text)),
        }),
        Err(err) => Err(MalformedCall {
            what: "the arguments are not valid JSON".into(),
            why: format!("{err} in {}", excerpt(text)),
        }),
    }
}

/// What kind of JSON value `value` is, with its article, for error messages ("an array").
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The first 200 characters of `text`, quoted, for error messages.
pub(crate) fn excerpt(text: &str) -> String {
    const LIMIT: usize = 200;
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
    }
}

/// The outcome of one call: its id, the tool name the model used, and the result object.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReport {
    /// The call id, as the model sent it.
    pub call_id: String,
    /// The tool name, as the model sent it.
    pub tool: String,
    /// What the model sees.
    pub result: CallResult,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_text_that_does_not_parse_is_malformed_not_a_panic() {
        let call = ToolCall::from_json_text("c1", "t", "{\"a\": ");
        let err = call.arguments.unwrap_err();
        assert_eq!(err.what, "the arguments are not valid JSON");
        assert!(err.why.contains("EOF"), "{}", err.why);
        let call = ToolCall::from_json_text("c1", "t", "[1, 2]");
        let err = call.arguments.unwrap_err();
        assert_eq!(err.what, "the arguments are not a JSON object");
        assert_eq!(err.why, "they are an array in \"[1, 2]\"");
        let call = ToolCall::from_json_text("c1", "t", r#"{"a": 1}"#);
        assert_eq!(call.arguments, Ok(serde_json::json!({"a": 1})));
        let long = "x".repeat(500);
        assert!(excerpt(&long).ends_with('…'));
    }
}
