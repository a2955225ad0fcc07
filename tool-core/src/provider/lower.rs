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
/// `minimum`, `maximum`. An integer `exclusiveMinimum`/`exclusiveMaximum` becomes the inclusive
/// bound; everything else that only loosens (`additionalProperties: false`, `uniqueItems`,
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
    let lowered = lowerer.gemini(root, "")?;
    if lowered.get("type").and_then(Value::as_str) != Some("object")
        || lowered.contains_key("nullable")
    {
        return Err(lowerer.root_not_object());
    }
    Ok(Value::Object(lowered))
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
    /// `$ref` replaced by the schema it points to (sibling annotations win). Returns the merged
    /// schema, the pointer its keywords came from, and the references inlined.
    fn normalize<'s>(
        &self,
        schema: &'s Map<String, Value>,
        pointer: &str,
        inline_ref: &dyn Fn(&Map<String, Value>) -> bool,
    ) -> Result<(Cow<'s, Map<String, Value>>, String, Vec<String>), LoweringError> {
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
                return Ok((current, pointer, inlined));
            };
            if !inline_ref(&current) {
                return Ok((current, pointer, inlined));
            }
            let reference = self.reference_str(reference, &pointer)?;
            if self.stack.iter().chain(&inlined).any(|seen| seen == reference) {
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
                format!("`allOf` with {} entries (an intersection of schemas)", entries.len()),
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

    fn reference_str<'v>(&self, reference: &'v Value, pointer: &str) -> Result<&'v str, LoweringError> {
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
            return Err(unresolved(format!("`{reference}` points outside the schema")));
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

    fn subschema<'s>(&self, schema: &'s Value, pointer: &str) -> Result<&'s Map<String, Value>, LoweringError> {
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
                // in which case the annotations are dropped instead.
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
        let (schema, pointer, inlined) = self.normalize(schema, pointer, &inline)?;
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
                        lowered.insert(name.clone(), Value::Object(self.strict(sub, &sub_at, false)?));
                    }
                    out.insert(keyword.clone(), Value::Object(lowered));
                }
                "items" => {
                    let sub = self.subschema(value, &at)?;
                    out.insert(keyword.clone(), Value::Object(self.strict(sub, &at, false)?));
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
                        lowered.insert(name.clone(), Value::Object(self.strict(sub, &sub_at, false)?));
                    }
                    out.insert(keyword.clone(), Value::Object(lowered));
                }
                "$ref" => {
                    let reference = self.reference_str(value, pointer)?;
                    self.resolve(reference, pointer)?;
                    out.insert(keyword.clone(), value.clone());
                }
                "format" => {
                    if value.as_str().is_some_and(|format| STRICT_FORMATS.contains(&format)) {
                        out.insert(keyword.clone(), value.clone());
                    }
                }
                "description" | "title" | "pattern" => {
                    if value.is_string() {
                        out.insert(keyword.clone(), value.clone());
                    }
                }
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf"
                | "minItems" | "maxItems" => {
                    if value.is_number() {
                        out.insert(keyword.clone(), value.clone());
                    }
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
        // A `$ref` kept next to annotations that were not inlined (recursion): drop them.
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
        let names: Vec<Value> = canonical_properties.keys().cloned().map(Value::from).collect();
        out.entry("properties").or_insert_with(|| Value::Object(Map::new()));
        out.insert("required".into(), Value::Array(names));
        out.insert("additionalProperties".into(), Value::Bool(false));
        Ok(())
    }

    fn check_types(&self, value: &Value, pointer: &str) -> Result<(), LoweringError> {
        const TYPES: [&str; 7] = ["string", "number", "integer", "boolean", "object", "array", "null"];
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
    ) -> Result<Map<String, Value>, LoweringError> {
        self.count_node(pointer)?;
        let (schema, pointer, inlined) = self.normalize(schema, pointer, &|_| true)?;
        let pointer = pointer.as_str();
        self.structural(&schema, pointer)?;
        let depth = self.stack.len();
        self.stack.extend(inlined);
        let lowered = self.gemini_keywords(&schema, pointer);
        self.stack.truncate(depth);
        lowered
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
                        lowered.insert(name.clone(), Value::Object(self.gemini(sub, &sub_at)?));
                    }
                    out.insert(keyword.clone(), Value::Object(lowered));
                }
                "items" => {
                    let sub = self.subschema(value, &at)?;
                    out.insert(keyword.clone(), Value::Object(self.gemini(sub, &at)?));
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
                        branches.push(self.gemini(branch, &branch_at)?);
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
                        let names = names.iter().filter(|name| name.is_string()).cloned().collect();
                        out.insert(keyword.clone(), Value::Array(names));
                    }
                }
                "description" | "title" | "pattern" => {
                    if value.is_string() {
                        out.insert(keyword.clone(), value.clone());
                    }
                }
                "default" => {
                    if !value.is_null() {
                        out.insert(keyword.clone(), value.clone());
                    }
                }
                "example" => {
                    out.insert(keyword.clone(), value.clone());
                }
                "examples" => {
                    if let Some(first) = value.as_array().and_then(|values| values.first()) {
                        if !schema.contains_key("example") {
                            out.insert("example".into(), first.clone());
                        }
                    }
                }
                "minimum" | "maximum" | "minItems" | "maxItems" | "minLength" | "maxLength"
                | "minProperties" | "maxProperties" => {
                    if value.is_number() {
                        out.insert(keyword.clone(), value.clone());
                    }
                }
                "propertyOrdering" => {
                    if value.is_array() {
                        out.insert(keyword.clone(), value.clone());
                    }
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
            if kind == "integer" {
                exclusive_to_inclusive(schema, &mut out);
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
    fn gemini_enum(&self, values: &[Value], pointer: &str) -> Result<(Vec<Value>, bool), LoweringError> {
        let null = values.iter().any(Value::is_null);
        let rest: Vec<Value> = values.iter().filter(|value| !value.is_null()).cloned().collect();
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
    let union_ok = ["anyOf", "oneOf"].iter().all(|keyword| match schema.get(*keyword) {
        None => true,
        Some(Value::Array(branches)) => {
            branches.iter().any(|branch| accepts_null(branch, root, depth + 1))
        }
        Some(_) => false,
    });
    let all_ok = match schema.get("allOf") {
        None => true,
        Some(Value::Array(entries)) => entries.iter().all(|entry| accepts_null(entry, root, depth + 1)),
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

/// An integer's exclusive bounds as the inclusive ones Gemini has (the tighter bound wins).
fn exclusive_to_inclusive(schema: &Map<String, Value>, out: &mut Map<String, Value>) {
    let shifted = |keyword: &str, up: bool| -> Option<Value> {
        let value = schema.get(keyword)?;
        if let Some(n) = value.as_i64() {
            let n = if up { n.checked_add(1)? } else { n.checked_sub(1)? };
            return Some(Value::from(n));
        }
        let n = value.as_u64()?;
        Some(Value::from(if up { n.checked_add(1)? } else { n - 1 }))
    };
    let as_f64 = |value: &Value| value.as_f64().unwrap_or(f64::NAN);
    if let Some(bound) = shifted("exclusiveMinimum", true) {
        let tighter = out.get("minimum").is_none_or(|current| as_f64(&bound) > as_f64(current));
        if tighter {
            out.insert("minimum".into(), bound);
        }
    }
    if let Some(bound) = shifted("exclusiveMaximum", false) {
        let tighter = out.get("maximum").is_none_or(|current| as_f64(&bound) < as_f64(current));
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
fn for_each_schema(schema: &Value, pointer: &str, visit: &mut dyn FnMut(&Map<String, Value>, &str)) {
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
                    consider(object_depth(sub, &child(&at, &index.to_string()), root, memo));
                }
            }
            ("items", sub) => consider(object_depth(sub, &at, root, memo)),
            _ => {}
        }
    }
    (own + deepest.0, if deepest.0 == 0 { pointer.to_owned() } else { deepest.1 })
}
