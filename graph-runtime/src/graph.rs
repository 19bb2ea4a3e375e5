//! The graph description the engine executes: a node table, per-node edge lists whose positions are the
//! edge indices, an entry, and a fingerprint.
//!
//! `#[graph]` generates this description at compile time; [`GraphBuilder`] builds the same thing by hand
//! and checks the same rules at `build()`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use crate::ctx::Ctx;
use crate::error::GraphError;
use crate::node::{BoxFuture, Node, NodeResult, Route};
use crate::policy::NodePolicy;
use crate::state::Reducer;
use crate::telemetry::Meters;

/// The reserved name of the terminal pseudo-node.
pub const END: &str = "__end__";

/// The edge index a failed item's route takes to its node's error handler (`on_error`): outside the
/// declared edges, so `Route::Declared` never follows it.
pub(crate) const ERROR_EDGE: u32 = u32::MAX;

pub use graph_core::Target;

/// A router: chooses a node's edge (by index) from the state with the node's own update applied.
pub type Router<S> = Arc<dyn Fn(&S) -> u32 + Send + Sync>;

/// One node of the table: its name, its edges by index, what runs it and its policy.
pub(crate) struct NodeEntry<S: Reducer> {
    name: Arc<str>,
    edges: Vec<Target>,
    handler: Arc<dyn Node<S>>,
    policy: NodePolicy,
    router: Option<Router<S>>,
    /// The predecessors this node waits for, all of them, before it runs (empty: no wait).
    wait_for: Vec<usize>,
    /// A breakpoint before the node's steps.
    interrupt_before: bool,
    /// A breakpoint after the node's steps.
    interrupt_after: bool,
    /// The node its failures are routed to (`on_error`), by index.
    on_error: Option<usize>,
}

impl<S: Reducer> NodeEntry<S> {
    /// The node's name (shared with work items and checkpoints).
    pub(crate) fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The declared edges; the position is the edge index.
    pub(crate) fn edges(&self) -> &[Target] {
        &self.edges
    }

    /// What executes the node.
    pub(crate) fn handler(&self) -> &Arc<dyn Node<S>> {
        &self.handler
    }

    /// The node's own policy overrides.
    pub(crate) fn policy(&self) -> &NodePolicy {
        &self.policy
    }

    /// The router choosing this node's edge, when it has one.
    pub(crate) fn router(&self) -> Option<&Router<S>> {
        self.router.as_ref()
    }

    /// The predecessors this node waits for (empty: it runs on any route into it).
    pub(crate) fn wait_for(&self) -> &[usize] {
        &self.wait_for
    }

    /// The run stops before a step that would run this node.
    pub(crate) fn interrupt_before(&self) -> bool {
        self.interrupt_before
    }

    /// The run stops after a step that ran this node.
    pub(crate) fn interrupt_after(&self) -> bool {
        self.interrupt_after
    }

    /// The node this node's failures are routed to, when it has an error handler.
    pub(crate) fn on_error(&self) -> Option<usize> {
        self.on_error
    }
}

/// A validated, immutable graph over state `S`. Cheap to clone.
pub struct Graph<S: Reducer> {
    inner: Arc<GraphInner<S>>,
}

struct GraphInner<S: Reducer> {
    name: Arc<str>,
    nodes: Vec<NodeEntry<S>>,
    index: BTreeMap<Arc<str>, usize>,
    entry: usize,
    fingerprint: Arc<str>,
    version: u32,
    /// `reaches[a][b]`: node `b` can be reached from node `a` (for wait-for-all joins).
    reaches: Vec<Vec<bool>>,
    /// What its runs record (metrics).
    meters: Arc<Meters>,
}

impl<S: Reducer> Clone for Graph<S> {
    fn clone(&self) -> Self {
        Graph { inner: self.inner.clone() }
    }
}

impl<S: Reducer> std::fmt::Debug for Graph<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("name", &self.inner.name)
            .field("nodes", &self.inner.nodes.iter().map(|n| &*n.name).collect::<Vec<_>>())
            .field("version", &self.inner.version)
            .field("fingerprint", &self.inner.fingerprint)
            .finish()
    }
}

