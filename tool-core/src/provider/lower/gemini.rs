//! Gemini's `parameters`, an OpenAPI 3.0 subset: every `$ref` inlined, one type per schema,
//! `nullable` instead of a `null` type or branch, string enums, inclusive bounds.

use serde_json::{Map, Value};

use super::error::{LoweringError, LoweringErrorKind, LoweringTarget};
use super::lowerer::{Dialect, Lowerer};
use super::nullable::is_null_only;
use crate::schema::child_pointer as child;

/// How many schema nodes a Gemini lowering may produce (inlining can multiply a small schema).
const GEMINI_MAX_NODES: usize = 20_000;

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
/// in for integers). Gemini keeps bounds as doubles, so a bound a double does not hold exactly
/// is dropped (`u64::MAX` and `i64::MAX`, the upper bounds of 64-bit and wider integers; their
/// lower bounds, `0` and `i64::MIN`, stay).
/// Everything else that only loosens (`additionalProperties: false`, `uniqueItems`,
/// `multipleOf`, other formats, those bounds) is dropped, as the validator still enforces it. Maps,
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
    let lowered = Lowerer::<Gemini>::lower_document(schema)?;
    if lowered.get("type").and_then(Value::as_str) != Some("object")
        || lowered.contains_key("nullable")
    {
        return Err(LoweringError::root_not_object(LoweringTarget::Gemini));
    }
    Ok(Value::Object(lowered))
}

/// The Gemini dialect.
pub(super) struct Gemini;

/// What the keywords of one schema leave for [`Gemini::finish`].
#[derive(Default)]
pub(super) struct GeminiNode {
    /// A `null` type, enum value or union branch was seen.
    nullable: bool,
    /// The one branch left of a union, merged into the schema when it is finished.
    single_branch: Option<Map<String, Value>>,
}

impl Dialect for Gemini {
    const TARGET: LoweringTarget = LoweringTarget::Gemini;
    const RECURSIVE_FIX: &'static str = "Gemini's `parameters` cannot describe recursive types; \
                                         break the recursion (an id instead of a nested value)";
    type Node = GeminiNode;

    /// Always: Gemini has no `$ref`.
    fn inlines(_: &Lowerer<'_, Self>, _: &Map<String, Value>, _: bool) -> bool {
        true
    }

    /// `properties`, `items` and unions; `$defs` are inlined where used.
    fn descends(keyword: &str) -> bool {
        matches!(keyword, "properties" | "items" | "anyOf" | "oneOf")
    }

    fn skips_branch(branch: &Value, node: &mut GeminiNode) -> bool {
        let null = is_null_only(branch);
        node.nullable |= null;
        null
    }

    fn union(
        lowerer: &Lowerer<'_, Self>,
        mut branches: Vec<Map<String, Value>>,
        at: &str,
        out: &mut Map<String, Value>,
        node: &mut GeminiNode,
    ) -> Result<(), LoweringError> {
        match branches.len() {
            0 => Err(lowerer.error(
                LoweringErrorKind::UnsupportedType,
                at,
                "a union whose only branch is null",
                "give the field a type other than `()`",
            )),
            1 => {
                node.single_branch = branches.pop();
                Ok(())
            }
            _ => {
                let branches = branches.into_iter().map(Value::Object).collect();
                out.insert("anyOf".into(), Value::Array(branches));
                Ok(())
            }
        }
    }

