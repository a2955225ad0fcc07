//! The one table of the keys `#[tool]` accepts, at the top level and inside `retry(...)`, and the
//! one helper that reads a key's name for either list: an unknown key gets the nearest name, a
//! key without its value says how to write it, a key given twice is reported once.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::Token;
use syn::meta::ParseNestedMeta;
use syn::parse::ParseStream;

use crate::choices::{KEY_SCOPES, SIDE_EFFECTS};
use crate::errors::Errors;
use crate::suggest::unknown_key;

/// Where a key is written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// `#[tool(key = ...)]`.
    Top,
    /// `#[tool(retry(key = ...))]`.
    Retry,
}

impl Level {
    /// The list a key belongs to, as errors name it.
    fn context(self) -> &'static str {
        match self {
            Level::Top => "#[tool]",
            Level::Retry => "retry(...)",
        }
    }
}

/// One key: its name, where it is written, and how (for errors that say what to write).
struct Key {
    name: &'static str,
    level: Level,
    example: &'static str,
}

const fn key(name: &'static str, level: Level, example: &'static str) -> Key {
    Key {
        name,
        level,
        example,
    }
}

/// Every key, in the order the docs list them.
const KEYS: &[Key] = &[
    key("side_effect", Level::Top, "side_effect = \"write\""),
    key("name", Level::Top, "name = \"issue_refund\""),
    key("permission", Level::Top, "permission = \"refund:create\""),
    key("approval_over", Level::Top, "approval_over = 5000"),
    key("approval_field", Level::Top, "approval_field = amount"),
    key("approver", Level::Top, "approver = \"refund:approve\""),
    key("approval_ttl", Level::Top, "approval_ttl = \"24h\""),
    key("key", Level::Top, "key = [order_id]"),
    key("key_scope", Level::Top, "key_scope = \"tenant\""),
    key("timeout", Level::Top, "timeout = \"10s\""),
    key(
        "retry",
        Level::Top,
        "retry(max_attempts = 4, base = \"100ms\", max = \"5s\", jitter = true)",
    ),
    key("rate_limit", Level::Top, "rate_limit = \"20/min\""),
    key("reconcile", Level::Top, "reconcile = find_refund"),
    key("check", Level::Top, "check = within_balance"),
    key("resource", Level::Top, "resource = order_id"),
    key("honours_key", Level::Top, "honours_key = true"),
    key("delivery", Level::Top, "delivery = \"outbox\""),
    key("crate", Level::Top, "crate = my_alias"),
    key("max_attempts", Level::Retry, "max_attempts = 4"),
    key("base", Level::Retry, "base = \"100ms\""),
    key("max", Level::Retry, "max = \"5s\""),
    key("jitter", Level::Retry, "jitter = true"),
];

/// The names of the keys written at `level`.
pub(crate) fn names(level: Level) -> Vec<&'static str> {
    KEYS.iter()
        .filter(|key| key.level == level)
        .map(|key| key.name)
        .collect()
}

/// How `name` is written.
pub(crate) fn example(name: &str) -> &'static str {
    KEYS.iter()
        .find(|key| key.name == name)
        .map_or("", |key| key.example)
}

/// The keys of one list seen so far: the first occurrence of a key wins.
#[derive(Default)]
pub(crate) struct Seen(Vec<String>);

/// A key read by [`read_key`].
pub(crate) struct ReadKey {
    pub(crate) name: String,
    pub(crate) span: Span,
    /// Whether this is the key's first occurrence in its list; a repeat is reported, and its
    /// value is read for its own errors and then dropped.
    pub(crate) first: bool,
}

/// Reads the name of the key `meta` starts with, at `level`. `Ok(None)`: the key is unknown,
/// reported, and its value skipped. `Err`: the key is known but written without its value.
pub(crate) fn read_key(
    meta: &ParseNestedMeta<'_>,
    level: Level,
    seen: &mut Seen,
    errors: &mut Errors,
) -> syn::Result<Option<ReadKey>> {
    let valid = names(level);
    let Some(ident) = meta.path.get_ident() else {
        return Err(syn::Error::new_spanned(
            &meta.path,
            format!(
                "expected one of the keys of {}: {}",
                level.context(),
                valid.join(", ")
            ),
        ));
    };
    let name = ident.to_string();
    let span = ident.span();
    if !valid.contains(&name.as_str()) {
        errors.push(unknown(span, &name, level, &valid));
        skip_to_comma(meta.input)?;
        return Ok(None);
    }
    let takes_parens = name == "retry";
    if !takes_parens && !meta.input.peek(Token![=]) {
        return Err(syn::Error::new(
            span,
            format!("`{name}` takes a value: write `{}`", example(&name)),
        ));
    }
    let first = if seen.0.contains(&name) {
        let context = match level {
            Level::Top => "",
            Level::Retry => " in `retry`",
        };
        errors.push(syn::Error::new(
            span,
            format!("`{name}` is given twice{context}; keep one"),
        ));
        false
    } else {
        seen.0.push(name.clone());
        true
    };
    Ok(Some(ReadKey { name, span, first }))
}

/// The error for a key the list does not know. At the top level, a bare `write` or `tenant` is a
/// value written without its key.
fn unknown(span: Span, name: &str, level: Level, valid: &[&str]) -> syn::Error {
    if level == Level::Top && SIDE_EFFECTS.contains(&name) {
        return syn::Error::new(
            span,
            format!(
                "`{name}` is a side effect, and goes with its key: write `side_effect = \"{name}\"`"
            ),
        );
    }
    if level == Level::Top && KEY_SCOPES.contains(&name) {
        return syn::Error::new(
            span,
            format!(
                "`{name}` is a key scope, and goes with its key: write `key_scope = \"{name}\"`"
            ),
        );
    }
    unknown_key(span, name, valid, level.context())
}

/// Consumes what is left of a key that is being rejected, up to the comma before the next key.
pub(crate) fn skip_to_comma(input: ParseStream<'_>) -> syn::Result<()> {
    tokens_to_comma(input).map(drop)
}

/// The tokens up to the next comma (or the end), consumed.
pub(crate) fn tokens_to_comma(input: ParseStream<'_>) -> syn::Result<TokenStream> {
    let mut tokens = TokenStream::new();
    while !input.is_empty() && !input.peek(Token![,]) {
        tokens.extend([input.parse::<TokenTree>()?]);
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_an_example_that_starts_with_its_name() {
        for key in KEYS {
            assert!(key.example.starts_with(key.name), "{}", key.name);
        }
    }

    #[test]
    fn the_lists_are_apart() {
        assert!(names(Level::Top).contains(&"retry"));
        assert!(!names(Level::Top).contains(&"base"));
        assert_eq!(
            names(Level::Retry),
            ["max_attempts", "base", "max", "jitter"]
        );
    }
}
