//! What `#[tool]` emits when the attribute or the fn has an error: the fn as written next to the
//! errors, and the tool's type, so that one mistake does not become twenty.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::ToolFn;
use crate::attr::ToolAttr;
use crate::expand::tool_type;

/// What `#[tool]` emits when the attribute or the fn has an error: the fn as written, and, for a
/// free fn, the type of the same name with a `Tool` impl, so that code registering the tool does
/// not add "not found" or "not a tool" errors to the one that matters.
pub(crate) fn fallback(attr: &ToolAttr, tool: &ToolFn) -> TokenStream {
    let runtime = attr.runtime();
    let item = &tool.item;
    let is_method = item
        .sig
        .inputs
        .iter()
        .any(|input| matches!(input, syn::FnArg::Receiver(_)));
    if is_method {
        return quote!(#item);
    }
    let vis = &item.vis;
    let ident = &item.sig.ident;
    let skeleton = tool_type(tool);
    quote! {
        #item

        #skeleton

        impl #ident {
            #[allow(dead_code)]
            #vis fn descriptor() -> &'static #runtime::__private::ToolDescriptor {
                ::core::unreachable!()
            }

            #[allow(dead_code)]
            #vis fn args_schema() -> #runtime::__private::serde_json::Value {
                ::core::unreachable!()
            }
        }

        impl #runtime::__private::Tool for #ident {
            fn descriptor(&self) -> &'static #runtime::__private::ToolDescriptor {
                ::core::unreachable!()
            }

            fn args_schema(&self) -> #runtime::__private::serde_json::Value {
                ::core::unreachable!()
            }

            fn invoke<'__a>(
                &'__a self,
                _: &'__a #runtime::__private::Ctx,
                _: &'__a #runtime::__private::serde_json::Value,
            ) -> #runtime::__private::ToolFuture<'__a> {
                ::core::unreachable!()
            }
        }
    }
}
