//! JSON output: one document, pretty-printed.

use clap::Args;
use serde_json::Value;

/// How a command that reads prints what it read: `--json` and `--show-hashes`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Args)]
pub(crate) struct Output {
    /// Print one JSON document instead of a table
    #[arg(long)]
    pub(crate) json: bool,
    /// Also print the stored request hash (and an approval's policy hash), left out otherwise
    #[arg(long = "show-hashes")]
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
