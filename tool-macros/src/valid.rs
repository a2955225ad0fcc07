//! Checks of the attribute against the fn, and between its keys: every misuse becomes an error on
//! the token at fault.

use quote::ToTokens;
use syn::{Ident, ReturnType, Type};

use crate::ast::{Param, PlainParam, ToolFn};
use crate::attr::ToolAttr;
use crate::choices::SideEffect;
use crate::errors::Errors;
use crate::suggest::nearest;

pub(crate) fn check(attr: &ToolAttr, tool: &ToolFn, errors: &mut Errors) {
    check_signature(tool, errors);
    check_params(tool, errors);
    check_policies(attr, tool, errors);
    check_sensitive_key(attr, tool, errors);
    check_retry(attr, errors);
}

/// A write's idempotency key never covers a `#[sensitive]` argument: the key is stored and
/// printed as an unkeyed hash, and a short sensitive value (a PIN) could be recovered from it by
/// hashing guesses. Without `key = [...]` every argument is in the key.
fn check_sensitive_key(attr: &ToolAttr, tool: &ToolFn, errors: &mut Errors) {
    if attr.side_effect() == SideEffect::Read {
        return;
    }
    let sensitive = |name: &str| {
        tool.plain_params()
            .any(|p| p.sensitive && p.ident.to_string().trim_start_matches("r#") == name)
    };
    let why = "a key is stored and printed, and a sensitive value in it could be recovered by hashing guesses";
    match &attr.key {
        Some(key) => {
            for ident in key.value.iter().filter(|i| sensitive(&i.to_string())) {
                errors.push(syn::Error::new(
                    ident.span(),
                    format!("`key` names `{ident}`, which is `#[sensitive]`: {why}; name only the arguments that identify the operation without it"),
                ));
            }
        }
        None => {
            let plain: Vec<String> = tool
                .plain_params()
                .filter(|p| !p.sensitive)
                .map(|p| p.ident.to_string())
                .collect();
            for param in tool.plain_params().filter(|p| p.sensitive) {
                errors.push(syn::Error::new(
                    param.ident.span(),
                    format!(
                        "`{}` is `#[sensitive]`, and without `key = [...]` every argument is in the idempotency key: {why}; add `key = [{}]` naming the arguments that identify the operation",
                        param.ident,
                        plain.join(", ")
                    ),
                ));
            }
        }
    }
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
        errors.push(syn::Error::new(
            constness.span,
            "a #[tool] fn cannot be `const`; remove it",
        ));
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.push(syn::Error::new(unsafety.span, "a #[tool] fn cannot be `unsafe`: the model calls it; remove `unsafe` and keep the unsafe block inside"));
    }
    if let Some(abi) = &sig.abi {
        errors.push(syn::Error::new_spanned(
            abi,
            "a #[tool] fn cannot have an ABI; remove it",
        ));
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(syn::Error::new_spanned(
            variadic,
            "a #[tool] fn cannot be variadic",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        let message = "a #[tool] fn cannot be generic: its schema is fixed at compile time; write the concrete types";
        errors.push(if sig.generics.params.is_empty() {
            syn::Error::new_spanned(&sig.generics.where_clause, message)
        } else {
            syn::Error::new_spanned(&sig.generics, message)
        });
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
    let mut struct_seen = false;
    let mut first_plain: Option<&PlainParam> = None;
    for param in &tool.params {
        match param {
            Param::Ctx { ty } if ctx_seen => errors.push(syn::Error::new_spanned(
                ty,
                "`&Ctx` is taken twice; take it once and remove this parameter",
            )),
            Param::Ctx { .. } => ctx_seen = true,
            Param::Auth { ty } if auth_seen => errors.push(syn::Error::new_spanned(
                ty,
                "`&AuthContext` is taken twice; take it once and remove this parameter",
            )),
            Param::Auth { .. } => auth_seen = true,
            Param::Struct { full, .. } => {
                if struct_seen {
                    errors.push(syn::Error::new_spanned(full, "a tool takes at most one `Args<T>` parameter: put every argument in that one struct"));
                }
                struct_seen = true;
            }
            Param::Plain(plain) => {
                first_plain.get_or_insert(plain);
            }
            Param::Key { .. } | Param::State { .. } => {}
        }
    }
    if let (true, Some(plain)) = (struct_seen, first_plain) {
        let inner = match tool.struct_param() {
            Some(ty) => ty.to_token_stream().to_string(),
            None => "the struct".to_owned(),
        };
        errors.push(syn::Error::new(
            plain.ident.span(),
            format!(
                "a tool takes its arguments either as plain parameters or as one `Args<T>` struct, not both: move `{}` into `{inner}`",
                plain.ident
            ),
        ));
    }
}

/// The keys that apply only to write and destructive tools, with why.
const ONLY_WRITES: &[(&str, &str)] = &[
    ("approval_over", "a read never waits for a human"),
    (
        "key",
        "reads are never stored, so they have no idempotency key",
    ),
    ("key_scope", "reads have no idempotency key"),
    ("reconcile", "a read has no outcome to reconcile"),
    ("resource", "reads run in parallel freely"),
    ("honours_key", "reads have no idempotency key to hand on"),
    ("delivery", "a read has no side effect to deliver"),
];

/// Checks between the settings of `retry(...)`.
fn check_retry(attr: &ToolAttr, errors: &mut Errors) {
    let Some(retry) = &attr.retry else {
        return;
    };
    if let (Some(base), Some(max)) = (&retry.value.base, &retry.value.max)
        && base.value > max.value
    {
        errors.push(syn::Error::new(
            base.span,
            "the base delay is longer than the max delay; make `base` shorter than `max`",
        ));
    }
}

fn check_policies(attr: &ToolAttr, tool: &ToolFn, errors: &mut Errors) {
    let is_read = attr.side_effect() == SideEffect::Read && !attr.rejected("side_effect");
    let names: Vec<String> = tool.plain_params().map(|p| p.ident.to_string()).collect();
    let has_struct = tool.struct_param().is_some();

    if is_read {
        for (key, why) in ONLY_WRITES {
            if let Some(span) = attr.key_span(key) {
                errors.push(syn::Error::new(
                    span,
                    format!("`{key}` applies only to writes ({why}); add `side_effect = \"write\"` or `side_effect = \"destructive\"`, or remove `{key}`"),
                ));
            }
        }
        for param in &tool.params {
            if let Param::Key { ty } = param {
                errors.push(syn::Error::new_spanned(
                    ty,
                    "a read has no idempotency key: only write and destructive calls are recorded under one; remove this parameter, or add `side_effect = \"write\"` if the tool changes state",
                ));
            }
        }
    }
    if let Some(reconcile) = &attr.reconcile
        && let Some(args) = &reconcile.value.args
    {
        check_hook_args(tool, "the reconcile hook", args, errors);
    }
    if let Some(check) = &attr.check
        && let Some(args) = &check.value.args
    {
        check_hook_args(tool, "the check", args, errors);
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
            format!(
                "its arguments are {}",
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let message = match nearest(&name, &candidates) {
            Some(best) => format!(
                "`{key}` names `{name}`, which is not an argument of the fn: did you mean `{best}`? {listed}"
            ),
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
        check_name(&resource.value, "resource", errors);
    }
    match (&attr.approval_over, &attr.approval_field) {
        (Some(_), Some(field)) => check_name(&field.value, "approval_field", errors),
        (Some(over), None)
            if !has_struct
                && !attr.rejected("approval_field")
                && !names.iter().any(|n| n == "amount") =>
        {
            let numeric: Vec<String> = tool
                .plain_params()
                .filter(|p| is_numeric(&p.ty))
                .map(|p| p.ident.to_string())
                .collect();
            let suggestion = match numeric.as_slice() {
                [one] => format!("`approval_field = {one}`"),
                _ => "`approval_field = <argument>`".to_owned(),
            };
            errors.push(syn::Error::new(
                over.key,
                format!(
                    "approval_over compares the argument `amount`, and `{}` has none: name the argument that holds the amount with {suggestion}",
                    tool.item.sig.ident
                ),
            ));
        }
        (None, Some(field)) if !attr.rejected("approval_over") => errors.push(syn::Error::new(
            field.key,
            "approval_field names the argument that approval_over compares, and there is no approval_over: add `approval_over = <threshold>`, or remove approval_field",
        )),
        _ => {}
    }
    if attr.approval_over.is_none() && !attr.rejected("approval_over") {
        if let Some(approver) = &attr.approver {
            errors.push(syn::Error::new(
                approver.key,
                "approver names the permission needed to approve a call that approval_over holds, and there is no approval_over: add `approval_over = <threshold>`, or remove approver",
            ));
        }
        if let Some(ttl) = &attr.approval_ttl {
            errors.push(syn::Error::new(
                ttl.key,
                "approval_ttl is how long a call held by approval_over waits for a decision, and there is no approval_over: add `approval_over = <threshold>`, or remove approval_ttl",
            ));
        }
    }
}

/// Each name in `reconcile = path(...)` or `check = path(...)` must be a parameter of the tool,
/// named once. `hook` names the hook in errors: "the reconcile hook", "the check".
fn check_hook_args(tool: &ToolFn, hook: &str, args: &[Ident], errors: &mut Errors) {
    let names: Vec<String> = tool.names.iter().flatten().map(Ident::to_string).collect();
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    for (index, arg) in args.iter().enumerate() {
        let name = arg.to_string();
        if args[..index].contains(arg) {
            errors.push(syn::Error::new(
                arg.span(),
                format!("`{name}` is passed to {hook} twice; name it once"),
            ));
        } else if !names.contains(&name) {
            let listed = candidates
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let message = match nearest(&name, &candidates) {
                Some(best) => format!(
                    "{hook} is given `{name}`, which is not a parameter of the tool: did you mean `{best}`? its parameters are {listed}"
                ),
                None => format!(
                    "{hook} is given `{name}`, which is not a parameter of the tool; its parameters are {listed}"
                ),
            };
            errors.push(syn::Error::new(arg.span(), message));
        }
    }
}

/// Whether `ty` is one of Rust's numeric types, to suggest it as the amount.
fn is_numeric(ty: &Type) -> bool {
    const NUMERIC: &[&str] = &[
        "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize",
        "f32", "f64",
    ];
    matches!(ty, Type::Path(path) if path.qself.is_none() && NUMERIC.iter().any(|n| path.path.is_ident(n)))
}
