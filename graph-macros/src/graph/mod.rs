//! `#[graph]` and `#[node]`: parse (`parse.rs`) → check (`check.rs`, `graph_core::algo`, `crate::purity`) →
//! expand (`expand/`). Nothing here touches `proc_macro`, so all of it is unit-tested.

pub(crate) mod ast;
pub(crate) mod check;
pub(crate) mod expand;
pub(crate) mod names;
pub(crate) mod parse;
pub(crate) mod paths;

#[cfg(test)]
mod tests;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;

use crate::diag::Errors;

/// `#[graph(...)]` on `item`. `source` is the file the invocation is in, parsed, with whether it is a
/// crate root, when the entry point could read it: the purity lints resolve names through it.
pub(crate) fn expand(attr: TokenStream, item: TokenStream, source: Option<(syn::File, bool)>) -> TokenStream {
    let mut errs = Errors::default();
    let module = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Mod(m)) => m,
        Ok(other) => {
            errs.at(
                item_keyword_span(&other),
                "`#[graph]` goes on an inline module holding the nodes: `#[graph(state = MyState)] mod my_graph { ... }`",
            );
            let e = errs.to_compile_errors();
            return quote!(#item #e);
        }
        Err(e) => {
            let e = e.to_compile_error();
            return quote!(#item #e);
        }
    };
    let surroundings =
        source.and_then(|(file, root)| crate::purity::source::locate_module(file, root, &module));
    let Some(mut def) = parse::parse(attr, module, &mut errs) else {
        let e = errs.to_compile_errors();
        return quote!(#item #e);
    };
    def.surroundings = surroundings;
    let resolved = check::check(&def, &mut errs);
    let valid = if errs.is_empty() { resolved.as_ref() } else { None };
    let code = expand::expand(&def, valid);
    crate::debug::maybe_print("#[graph]", &def.name, &code);
    let e = errs.to_compile_errors();
    quote!(#code #e)
}

/// `#[node]` that no `#[graph]` consumed: it is outside a graph module.
pub(crate) fn node_outside_graph(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let e = syn::Error::new(
        Span::call_site(),
        "`#[node]` must be inside a `#[graph(state = ...)]` module: the graph owns its nodes and their edges; \
         move this function into the module (or put `#[graph]` on the enclosing inline module)",
    )
    .to_compile_error();
    quote!(#item #e)
}

fn item_keyword_span(item: &syn::Item) -> Span {
    match item {
        syn::Item::Fn(f) => f.sig.fn_token.span,
        syn::Item::Struct(s) => s.struct_token.span,
        syn::Item::Enum(e) => e.enum_token.span,
        other => other.span(),
    }
}
