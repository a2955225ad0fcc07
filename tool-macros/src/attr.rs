//! The keys of `#[tool(...)]`, read into typed values. Each value is read by its reader in
//! `values.rs`, each key's name by the one helper in `keys.rs`; checks against the fn and between
//! keys live in `valid.rs`.
//!
//! A key whose value cannot be read is reported and skipped up to the next comma, so the keys
//! after it are still read: one mistake gives one error, not a missing key's worth of others.

use proc_macro2::TokenStream;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned as _;
use syn::{Ident, Path};

use crate::choices::{Delivery, Hook, KeyScope, SideEffect};
use crate::errors::Errors;
use crate::keys::{self, Level, ReadKey, Seen};
use crate::spanned::Spanned;
use crate::units::{Millis, Rate};
use crate::values;

/// The settings of `retry(...)`.
#[derive(Default)]
pub(crate) struct RetryAttr {
    pub(crate) max_attempts: Option<Spanned<u32>>,
    pub(crate) base: Option<Spanned<Millis>>,
    pub(crate) max: Option<Spanned<Millis>>,
    pub(crate) jitter: Option<Spanned<bool>>,
}

/// Every key of the attribute, as written.
#[derive(Default)]
pub(crate) struct ToolAttr {
    pub(crate) side_effect: Option<Spanned<SideEffect>>,
    pub(crate) name: Option<Spanned<String>>,
    pub(crate) permission: Option<Spanned<String>>,
    pub(crate) approval_over: Option<Spanned<f64>>,
    pub(crate) approval_field: Option<Spanned<Ident>>,
    pub(crate) approver: Option<Spanned<String>>,
    pub(crate) approval_ttl: Option<Spanned<Millis>>,
    pub(crate) key: Option<Spanned<Vec<Ident>>>,
    pub(crate) key_scope: Option<Spanned<KeyScope>>,
    pub(crate) timeout: Option<Spanned<Millis>>,
    pub(crate) retry: Option<Spanned<RetryAttr>>,
    pub(crate) rate_limit: Option<Spanned<Rate>>,
    pub(crate) reconcile: Option<Spanned<Hook>>,
    pub(crate) check: Option<Spanned<Hook>>,
    pub(crate) resource: Option<Spanned<Ident>>,
    pub(crate) honours_key: Option<Spanned<bool>>,
    pub(crate) delivery: Option<Spanned<Delivery>>,
    /// The path the facade is reachable by, for users who rename it.
    pub(crate) krate: Option<Spanned<Path>>,
    /// Keys that were given with a value already reported as an error. Checks between keys skip
    /// them: a rejected `side_effect` is not the default `"read"`, a rejected `approval_field`
    /// is not a missing one.
    rejected: Vec<String>,
}

impl ToolAttr {
    /// The path every generated item names the runtime by: `crate = path`, or `::toolgate`.
    pub(crate) fn runtime(&self) -> TokenStream {
        match &self.krate {
            Some(path) => quote::ToTokens::to_token_stream(&path.value),
            None => quote::quote!(::toolgate),
        }
    }

    /// The side effect declared, `Read` by default.
    pub(crate) fn side_effect(&self) -> SideEffect {
        self.side_effect
            .as_ref()
            .map_or(SideEffect::Read, |side_effect| side_effect.value)
    }

    /// Whether `key` was given, with a value that was reported as an error.
    pub(crate) fn rejected(&self, key: &str) -> bool {
        self.rejected.iter().any(|rejected| rejected == key)
    }

