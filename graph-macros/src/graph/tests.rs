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

/// Runs the front end on the module `flow` of `file` (a crate root), with the file around it as the entry
/// point would read it: the error messages and the expansion, as text.
fn in_file(file: syn::File) -> (Vec<String>, String) {
    let module = file
        .items
        .iter()
        .find_map(|i| match i {
            syn::Item::Mod(m) if m.ident == "flow" => Some(m.clone()),
            _ => None,
        })
        .expect("a module `flow`");
    let around = crate::purity::source::locate_module(file, true, &module).expect("found in the file");
    let mut errs = Errors::default();
    let mut def = parse::parse(quote!(state = S), module, &mut errs).expect("an inline module");
    def.surroundings = Some(around);
    let resolved = check::check(&def, &mut errs);
    let out = expand::expand(&def, if errs.is_empty() { resolved.as_ref() } else { None });
    (errs.messages(), out.to_string())
}

#[test]
fn a_routing_module_glob_imports_the_crate_it_is_named_like_when_the_code_uses_it() {
    let (e, out) = in_file(syn::parse_quote! {
        #[graph(state = S)]
        mod flow {
            use super::*;
            #[node(entry, to = [tokio, END])]
            async fn tokio(s: &S, c: &mut Ctx) -> NodeResult<S, tokio::Next> {
                tokio::time::sleep(D).await;
                Ok((SDelta::default(), tokio::Next::End))
            }
        }
    });
    assert!(e.is_empty(), "{e:?}");
    assert!(out.contains("pub mod tokio { pub (super) use :: tokio :: * ;"), "{out}");
    // Only routes written: no glob (a crate `report` need not exist).
    let (e, out) = in_file(syn::parse_quote! {
        #[graph(state = S)]
        mod flow {
            #[node(entry, to = [report, END])]
            async fn report(s: &S, c: &mut Ctx) -> NodeResult<S, report::Next> {
                Ok((SDelta::default(), report::Next::End))
            }
        }
    });
    assert!(e.is_empty(), "{e:?}");
    assert!(out.contains("pub mod report { # [doc"), "{out}");
    assert!(!out.contains(":: report :: *"), "{out}");
    // Paths of scopes that do not see the routing module: an inline module without `use super::*`, and
    // a body with its own `use` of the name. No glob of a crate `report` or `mem` (there is none).
    let (e, out) = in_file(syn::parse_quote! {
        #[graph(state = S)]
        mod flow {
            mod helpers {
                mod report { pub fn line() {} }
                fn f() { report::line() }
            }
            fn g() { use std::mem; let _ = mem::size_of::<u8>(); }
            #[node(entry, to = [mem, END])]
            async fn report(s: &S, c: &mut Ctx) -> NodeResult<S, report::Next> { todo!() }
            #[node(to = END)]
            async fn mem(s: &S, c: &mut Ctx) -> NodeResult<S, mem::Next> { todo!() }
        }
    });
    assert!(e.is_empty(), "{e:?}");
    assert!(!out.contains("use :: report") && !out.contains("use :: mem"), "{out}");
    // An inline module that imports the graph module's names sees the routing module: its paths count.
    let (_, out) = in_file(syn::parse_quote! {
        #[graph(state = S)]
        mod flow {
            mod helpers { use super::*; fn f() { tokio::spawn(x); } }
            #[node(entry, to = END)]
            async fn tokio(s: &S, c: &mut Ctx) -> NodeResult<S, tokio::Next> { todo!() }
        }
    });
    assert!(out.contains("pub mod tokio { pub (super) use :: tokio :: * ;"), "{out}");
}