    fn keyword(
        lowerer: &Lowerer<'_, Self>,
        schema: &Map<String, Value>,
        keyword: &str,
        value: &Value,
        pointer: &str,
        out: &mut Map<String, Value>,
        node: &mut GeminiNode,
    ) -> Result<(), LoweringError> {
        let at = child(pointer, keyword);
        match keyword {
            "type" => {
                let (name, null) = gemini_type(lowerer, value, &at)?;
                node.nullable |= null;
                out.insert(keyword.to_owned(), Value::from(name));
            }
            "enum" | "const" => {
                let values = match (keyword, value) {
                    ("enum", Value::Array(values)) => values.as_slice(),
                    ("const", value) => std::slice::from_ref(value),
                    _ => &[],
                };
                let (strings, null) = gemini_enum(lowerer, values, &at)?;
                node.nullable |= null;
                out.insert("enum".into(), Value::Array(strings));
            }
            "required" => {
                if let Some(names) = value.as_array() {
                    let names = names
                        .iter()
                        .filter(|name| name.is_string())
                        .cloned()
                        .collect();
                    out.insert(keyword.to_owned(), Value::Array(names));
                }
            }
            "description" | "title" | "pattern" if value.is_string() => {
                out.insert(keyword.to_owned(), value.clone());
            }
            "default" if !value.is_null() => {
                out.insert(keyword.to_owned(), value.clone());
            }
            "example" => {
                out.insert(keyword.to_owned(), value.clone());
            }
            "examples" if !schema.contains_key("example") => {
                if let Some(first) = value.as_array().and_then(|values| values.first()) {
                    out.insert("example".into(), first.clone());
                }
            }
            "minimum" | "maximum" if is_exact_double(value) => {
                out.insert(keyword.to_owned(), value.clone());
            }
            "minItems" | "maxItems" | "minLength" | "maxLength" | "minProperties"
            | "maxProperties"
                if value.is_number() =>
            {
                out.insert(keyword.to_owned(), value.clone());
            }
            "propertyOrdering" if value.is_array() => {
                out.insert(keyword.to_owned(), value.clone());
            }
            // `format` and the exclusive bounds are decided once the type is known;
            // `additionalProperties: false` and the rest only loosen what the model is told.
            _ => {}
        }
        Ok(())
    }

    fn finish(
        lowerer: &Lowerer<'_, Self>,
        schema: &Map<String, Value>,
        mut out: Map<String, Value>,
        node: GeminiNode,
        pointer: &str,
        is_root: bool,
    ) -> Result<Map<String, Value>, LoweringError> {
        let GeminiNode {
            mut nullable,
            single_branch,
        } = node;
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
                return Err(lowerer.error(
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
            return Err(lowerer.unconstrained(pointer));
        }
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        let no_properties = out
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty);
        if !is_root && out.get("type").and_then(Value::as_str) == Some("object") && no_properties {
            let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
            return Err(if closed {
                lowerer.error(
                    LoweringErrorKind::UnsupportedType,
                    pointer,
                    "an object without properties, which Gemini rejects",
                    "remove the empty struct or give it a field",
                )
            } else {
                lowerer.open_object(pointer)
            });
        }
        Ok(out)
    }

    fn check_size(lowerer: &Lowerer<'_, Self>, pointer: &str) -> Result<(), LoweringError> {
        if lowerer.nodes > GEMINI_MAX_NODES {
            return Err(lowerer.error(
                LoweringErrorKind::TooLarge,
                pointer,
                format!("inlining every `$ref` yields more than {GEMINI_MAX_NODES} schemas"),
                "split the tool or share fewer large types between its arguments",
            ));
        }
        Ok(())
    }
}

/// Gemini's single type name, and whether `null` was among the types.
fn gemini_type(
    lowerer: &Lowerer<'_, Gemini>,
    value: &Value,
    pointer: &str,
) -> Result<(String, bool), LoweringError> {
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
        [] => Err(lowerer.error(
            LoweringErrorKind::UnsupportedType,
            pointer,
            "the type `null` alone",
            "give the field a type other than `()`",
        )),
        _ => Err(lowerer.error(
            LoweringErrorKind::UnsupportedType,
            pointer,
            format!("`type` is {value}"),
            "use one type per schema (an enum of structs becomes `anyOf`)",
        )),
    }
}

/// The string values of an enum and whether `null` was among them.
fn gemini_enum(
    lowerer: &Lowerer<'_, Gemini>,
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
        return Err(lowerer.error(
            LoweringErrorKind::UnsupportedType,
            pointer,
            "an enum or const with values that are not strings",
            "Gemini enums hold strings only: use a string enum (a Rust enum of unit variants)",
        ));
    }
    Ok((rest, null))
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

