//! The checks every format's call parser shares: the id, the tool name and the arguments of one
//! call, where the first thing wrong becomes the call's [`MalformedCall`], so that the call still
//! gets a result instead of vanishing or panicking.

use serde_json::{Map, Value};

use super::FormatError;
use crate::call::{MalformedCall, ToolCall, json_kind};

/// The id given to call number `index` of a turn when it arrived without a usable one.
pub(super) fn missing_id(index: usize) -> String {
    format!("missing_id_{index}")
}

/// A field's value for an error message: `missing`, or its kind and its JSON text (the first
/// 200 characters).
pub(super) fn describe(value: Option<&Value>) -> String {
    const LIMIT: usize = 200;
    match value {
        None => "missing".into(),
        Some(Value::Null) => "null".into(),
        Some(value) => {
            let text = value.to_string();
            match text.char_indices().nth(LIMIT) {
                Some((cut, _)) => format!("{}: {}…", json_kind(value), &text[..cut]),
                None => format!("{}: {text}", json_kind(value)),
            }
        }
    }
}

/// The calls among a turn's `items` (content blocks, parts, output items), in order. Every item
/// must be a JSON object, or the turn is not one of `format` (the error names the item as
/// `"{item} {position}"`). `read` makes an item a call, given how many calls came before it, or
/// skips it with `None`.
pub(super) fn calls_among<'a>(
    format: &'static str,
    item: &str,
    items: &'a [Value],
    mut read: impl FnMut(usize, &'a Map<String, Value>) -> Option<ToolCall>,
) -> Result<Vec<ToolCall>, FormatError> {
    let mut calls = Vec::new();
    for (position, value) in items.iter().enumerate() {
        let Value::Object(object) = value else {
            return Err(FormatError {
                format,
                reason: format!("{item} {position} is {}, not an object", json_kind(value)),
            });
        };
        if let Some(call) = read(calls.len(), object) {
            calls.push(call);
        }
    }
    Ok(calls)
}

/// A call that is not a JSON object at all.
pub(super) fn not_an_object(index: usize, what_it_is: &str, value: &Value) -> ToolCall {
    ToolCall::malformed(
        missing_id(index),
        "",
        format!("{what_it_is} is not a JSON object"),
        format!("it is {}", describe(Some(value))),
    )
}

/// The parts of one call read so far, with the first problem found.
#[derive(Debug)]
pub(super) struct CallParts {
    id: String,
    name: String,
    problem: Option<MalformedCall>,
}

impl CallParts {
    /// A call with a known id.
    pub(super) fn with_id(id: impl Into<String>) -> Self {
        CallParts {
            id: id.into(),
            name: String::new(),
            problem: None,
        }
    }

    /// Call number `index`, whose id `field` is the non-empty string `value`, or which gets
    /// `missing_id_{index}` and a problem.
    pub(super) fn read_id(index: usize, field: &str, value: Option<&Value>) -> Self {
        match value {
            Some(Value::String(id)) if !id.is_empty() => CallParts::with_id(id.as_str()),
            other => CallParts::missing_id(index, field, other),
        }
    }

    /// Call number `index`, whose id `field` is missing or unusable: it gets
    /// `missing_id_{index}` and a problem.
    pub(super) fn missing_id(index: usize, field: &str, value: Option<&Value>) -> Self {
        CallParts::unusable_id(missing_id(index), field, value)
    }

    /// A call whose id `field` is missing or unusable, given the id `id` and a problem.
    pub(super) fn unusable_id(id: String, field: &str, value: Option<&Value>) -> Self {
        let what = match value {
            None | Some(Value::Null) | Some(Value::String(_)) => "the call has no id",
            Some(_) => "the call id is not usable",
        };
        let why = format!(
            "`{field}` is {}; the call was given the id {id}",
            describe(value)
        );
        CallParts {
            id,
            name: String::new(),
            problem: Some(MalformedCall {
                what: what.into(),
                why,
            }),
        }
    }

    /// Reads the tool name from `field`; a missing or empty name is a problem.
    pub(super) fn name(mut self, field: &str, value: Option<&Value>) -> Self {
        match value {
            Some(Value::String(name)) if !name.is_empty() => self.name = name.clone(),
            other => self.note(
                "the call names no tool",
                format!("`{field}` is {}", describe(other)),
            ),
        }
        self
    }

    /// Records a problem the format found (kept only if it is the first).
    pub(super) fn problem(mut self, what: &str, why: impl Into<String>) -> Self {
        self.note(what, why.into());
        self
    }

    /// Keeps the first problem only: it is the one the model should fix first.
    fn note(&mut self, what: &str, why: String) {
        if self.problem.is_none() {
            self.problem = Some(MalformedCall {
                what: what.into(),
                why,
            });
        }
    }

    /// The call, with arguments that arrive as JSON text in `field` (OpenAI's formats).
    pub(super) fn text_arguments(self, field: &str, value: Option<&Value>) -> ToolCall {
        match value {
            Some(Value::String(text)) => {
                let call = ToolCall::from_json_text(self.id, self.name, text);
                match self.problem {
                    Some(problem) => ToolCall {
                        arguments: Err(problem),
                        ..call
                    },
                    None => call,
                }
            }
            None | Some(Value::Null) => self.fail(
                "the call has no arguments",
                format!("`{field}` is missing; send a JSON object as text, `{{}}` for none"),
            ),
            other => self.fail(
                "the arguments are not JSON text",
                format!(
                    "`{field}` must be a string holding a JSON object, but it is {}",
                    describe(other)
                ),
            ),
        }
    }

    /// The call, with arguments that arrive as a JSON object in `field`; `absent` is what a
    /// missing field means, or `None` when the format requires the field.
    pub(super) fn object_arguments(
        self,
        field: &str,
        value: Option<&Value>,
        absent: Option<Value>,
    ) -> ToolCall {
        match (value, absent) {
            (Some(Value::Object(arguments)), _) => self.finish(Value::Object(arguments.clone())),
            (None, Some(default)) => self.finish(default),
            (None, None) => self.fail("the call has no arguments", format!("`{field}` is missing")),
            (other, _) => self.fail(
                "the arguments are not a JSON object",
                format!("`{field}` is {}", describe(other)),
            ),
        }
    }

    fn finish(self, arguments: Value) -> ToolCall {
        ToolCall {
            id: self.id,
            name: self.name,
            arguments: self.problem.map_or(Ok(arguments.into()), Err),
        }
    }

    fn fail(mut self, what: &str, why: String) -> ToolCall {
        self.note(what, why);
        self.finish(Value::Null)
    }
}

/// The string at `key` of `object`, when it is one.
pub(super) fn str_field<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    object.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_first_problem_is_kept() {
        let call = CallParts::read_id(3, "id", None)
            .name("function.name", Some(&json!(7)))
            .text_arguments("function.arguments", Some(&json!("[]")));
        assert_eq!(call.id, "missing_id_3");
        assert_eq!(call.name, "");
        let problem = call.arguments.unwrap_err();
        assert_eq!(problem.what, "the call has no id");
        assert_eq!(
            problem.why,
            "`id` is missing; the call was given the id missing_id_3"
        );
    }

    #[test]
    fn absent_arguments_may_default() {
        let call = CallParts::with_id("1")
            .name("name", Some(&json!("t")))
            .object_arguments("arguments", None, Some(json!({})));
        assert_eq!(call, ToolCall::new("1", "t", json!({})));
        let call = CallParts::with_id("1")
            .name("name", Some(&json!("t")))
            .object_arguments("input", None, None);
        assert_eq!(call.arguments.unwrap_err().why, "`input` is missing");
    }
}
