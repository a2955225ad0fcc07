//! The `#[tool]` attribute of toolgate. Depend on `toolgate`, which re-exports it; the generated
//! code names the runtime through `::toolgate`.

use proc_macro::TokenStream;

mod ast;
mod attr;
mod errors;
mod expand;
mod suggest;
mod valid;

/// Declares an async fn as a tool the model may call.
///
/// Generates, next to the fn (which stays callable as written): a type of the same name that
/// implements `toolgate::Tool`, the JSON schema of its arguments, a validator, and a static
/// descriptor. The keys are documented on `toolgate::tool`.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, input: TokenStream) -> TokenStream {
    let input: proc_macro2::TokenStream = input.into();
    let item: syn::ItemFn = match syn::parse2(input.clone()) {
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
            out.extend(expand::fallback(&tool));
            out.into()
        }
    }
}
