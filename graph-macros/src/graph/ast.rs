//! The typed IR of a `#[graph]` module. It keeps the original `syn` nodes so that every error can point
//! at the smallest offending token.

use proc_macro2::Span;
use syn::{Ident, ItemFn, ItemMod, LitStr, Type};

/// A parsed `#[graph(...)] mod name { ... }`.
pub(crate) struct GraphDef {
    /// The module, its content replaced by `items`.
    pub(crate) module: ItemMod,
    /// The graph's runtime name (`name = "..."`, default the module's name).
    pub(crate) name: String,
    /// `state = ...`, `None` when missing (already reported).
    pub(crate) state: Option<Type>,
    /// `version = N` (1 when not given).
    pub(crate) version: u32,
    /// `migrate_from = module, migrate = function`: the previous version's `#[graph]` module and the
    /// function mapping its state to this one's.
    pub(crate) migration: Option<(syn::Path, syn::Path)>,
    /// The module's items in source order, `#[node]` attributes removed. Nodes point into this list.
    pub(crate) items: Vec<syn::Item>,
    /// The `#[node]` functions, in declaration order.
    pub(crate) nodes: Vec<NodeDef>,
    /// The source file around the module, when the entry point could read it (for the purity lints'
    /// name resolution: what `use super::*` brings in).
    pub(crate) surroundings: Option<crate::purity::Surroundings>,
}

/// One `#[node(...)] async fn`.
pub(crate) struct NodeDef {
    pub(crate) ident: Ident,
    /// Index in `GraphDef::items`.
    pub(crate) item: usize,
    /// The function (attributes already stripped of `#[node]`).
    pub(crate) func: ItemFn,
    /// The `entry` flag, for its span.
    pub(crate) entry: Option<Ident>,
    /// The `to` key, when given.
    pub(crate) to: Option<Ident>,
    /// Declared edges in `to = [...]` order: the position is the edge index.
    pub(crate) edges: Vec<Ident>,
    /// `to` was given but could not be read (reported): the graph analysis is skipped.
    pub(crate) edges_invalid: bool,
    pub(crate) policy: Policy,
    /// `impure = "reason"`: the purity lints are off for this node.
    pub(crate) impure: Option<LitStr>,
    /// `route = router`: a `fn(&S) -> name::Next` that chooses the edge from the updated state.
    pub(crate) router: Option<syn::Path>,
    /// `wait_for = [a, b]`: the predecessors this node waits for, all of them (empty: no wait).
    pub(crate) wait_for: Vec<Ident>,
    /// The `wait_for` key, when given.
    pub(crate) wait_for_key: Option<Ident>,
    /// `interrupt_before`: a breakpoint before the node's steps.
    pub(crate) interrupt_before: bool,
    /// `interrupt_after`: a breakpoint after the node's steps.
    pub(crate) interrupt_after: bool,
    /// How the return type says the node routes.
    pub(crate) routing: Routing,
    /// `subgraph = module`: the node runs that `#[graph]` module's graph; the function maps this graph's
    /// state to the child's input.
    pub(crate) subgraph: Option<syn::Path>,
    /// The `subgraph` key, when given.
    pub(crate) subgraph_key: Option<Ident>,
    /// `output = f`: a subgraph node's `fn(&State, Child) -> StateDelta`.
    pub(crate) output: Option<syn::Path>,
    /// The `output` key, when given.
    pub(crate) output_key: Option<Ident>,
    /// `on_error = handler`: the node its failures are routed to.
    pub(crate) on_error: Option<Ident>,
}

impl NodeDef {
    pub(crate) fn name(&self) -> String {
        self.ident.to_string()
    }
}

/// An edge target is END.
pub(crate) fn is_end(target: &Ident) -> bool {
    target == crate::keywords::END
}

/// The routing a node declares through its return type.
#[derive(Clone)]
pub(crate) enum Routing {
    /// `NodeResult<S>`: follow every declared edge.
    Static,
    /// `NodeResult<S, own::Next>`: exactly one declared edge.
    Next { prefix: Ident },
    /// `NodeResult<S, own::Fork>`: any declared edges, each optionally with an input.
    Fork { prefix: Ident },
    /// Anything else; the signature check reports it.
    Invalid,
}

/// A node's policy overrides, values already checked.
#[derive(Clone, Default)]
pub(crate) struct Policy {
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) retry: Option<Retry>,
    pub(crate) max_concurrency: Option<usize>,
}

/// `retry(...)`.
#[derive(Clone, Default)]
pub(crate) struct Retry {
    pub(crate) attempts: Option<u32>,
    pub(crate) backoff: Option<BackoffDef>,
    pub(crate) jitter: Option<f64>,
}

/// `backoff = fixed("..")` or `backoff = exponential("..", "..")`, in milliseconds.
#[derive(Clone, Copy)]
pub(crate) enum BackoffDef {
    Fixed(u64),
    Exponential(u64, u64),
}

/// Where a span points when a rule is about a whole node.
pub(crate) fn node_span(n: &NodeDef) -> Span {
    n.ident.span()
}