#[test]
fn a_routing_module_stands_in_for_a_module_of_the_file_an_import_or_a_module_of_the_graph() {
    let (e, out) = in_file(syn::parse_quote! {
        mod report { pub fn line() -> String { String::new() } }
        #[graph(state = S)]
        mod flow {
            use super::*;
            use std::{fs, mem as memory};
            pub(crate) use self::helpers::kit;
            mod helpers { pub mod kit { pub const N: u8 = 1; } }
            mod batch { pub(super) const SIZE: u64 = 2; }
            #[node(entry, to = [memory, END])]
            async fn report(s: &S, c: &mut Ctx) -> NodeResult<S, report::Next> {
                let _ = report::line();
                Ok((SDelta::default(), report::Next::End))
            }
            #[node(to = [fs, kit])]
            async fn memory(s: &S, c: &mut Ctx) -> NodeResult<S, memory::Next> { todo!() }
            #[node(to = batch)]
            async fn fs(s: &S, c: &mut Ctx) -> NodeResult<S, fs::Next> { let _ = fs::read("x"); todo!() }
            #[node(to = batch)]
            async fn kit(s: &S, c: &mut Ctx) -> NodeResult<S, kit::Next> { let _ = kit::N; todo!() }
            #[node(to = END)]
            async fn batch(s: &S, c: &mut Ctx) -> NodeResult<S, batch::Fork> { todo!() }
        }
    });
    assert!(e.is_empty(), "{e:?}");
    // The file's `mod report`, which `use super::*` imports.
    assert!(out.contains("pub mod report { pub (super) use super :: super :: report :: * ;"), "{out}");
    // The module's own imports move into the routing modules, with their reach.
    assert!(!out.contains("use std"), "both bindings of the group moved, nothing is left of it: {out}");
    assert!(out.contains("pub mod fs { pub (super) use :: std :: fs :: * ;"), "{out}");
    assert!(out.contains("pub mod memory { pub (super) use :: std :: mem :: * ;"), "{out}");
    assert!(out.contains("pub mod kit { pub (crate) use super :: helpers :: kit :: * ;"), "{out}");
    // The module's own `mod batch` holds the routing items.
    assert!(out.contains("mod batch { pub (super) const SIZE : u64 = 2 ; # [doc"), "{out}");
    assert_eq!(out.matches("mod batch").count(), 1, "{out}");
}

