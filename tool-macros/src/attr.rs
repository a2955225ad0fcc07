//! Parsing the keys of `#[tool(...)]`. Values are checked here only for their own form (a
//! duration parses, a name is well formed); checks against the fn live in `valid.rs`.
//!
//! A key whose value cannot be read is reported and skipped up to the next comma, so the keys
//! after it are still read: one mistake gives one error, not a missing key's worth of others.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::meta::ParseNestedMeta;
use syn::parse::ParseStream;
use syn::spanned::Spanned;
use syn::{Ident, Lit, LitStr, Path, Token, bracketed};

use crate::errors::Errors;
use crate::suggest::{unknown_key, unknown_value};

/// The keys `#[tool]` accepts, in the order the docs list them.
pub(crate) const KEYS: &[&str] = &[
    "side_effect",
    "name",
    "permission",
    "approval_over",
    "approval_field",
    "key",
    "key_scope",
    "timeout",
    "retry",
    "rate_limit",
    "reconcile",
    "resource",
    "honours_key",
];

/// The keys of `retry(...)`.
pub(crate) const RETRY_KEYS: &[&str] = &["max_attempts", "base", "max", "jitter"];

/// The values of `side_effect`.
const SIDE_EFFECTS: &[&str] = &["read", "write", "destructive"];

/// The values of `key_scope`.
const KEY_SCOPES: &[&str] = &["run", "tenant"];

/// How each key is written, for errors that say what to write.
fn example(key: &str) -> &'static str {
    match key {
        "side_effect" => "side_effect = \"write\"",
        "name" => "name = \"issue_refund\"",
        "permission" => "permission = \"refund:create\"",
        "approval_over" => "approval_over = 5000",
        "approval_field" => "approval_field = amount",
        "key" => "key = [order_id]",
        "key_scope" => "key_scope = \"tenant\"",
        "timeout" => "timeout = \"10s\"",
        "retry" => "retry(max_attempts = 4, base = \"100ms\", max = \"5s\", jitter = true)",
        "rate_limit" => "rate_limit = \"20/min\"",
        "reconcile" => "reconcile = find_refund",
        "resource" => "resource = order_id",
        "honours_key" => "honours_key = true",
        "max_attempts" => "max_attempts = 4",
        "base" => "base = \"100ms\"",
        "max" => "max = \"5s\"",
        "jitter" => "jitter = true",
        _ => "",
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SideEffect {
    Read,
    Write,
    Destructive,
}

/// A value with the span of the tokens it came from (`span`) and of the key that introduced it
/// (`key`): errors about the value land on the value, errors about the key's place on the key.
pub(crate) struct At<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
    pub(crate) key: Span,
}

fn at<T>(value: T, span: Span) -> At<T> {
    At {
        value,
        span,
        key: span,
    }
}

#[derive(Default)]
pub(crate) struct RetryAttr {
    pub(crate) max_attempts: Option<At<u32>>,
    pub(crate) base: Option<At<u64>>,
    pub(crate) max: Option<At<u64>>,
    pub(crate) jitter: Option<At<bool>>,
}

/// Every key of the attribute, as written.
#[derive(Default)]
pub(crate) struct ToolAttr {
    pub(crate) side_effect: Option<At<SideEffect>>,
    pub(crate) name: Option<At<String>>,
    pub(crate) permission: Option<At<String>>,
    pub(crate) approval_over: Option<At<f64>>,
    pub(crate) approval_field: Option<At<Ident>>,
    pub(crate) key: Option<At<Vec<Ident>>>,
    pub(crate) key_scope: Option<At<bool>>,
    pub(crate) timeout: Option<At<u64>>,
    pub(crate) retry: Option<At<RetryAttr>>,
    pub(crate) rate_limit: Option<At<(u32, u64)>>,
    pub(crate) reconcile: Option<At<Path>>,
    pub(crate) resource: Option<At<Ident>>,
    pub(crate) honours_key: Option<At<bool>>,
    /// Keys that were given with a value already reported as an error. Checks between keys skip
    /// them: a rejected `side_effect` is not the default `"read"`, a rejected `approval_field`
    /// is not a missing one.
    rejected: Vec<String>,
}

impl ToolAttr {
    /// Whether `key` was given, with a value that was reported as an error.
    pub(crate) fn rejected(&self, key: &str) -> bool {
        self.rejected.iter().any(|rejected| rejected == key)
    }
}

/// Reports a key given twice, for every key of one list: the first occurrence wins.
#[derive(Default)]
struct Seen(Vec<String>);

