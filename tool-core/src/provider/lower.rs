//! Lowering of the canonical schema (JSON Schema 2020-12, as schemars writes it) into the two
//! dialects that cannot take it as it is: OpenAI strict mode ([`openai_strict`]) and Gemini's
//! OpenAPI 3.0 subset ([`gemini`]).
//!
//! Lowering keeps what the arguments mean. A keyword the target lacks is dropped only when that is
//! safe: an annotation, or a bound the validator still enforces on the canonical schema, so the
//! worst case is an argument the validator rejects with a message the model can act on. A keyword
//! whose loss would tell the model a different shape (an intersection, a map, a tuple, a
//! condition) is a [`LoweringError`] that names the schema and what to change in the Rust type.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde_json::{Map, Value};

/// The dialect a lowering targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LoweringTarget {
    /// OpenAI Structured Outputs (`"strict": true`), Chat Completions and Responses.
    OpenAiStrict,
    /// Gemini function declarations (`parameters`, an OpenAPI 3.0 subset).
    Gemini,
}

impl fmt::Display for LoweringTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LoweringTarget::OpenAiStrict => "OpenAI strict mode",
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
    /// An optional property whose schema rejects `null`, which strict mode makes the model send
    /// for an absent value.
    OptionalNotNullable,
    /// A keyword the target lacks that cannot be dropped without changing the arguments' shape.
    UnsupportedKeyword,
    /// An object with arbitrary keys: a map.
    OpenObject,
    /// A schema that accepts any JSON value (`serde_json::Value`) or none.
    Unconstrained,
    /// A type the target cannot express (several types at once, `null` alone, a non-string enum).
    UnsupportedType,
    /// A `$ref` that does not point into the schema itself.
    UnresolvedRef,
    /// A recursive type where the target needs every reference inlined.
    Recursive,
    /// The schema exceeds one of the target's size limits.
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
    fn new(
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
}

/// The `format` values strict mode supports.
const STRICT_FORMATS: [&str; 9] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Strict mode's limit on the object nesting depth.
pub(crate) const STRICT_MAX_DEPTH: usize = 10;
/// Strict mode's limit on the number of object properties in one schema.
pub(crate) const STRICT_MAX_PROPERTIES: usize = 5_000;
/// Strict mode's limit on the number of enum values in one schema.
const STRICT_MAX_ENUM_VALUES: usize = 1_000;
/// Strict mode's limit on the characters of property names, definition names, enum and const
/// values together.
const STRICT_MAX_CHARS: usize = 120_000;
/// How many schema nodes a Gemini lowering may produce (inlining can multiply a small schema).
const GEMINI_MAX_NODES: usize = 20_000;
/// How many `allOf`/`$ref` merges one schema node may go through.
const MAX_MERGES: usize = 32;

/// Keywords that only annotate: when two merged schemas disagree on one, the nearer one wins.
const ANNOTATIONS: [&str; 10] = [
    "description",
    "title",
    "default",
    "examples",
    "example",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "$id",
];

/// Keywords that change which instances are valid in ways no target here can express and that
/// cannot be dropped: the problem and the fix for each.
fn structural_keyword(keyword: &str) -> Option<(LoweringErrorKind, &'static str, &'static str)> {
    use LoweringErrorKind::{OpenObject, UnsupportedKeyword};
    Some(match keyword {
        "not" => (
            UnsupportedKeyword,
            "`not` (a negated schema)",
            "remove the custom schema that adds `not`",
        ),
        "if" | "then" | "else" => (
            UnsupportedKeyword,
            "`if`/`then`/`else` (a conditional schema)",
            "split the variants into an enum of structs",
        ),
        "dependentSchemas" | "dependentRequired" => (
            UnsupportedKeyword,
            "a dependency between properties",
            "model the dependent fields as one optional struct",
        ),
        "patternProperties" => (
            OpenObject,
            "`patternProperties` (a map keyed by pattern)",
            "use a Vec of structs with a key field instead of a map",
        ),
        "prefixItems" => (
            UnsupportedKeyword,
            "`prefixItems` (a tuple)",
            "use a struct with named fields instead of a tuple",
        ),
        "items" => (
            UnsupportedKeyword,
            "an `items` array (a draft-4 tuple)",
            "use a struct with named fields instead of a tuple",
        ),
        "$dynamicRef" | "$recursiveRef" => (
            UnsupportedKeyword,
            "a dynamic reference",
            "use plain `$ref` recursion",
        ),
        "definitions" => (
            UnsupportedKeyword,
            "`definitions` (draft-07)",
            "generate the schema for JSON Schema 2020-12, which uses `$defs`",
        ),
        _ => return None,
    })
}

/// Lowers a canonical schema to OpenAI strict mode (Structured Outputs).
///
/// The result obeys every rule of PROVIDERS.md: the root is an object; every object sets
/// `additionalProperties: false` and lists every property in `required`; only the supported
/// keywords remain (`type`, `properties`, `required`, `additionalProperties`, `items`, `enum`,
/// `const`, `anyOf`, `$ref`, `$defs`, `description`, `title`, `pattern`, `format` with a
/// supported value, `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`,
/// `minItems`, `maxItems`); `oneOf` becomes `anyOf` (serde's variants are disjoint, so nothing
/// changes); at most 10 levels of nested objects, 5,000 properties, 1,000 enum values and
/// 120,000 characters of names and enum values.
///
/// An optional property becomes required and stays nullable: an `Option<T>` already accepts
/// `null`, and the validator maps the `null` the model sends to `None`. An optional property that
/// rejects `null` (a `#[serde(default)]` field that is not an `Option`) is an error, because the
/// model could not leave it out and the validator would reject the `null` it sends instead.
///
/// Other keywords are dropped when that only loosens what the model is told (`default`,
/// `examples`, `minLength`, `maxLength`, `uniqueItems`, `min/maxProperties`, `propertyNames`,
/// unsupported formats such as `uint8`, …): the validator still enforces them. A `$ref` with
/// sibling keywords is inlined, since strict mode rejects siblings next to `$ref`. Intersections,
/// conditions, tuples, maps and schemas that accept any value are errors.
///
/// ```
/// use serde_json::json;
/// use toolgate::provider::openai_strict;
///
/// let canonical = json!({
///     "type": "object",
///     "properties": {"city": {"type": "string"}, "unit": {"type": ["string", "null"]}},
///     "required": ["city"],
///     "additionalProperties": false
/// });
/// assert_eq!(
///     openai_strict(&canonical)?,
///     json!({
///         "type": "object",
///         "properties": {"city": {"type": "string"}, "unit": {"type": ["string", "null"]}},
///         "required": ["city", "unit"],
///         "additionalProperties": false
///     })
/// );
/// # Ok::<(), toolgate::provider::LoweringError>(())
/// ```
pub fn openai_strict(schema: &Value) -> Result<Value, LoweringError> {
    let mut lowerer = Lowerer::new(schema, LoweringTarget::OpenAiStrict);
    let root = lowerer.root_map()?;
    // The root is on the stack: a `$ref: "#"` with siblings stays a plain reference.
    lowerer.stack.push("#".to_owned());
    let lowered = lowerer.strict(root, "", true)?;
    if lowered.get("type").and_then(Value::as_str) != Some("object") {
        return Err(lowerer.root_not_object());
    }
    let lowered = Value::Object(lowered);
    check_strict_limits(&lowered)?;
    Ok(lowered)
}

/// Lowers a canonical schema to Gemini's `parameters`, an OpenAPI 3.0 subset.
///
/// Every `$ref` is inlined and `$defs` dropped, so the result holds no `$ref` (a recursive type
/// is an error); `type: [T, "null"]` becomes `type: T, nullable: true`; an `anyOf` (or `oneOf`)
/// with a `null` branch loses it and gains `nullable: true`, and a single remaining branch is
/// merged into its parent; `const` becomes a one-value `enum`. Only Gemini's keywords remain:
/// `type`, `format` (string `enum`/`date-time`, integer `int32`/`int64`, number
/// `float`/`double`), `title`, `description`, `nullable`, `enum` (strings only), `maxItems`,
/// `minItems`, `properties`, `required`, `minProperties`, `maxProperties`, `minLength`,
/// `maxLength`, `pattern`, `example`, `anyOf`, `propertyOrdering`, `default`, `items`,
/// `minimum`, `maximum`. `exclusiveMinimum`/`exclusiveMaximum` become inclusive bounds (one step
/// in for integers); everything else that only loosens (`additionalProperties: false`, `uniqueItems`,
/// `multipleOf`, other formats) is dropped, as the validator still enforces it. Maps,
/// intersections, tuples, conditions and values of any type are errors: the Gemini format then
/// declares the tool with `parametersJsonSchema`, which takes the canonical schema as it is.
///
/// ```
/// use serde_json::json;
/// use toolgate::provider::gemini;
///
/// let canonical = json!({
///     "type": "object",
///     "properties": {"city": {"type": "string"}, "unit": {"type": ["string", "null"]}},
///     "required": ["city"],
///     "additionalProperties": false
/// });
/// assert_eq!(
///     gemini(&canonical)?,
///     json!({
///         "type": "object",
///         "properties": {"city": {"type": "string"}, "unit": {"type": "string", "nullable": true}},
///         "required": ["city"]
///     })
/// );
/// # Ok::<(), toolgate::provider::LoweringError>(())
/// ```
pub fn gemini(schema: &Value) -> Result<Value, LoweringError> {
    let mut lowerer = Lowerer::new(schema, LoweringTarget::Gemini);
    let root = lowerer.root_map()?;
    // The root itself is on the stack: a `$ref: "#"` anywhere is recursion.
    lowerer.stack.push("#".to_owned());
    let lowered = lowerer.gemini(root, "", true)?;
    if lowered.get("type").and_then(Value::as_str) != Some("object")
        || lowered.contains_key("nullable")
    {
        return Err(lowerer.root_not_object());
    }
    Ok(Value::Object(lowered))
}

