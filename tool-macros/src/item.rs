//! The fn under `#[tool]`, read as far as the expansion needs it: its attributes, visibility and
//! signature. The body stays a token tree, never parsed, so that a body that does not parse yet
//! (while someone is typing) still leaves the tool's type for code that registers it.

use proc_macro2::{Delimiter, Group, TokenStream};
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};
use syn::{Attribute, Signature, Visibility};

/// A fn item whose body is kept as tokens.
pub(crate) struct ToolItem {
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) vis: Visibility,
    pub(crate) sig: Signature,
    /// The `{ ... }` group of the body, as written.
    pub(crate) body: Group,
}

impl Parse for ToolItem {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let sig = input.parse()?;
        let body: Group = input.parse()?;
        if body.delimiter() != Delimiter::Brace {
            return Err(syn::Error::new(body.span(), "expected the fn's body"));
        }
        Ok(ToolItem {
            attrs,
            vis,
            sig,
            body,
        })
    }
}

impl ToTokens for ToolItem {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        for attr in &self.attrs {
            attr.to_tokens(tokens);
        }
        self.vis.to_tokens(tokens);
        self.sig.to_tokens(tokens);
        self.body.to_tokens(tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_does_not_parse_is_kept_as_written() {
        let item: ToolItem = syn::parse_str("async fn f(a: u8) -> u8 { let x = ; a }").unwrap();
        assert_eq!(item.sig.ident, "f");
        assert_eq!(item.body.stream().to_string(), "let x = ; a");
        let emitted = item.to_token_stream().to_string();
        assert!(emitted.starts_with("async fn f"), "{emitted}");
        assert!(emitted.ends_with("{ let x = ; a }"), "{emitted}");
    }

    #[test]
    fn a_fn_without_a_body_is_not_read() {
        assert!(syn::parse_str::<ToolItem>("async fn f() -> u8;").is_err());
        assert!(syn::parse_str::<ToolItem>("async fn f() -> u8 { 1 } extra").is_err());
    }
}
