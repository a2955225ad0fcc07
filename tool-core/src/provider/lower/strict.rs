//! The strict dialects: OpenAI strict mode (Structured Outputs) and Anthropic strict tool use,
//! which both constrain the model's sampling to a subset of JSON Schema. One dialect walks the
//! schema for both ([`Strict`]): closed objects, a `$ref` kept bare, only the keywords of the
//! subset. A [`Subset`] says what differs: which keywords and formats it keeps, whether every
//! property must be required, and the checks of the whole lowered schema. OpenAI's subset is
//! here ([`openai_strict`]); Anthropic's is in `anthropic_strict`.

use std::marker::PhantomData;

use serde_json::{Map, Value};

use super::anthropic_grammar::grammar_takes_pattern;
use super::error::{LoweringError, LoweringErrorKind, LoweringTarget};
use super::lowerer::{Dialect, Lowerer};
use super::nullable::accepts_null;
use super::strict_limits::{check_strict_limits, is_object};
use crate::schema::child_pointer as child;

/// What a strict subset takes as the value of a keyword it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Takes {
    /// Subschemas, each lowered in turn (`oneOf` is written as `anyOf`).
    Subschemas,
    /// A type name or a list of them.
    Type,
    /// A reference that resolves inside the schema.
    Reference,
    /// One of the subset's formats ([`Subset::FORMATS`]); another format is dropped.
    Format,
    /// A string; another value is dropped.
    Text,
    /// A regular expression Anthropic's grammar compiles
    /// ([`grammar_takes_pattern`]); another is dropped.
    Pattern,
    /// A number; another value is dropped.
    Number,
    /// Values that are neither objects nor arrays (one for `const`, a list for `enum`); a
    /// schema with another is refused.
    Primitives,
    /// A count of items, kept as `0` or `1` (a larger minimum is written as `1`, which it
    /// implies); another value is dropped.
    AtMostOne,
    /// Any value, kept as it is.
    Any,
    /// Recomputed for every object (`required`, `additionalProperties`).
    Recomputed,
}

/// Which properties a strict subset lists in `required`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Required {
    /// Every property: an optional one stays nullable, and one that rejects `null` is an error.
    Every,
    /// Those the canonical schema requires: an optional property stays optional.
    AsDeclared,
}

/// One provider's strict subset of JSON Schema: what it keeps and checks where the strict
/// dialects differ.
pub(super) trait Subset {
    /// The dialect, named in every error.
    const TARGET: LoweringTarget;
    /// The keywords kept, and what each takes. Every other keyword is dropped (it only
    /// annotates or loosens what the model is told), or refused before the keywords are read.
    const KEYWORDS: &'static [(&'static str, Takes)];
    /// The `format` values kept.
    const FORMATS: &'static [&'static str];
    /// Which properties `required` lists.
    const REQUIRED: Required;

    /// Checks the lowered schema `lowered` of the canonical `schema` as a whole: size limits,
    /// and what the subset cannot describe at all.
    fn check(schema: &Value, lowered: &Value) -> Result<(), LoweringError>;
}

/// OpenAI's strict subset.
pub(super) struct OpenAi;

/// The keywords OpenAI strict mode keeps.
pub(super) const STRICT_KEYWORDS: [(&str, Takes); 22] = [
    ("type", Takes::Type),
    ("properties", Takes::Subschemas),
    ("required", Takes::Recomputed),
    ("additionalProperties", Takes::Recomputed),
    ("items", Takes::Subschemas),
    ("enum", Takes::Any),
    ("const", Takes::Any),
    ("anyOf", Takes::Subschemas),
    ("oneOf", Takes::Subschemas),
    ("$ref", Takes::Reference),
    ("$defs", Takes::Subschemas),
    ("description", Takes::Text),
    ("title", Takes::Text),
    ("pattern", Takes::Text),
    ("format", Takes::Format),
    ("minimum", Takes::Number),
    ("maximum", Takes::Number),
    ("exclusiveMinimum", Takes::Number),
    ("exclusiveMaximum", Takes::Number),
    ("multipleOf", Takes::Number),
    ("minItems", Takes::Number),
    ("maxItems", Takes::Number),
];

/// The `format` values OpenAI strict mode supports.
pub(super) const STRICT_FORMATS: [&str; 9] = [
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

impl Subset for OpenAi {
    const TARGET: LoweringTarget = LoweringTarget::OpenAiStrict;
    const KEYWORDS: &'static [(&'static str, Takes)] = &STRICT_KEYWORDS;
    const FORMATS: &'static [&'static str] = &STRICT_FORMATS;
    const REQUIRED: Required = Required::Every;

    fn check(_schema: &Value, lowered: &Value) -> Result<(), LoweringError> {
        check_strict_limits(lowered)
    }
}

