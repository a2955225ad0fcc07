//! What the keys of `#[tool(...)]` choose between: the side effects, key scopes and deliveries
//! (each with the names the attribute accepts), and the hooks it names.

use syn::{Ident, Path};

/// The values of `side_effect`.
pub(crate) const SIDE_EFFECTS: &[&str] = &["read", "write", "destructive"];

/// The values of `key_scope`.
pub(crate) const KEY_SCOPES: &[&str] = &["run", "tenant"];

/// The values of `delivery`.
pub(crate) const DELIVERIES: &[&str] = &["direct", "outbox"];

/// `side_effect = "..."`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SideEffect {
    Read,
    Write,
    Destructive,
}

/// `key_scope = "..."`: who shares an idempotency key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyScope {
    Run,
    Tenant,
}

/// `delivery = "..."`: how the side effect leaves the process.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    Direct,
    Outbox,
}

/// A hook fn the tool's arguments are passed to: `reconcile = path` or `check = path`, or
/// `path(param, ...)` naming the tool's parameters the hook takes.
pub(crate) struct Hook {
    pub(crate) path: Path,
    /// The parameters passed, in the hook's order; `None` passes every parameter of the tool.
    pub(crate) args: Option<Vec<Ident>>,
}
