#![doc = include_str!("../README.md")]
// On docs.rs, each item gated by a feature says which.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[doc(inline)]
pub use toolgate_core::*;

pub mod store;

// The MCP server (feature `mcp`): its crate docs are the module's.
#[cfg(feature = "mcp")]
#[doc(inline)]
pub use toolgate_mcp as mcp;

#[doc(inline)]
pub use toolgate_macros::tool;

/// schemars 1.x, which [`Args`] structs derive [`JsonSchema`] from: for a crate without a
/// dependency of its own on it (see [`Args`]).
pub use toolgate_core::__private::schemars;
/// The derive of schemars 1.x's `JsonSchema`, with `#[schemars(crate = "toolgate::schemars")]`
/// (see [`Args`]).
pub use toolgate_core::__private::schemars::JsonSchema;

/// The names most programs need: `use toolgate::prelude::*;`.
pub mod prelude {
    pub use toolgate_core::{
        Args, AuthContext, CallReport, CallResult, Ctx, Dispatcher, ErrorKind, Fate,
        IdempotencyKey, Outcome, Registry, RunLimits, Session, SideEffect, State, Status, ToolCall,
        ToolError, TurnAborted,
    };
    pub use toolgate_macros::tool;
}
