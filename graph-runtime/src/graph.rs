//! The graph description the engine executes: a node table, per-node edge lists whose positions are the
//! edge indices, an entry, and a fingerprint.
//!
//! `#[graph]` generates this description at compile time; [`GraphBuilder`] builds the same thing by hand
//! and checks the same rules at `build()`.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;
use std::sync::Arc;

use crate::ctx::Ctx;
use crate::error::GraphError;
use crate::keys::{hex, sha256_parts};
use crate::node::{BoxFuture, Node, NodeResult, Route};
use crate::policy::NodePolicy;
use crate::state::Reducer;

/// The reserved name of the terminal pseudo-node.
pub const END: &str = "__end__";

/// Where an edge leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// A node, by index in the node table.
    Node(usize),
    /// The end of the path.
    End,
}

pub(crate) struct NodeEntry<S: Reducer> {
    pub(crate) name: Arc<str>,
    pub(crate) edges: Vec<Target>,
    pub(crate) handler: Arc<dyn Node<S>>,
    pub(crate) policy: NodePolicy,
}

/// A validated, immutable graph over state `S`. Cheap to clone.
pub struct Graph<S: Reducer> {
    pub(crate) inner: Arc<GraphInner<S>>,
}

pub(crate) struct GraphInner<S: Reducer> {
    pub(crate) name: String,
    pub(crate) nodes: Vec<NodeEntry<S>>,
    pub(crate) index: BTreeMap<Arc<str>, usize>,
    pub(crate) entry: usize,
    pub(crate) fingerprint: Arc<str>,
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
        }
    }

    /// The graph's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Hex SHA-256 of the graph's structure (nodes, edges in index order, entry, node signatures). A run
    /// records it; resuming with a different graph is a typed `GraphChanged` error.
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

    /// A Mermaid flowchart; edges are labelled with their index.
    pub fn mermaid(&self) -> String {
        let mut s = String::from("flowchart TD\n    __start__([START])\n    __end__([END])\n");
        for n in &self.inner.nodes {
            let _ = writeln!(s, "    {0}[{0}]", n.name);
        }
        let _ = writeln!(s, "    __start__ --> {}", self.entry());
        for n in &self.inner.nodes {
            for (i, t) in n.edges.iter().enumerate() {
                let to = self.target_name(*t);
                let _ = writeln!(s, "    {} -->|{i}| {to}", n.name);
            }
        }
        s
    }

    /// A Graphviz DOT digraph; edges are labelled with their index.
    pub fn dot(&self) -> String {
        let mut s = format!(
            "digraph \"{}\" {{\n    \"__start__\" [shape=circle];\n    \"__end__\" [shape=doublecircle];\n",
            self.inner.name
        );
        let _ = writeln!(s, "    \"__start__\" -> \"{}\";", self.entry());
        for n in &self.inner.nodes {
            for (i, t) in n.edges.iter().enumerate() {
                let _ = writeln!(s, "    \"{}\" -> \"{}\" [label=\"{i}\"];", n.name, self.target_name(*t));
            }
        }
        s.push_str("}\n");
        s
    }

    fn target_name(&self, t: Target) -> &str {
        match t {
            Target::Node(j) => &self.inner.nodes[j].name,
            Target::End => END,
        }
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
}

impl<S: Reducer> GraphBuilder<S> {
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
            nodes.push(NodeEntry { name, edges: Vec::new(), handler, policy });
        }
        let names: Vec<&str> = nodes.iter().map(|n| &*n.name).collect();
        let lookup = |name: &str, place: String| -> Result<usize, GraphError> {
            index.get(name).copied().ok_or_else(|| GraphError::UnknownNode {
                name: name.to_owned(),
                place,
                suggestion: closest(name, &names),
            })
        };
        let entry = match self.entry.as_slice() {
            [] => return Err(GraphError::NoEntry),
            [one] => lookup(one, "the entry".into())?,
            [first, second, ..] => {
                return Err(GraphError::TwoEntries { first: first.clone(), second: second.clone() });
            }
        };
        let mut resolved = Vec::with_capacity(self.edges.len());
        for (from, to) in &self.edges {
            let f = lookup(from, format!("an edge `{from}` -> `{to}`"))?;
            let t = if to == END {
                Target::End
            } else {
                Target::Node(lookup(to, format!("an edge `{from}` -> `{to}`"))?)
            };
            resolved.push((f, t));
        }
        for (f, t) in resolved {
            nodes[f].edges.push(t);
        }
        let adjacency: Vec<Vec<Target>> = nodes.iter().map(|n| n.edges.clone()).collect();
        if let Some(n) = unreachable_from(entry, &adjacency).first() {
            return Err(GraphError::Unreachable {
                node: nodes[*n].name.to_string(),
                entry: nodes[entry].name.to_string(),
            });
        }
        if let Some(n) = cannot_reach_end(&adjacency).first() {
            return Err(GraphError::NoWayToEnd { node: nodes[*n].name.to_string() });
        }
        let fingerprint = fingerprint(&nodes, entry, &self.signatures);
        Ok(Graph {
            inner: Arc::new(GraphInner {
                name: self.name,
                nodes,
                index,
                entry,
                fingerprint: fingerprint.into(),
            }),
        })
    }
}

