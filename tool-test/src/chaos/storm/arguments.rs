//! Arguments drawn from a tool's input schema: values that keep to it, and calls that break it
//! the ways a model does (a required field left out, a field the tool does not take, a value of
//! the wrong type, arguments that are not an object, text that is not JSON).
//!
//! The schema is read as `#[tool]` and schemars write it: `type` (one or several), `properties`,
//! `required`, `additionalProperties`, `items`, `enum`, `const`, `$ref` into `$defs`, `oneOf`,
//! `anyOf`, the bounds of numbers, strings and arrays, and the `format`s `date-time`, `date`,
//! `uuid` and `email`. A `pattern` is not followed: a value drawn for it may be refused, which
//! only makes that call an invalid one.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::Union;
use serde_json::{Map, Value, json};

/// How deep nested schemas and `$ref`s are followed; deeper, a value is `null`.
const DEPTH: usize = 6;

/// The characters of drawn strings: few, so that two draws meet often.
const ALPHABET: [char; 8] = ['a', 'b', 'c', '1', '2', '3', '-', 'Z'];

/// The unknown field a [`Breach::Stray`] adds.
pub(super) const STRAY: &str = "toolgate_stray";

/// A way a model's call breaks a tool's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Breach {
    /// A required field left out (with none required, a stray field added).
    LeaveOut,
    /// A field the tool does not take.
    Stray,
    /// A field's value of another type.
    WrongType,
    /// Arguments that are not an object.
    NotAnObject,
    /// Arguments text that is not JSON (in the formats whose arguments are text; an array in
    /// the others).
    NotJson,
}

impl Breach {
    /// Every breach, in the order shrinking prefers them.
    pub(super) const ALL: [Breach; 5] = [
        Breach::LeaveOut,
        Breach::Stray,
        Breach::WrongType,
        Breach::NotAnObject,
        Breach::NotJson,
    ];
}

/// A call's arguments: a JSON value, or text that is not JSON.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Arguments {
    /// A JSON value.
    Json(Value),
    /// Text that is not JSON.
    Text(String),
}

/// `valid`, broken by `breach` as the schema `schema` describes it.
pub(super) fn broken(valid: &Value, schema: &Value, breach: Breach) -> Arguments {
    let mut object = valid.as_object().cloned().unwrap_or_default();
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|field| object.contains_key(*field));
    match (breach, required) {
        (Breach::LeaveOut, Some(field)) => {
            object.remove(field);
        }
        (Breach::LeaveOut | Breach::Stray, _) => {
            object.insert(STRAY.to_owned(), json!(true));
        }
        (Breach::WrongType, _) => match object.iter_mut().next() {
            Some((_, value)) => *value = wrong_type(value),
            None => return Arguments::Json(json!("not an object")),
        },
        (Breach::NotAnObject, _) => return Arguments::Json(json!(["not", "an", "object"])),
        (Breach::NotJson, _) => {
            let text = Value::Object(object).to_string();
            return Arguments::Text(text[..text.len() / 2].to_owned());
        }
    }
    Arguments::Json(Value::Object(object))
}

/// A value of another type than `value`'s.
fn wrong_type(value: &Value) -> Value {
    match value {
        Value::String(_) => json!(12345),
        _ => json!("a value of the wrong type"),
    }
}

/// Values that keep to `schema`, the whole of a tool's input schema (its `$defs` with it).
pub(super) fn valid(schema: &Value) -> BoxedStrategy<Value> {
    values(schema, schema, 0)
}

fn values(schema: &Value, root: &Value, depth: usize) -> BoxedStrategy<Value> {
    let Some(object) = schema.as_object().filter(|_| depth <= DEPTH) else {
        // `true`, `{}` or too deep: anything goes, and a null is anything.
        return Just(Value::Null).boxed();
    };
    if let Some(value) = object.get("const") {
        return Just(value.clone()).boxed();
    }
    if let Some(Value::Array(options)) = object.get("enum")
        && !options.is_empty()
    {
        return select(options.clone()).boxed();
    }
    if let Some(Value::String(reference)) = object.get("$ref") {
        return match resolve(root, reference) {
            Some(target) => values(target, root, depth + 1),
            None => Just(Value::Null).boxed(),
        };
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(options)) = object.get(key)
            && !options.is_empty()
        {
            let options = options.iter().map(|option| values(option, root, depth + 1));
            return Union::new(options).boxed();
        }
    }
    if let Some(Value::Array(all)) = object.get("allOf")
        && let Some(first) = all.first()
    {
        return values(first, root, depth + 1);
    }
    match object.get("type") {
        Some(Value::String(kind)) => typed(kind, object, root, depth),
        Some(Value::Array(kinds)) if !kinds.is_empty() => Union::new(
            kinds
                .iter()
                .filter_map(Value::as_str)
                .map(|kind| typed(kind, object, root, depth)),
        )
        .boxed(),
        _ if object.contains_key("properties") => typed("object", object, root, depth),
        _ => Just(Value::Null).boxed(),
    }
}

