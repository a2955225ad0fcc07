//! The tools an agent may call, each with its canonical schema and compiled validator.

use std::sync::Arc;

use serde_json::Value;

use crate::descriptor::ToolDescriptor;
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

/// A registered tool: the tool, its canonical schema and its validator.
pub struct RegisteredTool {
    tool: Arc<dyn Tool>,
    schema: Value,
    validator: ArgsValidator,
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
        self.by_name.insert(slot, (name, self.tools.len()));
        self.tools.push(RegisteredTool {
            tool: Arc::new(tool),
            schema,
            validator,
        });
        Ok(self)
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
