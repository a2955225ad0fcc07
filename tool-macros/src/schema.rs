//! The `JsonSchema` of the arguments struct of plain parameters with nothing but docs: a table of
//! the fields, which `__private::fields_schema` turns into the object schema for every tool,
//! rather than schemars' derive, which writes the schema out in full per tool.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::{Attribute, Expr, ExprLit, Lit};

use crate::ast::ToolFn;

/// `JsonSchema` for the arguments struct: its name, and a row per field (wire name, type, doc).
pub(crate) fn fields_schema_impl(tool: &ToolFn, params: &[syn::Ident]) -> TokenStream {
    let rows = tool.plain_params().zip(params).map(|(param, generic)| {
        let name = &param.wire;
        let doc = doc_expr(&param.field_attrs);
        quote!(__tg::FieldSchema::of::<#generic>(#name, #doc))
    });
    quote! {
        impl<#(#params),*> __tg::schemars::JsonSchema for __ToolArgs<#(#params),*>
        where
            #(#params: __tg::schemars::JsonSchema + __tg::serde::de::DeserializeOwned),*
        {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed("__ToolArgs")
            }

            fn json_schema(
                __generator: &mut __tg::schemars::SchemaGenerator,
            ) -> __tg::schemars::Schema {
                __tg::fields_schema(__generator, &[#(#rows),*])
            }
        }
    }
}

/// The text of a field's `#[doc]` attributes as schemars' derive reads it: each value without
/// its first space, joined by `\n`, in a `concat!` so that a doc given by a macro
/// (`#[doc = include_str!(..)]`) reads as it does there.
fn doc_expr(attrs: &[Attribute]) -> TokenStream {
    let mut parts = Vec::new();
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("doc")) {
        let syn::Meta::NameValue(doc) = &attr.meta else {
            continue;
        };
        if !parts.is_empty() {
            parts.push(quote!("\n"));
        }
        parts.push(match &doc.value {
            Expr::Lit(ExprLit {
                lit: Lit::Str(text),
                ..
            }) => {
                let text = text.value();
                let text = text.strip_prefix(' ').unwrap_or(&text);
                text.to_token_stream()
            }
            other => other.to_token_stream(),
        });
    }
    quote!(::core::concat!(#(#parts),*))
}
