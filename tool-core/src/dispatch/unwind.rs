//! A panic in a tool stays inside its call: caught around the tool's future (and the building
//! of it), written to the trace, and answered in words that are true of what the tool may have
//! done (see `answers`). It is never retried.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::ToolError;

use super::answers;

/// `read`, which reads a call's arguments into `tool`'s parameters and so runs the tool's own
/// code, with a panic in it traced and answered as a read that panicked.
pub(super) fn reading<T>(tool: &str, read: impl FnOnce() -> T) -> Result<T, ToolError> {
    catch_unwind(AssertUnwindSafe(read)).map_err(|payload| {
        trace(tool, &*payload);
        answers::read_panicked(tool)
    })
}

/// Writes a caught panic to the trace, inside the call's span. The model never sees it.
pub(super) fn trace(tool: &str, payload: &(dyn Any + Send)) {
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a panic payload that is not text)");
    tracing::error!(tool, panic = message, "the tool panicked");
}

/// What the operation's record keeps of a write whose tool panicked (the message is in the
/// trace only).
pub(super) fn recorded(tool: &str) -> ToolError {
    ToolError::internal(format!("{tool} panicked; its message is in the trace"))
}
