//! The fn under `#[tool]`, read into what the expansion needs: its doc, and each parameter as an
//! injected context, the arguments struct, or a plain argument.

use quote::ToTokens;
use syn::{Attribute, FnArg, Ident, Pat, Type};

use crate::errors::Errors;
use crate::item::ToolItem;

/// One parameter of the tool fn.
pub(crate) enum Param {
    /// `&Ctx`: the call's context. `ty` is the parameter's type, for errors.
    Ctx { ty: Type },
    /// `&AuthContext`: the session's caller.
    Auth { ty: Type },
    /// `&IdempotencyKey`: the operation's key, on a write or destructive tool.
    Key { ty: Type },
    /// `State<T>`: an application value the dispatcher holds. `ty` is `T`.
    State { ty: Type },
    /// `Args(pattern): Args<T>`: every argument in one struct `T`. `full` is `Args<T>`.
    Struct { ty: Type, full: Type },
    /// A plain argument that becomes one property of the schema.
    Plain(PlainParam),
}

pub(crate) struct PlainParam {
    pub(crate) ident: Ident,
    pub(crate) ty: Type,
    /// `#[doc]`, `#[serde]` and `#[schemars]` attributes, moved onto the generated field.
    pub(crate) field_attrs: Vec<Attribute>,
    /// The name the model sends: the identifier without `r#`, or its `#[serde(rename)]`.
    pub(crate) wire: String,
    pub(crate) sensitive: bool,
}

impl PlainParam {
    /// Whether the field must keep its concrete type in the generated struct: it carries a
    /// `#[serde]` or `#[schemars]` setting that may tie the derives to the type (`default`,
    /// `with`, `deserialize_with`, `bound`, ...). Only settings known to be indifferent to the
    /// type (a rename, a description, a validation keyword) leave it free.
    pub(crate) fn keeps_type(&self) -> bool {
        self.field_attrs
            .iter()
            .filter(|attr| !attr.path().is_ident("doc"))
            .any(|attr| !type_agnostic(attr))
    }
}

/// Whether every setting of a `#[serde]` or `#[schemars]` attribute leaves the field's type out
/// of the derived code.
fn type_agnostic(attr: &Attribute) -> bool {
    const SERDE: &[&str] = &["rename", "alias"];
    const SCHEMARS: &[&str] = &[
        "rename",
        "description",
        "title",
        "extend",
        "length",
        "range",
        "regex",
        "pattern",
        "contains",
        "email",
        "url",
        "uri",
    ];
    let allowed = if attr.path().is_ident("serde") {
        SERDE
    } else {
        SCHEMARS
    };
    attr.parse_nested_meta(|meta| {
        if !allowed.iter().any(|key| meta.path.is_ident(key)) {
            return Err(meta.error("keeps the type"));
        }
        if meta.input.peek(syn::Token![=]) {
            meta.value()?.parse::<syn::Expr>()?;
        } else if meta.input.peek(syn::token::Paren) {
            meta.input.parse::<proc_macro2::TokenTree>()?;
        }
        Ok(())
    })
    .is_ok()
}

pub(crate) struct ToolFn {
    pub(crate) item: ToolItem,
    pub(crate) doc: String,
    pub(crate) params: Vec<Param>,
    /// The name each parameter of `params` is bound to, when its pattern is a plain name.
    pub(crate) names: Vec<Option<Ident>>,
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

    /// Whether the plain parameters are read by the field reader every tool shares
    /// (`__private::read_fields`): parameters that read text, at most 64 of them (a tool with
    /// more keeps serde's derive).
    pub(crate) fn shared_reader(&self) -> bool {
        self.reads_text() && self.plain_params().count() <= 64
    }

    /// Whether the arguments are plain parameters with nothing but docs on them: such a tool
    /// reads arguments sent as text straight into its parameters (`invoke_text`), and reads a
    /// tree through the same text reader, so that its arguments struct has one deserializer.
    pub(crate) fn reads_text(&self) -> bool {
        self.struct_param().is_none()
            && self.plain_params().all(|param| {
                param
                    .field_attrs
                    .iter()
                    .all(|attr| attr.path().is_ident("doc"))
            })
    }
}