/// A schema after [`Lowerer::normalize`]: its keywords, the pointer they came from, and the
/// references inlined to get them.
struct Normalized<'s> {
    schema: Cow<'s, Map<String, Value>>,
    pointer: String,
    inlined: Vec<String>,
}

/// The state of one lowering: the document that `$ref`s resolve in, the references inlined on
/// the path to the current schema, and a count of the nodes produced.
struct Lowerer<'r> {
    root: &'r Value,
    target: LoweringTarget,
    stack: Vec<String>,
    nodes: usize,
}

impl<'r> Lowerer<'r> {
    fn new(root: &'r Value, target: LoweringTarget) -> Self {
        Lowerer {
            root,
            target,
            stack: Vec::new(),
            nodes: 0,
        }
    }

    fn error(
        &self,
        kind: LoweringErrorKind,
        pointer: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> LoweringError {
        LoweringError::new(self.target, kind, pointer, problem, fix)
    }

    fn root_not_object(&self) -> LoweringError {
        self.error(
            LoweringErrorKind::RootNotObject,
            "",
            "the root must be an object schema",
            "take the arguments as named parameters or one struct, not an enum, a scalar or an Option",
        )
    }

    fn root_map(&self) -> Result<&'r Map<String, Value>, LoweringError> {
        self.root.as_object().ok_or_else(|| self.root_not_object())
    }

    /// Counts one produced schema node against the target's size budget.
    fn count_node(&mut self, pointer: &str) -> Result<(), LoweringError> {
        self.nodes += 1;
        if self.target == LoweringTarget::Gemini && self.nodes > GEMINI_MAX_NODES {
            return Err(self.error(
                LoweringErrorKind::TooLarge,
                pointer,
                format!("inlining every `$ref` yields more than {GEMINI_MAX_NODES} schemas"),
                "split the tool or share fewer large types between its arguments",
            ));
        }
        Ok(())
    }