impl<S: Reducer> Graph<S> {
    /// Starts a description by hand.
    pub fn builder(name: impl Into<String>) -> GraphBuilder<S> {
        GraphBuilder {
            name: name.into(),
            nodes: Vec::new(),
            edges: Vec::new(),
            entry: Vec::new(),
            signatures: Vec::new(),
            routers: Vec::new(),
            waits: Vec::new(),
            breakpoints: Vec::new(),
            handlers: Vec::new(),
            version: 1,
        }
    }

    /// The graph's version ([`GraphBuilder::version`], `#[graph(version = N)]`; 1 when not declared).
    /// A run keeps the version it started with (see `docs/versioning.md`).
    pub fn version(&self) -> u32 {
        self.inner.version
    }

    /// The graph's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Hex SHA-256 of the graph's structure (nodes, edges in index order, entry, node signatures, and
    /// the version from 2 on, which also prefixes it: `"v2:…"`). A run records it; resuming with a
    /// graph of another fingerprint is a typed `GraphChanged` error, unless the engine serves that
    /// version too (`EngineBuilder::serves`).
    pub fn fingerprint(&self) -> &str {
        &self.inner.fingerprint
    }

    /// The entry node's name.
    pub fn entry(&self) -> &str {
        &self.inner.nodes[self.inner.entry].name
    }

    /// Node names in declaration order.
    pub fn node_names(&self) -> impl Iterator<Item = &str> {
        self.inner.nodes.iter().map(|n| &*n.name)
    }

    /// The declared edges of `node`, by edge index (`None` for END).
    pub fn edges(&self, node: &str) -> Option<Vec<Option<&str>>> {
        let &i = self.inner.index.get(node)?;
        Some(
            self.inner.nodes[i]
                .edges
                .iter()
                .map(|t| match t {
                    Target::Node(j) => Some(&*self.inner.nodes[*j].name),
                    Target::End => None,
                })
                .collect(),
        )
    }

    pub(crate) fn node_index(&self, name: &str) -> Option<usize> {
        self.inner.index.get(name).copied()
    }

    /// Node `i` of the table.
    pub(crate) fn node(&self, i: usize) -> &NodeEntry<S> {
        &self.inner.nodes[i]
    }

    /// The entry node's index.
    pub(crate) fn entry_index(&self) -> usize {
        self.inner.entry
    }

    /// Whether node `b` can be reached from node `a` along edges (a node reaches itself).
    pub(crate) fn reaches(&self, a: usize, b: usize) -> bool {
        self.inner.reaches[a][b]
    }

    /// The graph's name, shared (the workers' metrics labels).
    pub(crate) fn name_arc(&self) -> &Arc<str> {
        &self.inner.name
    }

    /// What the graph's runs record (metrics).
    pub(crate) fn meters(&self) -> &Arc<Meters> {
        &self.inner.meters
    }

    /// The fingerprint, shared with the checkpoints that record it.
    pub(crate) fn fingerprint_arc(&self) -> &Arc<str> {
        &self.inner.fingerprint
    }

    /// The graph's structure as plain data: what a run's `RUN_STARTED` event records, so a tool that
    /// does not have the graph's code (graphctl) can still draw it.
    pub fn shape(&self) -> GraphShape {
        GraphShape {
            name: self.inner.name.to_string(),
            fingerprint: self.inner.fingerprint.to_string(),
            version: self.inner.version,
            entry: self.entry().to_owned(),
            nodes: self
                .inner
                .nodes
                .iter()
                .map(|n| NodeShape {
                    name: n.name.to_string(),
                    edges: n.edges.iter().map(|t| self.target_name(*t).to_owned()).collect(),
                    routed: n.router.is_some(),
                    wait_for: n.wait_for.iter().map(|w| self.inner.nodes[*w].name.to_string()).collect(),
                })
                .collect(),
        }
    }

    /// A Mermaid flowchart; edges are labelled with their index.
    pub fn mermaid(&self) -> String {
        self.shape().mermaid()
    }

