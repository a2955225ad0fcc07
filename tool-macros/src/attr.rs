//! Parsing the keys of `#[tool(...)]`. Values are checked here only for their own form (a
//! duration parses, a name is well formed); checks against the fn live in `valid.rs`.

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Ident, Lit, LitStr, Path, Token, bracketed};

use crate::errors::Errors;
use crate::suggest::unknown_key;

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
];

/// The keys of `retry(...)`.
pub(crate) const RETRY_KEYS: &[&str] = &["max_attempts", "base", "max", "jitter"];

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SideEffect {
    Read,
    Write,
    Destructive,
}

/// A value with the span of the tokens it came from.
pub(crate) struct At<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
}

fn at<T>(value: T, span: Span) -> At<T> {
    At { value, span }
}

#[derive(Default)]
pub(crate) struct RetryAttr {
    pub(crate) max_attempts: Option<At<u32>>,
    pub(crate) base: Option<At<u64>>,
    pub(crate) max: Option<At<u64>>,
    pub(crate) jitter: Option<At<bool>>,
}

/// Every key of the attribute, as written. `key_span` fields keep the span of the key itself so
/// errors about a key's relation to the fn land on it.
#[derive(Default)]
pub(crate) struct ToolAttr {
    pub(crate) side_effect: Option<At<SideEffect>>,
    pub(crate) name: Option<At<String>>,
    pub(crate) permission: Option<At<String>>,
    pub(crate) approval_over: Option<At<f64>>,
    pub(crate) approval_field: Option<Ident>,
    pub(crate) key: Option<At<Vec<Ident>>>,
    pub(crate) key_scope: Option<At<bool>>,
    pub(crate) timeout: Option<At<u64>>,
    pub(crate) retry: Option<At<RetryAttr>>,
    pub(crate) rate_limit: Option<At<(u32, u64)>>,
    pub(crate) reconcile: Option<Path>,
    pub(crate) resource: Option<Ident>,
}

impl ToolAttr {
    /// Parses the attribute's tokens, recording every error in `errors` and carrying on past
    /// those that leave the token stream readable.
    pub(crate) fn parse(tokens: TokenStream, errors: &mut Errors) -> ToolAttr {
        let mut attr = ToolAttr::default();
        let parser = syn::meta::parser(|meta| attr.parse_key(&meta, errors));
        if let Err(err) = syn::parse::Parser::parse2(parser, tokens) {
            errors.push(err);
        }
        attr
    }

    fn parse_key(&mut self, meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<()> {
        let Some(ident) = meta.path.get_ident() else {
            errors.push(syn::Error::new(
                meta.path.span(),
                format!("expected one of the keys: {}", KEYS.join(", ")),
            ));
            return skip_value(meta);
        };
        let key = ident.to_string();
        let span = ident.span();
        let duplicate = |errors: &mut Errors| {
            errors.push(syn::Error::new(
                span,
                format!("`{key}` is given twice; keep one"),
            ));
        };
        macro_rules! once {
            ($field:ident, $value:expr) => {{
                let value = $value;
                if self.$field.is_some() {
                    duplicate(errors);
                } else if let Some(value) = value {
                    self.$field = Some(value);
                }
            }};
        }
        match key.as_str() {
            "side_effect" => once!(side_effect, side_effect(meta, errors)?),
            "name" => once!(name, tool_name(meta, errors)?),
            "permission" => once!(permission, permission(meta, errors)?),
            "approval_over" => once!(approval_over, number(meta, errors)?),
            "approval_field" => once!(approval_field, Some(argument_name(meta)?)),
            "key" => once!(key, key_list(meta, errors)?),
            "key_scope" => once!(key_scope, key_scope(meta, errors)?),
            "timeout" => once!(timeout, duration_value(meta, errors)?),
            "retry" => once!(retry, Some(retry(meta, errors)?)),
            "rate_limit" => once!(rate_limit, rate(meta, errors)?),
            "reconcile" => once!(reconcile, Some(meta.value()?.parse::<Path>()?)),
            "resource" => once!(resource, Some(argument_name(meta)?)),
            _ => {
                errors.push(unknown_key(span, &key, KEYS, "#[tool]"));
                return skip_value(meta);
            }
        }
        Ok(())
    }
}

/// Consumes the value of a key that is being rejected, so parsing can go on.
fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<syn::Expr>()?;
    } else if !meta.input.is_empty() && !meta.input.peek(Token![,]) {
        meta.input.parse::<proc_macro2::TokenTree>()?;
    }
    Ok(())
}

fn string(meta: &ParseNestedMeta<'_>, what: &str) -> syn::Result<LitStr> {
    let value = meta.value()?;
    let lit: Lit = value.parse().map_err(|err| {
        syn::Error::new(err.span(), format!("expected {what} as a string literal"))
    })?;
    match lit {
        Lit::Str(lit) => Ok(lit),
        other => Err(syn::Error::new(
            other.span(),
            format!("expected {what} as a string literal, in double quotes"),
        )),
    }
}

