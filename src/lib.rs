#![doc = include_str!("../README.md")]

#[doc(inline)]
pub use tool_core::*;

/// Declares an async fn as a tool: a JSON schema for the model, a validator that enforces exactly
/// that schema, a descriptor, and a type of the same name to register.
///
/// See the [crate documentation](crate) for the keys.
#[doc(inline)]
pub use tool_macros::tool;

/// The names most programs need: `use toolgate::prelude::*;`.
pub mod prelude {
    pub use tool_core::{
        Args, AuthContext, CallReport, CallResult, Ctx, Dispatcher, ErrorKind, Registry, Session,
        SideEffect, Status, ToolCall, ToolError,
    };
    pub use tool_macros::tool;
}