    /// `schema` with every one-entry `allOf` merged in and, where `inline_ref` says so, its
    /// `$ref` replaced by the schema it points to (sibling annotations win).
    fn normalize<'s>(
        &self,
        schema: &'s Map<String, Value>,
        pointer: &str,
        inline_ref: &dyn Fn(&Map<String, Value>) -> bool,
    ) -> Result<Normalized<'s>, LoweringError> {
        let mut current = Cow::Borrowed(schema);
        let mut pointer = pointer.to_owned();
        let mut inlined: Vec<String> = Vec::new();
        for _ in 0..MAX_MERGES {
            if let Some(all_of) = current.get("allOf") {
                let merged = self.merge_all_of(&current, all_of, &pointer)?;
                current = Cow::Owned(merged);
                continue;
            }
            let Some(reference) = current.get("$ref") else {
                return Ok(Normalized {
                    schema: current,
                    pointer,
                    inlined,
                });
            };
            if !inline_ref(&current) {
                return Ok(Normalized {
                    schema: current,
                    pointer,
                    inlined,
                });
            }
            let reference = self.reference_str(reference, &pointer)?;
            if self
                .stack
                .iter()
                .chain(&inlined)
                .any(|seen| seen == reference)
            {
                return Err(self.error(
                    LoweringErrorKind::Recursive,
                    &pointer,
                    format!("`{reference}` refers to a type that contains itself"),
                    match self.target {
                        LoweringTarget::Gemini => {
                            "Gemini's `parameters` cannot describe recursive types; break the \
                             recursion (an id instead of a nested value)"
                        }
                        LoweringTarget::OpenAiStrict => {
                            "remove the keywords next to the recursive `$ref`"
                        }
                    },
                ));
            }
            let (target, target_pointer) = self.resolve(reference, &pointer)?;
            let mut merged = target.clone();
            let siblings = current.iter().filter(|(key, _)| *key != "$ref");
            merge_into(&mut merged, siblings, true).map_err(|keyword| {
                self.error(
                    LoweringErrorKind::UnsupportedKeyword,
                    &pointer,
                    format!("`{keyword}` next to `$ref` contradicts the referenced schema"),
                    "remove the custom schema attribute that sets it",
                )
            })?;
            inlined.push(reference.to_owned());
            current = Cow::Owned(merged);
            pointer = target_pointer;
        }
        Err(self.error(
            LoweringErrorKind::Recursive,
            &pointer,
            format!("more than {MAX_MERGES} nested `allOf`/`$ref` indirections"),
            "simplify the custom schema of this type",
        ))
    }

    fn merge_all_of(
        &self,
        schema: &Map<String, Value>,
        all_of: &Value,
        pointer: &str,
    ) -> Result<Map<String, Value>, LoweringError> {
        let at = child(pointer, "allOf");
        let mut merged = schema.clone();
        merged.remove("allOf");
        match all_of.as_array().map(Vec::as_slice) {
            Some([]) | Some([Value::Bool(true)]) => Ok(merged),
            Some([Value::Object(entry)]) => {
                merge_into(&mut merged, entry.iter(), false).map_err(|keyword| {
                    self.error(
                        LoweringErrorKind::UnsupportedKeyword,
                        &at,
                        format!("`{keyword}` in `allOf` contradicts the schema around it"),
                        "describe the arguments with one struct instead of an intersection",
                    )
                })?;
                Ok(merged)
            }
            Some(entries) => Err(self.error(
                LoweringErrorKind::UnsupportedKeyword,
                &at,
                format!(
                    "`allOf` with {} entries (an intersection of schemas)",
                    entries.len()
                ),
                "describe the arguments with one struct instead of an intersection \
                 (for example, no `#[serde(flatten)]` of types with custom schemas)",
            )),
            None => Err(self.error(
                LoweringErrorKind::UnsupportedKeyword,
                &at,
                "`allOf` is not an array",
                "fix the custom schema attribute",
            )),
        }
    }

    fn reference_str<'v>(
        &self,
        reference: &'v Value,
        pointer: &str,
    ) -> Result<&'v str, LoweringError> {
        reference.as_str().ok_or_else(|| {
            self.error(
                LoweringErrorKind::UnresolvedRef,
                &child(pointer, "$ref"),
                "`$ref` is not a string",
                "fix the custom schema attribute",
            )
        })
    }

    /// The object schema `reference` points to and its pointer. Only references into the
    /// document itself resolve (`#` and `#/…`).
    fn resolve(
        &self,
        reference: &str,
        pointer: &str,
    ) -> Result<(&'r Map<String, Value>, String), LoweringError> {
        let unresolved = |problem: String| {
            self.error(
                LoweringErrorKind::UnresolvedRef,
                &child(pointer, "$ref"),
                problem,
                "generate the schema with every type in `$defs` (schemars does by default)",
            )
        };
        let Some(fragment) = reference.strip_prefix('#') else {
            return Err(unresolved(format!(
                "`{reference}` points outside the schema"
            )));
        };
        if !fragment.is_empty() && !fragment.starts_with('/') {
            return Err(unresolved(format!("`{reference}` is not a JSON pointer")));
        }
        match self.root.pointer(fragment) {
            Some(Value::Object(target)) => Ok((target, fragment.to_owned())),
            Some(Value::Bool(true)) => Err(self.unconstrained(fragment)),
            Some(_) => Err(unresolved(format!("`{reference}` is not an object schema"))),
            None => Err(unresolved(format!("`{reference}` does not exist"))),
        }
    }

    fn unconstrained(&self, pointer: &str) -> LoweringError {
        self.error(
            LoweringErrorKind::Unconstrained,
            pointer,
            "the schema accepts any JSON value, so it has no type the target can name",
            "give the field a concrete type instead of `serde_json::Value`",
        )
    }

    fn subschema<'s>(
        &self,
        schema: &'s Value,
        pointer: &str,
    ) -> Result<&'s Map<String, Value>, LoweringError> {
        match schema {
            Value::Object(map) => Ok(map),
            Value::Bool(false) => Err(self.error(
                LoweringErrorKind::Unconstrained,
                pointer,
                "the schema `false` accepts no value",
                "remove the field or give it a type",
            )),
            _ => Err(self.unconstrained(pointer)),
        }
    }

    fn structural(&self, schema: &Map<String, Value>, pointer: &str) -> Result<(), LoweringError> {
        for (keyword, value) in schema {
            if keyword == "items" && !value.is_array() {
                continue;
            }
            if let Some((kind, problem, fix)) = structural_keyword(keyword) {
                return Err(self.error(kind, &child(pointer, keyword), problem, fix));
            }
        }
        match schema.get("additionalProperties") {
            None | Some(Value::Bool(false)) => {}
            Some(_) => {
                return Err(self.error(
                    LoweringErrorKind::OpenObject,
                    &child(pointer, "additionalProperties"),
                    "an object with arbitrary keys (a map)",
                    "use a Vec of structs with a key field instead of a map",
                ));
            }
        }
        if schema.contains_key("anyOf") && schema.contains_key("oneOf") {
            return Err(self.error(
                LoweringErrorKind::UnsupportedKeyword,
                pointer,
                "both `anyOf` and `oneOf` on one schema",
                "remove the custom schema attribute that adds one of them",
            ));
        }
        Ok(())
    }

    fn list<'s>(&self, value: &'s Value, pointer: &str) -> Result<&'s [Value], LoweringError> {
        value.as_array().map(Vec::as_slice).ok_or_else(|| {
            self.error(
                LoweringErrorKind::UnsupportedKeyword,
                pointer,
                "expected an array of schemas",
                "fix the custom schema attribute",
            )
        })
    }

    fn properties<'s>(
        &self,
        value: &'s Value,
        pointer: &str,
    ) -> Result<&'s Map<String, Value>, LoweringError> {
        value.as_object().ok_or_else(|| {
            self.error(
                LoweringErrorKind::UnsupportedKeyword,
                pointer,
                "expected an object of schemas",
                "fix the custom schema attribute",
            )
        })
    }

    // ---- OpenAI strict ------------------------------------------------------------------------

    fn strict(
        &mut self,
        schema: &Map<String, Value>,
        pointer: &str,
        is_root: bool,
    ) -> Result<Map<String, Value>, LoweringError> {
        self.count_node(pointer)?;
        let stack = &self.stack;
        let inline = |schema: &Map<String, Value>| {
            is_root || {
                // Strict mode rejects keywords next to `$ref`: inline unless that would recurse,
                // in which case the siblings are dropped instead (which only loosens).
                let recursive = schema
                    .get("$ref")
                    .and_then(Value::as_str)
                    .is_some_and(|reference| stack.iter().any(|seen| seen == reference));
                !recursive
                    && schema
                        .keys()
                        .any(|key| key != "$ref" && key != "$defs" && strict_keeps(key))
            }
        };
        let Normalized {
            schema,
            pointer,
            inlined,
        } = self.normalize(schema, pointer, &inline)?;
        let pointer = pointer.as_str();
        self.structural(&schema, pointer)?;
        if is_root && (schema.contains_key("anyOf") || schema.contains_key("oneOf")) {
            return Err(self.root_not_object());
        }
        let depth = self.stack.len();
        self.stack.extend(inlined);
        let lowered = self.strict_keywords(&schema, pointer, is_root);
        self.stack.truncate(depth);
        lowered
    }

    fn strict_keywords(
        &mut self,
        schema: &Map<String, Value>,
        pointer: &str,
        is_root: bool,
    ) -> Result<Map<String, Value>, LoweringError> {
        let mut out = Map::new();
        for (keyword, value) in schema {
            let at = child(pointer, keyword);
            match keyword.as_str() {
                "type" => {
                    self.check_types(value, &at)?;
                    out.insert(keyword.clone(), value.clone());
                }
                "properties" => {
                    let mut lowered = Map::new();
                    for (name, sub) in self.properties(value, &at)? {
                        let sub_at = child(&at, name);
                        let sub = self.subschema(sub, &sub_at)?;
                        lowered.insert(
                            name.clone(),
                            Value::Object(self.strict(sub, &sub_at, false)?),
                        );
                    }
                    out.insert(keyword.clone(), Value::Object(lowered));
                }
                "items" => {
                    let sub = self.subschema(value, &at)?;
                    out.insert(
                        keyword.clone(),
                        Value::Object(self.strict(sub, &at, false)?),
                    );
                }
                "anyOf" | "oneOf" => {
                    let mut branches = Vec::new();
                    for (index, branch) in self.list(value, &at)?.iter().enumerate() {
                        let branch_at = child(&at, &index.to_string());
                        let branch = self.subschema(branch, &branch_at)?;
                        branches.push(Value::Object(self.strict(branch, &branch_at, false)?));
                    }
                    out.insert("anyOf".into(), Value::Array(branches));
                }
                "$defs" => {
                    let mut lowered = Map::new();
                    for (name, sub) in self.properties(value, &at)? {
                        let sub_at = child(&at, name);
                        let sub = self.subschema(sub, &sub_at)?;
                        lowered.insert(
                            name.clone(),
                            Value::Object(self.strict(sub, &sub_at, false)?),
                        );
                    }
                    out.insert(keyword.clone(), Value::Object(lowered));
                }
                "$ref" => {
                    let reference = self.reference_str(value, pointer)?;
                    self.resolve(reference, pointer)?;
                    out.insert(keyword.clone(), value.clone());
                }
                "format"
                    if value
                        .as_str()
                        .is_some_and(|format| STRICT_FORMATS.contains(&format)) =>
                {
                    out.insert(keyword.clone(), value.clone());
                }
                "description" | "title" | "pattern" if value.is_string() => {
                    out.insert(keyword.clone(), value.clone());
                }
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf"
                | "minItems" | "maxItems"
                    if value.is_number() =>
                {
                    out.insert(keyword.clone(), value.clone());
                }
                "enum" | "const" => {
                    out.insert(keyword.clone(), value.clone());
                }
                // Set below for every object; `required` is recomputed there.
                "additionalProperties" | "required" => {}
                // Everything else only annotates or loosens what the model is told.
                _ => {}
            }
        }
        // A `$ref` whose siblings were not inlined (recursion): keep the reference alone.
        if out.contains_key("$ref") {
            out.retain(|keyword, _| keyword == "$ref" || keyword == "$defs");
            return Ok(out);
        }
        if is_object(&out) {
            self.close_object(schema, &mut out, pointer, is_root)?;
        }
        if !["type", "anyOf", "$ref", "enum", "const"]
            .iter()
            .any(|keyword| out.contains_key(*keyword))
        {
            return Err(self.unconstrained(pointer));
        }
        Ok(out)
    }

    /// Strict objects: closed, every property required, optional ones nullable.
    fn close_object(
        &self,
        schema: &Map<String, Value>,
        out: &mut Map<String, Value>,
        pointer: &str,
        is_root: bool,
    ) -> Result<(), LoweringError> {
        let closed = schema.contains_key("properties")
            || schema.get("additionalProperties") == Some(&Value::Bool(false));
        // A root that says nothing about its keys is a tool without arguments.
        if !closed && !is_root {
            return Err(self.error(
                LoweringErrorKind::OpenObject,
                pointer,
                "an object with arbitrary keys (a map or `serde_json::Map`)",
                "use a struct, or a Vec of structs with a key field instead of a map",
            ));
        }
        if !out.contains_key("type") {
            out.insert("type".into(), Value::from("object"));
        }
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let empty = Map::new();
        let canonical_properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        for (name, property) in canonical_properties {
            if !required.contains(&name.as_str()) && !accepts_null(property, self.root, 0) {
                return Err(self.error(
                    LoweringErrorKind::OptionalNotNullable,
                    &child(&child(pointer, "properties"), name),
                    format!(
                        "`{name}` is optional but rejects null, and strict mode makes the model \
                         send null for a value it leaves out"
                    ),
                    "make the field `Option<T>` (instead of `#[serde(default)]`) to use strict mode",
                ));
            }
        }
        let names: Vec<Value> = canonical_properties
            .keys()
            .cloned()
            .map(Value::from)
            .collect();
        out.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        out.insert("required".into(), Value::Array(names));
        out.insert("additionalProperties".into(), Value::Bool(false));
        Ok(())
    }

    fn check_types(&self, value: &Value, pointer: &str) -> Result<(), LoweringError> {
        const TYPES: [&str; 7] = [
            "string", "number", "integer", "boolean", "object", "array", "null",
        ];
        let valid = match value {
            Value::String(name) => TYPES.contains(&name.as_str()),
            Value::Array(names) => {
                !names.is_empty()
                    && names
                        .iter()
                        .all(|name| name.as_str().is_some_and(|name| TYPES.contains(&name)))
            }
            _ => false,
        };
        if valid {
            Ok(())
        } else {
            Err(self.error(
                LoweringErrorKind::UnsupportedType,
                pointer,
                format!("`type` is {value}"),
                "fix the custom schema attribute",
            ))
        }
    }

    // ---- Gemini -------------------------------------------------------------------------------

    fn gemini(
        &mut self,
        schema: &Map<String, Value>,
        pointer: &str,
        is_root: bool,
    ) -> Result<Map<String, Value>, LoweringError> {
        self.count_node(pointer)?;
        let Normalized {
            schema,
            pointer,
            inlined,
        } = self.normalize(schema, pointer, &|_| true)?;
        let pointer = pointer.as_str();
        self.structural(&schema, pointer)?;
        if is_root && (schema.contains_key("anyOf") || schema.contains_key("oneOf")) {
            return Err(self.root_not_object());
        }
        let depth = self.stack.len();
        self.stack.extend(inlined);
        let lowered = self.gemini_keywords(&schema, pointer);
        self.stack.truncate(depth);
        let lowered = lowered?;
        let no_properties = lowered
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty);
        if !is_root
            && lowered.get("type").and_then(Value::as_str) == Some("object")
            && no_properties
        {
            let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
            return Err(if closed {
                self.error(
                    LoweringErrorKind::UnsupportedType,
                    pointer,
                    "an object without properties, which Gemini rejects",
                    "remove the empty struct or give it a field",
                )
            } else {
                self.error(
                    LoweringErrorKind::OpenObject,
                    pointer,
                    "an object with arbitrary keys (a map or `serde_json::Map`)",
                    "use a struct, or a Vec of structs with a key field instead of a map",
                )
            });
        }
        Ok(lowered)
    }

    fn gemini_keywords(
        &mut self,
        schema: &Map<String, Value>,
        pointer: &str,
    ) -> Result<Map<String, Value>, LoweringError> {
        let mut out = Map::new();
        let mut nullable = false;
        let mut single_branch = None;
        for (keyword, value) in schema {
            let at = child(pointer, keyword);
            match keyword.as_str() {
                "type" => {
                    let (name, null) = self.gemini_type(value, &at)?;
                    nullable |= null;
                    out.insert(keyword.clone(), Value::from(name));
                }
                "properties" => {
                    let mut lowered = Map::new();
                    for (name, sub) in self.properties(value, &at)? {
                        let sub_at = child(&at, name);
                        let sub = self.subschema(sub, &sub_at)?;
                        lowered.insert(
                            name.clone(),
                            Value::Object(self.gemini(sub, &sub_at, false)?),
                        );
                    }
                    out.insert(keyword.clone(), Value::Object(lowered));
                }
                "items" => {
                    let sub = self.subschema(value, &at)?;
                    out.insert(
                        keyword.clone(),
                        Value::Object(self.gemini(sub, &at, false)?),
                    );
                }
                "anyOf" | "oneOf" => {
                    let mut branches = Vec::new();
                    for (index, branch) in self.list(value, &at)?.iter().enumerate() {
                        if is_null_only(branch) {
                            nullable = true;
                            continue;
                        }
                        let branch_at = child(&at, &index.to_string());
                        let branch = self.subschema(branch, &branch_at)?;
                        branches.push(self.gemini(branch, &branch_at, false)?);
                    }
                    match branches.len() {
                        0 => {
                            return Err(self.error(
                                LoweringErrorKind::UnsupportedType,
                                &at,
                                "a union whose only branch is null",
                                "give the field a type other than `()`",
                            ));
                        }
                        1 => single_branch = branches.pop(),
                        _ => {
                            let branches = branches.into_iter().map(Value::Object).collect();
                            out.insert("anyOf".into(), Value::Array(branches));
                        }
                    }
                }
                "enum" | "const" => {
                    let values = match (keyword.as_str(), value) {
                        ("enum", Value::Array(values)) => values.as_slice(),
                        ("const", value) => std::slice::from_ref(value),
                        _ => &[],
                    };
                    let (strings, null) = self.gemini_enum(values, &at)?;
                    nullable |= null;
                    out.insert("enum".into(), Value::Array(strings));
                }
                "required" => {
                    if let Some(names) = value.as_array() {
                        let names = names
                            .iter()
                            .filter(|name| name.is_string())
                            .cloned()
                            .collect();
                        out.insert(keyword.clone(), Value::Array(names));
                    }
                }
                "description" | "title" | "pattern" if value.is_string() => {
                    out.insert(keyword.clone(), value.clone());
                }
                "default" if !value.is_null() => {
                    out.insert(keyword.clone(), value.clone());
                }
                "example" => {
                    out.insert(keyword.clone(), value.clone());
                }
                "examples" if !schema.contains_key("example") => {
                    if let Some(first) = value.as_array().and_then(|values| values.first()) {
                        out.insert("example".into(), first.clone());
                    }
                }
                "minimum" | "maximum" | "minItems" | "maxItems" | "minLength" | "maxLength"
                | "minProperties" | "maxProperties"
                    if value.is_number() =>
                {
                    out.insert(keyword.clone(), value.clone());
                }
                "propertyOrdering" if value.is_array() => {
                    out.insert(keyword.clone(), value.clone());
                }
                // Decided once the type is known.
                "format" | "exclusiveMinimum" | "exclusiveMaximum" => {}
                // `$defs` are inlined where used; `additionalProperties: false` and the rest only
                // loosen what the model is told.
                _ => {}
            }
        }
        if !out.contains_key("type") {
            if out.contains_key("properties") {
                out.insert("type".into(), Value::from("object"));
            } else if out.contains_key("enum") {
                out.insert("type".into(), Value::from("string"));
            }
        }
        let kind = out.get("type").and_then(Value::as_str).map(str::to_owned);
        if let Some(kind) = kind.as_deref() {
            gemini_format(schema, kind, &mut out);
            if kind == "integer" || kind == "number" {
                exclusive_to_inclusive(schema, kind == "integer", &mut out);
            }
            if kind != "string" && out.contains_key("enum") {
                return Err(self.error(
                    LoweringErrorKind::UnsupportedType,
                    pointer,
                    format!("an enum of {kind} values"),
                    "Gemini enums hold strings only: use a string enum (a Rust enum of unit variants)",
                ));
            }
        }
        if let Some(branch) = single_branch {
            // The parent's own keywords (its description, say) win over the branch's.
            for (keyword, value) in branch {
                if keyword == "nullable" {
                    nullable = true;
                } else if !out.contains_key(&keyword) {
                    out.insert(keyword, value);
                }
            }
        }
        if !out.contains_key("type") && !out.contains_key("anyOf") {
            return Err(self.unconstrained(pointer));
        }
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        Ok(out)
    }

    /// Gemini's single type name, and whether `null` was among the types.
    fn gemini_type(&self, value: &Value, pointer: &str) -> Result<(String, bool), LoweringError> {
        const TYPES: [&str; 6] = ["string", "number", "integer", "boolean", "object", "array"];
        let names: Vec<&str> = match value {
            Value::String(name) => vec![name.as_str()],
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let null = names.contains(&"null");
        let rest: Vec<&str> = names.into_iter().filter(|name| *name != "null").collect();
        match rest.as_slice() {
            [name] if TYPES.contains(name) => Ok(((*name).to_owned(), null)),
            [] => Err(self.error(
                LoweringErrorKind::UnsupportedType,
                pointer,
                "the type `null` alone",
                "give the field a type other than `()`",
            )),
            _ => Err(self.error(
                LoweringErrorKind::UnsupportedType,
                pointer,
                format!("`type` is {value}"),
                "use one type per schema (an enum of structs becomes `anyOf`)",
            )),
        }
    }

    /// The string values of an enum and whether `null` was among them.
    fn gemini_enum(
        &self,
        values: &[Value],
        pointer: &str,
    ) -> Result<(Vec<Value>, bool), LoweringError> {
        let null = values.iter().any(Value::is_null);
        let rest: Vec<Value> = values
            .iter()
            .filter(|value| !value.is_null())
            .cloned()
            .collect();
        if rest.is_empty() || !rest.iter().all(Value::is_string) {
            return Err(self.error(
                LoweringErrorKind::UnsupportedType,
                pointer,
                "an enum or const with values that are not strings",
                "Gemini enums hold strings only: use a string enum (a Rust enum of unit variants)",
            ));
        }
        Ok((rest, null))
    }
}

