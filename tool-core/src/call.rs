//! One call the model emitted, as every provider format parses into, and its report.

use serde_json::Value;

pub use crate::json_shape::MalformedCall;
use crate::json_shape::{Shape, shape_of};
use crate::quote::excerpt;
use crate::result::CallResult;

/// One tool call of a model turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The provider's call id; the result is matched to the call by it. A format whose call had
    /// no id gets a generated one (`missing_id_N`), which no other call of its turn has, and the
    /// call a [`MalformedCall`].
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
/// schema accepts (`#[tool]` generates that reading for such tools); the dispatcher builds
/// the tree, and validates it, only for the other tools and for text serde refuses.
///
/// Two `Arguments` are equal when they hold the same JSON value, whichever way each is held.
///
/// ```
/// use serde_json::json;
/// use toolgate::dispatch::Arguments;
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
    /// Text nothing has checked yet: made only by the formats' reading for
    /// [`Dispatcher::answer_turn`](crate::Dispatcher::answer_turn), and settled by the dispatcher
    /// before anything else looks at it (see [`Arguments::settle`]).
    Unread(String),
}

impl Arguments {
    /// Arguments sent as JSON text. Text that `serde_json` would not parse into a [`Value`]
    /// (not JSON, or JSON holding a value a [`Value`] cannot: nesting deeper than serde_json's
    /// limit, a number beyond `f64`, a lone surrogate escape), text with an object that gives a
    /// key more than once (at any depth: JSON leaves its meaning undefined, and a [`Value`] would
    /// keep the last one silently), or text holding anything but one JSON object, is a
    /// [`MalformedCall`] saying which. The check reads the text the way a [`Value`] is parsed,
    /// but builds nothing.
    ///
    /// ```
    /// use toolgate::dispatch::Arguments;
    ///
    /// let err = Arguments::from_text(r#"{"amount": 5, "amount": 5000}"#).unwrap_err();
    /// assert_eq!(err.what, r#"the arguments give the key "amount" more than once"#);
    /// assert!(err.why.starts_with("/amount appears twice"));
    /// ```
    pub fn from_text(text: impl Into<String>) -> Result<Self, MalformedCall> {
        let text = text.into();
        match shape_of(&text)? {
            Shape::Object => Ok(Arguments(Held::Text(text))),
            shape => Err(MalformedCall {
                what: "the arguments are not a JSON object".into(),
                why: format!("they are {} in {}", shape.kind(), excerpt(&text)),
            }),
        }
    }

    /// Text that [`shape_of`] found to hold one JSON object.
    pub(crate) fn checked_object(text: String) -> Self {
        Arguments(Held::Text(text))
    }

    /// Text to be read by the tool it is for, which checks it as it reads
    /// ([`TextArgs::read_args`](crate::text_args::TextArgs::read_args)), or checked as
    /// [`Arguments::from_text`] checks: for the dispatcher alone.
    pub(crate) fn unread(text: String) -> Self {
        Arguments(Held::Unread(text))
    }

    /// The text nothing has checked yet, if these arguments are that.
    pub(crate) fn as_unread(&self) -> Option<&str> {
        match &self.0 {
            Held::Unread(text) => Some(text),
            _ => None,
        }
    }

    /// Text nothing had checked, which a tool's reader took as one JSON object
    /// ([`TextArgs::read_args`](crate::text_args::TextArgs::read_args)): checked, without a copy.
    pub(crate) fn read_as_object(self) -> Self {
        match self.0 {
            Held::Unread(text) => Arguments(Held::Text(text)),
            held => Arguments(held),
        }
    }

    /// The arguments checked: text nothing has checked yet is checked now, as
    /// [`Arguments::from_text`] checks it, with the same error.
    pub(crate) fn settle(self) -> Result<Self, MalformedCall> {
        match self.0 {
            Held::Unread(text) => Arguments::from_text(text),
            held => Ok(Arguments(held)),
        }
    }

    /// The text the arguments arrived as, if they arrived as text.
    pub fn as_text(&self) -> Option<&str> {
        match &self.0 {
            Held::Text(text) | Held::Unread(text) => Some(text),
            Held::Tree(_) => None,
        }
    }

    /// The arguments as a JSON value.
    pub fn to_value(&self) -> Value {
        match &self.0 {
            Held::Tree(value) => value.clone(),
            Held::Text(text) | Held::Unread(text) => parse_checked(text),
        }
    }

    /// The arguments as a JSON value, without a copy when they are one already.
    pub fn into_value(self) -> Value {
        match self.0 {
            Held::Tree(value) => value,
            Held::Text(text) | Held::Unread(text) => parse_checked(&text),
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
            (Held::Text(a), Held::Text(b)) | (Held::Unread(a), Held::Unread(b)) if a == b => true,
            _ => self.to_value() == other.to_value(),
        }
    }
}

impl PartialEq<Value> for Arguments {
    fn eq(&self, other: &Value) -> bool {
        match &self.0 {
            Held::Tree(value) => value == other,
            Held::Text(text) | Held::Unread(text) => parse_checked(text) == *other,
        }
    }
}

impl std::fmt::Debug for Arguments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Held::Tree(value) => f.debug_tuple("Tree").field(value).finish(),
            Held::Text(text) => f.debug_tuple("Text").field(text).finish(),
            Held::Unread(text) => f.debug_tuple("Unread").field(text).finish(),
        }
    }
}

/// The arguments as compact JSON, the same whichever way they are held.
impl std::fmt::Display for Arguments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Held::Tree(value) => value.fmt(f),
            Held::Text(text) | Held::Unread(text) => parse_checked(text).fmt(f),
        }
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
    use crate::quote::excerpt;

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
