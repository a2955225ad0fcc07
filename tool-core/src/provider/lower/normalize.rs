//! A schema made plain before its keywords are lowered: a one-entry `allOf` merged into it, and
//! a `$ref` the dialect inlines replaced by the schema it points to.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::error::LoweringError;
use super::error::LoweringErrorKind::{Recursive, UnresolvedRef, UnsupportedKeyword};
use super::lowerer::{Dialect, Lowerer, Normalized};
use crate::schema::child_pointer as child;

/// How many `allOf`/`$ref` merges one schema node may go through.
pub(super) const MAX_MERGES: usize = 32;

/// Keywords that only annotate: when two merged schemas disagree on one, the nearer one wins.
const ANNOTATIONS: [&str; 10] = [
    "description",
    "title",
    "default",
    "examples",
    "example",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "$id",
];

impl<'r, D: Dialect> Lowerer<'r, D> {
    /// `schema` with every one-entry `allOf` merged in and, where [`Dialect::inlines`] says so,
    /// its `$ref` replaced by the schema it points to (sibling annotations win).
    pub(super) fn normalize<'s>(
        &self,
        schema: &'s Map<String, Value>,
        pointer: &str,
        is_root: bool,
    ) -> Result<Normalized<'s>, LoweringError> {
        let mut current = Cow::Borrowed(schema);
        let mut pointer = pointer.to_owned();
        let mut inlined: Vec<String> = Vec::new();
        for _ in 0..MAX_MERGES {
            if let Some(all_of) = current.get("allOf") {
                let merged = self.merge_all_of(&current, all_of, &pointer)?;
                current = Cow::Owned(merged);
                continue;
            }
            let Some(reference) = current.get("$ref") else {
                return Ok(Normalized {
                    schema: current,
                    pointer,
                    inlined,
                });
            };
            if !D::inlines(self, &current, is_root) {
                return Ok(Normalized {
                    schema: current,
                    pointer,
                    inlined,
                });
            }
            let reference = self.reference_str(reference, &pointer)?;
            if self
                .stack
                .iter()
                .chain(&inlined)
                .any(|seen| seen == reference)
            {
                return Err(self.error(
                    Recursive,
                    &pointer,
                    format!("`{reference}` refers to a type that contains itself"),
                    D::RECURSIVE_FIX,
                ));
            }
            let (target, target_pointer) = self.resolve(reference, &pointer)?;
            let mut merged = target.clone();
            let siblings = current.iter().filter(|(key, _)| *key != "$ref");
            merge_into(&mut merged, siblings, true).map_err(|keyword| {
                self.error(
                    UnsupportedKeyword,
                    &pointer,
                    format!("`{keyword}` next to `$ref` contradicts the referenced schema"),
                    "remove the custom schema attribute that sets it",
                )
            })?;
            inlined.push(reference.to_owned());
            current = Cow::Owned(merged);
            pointer = target_pointer;
        }
        Err(self.error(
            Recursive,
            &pointer,
            format!("more than {MAX_MERGES} nested `allOf`/`$ref` indirections"),
            "simplify the custom schema of this type",
        ))
    }

    fn merge_all_of(
        &self,
        schema: &Map<String, Value>,
        all_of: &Value,
        pointer: &str,
    ) -> Result<Map<String, Value>, LoweringError> {
        let at = child(pointer, "allOf");
        let mut merged = schema.clone();
        merged.remove("allOf");
        match all_of.as_array().map(Vec::as_slice) {
            Some([]) | Some([Value::Bool(true)]) => Ok(merged),
            Some([Value::Object(entry)]) => {
                merge_into(&mut merged, entry.iter(), false).map_err(|keyword| {
                    self.error(
                        UnsupportedKeyword,
                        &at,
                        format!("`{keyword}` in `allOf` contradicts the schema around it"),
                        "describe the arguments with one struct instead of an intersection",
                    )
                })?;
                Ok(merged)
            }
            Some(entries) => Err(self.error(
                UnsupportedKeyword,
                &at,
                format!(
                    "`allOf` with {} entries (an intersection of schemas)",
                    entries.len()
                ),
                "describe the arguments with one struct instead of an intersection \
                 (for example, no `#[serde(flatten)]` of types with custom schemas)",
            )),
            None => Err(self.error(
                UnsupportedKeyword,
                &at,
                "`allOf` is not an array",
                "fix the custom schema attribute",
            )),
        }
    }

    pub(super) fn reference_str<'v>(
        &self,
        reference: &'v Value,
        pointer: &str,
    ) -> Result<&'v str, LoweringError> {
        reference.as_str().ok_or_else(|| {
            self.error(
                UnresolvedRef,
                &child(pointer, "$ref"),
                "`$ref` is not a string",
                "fix the custom schema attribute",
            )
        })
    }

    /// The object schema `reference` points to and its pointer. Only references into the
    /// document itself resolve (`#` and `#/…`).
    pub(super) fn resolve(
        &self,
        reference: &str,
        pointer: &str,
    ) -> Result<(&'r Map<String, Value>, String), LoweringError> {
        let unresolved = |problem: String| {
            self.error(
                UnresolvedRef,
                &child(pointer, "$ref"),
                problem,
                "generate the schema with every type in `$defs` (schemars does by default)",
            )
        };
        let Some(fragment) = reference.strip_prefix('#') else {
            return Err(unresolved(format!(
                "`{reference}` points outside the schema"
            )));
        };
        if !fragment.is_empty() && !fragment.starts_with('/') {
            return Err(unresolved(format!("`{reference}` is not a JSON pointer")));
        }
        match self.root.pointer(fragment) {
            Some(Value::Object(target)) => Ok((target, fragment.to_owned())),
            Some(Value::Bool(true)) => Err(self.unconstrained(fragment)),
            Some(_) => Err(unresolved(format!("`{reference}` is not an object schema"))),
            None => Err(unresolved(format!("`{reference}` does not exist"))),
        }
    }
}