/// Merges `overlay` into `base`. An annotation present in both takes the overlay's value when
/// `overlay_wins`, the base's otherwise; any other keyword present in both must agree. Returns
/// the keyword that disagrees.
fn merge_into<'a>(
    base: &mut Map<String, Value>,
    overlay: impl Iterator<Item = (&'a String, &'a Value)>,
    overlay_wins: bool,
) -> Result<(), String> {
    for (keyword, value) in overlay {
        match base.get(keyword) {
            None => {
                base.insert(keyword.clone(), value.clone());
            }
            Some(existing) if existing == value => {}
            Some(_) if ANNOTATIONS.contains(&keyword.as_str()) => {
                if overlay_wins {
                    base.insert(keyword.clone(), value.clone());
                }
            }
            Some(_) => return Err(keyword.clone()),
        }
    }
    Ok(())
}

/// Whether strict mode keeps `keyword` (with some value).
fn strict_keeps(keyword: &str) -> bool {
    matches!(
        keyword,
        "type"
            | "properties"
            | "required"
            | "additionalProperties"
            | "items"
            | "enum"
            | "const"
            | "anyOf"
            | "oneOf"
            | "description"
            | "title"
            | "pattern"
            | "format"
            | "minimum"
            | "maximum"
            | "exclusiveMinimum"
            | "exclusiveMaximum"
            | "multipleOf"
            | "minItems"
            | "maxItems"
    )
}