/// Reads the fn, removing from it the parameter attributes that belong to the schema. Problems
/// with the signature are recorded in `errors`; the fn is returned so it can still be emitted.
pub(crate) fn read(mut item: ToolItem, errors: &mut Errors) -> ToolFn {
    let doc = doc_text(&item.attrs);
    let mut params = Vec::new();
    let mut names = Vec::new();
    for input in item.sig.inputs.iter_mut() {
        match input {
            FnArg::Receiver(receiver) => errors.push(syn::Error::new_spanned(
                &*receiver,
                "#[tool] goes on a free fn, not a method: move it out of the impl block and take what `self` held as a `State<T>` parameter",
            )),
            FnArg::Typed(typed) => {
                if let Some(param) = read_param(typed, errors) {
                    params.push(param);
                    names.push(match &*typed.pat {
                        Pat::Ident(pat) => Some(pat.ident.clone()),
                        _ => None,
                    });
                }
            }
        }
    }
    // `#[tool]` written twice would generate the type twice; the second goes.
    item.attrs.retain(|attr| {
        let repeated = attr
            .path()
            .segments
            .last()
            .is_some_and(|last| last.ident == "tool");
        if repeated {
            errors.push(syn::Error::new_spanned(
                attr,
                "#[tool] is given twice on this fn; keep one",
            ));
        }
        !repeated
    });
    ToolFn {
        item,
        doc,
        params,
        names,
    }
}

fn read_param(typed: &mut syn::PatType, errors: &mut Errors) -> Option<Param> {
    let mut field_attrs = Vec::new();
    let mut sensitive = None;
    let mut kept = Vec::new();
    for attr in typed.attrs.drain(..) {
        if attr.path().is_ident("sensitive") {
            if attr.meta.require_path_only().is_err() {
                errors.push(syn::Error::new_spanned(
                    &attr,
                    "`#[sensitive]` takes no arguments: write `#[sensitive]`",
                ));
            }
            sensitive = Some(attr);
        } else if attr.path().is_ident("doc")
            || attr.path().is_ident("serde")
            || attr.path().is_ident("schemars")
        {
            field_attrs.push(attr);
        } else if let Some(typo) = attr
            .path()
            .get_ident()
            .filter(|ident| crate::suggest::nearest(&ident.to_string(), &["sensitive"]).is_some())
        {
            errors.push(syn::Error::new_spanned(
                typo,
                format!(
                    "unknown attribute `#[{typo}]` on a tool argument: did you mean `#[sensitive]`?"
                ),
            ));
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
        if let Some(attr) = &sensitive {
            errors.push(syn::Error::new_spanned(attr, "`#[sensitive]` marks an argument the model sends; the context is never in the arguments, so remove `#[sensitive]` here"));
        }
        return Some(param);
    }
    if let Some(ty) = generic_argument(&typed.ty, "State") {
        if let Some(attr) = &sensitive {
            errors.push(syn::Error::new_spanned(attr, "`#[sensitive]` marks an argument the model sends; a `State<T>` is never in the arguments, so remove `#[sensitive]` here"));
        }
        return Some(Param::State { ty });
    }
    if let Type::Reference(reference) = &*typed.ty
        && let Some(inner) = generic_argument(&reference.elem, "State")
    {
        errors.push(syn::Error::new_spanned(
            &typed.ty,
            format!(
                "a `State<T>` is a shared handle taken by value: write `State<{}>`",
                inner.to_token_stream()
            ),
        ));
        return None;
    }
    if let Some(ty) = generic_argument(&typed.ty, "Args") {
        if let Some(attr) = &sensitive {
            errors.push(syn::Error::new_spanned(attr, "`#[sensitive]` marks one plain argument, and cannot mark a whole `Args<T>` struct: to redact a value, take the arguments as plain parameters and put `#[sensitive]` on that one"));
        }
        return Some(Param::Struct {
            ty,
            full: (*typed.ty).clone(),
        });
    }
    let ident = match &*typed.pat {
        Pat::Ident(pat) if pat.by_ref.is_none() && pat.subpat.is_none() => pat.ident.clone(),
        other => {
            errors.push(syn::Error::new_spanned(
                other,
                format!(
                    "a tool argument needs a plain name, which becomes its name in the schema: write {}",
                    split_suggestion(other, &typed.ty)
                ),
            ));
            return None;
        }
    };
    if let Some(err) = unsupported_type(&typed.ty) {
        errors.push(err);
        return None;
    }
    let wire = serde_rename(&field_attrs).unwrap_or_else(|| {
        let name = ident.to_string();
        name.strip_prefix("r#").map(str::to_owned).unwrap_or(name)
    });
    Some(Param::Plain(PlainParam {
        ident,
        ty: (*typed.ty).clone(),
        field_attrs,
        wire,
        sensitive: sensitive.is_some(),
    }))
}

/// The name a `#[serde(rename = "...")]` or `#[serde(rename(deserialize = "..."))]` gives the
/// field on the way in. Anything serde would reject is left for serde to report.
fn serde_rename(attrs: &[Attribute]) -> Option<String> {
    let mut rename = None;
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename") {
                if meta.input.peek(syn::Token![=]) {
                    rename = Some(meta.value()?.parse::<syn::LitStr>()?.value());
                } else {
                    meta.parse_nested_meta(|inner| {
                        let value = inner.value()?.parse::<syn::LitStr>()?.value();
                        if inner.path.is_ident("deserialize") {
                            rename = Some(value);
                        }
                        Ok(())
                    })?;
                }
            } else if meta.input.peek(syn::Token![=]) {
                meta.value()?.parse::<syn::Expr>()?;
            } else if meta.input.peek(syn::token::Paren) {
                meta.input.parse::<proc_macro2::TokenTree>()?;
            }
            Ok(())
        });
    }
    rename
}

