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
    /// The arguments, or what made them unreadable.
    pub arguments: Result<Arguments, MalformedCall>,
}

impl ToolCall {
    /// A well-formed call.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: Ok(Arguments::from(arguments)),
        }
    }

    /// A call whose arguments arrived as JSON text (OpenAI's formats): text that is not one JSON
    /// object becomes a [`MalformedCall`], and the rest is kept as text (see [`Arguments`]).
    pub fn from_json_text(id: impl Into<String>, name: impl Into<String>, text: &str) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: Arguments::from_text(text),
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

/// The arguments of a call: a JSON value, held as a tree or, for a JSON object that arrived as
/// text, as that text.
///
/// OpenAI's formats send arguments as JSON text. Kept as text, they can be deserialized straight
/// into a tool's parameters when the tool's types prove that serde accepts exactly the objects its
/// schema accepts (see [`Tool::invoke_text`](crate::Tool::invoke_text)); the dispatcher builds
/// the tree, and validates it, only for the other tools and for text serde refuses.
///
/// Two `Arguments` are equal when they hold the same JSON value, whichever way each is held.
///
/// ```
/// use serde_json::json;
/// use toolgate::Arguments;
///
/// let text = Arguments::from_text(r#"{"order_id": "ORD-1001"}"#).unwrap();
/// assert_eq!(text.as_text(), Some(r#"{"order_id": "ORD-1001"}"#));
/// assert_eq!(text, Arguments::from(json!({"order_id": "ORD-1001"})));
/// assert_eq!(text.to_string(), r#"{"order_id":"ORD-1001"}"#);
///
/// let err = Arguments::from_text("[1, 2]").unwrap_err();
/// assert_eq!(err.what, "the arguments are not a JSON object");
/// ```
#[derive(Clone)]
pub struct Arguments(Held);

#[derive(Clone)]
enum Held {
    Tree(Value),
    /// Text that parses, as [`Value`] would parse it, into one JSON object.
    Text(String),
}

impl Arguments {
    /// Arguments sent as JSON text. Text that `serde_json` would not parse into a [`Value`], or
    /// that holds anything but one JSON object, is a [`MalformedCall`] saying which. The check
    /// reads the text the way a [`Value`] is parsed, but builds nothing.
    pub fn from_text(text: impl Into<String>) -> Result<Self, MalformedCall> {
        let text = text.into();
        match serde_json::from_str::<Shape>(&text) {
            Ok(Shape::Object) => Ok(Arguments(Held::Text(text))),
            Ok(shape) => Err(MalformedCall {
                what: "the arguments are not a JSON object".into(),
                why: format!("they are {} in {}", shape.kind(), excerpt(&text)),
            }),
            Err(err) => Err(MalformedCall {
                what: "the arguments are not valid JSON".into(),
                why: format!("{err} in {}", excerpt(&text)),
            }),
        }
    }

    /// The text the arguments arrived as, if they arrived as text.
    pub fn as_text(&self) -> Option<&str> {
        match &self.0 {
            Held::Text(text) => Some(text),
            Held::Tree(_) => None,
        }
    }

    /// The arguments as a JSON value.
    pub fn to_value(&self) -> Value {
        match &self.0 {
            Held::Tree(value) => value.clone(),
            Held::Text(text) => parse_checked(text),
        }
    }

    /// The arguments as a JSON value, without a copy when they are one already.
    pub fn into_value(self) -> Value {
        match self.0 {
            Held::Tree(value) => value,
            Held::Text(text) => parse_checked(&text),
        }
    }

    /// The text, if the arguments arrived as text; the tree otherwise.
    pub(crate) fn into_text(self) -> Result<String, Value> {
        match self.0 {
            Held::Text(text) => Ok(text),
            Held::Tree(value) => Err(value),
        }
    }
}

/// Text that [`Arguments::from_text`] accepted, parsed.
pub(crate) fn parse_checked(text: &str) -> Value {
    serde_json::from_str(text).expect("the text of Arguments was checked to parse")
}

impl From<Value> for Arguments {
    fn from(value: Value) -> Self {
        Arguments(Held::Tree(value))
    }
}

impl PartialEq for Arguments {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Held::Tree(a), Held::Tree(b)) => a == b,
            (Held::Text(a), Held::Text(b)) if a == b => true,
            _ => self.to_value() == other.to_value(),
        }
    }
}

impl PartialEq<Value> for Arguments {
    fn eq(&self, other: &Value) -> bool {
        match &self.0 {
            Held::Tree(value) => value == other,
            Held::Text(text) => parse_checked(text) == *other,
        }
    }
}

impl std::fmt::Debug for Arguments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Held::Tree(value) => f.debug_tuple("Tree").field(value).finish(),
            Held::Text(text) => f.debug_tuple("Text").field(text).finish(),
        }
    }
}

/// The arguments as compact JSON, the same whichever way they are held.
impl std::fmt::Display for Arguments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Held::Tree(value) => value.fmt(f),
            Held::Text(text) => parse_checked(text).fmt(f),
        }
    }
}

/// The kind of one JSON value, read as [`Value`] reads it (numbers in range, strings with valid
/// escapes, at most serde_json's nesting) with nothing kept.
enum Shape {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl Shape {
    /// The kind with its article, as [`json_kind`] names it.
    fn kind(&self) -> &'static str {
        match self {
            Shape::Null => "null",
            Shape::Bool => "a boolean",
            Shape::Number => "a number",
            Shape::String => "a string",
            Shape::Array => "an array",
            Shape::Object => "an object",
        }
    }
}

impl<'de> serde::Deserialize<'de> for Shape {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ShapeVisitor)
    }
}

struct ShapeVisitor;

impl<'de> serde::de::Visitor<'de> for ShapeVisitor {
    type Value = Shape;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
        Ok(Shape::Bool)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
        Ok(Shape::Number)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
        Ok(Shape::Number)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
        Ok(Shape::Number)
    }

    fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
        Ok(Shape::String)
    }

    fn visit_unit<E>(self) -> Result<Shape, E> {
        Ok(Shape::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
        while seq.next_element::<Shape>()?.is_some() {}
        Ok(Shape::Array)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
        while map.next_key::<Shape>()?.is_some() {
            map.next_value::<Shape>()?;
        }
        Ok(Shape::Object)
    }
}

/// What kind of JSON value `value` is, with its article, for error messages ("an array").
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => Shape::Null,
        Value::Bool(_) => Shape::Bool,
        Value::Number(_) => Shape::Number,
        Value::String(_) => Shape::String,
        Value::Array(_) => Shape::Array,
        Value::Object(_) => Shape::Object,
    }
    .kind()
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
        assert_eq!(
            call.arguments,
            Ok(Arguments::from(serde_json::json!({"a": 1})))
        );
        let long = "x".repeat(500);
        assert!(excerpt(&long).ends_with('…'));
    }
}
