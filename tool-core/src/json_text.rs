//! JSON text a tool produced: serialized once, stored and sent as it is.

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// JSON text written by `serde_json`: a tool's output, kept as text so it is serialized once and
/// copied, never re-encoded, on its way to the model (and, with a store, into the database).
///
/// ```
/// use toolgate::tool::JsonText;
///
/// let text = JsonText::of(&serde_json::json!({"refund_id": "re_1"})).unwrap();
/// assert_eq!(text.as_str(), r#"{"refund_id":"re_1"}"#);
/// assert_eq!(text.to_value()["refund_id"], "re_1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JsonText(String);

impl JsonText {
    /// The most arrays and objects a value [`of`](Self::of) writes may nest, the outermost
    /// included.
    pub const MAX_DEPTH: usize = 120;

    /// `value` serialized.
    ///
    /// # Errors
    ///
    /// What `serde_json` cannot serialize (a map whose keys are not strings, a `Serialize`
    /// implementation that fails), and a value that nests more than [`MAX_DEPTH`](Self::MAX_DEPTH) arrays and
    /// objects: the text is sent inside a provider's envelope (at most 6 levels deep, Gemini's)
    /// and read back by clients whose JSON readers stop at 128 levels, as `serde_json`'s does.
    ///
    /// ```
    /// use serde_json::json;
    /// use toolgate::tool::JsonText;
    ///
    /// let nested = |depth| (0..depth).fold(json!(1), |inner, _| json!([inner]));
    /// assert!(JsonText::of(&nested(JsonText::MAX_DEPTH)).is_ok());
    /// assert!(JsonText::of(&nested(JsonText::MAX_DEPTH + 1)).is_err());
    /// ```
    pub fn of<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Self> {
        // Room for a small value from the start, rather than growing there by doubling.
        let mut text = Vec::with_capacity(128);
        let mut serializer = serde_json::Serializer::with_formatter(&mut text, Bounded::default());
        value.serialize(&mut serializer)?;
        let text = String::from_utf8(text).expect("serde_json writes UTF-8");
        Ok(JsonText(text))
    }

    /// Checks that `text` is one JSON value and keeps it as written.
    pub fn parse(text: impl Into<String>) -> serde_json::Result<Self> {
        let text = text.into();
        serde_json::from_str::<&RawValue>(&text)?;
        Ok(JsonText(text))
    }

    /// Text this crate wrote as one JSON value (a format's rendered answer), taken as it is.
    pub(crate) fn written(text: String) -> Self {
        JsonText(text)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text, owned.
    pub fn into_string(self) -> String {
        self.0
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

/// `serde_json`'s compact form, refusing a value nested deeper than [`JsonText::MAX_DEPTH`].
#[derive(Default)]
struct Bounded {
    open: usize,
}

impl Bounded {
    fn open<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        bracket: u8,
    ) -> std::io::Result<()> {
        if self.open == JsonText::MAX_DEPTH {
            return Err(std::io::Error::other(format!(
                "the value nests more than {} arrays and objects, more than is sent to a model",
                JsonText::MAX_DEPTH
            )));
        }
        self.open += 1;
        writer.write_all(&[bracket])
    }

    fn close<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        bracket: u8,
    ) -> std::io::Result<()> {
        self.open -= 1;
        writer.write_all(&[bracket])
    }
}

impl serde_json::ser::Formatter for Bounded {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.open(writer, b'[')
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.close(writer, b']')
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.open(writer, b'{')
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.close(writer, b'}')
    }
}

/// How `serde_json` escapes each byte inside a JSON string: `0` for not at all, `u` for
/// `\u00XX` (lower-case hex), and otherwise the letter after the backslash.
static ESCAPE: [u8; 256] = {
    let mut table = [0; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// Appends `text` to `out` as the inside of a JSON string, escaped byte for byte as
/// `serde_json` escapes it.
pub(crate) fn escape_into(out: &mut String, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut rest = text;
    // Each round copies the run of bytes that need no escape, then escapes the one after it.
    while let Some(at) = rest.bytes().position(|byte| ESCAPE[usize::from(byte)] != 0) {
        // The byte at `at` is ASCII, so the run ends on a character boundary.
        let (run, tail) = rest.split_at(at);
        out.push_str(run);
        let byte = tail.as_bytes()[0];
        match ESCAPE[usize::from(byte)] {
            b'u' => {
                let hex = [HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]];
                out.push_str("\\u00");
                out.extend(hex.map(char::from));
            }
            letter => {
                out.push('\\');
                out.push(char::from(letter));
            }
        }
        rest = &tail[1..];
    }
    out.push_str(rest);
}

impl std::fmt::Display for JsonText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `depth` arrays, one inside the other, around a number.
    fn nested(depth: usize) -> Value {
        (0..depth).fold(Value::from(1), |inner, _| Value::Array(vec![inner]))
    }

    #[test]
    fn a_value_is_written_when_it_nests_no_deeper_than_the_limit() {
        let max = JsonText::MAX_DEPTH;
        for depth in [0, 1, max - 1, max, max + 1, 127, 128, 1_000] {
            let written = JsonText::of(&nested(depth));
            assert_eq!(written.is_ok(), depth <= max, "depth {depth}");
            if let Ok(written) = written {
                assert_eq!(
                    written.as_str(),
                    serde_json::to_string(&nested(depth)).unwrap()
                );
                assert_eq!(written.to_value(), nested(depth));
                // Inside the deepest envelope and a result object, serde_json reads it back.
                let sent = (0..7).fold(written.as_str().to_owned(), |text, _| format!("[{text}]"));
                serde_json::from_str::<Value>(&sent).expect("read back inside its envelope");
            }
        }
        let err = JsonText::of(&nested(max + 1)).unwrap_err();
        assert!(err.to_string().contains("more than 120"), "{err}");
    }

    #[test]
    fn objects_count_as_arrays_do_and_closing_frees_a_level() {
        let max = JsonText::MAX_DEPTH;
        let deep_object =
            (0..max).fold(Value::from(1), |inner, _| serde_json::json!({ "a": inner }));
        assert!(JsonText::of(&deep_object).is_ok());
        // Siblings at the limit, each closed before the next opens.
        let siblings = Value::Array(vec![nested(max - 1), nested(max - 1)]);
        assert!(JsonText::of(&siblings).is_ok());
        assert!(JsonText::of(&serde_json::json!({ "b": deep_object })).is_err());
    }

    #[test]
    fn escaping_matches_serde_json_on_every_ascii_byte_and_beyond() {
        let mut all: String = (0u8..=0x7f).map(char::from).collect();
        all.push_str("é€😀\u{2028}\u{2029}\"\\ end");
        for text in [all.as_str(), "", "plain", "\"", "a\u{0}b", "\\\\"] {
            let mut ours = String::new();
            escape_into(&mut ours, text);
            let theirs = serde_json::to_string(text).unwrap();
            assert_eq!(format!("\"{ours}\""), theirs, "{text:?}");
        }
    }
}