    /// A Graphviz DOT digraph; edges are labelled with their index.
    pub fn dot(&self) -> String {
        self.shape().dot()
    }

    fn target_name(&self, t: Target) -> &str {
        match t {
            Target::Node(j) => &self.inner.nodes[j].name,
            Target::End => END,
        }
    }
}

/// A graph's structure as plain data ([`Graph::shape`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct GraphShape {
    /// The graph's name.
    pub name: String,
    /// Its fingerprint.
    pub fingerprint: String,
    /// Its version.
    #[serde(default = "first_version")]
    pub version: u32,
    /// The entry node.
    pub entry: String,
    /// Its nodes, in declaration order.
    pub nodes: Vec<NodeShape>,
}

fn first_version() -> u32 {
    1
}

/// One node of a [`GraphShape`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct NodeShape {
    /// The node's name.
    pub name: String,
    /// Its declared edges' targets, by edge index ([`END`] for the end).
    pub edges: Vec<String>,
    /// A router chooses its edge.
    #[serde(default)]
    pub routed: bool,
    /// The predecessors it waits for, all of them (empty: none).
    #[serde(default)]
    pub wait_for: Vec<String>,
}

impl GraphShape {
    /// A Mermaid flowchart; edges are labelled with their index.
    pub fn mermaid(&self) -> String {
        let mut s = String::from("flowchart TD\n    __start__([START])\n    __end__([END])\n");
        for n in &self.nodes {
            let _ = writeln!(s, "    {0}[{0}]", n.name);
        }
        let _ = writeln!(s, "    __start__ --> {}", self.entry);
        for n in &self.nodes {
            for (i, to) in n.edges.iter().enumerate() {
                let _ = writeln!(s, "    {} -->|{i}| {to}", n.name);
            }
        }
        s
    }

    /// A Graphviz DOT digraph; edges are labelled with their index.
    pub fn dot(&self) -> String {
        let mut s = format!(
            "digraph \"{}\" {{\n    \"__start__\" [shape=circle];\n    \"__end__\" [shape=doublecircle];\n",
            self.name
        );
        let _ = writeln!(s, "    \"__start__\" -> \"{}\";", self.entry);
        for n in &self.nodes {
            for (i, to) in n.edges.iter().enumerate() {
                let _ = writeln!(s, "    \"{}\" -> \"{to}\" [label=\"{i}\"];", n.name);
            }
        }
        s.push_str("}\n");
        s
    }
}

/// Builds a [`Graph`] by hand. Edge indices are the order of `edge` calls per source node.
///
/// # Examples
///
/// ```
/// use graph_runtime::{Graph, Route, END};
/// let g = Graph::<()>::builder("hello")
///     .node("a", |_state, _ctx| Box::pin(async { Ok(((), Route::Declared)) }))
///     .entry("a")
///     .edge("a", END)
///     .build()
///     .unwrap();
/// assert_eq!(g.entry(), "a");
/// ```
pub struct GraphBuilder<S: Reducer> {
    name: String,
    nodes: Vec<(String, Arc<dyn Node<S>>, NodePolicy)>,
    edges: Vec<(String, String)>,
    entry: Vec<String>,
    signatures: Vec<(String, String)>,
    routers: Vec<(String, Router<S>)>,
    waits: Vec<(String, Vec<String>)>,
    /// `(node, before)`: a breakpoint before (`true`) or after the node's steps.
    breakpoints: Vec<(String, bool)>,
    /// `(node, handler)`: error handlers.
    handlers: Vec<(String, String)>,
    version: u32,
}

impl<S: Reducer> GraphBuilder<S> {
    /// Declares the graph's version (default 1; 0 reads as 1). Runs record the version they start
    /// with (in the fingerprint, `"v<N>:…"` from 2 on) and keep it; an engine serves older versions
    /// with `EngineBuilder::serves` and moves runs between them with migrations (`docs/versioning.md`).
    pub fn version(mut self, version: u32) -> Self {
        self.version = version.max(1);
        self
    }

