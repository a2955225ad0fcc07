//! The hooks of the `Tool` impl that call a fn of the user's with the tool's arguments:
//! `reconcile` (`reconcile = path`) and `check` (`check = path`). Both take the tool's
//! parameters, or only those that `path(param, ...)` names, and are called the same way.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};

use crate::ast::ToolFn;
use crate::attr::ToolAttr;
use crate::binding::{arguments, parse_tree};
use crate::choices::Hook;

/// `reconcile` of the `Tool` impl: the hook called with the tool's own parameters, or with those
/// that `reconcile = path(...)` names.
pub(crate) fn reconcile_fn(
    attr: &ToolAttr,
    tool: &ToolFn,
    wire_name: &str,
    args_type: &TokenStream,
) -> TokenStream {
    let Some(reconcile) = &attr.reconcile else {
        return TokenStream::new();
    };
    let (destructure, call, span) = hook_call(&reconcile.value, tool, wire_name, args_type);
    let convert = quote_spanned!(span=> __tg::IntoReconciled::into_reconciled(__output));
    quote! {
        fn reconcile<'__a>(
            &'__a self,
            __ctx: &'__a __tg::Ctx,
            __json: &'__a __tg::serde_json::Value,
        ) -> ::core::option::Option<__tg::ReconcileFuture<'__a>> {
            ::core::option::Option::Some(::std::boxed::Box::pin(async move {
                #destructure
                let __output = #call.await;
                #convert
            }))
        }
    }
}

/// `check` of the `Tool` impl: the business check called as `check = path` or
/// `check = path(...)` says, as the reconcile hook is.
pub(crate) fn check_fn(
    attr: &ToolAttr,
    tool: &ToolFn,
    wire_name: &str,
    args_type: &TokenStream,
) -> TokenStream {
    let Some(check) = &attr.check else {
        return TokenStream::new();
    };
    let (destructure, call, span) = hook_call(&check.value, tool, wire_name, args_type);
    let convert = quote_spanned!(span=> __tg::IntoChecked::into_checked(__output));
    quote! {
        fn check<'__a>(
            &'__a self,
            __ctx: &'__a __tg::Ctx,
            __json: &'__a __tg::serde_json::Value,
        ) -> ::core::option::Option<__tg::CheckFuture<'__a>> {
            ::core::option::Option::Some(::std::boxed::Box::pin(async move {
                #destructure
                let __output = #call.await;
                #convert
            }))
        }
    }
}

/// The statement that binds the arguments, and the call of the hook with the tool's parameters
/// or those it names (valid.rs checked each name), spanned on the hook's path.
fn hook_call(
    hook: &Hook,
    tool: &ToolFn,
    wire_name: &str,
    args_type: &TokenStream,
) -> (TokenStream, TokenStream, Span) {
    let path = &hook.path;
    let parse = parse_tree(tool, wire_name, args_type);
    let (destructure, mut call_args) = arguments(tool, args_type, quote!(#parse?));
    if let Some(names) = &hook.args {
        // Only the parameters the hook names, in its order.
        call_args = names
            .iter()
            .filter_map(|name| {
                let index = tool.names.iter().position(|n| n.as_ref() == Some(name))?;
                Some(call_args[index].clone())
            })
            .collect();
    }
    let span = syn::spanned::Spanned::span(path);
    let call = quote_spanned!(span=> __tg::assert_send(#path(#(#call_args),*)));
    (destructure, call, span)
}
