//! The delta struct, its builder, and the `Delta`/`Reducer` impls. Each field's merge call carries the
//! span of its strategy, so a strategy that does not fit the field's type is a rustc error (with the
//! runtime trait's `on_unimplemented` message) on the `#[reduce(...)]` keyword.

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::Type;

use super::parse::{StateDef, Strategy};
use crate::graph::expand::{fresh_ident, rt, rt_at};

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
        // `impl Into<T>` lets `.verdict("x")` write a `String` and `.last("x".to_string())` an
        // `Option<String>`. Not for the numeric primitives and `bool` (or `Option` of one): with
        // `impl Into<u64>`, an integer literal has no type to infer from (several integer types convert
        // into `u64`), so `.n(1)` would fall back to `i32` and not compile; and nothing but a `bool`
        // converts into `bool`, so the plain type keeps those setters' signatures simple.
        builders.extend(if takes_plain(ty) {
            quote! {
                #[doc = #builder_doc]
                #[must_use]
                #fvis fn #ident(mut self, value: #ty) -> Self {
                    self.#ident = #rt::Some(value);
                    self
                }
            }
        } else {
            quote! {
                #[doc = #builder_doc]
                #[must_use]
                #fvis fn #ident(mut self, value: impl ::core::convert::Into<#ty>) -> Self {
                    self.#ident = #rt::Some(::core::convert::Into::into(value));
                    self
                }
            }
        });
        // A field already named `push_<field>` is reported (`parse::check_push_setters`); its own setter
        // keeps the name.
        let push_taken = def.fields.iter().any(|o| o.ident == format!("push_{ident}"));
        if matches!(f.strategy, Strategy::Append) && !push_taken {
            builders.extend(push_setter(ident, ty, fvis));
        }
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

/// `push_<field>(item)` of an `append` field: appends one item to the written part (starting it empty),
/// where `field(value)` replaces it. The element type comes from the runtime's `AppendItem<I>` impls
/// (`Vec<T>` and `VecDeque<T>` take `impl Into<T>`, `String` takes `impl Into<String>`: a `&str`, a
/// `String` or a `char`), so the macro does not parse the sequence type. The item type is a generic
/// parameter of the trait, not an associated type, so the bound mentions the setter's own parameter
/// and rustc checks it only where the setter is called: on a field that is not a sequence, the
/// `#[reduce(append)]` keyword's error stays the only one. A sequence of numeric primitives or `bool`
/// takes its element type itself, for the reason the field setters do (an integer literal).
fn push_setter(ident: &syn::Ident, ty: &Type, vis: &syn::Visibility) -> TokenStream {
    let rt = rt();
    let name = format_ident!("push_{}", ident);
    let doc = format!(
        "Appends one item to the written `{ident}` (after what earlier calls wrote); `{ident}(value)` \
         replaces the whole part."
    );
    match sequence_element(ty).filter(|e| primitive(e)) {
        Some(element) => quote! {
            #[doc = #doc]
            #[must_use]
            #vis fn #name(mut self, item: #element) -> Self {
                <#ty as #rt::AppendItem<#element>>::append_item(&mut self.#ident, item);
                self
            }
        },
        None => {
            let item_ty = fresh_ident("__Item", ty.to_token_stream());
            quote! {
                #[doc = #doc]
                #[must_use]
                #vis fn #name<#item_ty>(mut self, item: #item_ty) -> Self
                where
                    #ty: #rt::AppendItem<#item_ty>,
                {
                    <#ty as #rt::AppendItem<#item_ty>>::append_item(&mut self.#ident, item);
                    self
                }
            }
        }
    }
}

/// The setter takes the field's type itself (see the field setters): a numeric primitive or `bool`, or
/// an `Option` of one. Read from the tokens: a primitive behind a type alias is not recognized.
fn takes_plain(ty: &Type) -> bool {
    primitive(ty) || last_segment_arg(ty, "Option").is_some_and(primitive)
}

/// `u8`..`u128`, `usize`, `i8`..`i128`, `isize`, `f32`, `f64`, `bool`, also written
/// `std::primitive::u64` or `core::primitive::u64`.
fn primitive(ty: &Type) -> bool {
    const PRIMITIVES: &[&str] = &[
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize", "f32", "f64",
        "bool",
    ];
    let Type::Path(p) = ty else { return false };
    let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
    let name = match segs.as_slice() {
        [one] => one,
        [krate, prim, one] if (krate == "std" || krate == "core") && prim == "primitive" => one,
        _ => return false,
    };
    p.qself.is_none()
        && p.path.segments.iter().all(|s| s.arguments.is_empty())
        && PRIMITIVES.contains(&name.as_str())
}

/// The element type of a `Vec<T>` or `VecDeque<T>` (any path to them), as written.
fn sequence_element(ty: &Type) -> Option<&Type> {
    last_segment_arg(ty, "Vec").or_else(|| last_segment_arg(ty, "VecDeque"))
}

/// `T` in a type whose path ends in `name<T>`.
fn last_segment_arg<'t>(ty: &'t Type, name: &str) -> Option<&'t Type> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if p.qself.is_some() || last.ident != name {
        return None;
    }
    let syn::PathArguments::AngleBracketed(a) = &last.arguments else { return None };
    match a.args.iter().collect::<Vec<_>>().as_slice() {
        [syn::GenericArgument::Type(t)] => Some(t),
        _ => None,
    }
}
