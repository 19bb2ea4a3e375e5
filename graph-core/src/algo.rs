//! Graph algorithms over node indices, shared by the builder and the macros. Pure and deterministic: results are in declaration order and do
//! not depend on the order edges or nodes were declared in beyond that (tested on every permutation).

use std::collections::{BTreeSet, VecDeque};

/// Where an edge leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// A node, by index in the node table.
    Node(usize),
    /// The end of the path.
    End,
}

/// Nodes that cannot be reached from the entry, grouped: each group is a set of nodes that nothing
/// outside the group (and reachable) leads to; every other unreachable node hangs off some group.
/// Making each group's first node reachable fixes the graph, so each group is one mistake.
#[derive(Debug, PartialEq, Eq)]
pub struct Unreachable {
    /// The group, in declaration order.
    pub nodes: Vec<usize>,
    /// Other unreachable nodes only this group leads to, in declaration order.
    pub downstream: Vec<usize>,
}

/// A set of nodes from which END cannot be reached and that has no edge out of itself: a loop with no exit.
#[derive(Debug, PartialEq, Eq)]
pub struct Trap {
    /// The loop's nodes, in declaration order.
    pub nodes: Vec<usize>,
    /// A cycle through the first node: `[a, b, a]`.
    pub cycle: Vec<usize>,
    /// Other nodes that cannot reach END because they only lead into this loop.
    pub upstream: Vec<usize>,
}

fn successors(adj: &[Vec<Target>]) -> Vec<Vec<usize>> {
    adj.iter()
        .map(|edges| {
            edges
                .iter()
                .filter_map(|t| match t {
                    Target::Node(n) => Some(*n),
                    Target::End => None,
                })
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        })
        .collect()
}

fn predecessors(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut pred = vec![Vec::new(); succ.len()];
    for (n, s) in succ.iter().enumerate() {
        for &m in s {
            pred[m].push(n);
        }
    }
    pred
}

/// Nodes reachable from `starts` following `next`, restricted to `within`.
fn reach(starts: &[usize], next: &[Vec<usize>], within: &[bool]) -> Vec<bool> {
    let mut seen = vec![false; next.len()];
    let mut queue: VecDeque<usize> = VecDeque::new();
    for &s in starts {
        if within[s] && !seen[s] {
            seen[s] = true;
            queue.push_back(s);
        }
    }
    while let Some(n) = queue.pop_front() {
        for &m in &next[n] {
            if within[m] && !seen[m] {
                seen[m] = true;
                queue.push_back(m);
            }
        }
    }
    seen
}

/// The strongly connected components of the subgraph `within` that have no edge (along `next`) to
/// another component, each in declaration order, listed by first member.
fn terminal_components(next: &[Vec<usize>], within: &[bool]) -> Vec<Vec<usize>> {
    let n = next.len();
    let reach_of: Vec<Vec<bool>> =
        (0..n).map(|u| if within[u] { reach(&[u], next, within) } else { vec![false; n] }).collect();
    let mut done = vec![false; n];
    let mut out = Vec::new();
    for u in (0..n).filter(|&u| within[u]) {
        if done[u] {
            continue;
        }
        let component: Vec<usize> = (0..n).filter(|&v| reach_of[u][v] && reach_of[v][u]).collect();
        for &v in &component {
            done[v] = true;
        }
        let reached = (0..n).filter(|&v| reach_of[u][v]).count();
        if reached == component.len() {
            out.push(component);
        }
    }
    out
}

/// `m[a][b]`: node `b` can be reached from node `a` along edges (every node reaches itself).
pub fn reachability(adj: &[Vec<Target>]) -> Vec<Vec<bool>> {
    let succ = successors(adj);
    let all = vec![true; adj.len()];
    (0..adj.len()).map(|n| reach(&[n], &succ, &all)).collect()
}

/// Unreachable nodes from `entry`, grouped (see [`Unreachable`]).
pub fn unreachable(entry: usize, adj: &[Vec<Target>]) -> Vec<Unreachable> {
    let succ = successors(adj);
    let all = vec![true; adj.len()];
    let reached = reach(&[entry], &succ, &all);
    let missing: Vec<bool> = reached.iter().map(|r| !r).collect();
    let pred = predecessors(&succ);
    let mut claimed = vec![false; adj.len()];
    terminal_components(&pred, &missing)
        .into_iter()
        .map(|nodes| {
            let below = reach(&nodes, &succ, &missing);
            let downstream =
                (0..adj.len()).filter(|&v| below[v] && !nodes.contains(&v) && !claimed[v]).collect();
            for v in (0..adj.len()).filter(|&v| below[v]) {
                claimed[v] = true;
            }
            Unreachable { nodes, downstream }
        })
        .collect()
}

/// Loops from which END cannot be reached (see [`Trap`]).
pub fn traps(adj: &[Vec<Target>]) -> Vec<Trap> {
    let succ = successors(adj);
    let pred = predecessors(&succ);
    let exits: Vec<usize> = (0..adj.len()).filter(|&n| adj[n].contains(&Target::End)).collect();
    let all = vec![true; adj.len()];
    let reaches_end = reach(&exits, &pred, &all);
    let stuck: Vec<bool> = reaches_end.iter().map(|r| !r).collect();
    let mut claimed = vec![false; adj.len()];
    terminal_components(&succ, &stuck)
        .into_iter()
        .map(|nodes| {
            let cycle = cycle_through(nodes[0], &nodes, &succ);
            let above = reach(&nodes, &pred, &stuck);
            let upstream =
                (0..adj.len()).filter(|&v| above[v] && !nodes.contains(&v) && !claimed[v]).collect();
            for v in (0..adj.len()).filter(|&v| above[v]) {
                claimed[v] = true;
            }
            Trap { nodes, cycle, upstream }
        })
        .collect()
}

