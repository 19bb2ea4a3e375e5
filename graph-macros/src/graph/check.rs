//! The rules a `#[graph]` must satisfy, one `check_*` function per rule. Every rule reports and moves
//! on; the graph analysis (reachability) only runs on a structurally valid graph, so one mistake stays
//! one error.

use std::collections::BTreeMap;

use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, Type};

use super::ast::{GraphDef, NodeDef, Routing, is_end, node_span};
use super::parse::node_result_args;
use crate::diag::Errors;
use crate::keywords::{END, RESERVED_NODE_NAMES};
use crate::purity;
use graph_core::algo::{self, Target};
use graph_core::suggest::{did_you_mean, list};

/// A structurally valid graph: node indices are positions in `GraphDef::nodes`.
pub(crate) struct Resolved {
    pub(crate) entry: usize,
    pub(crate) adjacency: Vec<Vec<Target>>,
    /// Nodes with a `route = ...` router.
    pub(crate) routed: Vec<usize>,
    /// `(node, predecessors)` of every `wait_for`.
    pub(crate) waits: Vec<(usize, Vec<usize>)>,
    /// `(node, handler)` of every `on_error`.
    pub(crate) handlers: Vec<(usize, usize)>,
}

/// Runs every rule. Returns the resolved graph when the structure is valid (other errors may remain).
pub(crate) fn check(g: &GraphDef, errs: &mut Errors) -> Option<Resolved> {
    for n in &g.nodes {
        if n.subgraph.is_some() {
            check_subgraph_signature(n, g.state.as_ref(), errs);
        } else {
            check_signature(n, g.state.as_ref(), errs);
        }
        check_subgraph_options(n, errs);
    }
    check_purity(g, errs);
    check_reserved_names(g, errs);
    check_hidden_values(g, errs);
    let before = errs.len();
    let index = check_duplicate_nodes(g, errs);
    let adjacency = check_edges(g, &index, errs);
    check_next_variants(g, errs);
    check_undeclared_routes(g, errs);
    check_routers(g, errs);
    let handlers = check_handlers(g, &index, errs);
    let entry = check_entry(g, errs);
    if errs.len() != before || g.nodes.iter().any(|n| n.edges_invalid) {
        return None;
    }
    let waits = check_wait_for(g, &index, &adjacency, errs);
    let entry = entry?;
    // What the structural rules see: the declared edges and the error handlers' edges.
    let mut checked = adjacency.clone();
    for (n, h) in &handlers {
        checked[*n].push(Target::Node(*h));
    }
    check_reachable(g, entry, &checked, errs);
    check_reaches_end(g, &checked, errs);
    let routed = (0..g.nodes.len()).filter(|&i| g.nodes[i].router.is_some()).collect();
    Some(Resolved { entry, adjacency, routed, waits, handlers })
}

// A node is `async fn name(state: &S, ctx: &mut Ctx) -> NodeResult<S[, name::Next | name::Fork]>`, not
// generic, not a method.
fn check_signature(n: &NodeDef, state: Option<&Type>, errs: &mut Errors) {
    let sig = &n.func.sig;
    let name = n.name();
    if sig.asyncness.is_none() {
        errs.at(
            sig.fn_token.span,
            format!("node `{name}` must be an `async fn`: write `async fn {name}(...)`"),
        );
    }
    if let syn::Safety::Unsafe(u) = &sig.safety {
        errs.at(u.span, format!("node `{name}` cannot be `unsafe`"));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errs.spanned(
            &sig.generics,
            format!("node `{name}` cannot be generic: the graph calls it with its state type"),
        );
    }
    let state_text = state.map_or_else(|| "S".to_owned(), show);
    let expected = format!("`(state: &{state_text}, ctx: &mut Ctx)`");
    let params: Vec<&FnArg> = sig.inputs.iter().collect();
    if params.len() != 2 {
        let span = params.get(2).map_or_else(|| sig.paren_token.span.join(), |p| p.span());
        errs.at(span, format!("node `{name}` takes {expected}, found {} parameter(s)", params.len()));
    }
    for (i, p) in params.iter().take(2).enumerate() {
        let ty = match p {
            FnArg::Receiver(r) => {
                errs.at(
                    r.self_token.span,
                    format!("node `{name}` is a free function, not a method: drop `self`"),
                );
                continue;
            }
            FnArg::Typed(t) => &*t.ty,
        };
        if i == 0 {
            let ok = matches!(ty, Type::Reference(r) if r.mutability.is_none() && state.is_none_or(|s| same_type(s, &r.elem)));
            if !ok {
                errs.spanned(ty,
                    format!(
                        "the first parameter of node `{name}` is the graph's state, `&{state_text}`; found `{}`",
                        show(ty)
                    ),
                );
            }
        } else {
            let ok = matches!(ty, Type::Reference(r) if r.mutability.is_some() && last_ident(&r.elem).is_some_and(|i| i == "Ctx"));
            if !ok {
                errs.spanned(
                    ty,
                    format!(
                        "the second parameter of node `{name}` is the context, `&mut Ctx`; found `{}`",
                        show(ty)
                    ),
                );
            }
        }
    }
    check_return(n, state, &state_text, errs);
}