    /// The span of the key `name` when it was given with a value that was read.
    pub(crate) fn key_span(&self, name: &str) -> Option<proc_macro2::Span> {
        fn key<T>(value: &Option<Spanned<T>>) -> Option<proc_macro2::Span> {
            value.as_ref().map(|value| value.key)
        }
        match name {
            "side_effect" => key(&self.side_effect),
            "name" => key(&self.name),
            "permission" => key(&self.permission),
            "approval_over" => key(&self.approval_over),
            "approval_field" => key(&self.approval_field),
            "approver" => key(&self.approver),
            "approval_ttl" => key(&self.approval_ttl),
            "key" => key(&self.key),
            "key_scope" => key(&self.key_scope),
            "timeout" => key(&self.timeout),
            "retry" => key(&self.retry),
            "rate_limit" => key(&self.rate_limit),
            "reconcile" => key(&self.reconcile),
            "check" => key(&self.check),
            "resource" => key(&self.resource),
            "honours_key" => key(&self.honours_key),
            "delivery" => key(&self.delivery),
            "crate" => key(&self.krate),
            _ => None,
        }
    }

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
                keys::skip_to_comma(meta.input)?;
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
        let Some(ReadKey { name, span, first }) = keys::read_key(meta, Level::Top, seen, errors)?
        else {
            return Ok(());
        };
        macro_rules! set {
            ($field:ident, $value:expr) => {{
                match ($value, first) {
                    (Some(mut value), true) => {
                        value.key = span;
                        self.$field = Some(value);
                    }
                    (Some(_), false) => {}
                    (None, _) => self.rejected.push(name.clone()),
                }
            }};
        }
        match name.as_str() {
            "side_effect" => set!(side_effect, values::side_effect(meta, errors)?),
            "name" => set!(name, values::tool_name(meta, errors)?),
            "permission" => set!(permission, values::permission(meta, "permission", errors)?),
            "approval_over" => set!(approval_over, values::number(meta, errors)?),
            "approval_field" => set!(
                approval_field,
                Some(values::argument_name(meta, "approval_field")?)
            ),
            "approver" => set!(approver, values::permission(meta, "approver", errors)?),
            "approval_ttl" => set!(approval_ttl, values::approval_ttl(meta, errors)?),
            "key" => set!(key, values::key_list(meta, errors)?),
            "key_scope" => set!(key_scope, values::key_scope(meta, errors)?),
            "timeout" => set!(timeout, values::duration_value(meta, "timeout", errors)?),
            "retry" => set!(retry, Some(retry(meta, errors)?)),
            "rate_limit" => set!(rate_limit, values::rate(meta, errors)?),
            "reconcile" => set!(reconcile, Some(values::hook(meta, "reconcile")?)),
            "check" => set!(check, Some(values::hook(meta, "check")?)),
            "resource" => set!(resource, Some(values::argument_name(meta, "resource")?)),
            "honours_key" => set!(honours_key, values::boolean(meta, "honours_key", errors)?),
            "delivery" => set!(delivery, values::delivery(meta, errors)?),
            "crate" => set!(krate, Some(values::crate_path(meta)?)),
            // Unknown keys were reported by `read_key`.
            _ => {}
        }
        Ok(())
    }
}

/// `retry(...)`: its keys are read with the same helper as the top level's.
fn retry(meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<Spanned<RetryAttr>> {
    let span = meta.path.span();
    if !meta.input.peek(syn::token::Paren) {
        return Err(syn::Error::new(
            span,
            format!(
                "retry takes settings in parentheses: `{}`",
                keys::example("retry")
            ),
        ));
    }
    let mut retry = RetryAttr::default();
    let mut seen = Seen::default();
    meta.parse_nested_meta(|inner| {
        if let Err(err) = retry_key(&inner, &mut retry, &mut seen, errors) {
            errors.push(err);
            keys::skip_to_comma(inner.input)?;
        }
        Ok(())
    })?;
    Ok(Spanned::new(retry, span))
}

fn retry_key(
    inner: &ParseNestedMeta<'_>,
    retry: &mut RetryAttr,
    seen: &mut Seen,
    errors: &mut Errors,
) -> syn::Result<()> {
    let Some(ReadKey { name, first, .. }) = keys::read_key(inner, Level::Retry, seen, errors)?
    else {
        return Ok(());
    };
    fn keep<T>(slot: &mut Option<T>, value: Option<T>, first: bool) {
        if first && value.is_some() {
            *slot = value;
        }
    }
    match name.as_str() {
        "max_attempts" => keep(
            &mut retry.max_attempts,
            values::attempts(inner, errors)?,
            first,
        ),
        "base" => keep(
            &mut retry.base,
            values::duration_value(inner, "base", errors)?,
            first,
        ),
        "max" => keep(
            &mut retry.max,
            values::duration_value(inner, "max", errors)?,
            first,
        ),
        "jitter" => keep(
            &mut retry.jitter,
            values::boolean(inner, "jitter", errors)?,
            first,
        ),
        // Unknown keys were reported by `read_key`.
        _ => {}
    }
    Ok(())
}
