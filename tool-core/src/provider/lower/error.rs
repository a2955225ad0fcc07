//! What kept a schema from lowering: the dialect, the kind of problem, where and what to change.

use std::fmt;

/// The dialect a lowering targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LoweringTarget {
    /// OpenAI Structured Outputs (`"strict": true`), Chat Completions and Responses.
    OpenAiStrict,
    /// Anthropic strict tool use (`"strict": true` on a tool of the Messages API).
    AnthropicStrict,
    /// Gemini function declarations (`parameters`, an OpenAPI 3.0 subset).
    Gemini,
}

impl fmt::Display for LoweringTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LoweringTarget::OpenAiStrict => "OpenAI strict mode",
            LoweringTarget::AnthropicStrict => "Anthropic strict tool use",
            LoweringTarget::Gemini => "Gemini parameters",
        })
    }
}

/// What kept a schema from lowering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LoweringErrorKind {
    /// The root is not an object schema (an enum, a scalar, a nullable object).
    RootNotObject,
    /// An optional property whose schema rejects `null`, which OpenAI strict mode makes the
    /// model send for an absent value.
    OptionalNotNullable,
    /// A keyword the target lacks that cannot be dropped without changing the arguments' shape.
    UnsupportedKeyword,
    /// An object with arbitrary keys: a map.
    OpenObject,
    /// A schema that accepts any JSON value (`serde_json::Value`) or none.
    Unconstrained,
    /// A type the target cannot express (several types at once, `null` alone, a non-string enum
    /// for Gemini, an enum of objects or arrays for Anthropic).
    UnsupportedType,
    /// A `$ref` that does not point into the schema itself.
    UnresolvedRef,
    /// A recursive type, where the target needs every reference inlined (Gemini) or takes no
    /// recursion at all (Anthropic).
    Recursive,
    /// The schema exceeds one of the target's size limits (for Anthropic, also one of the
    /// limits of a request that the tools registered before it leave no room in).
    TooLarge,
}

/// A canonical schema that cannot be lowered to a provider's dialect.
///
/// ```
/// use serde_json::json;
/// use toolgate::provider::{LoweringErrorKind, openai_strict};
///
/// // `#[serde(default)] verbose: bool`: optional, but `null` is not a boolean.
/// let schema = json!({
///     "type": "object",
///     "properties": {"verbose": {"type": "boolean", "default": false}},
///     "additionalProperties": false
/// });
/// let err = openai_strict(&schema).unwrap_err();
/// assert_eq!(err.kind, LoweringErrorKind::OptionalNotNullable);
/// assert_eq!(err.pointer, "/properties/verbose");
/// assert!(err.fix.contains("Option<T>"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot lower the schema at #{pointer} to {target}: {problem}; {fix}")]
#[non_exhaustive]
pub struct LoweringError {
    /// The dialect.
    pub target: LoweringTarget,
    /// What kind of problem it is.
    pub kind: LoweringErrorKind,
    /// The JSON pointer of the offending schema inside the canonical schema (`""` is the root).
    pub pointer: String,
    /// What is wrong.
    pub problem: String,
    /// What to change.
    pub fix: String,
}

impl LoweringError {
    pub(super) fn new(
        target: LoweringTarget,
        kind: LoweringErrorKind,
        pointer: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        LoweringError {
            target,
            kind,
            pointer: pointer.to_owned(),
            problem: problem.into(),
            fix: fix.into(),
        }
    }

    /// The root is not an object schema.
    pub(super) fn root_not_object(target: LoweringTarget) -> Self {
        LoweringError::new(
            target,
            LoweringErrorKind::RootNotObject,
            "",
            "the root must be an object schema",
            "take the arguments as named parameters or one struct, not an enum, a scalar or an Option",
        )
    }
}
