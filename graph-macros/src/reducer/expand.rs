//! The delta struct, its builder, and the `Delta`/`Reducer` impls. Each field's merge call carries the
//! span of its strategy, so a strategy that does not fit the field's type is a rustc error (with the
//! runtime trait's `on_unimplemented` message) on the `#[reduce(...)]` keyword.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};

use super::parse::{StateDef, Strategy};
use crate::graph::expand::{rt, rt_at};

/// Expands the struct. With errors the same code is emitted (the fields it names exist, so it adds no
/// errors of its own) and serves as the typed stub.
pub(crate) fn expand(def: &StateDef) -> TokenStream {
    let rt = rt();
    let item = &def.item;
    let state = &item.ident;
    let delta = &def.delta;
    let vis = &item.vis;
    let serde_crate = format!("{rt}::serde").replace(' ', "");
    let is_none = format!("{rt}::Option::is_none").replace(' ', "");
    let partial_eq = if def.partial_eq { quote!(, ::core::cmp::PartialEq) } else { TokenStream::new() };
    let mut fields = TokenStream::new();
    let mut builders = TokenStream::new();
    let mut writes = TokenStream::new();
    let mut applies = TokenStream::new();
    for f in &def.fields {
        let (ident, ty, fvis) = (&f.ident, &f.ty, &f.vis);
        let name = ident.to_string();
        let strategy_doc = match &f.strategy {
            Strategy::With(p) => format!("merged with `{}`", quote!(#p).to_string().replace(' ', "")),
            s => format!("merged by `{}`", s.runtime_name().to_lowercase()),
        };
        let field_doc = format!("The written `{name}`, if any ({strategy_doc}).");
        let builder_doc = format!("Writes `{name}` ({strategy_doc}); a second call replaces the first.");
        fields.extend(quote! {
            #[doc = #field_doc]
            #[serde(default, skip_serializing_if = #is_none)]
            #fvis #ident: #rt::Option<#ty>,
        });
        builders.extend(quote! {
            #[doc = #builder_doc]
            #[must_use]
            #fvis fn #ident(mut self, value: #ty) -> Self {
                self.#ident = #rt::Some(value);
                self
            }
        });
        let strategy = syn::Ident::new(f.strategy.runtime_name(), proc_macro2::Span::call_site());
        writes.extend(quote! {
            if self.#ident.is_some() {
                visit(#rt::FieldWrite::new(#name, #rt::Strategy::#strategy));
            }
        });
        // Every token of the call carries the strategy's span (not only the interpolated ones), so a
        // strategy that does not fit lands on `append` in `#[reduce(append)]`, not on `#[reducer]`.
        let rt_here = rt_at(f.span);
        let merge = match &f.strategy {
            Strategy::With(path) => quote_spanned! {f.span=>
                #rt_here::custom(&mut self.#ident, value, #name, #path)
            },
            s => {
                let func = syn::Ident::new(&s.runtime_name().to_lowercase(), f.span);
                quote_spanned! {f.span=>
                    #rt_here::merge::#func(&mut self.#ident, value, #name)
                }
            }
        };
        applies.extend(quote! {
            if let #rt::Some(value) = delta.#ident {
                #merge?;
            }
        });
    }
    let delta_doc = format!(
        "A partial update of [`{state}`]: one optional part per field, built with one method per field \
         (`{delta}::default().field(value)`), merged by `{state}`'s `Reducer` impl."
    );
    quote! {
        #item

        #[doc = #delta_doc]
        #[derive(::core::clone::Clone, ::core::fmt::Debug, ::core::default::Default, #rt::serde::Serialize, #rt::serde::Deserialize #partial_eq)]
        #[serde(crate = #serde_crate)]
        #vis struct #delta {
            #fields
        }

        impl #delta {
            #builders
        }

        const _: () = {
            impl #rt::Delta for #delta {
                fn writes(&self, visit: &mut dyn ::core::ops::FnMut(#rt::FieldWrite)) {
                    let _ = &visit;
                    #writes
                }
            }

            impl #rt::Reducer for #state {
                type Delta = #delta;

                fn apply(&mut self, delta: #delta) -> #rt::Result<(), #rt::MergeError> {
                    let _ = &delta;
                    #applies
                    #rt::Ok(())
                }
            }
        };
    }
}