fn side_effect(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Option<At<SideEffect>>> {
    let lit = string(meta, "`\"read\"`, `\"write\"` or `\"destructive\"`")?;
    let value = match lit.value().as_str() {
        "read" => SideEffect::Read,
        "write" => SideEffect::Write,
        "destructive" => SideEffect::Destructive,
        other => {
            errors.push(unknown_key(
                lit.span(),
                other,
                &["read", "write", "destructive"],
                "side_effect",
            ));
            return Ok(None);
        }
    };
    Ok(Some(at(value, lit.span())))
}

fn tool_name(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Option<At<String>>> {
    let lit = string(meta, "the tool's wire name")?;
    let name = lit.value();
    let valid = (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
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
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
        .take(64)
        .collect();
    if cleaned.is_empty() { "my_tool".into() } else { cleaned }
}

fn permission(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Option<At<String>>> {
    let lit = string(meta, "the permission")?;
    let value = lit.value();
    if value.trim().is_empty() || value.chars().any(char::is_whitespace) {
        errors.push(syn::Error::new(
            lit.span(),
            "a permission is one word with no spaces, such as `permission = \"refund:create\"`",
        ));
        return Ok(None);
    }
    Ok(Some(at(value, lit.span())))
}

fn number(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Option<At<f64>>> {
    let value = meta.value()?;
    let negative = value.peek(Token![-]);
    if negative {
        let minus: Token![-] = value.parse()?;
        errors.push(syn::Error::new(
            minus.span,
            "approval_over is a threshold above zero; write a positive number such as `approval_over = 5000`",
        ));
    }
    let lit: Lit = value.parse()?;
    let parsed = match &lit {
        Lit::Int(int) => int.base10_parse::<f64>().ok(),
        Lit::Float(float) => float.base10_parse::<f64>().ok(),
        _ => None,
    };
    match parsed {
        Some(number) if !negative && number.is_finite() && number > 0.0 => {
            Ok(Some(at(number, lit.span())))
        }
        Some(_) if negative => Ok(None),
        Some(_) => {
            errors.push(syn::Error::new(
                lit.span(),
                "approval_over is a threshold above zero; write a positive number such as `approval_over = 5000`",
            ));
            Ok(None)
        }
        None => {
            errors.push(syn::Error::new(
                lit.span(),
                "approval_over takes a number, not a string: write `approval_over = 5000`",
            ));
            Ok(None)
        }
    }
}

fn argument_name(meta: &ParseNestedMeta<'_>) -> syn::Result<Ident> {
    let value = meta.value()?;
    if value.peek(LitStr) {
        let lit: LitStr = value.parse()?;
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "name the argument without quotes: `{} = {}`",
                meta.path.get_ident().map(ToString::to_string).unwrap_or_default(),
                lit.value()
            ),
        ));
    }
    value.parse::<Ident>().map_err(|err| {
        syn::Error::new(err.span(), "expected the name of one of the fn's arguments")
    })
}

fn key_list(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Option<At<Vec<Ident>>>> {
    let value = meta.value()?;
    if !value.peek(syn::token::Bracket) {
        let found: proc_macro2::TokenTree = value.parse()?;
        return Err(syn::Error::new(
            found.span(),
            format!("key takes a list of argument names in brackets: `key = [{found}]`"),
        ));
    }
    let content;
    let brackets = bracketed!(content in value);
    let names = content.parse_terminated(Ident::parse_any_ident, Token![,])?;
    let names: Vec<Ident> = names.into_iter().collect();
    if names.is_empty() {
        errors.push(syn::Error::new(
            brackets.span.join(),
            "an empty key identifies nothing; list the arguments that identify the operation, such as `key = [order_id]`, or leave `key` out to use them all",
        ));
        return Ok(None);
    }
    for (index, name) in names.iter().enumerate() {
        if names[..index].contains(name) {
            errors.push(syn::Error::new(name.span(), format!("`{name}` is listed twice in `key`; list it once")));
        }
    }
    Ok(Some(at(names, brackets.span.join())))
}

trait ParseAnyIdent {
    fn parse_any_ident(input: syn::parse::ParseStream<'_>) -> syn::Result<Ident>;
}

impl ParseAnyIdent for Ident {
    fn parse_any_ident(input: syn::parse::ParseStream<'_>) -> syn::Result<Ident> {
        if input.peek(LitStr) {
            let lit: LitStr = input.parse()?;
            return Err(syn::Error::new(
                lit.span(),
                format!("name the argument without quotes: `{}`", lit.value()),
            ));
        }
        input.parse()
    }
}

fn key_scope(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Option<At<bool>>> {
    let lit = string(meta, "`\"run\"` or `\"tenant\"`")?;
    match lit.value().as_str() {
        "run" => Ok(Some(at(false, lit.span()))),
        "tenant" => Ok(Some(at(true, lit.span()))),
        other => {
            errors.push(unknown_key(lit.span(), other, &["run", "tenant"], "key_scope"));
            Ok(None)
        }
    }
}

fn duration_value(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Option<At<u64>>> {
    let lit = string(meta, "a duration such as `\"500ms\"` or `\"10s\"`")?;
    match parse_duration(&lit.value()) {
        Ok(ms) => Ok(Some(at(ms, lit.span()))),
        Err(message) => {
            errors.push(syn::Error::new(lit.span(), message));
            Ok(None)
        }
    }
}

/// Milliseconds from `"500ms"`, `"10s"`, `"2min"` or `"1h"`.
pub(crate) fn parse_duration(text: &str) -> Result<u64, String> {
    let help = "write a whole number and a unit: `\"500ms\"`, `\"10s\"`, `\"2min\"` or `\"1h\"`";
    let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let Ok(count) = digits.parse::<u64>() else {
        return Err(format!("`{text}` is not a duration; {help}"));
    };
    let factor = match unit {
        "ms" => 1,
        "s" => 1_000,
        "min" => 60_000,
        "h" => 3_600_000,
        "" => return Err(format!("`{text}` has no unit; {help}")),
        other => return Err(format!("`{other}` is not a unit of time; {help}")),
    };
    match count.checked_mul(factor) {
        Some(0) => Err(format!("a duration of zero never lets the call run; {help}")),
        Some(ms) => Ok(ms),
        None => Err(format!("`{text}` is too long a duration; {help}")),
    }
}

fn rate(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Option<At<(u32, u64)>>> {
    let lit = string(meta, "a rate such as `\"20/min\"`")?;
    let text = lit.value();
    let help = "write calls per period: `\"5/s\"`, `\"20/min\"` or `\"1000/h\"`";
    let parsed = text.split_once('/').and_then(|(count, unit)| {
        let count = count.trim().parse::<u32>().ok().filter(|&n| n > 0)?;
        let per = match unit.trim() {
            "s" => 1_000,
            "min" => 60_000,
            "h" => 3_600_000,
            _ => return None,
        };
        Some((count, per))
    });
    match parsed {
        Some(rate) => Ok(Some(at(rate, lit.span()))),
        None => {
            errors.push(syn::Error::new(lit.span(), format!("`{text}` is not a rate; {help}")));
            Ok(None)
        }
    }
}

fn retry(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<At<RetryAttr>> {
    let span = meta.path.span();
    if !meta.input.peek(syn::token::Paren) {
        return Err(syn::Error::new(
            span,
            "retry takes settings in parentheses: `retry(max_attempts = 4, base = \"100ms\", max = \"5s\", jitter = true)`",
        ));
    }
    let mut retry = RetryAttr::default();
    meta.parse_nested_meta(|inner| {
        let Some(ident) = inner.path.get_ident() else {
            errors.push(syn::Error::new(inner.path.span(), format!("expected one of: {}", RETRY_KEYS.join(", "))));
            return skip_value(&inner);
        };
        let key = ident.to_string();
        let key_span = ident.span();
        let twice = |errors: &mut Errors| {
            errors.push(syn::Error::new(key_span, format!("`{key}` is given twice in `retry`; keep one")));
        };
        match key.as_str() {
            "max_attempts" => {
                let lit: syn::LitInt = inner.value()?.parse().map_err(|err| {
                    syn::Error::new(err.span(), "max_attempts takes a whole number, such as `max_attempts = 4`")
                })?;
                match lit.base10_parse::<u32>() {
                    Ok(n) if n >= 1 => {
                        if retry.max_attempts.is_some() {
                            twice(errors);
                        }
                        retry.max_attempts = Some(at(n, lit.span()));
                    }
                    _ => errors.push(syn::Error::new(
                        lit.span(),
                        "max_attempts counts the first attempt too, so it is at least 1; write `max_attempts = 1` for no retries",
                    )),
                }
            }
            "base" | "max" => {
                let ms = duration_value(&inner, errors)?;
                let slot = if key == "base" { &mut retry.base } else { &mut retry.max };
                if slot.is_some() {
                    twice(errors);
                }
                if ms.is_some() {
                    *slot = ms;
                }
            }
            "jitter" => {
                let lit: syn::LitBool = inner.value()?.parse().map_err(|err| {
                    syn::Error::new(err.span(), "jitter is `true` (full jitter) or `false`")
                })?;
                if retry.jitter.is_some() {
                    twice(errors);
                }
                retry.jitter = Some(at(lit.value, lit.span()));
            }
            _ => {
                errors.push(unknown_key(key_span, &key, RETRY_KEYS, "retry(...)"));
                return skip_value(&inner);
            }
        }
        Ok(())
    })?;
    if let (Some(base), Some(max)) = (&retry.base, &retry.max) {
        if base.value > max.value {
            errors.push(syn::Error::new(
                base.span,
                "the base delay is longer than the max delay; make `base` shorter than `max`",
            ));
        }
    }
    Ok(at(retry, span))
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
        assert!(parse_duration("0s").unwrap_err().contains("zero"));
        assert!(parse_duration("s").unwrap_err().contains("not a duration"));
    }
}
