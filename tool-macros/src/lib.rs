//! The `#[tool]` attribute of toolgate. Depend on `toolgate`, which re-exports it; the generated
//! code names the runtime through `::toolgate`, or the path given with `#[tool(crate = path)]`.

use proc_macro::TokenStream;

mod amount;
mod ast;
mod attr;
mod binding;
mod choices;
mod errors;
mod expand;
mod fallback;
mod hook;
mod item;
mod keys;
mod reader;
mod schema;
mod spanned;
mod suggest;
mod text;
mod units;
mod valid;
mod values;

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
///     key: &IdempotencyKey,
///     /// The order to refund.
///     order_id: String,
///     /// The amount, with at most two decimals.
///     amount: f64,
/// ) -> Result<String, ToolError> {
///     Ok(format!("refunded {amount} on {order_id} for {} under {key}", ctx.auth().tenant()))
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
/// # Keys
///
#[doc = include_str!("../doc/keys.md")]
///
/// # Parameters
///
/// Plain `name: Type` parameters become the schema's properties, their `///` comments the
/// descriptions; `#[serde(...)]` and `#[schemars(...)]` on a parameter pass through to its field;
/// `#[sensitive]` marks it for redaction. Or take every argument as one struct:
/// `Args(request): Args<Request>`.
///
/// These are injected and never appear in the schema:
/// - `&Ctx`: the call's context; `&AuthContext`: the session's caller.
/// - `State<T>`: a value given to the dispatcher with `DispatcherBuilder::state`; building a
///   dispatcher whose registry holds the tool without a `T` is an error.
/// - `&IdempotencyKey`: the operation's key, on a write or destructive tool and its reconcile
///   hook only (it dereferences to `str`).
///
/// Every misuse is a compile error on the token at fault.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, input: TokenStream) -> TokenStream {
    let input: proc_macro2::TokenStream = input.into();
    let item: item::ToolItem = match syn::parse2(input.clone()) {
        Ok(item) => item,
        Err(_) => {
            let mut out = ast::not_a_fn(&input).to_compile_error();
            out.extend(input);
            return out.into();
        }
    };
    let mut errors = errors::Errors::default();
    let attr = attr::ToolAttr::parse(args.into(), &mut errors);
    let tool = ast::read(item, &mut errors);
    valid::check(&attr, &tool, &mut errors);
    match errors.into_result() {
        Ok(()) => expand::expand(&attr, &tool).into(),
        Err(err) => {
            // The fn as written and a stand-in for its type, so one mistake does not cascade
            // into "not found" errors.
            let mut out = err.to_compile_error();
            out.extend(fallback::fallback(&attr, &tool));
            out.into()
        }
    }
}
