//! The fn under `#[tool]`, read into what the expansion needs: its doc, and each parameter as an
//! injected context, the arguments struct, or a plain argument.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, Ident, ItemFn, Pat, Type};

use crate::errors::Errors;

/// One parameter of the tool fn.
pub(crate) enum Param {
    /// `&Ctx`: the call's context.
    Ctx,
    /// `&AuthContext`: the session's caller.
    Auth,
    /// `Args(pattern): Args<T>`: every argument in one struct `T`.
    Struct { ty: Type, span: Span },
    /// A plain argument that becomes one property of the schema.
    Plain(PlainParam),
}

pub(crate) struct PlainParam {
    pub(crate) ident: Ident,
    pub(crate) ty: Type,
    /// `#[doc]`, `#[serde]` and `#[schemars]` attributes, moved onto the generated field.
    pub(crate) field_attrs: Vec<Attribute>,
    pub(crate) sensitive: bool,
}

impl PlainParam {
    /// The name the model sends: the identifier without `r#`.
    pub(crate) fn wire_name(&self) -> String {
        let name = self.ident.to_string();
        name.strip_prefix("r#").map(str::to_owned).unwrap_or(name)
    }
}

pub(crate) struct ToolFn {
    pub(crate) item: ItemFn,
    pub(crate) doc: String,
    pub(crate) params: Vec<Param>,
}

impl ToolFn {
    pub(crate) fn plain_params(&self) -> impl Iterator<Item = &PlainParam> {
        self.params.iter().filter_map(|param| match param {
            Param::Plain(plain) => Some(plain),
            _ => None,
        })
    }

    pub(crate) fn struct_param(&self) -> Option<&Type> {
        self.params.iter().find_map(|param| match param {
            Param::Struct { ty, .. } => Some(ty),
            _ => None,
        })
    }
}

/// Reads the fn, removing from it the parameter attributes that belong to the schema. Problems
/// with the signature are recorded in `errors`; the fn is returned so it can still be emitted.
pub(crate) fn read(mut item: ItemFn, errors: &mut Errors) -> ToolFn {
    let doc = doc_text(&item.attrs);
    let mut params = Vec::new();
    for input in item.sig.inputs.iter_mut() {
        match input {
            FnArg::Receiver(receiver) => errors.push(syn::Error::new(
                receiver.span(),
                "#[tool] goes on a free fn, not a method: move it out of the impl block and take what `self` held from `ctx.state::<T>()`",
            )),
            FnArg::Typed(typed) => {
                if let Some(param) = read_param(typed, errors) {
                    params.push(param);
                }
            }
        }
    }
    ToolFn { item, doc, params }
}

fn read_param(typed: &mut syn::PatType, errors: &mut Errors) -> Option<Param> {
    let mut field_attrs = Vec::new();
    let mut sensitive = None;
    let mut kept = Vec::new();
    for attr in typed.attrs.drain(..) {
        if attr.path().is_ident("sensitive") {
            if let Err(err) = attr.meta.require_path_only() {
                errors.push(syn::Error::new(err.span(), "`#[sensitive]` takes no arguments"));
            }
            sensitive = Some(attr.path().span());
        } else if attr.path().is_ident("doc") || attr.path().is_ident("serde") || attr.path().is_ident("schemars") {
            field_attrs.push(attr);
        } else {
            kept.push(attr);
        }
    }
    typed.attrs = kept;

    let injected = match injected_kind(&typed.ty) {
        Some(Ok(param)) => Some(param),
        Some(Err(err)) => {
            errors.push(err);
            return None;
        }
        None => None,
    };
    if let Some(param) = injected {
        if let Some(span) = sensitive {
            errors.push(syn::Error::new(span, "`#[sensitive]` marks a model argument; the context is never in the schema, so remove it here"));
        }
        return Some(param);
    }
    if let Some(ty) = args_struct_type(&typed.ty) {
        if let Some(span) = sensitive {
            errors.push(syn::Error::new(span, "mark sensitive fields inside the arguments struct with `#[schemars(extend(\"x-sensitive\" = true))]`, not the whole `Args` parameter"));
        }
        return Some(Param::Struct { ty, span: typed.ty.span() });
    }
    let ident = match &*typed.pat {
        Pat::Ident(pat) if pat.by_ref.is_none() && pat.subpat.is_none() => pat.ident.clone(),
        other => {
            errors.push(syn::Error::new(
                other.span(),
                "a tool argument needs a plain name, which becomes its name in the schema: write `name: Type`",
            ));
            return None;
        }
    };
    if let Some(err) = unsupported_type(&typed.ty) {
        errors.push(err);
        return None;
    }
    Some(Param::Plain(PlainParam {
        ident,
        ty: (*typed.ty).clone(),
        field_attrs,
        sensitive: sensitive.is_some(),
    }))
}