/// The definition `reference` (`#/$defs/Name`, `#/definitions/Name`) points at in `root`.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    root.pointer(reference.strip_prefix('#')?)
}

fn typed(
    kind: &str,
    object: &Map<String, Value>,
    root: &Value,
    depth: usize,
) -> BoxedStrategy<Value> {
    match kind {
        "boolean" => any::<bool>().prop_map(Value::Bool).boxed(),
        "integer" => integers(object).prop_map(Value::from).boxed(),
        "number" => numbers(object),
        "string" => strings(object),
        "array" => arrays(object, root, depth),
        "object" => objects(object, root, depth),
        _ => Just(Value::Null).boxed(),
    }
}

fn bound(object: &Map<String, Value>, key: &str) -> Option<f64> {
    object.get(key).and_then(Value::as_f64)
}

/// The lowest and the highest number `object` allows.
fn bounds(object: &Map<String, Value>) -> (f64, f64) {
    let low = match (bound(object, "minimum"), bound(object, "exclusiveMinimum")) {
        (Some(min), Some(exclusive)) => min.max(exclusive + 1.0),
        (Some(min), None) => min,
        (None, Some(exclusive)) => exclusive + 1.0,
        (None, None) => -1_000.0,
    };
    let high = match (bound(object, "maximum"), bound(object, "exclusiveMaximum")) {
        (Some(max), Some(exclusive)) => max.min(exclusive - 1.0),
        (Some(max), None) => max,
        (None, Some(exclusive)) => exclusive - 1.0,
        (None, None) => 1_000_000.0,
    };
    (low, high)
}

/// Whole numbers within the bounds: mostly small, some up to ten thousand (over an approval
/// threshold, often), and the bounds themselves.
fn integers(object: &Map<String, Value>) -> BoxedStrategy<i64> {
    let (low, high) = bounds(object);
    // Bounds past an i64's are an i64's; the casts saturate.
    let (low, high) = (low.ceil() as i64, high.floor() as i64);
    if low > high {
        return Just(low).boxed();
    }
    let small = low.max(-3)..=high.min(20).max(low.max(-3));
    let large = low.max(0)..=high.min(10_000).max(low.max(0));
    prop_oneof![
        4 => small,
        3 => large,
        1 => Just(low),
        1 => Just(high),
    ]
    .prop_map(move |n| n.clamp(low, high))
    .boxed()
}

/// Numbers within the bounds: the integers', and halves.
fn numbers(object: &Map<String, Value>) -> BoxedStrategy<Value> {
    let (low, high) = bounds(object);
    integers(object)
        .prop_flat_map(move |n| {
            let half = n as f64 + 0.5;
            let n = Value::from(n as f64);
            if half <= high && half >= low {
                prop_oneof![3 => Just(n), 1 => Just(Value::from(half))].boxed()
            } else {
                Just(n).boxed()
            }
        })
        .boxed()
}

fn strings(object: &Map<String, Value>) -> BoxedStrategy<Value> {
    let sample = match object.get("format").and_then(Value::as_str) {
        Some("date-time") => Some(vec!["2026-12-07T10:00:00Z", "2026-12-08T12:30:00Z"]),
        Some("date") => Some(vec!["2026-12-07", "2026-12-08"]),
        Some("uuid") => Some(vec![
            "67e55044-10b1-426f-9247-bb680e5fe0c8",
            "2c8f3e1a-5b9d-4c7e-8a6f-1d2e3f4a5b6c",
        ]),
        Some("email") => Some(vec!["ana@example.com", "bo@example.com"]),
        _ => None,
    };
    if let Some(sample) = sample {
        return select(sample).prop_map(Value::from).boxed();
    }
    let length = |key| {
        object
            .get(key)
            .and_then(Value::as_u64)
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
    };
    // Not empty unless the schema says so: a model seldom sends an empty name.
    let max = length("maxLength").unwrap_or(usize::MAX);
    let min = length("minLength").unwrap_or(1).min(max);
    let max = max.min(min + 6);
    vec(select(ALPHABET.as_slice()), min..=max.max(min))
        .prop_map(|chars| Value::String(chars.into_iter().collect()))
        .boxed()
}

