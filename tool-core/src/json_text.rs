//! JSON text a tool produced: serialized once, stored and sent as it is.

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// JSON text written by `serde_json`: a tool's output, kept as text so it is serialized once and
/// copied, never re-encoded, on its way to the model (and, with a store, into the database).
///
/// ```
/// use toolgate::JsonText;
///
/// let text = JsonText::of(&serde_json::json!({"refund_id": "re_1"})).unwrap();
/// assert_eq!(text.as_str(), r#"{"refund_id":"re_1"}"#);
/// assert_eq!(text.to_value()["refund_id"], "re_1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JsonText(String);

impl JsonText {
    /// `value` serialized.
    pub fn of<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Self> {
        serde_json::to_string(value).map(JsonText)
    }

    /// Checks that `text` is one JSON value and keeps it as written.
    pub fn parse(text: impl Into<String>) -> serde_json::Result<Self> {
        let text = text.into();
        serde_json::from_str::<&RawValue>(&text)?;
        Ok(JsonText(text))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text parsed into a JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.0).expect("JsonText always holds one JSON value")
    }

    /// How many bytes of text.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the text is empty (never, for a JSON value).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for JsonText {
    /// Writes the text as it is, as a nested JSON value.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw: &RawValue = serde_json::from_str(&self.0).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl std::fmt::Display for JsonText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