// A subgraph node is `fn name(state: &S) -> ChildState`: it maps this graph's state to the child's
// input (rustc checks the child's type against the child graph's state).
fn check_subgraph_signature(n: &NodeDef, state: Option<&Type>, errs: &mut Errors) {
    let sig = &n.func.sig;
    let name = n.name();
    let state_text = state.map_or_else(|| "S".to_owned(), show);
    let form = format!("`fn {name}(state: &{state_text}) -> ChildState`");
    if let Some(a) = &sig.asyncness {
        errs.at(
            a.span,
            format!(
                "subgraph node `{name}` maps this graph's state to the child graph's input, so it is a plain {form}: remove `async` (the child graph's nodes do the work)"
            ),
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errs.spanned(&sig.generics, format!("subgraph node `{name}` cannot be generic"));
    }
    let params: Vec<&FnArg> = sig.inputs.iter().collect();
    match params.as_slice() {
        [FnArg::Typed(t)] => {
            let ok = matches!(&*t.ty, Type::Reference(r) if r.mutability.is_none() && state.is_none_or(|s| same_type(s, &r.elem)));
            if !ok {
                errs.spanned(
                    &t.ty,
                    format!("subgraph node `{name}` reads the graph's state, `&{state_text}`: it is {form}"),
                );
            }
        }
        _ => errs.at(
            sig.paren_token.span.join(),
            format!("subgraph node `{name}` takes one parameter, the graph's state: it is {form}"),
        ),
    }
    if let syn::ReturnType::Default = sig.output {
        errs.at(
            sig.paren_token.span.close(),
            format!("subgraph node `{name}` returns the child graph's input state: it is {form}"),
        );
    }
}

// `subgraph` and `output` go together.
fn check_subgraph_options(n: &NodeDef, errs: &mut Errors) {
    let name = n.name();
    match (&n.subgraph_key, &n.output_key) {
        (Some(key), None) => errs.at(
            key.span(),
            format!(
                "subgraph node `{name}` needs `output = merge_fn`, a `fn(&State, ChildState) -> StateDelta` mapping the child's final state to this node's update"
            ),
        ),
        (None, Some(key)) => errs.at(
            key.span(),
            format!(
                "`output` maps a subgraph's final state to the node's update; node `{name}` has no `subgraph = module`: add it, or remove `output`"
            ),
        ),
        _ => {}
    }
}

// Every `on_error` names another node of the graph.
fn check_handlers(g: &GraphDef, index: &BTreeMap<String, usize>, errs: &mut Errors) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let Some(h) = &n.on_error else { continue };
        let name = n.name();
        let target = h.to_string();
        match index.get(&target) {
            Some(&j) if j == i => errs.at(
                h.span(),
                format!("node `{name}` cannot handle its own failures: name another node in `on_error`"),
            ),
            Some(&j) => out.push((i, j)),
            None => errs.at(
                h.span(),
                format!(
                    "unknown node `{target}` in the `on_error` of `{name}`{}; the nodes of this graph are {}",
                    did_you_mean(&target, index.keys().map(String::as_str)),
                    list(index.keys().map(String::as_str)),
                ),
            ),
        }
    }
    out
}

