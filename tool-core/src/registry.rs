//! The tools an agent may call, each with its canonical schema and compiled validator.

use std::sync::Arc;

use serde_json::Value;

use crate::descriptor::ToolDescriptor;
use crate::provider::{LoweringFallback, LoweringTarget, Lowerings};
use crate::tool::Tool;
use crate::validate::ArgsValidator;

/// A tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Two tools share a wire name.
    #[error("a tool named `{0}` is registered already; give one of them another `name`")]
    DuplicateName(String),
    /// The tool's name breaks `^[a-zA-Z0-9_-]{1,64}$`.
    #[error("`{0}` is not a valid tool name: use 1 to 64 of a-z, A-Z, 0-9, _ and -")]
    InvalidName(String),
    /// The tool's argument schema is not valid JSON Schema 2020-12.
    #[error("the schema of `{tool}` does not compile: {reason}")]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// The compiler's message.
        reason: String,
    },
}

/// A registered tool: the tool, its canonical schema, its validator, and its schema lowered
/// to the provider dialects that need it.
pub struct RegisteredTool {
    tool: Arc<dyn Tool>,
    schema: Value,
    validator: ArgsValidator,
    lowerings: Lowerings,
}

impl RegisteredTool {
    /// What the attribute declared.
    pub fn descriptor(&self) -> &'static ToolDescriptor {
        self.tool.descriptor()
    }

    /// The canonical argument schema (JSON Schema 2020-12).
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The compiled validator of [`RegisteredTool::schema`].
    pub fn validator(&self) -> &ArgsValidator {
        &self.validator
    }

    /// The tool.
    pub fn tool(&self) -> &dyn Tool {
        &*self.tool
    }

    /// The schema lowered to each dialect, made when the tool was registered.
    pub(crate) fn lowerings(&self) -> &Lowerings {
        &self.lowerings
    }
}

impl std::fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("name", &self.descriptor().name)
            .finish_non_exhaustive()
    }
}

/// The tools an agent may call, in registration order.
///
/// Registering a tool compiles its validator and lowers its schema, once, to the dialects that
/// cannot take the canonical schema (OpenAI strict mode, Gemini `parameters`); every catalog
/// reuses them. A tool whose schema does not lower to one of them is still registered: it is
/// listed in [`Registry::lowering_fallbacks`] and logged once, as a `tracing` warning.
///
/// ```
/// use toolgate::prelude::*;
///
/// /// Look up an order by its id.
/// #[tool(permission = "orders:read")]
/// async fn get_order(order_id: String) -> Result<String, ToolError> {
///     Ok(order_id)
/// }
///
/// let mut registry = Registry::new();
/// registry.register::<get_order>()?;
/// assert_eq!(registry.get("get_order").unwrap().descriptor().permission, Some("orders:read"));
/// # Ok::<(), toolgate::RegistryError>(())
/// ```
#[derive(Debug, Default)]
pub struct Registry {
    tools: Vec<RegisteredTool>,
    /// `(name, index)` sorted by name: a binary search over a few short names beats hashing.
    by_name: Vec<(&'static str, usize)>,
    fallbacks: Vec<LoweringFallback>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Registers the tool type `#[tool]` generated for a fn of the same name.
    pub fn register<T: Tool + Default>(&mut self) -> Result<&mut Self, RegistryError> {
        self.register_tool(T::default())
    }

    /// Registers a tool value.
    pub fn register_tool(&mut self, tool: impl Tool) -> Result<&mut Self, RegistryError> {
        let name = tool.descriptor().name;
        if !is_valid_name(name) {
            return Err(RegistryError::InvalidName(name.to_owned()));
        }
        let slot = match self.by_name.binary_search_by(|(known, _)| known.cmp(&name)) {
            Ok(_) => return Err(RegistryError::DuplicateName(name.to_owned())),
            Err(slot) => slot,
        };
        let schema = tool.args_schema();
        let validator =
            ArgsValidator::new(&schema).map_err(|err| RegistryError::InvalidSchema {
                tool: name.to_owned(),
                reason: err.to_string(),
            })?;
        let lowerings = Lowerings::of(&schema);
        for fallback in lowerings.fallbacks(name) {
            tracing::warn!(
                tool = name,
                error = %fallback.error,
                "the tool is declared {} in {} catalogs",
                fallback.declared(),
                fallback.error.target,
            );
            self.fallbacks.push(fallback);
        }
        self.by_name.insert(slot, (name, self.tools.len()));
        self.tools.push(RegisteredTool {
            tool: Arc::new(tool),
            schema,
            validator,
            lowerings,
        });
        Ok(self)
    }

    /// Every tool whose schema does not lower to a dialect, found when it was registered, in
    /// registration order: a catalog in that dialect declares it with its canonical schema.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use toolgate::prelude::*;
    /// use toolgate::provider::LoweringTarget;
    ///
    /// /// Tag an order.
    /// #[tool(permission = "orders:write")]
    /// async fn tag_order(tags: HashMap<String, String>) -> Result<String, ToolError> {
    ///     Ok(format!("{} tags", tags.len()))
    /// }
    ///
    /// let mut registry = Registry::new();
    /// registry.register::<tag_order>()?;
    /// let fallback = &registry.lowering_fallbacks()[0];
    /// assert_eq!(fallback.tool, "tag_order");
    /// assert_eq!(fallback.error.target, LoweringTarget::OpenAiStrict);
    /// assert!(fallback.error.fix.contains("Vec of structs"));
    /// # Ok::<(), toolgate::RegistryError>(())
    /// ```
    pub fn lowering_fallbacks(&self) -> &[LoweringFallback] {
        &self.fallbacks
    }

    /// The tools declared with `"strict": false` in OpenAI strict mode, and why: the
    /// [`Registry::lowering_fallbacks`] of that dialect.
    pub fn strict_fallbacks(&self) -> impl Iterator<Item = &LoweringFallback> {
        self.fallbacks
            .iter()
            .filter(|fallback| fallback.error.target == LoweringTarget::OpenAiStrict)
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.by_name
            .binary_search_by(|(known, _)| (*known).cmp(name))
            .ok()
            .map(|slot| &self.tools[self.by_name[slot].1])
    }

    /// Every tool, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.iter()
    }

    /// The wire names, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.tools.iter().map(|tool| tool.descriptor().name)
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`, the rule every provider shares.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
