//! Validation of a call's arguments against the canonical schema, compiled once per tool.
//!
//! What goes back to the model is bounded, whatever the model sent: a violation quotes at most
//! [`MAX_QUOTED`] characters of the value at fault, names at most [`MAX_POINTER`] characters of
//! its pointer and says at most [`MAX_MESSAGE`] characters in all; the error lists at most
//! [`MAX_LISTED`] violations and at most [`MAX_WHY`] bytes of them, then says how many more there
//! are. A 10 MB string given for a number is answered in a few hundred bytes.

use serde_json::Value;

use crate::error::ToolError;
use crate::quote::{json_prefix, shortened};

/// At most this many violations are listed back to the model; the count says how many more.
const MAX_LISTED: usize = 20;
/// At most this many characters of the value at fault are quoted in a violation's message.
const MAX_QUOTED: usize = 80;
/// At most this many characters of a violation's message.
const MAX_MESSAGE: usize = 300;
/// At most this many characters of a violation's pointer are shown.
const MAX_POINTER: usize = 200;
/// At most this many bytes of listed violations in the error's `why`.
const MAX_WHY: usize = 2048;

/// One way the arguments break the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where, as a JSON pointer into the arguments (`""` is the whole object).
    pub pointer: String,
    /// What is wrong there.
    pub message: String,
}

impl std::fmt::Display for Violation {
    /// `pointer: message`, the pointer shortened with `…` past 200 characters.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.pointer.is_empty() {
            "/".into()
        } else {
            shortened(&self.pointer, MAX_POINTER)
        };
        write!(f, "{at}: {}", self.message)
    }
}

/// A compiled validator for one tool's arguments.
#[derive(Debug)]
pub struct ArgsValidator {
    validator: jsonschema::Validator,
}

/// The schema itself is not valid JSON Schema 2020-12.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the schema does not compile: {0}")]
pub struct SchemaError(String);

impl ArgsValidator {
    /// Compiles `schema` (JSON Schema 2020-12). Formats are annotations, as the draft says.
    pub fn new(schema: &Value) -> Result<Self, SchemaError> {
        jsonschema::draft202012::options()
            .build(schema)
            .map(|validator| ArgsValidator { validator })
            .map_err(|err| SchemaError(err.to_string()))
    }

    /// Every violation of the schema, in the order the validator finds them. A message quotes
    /// the value at fault up to 80 characters and is itself bounded; the pointer is
    /// exact.
    pub fn violations(&self, args: &Value) -> Vec<Violation> {
        self.validator
            .iter_errors(args)
            .map(|err| {
                let quoted = quoted(err.instance());
                Violation {
                    pointer: err.instance_path().to_string(),
                    message: shortened(&err.masked_with(quoted).to_string(), MAX_MESSAGE)
                        .into_owned(),
                }
            })
            .collect()
    }

    /// Every violation, or none without building any when `args` conforms (the fast path).
    pub fn violations_if_invalid(&self, args: &Value) -> Vec<Violation> {
        if self.validator.is_valid(args) {
            Vec::new()
        } else {
            self.violations(args)
        }
    }

    /// `Ok` when `args` conforms; otherwise an `invalid_arguments` error listing each violation
    /// with its JSON pointer.
    pub fn validate(&self, tool: &str, args: &Value) -> Result<(), ToolError> {
        if self.validator.is_valid(args) {
            return Ok(());
        }
        Err(invalid_arguments(tool, &self.violations(args)))
    }
}

/// The error the model sees for `violations` of `tool`'s schema: the first of them, as many as
/// fit in [`MAX_LISTED`] and [`MAX_WHY`], then how many more there are.
pub(crate) fn invalid_arguments(tool: &str, violations: &[Violation]) -> ToolError {
    let mut why = String::new();
    let mut listed = 0;
    for violation in violations.iter().take(MAX_LISTED) {
        let line = violation.to_string();
        if listed > 0 && why.len() + 2 + line.len() > MAX_WHY {
            break;
        }
        if listed > 0 {
            why.push_str("; ");
        }
        why.push_str(&line);
        listed += 1;
    }
    if violations.len() > listed {
        why.push_str(&format!("; and {} more", violations.len() - listed));
    }
    let what = match violations.len() {
        1 => format!("the arguments of {tool} break its schema in 1 place"),
        n => format!("the arguments of {tool} break its schema in {n} places"),
    };
    ToolError::invalid_arguments(what)
        .with_why(why)
        .with_next(format!(
            "fix the arguments: call {tool} again with arguments that match its schema"
        ))
}