/// Lowers a canonical schema to OpenAI strict mode (Structured Outputs).
///
/// The result obeys every rule of strict mode: the root is an object; every object sets
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
    lower_strict::<OpenAi>(schema)
}

/// Lowers `schema` to the strict subset `S`: the shared walk, a root that is an object, and
/// the subset's own checks of the result.
pub(super) fn lower_strict<S: Subset>(schema: &Value) -> Result<Value, LoweringError> {
    let lowered = Lowerer::<Strict<S>>::lower_document(schema)?;
    if lowered.get("type").and_then(Value::as_str) != Some("object") {
        return Err(LoweringError::root_not_object(S::TARGET));
    }
    let lowered = Value::Object(lowered);
    S::check(schema, &lowered)?;
    Ok(lowered)
}

/// The strict dialect of the subset `S`.
pub(super) struct Strict<S>(PhantomData<S>);

impl<S: Subset> Strict<S> {
    /// What the subset takes for `keyword`, or `None` when it drops the keyword.
    fn takes(keyword: &str) -> Option<Takes> {
        S::KEYWORDS
            .iter()
            .find(|(known, _)| *known == keyword)
            .map(|(_, takes)| *takes)
    }
}

impl<S: Subset> Dialect for Strict<S> {
    const TARGET: LoweringTarget = S::TARGET;
    const RECURSIVE_FIX: &'static str = "remove the keywords next to the recursive `$ref`";
    type Node = ();

    /// The root's `$ref` always, which keeps a `$ref: "#"` with siblings a plain reference.
    /// Elsewhere, the strict subsets reject keywords next to `$ref`: a reference with siblings
    /// that are kept is inlined, unless that would recurse, in which case the siblings are
    /// dropped instead (which only loosens).
    fn inlines(lowerer: &Lowerer<'_, Self>, schema: &Map<String, Value>, is_root: bool) -> bool {
        if is_root {
            return true;
        }
        let recursive = schema
            .get("$ref")
            .and_then(Value::as_str)
            .is_some_and(|reference| lowerer.stack.iter().any(|seen| seen == reference));
        !recursive
            && schema
                .keys()
                .any(|key| key != "$ref" && key != "$defs" && Self::takes(key).is_some())
    }

    fn descends(keyword: &str) -> bool {
        Self::takes(keyword) == Some(Takes::Subschemas)
    }

    fn keyword(
        lowerer: &Lowerer<'_, Self>,
        _schema: &Map<String, Value>,
        keyword: &str,
        value: &Value,
        pointer: &str,
        out: &mut Map<String, Value>,
        _node: &mut (),
    ) -> Result<(), LoweringError> {
        let kept = match Self::takes(keyword) {
            Some(Takes::Type) => {
                check_types(lowerer, value, &child(pointer, keyword))?;
                Some(value.clone())
            }
            Some(Takes::Reference) => {
                let reference = lowerer.reference_str(value, pointer)?;
                lowerer.resolve(reference, pointer)?;
                Some(value.clone())
            }
            Some(Takes::Format) => value
                .as_str()
                .is_some_and(|format| S::FORMATS.contains(&format))
                .then(|| value.clone()),
            Some(Takes::Text) => value.is_string().then(|| value.clone()),
            Some(Takes::Pattern) => value
                .as_str()
                .is_some_and(grammar_takes_pattern)
                .then(|| value.clone()),
            Some(Takes::Number) => value.is_number().then(|| value.clone()),
            Some(Takes::Primitives) => {
                check_primitives(lowerer, keyword, value, &child(pointer, keyword))?;
                Some(value.clone())
            }
            Some(Takes::AtMostOne) => value.as_u64().map(|count| Value::from(count.min(1))),
            Some(Takes::Any) => Some(value.clone()),
            // `required` and `additionalProperties` are set for every object in `finish`;
            // subschemas never reach here.
            Some(Takes::Recomputed | Takes::Subschemas) | None => None,
        };
        if let Some(kept) = kept {
            out.insert(keyword.to_owned(), kept);
        }
        Ok(())
    }

    fn finish(
        lowerer: &Lowerer<'_, Self>,
        schema: &Map<String, Value>,
        mut out: Map<String, Value>,
        _node: (),
        pointer: &str,
        is_root: bool,
    ) -> Result<Map<String, Value>, LoweringError> {
        // A `$ref` whose siblings were not inlined (recursion): keep the reference alone.
        if out.contains_key("$ref") {
            out.retain(|keyword, _| keyword == "$ref" || keyword == "$defs");
            return Ok(out);
        }
        if is_object(&out) {
            close_object(lowerer, schema, &mut out, pointer, is_root)?;
        }
        if !["type", "anyOf", "$ref", "enum", "const"]
            .iter()
            .any(|keyword| out.contains_key(*keyword))
        {
            return Err(lowerer.unconstrained(pointer));
        }
        Ok(out)
    }
}

