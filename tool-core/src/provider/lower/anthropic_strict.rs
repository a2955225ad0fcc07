//! Anthropic strict tool use: the subset of JSON Schema its grammar-constrained sampling takes.
//! It shares the strict dialect with OpenAI ([`Strict`](super::strict::Strict)) and differs in
//! four named decisions: optional properties stay optional ([`Required::AsDeclared`]), numeric
//! and length bounds go ([`ANTHROPIC_KEYWORDS`]), a pattern stays only if the grammar compiles
//! it ([`grammar_takes_pattern`](super::anthropic_grammar::grammar_takes_pattern)), and a recursive type is refused ([`refuse_recursion`]).

use std::collections::HashSet;

use serde_json::Value;

use super::anthropic_limits::check_anthropic_limits;
use super::error::{LoweringError, LoweringErrorKind, LoweringTarget};
use super::strict::{Required, Subset, Takes, lower_strict};
use crate::schema::subschemas;

/// Anthropic's strict subset.
pub(super) struct Anthropic;

/// The keywords Anthropic's strict tool use keeps. Unlike OpenAI's, no numeric bound
/// (`minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`) and no count
/// of items beyond a `minItems` of 0 or 1; `default` is kept.
pub(super) const ANTHROPIC_KEYWORDS: [(&str, Takes); 17] = [
    ("type", Takes::Type),
    ("properties", Takes::Subschemas),
    ("required", Takes::Recomputed),
    ("additionalProperties", Takes::Recomputed),
    ("items", Takes::Subschemas),
    ("enum", Takes::Primitives),
    ("const", Takes::Primitives),
    ("anyOf", Takes::Subschemas),
    ("oneOf", Takes::Subschemas),
    ("$ref", Takes::Reference),
    ("$defs", Takes::Subschemas),
    ("description", Takes::Text),
    ("title", Takes::Text),
    ("default", Takes::Any),
    ("pattern", Takes::Pattern),
    ("format", Takes::Format),
    ("minItems", Takes::AtMostOne),
];

/// The `format` values Anthropic's strict tool use supports.
pub(super) const ANTHROPIC_FORMATS: [&str; 10] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "uri",
    "ipv4",
    "ipv6",
    "uuid",
];

impl Subset for Anthropic {
    const TARGET: LoweringTarget = LoweringTarget::AnthropicStrict;
    const KEYWORDS: &'static [(&'static str, Takes)] = &ANTHROPIC_KEYWORDS;
    const FORMATS: &'static [&'static str] = &ANTHROPIC_FORMATS;
    const REQUIRED: Required = Required::AsDeclared;

    fn check(schema: &Value, lowered: &Value) -> Result<(), LoweringError> {
        refuse_recursion(schema)?;
        check_anthropic_limits(lowered)
    }
}

/// Lowers a canonical schema to Anthropic strict tool use (`"strict": true` on a tool).
///
/// The result obeys every rule of strict tool use: the root is an object; every object sets
/// `additionalProperties: false`; only the supported keywords remain (`type`, `properties`,
/// `required`, `additionalProperties`, `items`, `enum` and `const` of strings, numbers,
/// booleans and `null`, `anyOf`, `$ref`, `$defs`, `description`, `title`, `default`, `pattern`
/// that the grammar compiles, `format` with a supported value (`date-time`, `time`, `date`,
/// `duration`, `email`, `hostname`, `uri`, `ipv4`, `ipv6`, `uuid`), `minItems` of 0 or 1);
/// `oneOf` becomes `anyOf`; a `$ref` stands alone (one with siblings is inlined); no type refers
/// to itself.
///
/// Where OpenAI's strict mode differs, it is on four points, each decided once:
///
/// - An optional property stays optional: `required` lists what the canonical schema requires,
///   and a `#[serde(default)]` field that is not an `Option` lowers too.
/// - Numeric bounds, string lengths and `maxItems` are dropped, and a `minItems` above 1 is
///   written as 1: the grammar cannot count them, and the validator still enforces them.
/// - A `pattern` with a backreference, a lookahead or lookbehind, or a word boundary is dropped
///   (the grammar does not compile them; the validator still enforces the pattern). Anthropic
///   also refuses quantifiers with large ranges, which this lowering does not judge.
/// - A recursive type is an error, as strict tool use takes no recursive schema.
///
/// A schema that alone passes one of the limits Anthropic sets on the strict tools of one
/// request (24 optional properties, 16 properties of a union type: `anyOf` or a list of types)
/// is an error. A [`Registry`](crate::Registry) also counts each tool against what the tools
/// registered before it use of those limits and of the 20 strict tools a request takes, so
/// that its catalog stays within them.
///
/// ```
/// use serde_json::json;
/// use toolgate::provider::anthropic_strict;
///
/// let canonical = json!({
///     "type": "object",
///     "properties": {
///         "city": {"type": "string", "maxLength": 80},
///         "days": {"type": "integer", "format": "uint8", "minimum": 1, "maximum": 14}
///     },
///     "required": ["city"],
///     "additionalProperties": false
/// });
/// assert_eq!(
///     anthropic_strict(&canonical)?,
///     json!({
///         "type": "object",
///         "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
///         "required": ["city"],
///         "additionalProperties": false
///     })
/// );
/// # Ok::<(), toolgate::provider::LoweringError>(())
/// ```
pub fn anthropic_strict(schema: &Value) -> Result<Value, LoweringError> {
    lower_strict::<Anthropic>(schema)
}

