//! The trait `#[tool]` implements, and the types a tool's signature may use.

use serde::Serialize;
use serde_json::Value;

use crate::error::ToolError;

pub use crate::backoff::Backoff;
pub use crate::ctx::Ctx;
pub use crate::delivery::Delivery;
pub use crate::descriptor::{KeyScope, ToolDescriptor};
pub use crate::json_text::JsonText;
pub use crate::rate_limit::RateLimit;
pub use crate::registry::{RegisteredTool, Registry, RegistryError};
pub use crate::retry::{RetryPolicy, RetrySpec};
pub use crate::side_effect::SideEffect;
pub use crate::state::{State, StateType};
pub use crate::steps::{StepError, StepReport, StepState};
pub use crate::tool_futures::{CheckFuture, ReconcileFuture, ToolFuture};
pub use crate::validate::{ArgsValidator, SchemaError, Violation};

/// A callable tool. `#[tool]` implements it on a type named after the fn; implement it by hand
/// only for tools whose schema is built at run time.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a toolgate tool",
    label = "not a tool",
    note = "put `#[tool]` on an async fn and register the type of the same name: `registry.register::<my_fn>()`"
)]
pub trait Tool: Send + Sync + 'static {
    /// What the attribute declared.
    fn descriptor(&self) -> &'static ToolDescriptor;

    /// The canonical JSON schema of the arguments (JSON Schema 2020-12), before lowering.
    fn args_schema(&self) -> Value;

    /// Runs the tool on arguments that passed validation against [`Tool::args_schema`]. Called
    /// once per attempt: a retried call gets the same arguments again.
    fn invoke<'a>(&'a self, ctx: &'a Ctx, args: &'a Value) -> ToolFuture<'a>;

    /// How `#[tool]` hands the dispatcher its reading of arguments sent as text (see
    /// [`TextArgs`](crate::__private::TextArgs)). Not a public API: a tool written by hand keeps
    /// the default, `None`, and its arguments are always validated against its schema.
    #[doc(hidden)]
    fn text_args(&self) -> Option<&dyn crate::text_args::TextArgs> {
        None
    }

    /// Asks the authoritative system what became of an operation whose outcome is unknown, with
    /// the arguments of the call: `Ok(Some(output))` it was applied, `Ok(None)` it was not,
    /// `Err(_)` nobody knows yet. `None` when the tool declares no `reconcile` hook.
    fn reconcile<'a>(&'a self, ctx: &'a Ctx, args: &'a Value) -> Option<ReconcileFuture<'a>> {
        let _ = (ctx, args);
        None
    }

    /// The amount `approval_over` compares, from arguments that passed validation: for a plain
    /// parameter, the `approval_field` read into its own type, as its
    /// [`ApprovalAmount`](crate::approval::ApprovalAmount) says (a type counting cents compares its
    /// value in units); for a field of an `Args<T>` struct, the field as a JSON number. `None` when the tool has no threshold, or the call carries no amount
    /// that type can read; the dispatcher then holds a call whose amount field is present for
    /// approval anyway, and runs one without it. The default reads the field as a JSON number.
    fn approval_amount(&self, args: &Value) -> Option<f64> {
        json_amount(self.descriptor(), args)
    }

    /// Runs the tool's business check (`check = path` on the attribute) on arguments that passed
    /// validation: `Ok(())` lets the call go on, an error (a `refused` one, usually) stops it.
    /// `None` when the tool declares no check.
    fn check<'a>(&'a self, ctx: &'a Ctx, args: &'a Value) -> Option<CheckFuture<'a>> {
        let _ = (ctx, args);
        None
    }
}

// The bodies of `Tool`'s defaults, out of line: a default method is compiled once for every
// type that implements the trait, so each keeps only a call.

/// The default of [`Tool::approval_amount`]: the approval field as a JSON number.
fn json_amount(descriptor: &ToolDescriptor, args: &Value) -> Option<f64> {
    let policy = descriptor.approval?;
    args.get(policy.field)?.as_f64()
}

