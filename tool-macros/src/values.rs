//! Readers of the attribute's values, one for each kind of value. Each checks the value's own
//! form (a duration parses, a name is well formed) and says what to write instead; checks
//! against the fn or between keys live in `valid.rs`.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::meta::ParseNestedMeta;
use syn::parse::ParseStream;
use syn::spanned::Spanned as _;
use syn::{Ident, Lit, LitStr, Path, Token, bracketed};

use crate::choices::{DELIVERIES, Delivery, Hook, KEY_SCOPES, KeyScope, SIDE_EFFECTS, SideEffect};
use crate::errors::Errors;
use crate::keys::{self, tokens_to_comma};
use crate::spanned::Spanned;
use crate::suggest::unknown_value;
use crate::units::{
    Millis, Rate, parse_approval_ttl, parse_duration, parse_rate, with_hours, with_seconds,
};

/// Tokens as the user would write them inside quotes: `20 / min` becomes `20/min`.
fn compact(tokens: &TokenStream) -> String {
    tokens.to_string().split_whitespace().collect()
}

/// The string value of `key = "..."`. Anything else (an unquoted word, a number) is an error that
/// shows the same text in quotes, after `fix` (which may, say, add a missing unit).
pub(crate) fn string(
    meta: &ParseNestedMeta<'_>,
    key: &str,
    fix: fn(&str) -> String,
) -> syn::Result<LitStr> {
    let value = meta.value()?;
    if value.peek(LitStr) {
        return value.parse();
    }
    let tokens = tokens_to_comma(value)?;
    if tokens.is_empty() {
        return Err(syn::Error::new(
            value.span(),
            format!("`{key}` has no value: write `{}`", keys::example(key)),
        ));
    }
    let text = fix(&compact(&tokens).replace('"', ""));
    Err(syn::Error::new_spanned(
        tokens,
        format!("the value of `{key}` is a string in double quotes: write `{key} = \"{text}\"`"),
    ))
}

fn as_written(text: &str) -> String {
    text.to_owned()
}

pub(crate) fn side_effect(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<Option<Spanned<SideEffect>>> {
    let lit = string(meta, "side_effect", as_written)?;
    let value = match lit.value().as_str() {
        "read" => SideEffect::Read,
        "write" => SideEffect::Write,
        "destructive" => SideEffect::Destructive,
        other => {
            errors.push(unknown_value(
                lit.span(),
                "side_effect",
                other,
                SIDE_EFFECTS,
            ));
            return Ok(None);
        }
    };
    Ok(Some(Spanned::new(value, lit.span())))
}

pub(crate) fn tool_name(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<Option<Spanned<String>>> {
    let lit = string(meta, "name", as_written)?;
    let name = lit.value();
    let valid = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        errors.push(syn::Error::new(
            lit.span(),
            format!(
                "`{name}` is not a valid tool name: providers accept 1 to 64 of a-z, A-Z, 0-9, `_` and `-`; write for example `name = \"{}\"`",
                suggest_name(&name)
            ),
        ));
        return Ok(None);
    }
    Ok(Some(Spanned::new(name, lit.span())))
}

fn suggest_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if cleaned.is_empty() {
        "my_tool".into()
    } else {
        cleaned
    }
}

/// A permission, the value of `permission` or `approver`: one word with no spaces.
pub(crate) fn permission(
    meta: &ParseNestedMeta<'_>,
    key: &str,
    errors: &mut Errors,
) -> syn::Result<Option<Spanned<String>>> {
    let lit = string(meta, key, as_written)?;
    let value = lit.value();
    if value.trim().is_empty() || value.chars().any(char::is_whitespace) {
        let suggestion: String = value.split_whitespace().collect::<Vec<_>>().join(":");
        let example = keys::example(key);
        let message = if suggestion.is_empty() {
            format!("a permission is one word with no spaces: write for example `{example}`")
        } else {
            format!(
                "a permission is one word with no spaces: write for example `{key} = \"{suggestion}\"`"
            )
        };
        errors.push(syn::Error::new(lit.span(), message));
        return Ok(None);
    }
    Ok(Some(Spanned::new(value, lit.span())))
}