/// Whether `bound` is a number that a double holds exactly. Gemini's `Schema` keeps `minimum`
/// and `maximum` as doubles, so a bound a double rounds (`u64::MAX` and `i64::MAX`, the bounds
/// of `u64`, `i64`, `usize` and `isize`, round past the type's range) is dropped rather than
/// sent as another number: the validator still enforces it, and beyond 2^53 the integers are
/// past what a double tells apart, so the bound says nothing a JSON number can use.
fn is_exact_double(bound: &Value) -> bool {
    // An integer is exact when its significant bits fit the 53 of a double's significand.
    let exact = |magnitude: u64| {
        magnitude == 0 || 64 - magnitude.leading_zeros() - magnitude.trailing_zeros() <= 53
    };
    match (bound.as_u64(), bound.as_i64()) {
        (Some(n), _) => exact(n),
        (None, Some(n)) => exact(n.unsigned_abs()),
        // A number held as a double is one.
        (None, None) => bound.is_f64(),
    }
}

/// Exclusive bounds as the inclusive ones Gemini has: one step in for an integer bound on an
/// integer, the bound itself otherwise (which only loosens by the bound's own value). The
/// tighter of the two bounds wins, among those a double holds exactly ([`is_exact_double`]).
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
        Some(stepped.unwrap_or_else(|| value.clone())).filter(is_exact_double)
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::provider::lower::fixtures::*;
    use crate::provider::lower::{LoweringErrorKind, gemini, openai_strict};
    use crate::schema::canonical_schema_for;

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
        // An f32's range: bounds a double holds exactly.
        let max = f64::from(f32::MAX);
        assert_eq!(
            properties["ratio"],
            json!({"type": "number", "format": "float", "minimum": -max, "maximum": max})
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

    /// Whether `bound` is a number that a double holds exactly, as Gemini's `Schema` keeps it.
    fn a_double_holds(bound: &Value) -> bool {
        match (bound.as_u64(), bound.as_i64()) {
            (Some(n), _) => (n as f64) < 18_446_744_073_709_551_616.0 && n as f64 as u64 == n,
            (None, Some(n)) => n as f64 as i64 == n,
            (None, None) => bound.is_f64(),
        }
    }

    #[test]
    fn gemini_bounds_are_numbers_a_double_holds_exactly() {
        #[allow(dead_code)]
        #[derive(schemars::JsonSchema)]
        struct Wide {
            a: u64,
            b: i64,
            c: u128,
            d: i128,
            e: usize,
            f: isize,
            g: u32,
            h: i32,
        }
        let lowered = gemini(&canonical_schema_for::<Wide>()).unwrap();
        assert_gemini(&lowered);
        let mut bounds = 0;
        crate::schema::walk_schemas(&lowered, "", &mut |object, at| {
            for keyword in ["minimum", "maximum"] {
                if let Some(bound) = object.get(keyword) {
                    bounds += 1;
                    assert!(a_double_holds(bound), "{at}/{keyword}: {bound}");
                }
            }
        });
        let properties = &lowered["properties"];
        // What a double holds stays; a bound at the edge of the JSON number range goes.
        assert_eq!(properties["a"], json!({"type": "integer", "minimum": 0}));
        assert_eq!(
            properties["b"],
            json!({"type": "integer", "format": "int64", "minimum": i64::MIN})
        );
        assert_eq!(
            properties["g"],
            json!({"type": "integer", "minimum": 0, "maximum": u32::MAX})
        );
        assert_eq!(
            properties["h"],
            json!({"type": "integer", "format": "int32", "minimum": i32::MIN, "maximum": i32::MAX})
        );
        assert_eq!(bounds, 10);
        // An exclusive bound made inclusive past what a double holds leaves the other bound.
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer",
            "minimum": 5, "exclusiveMinimum": 9_007_199_254_740_992u64,
            "exclusiveMaximum": 18_446_744_073_709_551_615u64}}, "required": ["n"]});
        assert_eq!(
            gemini(&schema).unwrap()["properties"]["n"],
            json!({"type": "integer", "minimum": 5})
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
}
