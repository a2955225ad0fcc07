//! The text path of a tool whose plain parameters carry nothing but docs: its `TextArgs` impl
//! (`invoke_text`, `read_args` and `invoke_args`), and the one reading of the text they share.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::ToolFn;

/// The tool's reading of arguments sent as text, for a tool whose plain parameters carry no
/// `#[serde]` or `#[schemars]` setting: the `TextArgs` impl, with `invoke_text` running the tool
/// on what `__read_text` read, and, when the shared field reader reads the parameters,
/// `read_args` holding that reading (of text nothing has checked) for `invoke_args`; and the
/// method of the `Tool` impl that hands it to the dispatcher. Nothing for any other tool, whose
/// `Tool` impl keeps the default (no reading; its arguments are validated against its schema).
pub(crate) struct TextPath {
    /// In the `Tool` impl.
    pub(crate) accessor: TokenStream,
    /// Beside it.
    pub(crate) text_args: TokenStream,
}

pub(crate) fn text_path(tool: &ToolFn, ident: &syn::Ident, args_type: &TokenStream) -> TextPath {
    if !tool.reads_text() {
        return TextPath {
            accessor: TokenStream::new(),
            text_args: TokenStream::new(),
        };
    }
    let accessor = quote! {
        fn text_args(&self) -> ::core::option::Option<&dyn __tg::TextArgs> {
            ::core::option::Option::Some(self)
        }
    };
    let invoke_text = quote! {
        fn invoke_text<'__a>(
            &'__a self,
            __ctx: &'__a __tg::Ctx,
            __text: &'__a str,
        ) -> ::core::option::Option<__tg::ToolFuture<'__a>> {
            let __args = __read_text(__text)?;
            ::core::option::Option::Some(__run(__ctx, __args))
        }
    };
    // The shared reader takes only one object, each key once: text nothing has checked can be
    // read with it (`read_args`).
    let read_ahead = tool.shared_reader().then(|| {
        quote! {
            fn read_args(&self, __text: &str) -> ::core::option::Option<__tg::ReadArgs> {
                let __args = __read_text(__text)?;
                ::core::option::Option::Some(__tg::ReadArgs::new(__args))
            }

            fn invoke_args<'__a>(
                &'__a self,
                __ctx: &'__a __tg::Ctx,
                __args: __tg::ReadArgs,
            ) -> __tg::ToolFuture<'__a> {
                match __tg::take_args::<#args_type>(__args, __DESCRIPTOR.name) {
                    ::core::result::Result::Ok(__args) => __run(__ctx, __args),
                    ::core::result::Result::Err(__err) => __tg::failed(__err),
                }
            }
        }
    });
    TextPath {
        accessor,
        text_args: quote! {
            impl __tg::TextArgs for #ident {
                #invoke_text

                #read_ahead
            }
        },
    }
}

/// The reading `invoke_text` and `read_args` share: the arguments straight from the text when
/// their types prove that serde accepts exactly what the schema does (`__private::ExactArg`),
/// `None` otherwise or when serde refuses the text. Nothing for a tool that never reads text.
pub(crate) fn read_text_fn(tool: &ToolFn, args_type: &TokenStream) -> TokenStream {
    if !tool.reads_text() {
        return TokenStream::new();
    }
    let types = tool.plain_params().map(|param| &param.ty);
    quote! {
        fn __read_text(__text: &str) -> ::core::option::Option<#args_type> {
            use __tg::ProbeExact as _;
            if !(true #(&& (&__tg::Probe::<#types>::new()).exact())*) {
                return ::core::option::Option::None;
            }
            (&__tg::Probe::<#args_type>::new()).parse_text(__text)
        }
    }
}