    /// Adds a node written as a closure or fn `|state, ctx| Box::pin(async move { ... })`, with the
    /// engine's default policy.
    pub fn node<F>(self, name: impl Into<String>, f: F) -> Self
    where
        F: for<'a> Fn(&'a S, &'a mut Ctx) -> BoxFuture<'a, NodeResult<S, Route>> + Send + Sync + 'static,
    {
        self.add_node(name, f, NodePolicy::default())
    }

    /// [`GraphBuilder::node`] with the node's own policy.
    pub fn node_with<F>(self, name: impl Into<String>, f: F, policy: NodePolicy) -> Self
    where
        F: for<'a> Fn(&'a S, &'a mut Ctx) -> BoxFuture<'a, NodeResult<S, Route>> + Send + Sync + 'static,
    {
        self.add_node(name, f, policy)
    }

    /// Adds any [`Node`] implementation (what `#[graph]` generates) with a policy.
    pub fn add_node(mut self, name: impl Into<String>, handler: impl Node<S>, policy: NodePolicy) -> Self {
        self.nodes.push((name.into(), Arc::new(handler), policy));
        self
    }

    /// Adds the next edge of `from` (its index is the number of edges `from` already has) to `to`, a node
    /// name or [`END`].
    pub fn edge(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.edges.push((from.into(), to.into()));
        self
    }

    /// Marks the entry node.
    pub fn entry(mut self, name: impl Into<String>) -> Self {
        self.entry.push(name.into());
        self
    }