/// The threshold of `approval_over`: a number literal above zero.
pub(crate) fn number(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<Option<Spanned<f64>>> {
    let value = meta.value()?;
    let tokens = tokens_to_comma(value)?;
    let text = compact(&tokens);
    let number = |text: &str| text.parse::<f64>().ok().filter(|n| n.is_finite());
    let lit = syn::parse2::<Lit>(tokens.clone()).ok();
    let message = match &lit {
        Some(Lit::Int(_) | Lit::Float(_)) => {
            let digits = match &lit {
                Some(Lit::Int(int)) => int.base10_digits().to_owned(),
                Some(Lit::Float(float)) => float.base10_digits().to_owned(),
                _ => String::new(),
            };
            match number(&digits) {
                Some(n) if n > 0.0 => return Ok(Some(Spanned::new(n, tokens_span(&tokens)))),
                Some(n) if n < 0.0 => format!(
                    "approval_over is a threshold above zero: write `approval_over = {}`",
                    digits.trim_start_matches('-')
                ),
                _ => "approval_over is a threshold above zero (a threshold of zero would hold every call for a human): write for example `approval_over = 5000`".to_owned(),
            }
        }
        Some(Lit::Str(lit)) => match number(lit.value().trim()) {
            Some(n) if n > 0.0 => format!(
                "approval_over is a number, not a string: write `approval_over = {}` without the quotes",
                lit.value().trim()
            ),
            _ => {
                "approval_over is a number, not a string: write for example `approval_over = 5000`"
                    .to_owned()
            }
        },
        _ if tokens.is_empty() => {
            return Err(syn::Error::new(
                value.span(),
                "`approval_over` has no value: write `approval_over = 5000`",
            ));
        }
        _ => format!(
            "approval_over takes a number literal, not `{text}`: write for example `approval_over = 5000`"
        ),
    };
    errors.push(syn::Error::new_spanned(tokens, message));
    Ok(None)
}

/// The span of a value's first token, for values kept as data.
fn tokens_span(tokens: &TokenStream) -> Span {
    tokens
        .clone()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |tt| tt.span())
}

pub(crate) fn argument_name(meta: &ParseNestedMeta<'_>, key: &str) -> syn::Result<Spanned<Ident>> {
    let value = meta.value()?;
    if value.peek(LitStr) {
        let lit: LitStr = value.parse()?;
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "name the argument without quotes: `{key} = {}`",
                lit.value()
            ),
        ));
    }
    if value.peek(Ident) && (value.peek2(Token![,]) || peek_end(value, 2)) {
        let ident: Ident = value.parse()?;
        let span = ident.span();
        return Ok(Spanned::new(ident, span));
    }
    let tokens = tokens_to_comma(value)?;
    if tokens.is_empty() {
        return Err(syn::Error::new(
            value.span(),
            format!("`{key}` has no value: write `{}`", keys::example(key)),
        ));
    }
    Err(syn::Error::new_spanned(
        tokens,
        format!(
            "`{key}` takes the name of one of the fn's arguments, such as `{}`",
            keys::example(key)
        ),
    ))
}

/// Whether the stream ends after `n - 1` more tokens.
fn peek_end(input: ParseStream<'_>, n: usize) -> bool {
    let mut cursor = input.cursor();
    for _ in 1..n {
        match cursor.token_tree() {
            Some((_, next)) => cursor = next,
            None => return true,
        }
    }
    cursor.eof()
}

/// `crate = path`: the path of the facade when it is renamed, as serde and thiserror take it.
pub(crate) fn crate_path(meta: &ParseNestedMeta<'_>) -> syn::Result<Spanned<Path>> {
    let value = meta.value()?;
    if value.peek(LitStr) {
        let lit: LitStr = value.parse()?;
        return Err(syn::Error::new(
            lit.span(),
            format!("name the crate without quotes: `crate = {}`", lit.value()),
        ));
    }
    let fork = value.fork();
    if fork.call(Path::parse_mod_style).is_ok() && (fork.is_empty() || fork.peek(Token![,])) {
        let path = value.call(Path::parse_mod_style)?;
        let span = path.span();
        return Ok(Spanned::new(path, span));
    }
    let tokens = tokens_to_comma(value)?;
    if tokens.is_empty() {
        return Err(syn::Error::new(
            value.span(),
            "`crate` has no value: write `crate = my_alias`, the name `toolgate` is imported as",
        ));
    }
    Err(syn::Error::new_spanned(
        tokens,
        "`crate` takes the path the `toolgate` crate is reachable by, such as `crate = my_alias` after `use toolgate as my_alias;`",
    ))
}

