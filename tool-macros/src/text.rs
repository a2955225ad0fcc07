//! The text path of the `Tool` impl, for a tool whose plain parameters carry nothing but docs:
//! `invoke_text`, `read_args` and `invoke_args`, and the one reading of the text they share.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::ToolFn;

/// `Tool::invoke_text`, and with it, when the shared field reader reads the parameters,
/// `Tool::read_args` and `Tool::invoke_args`. For a tool whose plain parameters carry no
/// `#[serde]` or `#[schemars]` setting, `invoke_text` runs the tool on what `__read_text` read,
/// and `read_args` holds that reading (of text nothing has checked) for `invoke_args`. Any
/// other tool declines text: `None`, as the trait's default would answer.
pub(crate) fn invoke_text_fn(tool: &ToolFn, args_type: &TokenStream) -> TokenStream {
    if !tool.reads_text() {
        // What the default answers for a tool without `read_args`, said here: a default
        // method is compiled once for every type that implements the trait, this is one line.
        return quote! {
            fn invoke_text<'__a>(
                &'__a self,
                _: &'__a __tg::Ctx,
                _: &'__a str,
            ) -> ::core::option::Option<__tg::ToolFuture<'__a>> {
                ::core::option::Option::None
            }
        };
    }
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
    if !tool.shared_reader() {
        return invoke_text;
    }
    // The shared reader takes only one object, each key once: text nothing has checked can be
    // read with it (`Tool::read_args`).
    quote! {
        #invoke_text

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
