//! The routing types of conditional and fork nodes, in a module named after the node (beside the
//! function, which lives in the value namespace): `summarize::Next` has one variant per declared edge,
//! `plan::Fork` one method per declared edge, so a route to an undeclared edge cannot be written.
//!
//! The module stands in for whatever its name meant in the graph module (`names.rs`): it may glob-import
//! a crate or module of the same name, or be the user's own `mod <node>`. Its code therefore names
//! everything it needs by absolute path (`::core::clone::Clone`, the runtime through `__private`), so
//! nothing a glob brings in can change it; and its `Routing` impls are generic over the state, so it
//! needs no alias of the graph's state type.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::Ident;

use super::rt;
use crate::graph::ast::{GraphDef, NodeDef, Routing, is_end};
use crate::graph::check::variant_name;
use crate::graph::names::{Plan, StandIn};
use crate::graph::paths::rooted_paths;
use crate::keywords::END;

/// The nodes that own a routing module, first definition of each name only: `Next`/`Fork` nodes and
/// nodes with a router (`route = f` returns `<node>::Next`).
pub(crate) fn module_nodes(g: &GraphDef) -> Vec<&NodeDef> {
    let mut done = BTreeSet::new();
    g.nodes
        .iter()
        .filter(|n| match &n.routing {
            Routing::Next { prefix } | Routing::Fork { prefix } => *prefix == n.ident,
            _ => n.router.is_some(),
        })
        .filter(|n| done.insert(n.name()))
        .collect()
}

/// A route the module's code writes to an existing node (or `END`) that is not among the routing node's
/// declared edges: `summarize::Next::Revise` without `revise` in summarize's `to = [...]`.
pub(crate) struct Undeclared<'g> {
    /// The routing node.
    pub(crate) node: &'g NodeDef,
    /// The target node's name, or `END`.
    pub(crate) target: String,
    /// The variant or method as written.
    pub(crate) site: Ident,
    /// A `Fork` method (else a `Next` variant).
    pub(crate) fork: bool,
}

/// Every undeclared route, once per (routing node, target), at its first use. Found in the tokens of
/// the whole module (node bodies, routers, helpers, macro arguments), where written as
/// `<node>::Next::<Variant>` or as a call chain on `<node>::Fork::new()`; a route reached through a
/// `use` or a variable is left to rustc ("no variant named ...").
pub(crate) fn undeclared(g: &GraphDef) -> Vec<Undeclared<'_>> {
    let modules = module_nodes(g);
    let mut out: Vec<Undeclared<'_>> = Vec::new();
    let mut seen = BTreeSet::new();
    for p in rooted_paths(&g.items) {
        let Some(n) = modules.iter().copied().find(|n| p.segments[0] == n.ident) else { continue };
        let fork = matches!(n.routing, Routing::Fork { .. });
        let written: Vec<Ident> = match (fork, &p.segments[1..]) {
            (false, [next, variant, ..]) if next == "Next" => vec![variant.clone()],
            (true, [f, new]) if f == "Fork" && (new == "new" || new == "default") => p.chain.clone(),
            _ => continue,
        };
        for site in written {
            let Some(target) = (if fork { fork_target(g, &site) } else { next_target(g, &site) }) else {
                continue;
            };
            if n.edges.iter().any(|e| *e == target) || !seen.insert((n.name(), target.clone())) {
                continue;
            }
            out.push(Undeclared { node: n, target, site, fork });
        }
    }
    out
}

/// The node (or `END`) a `Next` variant names: the first node whose variant it is.
fn next_target(g: &GraphDef, variant: &Ident) -> Option<String> {
    if variant == "End" {
        return Some(END.to_owned());
    }
    g.nodes.iter().find(|n| *variant == variant_name(&n.ident)).map(NodeDef::name)
}

/// The node (or `END`) a `Fork` method names: `.end()`, `.<node>()`, `.<node>_with(..)`.
fn fork_target(g: &GraphDef, method: &Ident) -> Option<String> {
    let m = method.to_string();
    if m == "end" {
        return Some(END.to_owned());
    }
    let node = m.strip_suffix("_with").unwrap_or(&m);
    g.nodes.iter().find(|n| n.ident == node).map(NodeDef::name)
}

/// The routing code: the generated modules, and the items to add to the user's own modules that stand
/// in for one (by item index). `extra` are undeclared routes, given routing items (only with errors, so
/// that the error about them is the only one).
pub(crate) fn expand(
    g: &GraphDef,
    plan: &Plan,
    extra: &[Undeclared<'_>],
) -> (TokenStream, BTreeMap<usize, TokenStream>) {
    let mut modules = TokenStream::new();
    let mut merged = BTreeMap::new();
    for n in module_nodes(g) {
        let extra: Vec<&Undeclared<'_>> = extra.iter().filter(|u| u.node.ident == n.ident).collect();
        let (doc, content) = match n.routing {
            Routing::Fork { .. } => fork(n, &extra),
            _ => next(n, &extra),
        };
        let node = &n.ident;
        match plan.stand_ins.get(&n.name()) {
            Some(StandIn::Merge(i)) => {
                merged.insert(*i, content);
            }
            glob => {
                let glob = match glob {
                    Some(StandIn::Glob(g)) => g.clone(),
                    _ => TokenStream::new(),
                };
                modules.extend(quote! {
                    #[doc = #doc]
                    pub mod #node {
                        #glob
                        #content
                    }
                });
            }
        }
    }
    (modules, merged)
}