/// `reconcile = path` or `check = path`, optionally with the parameters the hook takes:
/// `path(param, ...)`.
pub(crate) fn hook(meta: &ParseNestedMeta<'_>, key: &str) -> syn::Result<Spanned<Hook>> {
    // How the key is written with a path alone, and with the parameters it names.
    let example = keys::example(key);
    let with_args = match key {
        "check" => "check = within_balance(ctx, order_id, amount)",
        _ => "reconcile = find_refund(ctx, order_id)",
    };
    let value = meta.value()?;
    if value.peek(LitStr) {
        let lit: LitStr = value.parse()?;
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "name the {key} fn without quotes: `{key} = {}`",
                lit.value()
            ),
        ));
    }
    let fork = value.fork();
    if fork.parse::<Path>().is_ok() && (fork.is_empty() || fork.peek(Token![,])) {
        let path: Path = value.parse()?;
        let span = path.span();
        return Ok(Spanned::new(Hook { path, args: None }, span));
    }
    let fork = value.fork();
    if fork.parse::<Path>().is_ok() && fork.peek(syn::token::Paren) {
        let path: Path = value.parse()?;
        let span = path.span();
        let content;
        syn::parenthesized!(content in value);
        let args = syn::punctuated::Punctuated::<Ident, Token![,]>::parse_terminated(&content)
            .map_err(|err| {
                syn::Error::new(
                    err.span(),
                    format!("list the tool's parameters the hook takes, by name: `{with_args}`"),
                )
            })?;
        let args = Some(args.into_iter().collect());
        return Ok(Spanned::new(Hook { path, args }, span));
    }
    let tokens = tokens_to_comma(value)?;
    if tokens.is_empty() {
        return Err(syn::Error::new(
            value.span(),
            format!("`{key}` has no value: write `{example}`"),
        ));
    }
    Err(syn::Error::new_spanned(
        tokens,
        format!(
            "{key} takes the path of an async fn, such as `{example}`, or the path and the parameters it takes, such as `{with_args}`"
        ),
    ))
}

