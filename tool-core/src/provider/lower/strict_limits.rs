//! Strict mode's size limits, checked on a lowered schema: nesting depth, properties, enum
//! values and characters of names and values.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::error::{LoweringError, LoweringErrorKind, LoweringTarget};
use crate::schema::{subschemas, walk_schemas};

/// Strict mode's limit on the object nesting depth.
pub(super) const STRICT_MAX_DEPTH: usize = 10;
/// Strict mode's limit on the number of object properties in one schema.
pub(super) const STRICT_MAX_PROPERTIES: usize = 5_000;
/// Strict mode's limit on the number of enum values in one schema.
const STRICT_MAX_ENUM_VALUES: usize = 1_000;
/// Strict mode's limit on the characters of property names, definition names, enum and const
/// values together.
const STRICT_MAX_CHARS: usize = 120_000;

/// Checks strict mode's size limits on a lowered schema.
pub(super) fn check_strict_limits(schema: &Value) -> Result<(), LoweringError> {
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
    walk_schemas(schema, "", &mut |object, _| {
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
/// recursive reference adds nothing), and the pointer of the deepest one. Definitions count
/// only where they are referenced.
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
    for sub in subschemas(object).filter(|sub| sub.keyword != "$defs") {
        consider(object_depth(sub.schema, &sub.pointer(pointer), root, memo));
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

/// Whether a schema describes an object (it has `properties`, or `object` among its types).
pub(super) fn is_object(schema: &Map<String, Value>) -> bool {
    schema.contains_key("properties")
        || match schema.get("type") {
            Some(Value::String(name)) => name == "object",
            Some(Value::Array(names)) => names.iter().any(|name| name == "object"),
            _ => false,
        }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value, json};

    use super::*;
    use crate::provider::lower::fixtures::*;
    use crate::provider::lower::{LoweringErrorKind, openai_strict};

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
}
