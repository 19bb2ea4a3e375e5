//! Routes of step N → the frontier of step N+1.
//!
//! Items of step N are processed in ascending order key, their route slots in ascending slot, so the
//! first route seen into a node is the lowest-ordered one. Plain routes into one node make one
//! activation (a join) that takes the lowest contributor's key and path; routes with a branch input make
//! one activation each.

use std::collections::BTreeMap;

use crate::error::Error;
use crate::graph::{END, Graph, Target};
use crate::keys::OrderKey;
use crate::node::Route;
use crate::state::Reducer;
use crate::store::WorkItem;

/// Builds the next frontier. `done[rank] = (node index, route)` for every item of the step, in order.
pub(crate) fn next_frontier<S: Reducer>(
    graph: &Graph<S>,
    run: &str,
    step: u64,
    items: &[WorkItem],
    done: &[(usize, Route)],
) -> Result<Vec<WorkItem>, Error> {
    let g = &graph.inner;
    let mut joins: BTreeMap<usize, usize> = BTreeMap::new(); // node -> position in `next`
    let mut next: Vec<WorkItem> = Vec::new();
    for (rank, (item, (node, route))) in items.iter().zip(done).enumerate() {
        let entry = &g.nodes[*node];
        let edge_target = |edge: u32| -> Result<Target, Error> {
            entry.edges.get(edge as usize).copied().ok_or_else(|| Error::UndeclaredEdge {
                run: run.to_owned(),
                step,
                node: entry.name.to_string(),
                edge,
                declared: entry.edges.len(),
            })
        };
        let mut routes: Vec<(u32, Target, Option<&serde_json::Value>)> = Vec::new();
        match route {
            Route::Declared => {
                routes.extend(entry.edges.iter().enumerate().map(|(e, t)| (e as u32, *t, None)));
            }
            Route::Goto(e) => routes.push((*e, edge_target(*e)?, None)),
            Route::Fork(branches) => {
                for (k, b) in branches.iter().enumerate() {
                    routes.push((k as u32, edge_target(b.edge)?, b.input.as_ref()));
                }
            }
            Route::End => routes.push((0, Target::End, None)),
        }
        if routes.is_empty() {
            return Err(Error::NoProgress { run: run.to_owned(), step, node: entry.name.to_string() });
        }
        let rank = u32::try_from(rank).expect("a step holds fewer than 2^32 items");
        for (slot, target, input) in routes {
            let Target::Node(to) = target else { continue };
            let key = OrderKey::new(rank, slot);
            match input {
                None => {
                    if joins.contains_key(&to) {
                        continue; // joined into the lower-ordered activation already queued
                    }
                    joins.insert(to, next.len());
                    next.push(WorkItem {
                        node: g.nodes[to].name.to_string(),
                        order_key: key,
                        path: item.path.child(slot),
                        input: None,
                    });
                }
                Some(v) => next.push(WorkItem {
                    node: g.nodes[to].name.to_string(),
                    order_key: key,
                    path: item.path.child(slot),
                    input: Some(v.clone()),
                }),
            }
        }
    }
    next.sort_by_key(|w| w.order_key);
    debug_assert!(
        next.windows(2).all(|w| w[0].order_key < w[1].order_key),
        "order keys are unique in a step"
    );
    debug_assert!(next.iter().all(|w| w.node != END));
    Ok(next)
}