/// Merges `overlay` into `base`. An annotation present in both takes the overlay's value when
/// `overlay_wins`, the base's otherwise; any other keyword present in both must agree. Returns
/// the keyword that disagrees.
fn merge_into<'a>(
    base: &mut Map<String, Value>,
    overlay: impl Iterator<Item = (&'a String, &'a Value)>,
    overlay_wins: bool,
) -> Result<(), String> {
    for (keyword, value) in overlay {
        match base.get(keyword) {
            None => {
                base.insert(keyword.clone(), value.clone());
            }
            Some(existing) if existing == value => {}
            Some(_) if ANNOTATIONS.contains(&keyword.as_str()) => {
                if overlay_wins {
                    base.insert(keyword.clone(), value.clone());
                }
            }
            Some(_) => return Err(keyword.clone()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::provider::lower::fixtures::*;
    use crate::provider::lower::{LoweringErrorKind, gemini, openai_strict};
    use crate::schema::canonical_schema_for;

    #[test]
    fn a_one_entry_all_of_is_merged() {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"allOf": [{"$ref": "#/$defs/A"}], "description": "The a."}},
            "required": ["a"],
            "$defs": {"A": {"type": "string", "enum": ["x", "y"], "description": "An A."}}
        });
        let strict = openai_strict(&schema).unwrap();
        assert_strict(&strict);
        assert_eq!(
            strict["properties"]["a"],
            json!({"type": "string", "enum": ["x", "y"], "description": "The a."})
        );
        assert_eq!(
            gemini(&schema).unwrap()["properties"]["a"],
            json!({"type": "string", "enum": ["x", "y"], "description": "The a."})
        );
    }

    #[test]
    fn recursion_is_strict_but_not_gemini() {
        let canonical = canonical_schema_for::<Tree>();
        let strict = openai_strict(&canonical).unwrap();
        assert_strict(&strict);
        assert_eq!(
            strict["properties"]["children"]["items"],
            json!({"$ref": "#"})
        );
        let err = refused(gemini(&canonical));
        assert_eq!(err.kind, LoweringErrorKind::Recursive);
        assert_eq!(err.pointer, "/properties/children/items");
        let through_defs = json!({"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}, "required": ["n"],
            "$defs": {"N": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}]}}, "required": ["next"]}}});
        assert_strict(&openai_strict(&through_defs).unwrap());
        assert_eq!(
            err_kind(gemini(&through_defs)),
            LoweringErrorKind::Recursive
        );
        // A recursive `$ref` with a description is inlined once, then kept as a plain reference.
        let described = json!({"type": "object", "properties": {
                "first": {"$ref": "#/$defs/N", "description": "The first."},
                "up": {"$ref": "#", "description": "The parent."}},
            "required": ["first", "up"],
            "$defs": {"N": {"type": "object", "properties": {
                "next": {"$ref": "#/$defs/N", "description": "The next."}}, "required": ["next"]}}});
        let strict = openai_strict(&described).unwrap();
        assert_strict(&strict);
        assert_eq!(strict["properties"]["first"]["description"], "The first.");
        assert_eq!(
            strict["properties"]["first"]["properties"]["next"],
            json!({"$ref": "#/$defs/N"})
        );
        assert_eq!(strict["properties"]["up"], json!({"$ref": "#"}));
    }
}
