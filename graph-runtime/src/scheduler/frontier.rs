//! Routes of step N → the frontier of step N+1.
//!
//! Items of step N are processed in ascending order key, their route slots in ascending slot, so the
//! first route seen into a node is the lowest-ordered one. Plain routes into one node make one
//! activation (a join) that takes the lowest contributor's key and path; routes with a branch input make
//! one activation each.

use std::collections::BTreeSet;

use crate::error::Error;
use crate::graph::{END, Graph, Target};
use crate::keys::OrderKey;
use crate::node::Route;
use crate::state::Reducer;
use crate::store::WorkItem;

/// Builds the next frontier and the graph index of each of its nodes. `done[rank] = (node index, route)`
/// for every item of the step, in order.
pub(crate) fn next_frontier<S: Reducer>(
    graph: &Graph<S>,
    run: &str,
    step: u64,
    items: &[WorkItem],
    done: &[(usize, Route)],
) -> Result<(Vec<WorkItem>, Vec<usize>), Error> {
    let mut next = Next {
        graph,
        joined: BTreeSet::new(),
        items: Vec::with_capacity(items.len()),
        nodes: Vec::with_capacity(items.len()),
    };
    for (rank, (item, (node, route))) in items.iter().zip(done).enumerate() {
        let entry = graph.node(*node);
        let edge_target = |edge: u32| -> Result<Target, Error> {
            entry.edges().get(edge as usize).copied().ok_or_else(|| Error::UndeclaredEdge {
                run: run.to_owned(),
                step,
                node: entry.name().to_string(),
                edge,
                declared: entry.edges().len(),
            })
        };
        let rank = u32::try_from(rank).expect("a step holds fewer than 2^32 items");
        let routes = match route {
            Route::Declared => {
                for (e, t) in entry.edges().iter().enumerate() {
                    next.add(rank, item, e as u32, *t, None);
                }
                entry.edges().len()
            }
            Route::Goto(e) => {
                next.add(rank, item, *e, edge_target(*e)?, None);
                1
            }
            Route::Fork(branches) => {
                for (k, b) in branches.iter().enumerate() {
                    next.add(rank, item, k as u32, edge_target(b.edge)?, b.input.as_ref());
                }
                branches.len()
            }
            Route::End => 1,
        };
        if routes == 0 {
            return Err(Error::NoProgress { run: run.to_owned(), step, node: entry.name().to_string() });
        }
    }
    // Items are visited in rank order and their slots in ascending order, so the frontier is sorted by
    // order key as built (key = rank << 32 | slot).
    debug_assert!(
        next.items.windows(2).all(|w| w[0].order_key < w[1].order_key),
        "order keys are unique and ascending in a step"
    );
    debug_assert!(next.items.iter().all(|w| &*w.node != END));
    Ok((next.items, next.nodes))
}

/// The next frontier as it is built.
struct Next<'g, S: Reducer> {
    graph: &'g Graph<S>,
    /// Nodes that already have a plain (join) activation.
    joined: BTreeSet<usize>,
    items: Vec<WorkItem>,
    nodes: Vec<usize>,
}

impl<S: Reducer> Next<'_, S> {
    /// The route of item `rank` of the step through `slot` to `target`: a new activation, or (a plain
    /// route into a node that already has one) a join into it.
    fn add(
        &mut self,
        rank: u32,
        from: &WorkItem,
        slot: u32,
        target: Target,
        input: Option<&serde_json::Value>,
    ) {
        let Target::Node(to) = target else { return };
        if input.is_none() && !self.joined.insert(to) {
            return; // joined into the lower-ordered activation already queued
        }
        self.items.push(WorkItem {
            node: self.graph.node(to).name().clone(),
            order_key: OrderKey::new(rank, slot),
            path: from.path.child(slot),
            input: input.cloned(),
        });
        self.nodes.push(to);
    }
}