impl Seen {
    /// Whether `key` is new; if not, the error is recorded on `span`.
    fn first(&mut self, key: &str, span: Span, context: &str, errors: &mut Errors) -> bool {
        if self.0.iter().any(|seen| seen == key) {
            errors.push(syn::Error::new(
                span,
                format!("`{key}` is given twice{context}; keep one"),
            ));
            false
        } else {
            self.0.push(key.to_owned());
            true
        }
    }
}

impl ToolAttr {
    /// Parses the attribute's tokens, recording every error in `errors` and carrying on after
    /// each one.
    pub(crate) fn parse(tokens: TokenStream, errors: &mut Errors) -> ToolAttr {
        let mut attr = ToolAttr::default();
        let mut seen = Seen::default();
        let parser = syn::meta::parser(|meta| {
            if let Err(err) = attr.parse_key(&meta, &mut seen, errors) {
                errors.push(err);
                if let Some(key) = meta.path.get_ident() {
                    attr.rejected.push(key.to_string());
                }
                skip_to_comma(meta.input)?;
            }
            Ok(())
        });
        if let Err(err) = syn::parse::Parser::parse2(parser, tokens) {
            errors.push(err);
        }
        attr
    }

    fn parse_key(
        &mut self,
        meta: &ParseNestedMeta<'_>,
        seen: &mut Seen,
        errors: &mut Errors,
    ) -> syn::Result<()> {
        let Some(ident) = meta.path.get_ident() else {
            return Err(syn::Error::new_spanned(
                &meta.path,
                format!("expected one of the keys: {}", KEYS.join(", ")),
            ));
        };
        let key = ident.to_string();
        let span = ident.span();
        if !KEYS.contains(&key.as_str()) {
            errors.push(unknown_top_level_key(span, &key));
            return skip_to_comma(meta.input);
        }
        if key != "retry" && !meta.input.peek(Token![=]) {
            return Err(syn::Error::new(
                span,
                format!("`{key}` takes a value: write `{}`", example(&key)),
            ));
        }
        let first = seen.first(&key, span, "", errors);
        macro_rules! set {
            ($field:ident, $value:expr) => {{
                match ($value, first) {
                    (Some(mut value), true) => {
                        value.key = span;
                        self.$field = Some(value);
                    }
                    (Some(_), false) => {}
                    (None, _) => self.rejected.push(key.clone()),
                }
            }};
        }
        match key.as_str() {
            "side_effect" => set!(side_effect, side_effect(meta, errors)?),
            "name" => set!(name, tool_name(meta, errors)?),
            "permission" => set!(permission, permission(meta, errors)?),
            "approval_over" => set!(approval_over, number(meta, errors)?),
            "approval_field" => set!(approval_field, Some(argument_name(meta, "approval_field")?)),
            "key" => set!(key, key_list(meta, errors)?),
            "key_scope" => set!(key_scope, key_scope(meta, errors)?),
            "timeout" => set!(timeout, duration_value(meta, "timeout", errors)?),
            "retry" => set!(retry, Some(retry(meta, errors)?)),
            "rate_limit" => set!(rate_limit, rate(meta, errors)?),
            "reconcile" => set!(reconcile, Some(reconcile(meta)?)),
            "resource" => set!(resource, Some(argument_name(meta, "resource")?)),
            "honours_key" => set!(honours_key, boolean(meta, "honours_key", errors)?),
            // Unknown keys were reported above.
            _ => {}
        }
        Ok(())
    }
}

/// The error for a key `#[tool]` does not know. A bare `write` or `tenant` is a value written
/// without its key.
fn unknown_top_level_key(span: Span, key: &str) -> syn::Error {
    if SIDE_EFFECTS.contains(&key) {
        return syn::Error::new(
            span,
            format!(
                "`{key}` is a side effect, and goes with its key: write `side_effect = \"{key}\"`"
            ),
        );
    }
    if KEY_SCOPES.contains(&key) {
        return syn::Error::new(
            span,
            format!("`{key}` is a key scope, and goes with its key: write `key_scope = \"{key}\"`"),
        );
    }
    unknown_key(span, key, KEYS, "#[tool]")
}

/// Consumes what is left of a key that is being rejected, up to the comma before the next key.
fn skip_to_comma(input: ParseStream<'_>) -> syn::Result<()> {
    tokens_to_comma(input).map(drop)
}

