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
use crate::purity;

/// `#[reducer(...)]` on `item`. `source` reads the file the invocation is in, as for `#[graph]` (a merge
/// function's names are resolved through its module); only called for a merge function.
pub(crate) fn expand(
    attr: TokenStream,
    item: TokenStream,
    source: impl FnOnce() -> Option<(syn::File, bool)>,
) -> TokenStream {
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
            let around = source().and_then(|(file, root)| crate::purity::source::locate_fn(file, root, &f));
            check_merge_fn(&f, around.as_ref(), &mut errs);
            if errs.is_empty() {
                quote!(#f)
            } else {
                // Typed stub: the signature stays (callers and `with = ...` still type-check), the body
                // with the mistake goes, so rustc does not report it a second time.
                let (attrs, vis, sig) = (&f.attrs, &f.vis, &f.sig);
                let msg = format!("merge function `{}` has compile errors", sig.ident);
                quote!(#(#attrs)* #[allow(unused)] #vis #sig { ::core::panic!(#msg) })
            }
        }
        Ok(mut other) => {
            errs.at(
                keyword_span(&other),
                "`#[reducer]` goes on a state struct with named fields (to derive its delta and merge) or on a \
                 merge `fn(current: &mut T, written: T)` used by `#[reduce(with = ...)]`",
            );
            // As for a tuple struct: no `#[reduce]` left for rustc to report a second time.
            match &mut other {
                syn::Item::Enum(e) => {
                    parse::strip_reduce(e.variants.iter_mut().flat_map(|v| v.fields.iter_mut()))
                }
                syn::Item::Union(u) => parse::strip_reduce(u.fields.named.iter_mut()),
                _ => {}
            }
            quote!(#other)
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
pub(crate) fn check_merge_fn(f: &syn::ItemFn, around: Option<&purity::Surroundings>, errs: &mut Errors) {
    let sig = &f.sig;
    let name = &sig.ident;
    if let Some(a) = &sig.asyncness {
        errs.at(
            a.span,
            format!("reducers must be pure and synchronous: merge function `{name}` cannot be `async`; drop `async`"),
        );
    }
    if let syn::Safety::Unsafe(u) = &sig.safety {
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
    purity::check_merge_fn(f, around, errs);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;

    fn parse(item: syn::ItemStruct) -> (parse::StateDef, Vec<String>) {
        let mut errs = Errors::default();
        let def = parse::parse_struct(item, &Options::default(), &mut errs);
        (def, errs.messages())
    }

    #[test]
    fn strategies_are_read_and_attributes_removed() {
        let (def, errs) = parse(syn::parse_quote! {
            #[derive(Clone, PartialEq)]
            pub struct S {
                pub a: String,
                #[reduce(append)] pub b: Vec<u8>,
                #[reduce(sum)] c: u64,
                #[reduce(with = merge::keep)] d: u8,
            }
        });
        assert!(errs.is_empty(), "{errs:?}");
        let names: Vec<&str> = def.fields.iter().map(|f| f.strategy.runtime_name()).collect();
        assert_eq!(names, ["Overwrite", "Append", "Sum", "Custom"]);
        assert_eq!(def.delta, "SDelta");
        assert!(def.partial_eq);
        let out = expand::expand(&def).to_string();
        assert!(!out.contains("reduce"), "the `#[reduce]` attributes are consumed");
    }

    #[test]
    fn strategy_mistakes() {
        let (_, errs) = parse(syn::parse_quote! { struct S { #[reduce(sum, max)] n: u64 } });
        assert_eq!(errs[0], "conflicting strategies `sum` and `max`: a field merges one way; keep one");
        let (_, errs) = parse(syn::parse_quote! { struct S { #[reduce] n: u64 } });
        assert!(errs[0].starts_with("`#[reduce]` needs a strategy"));
        let (_, errs) = parse(syn::parse_quote! { struct S { #[reduce(sum)] #[reduce(max)] n: u64 } });
        assert!(errs[0].starts_with("duplicate `#[reduce]`"));
        let (_, errs) = parse(syn::parse_quote! { struct S { #[reduce(with = 3)] n: u64 } });
        assert!(errs[0].starts_with("`with` names a merge function"));
        let (_, errs) = parse(syn::parse_quote! { struct S(u64); });
        assert!(errs[0].starts_with("`#[reducer]` needs a struct with named fields"));
        let (_, errs) = parse(syn::parse_quote! { struct S<T> { t: T } });
        assert!(errs[0].starts_with("`#[reducer]` does not support generic"));
    }

    #[test]
    fn setters_take_impl_into_except_for_numbers_and_bools() {
        let (def, errs) = parse(syn::parse_quote! {
            pub struct S {
                pub verdict: String,
                pub last: Option<String>,
                #[reduce(sum)] pub n: u64,
                pub done: bool,
                pub retries: Option<u32>,
                pub limit: std::primitive::u16,
                pub ratio: core::option::Option<f64>,
            }
        });
        assert!(errs.is_empty(), "{errs:?}");
        let out = expand::expand(&def).to_string();
        for into in [
            "verdict (mut self , value : impl :: core :: convert :: Into < String >)",
            "last (mut self , value : impl :: core :: convert :: Into < Option < String > >)",
        ] {
            assert!(out.contains(into), "{into}: {out}");
        }
        for plain in [
            "n (mut self , value : u64)",
            "done (mut self , value : bool)",
            "retries (mut self , value : Option < u32 >)",
            "limit (mut self , value : std :: primitive :: u16)",
            "ratio (mut self , value : core :: option :: Option < f64 >)",
        ] {
            assert!(out.contains(plain), "{plain}: {out}");
        }
        assert!(!out.contains("push_"), "only `append` fields have a one-item setter: {out}");
    }

    #[test]
    fn append_fields_get_a_one_item_setter() {
        let (def, errs) = parse(syn::parse_quote! {
            pub struct S {
                #[reduce(append)] pub findings: Vec<String>,
                #[reduce(append)] pub sizes: std::vec::Vec<u64>,
                #[reduce(append)] text: String,
                #[reduce(append)] pub odd: Vec<__Item>,
            }
        });
        assert!(errs.is_empty(), "{errs:?}");
        let out = expand::expand(&def).to_string();
        assert!(
            out.contains("pub fn push_findings < __Item > (mut self , item : __Item) -> Self where Vec < String > : :: graph_runtime :: __private :: AppendItem < __Item >"),
            "{out}"
        );
        // Numbers take the element itself, so that a literal gets its type.
        assert!(out.contains("pub fn push_sizes (mut self , item : u64) -> Self"), "{out}");
        // The field's visibility; a generic parameter named unlike anything in the field's type.
        assert!(out.contains("fn push_text < __Item > (mut self , item : __Item)"), "{out}");
        assert!(out.contains("pub fn push_odd < __Item_ > (mut self , item : __Item_)"), "{out}");

        let (def, errs) = parse(syn::parse_quote! {
            struct S { #[reduce(append)] log: Vec<String>, push_log: bool }
        });
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            errs[0].starts_with(
                "field `push_log` has the name of the one-item setter of the `append` field `log`"
            )
        );
        assert_eq!(errs[1], "`log` appends here");
        let out = expand::expand(&def).to_string();
        assert_eq!(out.matches("fn push_log").count(), 1, "the field's own setter only: {out}");
    }

    #[test]
    fn a_rejected_item_keeps_no_reduce_attribute() {
        let (def, errs) =
            parse(syn::parse_quote! { pub struct S(#[reduce(sum)] u64, #[serde(default)] String); });
        assert_eq!(errs.len(), 1, "{errs:?}");
        let out = expand::expand(&def).to_string();
        assert!(!out.contains("reduce"), "{out}");
        assert!(out.contains("pub struct S (u64 , # [serde (default)] String) ;"), "{out}");
        let out = expand(
            TokenStream::new(),
            quote!(
                enum E {
                    A {
                        #[reduce(sum)]
                        n: u64,
                    },
                    B(#[reduce(max)] u8),
                }
            ),
            || None,
        )
        .to_string();
        assert!(out.starts_with("enum E { A { n : u64 , } , B (u8) , }"), "{out}");
        assert_eq!(out.matches("compile_error").count(), 1, "{out}");
    }

    #[test]
    fn hash_sets_are_rejected_anywhere_in_a_field_type() {
        let (_, errs) = parse(syn::parse_quote! {
            struct S {
                #[reduce(union)] a: HashSet<String>,
                b: Option<Vec<std::collections::HashSet<u8>>>,
                c: HashMap<String, HashSet<u32>>,
                d: (u8, [Box<FxHashSet<u8>>; 2]),
                e: BTreeMap<u8, &'static [hashbrown::HashSet<u8>]>,
                f: <HashSet<u8> as IntoIterator>::Item,
                g: Box<dyn Fn(HashSet<u8>) -> u8>,
            }
        });
        assert_eq!(errs.len(), 7, "{errs:#?}");
        assert!(
            errs[0].starts_with(
                "a state cannot hold a `HashSet`: it iterates in a random order in every process"
            ),
            "{}",
            errs[0]
        );
        assert!(errs[0].ends_with("use `BTreeSet` (`#[reduce(union)]` merges it too)"), "{}", errs[0]);
        assert!(errs[3].starts_with("a state cannot hold a `FxHashSet`"), "{}", errs[3]);
        // One error per set, even when its elements are sets too.
        let (_, errs) = parse(syn::parse_quote! { struct S { a: HashSet<HashSet<u8>> } });
        assert_eq!(errs.len(), 1, "{errs:#?}");
    }

    #[test]
    fn maps_and_ordered_sets_are_allowed() {
        let (def, errs) = parse(syn::parse_quote! {
            struct S {
                #[reduce(union)] a: BTreeSet<String>,
                #[reduce(union)] b: HashMap<String, BTreeSet<u8>>,
                c: Option<Vec<HashMap<u8, IndexSet<u8>>>>,
                d: HashSetting,
                e: hash_set::Entry,
            }
        });
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(def.fields.len(), 5);
    }

    #[test]
    fn merge_functions_are_checked() {
        let check = |f: syn::ItemFn| {
            let mut errs = Errors::default();
            check_merge_fn(&f, None, &mut errs);
            errs.messages()
        };
        assert!(
            check(syn::parse_quote!(
                fn m(c: &mut Vec<u8>, w: Vec<u8>) {
                    c.extend(w)
                }
            ))
            .is_empty()
        );
        assert!(
            check(syn::parse_quote!(
                async fn m(c: &mut u8, w: u8) {}
            ))[0]
                .contains("cannot be `async`")
        );
        assert!(
            check(syn::parse_quote!(
                fn m(c: u8, w: u8) {}
            ))[0]
                .contains("takes `(current: &mut T, written: T)`")
        );
        assert!(
            check(syn::parse_quote!(
                fn m(c: &mut u8, w: u8) {
                    println!("x")
                }
            ))[0]
                .starts_with("reducers must be pure")
        );
    }
}
