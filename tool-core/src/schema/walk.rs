//! The subschemas of a schema, and the two walks over every schema in a tree: one that reads,
//! one that rewrites. Every place in this crate that visits the schemas inside a schema goes
//! through them, so the list of keywords that hold subschemas exists once.

use serde_json::{Map, Value};

/// How a keyword holds its subschemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holds {
    /// The value is one schema (`items`, `not`, …).
    One,
    /// The value is an array of schemas (`anyOf`, `prefixItems`, …).
    List,
    /// The value maps names to schemas (`properties`, `$defs`, …).
    Map,
}

/// How `keyword` holds subschemas in JSON Schema 2020-12 (and draft-07's `definitions`), or
/// `None` when its value is not made of schemas.
pub(crate) fn holds(keyword: &str) -> Option<Holds> {
    Some(match keyword {
        "properties" | "$defs" | "definitions" | "patternProperties" | "dependentSchemas" => {
            Holds::Map
        }
        "allOf" | "anyOf" | "oneOf" | "prefixItems" => Holds::List,
        "items"
        | "additionalProperties"
        | "not"
        | "if"
        | "then"
        | "else"
        | "contains"
        | "propertyNames"
        | "unevaluatedItems"
        | "unevaluatedProperties" => Holds::One,
        _ => return None,
    })
}

/// One subschema directly under a schema object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Subschema<'a> {
    /// The keyword that holds it.
    pub(crate) keyword: &'a str,
    /// Its name (under `properties`, …) or position (under `anyOf`, …), if the keyword holds
    /// more than one.
    pub(crate) entry: Entry<'a>,
    /// The subschema.
    pub(crate) schema: &'a Value,
}

/// Where a subschema sits under its keyword.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Entry<'a> {
    /// The keyword's value is the subschema.
    Itself,
    /// The subschema of this name.
    Named(&'a str),
    /// The subschema at this position.
    Index(usize),
}

impl Subschema<'_> {
    /// The JSON pointer of the subschema, given the pointer of the schema that holds it.
    pub(crate) fn pointer(&self, parent: &str) -> String {
        let at = child_pointer(parent, self.keyword);
        match self.entry {
            Entry::Itself => at,
            Entry::Named(name) => child_pointer(&at, name),
            Entry::Index(index) => child_pointer(&at, &index.to_string()),
        }
    }
}

/// The subschemas directly under `object`, keyword by keyword in the object's order.
pub(crate) fn subschemas(object: &Map<String, Value>) -> impl Iterator<Item = Subschema<'_>> {
    object.iter().flat_map(|(keyword, value)| {
        let keyword = keyword.as_str();
        let holds = holds(keyword);
        let one = (holds == Some(Holds::One)).then_some(Subschema {
            keyword,
            entry: Entry::Itself,
            schema: value,
        });
        let list = match (holds, value) {
            (Some(Holds::List), Value::Array(list)) => list.as_slice(),
            _ => &[],
        };
        let map = match (holds, value) {
            (Some(Holds::Map), Value::Object(map)) => Some(map),
            _ => None,
        };
        one.into_iter()
            .chain(
                list.iter()
                    .enumerate()
                    .map(move |(index, schema)| Subschema {
                        keyword,
                        entry: Entry::Index(index),
                        schema,
                    }),
            )
            .chain(
                map.into_iter()
                    .flatten()
                    .map(move |(name, schema)| Subschema {
                        keyword,
                        entry: Entry::Named(name),
                        schema,
                    }),
            )
    })
}

/// The subschemas directly under `object`, to rewrite, in the object's order.
pub(crate) fn subschemas_mut(object: &mut Map<String, Value>) -> impl Iterator<Item = &mut Value> {
    object.iter_mut().flat_map(|(keyword, value)| {
        let (one, list, map): (
            Option<&mut Value>,
            &mut [Value],
            Option<&mut Map<String, Value>>,
        ) = match (holds(keyword), value) {
            (Some(Holds::One), value) => (Some(value), &mut [], None),
            (Some(Holds::List), Value::Array(list)) => (None, list.as_mut_slice(), None),
            (Some(Holds::Map), Value::Object(map)) => (None, &mut [], Some(map)),
            _ => (None, &mut [], None),
        };
        one.into_iter()
            .chain(list.iter_mut())
            .chain(map.into_iter().flat_map(|map| map.values_mut()))
    })
}

/// Calls `visit` on every schema object in `schema` with its JSON pointer (`pointer` is the
/// pointer of `schema` itself), the root first, descending through every keyword of JSON
/// Schema 2020-12 that holds subschemas.
pub(crate) fn walk_schemas(
    schema: &Value,
    pointer: &str,
    visit: &mut dyn FnMut(&Map<String, Value>, &str),
) {
    let Some(object) = schema.as_object() else {
        return;
    };
    visit(object, pointer);
    for sub in subschemas(object) {
        walk_schemas(sub.schema, &sub.pointer(pointer), visit);
    }
}

/// Calls `visit` on every schema object in `schema`, the root first, descending through every
/// keyword of JSON Schema 2020-12 that holds subschemas.
pub fn walk_schemas_mut(schema: &mut Value, visit: &mut dyn FnMut(&mut Map<String, Value>)) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    visit(object);
    for sub in subschemas_mut(object) {
        walk_schemas_mut(sub, visit);
    }
}

/// The JSON pointer of `token` under `pointer`, with `~` and `/` escaped.
pub(crate) fn child_pointer(pointer: &str, token: &str) -> String {
    format!("{pointer}/{}", token.replace('~', "~0").replace('/', "~1"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tree() -> Value {
        json!({
            "type": "object",
            "properties": {"a/b": {"type": "string"}, "c": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/D"}]}},
            "items": [{"type": "string"}],
            "additionalProperties": false,
            "not": {"const": 1},
            "$defs": {"D": {"type": "integer"}},
            "enum": [{"type": "not a schema"}]
        })
    }

    #[test]
    fn the_read_walk_visits_every_subschema_with_its_pointer() {
        let mut seen = Vec::new();
        walk_schemas(&tree(), "", &mut |_, pointer| seen.push(pointer.to_owned()));
        assert_eq!(
            seen,
            [
                "",
                "/properties/a~1b",
                "/properties/c",
                "/properties/c/anyOf/0",
                "/properties/c/anyOf/1",
                "/not",
                "/$defs/D",
            ]
        );
    }

    #[test]
    fn the_write_walk_visits_the_same_schemas() {
        let mut read = 0;
        walk_schemas(&tree(), "", &mut |_, _| read += 1);
        let mut schema = tree();
        let mut written = 0;
        walk_schemas_mut(&mut schema, &mut |object| {
            written += 1;
            object.insert("seen".into(), Value::Bool(true));
        });
        assert_eq!(written, read);
        assert_eq!(schema["$defs"]["D"]["seen"], true);
        assert_eq!(schema["properties"]["c"]["anyOf"][0]["seen"], true);
        assert!(schema["enum"][0].get("seen").is_none());
        assert!(
            schema["items"][0].get("seen").is_none(),
            "a draft-4 tuple is not walked"
        );
    }
}
