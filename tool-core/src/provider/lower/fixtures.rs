//! Types and checks the lowering tests share: Rust types whose canonical schemas exercise every
//! rule, and assertions of each dialect's rules on a lowered schema.

use std::collections::{BTreeMap, HashSet};

use schemars::JsonSchema;
use serde_json::{Value, json};

use super::LoweringError;
use super::LoweringErrorKind;
use super::anthropic_strict::{ANTHROPIC_FORMATS, ANTHROPIC_KEYWORDS};
use super::strict::{Required, STRICT_FORMATS, STRICT_KEYWORDS, Takes};
use super::strict_limits::is_object;
use crate::schema::walk_schemas;

// Field docs become descriptions; a documented struct field is a `$ref` with a sibling.
#[allow(dead_code)]
#[derive(JsonSchema)]
pub(super) struct Address {
    street: String,
    zip: Option<u32>,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum Unit {
    Celsius,
    Fahrenheit,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
pub(super) enum Priority {
    /// Whenever.
    Low,
    /// Now.
    High,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
pub(super) enum Shape {
    Circle { radius: f64 },
    Square(f64),
    Empty,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
#[serde(tag = "kind")]
pub(super) enum Payment {
    Card { last4: String },
    Cash,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
pub(super) struct Line {
    sku: String,
    quantity: u16,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
pub(super) struct Order {
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
pub(super) struct Tree {
    name: String,
    children: Vec<Tree>,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
pub(super) struct WithDefault {
    city: String,
    #[serde(default)]
    verbose: bool,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
pub(super) struct WithMap {
    scores: BTreeMap<String, u32>,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
pub(super) struct WithTuple {
    point: (i32, i32),
}

#[allow(dead_code)]
#[derive(JsonSchema)]
pub(super) struct WithValue {
    extra: serde_json::Value,
}

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

/// Asserts every rule of OpenAI strict mode on `schema` and each schema in it.
pub(super) fn assert_strict(schema: &Value) {
    assert_subset(schema, &STRICT_KEYWORDS, &STRICT_FORMATS, Required::Every);
}

/// Asserts every rule of Anthropic's strict tool use on `schema` and each schema in it.
pub(super) fn assert_anthropic_strict(schema: &Value) {
    assert_subset(
        schema,
        &ANTHROPIC_KEYWORDS,
        &ANTHROPIC_FORMATS,
        Required::AsDeclared,
    );
    walk_schemas(schema, "", &mut |object, at| {
        if let Some(count) = object.get("minItems") {
            assert!(*count == json!(0) || *count == json!(1), "{at}: {count}");
        }
        let values = match (object.get("enum"), object.get("const")) {
            (Some(Value::Array(values)), _) => values.clone(),
            (_, Some(value)) => vec![value.clone()],
            _ => Vec::new(),
        };
        for value in values {
            assert!(!value.is_object() && !value.is_array(), "{at}: {value}");
        }
    });
}

/// Asserts the rules both strict subsets share, with the subset's keywords and formats: only
/// those keywords (`oneOf` written as `anyOf`), a `$ref` alone, a type for every schema, and
/// closed objects whose `required` lists every property or only properties.
fn assert_subset(schema: &Value, keywords: &[(&str, Takes)], formats: &[&str], required: Required) {
    assert_eq!(
        schema["type"], "object",
        "the root must be an object: {schema}"
    );
    assert!(schema.get("anyOf").is_none(), "the root must not be anyOf");
    jsonschema::meta::validate(schema).expect("a valid JSON Schema 2020-12");
    walk_schemas(schema, "", &mut |object, at| {
        for keyword in object.keys() {
            let kept = keyword != "oneOf" && keywords.iter().any(|(known, _)| known == keyword);
            assert!(kept, "{at}: `{keyword}` in {object:?}");
        }
        if let Some(format) = object.get("format") {
            assert!(
                formats.contains(&format.as_str().unwrap()),
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
            let listed: Vec<&str> = object["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|name| name.as_str().unwrap())
                .collect();
            match required {
                Required::Every => {
                    assert_eq!(properties, listed, "{at}: every property is required");
                }
                Required::AsDeclared => assert!(
                    listed
                        .iter()
                        .all(|name| properties.iter().any(|p| p == name)),
                    "{at}: only properties are required"
                ),
            }
        }
    });
}

/// Asserts Gemini's rules: its keywords only, one type per schema, string enums, no `$ref`.
pub(super) fn assert_gemini(schema: &Value) {
    assert_eq!(schema["type"], "object");
    jsonschema::meta::validate(schema).expect("a valid JSON Schema 2020-12");
    assert!(!schema.to_string().contains("$ref"), "{schema}");
    assert!(!schema.to_string().contains("$defs"), "{schema}");
    walk_schemas(schema, "", &mut |object, at| {
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

pub(super) fn refused(result: Result<Value, LoweringError>) -> LoweringError {
    match result {
        Ok(value) => panic!("expected an error, got {value}"),
        Err(err) => err,
    }
}

pub(super) fn err_kind(result: Result<Value, LoweringError>) -> LoweringErrorKind {
    refused(result).kind
}