/// Takes the arguments as one struct instead of plain parameters:
/// `Args(request): Args<RefundRequest>`, where the struct derives serde's `Deserialize` and
/// schemars' `JsonSchema`.
///
/// The `JsonSchema` must be schemars **1.x**'s. schemars 0.8's is another trait of the same
/// name: with it, the compiler asks for a `JsonSchema` derive that the struct seems to have. A
/// crate that does not depend on schemars itself can use the one toolgate re-exports, naming it
/// in the derive's `crate` attribute:
///
/// ```
/// use toolgate::prelude::*;
///
/// #[derive(serde::Deserialize, toolgate::JsonSchema)]
/// #[schemars(crate = "toolgate::schemars")]
/// struct OrderRef {
///     /// The order.
///     order_id: String,
/// }
///
/// /// Look up an order.
/// #[tool]
/// async fn find_order(Args(order): Args<OrderRef>) -> Result<String, ToolError> {
///     Ok(order.order_id)
/// }
/// ```
///
/// With schemars in the crate's own dependencies:
///
/// ```
/// use toolgate::prelude::*;
///
/// /// A refund request.
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct RefundRequest {
///     /// The order to refund.
///     order_id: String,
/// }
///
/// /// Preview a refund without issuing it.
/// #[tool]
/// async fn preview_refund(Args(request): Args<RefundRequest>) -> Result<String, ToolError> {
///     Ok(format!("would refund {}", request.order_id))
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Args<T>(pub T);

/// What a tool fn may return: `Result<T, E>` with `T: Serialize` and `E: Into<ToolError>`.
#[diagnostic::on_unimplemented(
    message = "a #[tool] fn must return `Result<T, ToolError>` with `T: Serialize`, not `{Self}`",
    label = "this return type cannot be sent to the model",
    note = "write `-> Result<YourOutput, ToolError>` where `YourOutput` derives `serde::Serialize`"
)]
pub trait IntoToolOutput {
    /// The output as JSON text, or the tool's error. An output that cannot be encoded (see
    /// [`JsonText::of`]) is an `internal` error.
    fn into_tool_output(self) -> Result<JsonText, ToolError>;

    /// The output of a call of `ctx`'s tool, as `#[tool]` converts it. A write's or a
    /// destructive tool's output that cannot be encoded is an `outcome_unknown`, never an
    /// `internal` failure: the tool returned `Ok`, so it acted, and a `failed` record would let
    /// the same operation run again.
    #[doc(hidden)]
    fn into_output_for(self, ctx: &Ctx) -> Result<JsonText, ToolError>
    where
        Self: Sized,
    {
        let _ = ctx;
        self.into_tool_output()
    }
}

impl<T, E> IntoToolOutput for Result<T, E>
where
    T: Serialize,
    E: Into<ToolError>,
{
    fn into_tool_output(self) -> Result<JsonText, ToolError> {
        match self {
            Ok(output) => JsonText::of(&output).map_err(unencodable_output),
            Err(err) => Err(err.into()),
        }
    }

    fn into_output_for(self, ctx: &Ctx) -> Result<JsonText, ToolError> {
        match self {
            Ok(output) => JsonText::of(&output).map_err(|err| match ctx.tool().side_effect {
                SideEffect::Read => unencodable_output(err),
                SideEffect::Write | SideEffect::Destructive => unencodable_applied(err),
            }),
            Err(err) => Err(err.into()),
        }
    }
}

/// The error of a tool whose output serde cannot encode.
fn unencodable_output(err: serde_json::Error) -> ToolError {
    ToolError::internal("the tool's result could not be encoded as JSON")
        .with_why(err.to_string())
        .with_next("do not repeat this call; tell the user something went wrong")
}

/// The error of a write that returned an output serde cannot encode: it acted, and what it
/// answered is lost.
fn unencodable_applied(err: serde_json::Error) -> ToolError {
    ToolError::outcome_unknown("the operation ran, and its result could not be encoded as JSON")
        .with_why(err.to_string())
}

/// What a `reconcile` hook may return: `Result<Option<T>, E>` with `T: Serialize` (the tool's
/// output, when the operation was applied) and `E: Into<ToolError>`.
#[diagnostic::on_unimplemented(
    message = "a reconcile hook must return `Result<Option<T>, ToolError>` with `T: Serialize`, not `{Self}`",
    label = "this hook cannot say whether the operation was applied",
    note = "return `Ok(Some(output))` when it was applied, `Ok(None)` when it was not, `Err(_)` when nobody knows yet"
)]
pub trait IntoReconciled {
    /// The output as JSON text if applied, `None` if not, or the error.
    fn into_reconciled(self) -> Result<Option<JsonText>, ToolError>;
}

impl<T, E> IntoReconciled for Result<Option<T>, E>
where
    T: Serialize,
    E: Into<ToolError>,
{
    fn into_reconciled(self) -> Result<Option<JsonText>, ToolError> {
        match self.map_err(Into::into)? {
            None => Ok(None),
            Some(output) => JsonText::of(&output).map(Some).map_err(|err| {
                ToolError::internal("the reconcile hook's result could not be encoded as JSON")
                    .with_why(err.to_string())
            }),
        }
    }
}

/// What a business check (`check = path`) may return: `Result<(), E>` with `E: Into<ToolError>`.
#[diagnostic::on_unimplemented(
    message = "a check must return `Result<(), ToolError>`, not `{Self}`",
    label = "this check cannot say whether the call may go on",
    note = "return `Ok(())` to let the call go on, or `Err(ToolError::refused(...))` with what, why and next to stop it"
)]
pub trait IntoChecked {
    /// `Ok(())` when the call may go on, or the error that stops it.
    fn into_checked(self) -> Result<(), ToolError>;
}

impl<E> IntoChecked for Result<(), E>
where
    E: Into<ToolError>,
{
    fn into_checked(self) -> Result<(), ToolError> {
        self.map_err(Into::into)
    }
}
