//! `approval_amount` of the `Tool` impl: the amount that `approval_over` compares, read through
//! the `approval_field`'s own type and its `ApprovalAmount`, so a money type of the
//! application's (cents, a decimal) compares as it says, not as its JSON looks. For an
//! `Args<T>` struct, the trait's default reads the field as a JSON number.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use crate::ast::ToolFn;
use crate::attr::ToolAttr;

/// The method, for a tool with `approval_over`; nothing otherwise (the trait's default reads no
/// amount).
pub(crate) fn approval_amount_fn(attr: &ToolAttr, tool: &ToolFn) -> TokenStream {
    let Some(over) = &attr.approval_over else {
        return TokenStream::new();
    };
    let field = attr.approval_field.as_ref().map_or_else(
        || format_ident!("amount", span = over.key),
        |field| field.value.clone(),
    );
    let read = match tool.struct_param() {
        // A struct's field is read as a JSON number (the trait's default): naming the field here
        // would repeat the error of a struct without it.
        Some(_) => return TokenStream::new(),
        None => {
            let Some(param) = tool.plain_params().find(|p| p.ident == field) else {
                // valid.rs reports the missing field.
                return TokenStream::new();
            };
            let (ty, wire) = (&param.ty, &param.wire);
            quote! {
                let __value = __json.get(#wire)?;
                let __amount: #ty = __tg::serde::Deserialize::deserialize(__value).ok()?;
                let __amount = &__amount;
            }
        }
    };
    quote! {
        fn approval_amount(
            &self,
            __json: &__tg::serde_json::Value,
        ) -> ::core::option::Option<f64> {
            #read
            use __tg::{NoApprovalAmount as _, ViaApprovalAmount as _};
            (&__tg::AmountOf(__amount)).read_amount()
        }
    }
}
