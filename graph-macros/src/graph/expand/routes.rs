//! The routing types of conditional and fork nodes, in a module named after the node (beside the
//! function, which lives in the value namespace): `summarize::Next` has one variant per declared edge,
//! `plan::Fork` one method per declared edge, so a route to an undeclared edge cannot be written.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::Ident;

use super::rt;
use crate::graph::ast::{GraphDef, NodeDef, Routing, is_end};
use crate::graph::check::variant_name;

/// The routing modules of every `Next`/`Fork` node.
pub(super) fn expand(g: &GraphDef) -> TokenStream {
    let mut out = TokenStream::new();
    let mut done = std::collections::BTreeSet::new();
    for n in &g.nodes {
        let own = match &n.routing {
            Routing::Next { prefix } | Routing::Fork { prefix } => *prefix == n.ident,
            _ => n.router.is_some(),
        };
        if !own || !done.insert(n.name()) {
            continue;
        }
        out.extend(match n.routing {
            Routing::Fork { .. } => fork(n),
            _ => next(n),
        });
    }
    out
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

fn next(n: &NodeDef) -> TokenStream {
    let rt = rt();
    let node = &n.ident;
    let edges = edges(n);
    let variants: Vec<Ident> = edges.iter().map(|(_, t)| Ident::new(&variant_name(t), t.span())).collect();
    let docs: Vec<String> = edges.iter().map(|(i, t)| target_doc(*i, t)).collect();
    let indices: Vec<u32> = edges.iter().map(|(i, _)| *i).collect();
    let list: Vec<String> = edges.iter().map(|(_, t)| t.to_string()).collect();
    let mod_doc = format!("Routing of node `{node}` (`to = [{}]`).", list.join(", "));
    let enum_doc = format!(
        "Where node `{node}` goes next: one variant per declared edge. A node returns \
         `Ok((delta, {node}::Next::Variant))`."
    );
    quote! {
        #[doc = #mod_doc]
        pub mod #node {
            #[doc = #enum_doc]
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            pub enum Next {
                #( #[doc = #docs] #variants, )*
            }

            impl Next {
                /// The index of this route's edge in the node's `to = [...]` list.
                pub const fn edge(self) -> u32 {
                    match self {
                        #( Next::#variants => #indices, )*
                    }
                }
            }

            impl #rt::Routing<super::__GraphState> for Next {
                type Out = (<super::__GraphState as #rt::Reducer>::Delta, Next);
                fn split(out: Self::Out) -> (<super::__GraphState as #rt::Reducer>::Delta, #rt::Route) {
                    (out.0, #rt::Route::Goto(out.1.edge()))
                }
            }
        }
    }
}

fn fork(n: &NodeDef) -> TokenStream {
    let rt = rt();
    let node = &n.ident;
    let edges = edges(n);
    let mut methods = TokenStream::new();
    for (i, t) in &edges {
        let doc = format!(
            "Adds a branch along edge {i} ({}).",
            if is_end(t) { "to `END`".to_owned() } else { format!("to `{t}`") }
        );
        let method = if is_end(t) { Ident::new("end", Span::call_site()) } else { format_ident!("{}", t) };
        methods.extend(quote! {
            #[doc = #doc]
            pub fn #method(mut self) -> Self {
                self.branches.push(#rt::Branch::to(#i));
                self
            }
        });
        if !is_end(t) {
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
    let list: Vec<String> = edges.iter().map(|(_, t)| t.to_string()).collect();
    let mod_doc = format!("Routing of node `{node}` (`to = [{}]`).", list.join(", "));
    let struct_doc = format!(
        "The branches node `{node}` forks into: one method per declared edge, each callable any number of \
         times. A node returns `Ok((delta, {node}::Fork::new().a().b_with(&input)?))`; branches run in the \
         order they were added."
    );
    quote! {
        #[doc = #mod_doc]
        pub mod #node {
            #[doc = #struct_doc]
            #[derive(Debug, Clone, Default, PartialEq)]
            pub struct Fork {
                branches: #rt::Vec<#rt::Branch>,
            }

            #[allow(dead_code)]
            impl Fork {
                /// No branches yet.
                pub fn new() -> Self {
                    Self::default()
                }

                #methods
            }

            impl #rt::Routing<super::__GraphState> for Fork {
                type Out = (<super::__GraphState as #rt::Reducer>::Delta, Fork);
                fn split(out: Self::Out) -> (<super::__GraphState as #rt::Reducer>::Delta, #rt::Route) {
                    (out.0, #rt::Route::Fork(out.1.branches))
                }
            }
        }
    }
}