pub(crate) fn key_list(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<Option<Spanned<Vec<Ident>>>> {
    let value = meta.value()?;
    if !value.peek(syn::token::Bracket) {
        let tokens = tokens_to_comma(value)?;
        if tokens.is_empty() {
            return Err(syn::Error::new(
                value.span(),
                "`key` has no value: write `key = [order_id]`",
            ));
        }
        // `key = (a, b)` or `key = a`: the same names, in brackets.
        let inner = match syn::parse2::<TokenTree>(tokens.clone()) {
            Ok(TokenTree::Group(group)) => group.stream(),
            _ => tokens.clone(),
        };
        let inner = inner.to_string().replace('"', "");
        return Err(syn::Error::new_spanned(
            tokens,
            format!("key takes a list of argument names in brackets: `key = [{inner}]`"),
        ));
    }
    let content;
    let brackets = bracketed!(content in value);
    let names = content.parse_terminated(parse_argument_ident, Token![,])?;
    let names: Vec<Ident> = names.into_iter().collect();
    if names.is_empty() {
        errors.push(syn::Error::new(
            brackets.span.join(),
            "an empty key identifies nothing; list the arguments that identify the operation, such as `key = [order_id]`, or leave `key` out to use them all",
        ));
        return Ok(None);
    }
    let mut duplicate = false;
    for (index, name) in names.iter().enumerate() {
        if names[..index].contains(name) {
            duplicate = true;
            errors.push(syn::Error::new(
                name.span(),
                format!("`{name}` is listed twice in `key`; list it once"),
            ));
        }
    }
    if duplicate {
        return Ok(None);
    }
    Ok(Some(Spanned::new(names, brackets.span.join())))
}

/// One name in `key = [...]`.
fn parse_argument_ident(input: ParseStream<'_>) -> syn::Result<Ident> {
    if input.peek(LitStr) {
        let lit: LitStr = input.parse()?;
        return Err(syn::Error::new(
            lit.span(),
            format!("name the argument without quotes: `{}`", lit.value()),
        ));
    }
    input.parse().map_err(|err| {
        syn::Error::new(
            err.span(),
            "expected the name of one of the fn's arguments, such as `key = [order_id]`",
        )
    })
}

pub(crate) fn key_scope(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<Option<Spanned<KeyScope>>> {
    let lit = string(meta, "key_scope", as_written)?;
    match lit.value().as_str() {
        "run" => Ok(Some(Spanned::new(KeyScope::Run, lit.span()))),
        "tenant" => Ok(Some(Spanned::new(KeyScope::Tenant, lit.span()))),
        other => {
            errors.push(unknown_value(lit.span(), "key_scope", other, KEY_SCOPES));
            Ok(None)
        }
    }
}

pub(crate) fn delivery(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<Option<Spanned<Delivery>>> {
    let lit = string(meta, "delivery", as_written)?;
    match lit.value().as_str() {
        "direct" => Ok(Some(Spanned::new(Delivery::Direct, lit.span()))),
        "outbox" => Ok(Some(Spanned::new(Delivery::Outbox, lit.span()))),
        other => {
            errors.push(unknown_value(lit.span(), "delivery", other, DELIVERIES));
            Ok(None)
        }
    }
}

pub(crate) fn duration_value(
    meta: &ParseNestedMeta<'_>,
    key: &str,
    errors: &mut Errors,
) -> syn::Result<Option<Spanned<Millis>>> {
    let lit = string(meta, key, with_seconds)?;
    Ok(parsed(&lit, parse_duration, errors))
}

/// How long an approval may wait: a duration, where a bare number most likely meant hours.
pub(crate) fn approval_ttl(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<Option<Spanned<Millis>>> {
    let lit = string(meta, "approval_ttl", with_hours)?;
    Ok(parsed(&lit, parse_approval_ttl, errors))
}

pub(crate) fn rate(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<Option<Spanned<Rate>>> {
    let lit = string(meta, "rate_limit", as_written)?;
    Ok(parsed(&lit, parse_rate, errors))
}

/// A string literal read by `parse`, or its error collected on the literal.
fn parsed<T>(
    lit: &LitStr,
    parse: fn(&str) -> Result<T, String>,
    errors: &mut Errors,
) -> Option<Spanned<T>> {
    match parse(&lit.value()) {
        Ok(value) => Some(Spanned::new(value, lit.span())),
        Err(message) => {
            errors.push(syn::Error::new(lit.span(), message));
            None
        }
    }
}

/// A `key = true | false` value.
pub(crate) fn boolean(
    meta: &ParseNestedMeta<'_>,
    key: &str,
    errors: &mut Errors,
) -> syn::Result<Option<Spanned<bool>>> {
    // What `true` means, where the key's name does not say it.
    let meaning = if key == "jitter" {
        " (full jitter)"
    } else {
        ""
    };
    let value = meta.value()?;
    let tokens = tokens_to_comma(value)?;
    match syn::parse2::<syn::LitBool>(tokens.clone()) {
        Ok(lit) => Ok(Some(Spanned::new(lit.value, lit.span()))),
        Err(_) => {
            errors.push(syn::Error::new_spanned(
                tokens,
                format!("{key} is a bool: write `{key} = true`{meaning} or `{key} = false`"),
            ));
            Ok(None)
        }
    }
}

/// The count of `max_attempts`: a whole number, at least 1.
pub(crate) fn attempts(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<Option<Spanned<u32>>> {
    let value = meta.value()?;
    let tokens = tokens_to_comma(value)?;
    let parsed = match syn::parse2::<Lit>(tokens.clone()) {
        Ok(Lit::Int(int)) => Some(int.base10_parse::<i64>()),
        _ => None,
    };
    match parsed {
        Some(Ok(n)) if n >= 1 => {
            let n = u32::try_from(n).map_err(|_| {
                syn::Error::new_spanned(&tokens, "max_attempts is at most 4294967295; a handful is usual, such as `max_attempts = 4`")
            })?;
            Ok(Some(Spanned::new(n, tokens_span(&tokens))))
        }
        Some(_) => {
            errors.push(syn::Error::new_spanned(
                tokens,
                "max_attempts counts the first attempt too, so it is at least 1; write `max_attempts = 1` for no retries",
            ));
            Ok(None)
        }
        None => {
            errors.push(syn::Error::new_spanned(
                tokens,
                "max_attempts takes a whole number, such as `max_attempts = 4`",
            ));
            Ok(None)
        }
    }
}
