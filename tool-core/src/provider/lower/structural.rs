//! Keywords that change which arguments are valid in ways no dialect here can express and that
//! cannot be dropped: each is refused with the problem and what to change in the Rust type.

use serde_json::{Map, Value};

use super::error::LoweringError;
use super::error::LoweringErrorKind::{self, OpenObject, UnsupportedKeyword};
use super::lowerer::{Dialect, Lowerer};
use crate::schema::child_pointer as child;

/// The problem and the fix for a keyword no dialect can take, or `None`.
fn structural_keyword(keyword: &str) -> Option<(LoweringErrorKind, &'static str, &'static str)> {
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

impl<D: Dialect> Lowerer<'_, D> {
    /// Refuses a normalized schema that uses a structural keyword, describes a map, or has both
    /// `anyOf` and `oneOf`.
    pub(super) fn refuse_structural(
        &self,
        schema: &Map<String, Value>,
        pointer: &str,
    ) -> Result<(), LoweringError> {
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
                    OpenObject,
                    &child(pointer, "additionalProperties"),
                    "an object with arbitrary keys (a map)",
                    "use a Vec of structs with a key field instead of a map",
                ));
            }
        }
        if schema.contains_key("anyOf") && schema.contains_key("oneOf") {
            return Err(self.error(
                UnsupportedKeyword,
                pointer,
                "both `anyOf` and `oneOf` on one schema",
                "remove the custom schema attribute that adds one of them",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::provider::lower::fixtures::*;
    use crate::provider::lower::{LoweringErrorKind, gemini, openai_strict};
    use crate::schema::canonical_schema_for;

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
}
