//! `#[reducer]`: on a state struct, the `Delta` type and the `Reducer` impl (`parse.rs` → `expand.rs`);
//! on a free function, a custom field merge, checked for purity.

pub(crate) mod expand;
pub(crate) mod parse;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;

use crate::diag::Errors;
use crate::keywords::{REDUCER_FN, REDUCER_STRUCT};
use crate::options;
use crate::purity::{self, Scope};

/// `#[reducer(...)]` on `item`.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errs = Errors::default();
    let out = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Struct(s)) => {
            let opts = options::parse(attr, &REDUCER_STRUCT, &mut errs);
            let def = parse::parse_struct(s, &opts, &mut errs);
            let code = expand::expand(&def);
            crate::debug::maybe_print("#[reducer]", &def.item.ident.to_string(), &code);
            code
        }
        Ok(syn::Item::Fn(f)) => {
            options::parse(attr, &REDUCER_FN, &mut errs);
            check_merge_fn(&f, &mut errs);
            quote!(#f)
        }
        Ok(other) => {
            errs.at(
                keyword_span(&other),
                "`#[reducer]` goes on a state struct with named fields (to derive its delta and merge) or on a \
                 merge `fn(current: &mut T, written: T)` used by `#[reduce(with = ...)]`",
            );
            item
        }
        Err(e) => {
            errs.push(e);
            item
        }
    };
    let e = errs.to_compile_errors();
    quote!(#out #e)
}

// A merge function is synchronous, safe, `fn(current: &mut T, written: T)`, and pure.
pub(crate) fn check_merge_fn(f: &syn::ItemFn, errs: &mut Errors) {
    let sig = &f.sig;
    let name = &sig.ident;
    if let Some(a) = &sig.asyncness {
        errs.at(
            a.span,
            format!("reducers must be pure and synchronous: merge function `{name}` cannot be `async`; drop `async`"),
        );
    }
    if let Some(u) = &sig.unsafety {
        errs.at(u.span, format!("reducers must be pure: merge function `{name}` cannot be `unsafe`"));
    }
    let ok = sig.inputs.len() == 2
        && matches!(sig.inputs.first(), Some(syn::FnArg::Typed(t)) if matches!(&*t.ty, syn::Type::Reference(r) if r.mutability.is_some()));
    if !ok {
        errs.at(
            if sig.inputs.is_empty() { sig.paren_token.span.join() } else { sig.inputs.span() },
            format!(
                "merge function `{name}` takes `(current: &mut T, written: T)` and returns `()` or `Result<(), E>`"
            ),
        );
    }
    purity::check(&f.block, Scope::Reducer, errs);
}

/// `#[reduce]` that no `#[reducer]` consumed.
pub(crate) fn reduce_outside_reducer(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let e = syn::Error::new(
        Span::call_site(),
        "`#[reduce(...)]` goes on a field of a `#[reducer]` struct: `#[reducer] struct State { #[reduce(append)] log: Vec<String> }`",
    )
    .to_compile_error();
    quote!(#item #e)
}

fn keyword_span(item: &syn::Item) -> Span {
    match item {
        syn::Item::Enum(e) => e.enum_token.span,
        syn::Item::Union(u) => u.union_token.span,
        syn::Item::Mod(m) => m.mod_token.span,
        syn::Item::Impl(i) => i.impl_token.span,
        other => other.span(),
    }
}
