//! Text shown back to the model or the user, bounded: a string cut after so many characters, and
//! the JSON text of a value written no further than it is shown, however large the value.

use std::borrow::Cow;
use std::io::Write;

use serde_json::Value;

/// The first `limit` characters of `text`, when it has more than that.
pub(crate) fn cut(text: &str, limit: usize) -> Option<&str> {
    text.char_indices().nth(limit).map(|(at, _)| &text[..at])
}

/// The first 200 characters of `text`, quoted, for error messages.
pub(crate) fn excerpt(text: &str) -> String {
    match cut(text, 200) {
        Some(head) => format!("{head:?}…"),
        None => format!("{text:?}"),
    }
}

/// `text`, cut after `limit` characters with `…`.
pub(crate) fn shortened(text: &str, limit: usize) -> Cow<'_, str> {
    match cut(text, limit) {
        Some(head) => format!("{head}…").into(),
        None => text.into(),
    }
}

/// The JSON text of `value`, cut after `limit` characters with `…`; the value is serialized no
/// further than that.
pub(crate) fn json_prefix(value: &Value, limit: usize) -> String {
    /// Takes bytes until it holds enough, then refuses the rest.
    struct Prefix {
        bytes: Vec<u8>,
        room: usize,
    }
    impl Write for Prefix {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let room = self.room - self.bytes.len();
            if room == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            let taken = bytes.len().min(room);
            self.bytes.extend_from_slice(&bytes[..taken]);
            Ok(taken)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    // A character is at most 4 bytes: this many always holds the characters shown.
    let mut prefix = Prefix {
        bytes: Vec::new(),
        room: limit.saturating_add(1).saturating_mul(4),
    };
    // Fails only when the prefix is full, which is what it is for.
    let full = serde_json::to_writer(&mut prefix, value).is_err();
    let text = match std::str::from_utf8(&prefix.bytes) {
        Ok(text) => text,
        // Cut inside a character: keep the characters before it.
        Err(err) => std::str::from_utf8(&prefix.bytes[..err.valid_up_to()]).unwrap_or_default(),
    };
    match cut(text, limit) {
        Some(head) => format!("{head}…"),
        None if full => format!("{text}…"),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_is_cut_after_its_limit_in_characters() {
        assert_eq!(cut("héllo", 5), None);
        assert_eq!(cut("héllo", 2), Some("hé"));
        assert_eq!(shortened("héllo", 2), "hé…");
        assert_eq!(shortened("hé", 2), "hé");
    }

    #[test]
    fn a_json_prefix_is_the_start_of_the_json_text() {
        let small = json!({"a": [1, "é"]});
        assert_eq!(json_prefix(&small, 200), small.to_string());
        let large = json!("é".repeat(10_000));
        let prefix = json_prefix(&large, 200);
        let head: String = large.to_string().chars().take(200).collect();
        assert_eq!(prefix, format!("{head}…"));
        assert_eq!(prefix.chars().count(), 201);
    }
}
