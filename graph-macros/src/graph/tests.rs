//! Front-end tests of `#[graph]`: parse + check + expand on `syn::parse_quote!` input, no `proc_macro`.

use proc_macro2::TokenStream;
use quote::quote;

use super::{check, expand, parse};
use crate::diag::Errors;

/// Runs the front end; returns the error messages and whether the graph resolved.
fn front(attr: TokenStream, module: syn::ItemMod) -> (Vec<String>, bool) {
    let mut errs = Errors::default();
    let def = parse::parse(attr, module, &mut errs).expect("an inline module");
    let resolved = check::check(&def, &mut errs);
    // expansion never panics, valid or not
    let _ = expand::expand(&def, if errs.is_empty() { resolved.as_ref() } else { None });
    (errs.messages(), resolved.is_some())
}

fn errors(module: syn::ItemMod) -> Vec<String> {
    front(quote!(state = S), module).0
}

fn one_error(module: syn::ItemMod) -> String {
    let e = errors(module);
    assert_eq!(e.len(), 1, "{e:#?}");
    e.into_iter().next().unwrap()
}

#[test]
fn a_valid_graph_has_no_errors_and_resolves() {
    let (e, ok) = front(
        quote!(state = S, name = "review"),
        syn::parse_quote! {
            mod review {
                use super::*;
                #[node(entry, to = [style, security], timeout = "2s", retry(attempts = 3, backoff = exponential("10ms", "1s"), jitter = 0.5))]
                async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { Ok(SDelta::default()) }
                #[node(to = summarize, max_concurrency = 2)]
                async fn style(s: &S, ctx: &mut Ctx) -> NodeResult<S> { Ok(SDelta::default()) }
                #[node(to = summarize)]
                async fn security(s: &S, ctx: &mut Ctx) -> NodeResult<S> { Ok(SDelta::default()) }
                #[node(to = [style, END])]
                async fn summarize(s: &S, ctx: &mut Ctx) -> NodeResult<S, summarize::Next> { todo!() }
                fn helper() {}
            }
        },
    );
    assert!(e.is_empty(), "{e:#?}");
    assert!(ok);
}

