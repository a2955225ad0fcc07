//! The JSON schema of a tool's plain parameters, built from a table of its fields.
//!
//! `#[tool]` used to derive `schemars::JsonSchema` on the arguments struct of plain parameters:
//! per tool, a `json_schema` fn of a few hundred lines and two consts per field, compiled again
//! at every build of the tools' crate. The struct holds nothing that needs the derive (no
//! `#[serde]` or `#[schemars]` setting, only docs), so it now names a table of its fields
//! instead, and [`fields_schema`] builds the object for every tool, as the derive builds it:
//! `{"type": "object", "additionalProperties": false}`, each field's schema as its type gives
//! it with the field's doc as `title` and `description` (schemars' rule: a first line that is a
//! Markdown heading is the title), and `required` for each field serde does not read as absent.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::args_fields::missing;

/// One plain parameter, as [`fields_schema`] describes it.
pub struct FieldSchema {
    name: &'static str,
    doc: &'static str,
    schema: fn(&mut SchemaGenerator) -> Schema,
    optional: fn() -> bool,
}

impl FieldSchema {
    /// The parameter `name` of type `T`, with the text of its doc comments (each line without
    /// its first space, the lines joined by `\n`, as schemars reads them).
    pub const fn of<T: JsonSchema + DeserializeOwned>(
        name: &'static str,
        doc: &'static str,
    ) -> Self {
        FieldSchema {
            name,
            doc,
            schema: SchemaGenerator::subschema_for::<T>,
            optional: may_be_absent::<T>,
        }
    }
}

/// Whether serde reads the field as absent when the object lacks it (an `Option` reads `None`):
/// exactly the fields the schema leaves out of `required`.
fn may_be_absent<T: DeserializeOwned>() -> bool {
    missing::<T, serde::de::value::Error>(None, "").is_ok()
}

/// The schema of an object of `fields`, closed to other keys.
pub fn fields_schema(generator: &mut SchemaGenerator, fields: &[FieldSchema]) -> Schema {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for field in fields {
        let mut property = (field.schema)(generator);
        let (title, description) = title_and_description(field.doc);
        for (key, text) in [("title", title), ("description", description)] {
            if !text.is_empty() {
                property.insert(key.to_owned(), Value::from(text));
            }
        }
        properties.insert(field.name.to_owned(), property.into());
        if !(generator.contract().is_deserialize() && (field.optional)()) {
            required.push(Value::from(field.name));
        }
    }
    // Keys in the derive's order; an object without fields has neither list.
    let mut schema = json_schema!({"type": "object", "additionalProperties": false});
    if !properties.is_empty() {
        schema.insert("properties".to_owned(), Value::Object(properties));
    }
    if !required.is_empty() {
        schema.insert("required".to_owned(), Value::Array(required));
    }
    schema
}

/// A doc's title and description as schemars splits them: with the doc trimmed, a first line
/// that opens with `#` is the title (without its `#`s) and the rest the description; any other
/// doc is all description.
fn title_and_description(doc: &str) -> (&str, &str) {
    let doc = doc.trim_ascii();
    if !doc.starts_with('#') {
        return ("", doc);
    }
    let end = doc.find('\n').unwrap_or(doc.len());
    let (heading, rest) = doc.split_at(end);
    (
        heading.trim_start_matches('#').trim_ascii(),
        rest.trim_ascii(),
    )
}

#[cfg(test)]
mod tests {
    use schemars::generate::SchemaSettings;
    use serde_json::json;

    use super::*;
    use crate::schema::canonical_schema_for;

    /// What `#[tool]` emits for its plain parameters, by hand.
    #[allow(dead_code)]
    struct Table;

    impl JsonSchema for Table {
        fn schema_name() -> std::borrow::Cow<'static, str> {
            "Table".into()
        }

        fn json_schema(generator: &mut SchemaGenerator) -> Schema {
            fields_schema(
                generator,
                &[
                    FieldSchema::of::<String>("order_id", "The order.\n\nAs `ORD-1`."),
                    FieldSchema::of::<Option<u32>>("limit", "# Limit\nAt most this many."),
                    FieldSchema::of::<Vec<Kind>>("kinds", ""),
                    FieldSchema::of::<f32>("ratio", "  A ratio."),
                    FieldSchema::of::<Value>("extra", "Anything."),
                ],
            )
        }
    }

    // The same fields under schemars' derive, as `#[tool]` derived it before: the reference.
    // (A comment, not a doc: the generated struct has none.)
    #[derive(JsonSchema, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Derived {
        /// The order.
        ///
        /// As `ORD-1`.
        order_id: String,
        /// # Limit
        /// At most this many.
        limit: Option<u32>,
        kinds: Vec<Kind>,
        ///   A ratio.
        ratio: f32,
        /// Anything.
        extra: Value,
    }

    /// A type with a schema of its own, which lands in `$defs`.
    #[derive(JsonSchema, serde::Deserialize)]
    #[allow(dead_code)]
    enum Kind {
        Refund,
        Credit,
    }

    #[test]
    fn the_table_gives_the_schema_the_derive_gives() {
        let table = canonical_schema_for::<Table>();
        let derived = canonical_schema_for::<Derived>();
        assert_eq!(table, derived);
        // Key order is part of what a model is shown.
        assert_eq!(table.to_string(), derived.to_string());
        assert_eq!(
            table["required"],
            json!(["order_id", "kinds", "ratio", "extra"])
        );
        assert_eq!(table["properties"]["limit"]["title"], "Limit");
        assert_eq!(
            table["properties"]["order_id"]["description"],
            "The order.\n\nAs `ORD-1`."
        );
        assert!(table["$defs"]["Kind"].is_object());
    }

    #[test]
    fn a_serialize_contract_requires_every_field() {
        let generator = || {
            SchemaSettings::draft2020_12()
                .for_serialize()
                .into_generator()
        };
        let table = generator().into_root_schema_for::<Table>();
        let derived = generator().into_root_schema_for::<Derived>();
        assert_eq!(table.get("required"), derived.get("required"));
    }

    #[test]
    fn no_fields_is_an_object_closed_to_every_key() {
        let schema = fields_schema(&mut SchemaGenerator::default(), &[]);
        assert_eq!(
            schema.to_value(),
            json!({"type": "object", "additionalProperties": false})
        );
    }

    #[test]
    fn titles_are_headings() {
        assert_eq!(title_and_description("  plain text "), ("", "plain text"));
        assert_eq!(title_and_description("## Head \n body\n"), ("Head", "body"));
        assert_eq!(title_and_description("#Only"), ("Only", ""));
        assert_eq!(title_and_description(""), ("", ""));
    }
}
