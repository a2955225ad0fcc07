//! The checks every format's call parser shares: the id, the tool name and the arguments of one
//! call, where the first thing wrong becomes the call's [`MalformedCall`], so that the call still
//! gets a result instead of vanishing or panicking.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::FormatError;
use super::raw_turn::Field;
use crate::call::{Arguments, MalformedCall, ToolCall, json_kind};
use crate::json_shape::{MAX_DEPTH, Shape, deeper_than, shape_of};
use crate::quote::excerpt;
use crate::quote::json_prefix;

/// The id given to call number `index` of a turn when it arrived without a usable one.
pub(super) fn missing_id(index: usize) -> String {
    format!("missing_id_{index}")
}

/// A field's value for an error message: `missing`, or its kind and its JSON text (the first
/// 200 characters), or only its kind when it nests deeper than a [`Value`] read from text can.
pub(super) fn describe(value: Option<&Value>) -> String {
    const LIMIT: usize = 200;
    match value {
        None => "missing".into(),
        Some(Value::Null) => "null".into(),
        Some(value) if deeper_than(value, MAX_DEPTH) => format!(
            "{} that nests more than {MAX_DEPTH} arrays and objects",
            json_kind(value)
        ),
        Some(value) => format!("{}: {}", json_kind(value), json_prefix(value, LIMIT)),
    }
}

/// The calls among a turn's `items` (content blocks, parts, output items), in order, with their
/// ids settled by [`with_ids`] (`generate` makes the ids of calls that came without one). Every
/// item must be a JSON object, or the turn is not one of `format` (the error names the item as
/// `"{item} {position}"`). `read` makes an item a call, or skips it with `None`.
pub(super) fn calls_among<'a>(
    format: &'static str,
    item: &str,
    items: &'a [Value],
    generate: fn(usize) -> String,
    mut read: impl FnMut(&'a Map<String, Value>) -> Option<ReadCall>,
) -> Result<Vec<ToolCall>, FormatError> {
    let mut calls = Vec::new();
    for (position, value) in items.iter().enumerate() {
        let Value::Object(object) = value else {
            return Err(FormatError {
                format,
                reason: format!("{item} {position} is {}, not an object", json_kind(value)),
            });
        };
        if let Some(call) = read(object) {
            calls.push(call);
        }
    }
    Ok(with_ids(calls, generate))
}

/// A call that is not a JSON object at all.
pub(super) fn not_an_object(what_it_is: &str, value: &Value) -> ReadCall {
    ReadCall {
        call: ToolCall::malformed(
            String::new(),
            "",
            format!("{what_it_is} is not a JSON object"),
            format!("it is {}", describe(Some(value))),
        ),
        id: IdOrigin::Generated { noted: false },
    }
}

