//! Routes of step N → the frontier of step N+1.
//!
//! Items of step N are processed in ascending order key, their route slots in ascending slot, so the
//! first route seen into a node is the lowest-ordered one. Plain routes into one node make one
//! activation (a join) that takes the lowest contributor's key and path; routes with a branch input make
//! one activation each.
//!
//! A wait-for-all node (`wait_for = [...]`) is not activated by a plain route from one of its listed
//! predecessors: the route is recorded as an arrival, across steps, in the checkpoint's waiting joins.
//! The node is activated once every listed predecessor has arrived — keyed and ordered by the route that
//! completed it — or once the missing ones can no longer arrive: no item of the next step, and no other
//! waiting join, can reach them. Joins activated that way come after every routed item of the step
//! (ranks past the step's own), in node order. If the next step would otherwise be empty, every waiting
//! join is activated. Routes into it from nodes it does not list, and forked branches with an input,
//! activate it as usual.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::Error;
use crate::graph::{END, Graph, Target};
use crate::keys::{OrderKey, PathId};
use crate::node::Route;
use crate::state::Reducer;
use crate::store::{WaitingJoin, WorkItem};

/// The next step: its items (sorted by order key), their nodes' graph indices, and the joins still
/// waiting.
pub(crate) struct NextStep {
    pub(crate) items: Vec<WorkItem>,
    pub(crate) nodes: Vec<usize>,
    pub(crate) waiting: Vec<WaitingJoin>,
}

/// Builds the next step. `nodes[rank]` and `routes[rank]` are the node index and the route of every item
/// of the step, in order; `waiting` are the joins waiting before the step.
pub(crate) fn next_frontier<S: Reducer>(
    graph: &Graph<S>,
    run: &str,
    step: u64,
    items: &[WorkItem],
    nodes: &[usize],
    routes: &[Route],
    waiting: &[WaitingJoin],
) -> Result<NextStep, Error> {
    let mut next = Next::new(graph, items.len(), waiting)
        .map_err(|detail| Error::Store(crate::error::StoreError::corrupted_record(run, step, detail)))?;
    for (rank, ((item, node), route)) in items.iter().zip(nodes).zip(routes).enumerate() {
        let entry = graph.node(*node);
        let edge_target = |edge: u32| -> Result<Target, Error> {
            if edge == crate::graph::ERROR_EDGE
                && let Some(handler) = entry.on_error()
            {
                return Ok(Target::Node(handler));
            }
            entry.edges().get(edge as usize).copied().ok_or_else(|| Error::UndeclaredEdge {
                run: run.to_owned(),
                step,
                node: entry.name().to_string(),
                edge,
                declared: entry.edges().len(),
            })
        };
        let from = From {
            rank: u32::try_from(rank).expect("a step holds fewer than 2^32 items"),
            node: *node,
            item,
        };
        let routes = match route {
            Route::Declared => {
                for (e, t) in entry.edges().iter().enumerate() {
                    next.add(&from, e as u32, *t, None);
                }
                entry.edges().len()
            }
            Route::Goto(e) => {
                next.add(&from, *e, edge_target(*e)?, None);
                1
            }
            Route::Fork(branches) => {
                for (k, b) in branches.iter().enumerate() {
                    next.add(&from, k as u32, edge_target(b.edge)?, b.input.as_ref());
                }
                branches.len()
            }
            Route::End => 1,
        };
        if routes == 0 {
            return Err(Error::NoProgress { run: run.to_owned(), step, node: entry.name().to_string() });
        }
    }
    Ok(next.finish())
}

/// The item a route comes from.
struct From<'a> {
    rank: u32,
    node: usize,
    item: &'a WorkItem,
}

/// A join waiting for predecessors, as the step is built.
struct Pending {
    arrived: BTreeSet<usize>,
    path: PathId,
    /// The key of its latest arrival in this step, if any.
    key: Option<OrderKey>,
}

/// The next step as it is built.
struct Next<'g, S: Reducer> {
    graph: &'g Graph<S>,
    /// The number of items of the step being routed: ranks at and past it are free.
    ranks: usize,
    /// Nodes that already have a plain (join) activation.
    joined: NodeSet,
    items: Vec<WorkItem>,
    nodes: Vec<usize>,
    pending: BTreeMap<usize, Pending>,
}

impl<'g, S: Reducer> Next<'g, S> {
    fn new(graph: &'g Graph<S>, ranks: usize, waiting: &[WaitingJoin]) -> Result<Self, String> {
        let index = |name: &str| {
            graph
                .node_index(name)
                .ok_or_else(|| format!("a waiting join names node `{name}`, which the graph does not have"))
        };
        let mut pending = BTreeMap::new();
        for w in waiting {
            let arrived = w.arrived.iter().map(|a| index(a)).collect::<Result<_, _>>()?;
            pending.insert(index(&w.node)?, Pending { arrived, path: w.path.clone(), key: None });
        }
        let capacity = ranks + pending.len();
        Ok(Next {
            graph,
            ranks,
            joined: NodeSet::default(),
            items: Vec::with_capacity(capacity),
            nodes: Vec::with_capacity(capacity),
            pending,
        })
    }