/// Nodes not reachable from `entry`, in declaration order.
pub(crate) fn unreachable_from(entry: usize, adjacency: &[Vec<Target>]) -> Vec<usize> {
    let mut seen = vec![false; adjacency.len()];
    let mut queue = VecDeque::from([entry]);
    seen[entry] = true;
    while let Some(n) = queue.pop_front() {
        for t in &adjacency[n] {
            if let Target::Node(m) = *t
                && !seen[m]
            {
                seen[m] = true;
                queue.push_back(m);
            }
        }
    }
    (0..adjacency.len()).filter(|&n| !seen[n]).collect()
}

/// Nodes from which no path reaches END, in declaration order (reverse reachability from END).
pub(crate) fn cannot_reach_end(adjacency: &[Vec<Target>]) -> Vec<usize> {
    let mut reverse: Vec<Vec<usize>> = vec![Vec::new(); adjacency.len()];
    let mut reaches = vec![false; adjacency.len()];
    let mut queue = VecDeque::new();
    for (n, edges) in adjacency.iter().enumerate() {
        for t in edges {
            match *t {
                Target::Node(m) => reverse[m].push(n),
                Target::End => {
                    if !reaches[n] {
                        reaches[n] = true;
                        queue.push_back(n);
                    }
                }
            }
        }
    }
    while let Some(n) = queue.pop_front() {
        for &p in &reverse[n] {
            if !reaches[p] {
                reaches[p] = true;
                queue.push_back(p);
            }
        }
    }
    (0..adjacency.len()).filter(|&n| !reaches[n]).collect()
}

fn fingerprint<S: Reducer>(nodes: &[NodeEntry<S>], entry: usize, signatures: &[(String, String)]) -> String {
    let mut text = format!("graph-runtime/fingerprint/v1\nentry {}\n", nodes[entry].name);
    for n in nodes {
        let _ = write!(text, "node {}", n.name);
        for t in &n.edges {
            match t {
                Target::Node(j) => {
                    let _ = write!(text, " -> {}", nodes[*j].name);
                }
                Target::End => text.push_str(" -> END"),
            }
        }
        text.push('\n');
    }
    let mut sigs: Vec<_> = signatures.iter().collect();
    sigs.sort();
    for (node, sig) in sigs {
        let _ = writeln!(text, "sig {node} {sig}");
    }
    hex(&sha256_parts(&[text.as_bytes()]))
}

/// The closest name by edit distance, if close enough to be a plausible typo.
pub fn closest(name: &str, candidates: &[&str]) -> Option<String> {
    candidates
        .iter()
        .map(|c| (levenshtein(name, c), *c))
        .filter(|(d, c)| *d <= (c.chars().count().max(name.chars().count()) / 3).max(1))
        .min()
        .map(|(_, c)| c.to_owned())
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: usize) -> Target {
        Target::Node(n)
    }

    #[test]
    fn reachability_and_exit_analysis() {
        // 0 -> 1 -> 2 -> END; 1 -> 3 -> 3 (loop without exit); 4 isolated
        let adj = vec![vec![t(1)], vec![t(2), t(3)], vec![Target::End], vec![t(3)], vec![Target::End]];
        assert_eq!(unreachable_from(0, &adj), [4]);
        assert_eq!(cannot_reach_end(&adj), [3]);
        // a cycle with an exit is fine
        let adj = vec![vec![t(1)], vec![t(0), Target::End]];
        assert!(cannot_reach_end(&adj).is_empty());
    }

    #[test]
    fn analysis_is_independent_of_declaration_order() {
        // The same graph under every permutation of node indices gives the same verdicts by name.
        let names = ["a", "b", "c", "d"];
        let edges = [("a", "b"), ("b", "c"), ("c", "b"), ("b", "END"), ("d", "d")];
        let perms = permutations(4);
        for p in perms {
            let pos = |n: &str| p.iter().position(|&i| names[i] == n).unwrap();
            let mut adj = vec![Vec::new(); 4];
            for (f, to) in edges {
                adj[pos(f)].push(if to == "END" { Target::End } else { t(pos(to)) });
            }
            let un: Vec<&str> = unreachable_from(pos("a"), &adj).into_iter().map(|i| names[p[i]]).collect();
            let ne: Vec<&str> = cannot_reach_end(&adj).into_iter().map(|i| names[p[i]]).collect();
            assert_eq!(un, ["d"]);
            assert_eq!(ne, ["d"]);
        }
    }

    fn permutations(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![vec![]];
        }
        let mut out = Vec::new();
        for p in permutations(n - 1) {
            for i in 0..=p.len() {
                let mut q = p.clone();
                q.insert(i, n - 1);
                out.push(q);
            }
        }
        out
    }

    #[test]
    fn suggestions() {
        assert_eq!(closest("sumarize", &["summarize", "plan"]).as_deref(), Some("summarize"));
        assert_eq!(closest("zzz", &["summarize", "plan"]), None);
    }
}