// The return type is `NodeResult<S>`, `NodeResult<S, own::Next>` or `NodeResult<S, own::Fork>`.
fn check_return(n: &NodeDef, state: Option<&Type>, state_text: &str, errs: &mut Errors) {
    let sig = &n.func.sig;
    let name = n.name();
    let choices = format!(
        "`NodeResult<{state_text}>` (follow every edge), `NodeResult<{state_text}, {name}::Next>` (choose one \
         edge) or `NodeResult<{state_text}, {name}::Fork>` (several edges, each with an optional input)"
    );
    let Some(args) = node_result_args(sig) else {
        match &sig.output {
            syn::ReturnType::Default => errs.at(
                sig.paren_token.span.close(),
                format!("node `{name}` must return {choices}; found no return type"),
            ),
            syn::ReturnType::Type(_, t) => {
                errs.spanned(t, format!("node `{name}` must return {choices}; found `{}`", show(t)))
            }
        }
        return;
    };
    if let (Some(s), Some(found)) = (state, args.first())
        && !same_type(s, found)
    {
        errs.spanned(
            found,
            format!(
                "node `{name}` returns a result over `{}`, but the graph's state is `{state_text}`",
                show(found)
            ),
        );
    }
    match (&n.routing, args.get(1)) {
        (Routing::Invalid, Some(r)) if last_ident(r).is_some_and(|i| i == "Route") => errs.spanned(r,
            format!(
                "a `#[node]` routes through its generated `{name}::Next` (one edge) or `{name}::Fork` (several), \
                 not a raw `Route`, whose edge index could name an edge that is not declared; write \
                 `NodeResult<{state_text}, {name}::Next>`"
            ),
        ),
        (Routing::Invalid, Some(r)) => {
            errs.spanned(r, format!("node `{name}` must return {choices}; found `{}`", show(r)));
        }
        (Routing::Invalid, None) => {
            errs.spanned(args[0], format!("node `{name}` must return {choices}"));
        }
        (Routing::Next { prefix } | Routing::Fork { prefix }, _) if *prefix != n.ident => {
            let kind = if matches!(n.routing, Routing::Next { .. }) { "Next" } else { "Fork" };
            errs.at(
                prefix.span(),
                format!(
                    "node `{name}` returns `{prefix}::{kind}`, the routes of another node; its own are \
                     `{name}::{kind}`"
                ),
            );
        }
        _ => {}
    }
}

// Node bodies (and the helpers of the module they call) are deterministic outside `ctx`, unless the
// node says `impure = "reason"`. One call for the whole graph: a helper several nodes reach is reported
// once.
fn check_purity(g: &GraphDef, errs: &mut Errors) {
    purity::check_graph(g, errs);
}

// A node cannot take a name the graph module generates (`graph`, `mermaid`, `dot`, `FINGERPRINT`) or `END`.
fn check_reserved_names(g: &GraphDef, errs: &mut Errors) {
    for n in &g.nodes {
        let name = n.name();
        if RESERVED_NODE_NAMES.contains(&name.as_str()) {
            errs.at(
                n.ident.span(),
                format!(
                    "a node cannot be named `{name}`: the graph module defines `graph()`, `mermaid()`, `dot()` \
                     and `FINGERPRINT`, and `END` ends a path; rename the function"
                ),
            );
        }
    }
}

// The module's own items do not take the names of the generated `graph()`, `mermaid()`, `dot()` and
// `FINGERPRINT`, and its code does not call one of those where it means the enclosing module's item of
// the same name (which `use super::*` would have imported, were the generated one not there).
fn check_hidden_values(g: &GraphDef, errs: &mut Errors) {
    for h in super::names::hidden_values(g) {
        errs.at(h.span, h.message);
    }
}

// A route written in the module (`summarize::Next::Revise`, `plan::Fork::new().publish()`) to an existing
// node that is not one of the routing node's declared edges: the fix is the edge, not another variant.
// Reported once per (node, target), at the variant or method as written.
fn check_undeclared_routes(g: &GraphDef, errs: &mut Errors) {
    for u in super::expand::routes::undeclared(g) {
        let name = u.node.name();
        let declared: Vec<String> = u.node.edges.iter().map(ToString::to_string).collect();
        let mut fixed = declared.clone();
        fixed.push(u.target.clone());
        let verb = if u.fork { "forks to" } else { "routes to" };
        errs.at(
            u.site.span(),
            format!(
                "node `{name}` {verb} `{}`, which is not one of its edges (`to = [{}]`); add it: `to = [{}]`",
                u.target,
                declared.join(", "),
                fixed.join(", ")
            ),
        );
    }
}

// Node names are unique; a duplicate is reported at both definitions. Returns name -> first index.
fn check_duplicate_nodes(g: &GraphDef, errs: &mut Errors) -> BTreeMap<String, usize> {
    let mut index = BTreeMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if let Some(&first) = index.get(&n.name()) {
            let f: &NodeDef = &g.nodes[first];
            errs.both(
                n.ident.span(),
                format!("duplicate node `{}`: node names are unique within a graph; rename one", n.name()),
                f.ident.span(),
                format!("node `{}` first defined here", n.name()),
            );
        } else {
            index.insert(n.name(), i);
        }
    }
    index
}