    /// The route of `from` through `slot` to `target`: a new activation, a join into one already queued,
    /// or an arrival at a waiting join.
    fn add(&mut self, from: &From<'_>, slot: u32, target: Target, input: Option<&serde_json::Value>) {
        let Target::Node(to) = target else { return };
        let key = OrderKey::new(from.rank, slot);
        if input.is_none() && self.graph.node(to).wait_for().contains(&from.node) {
            let path = from.item.path.child(slot);
            let p = self.pending.entry(to).or_insert_with(|| Pending {
                arrived: BTreeSet::new(),
                path,
                key: None,
            });
            p.arrived.insert(from.node);
            p.key = Some(key);
            return;
        }
        if input.is_none() && !self.joined.insert(to) {
            return; // joined into the lower-ordered activation already queued
        }
        self.push(to, key, from.item.path.child(slot), input.cloned());
    }

    fn push(&mut self, node: usize, order_key: OrderKey, path: PathId, input: Option<serde_json::Value>) {
        self.items.push(WorkItem {
            node: self.graph.node(node).name().clone(),
            order_key,
            path,
            input,
            origin_step: None,
        });
        self.nodes.push(node);
    }

    /// Activates the joins that are complete or can wait no longer, and sorts the step.
    fn finish(mut self) -> NextStep {
        let mut forced = 0u32;
        loop {
            let due: Vec<usize> = self.pending.keys().copied().filter(|&n| self.due(n)).collect();
            let stuck = due.is_empty() && self.items.is_empty() && !self.pending.is_empty();
            let fire: Vec<usize> = if stuck { self.pending.keys().copied().collect() } else { due };
            if fire.is_empty() {
                break;
            }
            for node in fire {
                let p = self.pending.remove(&node).expect("listed above");
                if !self.joined.insert(node) {
                    continue; // a plain route from an unlisted node activates it already: one activation
                }
                let key = p.key.unwrap_or_else(|| {
                    forced += 1;
                    OrderKey::new((self.ranks as u32).saturating_add(forced - 1), 0)
                });
                self.push(node, key, p.path, None);
            }
        }
        // Items were pushed in rank order, then joins keyed by their last arrival or past every rank: in
        // order already unless a join's key falls between the routed items'.
        if !self.items.is_sorted_by_key(|w| w.order_key) {
            let mut pairs: Vec<(WorkItem, usize)> = self.items.drain(..).zip(self.nodes.drain(..)).collect();
            pairs.sort_by_key(|(w, _)| w.order_key);
            (self.items, self.nodes) = pairs.into_iter().unzip();
        }
        let (items, nodes) = (self.items, self.nodes);
        debug_assert!(
            items.windows(2).all(|w| w[0].order_key < w[1].order_key),
            "order keys are unique and ascending in a step"
        );
        debug_assert!(items.iter().all(|w| &*w.node != END));
        let graph = self.graph;
        let waiting = self
            .pending
            .into_iter()
            .map(|(node, p)| WaitingJoin {
                node: graph.node(node).name().clone(),
                arrived: p.arrived.into_iter().map(|a| graph.node(a).name().clone()).collect(),
                path: p.path,
            })
            .collect();
        NextStep { items, nodes, waiting }
    }

    /// A waiting join is due when every predecessor it lists has arrived, or when none of the missing
    /// ones can be reached from the next step's items or from another waiting join.
    fn due(&self, node: usize) -> bool {
        let p = &self.pending[&node];
        let mut missing =
            self.graph.node(node).wait_for().iter().filter(|q| !p.arrived.contains(q)).peekable();
        if missing.peek().is_none() {
            return true;
        }
        let sources: Vec<usize> =
            self.nodes.iter().copied().chain(self.pending.keys().copied().filter(|&n| n != node)).collect();
        missing.all(|&q| sources.iter().all(|&s| !self.graph.reaches(s, q)))
    }
}

/// A set of node indices: a bit each for the first 128, a tree past them (a step's joins are looked up
/// once a route, and most graphs have fewer nodes than that: no allocation a step).
#[derive(Default)]
struct NodeSet {
    low: u128,
    high: BTreeSet<usize>,
}

impl NodeSet {
    /// Adds `node`; `false` when it was in the set.
    fn insert(&mut self, node: usize) -> bool {
        match u32::try_from(node).ok().and_then(|n| 1u128.checked_shl(n)) {
            Some(bit) => {
                let new = self.low & bit == 0;
                self.low |= bit;
                new
            }
            None => self.high.insert(node),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::NodeSet;

    #[test]
    fn a_node_set_holds_each_index_once_below_and_past_its_bits() {
        let mut set = NodeSet::default();
        for n in [0, 5, 127, 128, 129, 4096, usize::MAX] {
            assert!(set.insert(n), "{n} is new");
            assert!(!set.insert(n), "{n} is in the set");
        }
        assert!(set.insert(6));
    }
}