/// One call as read, before the ids of its turn are settled ([`with_ids`]).
#[derive(Debug)]
pub(super) struct ReadCall {
    call: ToolCall,
    id: IdOrigin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdOrigin {
    /// The model's id.
    Model,
    /// None usable came: one is generated; `noted` when the call's problem is the missing id,
    /// whose `why` then names the id given.
    Generated { noted: bool },
}

/// The calls of a turn with their ids settled: a call that came without a usable id gets
/// `generate(N)`, N its position among the calls, or, when the turn already has that id (the
/// model used it), the next N whose id the turn does not have. So no generated id equals another
/// id of the turn, and a reused id is always the model's.
pub(super) fn with_ids(calls: Vec<ReadCall>, generate: fn(usize) -> String) -> Vec<ToolCall> {
    if calls.iter().all(|read| read.id == IdOrigin::Model) {
        return calls.into_iter().map(|read| read.call).collect();
    }
    let mut taken: HashSet<String> = calls
        .iter()
        .filter(|read| read.id == IdOrigin::Model)
        .map(|read| read.call.id.clone())
        .collect();
    // First the ids by position that are free, so that a later call keeps its own.
    let mut ids: Vec<Option<String>> = (0..calls.len())
        .map(|index| match calls[index].id {
            IdOrigin::Model => None,
            IdOrigin::Generated { .. } => {
                Some(generate(index)).filter(|id| taken.insert(id.clone()))
            }
        })
        .collect();
    for (index, read) in calls.iter().enumerate() {
        if read.id != IdOrigin::Model && ids[index].is_none() {
            let id = (index + 1..)
                .map(generate)
                .find(|id| !taken.contains(id))
                .expect("finitely many ids are taken");
            taken.insert(id.clone());
            ids[index] = Some(id);
        }
    }
    calls
        .into_iter()
        .zip(ids)
        .map(|(mut read, id)| {
            if let Some(id) = id {
                if let (IdOrigin::Generated { noted: true }, Err(problem)) =
                    (read.id, &mut read.call.arguments)
                {
                    problem.why.push_str("; the call was given the id ");
                    problem.why.push_str(&id);
                }
                read.call.id = id;
            }
            read.call
        })
        .collect()
}

/// The parts of one call read so far, with the first problem found.
#[derive(Debug)]
pub(super) struct CallParts {
    id: String,
    origin: IdOrigin,
    name: String,
    problem: Option<MalformedCall>,
}

impl CallParts {
    /// A call with the model's id.
    pub(super) fn with_id(id: impl Into<String>) -> Self {
        CallParts {
            id: id.into(),
            origin: IdOrigin::Model,
            name: String::new(),
            problem: None,
        }
    }

    /// A call that came without an id, in a format where that is no problem: it gets one
    /// ([`with_ids`]).
    pub(super) fn generated_id() -> Self {
        CallParts {
            origin: IdOrigin::Generated { noted: false },
            ..CallParts::with_id(String::new())
        }
    }

    /// A call whose id `field` is the non-empty string `value`, or which gets an id
    /// ([`with_ids`]) and a problem.
    pub(super) fn read_id(field: &str, value: Option<&Value>) -> Self {
        match value {
            Some(Value::String(id)) if !id.is_empty() => CallParts::with_id(id.as_str()),
            other => CallParts::unusable_id(field, other),
        }
    }

