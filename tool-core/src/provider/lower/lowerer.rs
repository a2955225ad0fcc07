//! The one recursion every dialect shares: normalize a schema (merge `allOf`, inline `$ref`s),
//! refuse what no dialect can say, lower each subschema the dialect keeps, and let the dialect
//! decide everything else through [`Dialect`].

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::error::{LoweringError, LoweringErrorKind, LoweringTarget};
use crate::schema::{Holds, child_pointer as child, holds};

/// What one dialect decides; the walk over the schema is [`Lowerer::lower`]'s.
pub(super) trait Dialect: Sized {
    /// The dialect, named in every error.
    const TARGET: LoweringTarget;
    /// What to change when a `$ref` recurses where the dialect would inline it.
    const RECURSIVE_FIX: &'static str;
    /// What the keywords of one schema leave for [`Dialect::finish`].
    type Node: Default;

    /// Whether the `$ref` of `schema` is replaced by the schema it points to, its sibling
    /// keywords merged in. A `$ref` left as it is must resolve.
    fn inlines(lowerer: &Lowerer<'_, Self>, schema: &Map<String, Value>, is_root: bool) -> bool;

    /// Whether the subschemas under `keyword` (one that holds subschemas) are lowered and kept.
    fn descends(keyword: &str) -> bool;

    /// Whether a branch of an `anyOf`/`oneOf` is left out, noting in `node` what it said.
    fn skips_branch(_branch: &Value, _node: &mut Self::Node) -> bool {
        false
    }

    /// Writes the lowered branches of the `anyOf`/`oneOf` at `at` into `out`.
    fn union(
        _lowerer: &Lowerer<'_, Self>,
        branches: Vec<Map<String, Value>>,
        _at: &str,
        out: &mut Map<String, Value>,
        _node: &mut Self::Node,
    ) -> Result<(), LoweringError> {
        let branches = branches.into_iter().map(Value::Object).collect();
        out.insert("anyOf".into(), Value::Array(branches));
        Ok(())
    }

    /// One keyword of the schema at `pointer` that holds no subschemas the dialect lowers: kept
    /// in `out`, rewritten, noted in `node`, dropped, or refused.
    fn keyword(
        lowerer: &Lowerer<'_, Self>,
        schema: &Map<String, Value>,
        keyword: &str,
        value: &Value,
        pointer: &str,
        out: &mut Map<String, Value>,
        node: &mut Self::Node,
    ) -> Result<(), LoweringError>;

    /// The lowered schema, from what its keywords wrote and noted.
    fn finish(
        lowerer: &Lowerer<'_, Self>,
        schema: &Map<String, Value>,
        out: Map<String, Value>,
        node: Self::Node,
        pointer: &str,
        is_root: bool,
    ) -> Result<Map<String, Value>, LoweringError>;

    /// Checks the number of schemas produced so far against the dialect's budget.
    fn check_size(_lowerer: &Lowerer<'_, Self>, _pointer: &str) -> Result<(), LoweringError> {
        Ok(())
    }
}

/// The state of one lowering: the document that `$ref`s resolve in, the references inlined on
/// the path to the current schema, and a count of the nodes produced.
pub(super) struct Lowerer<'r, D> {
    /// The canonical schema, which every `$ref` resolves in.
    pub(super) root: &'r Value,
    /// The references inlined on the path to the current schema (`#` for the root).
    pub(super) stack: Vec<String>,
    /// How many schemas were lowered so far.
    pub(super) nodes: usize,
    /// The dialect, a type only.
    dialect: std::marker::PhantomData<D>,
}

