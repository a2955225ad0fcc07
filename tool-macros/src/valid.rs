//! Checks of the attribute against the fn: every misuse becomes an error on the token at fault.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Ident, ReturnType};

use crate::ast::{Param, ToolFn};
use crate::attr::{SideEffect, ToolAttr};
use crate::errors::Errors;
use crate::suggest::nearest;

pub(crate) fn check(attr: &ToolAttr, tool: &ToolFn, errors: &mut Errors) {
    check_signature(tool, errors);
    check_params(tool, errors);
    check_policies(attr, tool, errors);
}

fn check_signature(tool: &ToolFn, errors: &mut Errors) {
    let sig = &tool.item.sig;
    if sig.asyncness.is_none() {
        errors.push(syn::Error::new(
            sig.fn_token.span,
            format!("a #[tool] fn must be async: write `async fn {}`", sig.ident),
        ));
    }
    if let Some(constness) = &sig.constness {
        errors.push(syn::Error::new(constness.span, "a #[tool] fn cannot be `const`; remove it"));
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.push(syn::Error::new(unsafety.span, "a #[tool] fn cannot be `unsafe`: the model calls it; remove `unsafe` and keep the unsafe block inside"));
    }
    if let Some(abi) = &sig.abi {
        errors.push(syn::Error::new(abi.span(), "a #[tool] fn cannot have an ABI; remove it"));
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(syn::Error::new(variadic.span(), "a #[tool] fn cannot be variadic"));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        let span = if sig.generics.params.is_empty() {
            sig.generics.where_clause.span()
        } else {
            sig.generics.span()
        };
        errors.push(syn::Error::new(
            span,
            "a #[tool] fn cannot be generic: its schema is fixed at compile time; write the concrete types",
        ));
    }
    if let ReturnType::Default = sig.output {
        errors.push(syn::Error::new(
            sig.paren_token.span.close(),
            format!("a #[tool] fn returns what the model reads: add `-> Result<T, ToolError>` after `{}(...)`", sig.ident),
        ));
    }
    if tool.doc.is_empty() {
        errors.push(syn::Error::new(
            sig.ident.span(),
            format!(
                "#[tool] `{}` needs a doc comment: the model reads it as the tool's description; add `/// What this tool does.` above the fn",
                sig.ident
            ),
        ));
    }
}

fn check_params(tool: &ToolFn, errors: &mut Errors) {
    let mut ctx_seen = false;
    let mut auth_seen = false;
    let mut struct_seen: Option<Span> = None;
    let mut plain_seen: Option<Span> = None;
    for param in &tool.params {
        match param {
            Param::Ctx if ctx_seen => errors.push(syn::Error::new(tool.item.sig.inputs.span(), "`&Ctx` is taken twice; take it once")),
            Param::Ctx => ctx_seen = true,
            Param::Auth if auth_seen => errors.push(syn::Error::new(tool.item.sig.inputs.span(), "`&AuthContext` is taken twice; take it once")),
            Param::Auth => auth_seen = true,
            Param::Struct { span, .. } => {
                if struct_seen.is_some() {
                    errors.push(syn::Error::new(*span, "only one `Args<T>` parameter: put every argument in that one struct"));
                }
                struct_seen = Some(*span);
            }
            Param::Plain(plain) => {
                plain_seen.get_or_insert(plain.ident.span());
            }
        }
    }
    if let (Some(struct_span), Some(_)) = (struct_seen, plain_seen) {
        errors.push(syn::Error::new(
            struct_span,
            "a tool takes its arguments either as plain parameters or as one `Args<T>` struct, not both: move the plain parameters into the struct",
        ));
    }
}

fn check_policies(attr: &ToolAttr, tool: &ToolFn, errors: &mut Errors) {
    let side_effect = attr.side_effect.as_ref().map_or(SideEffect::Read, |s| s.value);
    let is_read = side_effect == SideEffect::Read;
    let names: Vec<String> = tool.plain_params().map(|p| p.ident.to_string()).collect();
    let has_struct = tool.struct_param().is_some();

    let only_writes = |span: Span, key: &str, why: &str, errors: &mut Errors| {
        errors.push(syn::Error::new(
            span,
            format!("`{key}` applies only to writes ({why}); add `side_effect = \"write\"` or `side_effect = \"destructive\"`, or remove `{key}`"),
        ));
    };
    if is_read {
        if let Some(approval) = &attr.approval_over {
            only_writes(approval.span, "approval_over", "a read never waits for a human", errors);
        }
        if let Some(key) = &attr.key {
            only_writes(key.span, "key", "reads are never stored, so they have no idempotency key", errors);
        }
        if let Some(scope) = &attr.key_scope {
            only_writes(scope.span, "key_scope", "reads have no idempotency key", errors);
        }
        if let Some(path) = &attr.reconcile {
            only_writes(path.span(), "reconcile", "a read has no outcome to reconcile", errors);
        }
        if let Some(resource) = &attr.resource {
            only_writes(resource.span(), "resource", "reads run in parallel freely", errors);
        }
    }

    // Names of arguments must exist; for an `Args<T>` struct the expansion checks the fields.
    let check_name = |ident: &Ident, key: &str, errors: &mut Errors| {
        if has_struct {
            return;
        }
        let name = ident.to_string();
        if names.contains(&name) {
            return;
        }
        let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
        let listed = if names.is_empty() {
            "the fn has no arguments".to_owned()
        } else {
            format!("its arguments are {}", names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "))
        };
        let message = match nearest(&name, &candidates) {
            Some(best) => format!("`{key}` names `{name}`, which is not an argument of the fn: did you mean `{best}`? {listed}"),
            None => format!("`{key}` names `{name}`, which is not an argument of the fn; {listed}"),
        };
        errors.push(syn::Error::new(ident.span(), message));
    };
    if let Some(key) = &attr.key {
        for ident in &key.value {
            check_name(ident, "key", errors);
        }
    }
    if let Some(resource) = &attr.resource {
        check_name(resource, "resource", errors);
    }
    match (&attr.approval_over, &attr.approval_field) {
        (Some(_), Some(field)) => check_name(field, "approval_field", errors),
        (Some(over), None) if !has_struct && !names.iter().any(|n| n == "amount") => {
            errors.push(syn::Error::new(
                over.span,
                "approval_over compares the argument `amount`, and this fn has none: name the argument that holds the amount with `approval_field = <argument>`",
            ));
        }
        (None, Some(field)) => errors.push(syn::Error::new(
            field.span(),
            "approval_field names the amount that approval_over compares; add `approval_over = <threshold>` or remove approval_field",
        )),
        _ => {}
    }
}