/// The JSON text of `value`, cut after [`MAX_QUOTED`] characters with `…`; never written out
/// further than that, however large the value.
fn quoted(value: &Value) -> String {
    json_prefix(value, MAX_QUOTED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_violation_is_listed_with_its_pointer() {
        let validator = ArgsValidator::new(&json!({
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "amount": {"type": "number", "exclusiveMinimum": 0}},
            "required": ["order_id", "amount"],
            "additionalProperties": false
        }))
        .unwrap();
        let violations = validator.violations(&json!({"amount": -5, "note": "x"}));
        let pointers: Vec<_> = violations.iter().map(|v| v.pointer.as_str()).collect();
        assert!(pointers.contains(&"/amount"), "{violations:?}");
        assert!(pointers.contains(&""), "{violations:?}");
        assert_eq!(violations.len(), 3, "{violations:?}");

        let err = validator
            .validate("issue_refund", &json!({"amount": -5}))
            .unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArguments);
        assert!(
            err.why()
                .unwrap()
                .contains("/amount: -5 is less than or equal to the minimum of 0"),
            "{err:?}"
        );
        assert!(
            validator
                .validate("t", &json!({"order_id": "A", "amount": 1}))
                .is_ok()
        );
    }

    fn refund_validator() -> ArgsValidator {
        ArgsValidator::new(&json!({
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "maxLength": 14},
                "amount": {"type": "number"},
                "lines": {"type": "array", "items": {"type": "number"}}
            },
            "additionalProperties": false
        }))
        .unwrap()
    }

    #[test]
    fn a_huge_value_is_quoted_in_an_excerpt() {
        let validator = refund_validator();
        let huge = "9".repeat(10 * 1024 * 1024);
        let violations = validator.violations(&json!({"amount": huge}));
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(violations[0].pointer, "/amount");
        let message = &violations[0].message;
        assert!(message.len() < MAX_MESSAGE + 10, "{} bytes", message.len());
        assert!(
            message.starts_with(&format!("\"{}…", "9".repeat(MAX_QUOTED - 1))),
            "{message}"
        );
        assert!(message.ends_with("is not of type \"number\""), "{message}");

        let err = validator
            .validate("issue_refund", &json!({"order_id": "é".repeat(5_000_000)}))
            .unwrap_err();
        let why = err.why().unwrap();
        assert!(why.starts_with("/order_id: \"éé"), "{why}");
        assert!(why.contains("…"), "{why}");
        assert!(why.len() < 1024, "{} bytes", why.len());
    }

    #[test]
    fn a_short_value_is_quoted_whole() {
        let violations = refund_validator().violations(&json!({"amount": "12"}));
        assert_eq!(violations[0].message, "\"12\" is not of type \"number\"");
        // With its quotes, exactly the limit: not cut.
        let fits = json!("x".repeat(MAX_QUOTED - 2));
        assert_eq!(quoted(&fits), fits.to_string());
    }

    #[test]
    fn the_listed_violations_are_bounded_in_number_and_in_size() {
        let validator = refund_validator();
        let many: Vec<Value> = (0..100).map(|i| json!(format!("n{i}"))).collect();
        let err = validator
            .validate("issue_refund", &json!({"lines": many}))
            .unwrap_err();
        let why = err.why().unwrap();
        assert_eq!(why.matches("is not of type").count(), MAX_LISTED, "{why}");
        assert!(why.ends_with("; and 80 more"), "{why}");
        assert_eq!(
            err.what(),
            "the arguments of issue_refund break its schema in 100 places"
        );

        // Twenty long messages do not fit in the bound: fewer are listed, the rest counted.
        let long: Vec<Value> = (0..30)
            .map(|i| json!(format!("{i}{}", "x".repeat(500))))
            .collect();
        let err = validator
            .validate("issue_refund", &json!({"lines": long}))
            .unwrap_err();
        let why = err.why().unwrap();
        let listed = why.matches("is not of type").count();
        assert!((1..MAX_LISTED).contains(&listed), "{listed}: {why}");
        assert!(
            why.ends_with(&format!("; and {} more", 30 - listed)),
            "{why}"
        );
        assert!(why.len() <= MAX_WHY + 20, "{} bytes", why.len());
    }

    #[test]
    fn a_huge_key_is_shortened_in_the_error_and_exact_in_the_violation() {
        let validator = ArgsValidator::new(&json!({
            "type": "object",
            "additionalProperties": {"type": "number"}
        }))
        .unwrap();
        let key = "k".repeat(1_000_000);
        let args = json!({ key.clone(): "x" });
        let violations = validator.violations(&args);
        assert_eq!(violations[0].pointer, format!("/{key}"), "exact, for code");
        let err = validator.validate("t", &args).unwrap_err();
        let why = err.why().unwrap();
        assert!(why.starts_with("/kkk"), "{why}");
        assert!(why.len() < 1024, "{} bytes", why.len());
    }
}
