//! Generators of tool arguments for the property tests: JSON numbers at the edges of every
//! numeric type, and objects that are mostly right.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Any JSON number, with the edges of the integer types, of `f64`, and of the two paths that
/// read them (`3.0` for an integer, `-0.0`).
pub(crate) fn any_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-300i32..300).prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::from),
        Just(json!(1e300)),
        Just(json!(-1e300)),
        Just(json!(18446744073709551615u64)),
        Just(json!(-9223372036854775808i64)),
        Just(json!(1.8446744073709552e19)),
        Just(json!(255.0)),
        Just(json!(3.0)),
        Just(json!(-0.0)),
        Just(json!(128)),
        Just(json!(-129)),
        Just(json!(256)),
        Just(json!(-32769)),
        Just(json!(65536)),
        Just(json!(4294967296u64)),
        Just(json!(0.5)),
    ]
}

/// Objects that are mostly right: each of `fields` present with the odds `present` gives it,
/// valued by `value`; and, one time in `stray_one_in`, the `stray` fields too.
pub(crate) fn near_valid(
    fields: &[&'static str],
    present: impl Fn(&str) -> f64,
    value: impl Fn(&'static str) -> BoxedStrategy<Value>,
    stray: impl Strategy<Value = Vec<(String, Value)>>,
    stray_one_in: u8,
) -> impl Strategy<Value = Value> {
    let fields: Vec<_> = fields
        .iter()
        .map(|&field| {
            prop::option::weighted(present(field), value(field)).prop_map(move |v| (field, v))
        })
        .collect();
    (fields, stray, 0..stray_one_in).prop_map(|(fields, stray, draw)| {
        let mut map = Map::new();
        for (field, value) in fields {
            if let Some(value) = value {
                map.insert(field.to_owned(), value);
            }
        }
        if draw == 0 {
            map.extend(stray);
        }
        Value::Object(map)
    })
}