fn arrays(object: &Map<String, Value>, root: &Value, depth: usize) -> BoxedStrategy<Value> {
    let count = |key| {
        object
            .get(key)
            .and_then(Value::as_u64)
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
    };
    let min = count("minItems").unwrap_or(0);
    let max = count("maxItems").unwrap_or(usize::MAX).min(min + 3);
    let items = object.get("items").unwrap_or(&Value::Bool(true));
    vec(values(items, root, depth + 1), min..=max.max(min))
        .prop_map(Value::Array)
        .boxed()
}

fn objects(object: &Map<String, Value>, root: &Value, depth: usize) -> BoxedStrategy<Value> {
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut fields: Vec<BoxedStrategy<Option<(String, Value)>>> = Vec::new();
    if let Some(Value::Object(properties)) = object.get("properties") {
        for (name, schema) in properties {
            let name = name.clone();
            let value = values(schema, root, depth + 1);
            fields.push(if required.contains(&name.as_str()) {
                value
                    .prop_map(move |value| Some((name.clone(), value)))
                    .boxed()
            } else {
                proptest::option::of(value)
                    .prop_map(move |value| value.map(|value| (name.clone(), value)))
                    .boxed()
            });
        }
    }
    // A map (`HashMap<String, T>`): a few entries of its values.
    let entries = match object.get("additionalProperties") {
        Some(schema @ Value::Object(_)) => vec(
            (
                vec(select(ALPHABET.as_slice()), 1..=3),
                values(schema, root, depth + 1),
            ),
            0..=2,
        )
        .prop_map(|entries| {
            entries
                .into_iter()
                .map(|(name, value)| (name.into_iter().collect::<String>(), value))
                .collect::<Vec<_>>()
        })
        .boxed(),
        _ => Just(Vec::new()).boxed(),
    };
    (fields, entries)
        .prop_map(|(fields, entries)| {
            let mut map = Map::new();
            map.extend(entries);
            map.extend(fields.into_iter().flatten());
            Value::Object(map)
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    use super::*;

    fn draws(schema: &Value, count: usize) -> Vec<Value> {
        let strategy = valid(schema);
        let mut runner = TestRunner::deterministic();
        (0..count)
            .map(|_| strategy.new_tree(&mut runner).unwrap().current())
            .collect()
    }

    #[test]
    fn drawn_values_keep_to_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "minLength": 2, "maxLength": 4},
                "amount": {"type": "integer", "minimum": 1, "maximum": 9000},
                "mode": {"$ref": "#/$defs/Mode"},
                "note": {"type": ["string", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            },
            "required": ["order_id", "amount", "mode"],
            "additionalProperties": false,
            "$defs": {"Mode": {"type": "string", "enum": ["fast", "slow"]}},
        });
        for value in draws(&schema, 200) {
            let order = value["order_id"].as_str().unwrap();
            assert!((2..=4).contains(&order.chars().count()), "{value}");
            let amount = value["amount"].as_i64().unwrap();
            assert!((1..=9000).contains(&amount), "{value}");
            assert!(["fast", "slow"].contains(&value["mode"].as_str().unwrap()));
            assert!(
                value
                    .get("note")
                    .is_none_or(|note| note.is_string() || note.is_null())
            );
            assert!(
                value
                    .get("tags")
                    .is_none_or(|tags| tags.as_array().unwrap().len() <= 2)
            );
            let fields = value.as_object().unwrap().keys();
            assert!(
                fields
                    .into_iter()
                    .all(|field| schema["properties"].get(field).is_some()),
                "{value}"
            );
        }
    }

    #[test]
    fn each_breach_breaks_what_it_names() {
        let schema = json!({"type": "object", "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"]});
        let valid = json!({"order_id": "a1"});
        assert_eq!(
            broken(&valid, &schema, Breach::LeaveOut),
            Arguments::Json(json!({}))
        );
        assert_eq!(
            broken(&valid, &schema, Breach::Stray),
            Arguments::Json(json!({"order_id": "a1", STRAY: true}))
        );
        assert_eq!(
            broken(&valid, &schema, Breach::WrongType),
            Arguments::Json(json!({"order_id": 12345}))
        );
        assert!(matches!(
            broken(&valid, &schema, Breach::NotAnObject),
            Arguments::Json(Value::Array(_))
        ));
        let Arguments::Text(text) = broken(&valid, &schema, Breach::NotJson) else {
            panic!("text");
        };
        assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");
    }
}