#[test]
fn routes_to_existing_nodes_missing_from_to_say_to_add_the_edge() {
    let e = errors(syn::parse_quote! {
        mod g {
            #[node(entry, to = [review, END])]
            async fn plan(s: &S, c: &mut Ctx) -> NodeResult<S, plan::Next> {
                if s.x { return Ok((d, plan::Next::Publish)); }
                // Once per target, whatever the number of uses.
                Ok((SDelta::default(), self::plan::Next::Publish))
            }
            #[node(to = [review, publish])]
            async fn review(s: &S, c: &mut Ctx) -> NodeResult<S, review::Fork> {
                Ok((d, review::Fork::new().publish().plan_with(&1)?.end()))
            }
            #[node(to = END, route = pick)]
            async fn publish(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
            fn pick(s: &S) -> publish::Next { println!("{:?}", publish::Next::Review); publish::Next::End }
        }
    });
    assert_eq!(
        e,
        [
            "node `plan` routes to `publish`, which is not one of its edges (`to = [review, END]`); add it: `to = [review, END, publish]`",
            "node `review` forks to `plan`, which is not one of its edges (`to = [review, publish]`); add it: `to = [review, publish, plan]`",
            "node `review` forks to `END`, which is not one of its edges (`to = [review, publish]`); add it: `to = [review, publish, END]`",
            "node `publish` routes to `review`, which is not one of its edges (`to = [END]`); add it: `to = [END, review]`",
        ]
    );
    // A variant that names no node is rustc's "no variant" error, with its suggestion.
    assert!(
        errors(syn::parse_quote! {
            mod g {
                #[node(entry, to = [review, END])]
                async fn plan(s: &S, c: &mut Ctx) -> NodeResult<S, plan::Next> { Ok((d, plan::Next::Reveiw)) }
                #[node(to = END)]
                async fn review(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
            }
        })
        .is_empty()
    );
}

#[test]
fn the_stub_of_an_undeclared_route_has_its_variant_so_the_error_is_the_only_one() {
    let module: syn::ItemMod = syn::parse_quote! {
        mod g {
            #[node(entry, to = [review, END])]
            async fn plan(s: &S, c: &mut Ctx) -> NodeResult<S, plan::Next> { Ok((d, plan::Next::Publish)) }
            #[node(to = publish)]
            async fn review(s: &S, c: &mut Ctx) -> NodeResult<S, review::Fork> { Ok((d, review::Fork::new().end())) }
            #[node(to = END)]
            async fn publish(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    };
    let mut errs = Errors::default();
    let def = parse::parse(quote!(state = S), module, &mut errs).unwrap();
    assert!(check::check(&def, &mut errs).is_none(), "no graph analysis after a structural error");
    assert_eq!(errs.len(), 2, "{:?}", errs.messages());
    let out = expand::expand(&def, None).to_string();
    assert!(out.contains("Review , # [doc = \"Edge 1, to `END`: this path of the run ends.\"] End , # [doc = \"Not a declared edge (`publish` is missing from `to = [...]`).\"] Publish ,"), "{out}");
    assert!(out.contains("Next :: Publish => 4294967295u32"), "{out}");
    assert!(out.contains("pub fn end (mut self) -> Self { self . branches . push (:: graph_runtime :: __private :: Branch :: to (4294967295u32))"), "{out}");
}

#[test]
fn api_names_hidden_from_the_module_code_are_reported() {
    // The module's own item.
    let e = one_error(syn::parse_quote! {
        mod g {
            const FINGERPRINT: u8 = 1;
            #[node(entry, to = END)]
            async fn a(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
        }
    });
    assert_eq!(
        e,
        "the graph module cannot have its own `FINGERPRINT`: `#[graph]` generates `FINGERPRINT` there (the graph's fingerprint); rename this constant"
    );
    // The file's `dot`, which `use super::*` would import: called by a node, not when a local shadows it
    // or when written `super::dot`.
    let (e, out) = in_file(syn::parse_quote! {
        fn dot(a: &[f64], b: &[f64]) -> f64 { 0.0 }
        fn graph() {}
        #[graph(state = S)]
        mod flow {
            use super::*;
            #[node(entry, to = END)]
            async fn a(s: &S, c: &mut Ctx) -> NodeResult<S> {
                let x = super::dot(&[], &[]);
                let y = dot(&[], &[]);
                todo!()
            }
            fn helper() {
                let dot = |a: u8| a;
                let _ = dot(1);
            }
        }
    });
    assert_eq!(
        e,
        [
            "`dot` here is the graph module's generated `dot()` (the graph as Graphviz DOT), which hides the `dot` that `use super::*` imports from the enclosing module; write `super::dot(..)` to reach that one, or `self::dot()` for the generated one"
        ]
    );
    assert!(!out.contains("pub fn dot ()"), "no stub: the call reaches the file's `dot`: {out}");
    assert!(out.contains("pub fn graph ()"), "`graph` is not hidden from any use: {out}");
}

#[test]
fn node_handlers_are_named_unlike_any_identifier_of_the_state_type_or_a_node() {
    let module: syn::ItemMod = syn::parse_quote! {
        mod g {
            #[node(entry, to = [__GraphNode_, END])]
            async fn a(s: &__GraphNode, c: &mut Ctx) -> NodeResult<__GraphNode, a::Next> { todo!() }
            #[node(to = END)]
            async fn __GraphNode_(s: &__GraphNode, c: &mut Ctx) -> NodeResult<__GraphNode> { todo!() }
        }
    };
    let mut errs = Errors::default();
    let def = parse::parse(quote!(state = __GraphNode), module, &mut errs).unwrap();
    let r = check::check(&def, &mut errs).unwrap();
    assert!(errs.is_empty(), "{:?}", errs.messages());
    let out = expand::expand(&def, Some(&r)).to_string();
    assert!(out.contains("struct __GraphNode__ { }"), "{out}");
    assert!(out.contains("Node < __GraphNode > for __GraphNode__"), "{out}");
}
