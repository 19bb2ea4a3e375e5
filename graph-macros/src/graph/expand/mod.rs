//! Code generation from a checked [`GraphDef`]. With a valid graph: the node handlers, the description
//! (`graph()`), `FINGERPRINT`, `mermaid()`, `dot()`, and the routing types. With errors: typed stubs of the
//! same items (`graph()` panics), so the user's code around a mistake still type-checks and one mistake
//! stays one error.

pub(crate) mod routes;

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{Ident, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;

use super::ast::{BackoffDef, GraphDef, NodeDef, Routing};
use super::check::Resolved;
use super::names;
use graph_core::Target;

/// The path generated code reaches the runtime through.
pub(crate) fn rt() -> TokenStream {
    rt_at(Span::call_site())
}

/// [`rt`] with every token at `span`, for code whose errors must land on a user's token.
pub(crate) fn rt_at(span: Span) -> TokenStream {
    quote_spanned!(span=> ::graph_runtime::__private)
}

/// Expands the module; `resolved` is `None` when there were errors (stubs).
pub(crate) fn expand(g: &GraphDef, resolved: Option<&Resolved>) -> TokenStream {
    let rt = rt();
    let module = &g.module;
    let attrs = &module.attrs;
    let vis = &module.vis;
    let ident = &module.ident;
    let modules: BTreeSet<String> = routes::module_nodes(g).iter().map(|n| n.name()).collect();
    let plan = names::plan(g, &modules);
    // With errors, a route to an undeclared edge gets a stub variant or method, so that the macro's
    // error about it is the only one (rustc would add "no variant named ..." at the same place).
    let extra = if resolved.is_none() { routes::undeclared(g) } else { Vec::new() };
    let (routes, merged) = routes::expand(g, &plan, &extra);
    let items = kept_items(g, &plan, &merged);
    let state = g.state.clone().or_else(|| stub_state(g));
    let mut body = routes;
    let name = &g.name;
    match (resolved, &state) {
        (Some(r), Some(state)) => {
            let fingerprint = fingerprint(g, r);
            let description = description(g, r, state);
            let migration = migration(g, state);
            let check_state = quote_spanned!(state.span()=> #rt::assert_reducer::<#state>());
            let version = g.version;
            body.extend(quote! {
                const _: () = #check_state;

                /// The graph's version (`#[graph(version = N)]`, 1 when not declared). Equal to
                /// `graph().version()`.
                #[allow(dead_code)]
                pub const VERSION: u32 = #version;

                /// The graph's state type, named for the migrations of later versions.
                #[doc(hidden)]
                #[allow(dead_code)]
                pub type __GraphState = #state;

                /// The graph's fingerprint: a SHA-256 of its nodes, edges (in index order), entry and node
                /// signatures, computed at compile time. Equal to `graph().fingerprint()`.
                #[allow(dead_code)]
                pub const FINGERPRINT: &str = #fingerprint;

                /// The graph's description: node table, edge table (edge indices follow `to = [...]`
                /// order), entry, node policies and fingerprint. Hand it to `Engine::builder`.
                #[allow(dead_code)]
                pub fn graph() -> #rt::Graph<#state> {
                    #description
                }

                #migration

                /// The graph as a Mermaid flowchart (edges labelled with their index).
                #[allow(dead_code)]
                pub fn mermaid() -> #rt::String {
                    graph().mermaid()
                }

                /// The graph as a Graphviz DOT digraph (edges labelled with their index).
                #[allow(dead_code)]
                pub fn dot() -> #rt::String {
                    graph().dot()
                }
            });
        }
        (_, Some(state)) => {
            let msg = format!("graph `{name}` has compile errors");
            // A node or another item of the module named like an API item is reported, and its stub would
            // be a second definition; where the code means the enclosing module's item of that name
            // (reported too), no stub lets it reach that one, so the mistake stays one error.
            let hidden = names::hidden_values(g);
            let taken =
                |item: &str| g.nodes.iter().any(|n| n.ident == item) || hidden.iter().any(|h| h.name == item);
            if !taken("FINGERPRINT") {
                body.extend(quote!(
                    #[doc(hidden)]
                    pub const FINGERPRINT: &str = "";
                ));
            }
            if !taken("graph") {
                body.extend(
                    quote!(#[doc(hidden)] pub fn graph() -> #rt::Graph<#state> { ::core::panic!(#msg) }),
                );
            }
            if !taken("mermaid") {
                body.extend(quote!(#[doc(hidden)] pub fn mermaid() -> #rt::String { ::core::panic!(#msg) }));
            }
            if !taken("dot") {
                body.extend(quote!(#[doc(hidden)] pub fn dot() -> #rt::String { ::core::panic!(#msg) }));
            }
        }
        _ => {}
    }
    let quiet = if resolved.is_none() { quote!(#[allow(dead_code, unused)]) } else { TokenStream::new() };
    quote! {
        #(#attrs)*
        #quiet
        #vis mod #ident {
            #(#items)*
            #body
        }
    }
}

/// The module's items with `#[node]` attributes removed, later definitions of a duplicate node dropped
/// (the duplicate is already reported; rustc would report it a second time), `use` bindings that moved
/// into a routing module removed, and the routing items of a node added to the user's own module of the
/// same name (`merged`, by item index).
fn kept_items(g: &GraphDef, plan: &names::Plan, merged: &BTreeMap<usize, TokenStream>) -> Vec<TokenStream> {
    let mut dropped = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for n in &g.nodes {
        if !seen.insert(n.name()) {
            dropped.push(n.item);
        }
    }
    let mut out = Vec::new();
    for (i, item) in g.items.iter().enumerate() {
        if dropped.contains(&i) {
            continue;
        }
        if let Some(n) = g.nodes.iter().find(|n| n.item == i) {
            out.push(n.func.to_token_stream());
        } else if let Some(left) = plan.uses.get(&i) {
            out.push(left.to_token_stream());
        } else if let (Some(routing), syn::Item::Mod(m)) = (merged.get(&i), item) {
            let mut m = m.clone();
            let added = syn::parse2::<syn::File>(routing.clone()).expect("generated items parse").items;
            if let Some((_, content)) = &mut m.content {
                content.extend(added);
            }
            out.push(m.to_token_stream());
        } else {
            out.push(item.to_token_stream());
        }
    }
    out
}

/// For stubs when `state = ...` is missing: the type the first node reads.
fn stub_state(g: &GraphDef) -> Option<syn::Type> {
    g.nodes.iter().find_map(|n| match n.func.sig.inputs.first() {
        Some(syn::FnArg::Typed(t)) => match &*t.ty {
            syn::Type::Reference(r) => Some((*r.elem).clone()),
            _ => None,
        },
        _ => None,
    })
}

/// The signature string a node contributes to the fingerprint (a subgraph node's names its child).
fn signature(n: &NodeDef) -> String {
    let sig = n.func.sig.to_token_stream().to_string();
    match &n.subgraph {
        Some(child) => format!("{sig} subgraph {}", child.to_token_stream()),
        None => sig,
    }
}

/// The fingerprint's entries for error handlers, as `GraphBuilder::on_error` records them.
fn handler_signatures(g: &GraphDef, r: &Resolved) -> Vec<(String, String)> {
    r.handlers.iter().map(|(n, h)| (g.nodes[*n].name(), format!("on_error {}", g.nodes[*h].name()))).collect()
}

/// `graph_core::fingerprint` of the module, computed at compile time: the runtime's `Graph::fingerprint` of
/// the description `graph()` builds hashes the same text (a pass test checks they agree).
pub(crate) fn fingerprint(g: &GraphDef, r: &Resolved) -> String {
    let names: Vec<String> = g.nodes.iter().map(NodeDef::name).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let sigs: Vec<String> = g.nodes.iter().map(signature).collect();
    let handlers = handler_signatures(g, r);
    let sigs: Vec<(&str, &str)> = names
        .iter()
        .copied()
        .zip(sigs.iter().map(String::as_str))
        .chain(handlers.iter().map(|(n, s)| (n.as_str(), s.as_str())))
        .collect();
    let shape = graph_core::Shape {
        names: &names,
        adjacency: &r.adjacency,
        entry: r.entry,
        signatures: &sigs,
        routed: &r.routed,
        waits: &r.waits,
        version: g.version,
    };
    graph_core::fingerprint(&shape)
}

fn description(g: &GraphDef, r: &Resolved, state: &syn::Type) -> TokenStream {
    let rt = rt();
    let name = &g.name;
    let handler = handler_name(g, state);
    let mut calls = TokenStream::new();
    for n in &g.nodes {
        let node = n.name();
        let f = &n.ident;
        let routing = match &n.routing {
            Routing::Next { prefix } => quote!(#prefix::Next),
            Routing::Fork { prefix } => quote!(#prefix::Fork),
            Routing::Static | Routing::Invalid => quote!(#rt::Static),
        };
        // Spanned on the function's name: a non-`Send` future or a type mismatch lands on the node. The
        // argument names keep the call-site hygiene of the parameters they refer to, so a node name that
        // comes from a `macro_rules!` expansion (another hygiene context) still resolves them.
        let (st, cx) = (Ident::new("__state", Span::call_site()), Ident::new("__ctx", Span::call_site()));
        let call = quote_spanned!(f.span()=> #rt::run_node::<#state, #routing, _, _>(self::#f, #st, #cx));
        // Each handler is declared in its own block, whose user tokens are the state type's and the routing
        // path's (`summarize::Next`); `handler` differs from every identifier in them, so it cannot hide
        // one. The node itself is reached as `self::#f`.
        let handler_value = quote! {
            {
                #[allow(non_camel_case_types)]
                struct #handler {}
                impl #rt::Node<#state> for #handler {
                    fn run<'a>(
                        &'a self,
                        __state: &'a #state,
                        __ctx: &'a mut #rt::Ctx,
                    ) -> #rt::BoxFuture<'a, #rt::NodeResult<#state, #rt::Route>> {
                        #call
                    }
                }
                #handler {}
            }
        };
        let handler_value = match (&n.subgraph, &n.output) {
            // Spanned on the user's tokens: a child that is not a `#[graph]` module, or a mapping of the
            // wrong type, is an error there.
            (Some(child), Some(output)) => {
                let graph = quote_spanned!(child.span()=> #child::graph());
                let input = quote_spanned!(f.span()=> self::#f);
                let output = quote_spanned!(output.span()=> #output);
                quote!(#rt::subgraph::<#state, _>(#graph, #input, #output))
            }
            _ => handler_value,
        };
        let policy = policy(n);
        let sig = signature(n);
        calls.extend(quote!(.add_node(#node, #handler_value, #policy).signature(#node, #sig)));
    }
    for (n, edges) in g.nodes.iter().zip(&r.adjacency) {
        let from = n.name();
        for t in edges {
            let to = match t {
                Target::Node(j) => {
                    let to = g.nodes[*j].name();
                    quote!(#to)
                }
                Target::End => quote!(#rt::END),
            };
            calls.extend(quote!(.edge(#from, #to)));
        }
    }
    for n in g.nodes.iter().filter(|n| n.router.is_some()) {
        let (node, ident) = (n.name(), &n.ident);
        let router = n.router.as_ref().expect("filtered");
        // Spanned on the router's path: a router of the wrong type is an error there.
        let call = quote_spanned!(router.span()=> self::#ident::Next::edge(#router(__s)));
        calls.extend(quote!(.router(#node, |__s: &#state| -> u32 { #call })));
    }
    for (n, preds) in &r.waits {
        let node = g.nodes[*n].name();
        let preds: Vec<String> = preds.iter().map(|p| g.nodes[*p].name()).collect();
        calls.extend(quote!(.wait_for(#node, [#(#preds),*])));
    }
    for (n, h) in &r.handlers {
        let (node, handler) = (g.nodes[*n].name(), g.nodes[*h].name());
        calls.extend(quote!(.on_error(#node, #handler)));
    }
    for n in &g.nodes {
        let node = n.name();
        if n.interrupt_before {
            calls.extend(quote!(.interrupt_before(#node)));
        }
        if n.interrupt_after {
            calls.extend(quote!(.interrupt_after(#node)));
        }
    }
    let entry = g.nodes[r.entry].name();
    if g.version > 1 {
        let version = g.version;
        calls.extend(quote!(.version(#version)));
    }
    quote! {
        #rt::built(#name, #rt::Graph::<#state>::builder(#name) #calls .entry(#entry).build())
    }
}

/// `migration()` of a graph declared with `migrate_from = earlier, migrate = f`: the typed migration
/// from the earlier version's runs. The earlier version must be lower (a compile-time assertion at
/// `migrate_from`), and `f` must be `fn(earlier state) -> this state` (checked at `f`).
fn migration(g: &GraphDef, state: &syn::Type) -> TokenStream {
    let Some((from, migrate)) = &g.migration else { return TokenStream::new() };
    let rt = rt();
    let version_check = quote_spanned!(from.span()=>
        const _: () = ::core::assert!(
            #from::VERSION < VERSION,
            "`migrate_from` names a graph whose version is not below this one's: raise `version`"
        );
    );
    let earlier = quote_spanned!(from.span()=> #from::__GraphState);
    let earlier_graph = quote_spanned!(from.span()=> #from::graph());
    let map = quote_spanned!(migrate.span()=> #migrate);
    quote! {
        #version_check

        /// The migration of runs of the version this one migrates from (`migrate_from`) to this
        /// version: their state mapped by the `migrate` function. Add node mappings with
        /// `.node(old, new)` / `.drop_node(old)` and give it to `EngineBuilder::migration`.
        #[allow(dead_code)]
        pub fn migration() -> #rt::Migration<#earlier, #state> {
            let map: fn(#earlier) -> #state = #map;
            #rt::Migration::new(#earlier_graph, graph(), map)
        }
    }
}

/// The name of the node handler structs: one that no identifier of the state type or of a node name
/// (the prefix of a routing path) has, since the handlers are declared where those tokens are resolved.
fn handler_name(g: &GraphDef, state: &syn::Type) -> Ident {
    let nodes = g.nodes.iter().map(|n| &n.ident);
    fresh_ident("__GraphNode", quote!(#state #(#nodes)*))
}

/// `base`, lengthened with `_` until no identifier in `tokens` has it: a generated name declared where
/// those user tokens are resolved, which therefore cannot hide what they name.
pub(crate) fn fresh_ident(base: &str, tokens: TokenStream) -> Ident {
    fn idents(tokens: TokenStream, out: &mut BTreeSet<String>) {
        for t in tokens {
            match t {
                proc_macro2::TokenTree::Ident(i) => {
                    out.insert(i.to_string());
                }
                proc_macro2::TokenTree::Group(g) => idents(g.stream(), out),
                _ => {}
            }
        }
    }
    let mut used = BTreeSet::new();
    idents(tokens, &mut used);
    let mut name = base.to_owned();
    while used.contains(&name) {
        name.push('_');
    }
    Ident::new(&name, Span::call_site())
}

fn duration(ms: u64) -> TokenStream {
    let rt = rt();
    quote!(#rt::Duration::from_millis(#ms))
}

fn policy(n: &NodeDef) -> TokenStream {
    let rt = rt();
    let mut p = quote!(#rt::NodePolicy::default());
    if let Some(ms) = n.policy.timeout_ms {
        let d = duration(ms);
        p.extend(quote!(.timeout(#d)));
    }
    if let Some(c) = n.policy.max_concurrency {
        p.extend(quote!(.max_concurrency(#c)));
    }
    if let Some(r) = &n.policy.retry {
        let attempts = r.attempts.unwrap_or(1);
        let mut retry = quote!(#rt::RetryPolicy::attempts(#attempts));
        match r.backoff {
            Some(BackoffDef::Fixed(ms)) => {
                let d = duration(ms);
                retry.extend(quote!(.backoff(#rt::Backoff::Fixed(#d))));
            }
            Some(BackoffDef::Exponential(a, b)) => {
                let (a, b) = (duration(a), duration(b));
                retry.extend(quote!(.backoff(#rt::Backoff::exponential(#a, #b))));
            }
            None => {}
        }
        if let Some(j) = r.jitter {
            retry.extend(quote!(.jitter(#j)));
        }
        p.extend(quote!(.retry(#retry)));
    }
    p
}
