//! What the code `#[tool]` generates refers to. Not a public API: it changes without notice.

pub use schemars;
pub use serde;
pub use serde_json;

pub use crate::args_fields::{ArgsFields, missing, read_fields};
pub use crate::probe::{
    ArgumentFits, DoesNotFit, ExactArg, ExactScalar, Fits, Probe, ProbeArgs, ProbeExact,
    assert_argument,
};
pub use crate::schema::canonical_schema_for;
pub use crate::schema::fields::{FieldSchema, fields_schema};
pub use crate::text_args::{ReadArgs, TextArgs};
pub use crate::tool::{
    Args, CheckFuture, Delivery, IntoChecked, IntoReconciled, IntoToolOutput, KeyScope, RateLimit,
    ReconcileFuture, RetrySpec, StateType, Tool, ToolDescriptor, ToolFuture,
};
pub use crate::{Ctx, IdempotencyKey, SideEffect, State, ToolError};

use serde_json::Value;

/// Deserializes validated arguments from the tree. A failure here means the schema and the
/// type disagree.
pub fn deserialize_args<'de, T: serde::Deserialize<'de>>(
    tool: &str,
    args: &'de Value,
) -> Result<T, ToolError> {
    T::deserialize(args).map_err(|err| unfit(tool, &err))
}

/// Deserializes validated arguments written out as JSON text, with the reader of arguments
/// that arrived as text ([`ProbeArgs::parse_text`]): for a tool that reads text anyway, whose
/// arguments type's `Deserialize` is then compiled for one deserializer, not two. Writing
/// the text costs little beside the schema validation the tree has just been through, and
/// reads the same values (`float_roundtrip` is on, so every `f64` reads back exactly).
pub fn deserialize_args_via_text<T: serde::de::DeserializeOwned>(
    tool: &str,
    args: &Value,
) -> Result<T, ToolError> {
    serde_json::from_str(&args.to_string()).map_err(|err| unfit(tool, &err))
}

fn unfit(tool: &str, err: &serde_json::Error) -> ToolError {
    ToolError::invalid_arguments(format!("the arguments of {tool} do not fit its types"))
        .with_why(err.to_string())
        .with_next(format!(
            "fix the arguments: call {tool} again with arguments that match its schema"
        ))
}

/// The arguments a tool's `read_args` read, back as its arguments struct.
pub fn take_args<T: std::any::Any>(args: ReadArgs, tool: &str) -> Result<T, ToolError> {
    args.take().ok_or_else(|| {
        ToolError::internal(format!("{tool} was handed arguments it did not read"))
            .with_next("do not repeat this call; tell the user something went wrong")
    })
}

/// The future of a call that fails before the tool runs (its arguments do not fit its
/// types): one type for every tool.
pub fn failed<'a>(err: ToolError) -> ToolFuture<'a> {
    Box::pin(std::future::ready(Err(err)))
}

/// The value a `State<T>` parameter receives.
pub fn state<T: Send + Sync + 'static>(ctx: &Ctx) -> Result<State<T>, ToolError> {
    ctx.state_map().get_shared::<T>()
}

/// The key an `&IdempotencyKey` parameter receives. Every write and destructive call has
/// one; the error is for a tool invoked by hand without it.
pub fn idempotency_key(ctx: &Ctx) -> Result<&IdempotencyKey, ToolError> {
    ctx.operation_key().ok_or_else(|| {
        ToolError::internal("the tool was called without an idempotency key")
            .with_why("only write and destructive calls made by the dispatcher or the reconciler carry one")
            .with_next("do not repeat this call; tell the user something went wrong")
    })
}

/// A `Duration` from whole milliseconds, for `const` descriptors.
pub const fn millis(ms: u64) -> std::time::Duration {
    std::time::Duration::from_millis(ms)
}

/// Compile-time check that an `approval_field` argument is numeric.
pub fn assert_amount_type<T: crate::approval::ApprovalAmount>() {}

/// Compile-time check that an `approval_field` of an `Args<T>` struct is numeric.
pub fn assert_amount<T: crate::approval::ApprovalAmount>(_: &T) {}

/// An amount, read through its [`ApprovalAmount`](crate::approval::ApprovalAmount) when its type has
/// one ([`ViaApprovalAmount`]), else not at all ([`NoApprovalAmount`], by autoref): a type
/// without one is reported once, by [`assert_amount_type`].
pub struct AmountOf<'a, T>(pub &'a T);

/// [`AmountOf`] of a type with an [`ApprovalAmount`](crate::approval::ApprovalAmount).
pub trait ViaApprovalAmount {
    /// The amount.
    fn read_amount(&self) -> Option<f64>;
}

impl<T: crate::approval::ApprovalAmount> ViaApprovalAmount for AmountOf<'_, T> {
    fn read_amount(&self) -> Option<f64> {
        Some(self.0.approval_amount())
    }
}

/// [`AmountOf`] of any other type: no amount.
pub trait NoApprovalAmount {
    /// No amount.
    fn read_amount(&self) -> Option<f64> {
        None
    }
}

impl<T> NoApprovalAmount for &AmountOf<'_, T> {}

/// Compile-time check that a tool's future is `Send`; the error lands on the fn.
pub fn assert_send<F: std::future::Future + Send>(future: F) -> F {
    future
}
