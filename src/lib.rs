#![doc = include_str!("../README.md")]

#[doc(inline)]
pub use tool_core::*;

pub mod store;

/// Declares an async fn as a tool: a JSON schema for the model, a validator that enforces exactly
/// that schema, a descriptor, and a type of the same name to register.
///
/// ```
/// use toolgate::prelude::*;
///
/// /// Refund part or all of a paid order. The refund is final.
/// #[tool(side_effect = "write", permission = "refund:create", approval_over = 5000,
///        key = [order_id], timeout = "10s", retry(max_attempts = 4, base = "200ms"))]
/// async fn issue_refund(
///     ctx: &Ctx,
///     /// The order to refund.
///     order_id: String,
///     /// The amount, with at most two decimals.
///     amount: f64,
/// ) -> Result<String, ToolError> {
///     Ok(format!("refunded {amount} on {order_id} for {}", ctx.auth().tenant()))
/// }
///
/// // The fn stays callable as written; the type of the same name is the tool.
/// let descriptor = issue_refund::descriptor();
/// assert_eq!(descriptor.permission, Some("refund:create"));
/// assert_eq!(issue_refund::args_schema()["required"], serde_json::json!(["order_id", "amount"]));
/// let mut registry = Registry::new();
/// registry.register::<issue_refund>().unwrap();
/// ```
///
/// | key | values | enforced |
/// |---|---|---|
/// | `side_effect` | `"read"` (default), `"write"`, `"destructive"` | stated in the description and the MCP annotations |
/// | `name` | the wire name, `^[a-zA-Z0-9_-]{1,64}$`; default the fn's name | yes |
/// | `permission` | a permission the session must hold | yes: a missing permission aborts the run |
/// | `timeout` | `"500ms"`, `"10s"`, `"2min"`, `"1h"` | yes: a read times out; a write becomes `outcome_unknown` |
/// | `approval_over` | a number above zero, on a write or destructive tool | recorded and stated in the description; the approval workflow acts on it from the approval release |
/// | `approval_field` | the numeric argument `approval_over` compares; default `amount` | checked at compile time |
/// | `key` | `[arg, …]`: the arguments that identify the operation; default all | yes: the idempotency key is derived from them |
/// | `key_scope` | `"run"` (default) or `"tenant"` | yes |
/// | `retry(...)` | `max_attempts`, `base`, `max`, `jitter` | yes: transient faults are retried below the model (writes only while nothing was applied) |
/// | `reconcile` | a path to an async fn taking the tool's own parameters, returning `Result<Option<T>, ToolError>` | yes: the [`Reconciler`] calls it for unknown outcomes |
/// | `honours_key` | `true` when the provider applies one idempotency key once | yes: unknown outcomes are retried and dead leases taken over under the same key |
/// | `rate_limit` | `"N/s"`, `"N/min"`, `"N/h"` | recorded; enforced from the budgets release |
/// | `resource` | an argument name | recorded; batches serialise on it from the batches release |
///
/// Parameters: plain `name: Type` parameters become the schema's properties, their `///` comments
/// the descriptions; `#[serde(...)]` and `#[schemars(...)]` on a parameter pass through to its
/// field; `#[sensitive]` marks it for redaction. Or take every argument as one struct:
/// `Args(request): Args<Request>`. `&Ctx` and `&AuthContext` parameters are injected and never
/// appear in the schema. Every misuse is a compile error on the token at fault.
#[doc(inline)]
pub use tool_macros::tool;

/// The names most programs need: `use toolgate::prelude::*;`.
pub mod prelude {
    pub use tool_core::{
        Args, AuthContext, CallReport, CallResult, Ctx, Dispatcher, ErrorKind, Registry, Session,
        SideEffect, Status, ToolCall, ToolError,
    };
    pub use tool_macros::tool;

    pub use tool_core::Outcome;
}