    /// Gives `node` a router: after the node's step, `router` reads the state with the node's own update
    /// applied (as a LangGraph conditional edge does) and returns the index of the edge to follow. The
    /// node's own route is then ignored (write it as a static node: `Route::Declared`).
    ///
    /// # Examples
    ///
    /// ```
    /// use graph_runtime::prelude::*;
    ///
    /// #[reducer]
    /// #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// struct Count {
    ///     #[reduce(sum)]
    ///     n: u32,
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), graph_runtime::Error> {
    /// // Counts to 5: the router sees the count after this step's increment.
    /// let g = Graph::<Count>::builder("count")
    ///     .node("inc", |_s, _c| Box::pin(async { Ok((CountDelta::default().n(1), Route::Declared)) }))
    ///     .router("inc", |s: &Count| if s.n < 5 { 0 } else { 1 })
    ///     .entry("inc")
    ///     .edge("inc", "inc")
    ///     .edge("inc", END)
    ///     .build()?;
    /// let out = Engine::builder(g).build().run("c", Count::default()).await?;
    /// assert_eq!(out.state.n, 5);
    /// # Ok(())
    /// # }
    /// ```
    pub fn router(
        mut self,
        node: impl Into<String>,
        router: impl Fn(&S) -> u32 + Send + Sync + 'static,
    ) -> Self {
        self.routers.push((node.into(), Arc::new(router)));
        self
    }

    /// Makes `node` a wait-for-all join: it runs once every one of `predecessors` has routed to it (in
    /// any steps), or can no longer do so; each must have an edge to `node`. See `docs/guarantees.md`.
    pub fn wait_for<I: Into<String>>(
        mut self,
        node: impl Into<String>,
        predecessors: impl IntoIterator<Item = I>,
    ) -> Self {
        self.waits.push((node.into(), predecessors.into_iter().map(Into::into).collect()));
        self
    }

    /// A breakpoint before `node`, as LangGraph's `interrupt_before`: the run stops with
    /// `RunStatus::Interrupted` before any step that would run it starts (no item of that step runs);
    /// `Engine::resume` continues. Breakpoints are not part of the graph's fingerprint: adding or removing
    /// one does not stop stored runs from resuming.
    pub fn interrupt_before(mut self, node: impl Into<String>) -> Self {
        self.breakpoints.push((node.into(), true));
        self
    }

    /// A breakpoint after `node`, as LangGraph's `interrupt_after`: the run stops with
    /// `RunStatus::Interrupted` once a step that ran it is committed; `Engine::resume` continues.
    pub fn interrupt_after(mut self, node: impl Into<String>) -> Self {
        self.breakpoints.push((node.into(), false));
        self
    }

    /// Gives `node` an error handler, as LangGraph's `error_handler` or a saga's compensation step: when
    /// `node` fails after its retries (an error or a timeout; not a panic, which is a bug), its step
    /// does not fail; instead `handler` runs in the next step with the failure as its input
    /// ([`crate::node::NodeFailure`], read with `ctx.input()`), and routes like any node. The failed
    /// item's delta is empty. Without a handler a failure fails the run (its siblings' work kept).
    /// The handler is part of the graph's structure (and fingerprint); `node` needs no edge to it.
    ///
    /// # Examples
    ///
    /// ```
    /// use graph_runtime::prelude::*;
    /// use graph_runtime::node::NodeFailure;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), graph_runtime::Error> {
    /// let g = Graph::<()>::builder("charge")
    ///     .node_with("charge", |_s, _c| Box::pin(async { Err(NodeError::fatal("card declined")) }),
    ///         NodePolicy::default())
    ///     .node("refund", |_s, ctx| Box::pin(async move {
    ///         let failure: NodeFailure = ctx.input()?.expect("the failure");
    ///         assert_eq!(failure.error, "card declined");
    ///         Ok(((), Route::Declared))
    ///     }))
    ///     .on_error("charge", "refund")
    ///     .entry("charge")
    ///     .edge("charge", END)
    ///     .edge("refund", END)
    ///     .build()?;
    /// let out = Engine::builder(g).build().run("r", ()).await?;
    /// assert!(out.is_completed());
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_error(mut self, node: impl Into<String>, handler: impl Into<String>) -> Self {
        self.handlers.push((node.into(), handler.into()));
        self
    }

    /// Records a node's signature (the macros pass the function's tokens) so that the fingerprint changes
    /// when it does.
    pub fn signature(mut self, node: impl Into<String>, signature: impl Into<String>) -> Self {
        self.signatures.push((node.into(), signature.into()));
        self
    }

    /// Validates and freezes the description.
    ///
    /// # Errors
    ///
    /// The first rule broken, checked in this order: duplicate or reserved node names, entry count,
    /// unknown names in edges, nodes unreachable from the entry, nodes from which END is unreachable.
    pub fn build(self) -> Result<Graph<S>, GraphError> {
        let mut index: BTreeMap<Arc<str>, usize> = BTreeMap::new();
        let mut nodes: Vec<NodeEntry<S>> = Vec::with_capacity(self.nodes.len());
        for (name, handler, policy) in self.nodes {
            if name == END {
                return Err(GraphError::ReservedName { name });
            }
            let name: Arc<str> = name.into();
            if index.insert(name.clone(), nodes.len()).is_some() {
                return Err(GraphError::DuplicateNode { name: name.to_string() });
            }
            nodes.push(NodeEntry {
                name,
                edges: Vec::new(),
                handler,
                policy,
                router: None,
                wait_for: Vec::new(),
                interrupt_before: false,
                interrupt_after: false,
                on_error: None,
            });
        }
        let names: Vec<&str> = nodes.iter().map(|n| &*n.name).collect();
        let lookup = |name: &str, place: String| -> Result<usize, GraphError> {
            index.get(name).copied().ok_or_else(|| GraphError::UnknownNode {
                name: name.to_owned(),
                place,
                suggestion: graph_core::suggest::closest(name, names.iter().copied()).map(str::to_owned),
            })
        };
        let entry = match self.entry.as_slice() {
            [] => return Err(GraphError::NoEntry),
            [one] => lookup(one, "the entry".into())?,
            [first, second, ..] => {
                return Err(GraphError::TwoEntries { first: first.clone(), second: second.clone() });
            }
        };
        let mut adjacency: Vec<Vec<Target>> = vec![Vec::new(); nodes.len()];
        for (from, to) in &self.edges {
            let f = lookup(from, format!("an edge `{from}` -> `{to}`"))?;
            let t = if to == END {
                Target::End
            } else {
                Target::Node(lookup(to, format!("an edge `{from}` -> `{to}`"))?)
            };
            adjacency[f].push(t);
        }
        let mut handlers = Vec::with_capacity(self.handlers.len());
        for (node, handler) in &self.handlers {
            let n = lookup(node, format!("the `on_error` of `{node}`"))?;
            let h = lookup(handler, format!("the `on_error` of `{node}`"))?;
            if handlers.iter().any(|(m, _)| *m == n) {
                return Err(GraphError::TwoHandlers { node: node.clone() });
            }
            handlers.push((n, h));
        }
        // What the structural rules see: the declared edges and the error handlers' edges.
        let mut checked = adjacency.clone();
        for (n, h) in &handlers {
            checked[*n].push(Target::Node(*h));
        }
        // The first finding of each rule, as the macros report it first.
        if let Some(group) = graph_core::algo::unreachable(entry, &checked).first() {
            return Err(GraphError::Unreachable {
                node: names[group.nodes[0]].to_owned(),
                entry: names[entry].to_owned(),
            });
        }
        if let Some(trap) = graph_core::algo::traps(&checked).first() {
            return Err(GraphError::NoWayToEnd { node: names[trap.nodes[0]].to_owned() });
        }
        let mut routers = Vec::with_capacity(self.routers.len());
        for (node, router) in self.routers {
            routers.push((lookup(&node, format!("the router of `{node}`"))?, router));
        }
        let mut waits = Vec::with_capacity(self.waits.len());
        for (node, preds) in &self.waits {
            let n = lookup(node, format!("a `wait_for` of `{node}`"))?;
            let mut ps = Vec::with_capacity(preds.len());
            for p in preds {
                let i = lookup(p, format!("the `wait_for` of `{node}`"))?;
                if !adjacency[i].contains(&Target::Node(n)) {
                    return Err(GraphError::WaitWithoutEdge { node: node.clone(), predecessor: p.clone() });
                }
                if !ps.contains(&i) {
                    ps.push(i);
                }
            }
            waits.push((n, ps));
        }
        let mut breakpoints = Vec::with_capacity(self.breakpoints.len());
        for (node, before) in &self.breakpoints {
            breakpoints.push((lookup(node, format!("a breakpoint on `{node}`"))?, *before));
        }
        let handler_sigs: Vec<(&str, String)> =
            handlers.iter().map(|(n, h)| (names[*n], format!("on_error {}", names[*h]))).collect();
        let signatures: Vec<(&str, &str)> = self
            .signatures
            .iter()
            .map(|(n, sig)| (n.as_str(), sig.as_str()))
            .chain(handler_sigs.iter().map(|(n, sig)| (*n, sig.as_str())))
            .collect();
        let routed: Vec<usize> = routers.iter().map(|(n, _)| *n).collect();
        let shape = graph_core::Shape {
            names: &names,
            adjacency: &adjacency,
            entry,
            signatures: &signatures,
            routed: &routed,
            waits: &waits,
            version: self.version,
        };
        let fingerprint = graph_core::fingerprint(&shape);
        let reaches = graph_core::algo::reachability(&checked);
        for (node, edges) in nodes.iter_mut().zip(adjacency) {
            node.edges = edges;
        }
        for (n, router) in routers {
            nodes[n].router = Some(router);
        }
        for (n, preds) in waits {
            nodes[n].wait_for = preds;
        }
        for (n, h) in handlers {
            nodes[n].on_error = Some(h);
        }
        for (n, before) in breakpoints {
            if before {
                nodes[n].interrupt_before = true;
            } else {
                nodes[n].interrupt_after = true;
            }
        }
        Ok(Graph {
            inner: Arc::new({
                let name: Arc<str> = self.name.into();
                let meters =
                    Arc::new(Meters::new(&name, &nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>()));
                GraphInner {
                    name,
                    nodes,
                    index,
                    entry,
                    fingerprint: fingerprint.into(),
                    version: self.version.max(1),
                    reaches,
                    meters,
                }
            }),
        })
    }
}