/// The shortest cycle from `start` back to itself through `members` (BFS, smallest index first);
/// `[start]` when there is none (a node with no edges).
fn cycle_through(start: usize, members: &[usize], succ: &[Vec<usize>]) -> Vec<usize> {
    let mut parent: Vec<Option<usize>> = vec![None; succ.len()];
    let mut seen = vec![false; succ.len()];
    seen[start] = true;
    let mut queue = VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for &m in &succ[n] {
            if m == start {
                let mut path = Vec::new();
                let mut cur = Some(n);
                while let Some(c) = cur {
                    path.push(c);
                    cur = parent[c];
                }
                path.reverse();
                path.push(start);
                return path;
            }
            if members.contains(&m) && !seen[m] {
                seen[m] = true;
                parent[m] = Some(n);
                queue.push_back(m);
            }
        }
    }
    vec![start]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds an adjacency from named edges under a node order; `names[order[i]]` is node i.
    fn build(
        names: &[&str],
        order: &[usize],
        edges: &[(&str, &str)],
    ) -> (Vec<Vec<Target>>, Vec<&'static str>) {
        let node_names: Vec<&'static str> =
            order.iter().map(|&i| &*Box::leak(names[i].to_owned().into_boxed_str())).collect();
        let pos = |n: &str| node_names.iter().position(|m| *m == n).unwrap();
        let mut adj = vec![Vec::new(); names.len()];
        for (f, t) in edges {
            adj[pos(f)].push(if *t == "END" { Target::End } else { Target::Node(pos(t)) });
        }
        (adj, node_names)
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

    fn names_of(v: &[usize], names: &[&'static str]) -> BTreeSet<&'static str> {
        v.iter().map(|&i| names[i]).collect()
    }

    #[test]
    fn a_loop_with_an_exit_is_fine() {
        let (adj, _) = build(&["a", "b"], &[0, 1], &[("a", "b"), ("b", "a"), ("b", "END")]);
        assert!(traps(&adj).is_empty());
        assert!(unreachable(0, &adj).is_empty());
    }

    #[test]
    fn a_loop_without_exit_is_one_trap_with_its_cycle() {
        let (adj, _) =
            build(&["a", "b", "c"], &[0, 1, 2], &[("a", "b"), ("b", "c"), ("c", "b"), ("a", "END")]);
        assert_eq!(traps(&adj), [Trap { nodes: vec![1, 2], cycle: vec![1, 2, 1], upstream: vec![] }]);
        let (adj, _) = build(&["a", "b"], &[0, 1], &[("a", "b"), ("b", "b")]);
        assert_eq!(traps(&adj), [Trap { nodes: vec![1], cycle: vec![1, 1], upstream: vec![0] }]);
    }

    #[test]
    fn unreachable_groups_report_the_root_once() {
        // x -> y -> z are unreachable; only x needs an incoming edge.
        let (adj, _) = build(
            &["a", "x", "y", "z"],
            &[0, 1, 2, 3],
            &[("a", "END"), ("x", "y"), ("y", "z"), ("z", "END")],
        );
        assert_eq!(unreachable(0, &adj), [Unreachable { nodes: vec![1], downstream: vec![2, 3] }]);
        // an unreachable cycle p <-> q is one group
        let (adj, _) =
            build(&["a", "p", "q"], &[0, 1, 2], &[("a", "END"), ("p", "q"), ("q", "p"), ("q", "END")]);
        assert_eq!(unreachable(0, &adj), [Unreachable { nodes: vec![1, 2], downstream: vec![] }]);
    }

    #[test]
    fn verdicts_do_not_depend_on_declaration_order() {
        let names = ["entry", "loop1", "loop2", "orphan", "tail", "ok"];
        let edges = [
            ("entry", "loop1"),
            ("entry", "ok"),
            ("loop1", "loop2"),
            ("loop2", "loop1"),
            ("ok", "END"),
            ("orphan", "tail"),
            ("tail", "END"),
        ];
        for order in permutations(names.len()) {
            let (adj, nn) = build(&names, &order, &edges);
            let entry = nn.iter().position(|n| *n == "entry").unwrap();
            let un = unreachable(entry, &adj);
            assert_eq!(un.len(), 1);
            assert_eq!(names_of(&un[0].nodes, &nn), BTreeSet::from(["orphan"]));
            assert_eq!(names_of(&un[0].downstream, &nn), BTreeSet::from(["tail"]));
            let tr = traps(&adj);
            assert_eq!(tr.len(), 1);
            assert_eq!(names_of(&tr[0].nodes, &nn), BTreeSet::from(["loop1", "loop2"]));
            assert_eq!(tr[0].cycle.len(), 3);
            assert_eq!(tr[0].cycle.first(), tr[0].cycle.last());
            assert_eq!(names_of(&tr[0].upstream, &nn), BTreeSet::new());
            // the reported node is the first declared member, whatever the order
            assert_eq!(tr[0].cycle[0], *tr[0].nodes.iter().min().unwrap());
        }
    }
}