impl<'r, D: Dialect> Lowerer<'r, D> {
    /// Lowers the document `root`, which must be an object schema.
    pub(super) fn lower_document(root: &'r Value) -> Result<Map<String, Value>, LoweringError> {
        let mut lowerer: Lowerer<'r, D> = Lowerer {
            root,
            stack: Vec::new(),
            nodes: 0,
            dialect: std::marker::PhantomData,
        };
        let map = root.as_object().ok_or_else(|| lowerer.root_not_object())?;
        // The root itself is on the stack: a `$ref: "#"` anywhere refers back to it.
        lowerer.stack.push("#".to_owned());
        lowerer.lower(map, "", true)
    }

    /// The error of the dialect `D`.
    pub(super) fn error(
        &self,
        kind: LoweringErrorKind,
        pointer: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> LoweringError {
        LoweringError::new(D::TARGET, kind, pointer, problem, fix)
    }

    pub(super) fn root_not_object(&self) -> LoweringError {
        LoweringError::root_not_object(D::TARGET)
    }

    pub(super) fn unconstrained(&self, pointer: &str) -> LoweringError {
        self.error(
            LoweringErrorKind::Unconstrained,
            pointer,
            "the schema accepts any JSON value, so it has no type the target can name",
            "give the field a concrete type instead of `serde_json::Value`",
        )
    }

    /// The error for an object with arbitrary keys at `pointer`.
    pub(super) fn open_object(&self, pointer: &str) -> LoweringError {
        self.error(
            LoweringErrorKind::OpenObject,
            pointer,
            "an object with arbitrary keys (a map or `serde_json::Map`)",
            "use a struct, or a Vec of structs with a key field instead of a map",
        )
    }

    /// Lowers one schema and everything under it.
    fn lower(
        &mut self,
        schema: &Map<String, Value>,
        pointer: &str,
        is_root: bool,
    ) -> Result<Map<String, Value>, LoweringError> {
        self.nodes += 1;
        D::check_size(self, pointer)?;
        let Normalized {
            schema,
            pointer,
            inlined,
        } = self.normalize(schema, pointer, is_root)?;
        let pointer = pointer.as_str();
        self.refuse_structural(&schema, pointer)?;
        if is_root && (schema.contains_key("anyOf") || schema.contains_key("oneOf")) {
            return Err(self.root_not_object());
        }
        let depth = self.stack.len();
        self.stack.extend(inlined);
        let keywords = self.keywords(&schema, pointer);
        self.stack.truncate(depth);
        let (out, node) = keywords?;
        D::finish(self, &schema, out, node, pointer, is_root)
    }

    /// Each keyword of a normalized schema: the subschemas the dialect keeps lowered in turn,
    /// every other keyword handed to the dialect.
    fn keywords(
        &mut self,
        schema: &Map<String, Value>,
        pointer: &str,
    ) -> Result<(Map<String, Value>, D::Node), LoweringError> {
        let mut out = Map::new();
        let mut node = D::Node::default();
        for (keyword, value) in schema {
            let at = child(pointer, keyword);
            match holds(keyword).filter(|_| D::descends(keyword)) {
                Some(Holds::Map) => {
                    let mut lowered = Map::new();
                    for (name, sub) in self.schema_map(value, &at)? {
                        let sub_at = child(&at, name);
                        let sub = self.subschema(sub, &sub_at)?;
                        lowered.insert(
                            name.clone(),
                            Value::Object(self.lower(sub, &sub_at, false)?),
                        );
                    }
                    out.insert(keyword.clone(), Value::Object(lowered));
                }
                Some(Holds::One) => {
                    let sub = self.subschema(value, &at)?;
                    out.insert(keyword.clone(), Value::Object(self.lower(sub, &at, false)?));
                }
                Some(Holds::List) => {
                    let mut branches = Vec::new();
                    for (index, branch) in self.schema_list(value, &at)?.iter().enumerate() {
                        if D::skips_branch(branch, &mut node) {
                            continue;
                        }
                        let branch_at = child(&at, &index.to_string());
                        let branch = self.subschema(branch, &branch_at)?;
                        branches.push(self.lower(branch, &branch_at, false)?);
                    }
                    D::union(self, branches, &at, &mut out, &mut node)?;
                }
                None => D::keyword(self, schema, keyword, value, pointer, &mut out, &mut node)?,
            }
        }
        Ok((out, node))
    }

    /// A subschema as an object schema: `true` (any value) and `false` (none) have no type to
    /// name.
    pub(super) fn subschema<'s>(
        &self,
        schema: &'s Value,
        pointer: &str,
    ) -> Result<&'s Map<String, Value>, LoweringError> {
        match schema {
            Value::Object(map) => Ok(map),
            Value::Bool(false) => Err(self.error(
                LoweringErrorKind::Unconstrained,
                pointer,
                "the schema `false` accepts no value",
                "remove the field or give it a type",
            )),
            _ => Err(self.unconstrained(pointer)),
        }
    }

    fn schema_list<'s>(
        &self,
        value: &'s Value,
        pointer: &str,
    ) -> Result<&'s [Value], LoweringError> {
        value.as_array().map(Vec::as_slice).ok_or_else(|| {
            self.error(
                LoweringErrorKind::UnsupportedKeyword,
                pointer,
                "expected an array of schemas",
                "fix the custom schema attribute",
            )
        })
    }

    fn schema_map<'s>(
        &self,
        value: &'s Value,
        pointer: &str,
    ) -> Result<&'s Map<String, Value>, LoweringError> {
        value.as_object().ok_or_else(|| {
            self.error(
                LoweringErrorKind::UnsupportedKeyword,
                pointer,
                "expected an object of schemas",
                "fix the custom schema attribute",
            )
        })
    }
}

/// A schema after [`Lowerer::normalize`]: its keywords, the pointer they came from, and the
/// references inlined to get them.
pub(super) struct Normalized<'s> {
    pub(super) schema: Cow<'s, Map<String, Value>>,
    pub(super) pointer: String,
    pub(super) inlined: Vec<String>,
}
