//! JSON output: one document, pretty-printed.

use serde_json::Value;

/// How a command that reads prints what it read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Output {
    /// `--json`: one JSON document instead of a table.
    pub(crate) json: bool,
    /// `--show-hashes`: the request hash (and an approval's policy hash) too, which are left
    /// out otherwise.
    pub(crate) hashes: bool,
}

/// `text`, stored JSON text (arguments, a result), as a JSON value; text that is not JSON stays
/// a string, so nothing stored is hidden.
pub(crate) fn stored(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// `value` as the command's output: pretty JSON and a newline.
pub(crate) fn document(value: &Value) -> String {
    let mut out = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_json_is_embedded_and_other_text_is_kept() {
        assert_eq!(stored(r#"{"a":1}"#), serde_json::json!({"a": 1}));
        assert_eq!(stored("not json"), Value::String("not json".into()));
    }
}