/// Declared edges with their indices, first declaration of a target only.
fn edges(n: &NodeDef) -> Vec<(u32, &Ident)> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for t in &n.edges {
        if seen.insert(t.to_string()) {
            out.push((out.len() as u32, t));
        }
    }
    out
}

fn target_doc(index: u32, t: &Ident) -> String {
    if is_end(t) {
        format!("Edge {index}, to `END`: this path of the run ends.")
    } else {
        format!("Edge {index}, to node `{t}`.")
    }
}

fn module_doc(n: &NodeDef) -> String {
    let list: Vec<String> = edges(n).iter().map(|(_, t)| t.to_string()).collect();
    format!("Routing of node `{}` (`to = [{}]`).", n.ident, list.join(", "))
}

/// The index an undeclared route's stub carries: no edge has it (the graph does not build anyway).
const NO_EDGE: u32 = u32::MAX;

fn next(n: &NodeDef, extra: &[&Undeclared<'_>]) -> (String, TokenStream) {
    let rt = rt();
    let node = &n.ident;
    let edges = edges(n);
    let mut variants: Vec<Ident> =
        edges.iter().map(|(_, t)| Ident::new(&variant_name(t), t.span())).collect();
    let mut docs: Vec<String> = edges.iter().map(|(i, t)| target_doc(*i, t)).collect();
    let mut indices: Vec<u32> = edges.iter().map(|(i, _)| *i).collect();
    for u in extra {
        variants.push(u.site.clone());
        docs.push(format!("Not a declared edge (`{}` is missing from `to = [...]`).", u.target));
        indices.push(NO_EDGE);
    }
    let enum_doc = format!(
        "Where node `{node}` goes next: one variant per declared edge. A node returns \
         `Ok((delta, {node}::Next::Variant))`."
    );
    let content = quote! {
        #[doc = #enum_doc]
        #[derive(
            ::core::fmt::Debug,
            ::core::clone::Clone,
            ::core::marker::Copy,
            ::core::cmp::PartialEq,
            ::core::cmp::Eq,
            ::core::hash::Hash
        )]
        pub enum Next {
            #( #[doc = #docs] #variants, )*
        }

        impl Next {
            /// The index of this route's edge in the node's `to = [...]` list.
            pub const fn edge(self) -> ::core::primitive::u32 {
                match self {
                    #( Next::#variants => #indices, )*
                }
            }
        }

        impl<S: #rt::Reducer> #rt::Routing<S> for Next {
            type Out = (S::Delta, Next);
            fn split(out: Self::Out) -> (S::Delta, #rt::Route) {
                (out.0, #rt::Route::Goto(out.1.edge()))
            }
        }
    };
    (module_doc(n), content)
}

fn fork(n: &NodeDef, extra: &[&Undeclared<'_>]) -> (String, TokenStream) {
    let rt = rt();
    let node = &n.ident;
    let mut methods = TokenStream::new();
    let mut targets: Vec<(u32, String)> = edges(n).iter().map(|(i, t)| (*i, t.to_string())).collect();
    targets.extend(extra.iter().map(|u| (NO_EDGE, u.target.clone())));
    for (i, t) in &targets {
        let end = t == END;
        let doc = if *i == NO_EDGE {
            format!("Not a declared edge (`{t}` is missing from `to = [...]`).")
        } else {
            format!(
                "Adds a branch along edge {i} ({}).",
                if end { "to `END`".to_owned() } else { format!("to `{t}`") }
            )
        };
        let method = if end { Ident::new("end", Span::call_site()) } else { format_ident!("{}", t) };
        methods.extend(quote! {
            #[doc = #doc]
            pub fn #method(mut self) -> Self {
                self.branches.push(#rt::Branch::to(#i));
                self
            }
        });
        if !end {
            let with = format_ident!("{}_with", t);
            let doc = format!(
                "Adds a branch along edge {i} to `{t}` carrying `input`, which that activation reads with \
                 `ctx.input::<T>()`. Each branch with an input is its own activation.\n\n# Errors\n\nThe \
                 input does not serialize to JSON."
            );
            methods.extend(quote! {
                #[doc = #doc]
                pub fn #with(
                    mut self,
                    input: &impl #rt::serde::Serialize,
                ) -> #rt::Result<Self, #rt::NodeError> {
                    self.branches.push(#rt::branch_with(#i, input)?);
                    #rt::Ok(self)
                }
            });
        }
    }
    let struct_doc = format!(
        "The branches node `{node}` forks into: one method per declared edge, each callable any number of \
         times. A node returns `Ok((delta, {node}::Fork::new().a().b_with(&input)?))`; branches run in the \
         order they were added."
    );
    let content = quote! {
        #[doc = #struct_doc]
        #[derive(
            ::core::fmt::Debug,
            ::core::clone::Clone,
            ::core::default::Default,
            ::core::cmp::PartialEq
        )]
        pub struct Fork {
            branches: #rt::Vec<#rt::Branch>,
        }

        #[allow(dead_code)]
        impl Fork {
            /// No branches yet.
            pub fn new() -> Self {
                <Self as ::core::default::Default>::default()
            }

            #methods
        }

        impl<S: #rt::Reducer> #rt::Routing<S> for Fork {
            type Out = (S::Delta, Fork);
            fn split(out: Self::Out) -> (S::Delta, #rt::Route) {
                (out.0, #rt::Route::Fork(out.1.branches))
            }
        }
    };
    (module_doc(n), content)
}