// Every node declares at least one edge; each edge names a node of the graph or END, once.
fn check_edges(g: &GraphDef, index: &BTreeMap<String, usize>, errs: &mut Errors) -> Vec<Vec<Target>> {
    let mut candidates: Vec<&str> = index.keys().map(String::as_str).collect();
    candidates.push(END);
    let mut adjacency = Vec::with_capacity(g.nodes.len());
    for n in &g.nodes {
        let name = n.name();
        if n.edges.is_empty() && !n.edges_invalid {
            let span = n.to.as_ref().map_or_else(|| node_span(n), Ident::span);
            errs.at(
                span,
                format!("node `{name}` declares no edges: add `to = [next, ...]`, or `to = END` to finish the run here"),
            );
        }
        let mut seen: BTreeMap<String, &Ident> = BTreeMap::new();
        let mut out = Vec::new();
        for t in &n.edges {
            let target = t.to_string();
            if let Some(first) = seen.get(&target) {
                errs.both(
                    t.span(),
                    format!(
                        "duplicate edge `{name}` -> `{target}`: declare each edge once (its position in `to = [...]` is its index)"
                    ),
                    first.span(),
                    "first declared here",
                );
                continue;
            }
            seen.insert(target.clone(), t);
            if is_end(t) {
                out.push(Target::End);
            } else if let Some(&j) = index.get(&target) {
                out.push(Target::Node(j));
            } else {
                errs.at(
                    t.span(),
                    format!(
                        "unknown node `{target}` in the edges of `{name}`{}; the nodes of this graph are {}, or `END`",
                        did_you_mean(&target, candidates.iter().copied()),
                        list(index.keys().map(String::as_str)),
                    ),
                );
            }
        }
        adjacency.push(out);
    }
    adjacency
}

// A node routes either by its return value (`name::Next`, `name::Fork`) or by a router, not both.
fn check_routers(g: &GraphDef, errs: &mut Errors) {
    for n in g.nodes.iter().filter(|n| n.router.is_some()) {
        let name = n.name();
        if let Routing::Next { .. } | Routing::Fork { .. } = n.routing {
            let router = n.router.as_ref().expect("filtered");
            errs.spanned(
                router,
                format!(
                    "node `{name}` is routed by `route = ...`, so it returns only its update: write \
                     `NodeResult<State>`, and let the router return `{name}::Next`"
                ),
            );
        }
    }
}

// Every `wait_for` predecessor is a node of the graph with an edge to the waiting node, named once.
fn check_wait_for(
    g: &GraphDef,
    index: &BTreeMap<String, usize>,
    adjacency: &[Vec<Target>],
    errs: &mut Errors,
) -> Vec<(usize, Vec<usize>)> {
    let mut waits = Vec::new();
    for (n, node) in g.nodes.iter().enumerate() {
        if node.wait_for.is_empty() {
            if let Some(key) = &node.wait_for_key {
                errs.at(key.span(), "`wait_for` lists the predecessors to wait for: `wait_for = [a, b]`");
            }
            continue;
        }
        let name = node.name();
        let mut preds: Vec<usize> = Vec::new();
        for p in &node.wait_for {
            let pred = p.to_string();
            let Some(&i) = index.get(&pred) else {
                errs.at(
                    p.span(),
                    format!(
                        "unknown node `{pred}` in the `wait_for` of `{name}`{}; the nodes of this graph are {}",
                        did_you_mean(&pred, index.keys().map(String::as_str)),
                        list(index.keys().map(String::as_str)),
                    ),
                );
                continue;
            };
            if !adjacency[i].contains(&Target::Node(n)) {
                errs.at(
                    p.span(),
                    format!(
                        "node `{name}` waits for `{pred}`, which has no edge to it: add `{name}` to the \
                         `to = [...]` of `{pred}`, or remove `{pred}` from the `wait_for`"
                    ),
                );
            } else if preds.contains(&i) {
                errs.at(p.span(), format!("`{pred}` is listed twice in the `wait_for` of `{name}`"));
            } else {
                preds.push(i);
            }
        }
        waits.push((n, preds));
    }
    waits
}

/// The `Next` variant of an edge target: `revise_draft` → `ReviseDraft`, `END` → `End`.
pub(crate) fn variant_name(target: &Ident) -> String {
    if is_end(target) {
        return "End".to_owned();
    }
    target
        .to_string()
        .split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default()
        })
        .collect()
}