fn is_object(schema: &Map<String, Value>) -> bool {
    schema.contains_key("properties")
        || match schema.get("type") {
            Some(Value::String(name)) => name == "object",
            Some(Value::Array(names)) => names.iter().any(|name| name == "object"),
            _ => false,
        }
}

/// Whether a union branch is only `null`.
fn is_null_only(schema: &Value) -> bool {
    let Some(schema) = schema.as_object() else {
        return false;
    };
    match (schema.get("type"), schema.get("const"), schema.get("enum")) {
        (Some(Value::String(name)), _, _) => name == "null",
        (Some(Value::Array(names)), _, _) => names.iter().all(|name| name == "null"),
        (None, Some(Value::Null), _) => true,
        (None, None, Some(Value::Array(values))) => values.iter().all(Value::is_null),
        _ => false,
    }
}

/// Whether `schema` accepts `null`, following `$ref`s into `root`. Every keyword present must
/// allow it; anything not understood counts as rejecting, which only ever makes lowering refuse.
fn accepts_null(schema: &Value, root: &Value, depth: usize) -> bool {
    if depth > MAX_MERGES {
        return false;
    }
    let schema = match schema {
        Value::Bool(accepts) => return *accepts,
        Value::Object(schema) => schema,
        _ => return false,
    };
    let type_ok = match schema.get("type") {
        None => true,
        Some(Value::String(name)) => name == "null",
        Some(Value::Array(names)) => names.iter().any(|name| name == "null"),
        Some(_) => false,
    };
    let enum_ok = match schema.get("enum") {
        None => true,
        Some(Value::Array(values)) => values.iter().any(Value::is_null),
        Some(_) => false,
    };
    let const_ok = schema.get("const").is_none_or(Value::is_null);
    let union_ok = ["anyOf", "oneOf"]
        .iter()
        .all(|keyword| match schema.get(*keyword) {
            None => true,
            Some(Value::Array(branches)) => branches
                .iter()
                .any(|branch| accepts_null(branch, root, depth + 1)),
            Some(_) => false,
        });
    let all_ok = match schema.get("allOf") {
        None => true,
        Some(Value::Array(entries)) => entries
            .iter()
            .all(|entry| accepts_null(entry, root, depth + 1)),
        Some(_) => false,
    };
    let ref_ok = match schema.get("$ref") {
        None => true,
        Some(Value::String(reference)) => reference
            .strip_prefix('#')
            .and_then(|fragment| root.pointer(fragment))
            .is_some_and(|target| accepts_null(target, root, depth + 1)),
        Some(_) => false,
    };
    type_ok && enum_ok && const_ok && union_ok && all_ok && ref_ok
}

/// Keeps `format` when Gemini supports it for `kind`.
fn gemini_format(schema: &Map<String, Value>, kind: &str, out: &mut Map<String, Value>) {
    let Some(format) = schema.get("format").and_then(Value::as_str) else {
        return;
    };
    let supported = match kind {
        "string" => matches!(format, "enum" | "date-time"),
        "integer" => matches!(format, "int32" | "int64"),
        "number" => matches!(format, "float" | "double"),
        _ => false,
    };
    if supported {
        out.insert("format".into(), Value::from(format));
    }
}

/// Exclusive bounds as the inclusive ones Gemini has: one step in for an integer bound on an
/// integer, the bound itself otherwise (which only loosens by the bound's own value). The
/// tighter of the two bounds wins.
fn exclusive_to_inclusive(
    schema: &Map<String, Value>,
    integer: bool,
    out: &mut Map<String, Value>,
) {
    let shifted = |keyword: &str, up: bool| -> Option<Value> {
        let value = schema.get(keyword).filter(|value| value.is_number())?;
        let stepped = if !integer {
            None
        } else if let Some(n) = value.as_i64() {
            if up {
                n.checked_add(1)
            } else {
                n.checked_sub(1)
            }
            .map(Value::from)
        } else {
            value
                .as_u64()
                .and_then(|n| {
                    if up {
                        n.checked_add(1)
                    } else {
                        n.checked_sub(1)
                    }
                })
                .map(Value::from)
        };
        Some(stepped.unwrap_or_else(|| value.clone()))
    };
    let as_f64 = |value: &Value| value.as_f64().unwrap_or(f64::NAN);
    if let Some(bound) = shifted("exclusiveMinimum", true) {
        let tighter = out
            .get("minimum")
            .is_none_or(|current| as_f64(&bound) > as_f64(current));
        if tighter {
            out.insert("minimum".into(), bound);
        }
    }
    if let Some(bound) = shifted("exclusiveMaximum", false) {
        let tighter = out
            .get("maximum")
            .is_none_or(|current| as_f64(&bound) < as_f64(current));
        if tighter {
            out.insert("maximum".into(), bound);
        }
    }
}

/// The JSON pointer of `token` under `pointer`.
fn child(pointer: &str, token: &str) -> String {
    format!("{pointer}/{}", token.replace('~', "~0").replace('/', "~1"))
}

/// Calls `visit` on every schema of a lowered strict schema, with its pointer.
fn for_each_schema(
    schema: &Value,
    pointer: &str,
    visit: &mut dyn FnMut(&Map<String, Value>, &str),
) {
    let Some(object) = schema.as_object() else {
        return;
    };
    visit(object, pointer);
    for (keyword, value) in object {
        let at = child(pointer, keyword);
        match (keyword.as_str(), value) {
            ("properties" | "$defs", Value::Object(map)) => {
                for (name, sub) in map {
                    for_each_schema(sub, &child(&at, name), visit);
                }
            }
            ("anyOf", Value::Array(list)) => {
                for (index, sub) in list.iter().enumerate() {
                    for_each_schema(sub, &child(&at, &index.to_string()), visit);
                }
            }
            ("items", sub) => for_each_schema(sub, &at, visit),
            _ => {}
        }
    }
}

/// Checks strict mode's size limits on a lowered schema.
fn check_strict_limits(schema: &Value) -> Result<(), LoweringError> {
    let too_large = |pointer: &str, problem: String| {
        LoweringError::new(
            LoweringTarget::OpenAiStrict,
            LoweringErrorKind::TooLarge,
            pointer,
            problem,
            "split the tool, or flatten its arguments",
        )
    };
    let mut memo = HashMap::new();
    let (depth, deepest) = object_depth(schema, "", schema, &mut memo);
    if depth > STRICT_MAX_DEPTH {
        return Err(too_large(
            &deepest,
            format!("objects nest {depth} levels deep; strict mode allows {STRICT_MAX_DEPTH}"),
        ));
    }
    let (mut properties, mut enum_values, mut chars) = (0usize, 0usize, 0usize);
    for_each_schema(schema, "", &mut |object, _| {
        if let Some(map) = object.get("properties").and_then(Value::as_object) {
            properties += map.len();
            chars += map.keys().map(|name| name.chars().count()).sum::<usize>();
        }
        if let Some(map) = object.get("$defs").and_then(Value::as_object) {
            chars += map.keys().map(|name| name.chars().count()).sum::<usize>();
        }
        if let Some(values) = object.get("enum").and_then(Value::as_array) {
            enum_values += values.len();
            chars += values.iter().map(value_chars).sum::<usize>();
        }
        if let Some(value) = object.get("const") {
            chars += value_chars(value);
        }
    });
    if properties > STRICT_MAX_PROPERTIES {
        return Err(too_large(
            "",
            format!("{properties} properties; strict mode allows {STRICT_MAX_PROPERTIES}"),
        ));
    }
    if enum_values > STRICT_MAX_ENUM_VALUES {
        return Err(too_large(
            "",
            format!("{enum_values} enum values; strict mode allows {STRICT_MAX_ENUM_VALUES}"),
        ));
    }
    if chars > STRICT_MAX_CHARS {
        return Err(too_large(
            "",
            format!(
                "{chars} characters of names and enum values; strict mode allows {STRICT_MAX_CHARS}"
            ),
        ));
    }
    Ok(())
}

