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

/// Guides: how toolgate's parts work together, with examples that compile. Each is also a file
/// of the repository's `docs/guide/`.
pub mod guide {
    #[doc = include_str!("../docs/guide/turns.md")]
    pub mod turns {}
    #[doc = include_str!("../docs/guide/keys.md")]
    pub mod keys {}
    #[doc = include_str!("../docs/guide/approvals.md")]
    pub mod approvals {}
    #[doc = include_str!("../docs/guide/outbox.md")]
    pub mod outbox {}
    #[doc = include_str!("../docs/guide/stores.md")]
    pub mod stores {}
    #[doc = include_str!("../docs/guide/mcp.md")]
    pub mod mcp {}
    #[doc = include_str!("../docs/guide/tool_attribute.md")]
    pub mod tool_attribute {}
    #[doc = include_str!("../docs/guide/refund_desk.md")]
    pub mod refund_desk {}
    #[doc = include_str!("../docs/guide/storm.md")]
    pub mod storm {}
}

/// The names most programs need: `use toolgate::prelude::*;`.
pub mod prelude {
    pub use toolgate_core::{
        Args, AuthContext, CallResult, Ctx, Dispatcher, ErrorKind, IdempotencyKey, Registry,
        RunLimits, Session, SideEffect, State, Status, ToolCall, ToolError, dispatch::CallReport,
        dispatch::Outcome, run::Fate, run::TurnAborted,
    };
    pub use toolgate_macros::tool;
}