/// What to write for a destructuring pattern: `(a, b): (A, B)` becomes `a: A, b: B`.
fn split_suggestion(pat: &Pat, ty: &Type) -> String {
    if let (Pat::Tuple(pats), Type::Tuple(types)) = (pat, ty) {
        let names: Option<Vec<&Ident>> = pats
            .elems
            .iter()
            .map(|pat| match pat {
                Pat::Ident(ident) if ident.subpat.is_none() => Some(&ident.ident),
                _ => None,
            })
            .collect();
        if let Some(names) = names.filter(|names| names.len() == types.elems.len()) {
            let split: Vec<String> = names
                .iter()
                .zip(&types.elems)
                .map(|(name, ty)| format!("{name}: {}", quote::ToTokens::to_token_stream(ty)))
                .collect();
            return format!("one argument per value: `{}`", split.join(", "));
        }
    }
    "`name: Type`".to_owned()
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

/// `&Ctx`, `&AuthContext` and `&IdempotencyKey` are injected; any of them by value is an error
/// that says to borrow it.
fn injected_kind(ty: &Type) -> Option<syn::Result<Param>> {
    let (inner, by_ref) = match ty {
        Type::Reference(reference) => (&*reference.elem, reference.mutability.is_none()),
        other => (other, false),
    };
    let name = last_segment(inner)?.ident.to_string();
    let param = match name.as_str() {
        "Ctx" => Param::Ctx { ty: ty.clone() },
        "AuthContext" => Param::Auth { ty: ty.clone() },
        "IdempotencyKey" => Param::Key { ty: ty.clone() },
        _ => return None,
    };
    if by_ref {
        Some(Ok(param))
    } else {
        Some(Err(syn::Error::new_spanned(
            ty,
            format!(
                "the tool receives {} by shared reference: write `&{name}`",
                if name == "IdempotencyKey" {
                    "the operation's key"
                } else {
                    "the context"
                }
            ),
        )))
    }
}

/// `T` of `Wrapper<T>` when the type is the wrapper `name` (`Args<T>`, `State<T>`).
fn generic_argument(ty: &Type, name: &str) -> Option<Type> {
    let segment = last_segment(ty)?;
    if segment.ident != name {
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
    Some(syn::Error::new_spanned(ty, message))
}

/// The text of the `///` comments (`#[doc = "..."]` attributes), one leading space removed per
/// line, trimmed.
pub(crate) fn doc_text(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .filter_map(|attr| match &attr.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(lit),
                    ..
                }) => Some(lit.value()),
                _ => None,
            },
            _ => None,
        })
        .flat_map(|text| {
            text.lines()
                .map(|line| line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    lines.join("\n").trim().to_owned()
}

/// The error for `#[tool]` on something that is not a fn with a body, on the keyword that says
/// what it is.
pub(crate) fn not_a_fn(input: &proc_macro2::TokenStream) -> syn::Error {
    let write = "write `#[tool] async fn name(...) -> Result<T, ToolError> { ... }`";
    let Ok(item) = syn::parse2::<syn::Item>(input.clone()) else {
        return syn::Error::new_spanned(
            input,
            format!("#[tool] goes on an `async fn` with a body: {write}"),
        );
    };
    let (keyword, what): (&dyn quote::ToTokens, &str) = match &item {
        syn::Item::Struct(item) => (&item.struct_token, "a struct"),
        syn::Item::Enum(item) => (&item.enum_token, "an enum"),
        syn::Item::Union(item) => (&item.union_token, "a union"),
        syn::Item::Impl(item) => (
            &item.impl_token,
            "an impl block (it goes on free fns, outside any impl)",
        ),
        syn::Item::Trait(item) => (&item.trait_token, "a trait"),
        syn::Item::Mod(item) => (&item.mod_token, "a module (put it on each fn)"),
        syn::Item::Const(item) => (&item.const_token, "a const"),
        syn::Item::Static(item) => (&item.static_token, "a static"),
        syn::Item::Type(item) => (&item.type_token, "a type alias"),
        syn::Item::Use(item) => (&item.use_token, "a use declaration"),
        _ => {
            return syn::Error::new_spanned(
                input,
                format!("#[tool] goes on an `async fn` with a body: {write}"),
            );
        }
    };
    syn::Error::new_spanned(
        keyword,
        format!("#[tool] goes on an `async fn`, not on {what}: {write}"),
    )
}
