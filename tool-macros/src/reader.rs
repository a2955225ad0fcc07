//! The `Deserialize` of the arguments struct of plain parameters without `#[serde]` settings:
//! through `__private::read_fields`, the one field reader every tool shares, rather than serde's
//! derive. The struct says its fields' names and how to read field `i`; the walk over the object,
//! the duplicate and unknown keys and the missing fields are the reader's.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::ToolFn;

/// `Deserialize` for the arguments struct through `__private::read_fields`: the struct's field
/// names and, per field, one line that reads it.
pub(crate) fn shared_reader_impls(tool: &ToolFn, params: &[syn::Ident]) -> TokenStream {
    let names: Vec<&str> = tool.plain_params().map(|p| p.wire.as_str()).collect();
    let idents: Vec<&syn::Ident> = tool.plain_params().map(|p| &p.ident).collect();
    let indices: Vec<syn::Index> = (0..names.len()).map(syn::Index::from).collect();
    let arms = indices.iter().map(|index| {
        quote!(#index => __slots.#index = ::core::option::Option::Some(__map.next_value()?),)
    });
    let nones = params.iter().map(|_| quote!(::core::option::Option::None));
    let bounds = quote!(#(#params: __tg::serde::Deserialize<'__de>),*);
    quote! {
        impl<'__de, #(#params),*> __tg::serde::Deserialize<'__de> for __ToolArgs<#(#params),*>
        where
            #bounds
        {
            fn deserialize<__D: __tg::serde::Deserializer<'__de>>(
                __deserializer: __D,
            ) -> ::core::result::Result<Self, __D::Error> {
                __tg::read_fields(__deserializer)
            }
        }

        impl<'__de, #(#params),*> __tg::ArgsFields<'__de> for __ToolArgs<#(#params),*>
        where
            #bounds
        {
            const NAMES: &'static [&'static str] = &[#(#names),*];
            type Slots = (#(::core::option::Option<#params>,)*);

            // `()` for a tool without plain parameters.
            #[allow(clippy::unused_unit)]
            fn slots() -> Self::Slots {
                (#(#nones,)*)
            }

            fn read<__A: __tg::serde::de::MapAccess<'__de>>(
                __slots: &mut Self::Slots,
                __index: usize,
                __map: &mut __A,
            ) -> ::core::result::Result<(), __A::Error> {
                match __index {
                    #(#arms)*
                    _ => {}
                }
                ::core::result::Result::Ok(())
            }

            fn finish<__E: __tg::serde::de::Error>(
                __slots: Self::Slots,
            ) -> ::core::result::Result<Self, __E> {
                ::core::result::Result::Ok(__ToolArgs {
                    #(#idents: __tg::missing(__slots.#indices, #names)?,)*
                })
            }
        }
    }
}
