//! Validation of a call's arguments against the canonical schema, compiled once per tool.

use serde_json::Value;

use crate::error::ToolError;

/// At most this many violations are listed back to the model; the count says how many more.
const MAX_LISTED: usize = 20;

/// One way the arguments break the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where, as a JSON pointer into the arguments (`""` is the whole object).
    pub pointer: String,
    /// What is wrong there.
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
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

    /// Every violation of the schema, in the order the validator finds them.
    pub fn violations(&self, args: &Value) -> Vec<Violation> {
        self.validator
            .iter_errors(args)
            .map(|err| Violation {
                pointer: err.instance_path().to_string(),
                message: err.to_string(),
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

/// The error the model sees for `violations` of `tool`'s schema.
pub(crate) fn invalid_arguments(tool: &str, violations: &[Violation]) -> ToolError {
    let mut why = violations
        .iter()
        .take(MAX_LISTED)
        .map(Violation::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    if violations.len() > MAX_LISTED {
        why.push_str(&format!("; and {} more", violations.len() - MAX_LISTED));
    }
    let what = match violations.len() {
        1 => format!("the arguments of {tool} break its schema in 1 place"),
        n => format!("the arguments of {tool} break its schema in {n} places"),
    };
    ToolError::invalid_arguments(what).why(why).next(format!(
        "call {tool} again with arguments that match its schema"
    ))
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
            err.reason()
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
}