    /// A call whose id `field` is missing or unusable: it gets an id ([`with_ids`]) and a
    /// problem.
    pub(super) fn unusable_id(field: &str, value: Option<&Value>) -> Self {
        let what = match value {
            None | Some(Value::Null) | Some(Value::String(_)) => "the call has no id",
            Some(_) => "the call id is not usable",
        };
        CallParts {
            id: String::new(),
            origin: IdOrigin::Generated { noted: true },
            name: String::new(),
            problem: Some(MalformedCall {
                what: what.into(),
                why: format!("`{field}` is {}", describe(value)),
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
    pub(super) fn text_arguments(self, field: &str, value: Field<'_>) -> ReadCall {
        let read;
        let value = match value {
            Field::Absent => None,
            Field::Value(value) => Some(value),
            // The string's own JSON text: decoded here, so that a lone surrogate escape in it
            // fails this call alone.
            Field::Text(raw) | Field::Unread(raw) => match serde_json::from_str::<String>(raw) {
                Ok(text) if matches!(value, Field::Unread(_)) => {
                    return self.finish(Arguments::unread(text));
                }
                Ok(text) => return self.text(&text),
                Err(_) => match read_value(raw) {
                    Ok(value) => {
                        read = value;
                        Some(&read)
                    }
                    Err(unreadable) => return self.unreadable(unreadable),
                },
            },
        };
        match value {
            Some(Value::String(text)) => self.text(text),
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

    fn text(self, text: &str) -> ReadCall {
        match Arguments::from_text(text) {
            Ok(arguments) => self.finish(arguments),
            Err(unreadable) => self.unreadable(unreadable),
        }
    }

    /// The call, with arguments that arrive as a JSON object in `field`; `absent` is what a
    /// missing (or `null`) field means, or `None` when the format requires the field.
    pub(super) fn object_arguments(
        self,
        field: &str,
        value: Field<'_>,
        absent: Option<Value>,
    ) -> ReadCall {
        let read;
        let value = match value {
            Field::Absent => None,
            Field::Value(value) if deeper_than(value, MAX_DEPTH) => {
                return self.fail(
                    "the arguments hold a value that cannot be read",
                    format!("`{field}` is {}", describe(Some(value))),
                );
            }
            Field::Value(value) => Some(value),
            // Text that opens an object is one object or not JSON at all, and the check of
            // `Arguments::from_text` tells which with the error it would give here.
            Field::Unread(raw) if raw.trim_start_matches(JSON_SPACE).starts_with('{') => {
                return self.finish(Arguments::unread(raw.to_owned()));
            }
            Field::Text(raw) | Field::Unread(raw) => match shape_of(raw) {
                Ok(Shape::Object) => return self.finish(Arguments::checked_object(raw.to_owned())),
                Ok(_) => match read_value(raw) {
                    Ok(value) => {
                        read = value;
                        Some(&read)
                    }
                    Err(unreadable) => return self.unreadable(unreadable),
                },
                Err(unreadable) => return self.unreadable(unreadable),
            },
        };
        let value = value.filter(|value| !(value.is_null() && absent.is_some()));
        match (value, absent) {
            (Some(Value::Object(arguments)), _) => {
                self.finish(Value::Object(arguments.clone()).into())
            }
            (None, Some(default)) => self.finish(default.into()),
            (None, None) => self.fail("the call has no arguments", format!("`{field}` is missing")),
            (other, _) => self.fail(
                "the arguments are not a JSON object",
                format!("`{field}` is {}", describe(other)),
            ),
        }
    }

    fn finish(self, arguments: Arguments) -> ReadCall {
        ReadCall {
            call: ToolCall {
                id: self.id,
                name: self.name,
                arguments: self.problem.map_or(Ok(arguments), Err),
            },
            id: self.origin,
        }
    }

    fn fail(mut self, what: &str, why: String) -> ReadCall {
        self.note(what, why);
        self.finish(Value::Null.into())
    }

    fn unreadable(self, unreadable: MalformedCall) -> ReadCall {
        self.fail(&unreadable.what, unreadable.why)
    }
}

/// The whitespace JSON allows around a value.
const JSON_SPACE: [char; 4] = [' ', '\t', '\n', '\r'];

/// The JSON text of an arguments field that is not what the format expects, read for the error
/// message; text a [`Value`] cannot hold is the error.
fn read_value(raw: &str) -> Result<Value, MalformedCall> {
    shape_of(raw)?;
    serde_json::from_str(raw).map_err(|err| MalformedCall {
        what: "the arguments are not valid JSON".into(),
        why: format!("{err} in {}", excerpt(raw)),
    })
}

/// The string at `key` of `object`, when it is one.
pub(super) fn str_field<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    object.get(key).and_then(Value::as_str)
}

/// The value at `key` of `object`, unless it is missing or `null`: a client that writes every
/// field of its types (Python's `model_dump()`, say) writes `null` for each one it leaves out,
/// and every format reads that `null` as the field left out.
pub(super) fn present<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object.get(key).filter(|value| !value.is_null())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn one(read: ReadCall) -> ToolCall {
        with_ids(vec![read], missing_id).remove(0)
    }

    #[test]
    fn the_first_problem_is_kept() {
        let call = CallParts::read_id("id", None)
            .name("function.name", Some(&json!(7)))
            .text_arguments("function.arguments", Field::Value(&json!("[]")));
        let call = with_ids(
            vec![one_with_id("a"), one_with_id("b"), one_with_id("c"), call],
            missing_id,
        )
        .remove(3);
        assert_eq!(call.id, "missing_id_3");
        assert_eq!(call.name, "");
        let problem = call.arguments.unwrap_err();
        assert_eq!(problem.what, "the call has no id");
        assert_eq!(
            problem.why,
            "`id` is missing; the call was given the id missing_id_3"
        );
    }

    fn one_with_id(id: &str) -> ReadCall {
        CallParts::with_id(id)
            .name("name", Some(&json!("t")))
            .object_arguments("arguments", Field::Absent, Some(json!({})))
    }

    #[test]
    fn absent_arguments_may_default() {
        let call = one(one_with_id("1"));
        assert_eq!(call, ToolCall::new("1", "t", json!({})));
        let call = one(CallParts::with_id("1")
            .name("name", Some(&json!("t")))
            .object_arguments("arguments", Field::Text("null"), Some(json!({}))));
        assert_eq!(call, ToolCall::new("1", "t", json!({})));
        let call = one(CallParts::with_id("1")
            .name("name", Some(&json!("t")))
            .object_arguments("input", Field::Absent, None));
        assert_eq!(call.arguments.unwrap_err().why, "`input` is missing");
    }

    #[test]
    fn generated_ids_never_equal_an_id_of_the_turn() {
        // The model named calls with the ids that would be generated for the others.
        let calls = vec![
            one_with_id("missing_id_1"),
            CallParts::read_id("id", None).object_arguments("a", Field::Absent, Some(json!({}))),
            not_an_object("the tool call", &json!(3)),
            one_with_id("missing_id_3"),
            CallParts::read_id("id", Some(&json!(""))).object_arguments(
                "a",
                Field::Absent,
                Some(json!({})),
            ),
        ];
        let calls = with_ids(calls, missing_id);
        let ids: Vec<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "missing_id_1",
                "missing_id_5",
                "missing_id_2",
                "missing_id_3",
                "missing_id_4"
            ]
        );
        assert_eq!(
            calls[1].arguments.clone().unwrap_err().why,
            "`id` is missing; the call was given the id missing_id_5"
        );
        assert_eq!(
            calls[2].arguments.clone().unwrap_err().why,
            "it is a number: 3"
        );
    }

    #[test]
    fn arguments_left_as_text_are_read_call_by_call() {
        let read = |raw: &str| {
            one(CallParts::with_id("1")
                .name("name", Some(&json!("t")))
                .object_arguments("input", Field::Text(raw), None))
        };
        assert_eq!(
            read(r#"{"a": 1}"#).arguments.unwrap().as_text(),
            Some(r#"{"a": 1}"#)
        );
        let err = read(r#""x""#).arguments.unwrap_err();
        assert_eq!(
            (err.what.as_str(), err.why.as_str()),
            (
                "the arguments are not a JSON object",
                r#"`input` is a string: "x""#
            )
        );
        let err = read(r#"{"a": 1e999}"#).arguments.unwrap_err();
        assert_eq!(err.what, "the arguments hold a value that cannot be read");
        let err = read(r#"{"a": 1, "a": 2}"#).arguments.unwrap_err();
        assert_eq!(err.what, r#"the arguments give the key "a" more than once"#);
        let text = |raw: &str| {
            one(CallParts::with_id("1")
                .name("name", Some(&json!("t")))
                .text_arguments("arguments", Field::Text(raw)))
        };
        assert_eq!(text(r#""{\"a\": 1}""#).arguments.unwrap(), json!({"a": 1}));
        // A lone surrogate escape inside the arguments' text, and in the string holding it.
        for raw in [r#""{\"a\": \"\\ud800\"}""#, r#""{\"a\": \"\ud800\"}""#] {
            let err = text(raw).arguments.unwrap_err();
            assert_eq!(
                err.what, "the arguments hold a value that cannot be read",
                "{raw}"
            );
        }
        let err = text(r#""{\"a\": ""#).arguments.unwrap_err();
        assert_eq!(err.what, "the arguments are not valid JSON");
        let err = text("null").arguments.unwrap_err();
        assert_eq!(err.what, "the call has no arguments");
    }
}