/// Refuses a schema in which a `$ref` leads back to a schema that holds it: strict tool use
/// compiles the schema into a grammar and takes no recursive type. The error points at that
/// `$ref` in the canonical schema.
fn refuse_recursion(schema: &Value) -> Result<(), LoweringError> {
    let mut path = vec![String::from("#")];
    let mut done = HashSet::new();
    match recursion(schema, "", schema, &mut path, &mut done) {
        None => Ok(()),
        Some((pointer, reference)) => Err(LoweringError::new(
            LoweringTarget::AnthropicStrict,
            LoweringErrorKind::Recursive,
            &pointer,
            format!(
                "`{reference}` refers to a type that contains itself, and strict tool use takes \
                 no recursive schema"
            ),
            "break the recursion (an id instead of a nested value) to use strict tool use",
        )),
    }
}

/// The pointer and the reference of a `$ref` in `schema` (at `pointer`), or in a schema it
/// refers to, that refers to one of the schemas on `path` (the references followed to get
/// here). `done` holds the references already followed to their end without finding one.
fn recursion(
    schema: &Value,
    pointer: &str,
    root: &Value,
    path: &mut Vec<String>,
    done: &mut HashSet<String>,
) -> Option<(String, String)> {
    let object = schema.as_object()?;
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        if path.iter().any(|seen| seen == reference) {
            return Some((pointer.to_owned(), reference.to_owned()));
        }
        // A reference that does not resolve is the lowering's to report.
        let fragment = reference.strip_prefix('#');
        let target = fragment.and_then(|fragment| Some((fragment, root.pointer(fragment)?)));
        if let Some((fragment, target)) = target.filter(|_| !done.contains(reference)) {
            path.push(reference.to_owned());
            let found = recursion(target, fragment, root, path, done);
            path.pop();
            if found.is_some() {
                return found;
            }
            done.insert(reference.to_owned());
        }
    }
    subschemas(object)
        .filter(|sub| sub.keyword != "$defs" && sub.keyword != "definitions")
        .find_map(|sub| recursion(sub.schema, &sub.pointer(pointer), root, path, done))
}

#[cfg(test)]
mod tests {
    use crate::provider::lower::anthropic_grammar::grammar_takes_pattern;
    use serde_json::json;

    use super::*;
    use crate::provider::lower::fixtures::*;
    use crate::provider::lower::{LoweringErrorKind, openai_strict};
    use crate::schema::canonical_schema_for;

