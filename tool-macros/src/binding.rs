//! How a tool's parameters are bound from its validated arguments: by the tool's own future and
//! by its hooks (`check`, `reconcile`), which take the same arguments.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use crate::ast::{Param, ToolFn};

/// The statement that binds the arguments `parse` gives, and the expressions that pass each
/// parameter.
pub(crate) fn arguments(
    tool: &ToolFn,
    args_type: &TokenStream,
    parse: TokenStream,
) -> (TokenStream, Vec<TokenStream>) {
    // Each local carries its parameter's span: a hook whose parameter types differ from the
    // tool's gets "expected …, found …" on the tool's parameter, not on the whole attribute.
    let locals: Vec<_> = tool
        .plain_params()
        .enumerate()
        .map(|(i, p)| format_ident!("__arg{}", i, span = syn::spanned::Spanned::span(&p.ty)))
        .collect();
    let destructure = if tool.struct_param().is_some() {
        quote!(let __args: #args_type = #parse;)
    } else {
        let fields = tool.plain_params().map(|p| &p.ident);
        quote!(let __ToolArgs { #(#fields: #locals,)* } = #parse;)
    };
    let mut locals = locals.iter();
    let call_args = tool
        .params
        .iter()
        .map(|param| match param {
            Param::Ctx { .. } => quote!(__ctx),
            Param::Auth { .. } => quote!(__ctx.auth()),
            Param::Key { .. } => quote!(__tg::idempotency_key(__ctx)?),
            Param::State { ty } => quote!(__tg::state::<#ty>(__ctx)?),
            Param::Struct { .. } => quote!(__tg::Args(__args)),
            Param::Plain(_) => {
                let local = locals.next();
                quote!(#local)
            }
        })
        .collect();
    (destructure, call_args)
}

/// The expression that reads the validated tree `__json` into the arguments type, as a
/// `Result`: through the text reader for a tool that reads text anyway, from the tree for the
/// others, so that either way the arguments struct has one deserializer.
pub(crate) fn parse_tree(tool: &ToolFn, wire_name: &str, args_type: &TokenStream) -> TokenStream {
    if tool.reads_text() {
        quote!((&__tg::Probe::<#args_type>::new()).parse_via_text(#wire_name, __json))
    } else {
        quote!((&__tg::Probe::<#args_type>::new()).parse(#wire_name, __json))
    }
}