fn value_chars(value: &Value) -> usize {
    match value {
        Value::String(text) => text.chars().count(),
        other => other.to_string().len(),
    }
}

/// How many objects nest in `schema`, the schema itself included, following `$ref`s once (a
/// recursive reference adds nothing), and the pointer of the deepest one.
fn object_depth(
    schema: &Value,
    pointer: &str,
    root: &Value,
    memo: &mut HashMap<String, Option<(usize, String)>>,
) -> (usize, String) {
    let Some(object) = schema.as_object() else {
        return (0, pointer.to_owned());
    };
    let own = usize::from(is_object(object));
    let mut deepest = (0, pointer.to_owned());
    let mut consider = |candidate: (usize, String)| {
        if candidate.0 > deepest.0 {
            deepest = candidate;
        }
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        let fragment = reference.trim_start_matches('#');
        match memo.get(fragment) {
            Some(Some(known)) => consider(known.clone()),
            Some(None) => {}
            None => {
                if let Some(target) = root.pointer(fragment) {
                    memo.insert(fragment.to_owned(), None);
                    let found = object_depth(target, fragment, root, memo);
                    memo.insert(fragment.to_owned(), Some(found.clone()));
                    consider(found);
                }
            }
        }
    }
    for (keyword, value) in object {
        let at = child(pointer, keyword);
        match (keyword.as_str(), value) {
            ("properties", Value::Object(map)) => {
                for (name, sub) in map {
                    consider(object_depth(sub, &child(&at, name), root, memo));
                }
            }
            ("anyOf", Value::Array(list)) => {
                for (index, sub) in list.iter().enumerate() {
                    consider(object_depth(
                        sub,
                        &child(&at, &index.to_string()),
                        root,
                        memo,
                    ));
                }
            }
            ("items", sub) => consider(object_depth(sub, &at, root, memo)),
            _ => {}
        }
    }
    (
        own + deepest.0,
        if deepest.0 == 0 {
            pointer.to_owned()
        } else {
            deepest.1
        },
    )
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};

    use schemars::JsonSchema;
    use serde_json::json;

    use super::*;
    use crate::schema::canonical_schema_for;

    // Field docs become descriptions; a documented struct field is a `$ref` with a sibling.
    #[allow(dead_code)]
    #[derive(JsonSchema)]
    struct Address {
        street: String,
        zip: Option<u32>,
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Unit {
        Celsius,
        Fahrenheit,
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    enum Priority {
        /// Whenever.
        Low,
        /// Now.
        High,
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    enum Shape {
        Circle { radius: f64 },
        Square(f64),
        Empty,
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    #[serde(tag = "kind")]
    enum Payment {
        Card { last4: String },
        Cash,
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    struct Line {
        sku: String,
        quantity: u16,
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    struct Order {
        /// Where to ship.
        ship_to: Address,
        /// Where to bill, when it differs.
        bill_to: Option<Address>,
        unit: Unit,
        maybe_unit: Option<Unit>,
        priority: Option<Priority>,
        shape: Shape,
        payment: Payment,
        lines: Vec<Line>,
        tags: Option<Vec<String>>,
        labels: HashSet<String>,
        small: u8,
        count: Option<i64>,
        ratio: f32,
        initial: char,
        #[schemars(email)]
        email: String,
        #[schemars(url)]
        homepage: Option<String>,
        #[serde(default)]
        note: Option<String>,
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    struct Tree {
        name: String,
        children: Vec<Tree>,
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    struct WithDefault {
        city: String,
        #[serde(default)]
        verbose: bool,
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    struct WithMap {
        scores: BTreeMap<String, u32>,
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    struct WithTuple {
        point: (i32, i32),
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    struct WithValue {
        extra: serde_json::Value,
    }

    const STRICT_KEYWORDS: [&str; 21] = [
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "description",
        "title",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    ];

    const GEMINI_KEYWORDS: [&str; 22] = [
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    ];

    /// Asserts every strict-mode rule of PROVIDERS.md on `schema` and each schema in it.
    fn assert_strict(schema: &Value) {
        assert_eq!(
            schema["type"], "object",
            "the root must be an object: {schema}"
        );
        assert!(schema.get("anyOf").is_none(), "the root must not be anyOf");
        jsonschema::meta::validate(schema).expect("a valid JSON Schema 2020-12");
        for_each_schema(schema, "", &mut |object, at| {
            for keyword in object.keys() {
                assert!(
                    STRICT_KEYWORDS.contains(&keyword.as_str()),
                    "{at}: `{keyword}` in {object:?}"
                );
            }
            if let Some(format) = object.get("format") {
                assert!(
                    STRICT_FORMATS.contains(&format.as_str().unwrap()),
                    "{at}: format {format}"
                );
            }
            if object.contains_key("$ref") {
                let siblings: Vec<_> = object
                    .keys()
                    .filter(|key| *key != "$ref" && *key != "$defs")
                    .collect();
                assert!(
                    siblings.is_empty(),
                    "{at}: keywords next to $ref: {siblings:?}"
                );
            }
            assert!(
                ["type", "anyOf", "$ref", "enum", "const"]
                    .iter()
                    .any(|key| object.contains_key(*key)),
                "{at}: a schema with no type: {object:?}"
            );
            if is_object(object) {
                assert_eq!(
                    object.get("additionalProperties"),
                    Some(&json!(false)),
                    "{at}"
                );
                let properties: Vec<&String> =
                    object["properties"].as_object().unwrap().keys().collect();
                let required: Vec<&str> = object["required"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|name| name.as_str().unwrap())
                    .collect();
                assert_eq!(properties, required, "{at}: every property is required");
            }
        });
    }

    /// Asserts Gemini's rules: its keywords only, one type per schema, string enums, no `$ref`.
    fn assert_gemini(schema: &Value) {
        assert_eq!(schema["type"], "object");
        jsonschema::meta::validate(schema).expect("a valid JSON Schema 2020-12");
        assert!(!schema.to_string().contains("$ref"), "{schema}");
        assert!(!schema.to_string().contains("$defs"), "{schema}");
        for_each_schema(schema, "", &mut |object, at| {
            for keyword in object.keys() {
                assert!(
                    GEMINI_KEYWORDS.contains(&keyword.as_str()),
                    "{at}: `{keyword}`"
                );
            }
            if let Some(kind) = object.get("type") {
                let kind = kind
                    .as_str()
                    .unwrap_or_else(|| panic!("{at}: one type: {kind}"));
                assert_ne!(kind, "null", "{at}");
                if let Some(format) = object.get("format") {
                    let format = format.as_str().unwrap();
                    let allowed: &[&str] = match kind {
                        "string" => &["enum", "date-time"],
                        "integer" => &["int32", "int64"],
                        "number" => &["float", "double"],
                        _ => &[],
                    };
                    assert!(allowed.contains(&format), "{at}: format {format} on {kind}");
                }
            } else {
                assert!(object.contains_key("anyOf"), "{at}: no type: {object:?}");
            }
            if let Some(values) = object.get("enum") {
                assert!(
                    values.as_array().unwrap().iter().all(Value::is_string),
                    "{at}"
                );
                assert_eq!(object["type"], "string", "{at}");
            }
        });
    }

    fn refused(result: Result<Value, LoweringError>) -> LoweringError {
        match result {
            Ok(value) => panic!("expected an error, got {value}"),
            Err(err) => err,
        }
    }

    #[test]
    fn strict_lowering_of_a_rich_struct_obeys_every_rule() {
        let canonical = canonical_schema_for::<Order>();
        let strict = openai_strict(&canonical).unwrap();
        assert_strict(&strict);
        let properties = &strict["properties"];
        // A `$ref` with a description is inlined, its own nullable fields kept nullable.
        assert_eq!(
            properties["ship_to"],
            json!({"type": "object", "description": "Where to ship.",
                "properties": {"street": {"type": "string"},
                    "zip": {"type": ["integer", "null"], "minimum": 0, "maximum": 4294967295u64}},
                "required": ["street", "zip"], "additionalProperties": false})
        );
        // An optional struct stays a nullable reference.
        assert_eq!(
            properties["bill_to"],
            json!({"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}],
                "description": "Where to bill, when it differs."})
        );
        assert_eq!(
            strict["$defs"]["Unit"],
            json!({"type": "string", "enum": ["celsius", "fahrenheit"]})
        );
        // Integer bounds survive, unsupported formats and string lengths do not.
        assert_eq!(
            properties["small"],
            json!({"type": "integer", "minimum": 0, "maximum": 255})
        );
        assert_eq!(properties["ratio"], json!({"type": "number"}));
        assert_eq!(properties["initial"], json!({"type": "string"}));
        assert_eq!(
            properties["email"],
            json!({"type": "string", "format": "email"})
        );
        assert_eq!(properties["homepage"], json!({"type": ["string", "null"]}));
        assert_eq!(
            properties["labels"],
            json!({"type": "array", "items": {"type": "string"}})
        );
        assert_eq!(properties["note"], json!({"type": ["string", "null"]}));
        // Serde enums: `oneOf` becomes `anyOf`.
        let shape = &strict["$defs"]["Shape"];
        assert_eq!(shape["anyOf"].as_array().unwrap().len(), 3);
        assert_eq!(
            shape["anyOf"][0],
            json!({"type": "string", "enum": ["Empty"]})
        );
        assert_eq!(
            strict["$defs"]["Payment"]["anyOf"][1]["properties"]["kind"],
            json!({"type": "string", "const": "Cash"})
        );
        let required: Vec<&str> = strict["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(
            required.contains(&"count") && required.contains(&"note") && required.contains(&"tags")
        );
    }

    #[test]
    fn the_strict_schema_accepts_what_the_model_sends_and_the_validator_agrees() {
        let canonical = canonical_schema_for::<Order>();
        let strict = openai_strict(&canonical).unwrap();
        let canonical_validator = jsonschema::draft202012::new(&canonical).unwrap();
        let strict_validator = jsonschema::draft202012::new(&strict).unwrap();
        let order = json!({
            "ship_to": {"street": "Main St", "zip": null},
            "bill_to": null,
            "unit": "celsius",
            "maybe_unit": null,
            "priority": "High",
            "shape": {"Circle": {"radius": 1.5}},
            "payment": {"kind": "Card", "last4": "4242"},
            "lines": [{"sku": "A-1", "quantity": 2}],
            "tags": null,
            "labels": ["x"],
            "small": 7,
            "count": null,
            "ratio": 0.5,
            "initial": "Z",
            "email": "a@example.com",
            "homepage": null,
            "note": null
        });
        assert!(
            strict_validator.is_valid(&order),
            "{:?}",
            strict_validator
                .iter_errors(&order)
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
        );
        assert!(canonical_validator.is_valid(&order));
        let mut missing = order.clone();
        missing.as_object_mut().unwrap().remove("note");
        assert!(
            !strict_validator.is_valid(&missing),
            "strict mode requires every property"
        );
    }

    #[test]
    fn the_providers_md_example_lowers_exactly() {
        let canonical = json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": ["string", "null"]}},
            "required": ["city"],
            "additionalProperties": false
        });
        assert_eq!(
            openai_strict(&canonical).unwrap(),
            json!({"type":"object","properties":{"city":{"type":"string"},"unit":{"type":["string","null"]}},
                "required":["city","unit"],"additionalProperties":false})
        );
        assert_eq!(
            gemini(&canonical).unwrap(),
            json!({"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","nullable":true}},"required":["city"]})
        );
    }

    #[test]
    fn an_optional_field_that_rejects_null_cannot_be_strict() {
        let err = refused(openai_strict(&canonical_schema_for::<WithDefault>()));
        assert_eq!(err.kind, LoweringErrorKind::OptionalNotNullable);
        assert_eq!(err.target, LoweringTarget::OpenAiStrict);
        assert_eq!(err.pointer, "/properties/verbose");
        assert_eq!(
            err.to_string(),
            "cannot lower the schema at #/properties/verbose to OpenAI strict mode: `verbose` is \
             optional but rejects null, and strict mode makes the model send null for a value it \
             leaves out; make the field `Option<T>` (instead of `#[serde(default)]`) to use strict mode"
        );
        // Gemini keeps optional properties optional.
        assert_gemini(&gemini(&canonical_schema_for::<WithDefault>()).unwrap());
    }

    #[test]
    fn maps_tuples_and_any_values_are_errors_with_their_pointer() {
        for lower in [openai_strict, gemini] {
            let err = refused(lower(&canonical_schema_for::<WithMap>()));
            assert_eq!(
                (err.kind, err.pointer.as_str()),
                (
                    LoweringErrorKind::OpenObject,
                    "/properties/scores/additionalProperties"
                )
            );
            assert!(err.fix.contains("Vec"), "{err}");
            let err = refused(lower(&canonical_schema_for::<WithTuple>()));
            assert_eq!(
                (err.kind, err.pointer.as_str()),
                (
                    LoweringErrorKind::UnsupportedKeyword,
                    "/properties/point/prefixItems"
                )
            );
            let err = refused(lower(&canonical_schema_for::<WithValue>()));
            assert_eq!(
                (err.kind, err.pointer.as_str()),
                (LoweringErrorKind::Unconstrained, "/properties/extra")
            );
            let open = json!({"type": "object", "properties": {"meta": {"type": "object"}}, "required": ["meta"]});
            assert_eq!(refused(lower(&open)).kind, LoweringErrorKind::OpenObject);
        }
    }

    #[test]
    fn structural_keywords_are_errors_and_loosening_ones_are_dropped() {
        let with = |keyword: &str, value: Value| {
            let mut field = json!({"type": "string"});
            field[keyword] = value;
            json!({"type": "object", "properties": {"f": field}, "required": ["f"], "additionalProperties": false})
        };
        for (keyword, value) in [
            ("not", json!({"const": "x"})),
            ("if", json!({"const": "x"})),
            ("then", json!({"minLength": 2})),
            ("dependentRequired", json!({"a": ["b"]})),
            ("dependentSchemas", json!({"a": {}})),
            ("patternProperties", json!({"^x": {}})),
            ("allOf", json!([{"minLength": 1}, {"maxLength": 3}])),
        ] {
            for lower in [openai_strict, gemini] {
                let err = refused(lower(&with(keyword, value.clone())));
                assert!(
                    err.pointer.starts_with("/properties/f/"),
                    "{keyword}: {err}"
                );
            }
        }
        for (keyword, value) in [
            ("default", json!("x")),
            ("examples", json!(["x"])),
            ("minLength", json!(1)),
            ("maxLength", json!(9)),
            ("deprecated", json!(true)),
            ("readOnly", json!(true)),
            ("propertyNames", json!({"pattern": "x"})),
            ("minProperties", json!(1)),
            ("maxProperties", json!(1)),
            ("format", json!("uri")),
            ("$comment", json!("x")),
        ] {
            let strict = openai_strict(&with(keyword, value)).unwrap();
            assert_eq!(
                strict["properties"]["f"],
                json!({"type": "string"}),
                "{keyword}"
            );
        }
        let unique = json!({"type": "object", "properties": {"f": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}}, "required": ["f"]});
        assert_eq!(
            openai_strict(&unique).unwrap()["properties"]["f"],
            json!({"type": "array", "items": {"type": "string"}})
        );
        assert_eq!(
            gemini(&unique).unwrap()["properties"]["f"],
            json!({"type": "array", "items": {"type": "string"}})
        );
    }

    #[test]
    fn a_one_entry_all_of_is_merged() {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"allOf": [{"$ref": "#/$defs/A"}], "description": "The a."}},
            "required": ["a"],
            "$defs": {"A": {"type": "string", "enum": ["x", "y"], "description": "An A."}}
        });
        let strict = openai_strict(&schema).unwrap();
        assert_strict(&strict);
        assert_eq!(
            strict["properties"]["a"],
            json!({"type": "string", "enum": ["x", "y"], "description": "The a."})
        );
        assert_eq!(
            gemini(&schema).unwrap()["properties"]["a"],
            json!({"type": "string", "enum": ["x", "y"], "description": "The a."})
        );
    }

    #[test]
    fn the_root_must_be_an_object() {
        for schema in [
            json!({"type": "string"}),
            json!(true),
            json!(["type"]),
            json!({"oneOf": [{"type": "object", "properties": {}}, {"type": "string"}]}),
            json!({"type": ["object", "null"], "properties": {}}),
            canonical_schema_for::<Shape>(),
        ] {
            assert_eq!(
                refused(openai_strict(&schema)).kind,
                LoweringErrorKind::RootNotObject,
                "{schema}"
            );
            assert_eq!(
                refused(gemini(&schema)).kind,
                LoweringErrorKind::RootNotObject,
                "{schema}"
            );
        }
        // A root reference is inlined.
        let referenced = json!({"$ref": "#/$defs/A", "$defs": {"A": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}});
        assert_strict(&openai_strict(&referenced).unwrap());
        assert_gemini(&gemini(&referenced).unwrap());
        // A root that says nothing of its keys is a tool without arguments.
        assert_eq!(
            openai_strict(&json!({"type": "object"})).unwrap(),
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
        );
    }

    #[test]
    fn strict_nesting_stops_at_ten_levels() {
        fn nested(levels: usize) -> Value {
            let mut schema = json!({"type": "object", "properties": {"leaf": {"type": "string"}}, "required": ["leaf"]});
            for _ in 1..levels {
                schema =
                    json!({"type": "object", "properties": {"next": schema}, "required": ["next"]});
            }
            schema
        }
        assert_strict(&openai_strict(&nested(STRICT_MAX_DEPTH)).unwrap());
        let err = refused(openai_strict(&nested(STRICT_MAX_DEPTH + 1)));
        assert_eq!(err.kind, LoweringErrorKind::TooLarge);
        assert_eq!(
            err.problem,
            "objects nest 11 levels deep; strict mode allows 10"
        );
        // Through references too.
        let chain = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"],
            "$defs": {"A": nested(STRICT_MAX_DEPTH)}});
        assert_eq!(err_kind(openai_strict(&chain)), LoweringErrorKind::TooLarge);
    }

    fn err_kind(result: Result<Value, LoweringError>) -> LoweringErrorKind {
        refused(result).kind
    }

    #[test]
    fn strict_properties_stop_at_five_thousand() {
        let wide = |count: usize| {
            let properties: Map<String, Value> = (0..count)
                .map(|i| (format!("p{i}"), json!({"type": "boolean"})))
                .collect();
            let required: Vec<Value> = properties.keys().cloned().map(Value::from).collect();
            json!({"type": "object", "properties": properties, "required": required})
        };
        assert!(openai_strict(&wide(STRICT_MAX_PROPERTIES)).is_ok());
        assert_eq!(
            err_kind(openai_strict(&wide(STRICT_MAX_PROPERTIES + 1))),
            LoweringErrorKind::TooLarge
        );
    }

    #[test]
    fn recursion_is_strict_but_not_gemini() {
        let canonical = canonical_schema_for::<Tree>();
        let strict = openai_strict(&canonical).unwrap();
        assert_strict(&strict);
        assert_eq!(
            strict["properties"]["children"]["items"],
            json!({"$ref": "#"})
        );
        let err = refused(gemini(&canonical));
        assert_eq!(err.kind, LoweringErrorKind::Recursive);
        assert_eq!(err.pointer, "/properties/children/items");
        let through_defs = json!({"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}, "required": ["n"],
            "$defs": {"N": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}]}}, "required": ["next"]}}});
        assert_strict(&openai_strict(&through_defs).unwrap());
        assert_eq!(
            err_kind(gemini(&through_defs)),
            LoweringErrorKind::Recursive
        );
        // A recursive `$ref` with a description is inlined once, then kept as a plain reference.
        let described = json!({"type": "object", "properties": {
                "first": {"$ref": "#/$defs/N", "description": "The first."},
                "up": {"$ref": "#", "description": "The parent."}},
            "required": ["first", "up"],
            "$defs": {"N": {"type": "object", "properties": {
                "next": {"$ref": "#/$defs/N", "description": "The next."}}, "required": ["next"]}}});
        let strict = openai_strict(&described).unwrap();
        assert_strict(&strict);
        assert_eq!(strict["properties"]["first"]["description"], "The first.");
        assert_eq!(
            strict["properties"]["first"]["properties"]["next"],
            json!({"$ref": "#/$defs/N"})
        );
        assert_eq!(strict["properties"]["up"], json!({"$ref": "#"}));
    }

    #[test]
    fn gemini_lowering_of_a_rich_struct_inlines_everything() {
        let lowered = gemini(&canonical_schema_for::<Order>()).unwrap();
        assert_gemini(&lowered);
        let properties = &lowered["properties"];
        assert_eq!(
            properties["bill_to"],
            json!({"type": "object", "description": "Where to bill, when it differs.",
                "properties": {"street": {"type": "string"},
                    "zip": {"type": "integer", "minimum": 0, "maximum": 4294967295u64, "nullable": true}},
                "required": ["street"], "nullable": true})
        );
        assert_eq!(
            properties["maybe_unit"],
            json!({"type": "string", "enum": ["celsius", "fahrenheit"], "nullable": true})
        );
        assert_eq!(
            properties["priority"],
            json!({"anyOf": [
                {"type": "string", "enum": ["Low"], "description": "Whenever."},
                {"type": "string", "enum": ["High"], "description": "Now."}
            ], "nullable": true})
        );
        assert_eq!(properties["count"]["type"], "integer");
        assert_eq!(properties["count"]["format"], "int64");
        assert_eq!(properties["count"]["nullable"], true);
        assert_eq!(
            properties["ratio"],
            json!({"type": "number", "format": "float"})
        );
        assert_eq!(
            properties["small"],
            json!({"type": "integer", "minimum": 0, "maximum": 255})
        );
        assert_eq!(
            properties["initial"],
            json!({"type": "string", "minLength": 1, "maxLength": 1})
        );
        assert_eq!(
            properties["tags"],
            json!({"type": "array", "items": {"type": "string"}, "nullable": true})
        );
        assert_eq!(
            properties["payment"]["anyOf"][1]["properties"]["kind"],
            json!({"type": "string", "enum": ["Cash"]})
        );
        assert_eq!(
            properties["shape"]["anyOf"][0],
            json!({"type": "string", "enum": ["Empty"]})
        );
        assert_eq!(
            properties["note"],
            json!({"type": "string", "nullable": true})
        );
    }

    #[test]
    fn gemini_rejects_what_openapi_cannot_say() {
        let object =
            |field: Value| json!({"type": "object", "properties": {"f": field}, "required": ["f"]});
        for (field, kind) in [
            (
                json!({"type": ["string", "integer"]}),
                LoweringErrorKind::UnsupportedType,
            ),
            (json!({"type": "null"}), LoweringErrorKind::UnsupportedType),
            (
                json!({"type": "integer", "enum": [1, 2]}),
                LoweringErrorKind::UnsupportedType,
            ),
            (json!({"const": 3}), LoweringErrorKind::UnsupportedType),
            (
                json!({"$ref": "https://example.com/s.json"}),
                LoweringErrorKind::UnresolvedRef,
            ),
            (
                json!({"$ref": "#/$defs/Missing"}),
                LoweringErrorKind::UnresolvedRef,
            ),
        ] {
            assert_eq!(err_kind(gemini(&object(field.clone()))), kind, "{field}");
        }
        // Strict mode takes these, when the reference resolves.
        assert!(openai_strict(&object(json!({"type": ["string", "integer"]}))).is_ok());
        assert!(openai_strict(&object(json!({"const": 3}))).is_ok());
        assert_eq!(
            err_kind(openai_strict(&object(json!({"$ref": "#/$defs/Missing"})))),
            LoweringErrorKind::UnresolvedRef
        );
    }

    #[test]
    fn gemini_makes_integer_exclusive_bounds_inclusive_and_keeps_examples() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10, "minimum": -5},
            "x": {"type": "number", "exclusiveMinimum": 0},
            "s": {"type": "string", "examples": ["Paris"], "format": "date-time", "default": "now"}
        }, "required": ["n"]});
        let lowered = gemini(&schema).unwrap();
        assert_gemini(&lowered);
        assert_eq!(
            lowered["properties"]["n"],
            json!({"type": "integer", "minimum": 1, "maximum": 9})
        );
        assert_eq!(
            lowered["properties"]["x"],
            json!({"type": "number", "minimum": 0})
        );
        assert_eq!(
            lowered["properties"]["s"],
            json!({"type": "string", "example": "Paris", "format": "date-time", "default": "now"})
        );
    }

    #[test]
    fn every_lowering_of_every_test_type_is_valid_json_schema() {
        let schemas = [
            canonical_schema_for::<Order>(),
            canonical_schema_for::<Address>(),
            canonical_schema_for::<Tree>(),
            canonical_schema_for::<WithDefault>(),
            canonical_schema_for::<Line>(),
        ];
        for schema in &schemas {
            if let Ok(strict) = openai_strict(schema) {
                assert_strict(&strict);
            }
            if let Ok(lowered) = gemini(schema) {
                assert_gemini(&lowered);
            }
        }
    }

    #[test]
    fn pointers_escape_their_tokens() {
        assert_eq!(child("/properties", "a/b~c"), "/properties/a~1b~0c");
        let schema =
            json!({"type": "object", "properties": {"a/b": {"type": "boolean", "default": false}}});
        assert_eq!(refused(openai_strict(&schema)).pointer, "/properties/a~1b");
    }
}