// The `Next` variants of a conditional node are distinct (`fix_up` and `fix__up` would both be `FixUp`).
fn check_next_variants(g: &GraphDef, errs: &mut Errors) {
    for n in g.nodes.iter().filter(|n| matches!(n.routing, Routing::Next { .. })) {
        let mut seen: BTreeMap<String, &Ident> = BTreeMap::new();
        for t in &n.edges {
            let v = variant_name(t);
            match seen.get(&v) {
                Some(first) if *t != first.to_string() => errs.both(
                    t.span(),
                    format!(
                        "edges `{first}` and `{t}` of node `{}` would both be the variant `{}::Next::{v}`; rename one node",
                        n.name(),
                        n.name()
                    ),
                    first.span(),
                    "first edge here",
                ),
                _ => {
                    seen.insert(v, t);
                }
            }
        }
    }
}

// Exactly one node is marked `entry`.
fn check_entry(g: &GraphDef, errs: &mut Errors) -> Option<usize> {
    let entries: Vec<usize> = (0..g.nodes.len()).filter(|&i| g.nodes[i].entry.is_some()).collect();
    match entries.as_slice() {
        [] => {
            let first = g.nodes.first().map(NodeDef::name).unwrap_or_else(|| "first_node".to_owned());
            errs.at(
                g.module.ident.span(),
                format!(
                    "graph `{}` has no entry node: mark the node a run starts at, e.g. `#[node(entry, to = ...)] async fn {first}`",
                    g.name
                ),
            );
            None
        }
        [one] => Some(*one),
        [first, rest @ ..] => {
            let f = &g.nodes[*first];
            for other in rest {
                let o = &g.nodes[*other];
                errs.both(
                    o.entry.as_ref().map_or_else(|| node_span(o), Ident::span),
                    format!(
                        "two entry nodes, `{}` and `{}`: a graph has exactly one entry; remove `entry` from one",
                        f.name(),
                        o.name()
                    ),
                    f.entry.as_ref().map_or_else(|| node_span(f), Ident::span),
                    format!("`{}` is already the entry", f.name()),
                );
            }
            None
        }
    }
}

// Every node is reachable from the entry (one error per group of unreachable nodes, at its root).
fn check_reachable(g: &GraphDef, entry: usize, adjacency: &[Vec<Target>], errs: &mut Errors) {
    for group in algo::unreachable(entry, adjacency) {
        let root = &g.nodes[group.nodes[0]];
        let mut message = format!(
            "node `{}` is unreachable: no path from the entry `{}` leads to it; add it to the `to = [...]` of a reachable node, or remove it",
            root.name(),
            g.nodes[entry].name()
        );
        let also: Vec<String> =
            group.nodes[1..].iter().chain(&group.downstream).map(|&i| g.nodes[i].name()).collect();
        if !also.is_empty() {
            message.push_str(&format!(
                " (so are {}, which only it leads to)",
                list(also.iter().map(String::as_str))
            ));
        }
        errs.at(root.ident.span(), message);
    }
}

// END is reachable from every node: a loop needs an exit (one error per loop, at its first node).
fn check_reaches_end(g: &GraphDef, adjacency: &[Vec<Target>], errs: &mut Errors) {
    for trap in algo::traps(adjacency) {
        let first = &g.nodes[trap.nodes[0]];
        let cycle: Vec<String> = trap.cycle.iter().map(|&i| format!("`{}`", g.nodes[i].name())).collect();
        let mut message = format!(
            "no path from node `{}` reaches `END`: {} loops forever; give the loop an exit, e.g. `to = [..., END]` on `{}`",
            first.name(),
            cycle.join(" -> "),
            first.name()
        );
        if !trap.upstream.is_empty() {
            let up: Vec<String> = trap.upstream.iter().map(|&i| g.nodes[i].name()).collect();
            message.push_str(&format!(" ({} only lead into this loop)", list(up.iter().map(String::as_str))));
        }
        errs.at(first.ident.span(), message);
    }
}

/// Same type, as far as tokens can tell: the same last path segment (rustc checks the rest).
fn same_type(a: &Type, b: &Type) -> bool {
    match (last_ident(a), last_ident(b)) {
        (Some(x), Some(y)) => x == y,
        _ => show(a) == show(b),
    }
}

fn last_ident(t: &Type) -> Option<&Ident> {
    match t {
        Type::Path(p) => p.path.segments.last().map(|s| &s.ident),
        Type::Paren(p) => last_ident(&p.elem),
        Type::Group(g) => last_ident(&g.elem),
        _ => None,
    }
}

/// A type as a user would write it.
pub(crate) fn show(t: &impl ToTokens) -> String {
    let s = t.to_token_stream().to_string();
    s.replace(" :: ", "::")
        .replace("& ", "&")
        .replace(" <", "<")
        .replace("< ", "<")
        .replace(" >", ">")
        .replace(" ,", ",")
}
