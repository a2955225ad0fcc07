//! The runtime of toolgate: descriptors, canonical schemas and validation, the dispatcher, and the
//! provider wire formats.
//!
//! Depend on the facade crate `toolgate`, which re-exports everything here with the `#[tool]`
//! attribute; this crate is its engine.

mod args_fields;
mod auth;
mod backoff;
mod call;
mod call_ids;
mod clock;
mod ctx;
mod decide;
mod delivery;
mod descriptor;
#[cfg(feature = "test-util")]
mod failpoint;
mod fate;
mod hash_secret;
mod identifier;
mod json_shape;
mod json_text;
mod key;
mod permissions;
mod probe;
mod quote;
mod rate_limit;

mod registry;
mod result;
mod retry;
mod run_limits;
mod side_effect;
mod state;
mod steps;
mod text_args;
mod tool_futures;
mod turn;
mod validate;
mod wiring;

pub mod approval;
pub mod dispatch;
pub mod error;
pub mod idempotency;
pub mod identity;
pub mod outbox;
pub mod provider;
pub mod reconcile;
pub mod run;
pub mod schema;
pub mod store;
pub mod tool;

pub use auth::{AuthContext, Session};
pub use call::ToolCall;
pub use ctx::Ctx;
pub use dispatch::Dispatcher;
pub use error::{ErrorKind, ToolError};
pub use key::IdempotencyKey;
pub use registry::Registry;
pub use result::{CallResult, Status};
pub use run_limits::RunLimits;
pub use side_effect::SideEffect;
pub use state::State;
pub use tool::{Args, Tool};

/// What the code `#[tool]` generates refers to. Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __private;