    #[test]
    fn anthropic_lowering_of_a_rich_struct_obeys_every_rule() {
        let canonical = canonical_schema_for::<Order>();
        let lowered = anthropic_strict(&canonical).unwrap();
        assert_anthropic_strict(&lowered);
        let properties = &lowered["properties"];
        // Optional properties stay optional, nullable ones nullable.
        let required: Vec<&str> = lowered["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|name| name.as_str().unwrap())
            .collect();
        assert!(required.contains(&"ship_to") && !required.contains(&"note"));
        assert_eq!(
            properties["note"],
            json!({"type": ["string", "null"], "default": null})
        );
        // No numeric bounds or lengths; the formats Anthropic knows, `uri` among them.
        assert_eq!(properties["small"], json!({"type": "integer"}));
        assert_eq!(properties["initial"], json!({"type": "string"}));
        assert_eq!(
            properties["homepage"],
            json!({"type": ["string", "null"], "format": "uri"})
        );
        assert_eq!(
            properties["ship_to"],
            json!({"type": "object", "description": "Where to ship.",
                "properties": {"street": {"type": "string"}, "zip": {"type": ["integer", "null"]}},
                "required": ["street"], "additionalProperties": false})
        );
        assert_eq!(
            properties["bill_to"],
            json!({"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}],
                "description": "Where to bill, when it differs."})
        );
        assert_eq!(
            lowered["$defs"]["Shape"]["anyOf"].as_array().unwrap().len(),
            3
        );
        // What the canonical schema accepts, the lowered one accepts.
        let validator = jsonschema::draft202012::new(&lowered).unwrap();
        let order = json!({
            "ship_to": {"street": "Main St"},
            "unit": "celsius",
            "shape": "Empty",
            "payment": {"kind": "Cash"},
            "lines": [{"sku": "A-1", "quantity": 2}],
            "labels": ["x"],
            "small": 7,
            "ratio": 0.5,
            "initial": "Z",
            "email": "a@example.com"
        });
        assert!(
            jsonschema::draft202012::new(&canonical)
                .unwrap()
                .is_valid(&order)
        );
        assert!(validator.is_valid(&order));
    }

    #[test]
    fn a_default_that_is_not_an_option_lowers_and_stays_optional() {
        let canonical = canonical_schema_for::<WithDefault>();
        assert_eq!(
            err_kind(openai_strict(&canonical)),
            LoweringErrorKind::OptionalNotNullable
        );
        assert_eq!(
            anthropic_strict(&canonical).unwrap(),
            json!({"type": "object", "properties": {"city": {"type": "string"},
                "verbose": {"type": "boolean", "default": false}},
                "required": ["city"], "additionalProperties": false})
        );
    }

    #[test]
    fn min_items_above_one_is_written_as_one_and_other_counts_go() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "array", "items": {"type": "string", "minLength": 2}, "minItems": 3, "maxItems": 5, "uniqueItems": true},
            "b": {"type": "array", "items": {"type": "number", "multipleOf": 0.5, "exclusiveMinimum": 0}, "minItems": 0}
        }, "required": ["a", "b"]});
        let lowered = anthropic_strict(&schema).unwrap();
        assert_anthropic_strict(&lowered);
        assert_eq!(
            lowered["properties"],
            json!({"a": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                   "b": {"type": "array", "items": {"type": "number"}, "minItems": 0}})
        );
    }

    #[test]
    fn patterns_the_grammar_cannot_compile_are_dropped() {
        for (pattern, taken) in [
            ("^ORD-[0-9]{1,10}$", true),
            (r"^\d+(\.\d{2})?$", true),
            (r"^[a-z\\b]+$", true),
            (r"^[\b]$", false),
            (r"\bword", false),
            (r"^(a)\1$", false),
            (r"^(?<x>a)\k<x>$", false),
            ("^(?=.*[0-9]).+$", false),
            ("^(?!x).+$", false),
            ("(?<=a)b", false),
            ("(?<!a)b", false),
            ("^(?:ab)+$", true),
            ("^(?<name>ab)$", true),
            (r"^[(?=]$", true),
            (r"^\(\?=$", true),
            ("(?", true),
            ("", true),
        ] {
            assert_eq!(grammar_takes_pattern(pattern), taken, "{pattern}");
            let schema = json!({"type": "object", "properties": {"s": {"type": "string",
                "pattern": pattern}}, "required": ["s"]});
            let lowered = anthropic_strict(&schema).unwrap();
            assert_eq!(
                lowered["properties"]["s"].get("pattern").is_some(),
                taken,
                "{pattern}"
            );
        }
    }

    #[test]
    fn recursion_and_complex_enums_are_refused() {
        let err = refused(anthropic_strict(&canonical_schema_for::<Tree>()));
        assert_eq!(err.kind, LoweringErrorKind::Recursive);
        assert_eq!(err.target, LoweringTarget::AnthropicStrict);
        assert_eq!(err.pointer, "/properties/children/items");
        assert_eq!(
            err.to_string(),
            "cannot lower the schema at #/properties/children/items to Anthropic strict tool \
             use: `#` refers to a type that contains itself, and strict tool use takes no \
             recursive schema; break the recursion (an id instead of a nested value) to use \
             strict tool use"
        );
        let through_defs = json!({"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}, "required": ["n"],
            "$defs": {"N": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}]}}, "required": ["next"]}}});
        let err = refused(anthropic_strict(&through_defs));
        assert_eq!(err.kind, LoweringErrorKind::Recursive);
        assert_eq!(err.pointer, "/$defs/N/properties/next/anyOf/0");
        assert!(err.problem.starts_with("`#/$defs/N` refers to a type"));
        // A type used twice is no recursion.
        let twice = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#/$defs/A"}},
            "required": ["a", "b"], "$defs": {"A": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}});
        assert_anthropic_strict(&anthropic_strict(&twice).unwrap());
        for values in [json!([{"a": 1}]), json!([[1]])] {
            let schema =
                json!({"type": "object", "properties": {"e": {"enum": values}}, "required": ["e"]});
            assert_eq!(
                err_kind(anthropic_strict(&schema)),
                LoweringErrorKind::UnsupportedType
            );
        }
        let primitive = json!({"type": "object", "properties": {"e": {"enum": ["a", 1, true, null]},
            "c": {"const": 2.5}}, "required": ["e", "c"]});
        assert_anthropic_strict(&anthropic_strict(&primitive).unwrap());
    }

    #[test]
    fn the_documentation_names_every_keyword_and_format_kept() {
        let source = include_str!("anthropic_strict.rs");
        let start = source
            .find("/// Lowers a canonical schema to Anthropic strict tool use")
            .unwrap();
        let end = source.find("pub fn anthropic_strict").unwrap();
        let docs = &source[start..end];
        for (keyword, _) in ANTHROPIC_KEYWORDS {
            assert!(docs.contains(&format!("`{keyword}`")), "{keyword}");
        }
        for format in ANTHROPIC_FORMATS {
            assert!(docs.contains(&format!("`{format}`")), "{format}");
        }
    }
}