/// Strict objects: closed, with the properties [`Subset::REQUIRED`] says listed in `required`.
fn close_object<S: Subset>(
    lowerer: &Lowerer<'_, Strict<S>>,
    schema: &Map<String, Value>,
    out: &mut Map<String, Value>,
    pointer: &str,
    is_root: bool,
) -> Result<(), LoweringError> {
    let closed = schema.contains_key("properties")
        || schema.get("additionalProperties") == Some(&Value::Bool(false));
    // A root that says nothing about its keys is a tool without arguments.
    if !closed && !is_root {
        return Err(lowerer.open_object(pointer));
    }
    if !out.contains_key("type") {
        out.insert("type".into(), Value::from("object"));
    }
    let declared: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let empty = Map::new();
    let canonical_properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<Value> = match S::REQUIRED {
        Required::Every => {
            for (name, property) in canonical_properties {
                if !declared.contains(&name.as_str()) && !accepts_null(property, lowerer.root, 0) {
                    return Err(lowerer.error(
                        LoweringErrorKind::OptionalNotNullable,
                        &child(&child(pointer, "properties"), name),
                        format!(
                            "`{name}` is optional but rejects null, and strict mode makes the \
                             model send null for a value it leaves out"
                        ),
                        "make the field `Option<T>` (instead of `#[serde(default)]`) to use \
                         strict mode",
                    ));
                }
            }
            canonical_properties
                .keys()
                .cloned()
                .map(Value::from)
                .collect()
        }
        Required::AsDeclared => canonical_properties
            .keys()
            .filter(|name| declared.contains(&name.as_str()))
            .cloned()
            .map(Value::from)
            .collect(),
    };
    out.entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    out.insert("required".into(), Value::Array(required));
    out.insert("additionalProperties".into(), Value::Bool(false));
    Ok(())
}

fn check_types<S: Subset>(
    lowerer: &Lowerer<'_, Strict<S>>,
    value: &Value,
    pointer: &str,
) -> Result<(), LoweringError> {
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
        Err(lowerer.error(
            LoweringErrorKind::UnsupportedType,
            pointer,
            format!("`type` is {value}"),
            "fix the custom schema attribute",
        ))
    }
}

/// Refuses an `enum` or `const` with an object or array among its values.
fn check_primitives<S: Subset>(
    lowerer: &Lowerer<'_, Strict<S>>,
    keyword: &str,
    value: &Value,
    pointer: &str,
) -> Result<(), LoweringError> {
    let values = match (keyword, value) {
        ("enum", Value::Array(values)) => values.as_slice(),
        _ => std::slice::from_ref(value),
    };
    if values
        .iter()
        .any(|value| value.is_object() || value.is_array())
    {
        return Err(lowerer.error(
            LoweringErrorKind::UnsupportedType,
            pointer,
            format!("`{keyword}` holds an object or an array"),
            "use an enum of unit variants, or of strings, numbers and booleans",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::provider::lower::fixtures::*;
    use crate::provider::lower::{LoweringErrorKind, LoweringTarget, gemini, openai_strict};
    use crate::schema::canonical_schema_for;

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
        // Numeric bounds survive, unsupported formats and string lengths do not.
        assert_eq!(
            properties["small"],
            json!({"type": "integer", "minimum": 0, "maximum": 255})
        );
        // An f32 keeps its range; the unsupported `format` goes.
        let max = f64::from(f32::MAX);
        assert_eq!(
            properties["ratio"],
            json!({"type": "number", "minimum": -max, "maximum": max})
        );
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
    fn the_documentation_names_every_keyword_strict_mode_keeps() {
        let source = include_str!("strict.rs");
        let start = source
            .find("/// Lowers a canonical schema to OpenAI strict mode")
            .unwrap();
        let end = source.find("pub fn openai_strict").unwrap();
        let docs = &source[start..end];
        for (keyword, _) in super::STRICT_KEYWORDS {
            assert!(docs.contains(&format!("`{keyword}`")), "{keyword}");
        }
    }

    #[test]
    fn pointers_escape_their_tokens() {
        assert_eq!(
            crate::schema::child_pointer("/properties", "a/b~c"),
            "/properties/a~1b~0c"
        );
        let schema =
            json!({"type": "object", "properties": {"a/b": {"type": "boolean", "default": false}}});
        assert_eq!(refused(openai_strict(&schema)).pointer, "/properties/a~1b");
    }
}
