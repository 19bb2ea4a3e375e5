//! A `#[reducer]` struct to [`StateDef`]: every field with its strategy, `#[reduce]` attributes removed.

use proc_macro2::Span;
use quote::format_ident;
use syn::spanned::Spanned;
use syn::{Expr, Ident, ItemStruct, Meta, Type, Visibility};

use crate::diag::Errors;
use crate::keywords::{DELTA, REDUCE};
use crate::options::{self, Options, Value};

/// A state struct.
pub(crate) struct StateDef {
    /// The struct, `#[reduce]` attributes removed.
    pub(crate) item: ItemStruct,
    /// The generated delta's name (`<Struct>Delta` or `delta = Name`).
    pub(crate) delta: Ident,
    pub(crate) fields: Vec<FieldDef>,
    /// The struct derives `PartialEq`, so the delta does too.
    pub(crate) partial_eq: bool,
}

/// One field.
pub(crate) struct FieldDef {
    pub(crate) ident: Ident,
    pub(crate) ty: Type,
    pub(crate) vis: Visibility,
    pub(crate) strategy: Strategy,
    /// The strategy's token (the field's name for the default overwrite).
    pub(crate) span: Span,
}

/// How a field merges.
#[derive(Clone)]
pub(crate) enum Strategy {
    Overwrite,
    Append,
    Sum,
    Max,
    Min,
    Union,
    With(syn::Path),
}

impl Strategy {
    pub(crate) fn runtime_name(&self) -> &'static str {
        match self {
            Strategy::Overwrite => "Overwrite",
            Strategy::Append => "Append",
            Strategy::Sum => "Sum",
            Strategy::Max => "Max",
            Strategy::Min => "Min",
            Strategy::Union => "Union",
            Strategy::With(_) => "Custom",
        }
    }
}

pub(crate) fn parse_struct(mut item: ItemStruct, opts: &Options, errs: &mut Errors) -> StateDef {
    let delta = match opts.expr(DELTA) {
        Some((_, Expr::Path(p))) if p.path.get_ident().is_some() => p.path.get_ident().cloned(),
        Some((_, e)) => {
            errs.at(e.span(), "`delta` names the generated type: `delta = MyDelta`");
            None
        }
        None => None,
    }
    .unwrap_or_else(|| format_ident!("{}Delta", item.ident));
    if !item.generics.params.is_empty() {
        errs.at(
            item.generics.span(),
            "`#[reducer]` does not support generic state structs; use a concrete type (a type alias of a generic struct does not work either)",
        );
    }
    let partial_eq = item.attrs.iter().any(|a| {
        a.path().is_ident("derive")
            && a.parse_args_with(syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated)
                .is_ok_and(|ps| ps.iter().any(|p| p.segments.last().is_some_and(|s| s.ident == "PartialEq")))
    });
    let mut fields = Vec::new();
    match &mut item.fields {
        syn::Fields::Named(named) => {
            for f in &mut named.named {
                let Some(ident) = f.ident.clone() else { continue };
                let strategy = take_strategy(&mut f.attrs, errs);
                reject_hash_sets(&f.ty, errs);
                let (strategy, span) = strategy.unwrap_or((Strategy::Overwrite, ident.span()));
                fields.push(FieldDef { ident, ty: f.ty.clone(), vis: f.vis.clone(), strategy, span });
            }
        }
        other => {
            errs.at(
                if matches!(other, syn::Fields::Unit) { item.ident.span() } else { other.span() },
                "`#[reducer]` needs a struct with named fields: each field is one part of the delta",
            );
            // The emitted struct keeps no `#[reduce]`: rustc would reject it ("expected non-macro
            // attribute"), a second error about the same mistake.
            strip_reduce(other.iter_mut());
        }
    }
    check_push_setters(&fields, errs);
    StateDef { item, delta, fields, partial_eq }
}

/// Removes the `#[reduce(...)]` attributes of `fields`, unread (the item around them is already
/// rejected).
pub(crate) fn strip_reduce<'f>(fields: impl Iterator<Item = &'f mut syn::Field>) {
    for f in fields {
        f.attrs.retain(|a| !a.path().is_ident("reduce"));
    }
}

// An `append` field `x` has a one-item setter `push_x`; a field named `push_x` would have a setter of
// the same name.
fn check_push_setters(fields: &[FieldDef], errs: &mut Errors) {
    for f in fields.iter().filter(|f| matches!(f.strategy, Strategy::Append)) {
        let push = format!("push_{}", f.ident);
        if let Some(other) = fields.iter().find(|o| o.ident == push) {
            errs.both(
                other.ident.span(),
                format!(
                    "field `{push}` has the name of the one-item setter of the `append` field `{}` \
                     (`{push}(item)`); rename one of them",
                    f.ident
                ),
                f.span,
                format!("`{}` appends here", f.ident),
            );
        }
    }
}

/// A state's bytes must be canonical (`graph_runtime::canonical`): the engine hashes them, keys commits
/// with them and compares them across processes. The canonical serializer sorts every map, but a set
/// serializes exactly like a list, so it cannot be sorted there: a `HashSet` (or any `...HashSet` alias,
/// such as `FxHashSet`) is rejected wherever it appears in a field's type, at the set's type. A set
/// hidden behind a type alias or inside a user type is out of sight here; the engine detects it at
/// runtime.
fn reject_hash_sets(ty: &Type, errs: &mut Errors) {
    let mut found = Vec::new();
    hash_sets(ty, &mut found);
    for (set, name) in found {
        errs.spanned(
            set,
            format!(
                "a state cannot hold a `{name}`: it iterates in a random order in every process, and a set is \
                 serialized like a list, so the canonical serializer cannot sort it; the state's bytes, hash \
                 and idempotency keys would differ after a restart and resume would fail; use `BTreeSet` \
                 (`#[reduce(union)]` merges it too)"
            ),
        );
    }
}