#[test]
fn unknown_edge_suggests_the_closest_node() {
    let e = one_error(syn::parse_quote! {
        mod g {
            #[node(entry, to = sumarize)]
            async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
            #[node(to = END)]
            async fn summarize(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    });
    assert_eq!(
        e,
        "unknown node `sumarize` in the edges of `plan`; did you mean `summarize`?; the nodes of this graph are `plan`, `summarize`, or `END`"
    );
}

#[test]
fn duplicate_nodes_are_reported_at_both_sites() {
    let e = errors(syn::parse_quote! {
        mod g {
            #[node(entry, to = END)]
            async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
            #[node(to = END)]
            async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    });
    assert_eq!(e.len(), 2, "{e:#?}");
    assert!(e[0].starts_with("duplicate node `plan`"));
    assert_eq!(e[1], "node `plan` first defined here");
}

#[test]
fn entries_are_counted() {
    let none = one_error(syn::parse_quote! {
        mod g {
            #[node(to = END)]
            async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    });
    assert!(none.starts_with("graph `g` has no entry node"), "{none}");
    let two = errors(syn::parse_quote! {
        mod g {
            #[node(entry, to = b)]
            async fn a(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
            #[node(entry, to = END)]
            async fn b(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    });
    assert_eq!(two.len(), 2);
    assert!(two[0].starts_with("two entry nodes, `a` and `b`"), "{}", two[0]);
}

#[test]
fn unreachable_and_trapped_nodes() {
    let e = one_error(syn::parse_quote! {
        mod g {
            #[node(entry, to = END)]
            async fn a(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
            #[node(to = c)]
            async fn b(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
            #[node(to = END)]
            async fn c(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    });
    assert!(e.starts_with("node `b` is unreachable"), "{e}");
    assert!(e.ends_with("(so are `c`, which only it leads to)"), "{e}");
    let e = one_error(syn::parse_quote! {
        mod g {
            #[node(entry, to = [b, END])]
            async fn a(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
            #[node(to = c)]
            async fn b(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
            #[node(to = b)]
            async fn c(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    });
    assert!(e.starts_with("no path from node `b` reaches `END`: `b` -> `c` -> `b` loops forever"), "{e}");
}

#[test]
fn structural_errors_skip_the_graph_analysis() {
    // the typo makes `summarize` look unreachable; only the typo is reported
    let (e, ok) = front(
        quote!(state = S),
        syn::parse_quote! {
            mod g {
                #[node(entry, to = sumarize)]
                async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
                #[node(to = END)]
                async fn summarize(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
            }
        },
    );
    assert_eq!(e.len(), 1);
    assert!(!ok);
    // a malformed `to` does not also say "declares no edges" or "unreachable"
    let e = one_error(syn::parse_quote! {
        mod g {
            #[node(entry, to = ["next"])]
            async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    });
    assert!(e.starts_with("an edge names a node of this graph or `END`"), "{e}");
}

#[test]
fn signatures_are_checked() {
    let cases: Vec<(syn::ItemFn, &str)> = vec![
        (
            syn::parse_quote!(
                fn a(s: &S, c: &mut Ctx) -> NodeResult<S> {
                    todo!()
                }
            ),
            "must be an `async fn`",
        ),
        (
            syn::parse_quote!(
                async fn a(s: &T, c: &mut Ctx) -> NodeResult<S> {
                    todo!()
                }
            ),
            "the graph's state, `&S`; found `&T`",
        ),
        (
            syn::parse_quote!(
                async fn a(s: &mut S, c: &mut Ctx) -> NodeResult<S> {
                    todo!()
                }
            ),
            "found `&mut S`",
        ),
        (
            syn::parse_quote!(
                async fn a(s: &S, c: Ctx) -> NodeResult<S> {
                    todo!()
                }
            ),
            "the context, `&mut Ctx`; found `Ctx`",
        ),
        (
            syn::parse_quote!(
                async fn a(s: &S) -> NodeResult<S> {
                    todo!()
                }
            ),
            "found 1 parameter(s)",
        ),
        (
            syn::parse_quote!(
                async fn a(s: &S, c: &mut Ctx) {
                    todo!()
                }
            ),
            "found no return type",
        ),
        (
            syn::parse_quote!(
                async fn a(s: &S, c: &mut Ctx) -> u8 {
                    todo!()
                }
            ),
            "found `u8`",
        ),
        (
            syn::parse_quote!(
                async fn a(s: &S, c: &mut Ctx) -> NodeResult<T> {
                    todo!()
                }
            ),
            "a result over `T`",
        ),
        (
            syn::parse_quote!(
                async fn a(s: &S, c: &mut Ctx) -> NodeResult<S, Route> {
                    todo!()
                }
            ),
            "not a raw `Route`",
        ),
        (
            syn::parse_quote!(
                async fn a(s: &S, c: &mut Ctx) -> NodeResult<S, b::Next> {
                    todo!()
                }
            ),
            "the routes of another node",
        ),
        (
            syn::parse_quote!(
                async fn a<T>(s: &S, c: &mut Ctx) -> NodeResult<S> {
                    todo!()
                }
            ),
            "cannot be generic",
        ),
    ];
    for (f, needle) in cases {
        let module: syn::ItemMod = syn::parse_quote! {
            mod g {
                #[node(entry, to = END)]
                #f
            }
        };
        let e = one_error(module);
        assert!(e.contains(needle), "{needle}: {e}");
    }
}

#[test]
fn node_purity_is_checked_unless_impure() {
    let e = one_error(syn::parse_quote! {
        mod g {
            #[node(entry, to = END)]
            async fn a(s: &S, c: &mut Ctx) -> NodeResult<S> { let t = std::time::SystemTime::now(); todo!() }
        }
    });
    assert!(e.starts_with("`std::time::SystemTime::now` reads the wall clock"), "{e}");
    assert!(errors(syn::parse_quote! {
        mod g {
            #[node(entry, to = END, impure = "demo")]
            async fn a(s: &S, c: &mut Ctx) -> NodeResult<S> { let t = std::time::SystemTime::now(); todo!() }
        }
    })
    .is_empty());
}

#[test]
fn options_are_validated() {
    let cases: Vec<(TokenStream, &str)> = vec![
        (quote!(entry, to = END, timeout = "soon"), "takes a duration string"),
        (quote!(entry, to = END, max_concurrency = 0), "at least 1"),
        (quote!(entry, to = END, impure = ""), "non-empty string"),
        (quote!(entry, to = END, retry(backoff = fixed("1s"))), "needs the number of attempts"),
        (quote!(entry, to = END, retry(attempts = 2, jitter = 2.0)), "in [0, 1]"),
        (quote!(entry, to = END, retry(attempts = 2, backoff = linear("1s"))), "`backoff` is `fixed"),
        (quote!(entry, to = END, name = "x"), "belongs to `#[graph]`"),
        (quote!(entry, to = [END, END]), "duplicate edge"),
        (quote!(entry, to = []), "declares no edges"),
    ];
    for (opts, needle) in cases {
        let module: syn::ItemMod = syn::parse_quote! {
            mod g {
                #[node(#opts)]
                async fn a(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
            }
        };
        let e = errors(module);
        assert!(!e.is_empty() && e[0].contains(needle), "{needle}: {e:#?}");
    }
}

#[test]
fn graph_attribute_needs_a_state() {
    let (e, _) = front(
        quote!(),
        syn::parse_quote! {
            mod g {
                #[node(entry, to = END)]
                async fn a(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
            }
        },
    );
    assert_eq!(e.len(), 1);
    assert!(e[0].starts_with("`#[graph]` needs the state type"));
}

#[test]
fn next_variants_and_fingerprint_are_stable() {
    let module: syn::ItemMod = syn::parse_quote! {
        mod g {
            #[node(entry, to = [fix_up, END])]
            async fn a(s: &S, c: &mut Ctx) -> NodeResult<S, a::Next> { todo!() }
            #[node(to = a)]
            async fn fix_up(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    };
    let mut errs = Errors::default();
    let def = parse::parse(quote!(state = S), module.clone(), &mut errs).unwrap();
    let r = check::check(&def, &mut errs).unwrap();
    assert!(errs.is_empty());
    let out = expand::expand(&def, Some(&r)).to_string();
    assert!(out.contains("pub enum Next { # [doc = \"Edge 0, to node `fix_up`.\"] FixUp"), "{out}");
    // the fingerprint depends on structure and signatures, not on spans or formatting
    let fp = expand::fingerprint(&def, &r);
    let def2 = parse::parse(quote!(state = S), module, &mut errs).unwrap();
    let r2 = check::check(&def2, &mut errs).unwrap();
    assert_eq!(fp, expand::fingerprint(&def2, &r2));
    assert_eq!(fp.len(), 64);
}

#[test]
fn smaller_rules() {
    let e = errors(syn::parse_quote! {
        mod g {
            #[node(entry, to = [fix_up, fix__up, END])]
            async fn a(s: &S, c: &mut Ctx) -> NodeResult<S, a::Next> { todo!() }
            #[node(to = END)]
            async fn fix_up(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
            #[node(to = END)]
            async fn fix__up(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    });
    assert_eq!(e.len(), 2, "reported at both edges: {e:?}");
    assert!(
        e[0].starts_with(
            "edges `fix_up` and `fix__up` of node `a` would both be the variant `a::Next::FixUp`"
        )
    );
    let (e, _) = front(
        quote!(state = S, name = ""),
        syn::parse_quote! {
            mod g {
                #[node(entry, to = END)]
                async fn a(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
            }
        },
    );
    assert_eq!(e, ["`name` is a non-empty string: `name = \"my-graph\"`"]);
    let e = errors(syn::parse_quote! {
        mod g {
            #[node(entry)]
            #[node(to = END)]
            async fn a(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    });
    assert!(e[0].starts_with("duplicate `#[node]` attribute"), "{e:?}");
    let e = one_error(syn::parse_quote! {
        mod g {
            #[node(entry, to = END)]
            async unsafe fn a(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    });
    assert_eq!(e, "node `a` cannot be `unsafe`");
    let e = one_error(syn::parse_quote! {
        mod g {
            #[node(entry, to = END)]
            async fn a(&self, c: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    });
    assert!(e.contains("not a method"), "{e}");
}
