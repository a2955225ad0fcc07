//! A turn's text read into a tree with every call's arguments left as text, so that one hostile
//! value inside one call's arguments (nesting past serde_json's limit, a number beyond `f64`, a
//! lone surrogate escape, a key given twice) makes that call malformed instead of the whole turn
//! unreadable.
//!
//! serde_json captures a [`RawValue`] by its grammar alone, without building a tree, without a
//! recursion limit (it keeps its own stack of brackets) and without reading numbers or escapes:
//! any valid JSON is captured, however deep. What the captured text holds is then read by
//! [`shape_of`](crate::json_shape::shape_of), call by call.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

use super::FormatError;

/// How a tree holds the argument fields of its calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ArgumentFields {
    /// As the JSON values the model sent (a tree the caller parsed).
    Values,
    /// As strings holding the JSON text of each value (a tree read by [`turn_with_raw`]).
    Text,
    /// As [`ArgumentFields::Text`], with the arguments left for the tool to check as it reads
    /// them (for [`Dispatcher::answer_turn`](crate::Dispatcher::answer_turn)).
    Unread,
}

/// One call's arguments field, as a tree holds it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Field<'a> {
    /// The field is not there.
    Absent,
    /// The value.
    Value(&'a Value),
    /// The JSON text of the value, not read yet.
    Text(&'a str),
    /// The JSON text of the value, to be left unread when it may hold arguments.
    Unread(&'a str),
}

impl ArgumentFields {
    /// The arguments field whose value (as this tree holds it) is `value`.
    pub(super) fn field(self, value: Option<&Value>) -> Field<'_> {
        match (self, value) {
            (_, None) => Field::Absent,
            (ArgumentFields::Text, Some(Value::String(text))) => Field::Text(text),
            (ArgumentFields::Unread, Some(Value::String(text))) => Field::Unread(text),
            (_, Some(value)) => Field::Value(value),
        }
    }
}

/// `turn` read as a [`Value`], except that the value of every member named `field`, at any depth,
/// is a string holding its JSON text (read those with [`ArgumentFields::Text`]). The turn's own
/// JSON must be readable; only the values under `field` may be anything JSON allows.
pub(super) fn turn_with_raw(
    format: &'static str,
    turn: &str,
    field: &'static str,
) -> Result<Value, FormatError> {
    let mut deserializer = serde_json::Deserializer::from_str(turn);
    TreeSeed { field }
        .deserialize(&mut deserializer)
        .and_then(|tree| deserializer.end().map(|()| tree))
        .map_err(|err| FormatError {
            format,
            reason: format!("the turn is not valid JSON: {err}"),
        })
}

/// Reads one value as [`Value`] does, with the members named `field` left as text.
#[derive(Clone, Copy)]
struct TreeSeed {
    field: &'static str,
}

impl<'de> DeserializeSeed<'de> for TreeSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TreeSeed {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = if key == self.field {
                Value::String(map.next_value::<&RawValue>()?.get().to_owned())
            } else {
                map.next_value_seed(self)?
            };
            members.insert(key, value);
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_tree_is_the_value_but_for_the_fields_left_as_text() {
        let turn = r#"{"a": [1, -2, 2.5, "s", null, true, {"input": {"x": [1e999]}}],
            "input": "\ud800", "b": {"c": 18446744073709551615}}"#;
        let tree = turn_with_raw("anthropic", turn, "input").unwrap();
        assert_eq!(
            tree,
            json!({"a": [1, -2, 2.5, "s", null, true, {"input": r#"{"x": [1e999]}"#}],
                "input": r#""\ud800""#, "b": {"c": 18446744073709551615u64}})
        );
        let plain = r#"{"a": [1, {"b": "\u00e9"}], "c": 1.5e3}"#;
        assert_eq!(
            turn_with_raw("mcp", plain, "arguments").unwrap(),
            serde_json::from_str::<Value>(plain).unwrap()
        );
    }

    #[test]
    fn any_depth_is_captured_without_recursion() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let turn = format!(r#"{{"args": {deep}}}"#);
        let tree = turn_with_raw("gemini", &turn, "args").unwrap();
        assert_eq!(tree["args"].as_str().unwrap().len(), 200_000);
    }

    #[test]
    fn a_turn_that_is_not_json_is_a_format_error() {
        for turn in [
            "{",
            r#"{"input": }"#,
            r#"{"input": 1} x"#,
            r#"{"a": 1e999}"#,
        ] {
            let err = turn_with_raw("anthropic", turn, "input").unwrap_err();
            assert_eq!(err.format, "anthropic");
            assert!(
                err.reason.starts_with("the turn is not valid JSON"),
                "{err}"
            );
        }
    }

    #[test]
    fn fields_are_read_as_the_tree_holds_them() {
        let text = json!("{}");
        assert!(matches!(
            ArgumentFields::Text.field(Some(&text)),
            Field::Text("{}")
        ));
        assert!(matches!(
            ArgumentFields::Values.field(Some(&text)),
            Field::Value(_)
        ));
        assert!(matches!(ArgumentFields::Text.field(None), Field::Absent));
    }
}
