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
/// `serde_json` escapes it. Only ASCII bytes are escaped, so what is written is UTF-8 where
/// `text` is.
///
/// Eight bytes at a time: each step writes eight, then cuts back to the bytes before the first
/// that needs an escape, and escapes it. A tool's JSON has a quote every few bytes, and one
/// store of eight bytes costs less than pushing the few one by one or copying them with a call.
pub(crate) fn escape_into(out: &mut Vec<u8>, text: &str) {
    out.reserve(text.len() + 2);
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        let (chunk, len) = match rest.first_chunk::<8>() {
            Some(chunk) => (*chunk, 8),
            None => {
                // The last few bytes, padded with spaces, which need no escape.
                let mut chunk = [b' '; 8];
                chunk[..rest.len()].copy_from_slice(rest);
                (chunk, rest.len())
            }
        };
        let first = first_to_escape(u64::from_le_bytes(chunk)).min(len);
        let kept = out.len() + first;
        out.extend_from_slice(&chunk);
        out.truncate(kept);
        if first < len {
            push_escaped(out, rest[first]);
            rest = &rest[first + 1..];
        } else {
            rest = &rest[len..];
        }
    }
}

/// The place of the first of the eight bytes of `word` (little-endian) that needs an escape (a
/// control character, `"` or `\`); 8 when none does. Each test flags a byte with its high bit:
/// a borrow can flag bytes above a flagged one, never below it, so the lowest flag is exact.
fn first_to_escape(word: u64) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let below = |n: u64, x: u64| x.wrapping_sub(ONES * n) & !x & HIGHS;
    let control = below(0x20, word);
    let quote = below(1, word ^ (ONES * u64::from(b'"')));
    let backslash = below(1, word ^ (ONES * u64::from(b'\\')));
    let flags = control | quote | backslash;
    usize::try_from(flags.trailing_zeros() / 8).expect("at most 8")
}

/// Appends the escape of `byte`, one that needs it.
fn push_escaped(out: &mut Vec<u8>, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match ESCAPE[usize::from(byte)] {
        b'u' => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(byte >> 4)],
            HEX[usize::from(byte & 0xf)],
        ]),
        letter => out.extend_from_slice(&[b'\\', letter]),
    }
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
            let mut ours = Vec::new();
            escape_into(&mut ours, text);
            let ours = String::from_utf8(ours).expect("escaping keeps UTF-8");
            let theirs = serde_json::to_string(text).unwrap();
            assert_eq!(format!("\"{ours}\""), theirs, "{text:?}");
        }
    }

    #[test]
    fn escaping_matches_serde_json_wherever_a_byte_falls_in_the_eight() {
        // Every mix of a clean byte, each kind of escape and a character of each UTF-8 length,
        // at every offset of the eight-byte steps, before and after the last whole step.
        let pieces = [
            "a", "\"", "\\", "\n", "\u{1}", "\u{1f}", " ", "é", "€", "😀", "\u{7f}",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..4_000 {
            let mut text = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut draw = seed;
            for _ in 0..(draw % 29) {
                draw = draw.rotate_right(5) ^ 0x9e37_79b9_7f4a_7c15;
                text.push_str(pieces[(draw % pieces.len() as u64) as usize]);
            }
            let mut ours = Vec::new();
            escape_into(&mut ours, &text);
            let ours = String::from_utf8(ours).expect("escaping keeps UTF-8");
            let theirs = serde_json::to_string(&text).unwrap();
            assert_eq!(format!("\"{ours}\""), theirs, "{text:?}");
        }
    }
}