/// The last path segment of a type, looking through one reference.
fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(path) if path.qself.is_none() => path.path.segments.last(),
        Type::Group(group) => last_segment(&group.elem),
        Type::Paren(paren) => last_segment(&paren.elem),
        _ => None,
    }
}

/// `&Ctx` and `&AuthContext` are injected; either by value is an error that says to borrow it.
fn injected_kind(ty: &Type) -> Option<syn::Result<Param>> {
    let (inner, by_ref) = match ty {
        Type::Reference(reference) => (&*reference.elem, reference.mutability.is_none()),
        other => (other, false),
    };
    let name = last_segment(inner)?.ident.to_string();
    let param = match name.as_str() {
        "Ctx" => Param::Ctx,
        "AuthContext" => Param::Auth,
        _ => return None,
    };
    if by_ref {
        Some(Ok(param))
    } else {
        Some(Err(syn::Error::new(
            ty.span(),
            format!("the tool receives the context by shared reference: write `&{name}`"),
        )))
    }
}

/// `Args<T>` gives `T`.
fn args_struct_type(ty: &Type) -> Option<Type> {
    let segment = last_segment(ty)?;
    if segment.ident != "Args" {
        return None;
    }
    match &segment.arguments {
        syn::PathArguments::AngleBracketed(args) if args.args.len() == 1 => match &args.args[0] {
            syn::GenericArgument::Type(inner) => Some(inner.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// Types an argument cannot have, with what to write instead.
fn unsupported_type(ty: &Type) -> Option<syn::Error> {
    let message = match ty {
        Type::Reference(reference) => {
            let owned = match &*reference.elem {
                Type::Path(path) if path.path.is_ident("str") => "String".to_owned(),
                Type::Slice(slice) => format!("Vec<{}>", quote::ToTokens::to_token_stream(&slice.elem)),
                other => quote::ToTokens::to_token_stream(other).to_string(),
            };
            format!("tool arguments are deserialized from the model's JSON and must be owned: write `{owned}` instead of a reference")
        }
        Type::ImplTrait(_) => "a tool argument needs a concrete type that derives `Deserialize` and `JsonSchema`, not `impl Trait`".to_owned(),
        Type::BareFn(_) | Type::TraitObject(_) | Type::Never(_) | Type::Infer(_) => {
            "a tool argument needs a type the model can send as JSON (String, a number, bool, Vec, Option or a struct deriving `Deserialize` and `JsonSchema`)".to_owned()
        }
        _ => return None,
    };
    Some(syn::Error::new(ty.span(), message))
}

/// The text of the `///` comments (`#[doc = "..."]` attributes), one leading space removed per
/// line, trimmed.
pub(crate) fn doc_text(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .filter_map(|attr| match &attr.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(lit), .. }) => Some(lit.value()),
                _ => None,
            },
            _ => None,
        })
        .flat_map(|text| text.lines().map(|line| line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned()).collect::<Vec<_>>())
        .collect();
    lines.join("\n").trim().to_owned()
}