/// Every type in `ty` (itself included) whose path has a segment named `HashSet` or `<Something>HashSet`,
/// with that name. The arguments of a found set are not searched (one error per set).
fn hash_sets<'t>(ty: &'t Type, found: &mut Vec<(&'t Type, String)>) {
    match ty {
        Type::Path(p) => {
            if let Some(q) = &p.qself {
                hash_sets(&q.ty, found);
            }
            if let Some(seg) = p.path.segments.iter().find(|s| s.ident.to_string().ends_with("HashSet")) {
                found.push((ty, seg.ident.to_string()));
                return;
            }
            for seg in &p.path.segments {
                path_arguments(&seg.arguments, found);
            }
        }
        Type::Array(a) => hash_sets(&a.elem, found),
        Type::Group(g) => hash_sets(&g.elem, found),
        Type::Paren(p) => hash_sets(&p.elem, found),
        Type::Ptr(p) => hash_sets(&p.elem, found),
        Type::Reference(r) => hash_sets(&r.elem, found),
        Type::Slice(s) => hash_sets(&s.elem, found),
        Type::Tuple(t) => t.elems.iter().for_each(|t| hash_sets(t, found)),
        Type::TraitObject(t) => bounds(&t.bounds, found),
        Type::ImplTrait(t) => bounds(&t.bounds, found),
        _ => {}
    }
}

fn path_arguments<'t>(args: &'t syn::PathArguments, found: &mut Vec<(&'t Type, String)>) {
    match args {
        syn::PathArguments::AngleBracketed(a) => {
            for arg in &a.args {
                match arg {
                    syn::GenericArgument::Type(t) => hash_sets(t, found),
                    syn::GenericArgument::AssocType(a) => hash_sets(&a.ty, found),
                    _ => {}
                }
            }
        }
        syn::PathArguments::Parenthesized(p) => {
            p.inputs.iter().for_each(|t| hash_sets(&t.ty, found));
            if let syn::ReturnType::Type(_, t) = &p.output {
                hash_sets(t, found);
            }
        }
        syn::PathArguments::None => {}
    }
}

fn bounds<'t>(
    bounds: &'t syn::punctuated::Punctuated<syn::TypeParamBound, syn::Token![+]>,
    found: &mut Vec<(&'t Type, String)>,
) {
    for b in bounds {
        if let syn::TypeParamBound::Trait(t) = b {
            t.path.segments.iter().for_each(|s| path_arguments(&s.arguments, found));
        }
    }
}

/// Reads and removes the `#[reduce(...)]` attributes of a field.
fn take_strategy(attrs: &mut Vec<syn::Attribute>, errs: &mut Errors) -> Option<(Strategy, Span)> {
    let mut found: Option<(Strategy, Span)> = None;
    let mut first_attr: Option<Span> = None;
    let mut kept = Vec::with_capacity(attrs.len());
    for a in attrs.drain(..) {
        if !a.path().is_ident("reduce") {
            kept.push(a);
            continue;
        }
        let path_span = a.path().span();
        if let Some(first) = first_attr {
            errs.both(
                path_span,
                "duplicate `#[reduce]` on one field: a field has one strategy",
                first,
                "first `#[reduce]` here",
            );
            continue;
        }
        first_attr = Some(path_span);
        let tokens = match &a.meta {
            Meta::List(l) => l.tokens.clone(),
            _ => {
                errs.at(path_span, strategy_needed());
                continue;
            }
        };
        let opts = options::parse(tokens, &REDUCE, errs);
        let mut chosen: Vec<(Strategy, &Ident)> = Vec::new();
        for o in &opts.list {
            let s = match (o.key.to_string().as_str(), &o.value) {
                ("overwrite", _) => Strategy::Overwrite,
                ("append", _) => Strategy::Append,
                ("sum", _) => Strategy::Sum,
                ("max", _) => Strategy::Max,
                ("min", _) => Strategy::Min,
                ("union", _) => Strategy::Union,
                (_, Value::Expr(e)) => {
                    match &**e {
                        Expr::Path(p) if p.qself.is_none() => Strategy::With(p.path.clone()),
                        other => {
                            errs.at(other.span(), "`with` names a merge function: `with = my_merge` or `with = path::to::merge`");
                            continue;
                        }
                    }
                }
                _ => continue,
            };
            chosen.push((s, &o.key));
        }
        match chosen.as_slice() {
            [] if opts.list.is_empty() && errs.is_empty() => errs.at(path_span, strategy_needed()),
            [] => {}
            [(s, key)] => {
                let span = match s {
                    Strategy::With(p) => p.segments.last().map_or_else(|| key.span(), |seg| seg.ident.span()),
                    _ => key.span(),
                };
                found = Some((s.clone(), span));
            }
            [(_, first), (_, second), ..] => errs.both(
                second.span(),
                format!("conflicting strategies `{first}` and `{second}`: a field merges one way; keep one"),
                first.span(),
                format!("`{first}` chosen here"),
            ),
        }
    }
    *attrs = kept;
    found
}

fn strategy_needed() -> String {
    "`#[reduce]` needs a strategy: `#[reduce(append)]`, `#[reduce(sum)]`, `#[reduce(max)]`, `#[reduce(min)]`, \
     `#[reduce(union)]` or `#[reduce(with = my_merge)]` (no attribute means overwrite)"
        .to_owned()
}
