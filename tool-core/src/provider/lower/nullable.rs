//! Whether a schema lets `null` through: strict mode needs it of every optional property, and
//! Gemini turns a `null` branch into `nullable: true`.

use serde_json::Value;

use super::normalize::MAX_MERGES;

/// Whether a union branch is only `null`.
pub(super) fn is_null_only(schema: &Value) -> bool {
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
pub(super) fn accepts_null(schema: &Value, root: &Value, depth: usize) -> bool {
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