/// The tokens up to the next comma (or the end), consumed.
fn tokens_to_comma(input: ParseStream<'_>) -> syn::Result<TokenStream> {
    let mut tokens = TokenStream::new();
    while !input.is_empty() && !input.peek(Token![,]) {
        tokens.extend([input.parse::<TokenTree>()?]);
    }
    Ok(tokens)
}

/// Tokens as the user would write them inside quotes: `20 / min` becomes `20/min`.
fn compact(tokens: &TokenStream) -> String {
    tokens.to_string().split_whitespace().collect()
}

/// The string value of `key = "..."`. Anything else (an unquoted word, a number) is an error that
/// shows the same text in quotes, after `fix` (which may, say, add a missing unit).
fn string(meta: &ParseNestedMeta<'_>, key: &str, fix: fn(&str) -> String) -> syn::Result<LitStr> {
    let value = meta.value()?;
    if value.peek(LitStr) {
        return value.parse();
    }
    let tokens = tokens_to_comma(value)?;
    if tokens.is_empty() {
        return Err(syn::Error::new(
            value.span(),
            format!("`{key}` has no value: write `{}`", example(key)),
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

fn side_effect(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<Option<At<SideEffect>>> {
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
    Ok(Some(at(value, lit.span())))
}

fn tool_name(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Option<At<String>>> {
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
    Ok(Some(at(name, lit.span())))
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

fn permission(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Option<At<String>>> {
    let lit = string(meta, "permission", as_written)?;
    let value = lit.value();
    if value.trim().is_empty() || value.chars().any(char::is_whitespace) {
        let suggestion: String = value.split_whitespace().collect::<Vec<_>>().join(":");
        let suggestion = if suggestion.is_empty() {
            "refund:create".to_owned()
        } else {
            suggestion
        };
        errors.push(syn::Error::new(
            lit.span(),
            format!("a permission is one word with no spaces: write for example `permission = \"{suggestion}\"`"),
        ));
        return Ok(None);
    }
    Ok(Some(at(value, lit.span())))
}

/// The threshold of `approval_over`: a number literal above zero.
fn number(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Option<At<f64>>> {
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
                Some(n) if n > 0.0 => return Ok(Some(at(n, tokens_span(&tokens)))),
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

fn argument_name(meta: &ParseNestedMeta<'_>, key: &str) -> syn::Result<At<Ident>> {
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
        return Ok(at(ident, span));
    }
    let tokens = tokens_to_comma(value)?;
    if tokens.is_empty() {
        return Err(syn::Error::new(
            value.span(),
            format!("`{key}` has no value: write `{}`", example(key)),
        ));
    }
    Err(syn::Error::new_spanned(
        tokens,
        format!(
            "`{key}` takes the name of one of the fn's arguments, such as `{}`",
            example(key)
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

fn reconcile(meta: &ParseNestedMeta<'_>) -> syn::Result<At<Path>> {
    let value = meta.value()?;
    if value.peek(LitStr) {
        let lit: LitStr = value.parse()?;
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "name the reconcile fn without quotes: `reconcile = {}`",
                lit.value()
            ),
        ));
    }
    let fork = value.fork();
    if fork.parse::<Path>().is_ok() && (fork.is_empty() || fork.peek(Token![,])) {
        let path: Path = value.parse()?;
        let span = path.span();
        return Ok(at(path, span));
    }
    let tokens = tokens_to_comma(value)?;
    if tokens.is_empty() {
        return Err(syn::Error::new(
            value.span(),
            "`reconcile` has no value: write `reconcile = find_refund`",
        ));
    }
    Err(syn::Error::new_spanned(
        tokens,
        "reconcile takes the path of an async fn, such as `reconcile = find_refund`",
    ))
}

fn key_list(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<Option<At<Vec<Ident>>>> {
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
    Ok(Some(at(names, brackets.span.join())))
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

fn key_scope(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Option<At<bool>>> {
    let lit = string(meta, "key_scope", as_written)?;
    match lit.value().as_str() {
        "run" => Ok(Some(at(false, lit.span()))),
        "tenant" => Ok(Some(at(true, lit.span()))),
        other => {
            errors.push(unknown_value(lit.span(), "key_scope", other, KEY_SCOPES));
            Ok(None)
        }
    }
}

/// A bare number in place of a duration gets the unit most likely meant.
fn with_seconds(text: &str) -> String {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        format!("{text}s")
    } else {
        text.to_owned()
    }
}

fn duration_value(
    meta: &ParseNestedMeta<'_>,
    key: &str,
    errors: &mut Errors,
) -> syn::Result<Option<At<u64>>> {
    let lit = string(meta, key, with_seconds)?;
    match parse_duration(&lit.value()) {
        Ok(ms) => Ok(Some(at(ms, lit.span()))),
        Err(message) => {
            errors.push(syn::Error::new(lit.span(), message));
            Ok(None)
        }
    }
}

/// The units of a duration, with the words people write for them.
const UNITS: &[(&str, u64, &[&str])] = &[
    (
        "ms",
        1,
        &["msec", "msecs", "millis", "millisecond", "milliseconds"],
    ),
    ("s", 1_000, &["sec", "secs", "second", "seconds"]),
    ("min", 60_000, &["m", "mins", "minute", "minutes"]),
    ("h", 3_600_000, &["hr", "hrs", "hour", "hours"]),
];

/// Milliseconds from `"500ms"`, `"10s"`, `"2min"` or `"1h"`.
pub(crate) fn parse_duration(text: &str) -> Result<u64, String> {
    let help = "write a whole number and a unit: `\"500ms\"`, `\"10s\"`, `\"2min\"` or `\"1h\"`";
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let Ok(count) = digits.parse::<u64>() else {
        return Err(format!("`{text}` is not a duration; {help}"));
    };
    if unit.is_empty() {
        return Err(format!(
            "`{text}` has no unit: write `\"{count}s\"` or `\"{count}ms\"`"
        ));
    }
    let Some(&(_, factor, _)) = UNITS.iter().find(|(name, ..)| *name == unit) else {
        let meant = UNITS
            .iter()
            .find(|(name, _, words)| {
                *name == unit.trim() || words.contains(&unit.trim().to_lowercase().as_str())
            })
            .map(|(name, ..)| *name);
        return Err(match meant {
            Some(name) => format!(
                "`{}` is not a unit of time here: write `\"{count}{name}\"`; the units are ms, s, min and h",
                unit.trim()
            ),
            None => format!("`{unit}` is not a unit of time; {help}"),
        });
    };
    match count.checked_mul(factor) {
        Some(0) => Err(format!(
            "a duration of zero never lets the call run; {help}"
        )),
        Some(ms) => Ok(ms),
        None => Err(format!("`{text}` is too long a duration; {help}")),
    }
}

fn rate(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Option<At<(u32, u64)>>> {
    let lit = string(meta, "rate_limit", as_written)?;
    match parse_rate(&lit.value()) {
        Ok(rate) => Ok(Some(at(rate, lit.span()))),
        Err(message) => {
            errors.push(syn::Error::new(lit.span(), message));
            Ok(None)
        }
    }
}

/// Calls and milliseconds from `"5/s"`, `"20/min"` or `"1000/h"`.
pub(crate) fn parse_rate(text: &str) -> Result<(u32, u64), String> {
    let help = "write calls per period: `\"5/s\"`, `\"20/min\"` or `\"1000/h\"`";
    let Some((count, unit)) = text.split_once('/') else {
        return Err(format!("`{text}` is not a rate; {help}"));
    };
    let Ok(count) = count.trim().parse::<u32>() else {
        return Err(format!(
            "`{text}` is not a rate: the number of calls is a whole number; {help}"
        ));
    };
    if count == 0 {
        return Err(format!(
            "a rate of zero calls never lets a call through; {help}"
        ));
    }
    let unit = unit.trim();
    let per = match unit {
        "s" => 1_000,
        "min" => 60_000,
        "h" => 3_600_000,
        _ => {
            let meant = UNITS
                .iter()
                .filter(|(name, ..)| *name != "ms")
                .find(|(_, _, words)| words.contains(&unit.to_lowercase().as_str()))
                .map(|(name, ..)| *name);
            return Err(match meant {
                Some(name) => format!(
                    "`{unit}` is not a period here: write `\"{count}/{name}\"`; the periods are s, min and h"
                ),
                None => format!("`{unit}` is not a period; {help}"),
            });
        }
    };
    Ok((count, per))
}

fn retry(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<At<RetryAttr>> {
    let span = meta.path.span();
    if !meta.input.peek(syn::token::Paren) {
        return Err(syn::Error::new(
            span,
            format!(
                "retry takes settings in parentheses: `{}`",
                example("retry")
            ),
        ));
    }
    let mut retry = RetryAttr::default();
    let mut seen = Seen::default();
    meta.parse_nested_meta(|inner| {
        if let Err(err) = retry_key(&inner, &mut retry, &mut seen, errors) {
            errors.push(err);
            skip_to_comma(inner.input)?;
        }
        Ok(())
    })?;
    if let (Some(base), Some(max)) = (&retry.base, &retry.max)
        && base.value > max.value
    {
        errors.push(syn::Error::new(
            base.span,
            "the base delay is longer than the max delay; make `base` shorter than `max`",
        ));
    }
    Ok(at(retry, span))
}

fn retry_key(
    inner: &ParseNestedMeta<'_>,
    retry: &mut RetryAttr,
    seen: &mut Seen,
    errors: &mut Errors,
) -> syn::Result<()> {
    let Some(ident) = inner.path.get_ident() else {
        return Err(syn::Error::new_spanned(
            &inner.path,
            format!("expected one of: {}", RETRY_KEYS.join(", ")),
        ));
    };
    let key = ident.to_string();
    let key_span = ident.span();
    if !RETRY_KEYS.contains(&key.as_str()) {
        errors.push(unknown_key(key_span, &key, RETRY_KEYS, "retry(...)"));
        return skip_to_comma(inner.input);
    }
    if !inner.input.peek(Token![=]) {
        return Err(syn::Error::new(
            key_span,
            format!("`{key}` takes a value: write `{}`", example(&key)),
        ));
    }
    let first = seen.first(&key, key_span, " in `retry`", errors);
    match key.as_str() {
        "max_attempts" => {
            let value = inner.value()?;
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
                    if first {
                        retry.max_attempts = Some(at(n, tokens_span(&tokens)));
                    }
                }
                Some(_) => errors.push(syn::Error::new_spanned(
                    tokens,
                    "max_attempts counts the first attempt too, so it is at least 1; write `max_attempts = 1` for no retries",
                )),
                None => errors.push(syn::Error::new_spanned(
                    tokens,
                    "max_attempts takes a whole number, such as `max_attempts = 4`",
                )),
            }
        }
        "base" | "max" => {
            let ms = duration_value(inner, &key, errors)?;
            let slot = if key == "base" {
                &mut retry.base
            } else {
                &mut retry.max
            };
            if first && ms.is_some() {
                *slot = ms;
            }
        }
        "jitter" => {
            let value = inner.value()?;
            let tokens = tokens_to_comma(value)?;
            match syn::parse2::<syn::LitBool>(tokens.clone()) {
                Ok(lit) if first => retry.jitter = Some(at(lit.value, lit.span())),
                Ok(_) => {}
                Err(_) => errors.push(syn::Error::new_spanned(
                    tokens,
                    "jitter is a bool: write `jitter = true` (full jitter) or `jitter = false`",
                )),
            }
        }
        // Unknown keys were reported above.
        _ => {}
    }
    Ok(())
}

/// A `key = true | false` value.
fn boolean(
    meta: &ParseNestedMeta<'_>,
    key: &str,
    errors: &mut Errors,
) -> syn::Result<Option<At<bool>>> {
    let value = meta.value()?;
    let tokens = tokens_to_comma(value)?;
    match syn::parse2::<syn::LitBool>(tokens.clone()) {
        Ok(lit) => Ok(Some(at(lit.value, lit.span()))),
        Err(_) => {
            errors.push(syn::Error::new_spanned(
                tokens,
                format!("{key} is a bool: write `{key} = true` or `{key} = false`"),
            ));
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(500));
        assert_eq!(parse_duration("10s"), Ok(10_000));
        assert_eq!(parse_duration("2min"), Ok(120_000));
        assert_eq!(parse_duration("1h"), Ok(3_600_000));
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("10 s").unwrap_err().contains("not a unit"));
        assert!(parse_duration("10sec").unwrap_err().contains("\"10s\""));
        assert!(
            parse_duration("10parsecs")
                .unwrap_err()
                .contains("not a unit")
        );
        assert!(parse_duration("0s").unwrap_err().contains("zero"));
        assert!(parse_duration("s").unwrap_err().contains("not a duration"));
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("5/s"), Ok((5, 1_000)));
        assert_eq!(parse_rate("20 / min"), Ok((20, 60_000)));
        assert!(parse_rate("20/minute").unwrap_err().contains("\"20/min\""));
        assert!(parse_rate("0/s").unwrap_err().contains("zero"));
        assert!(parse_rate("20").unwrap_err().contains("not a rate"));
        assert!(
            parse_rate("20/fortnight")
                .unwrap_err()
                .contains("not a period")
        );
    }
}
