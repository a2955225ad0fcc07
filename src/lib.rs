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

/// The names most programs need: `use toolgate::prelude::*;`.
pub mod prelude {
    pub use toolgate_core::{
        Args, AuthContext, CallReport, CallResult, Ctx, Dispatcher, ErrorKind, Fate,
        IdempotencyKey, Outcome, Registry, RunLimits, Session, SideEffect, State, Status, ToolCall,
        ToolError, TurnAborted,
    };
    pub use toolgate_macros::tool;
}
