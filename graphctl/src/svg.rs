//! A graph's shape drawn as SVG for the inspector, with no JavaScript library: nodes in layers by their
//! distance from the entry (START above, END below), edges as straight arrows (an edge back to an
//! earlier layer curves around the side), and each node marked as visited, in the frontier, or waiting.
//! Every name is XML-escaped: a stored string is text, never markup.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;

use graph_runtime::graph::{END, GraphShape};

/// How a node is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// Never run.
    Plain,
    /// Ran in a committed step.
    Visited,
    /// In the latest checkpoint's frontier: runs next.
    Frontier,
    /// The run waits on it (a question, a sleep, an event).
    Waiting,
}

const W: i64 = 150;
const H: i64 = 36;
const GAP_X: i64 = 40;
const GAP_Y: i64 = 60;
const START: &str = "__start__";

/// The SVG of `shape`, each node's mark given by `mark`.
pub(crate) fn render(shape: &GraphShape, mark: impl Fn(&str) -> Mark) -> String {
    // Layers: START 0, the entry 1, then breadth first; END below the deepest node.
    let mut layer: BTreeMap<&str, i64> = BTreeMap::new();
    layer.insert(START, 0);
    let mut queue = VecDeque::from([(shape.entry.as_str(), 1)]);
    while let Some((name, depth)) = queue.pop_front() {
        if name == END || layer.contains_key(name) {
            continue;
        }
        layer.insert(name, depth);
        for next in shape.nodes.iter().find(|n| n.name == name).map(|n| n.edges.as_slice()).unwrap_or(&[]) {
            queue.push_back((next.as_str(), depth + 1));
        }
    }
    // Nodes no path from the entry reaches (a handler reached by failure only) go below the others.
    let deepest = layer.values().copied().max().unwrap_or(1);
    for n in &shape.nodes {
        layer.entry(n.name.as_str()).or_insert(deepest + 1);
    }
    let end_layer = layer.values().copied().max().unwrap_or(1) + 1;
    layer.insert(END, end_layer);
    // Positions: each layer's nodes side by side, in declaration order.
    let order: Vec<&str> =
        std::iter::once(START).chain(shape.nodes.iter().map(|n| n.name.as_str())).chain([END]).collect();
    let mut rows: BTreeMap<i64, Vec<&str>> = BTreeMap::new();
    for name in &order {
        rows.entry(layer[name]).or_default().push(name);
    }
    let widest = rows.values().map(Vec::len).max().unwrap_or(1) as i64;
    let width = widest * (W + GAP_X) + GAP_X + 60;
    let height = (end_layer + 1) * (H + GAP_Y) + GAP_Y;
    let mut at: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for (depth, names) in &rows {
        let n = names.len() as i64;
        let left = (width - 60 - n * (W + GAP_X) + GAP_X) / 2;
        for (i, name) in names.iter().enumerate() {
            at.insert(name, (left + i as i64 * (W + GAP_X), GAP_Y / 2 + depth * (H + GAP_Y)));
        }
    }
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" \
         height=\"{height}\" role=\"img\" aria-label=\"graph {}\">",
        escape(&shape.name)
    );
    svg.push_str(
        "<style>text{font:13px system-ui,sans-serif}.node rect{fill:#fff;stroke:#666}\
         .visited rect{fill:#dce8f7;stroke:#35609a}.frontier rect{fill:#fff3c4;stroke:#b38f00;stroke-width:2}\
         .waiting rect{fill:#ffd2a1;stroke:#b35c00;stroke-width:3}.terminal rect{fill:#eee;stroke:#999}\
         .edge{stroke:#888;fill:none}.edge-label{font-size:10px;fill:#666}</style>",
    );
    svg.push_str(
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"8\" \
         markerHeight=\"8\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\"/></marker></defs>",
    );
    let mut edge = |from: &str, to: &str, label: Option<usize>| {
        let (Some(&(x1, y1)), Some(&(x2, y2))) = (at.get(from), at.get(to)) else { return };
        let (sx, sy) = (x1 + W / 2, y1 + H);
        let (tx, ty) = (x2 + W / 2, y2);
        if y2 > y1 {
            let _ = write!(
                svg,
                "<path class=\"edge\" d=\"M {sx} {sy} L {tx} {ty}\" marker-end=\"url(#arrow)\"/>"
            );
        } else {
            // Back (or level) edge: around the right side.
            let side = width - 30;
            let _ = write!(
                svg,
                "<path class=\"edge back\" d=\"M {} {} C {side} {}, {side} {}, {} {}\" fill=\"none\" \
                 marker-end=\"url(#arrow)\"/>",
                x1 + W,
                y1 + H / 2,
                y1 + H / 2,
                y2 + H / 2,
                x2 + W,
                y2 + H / 2
            );
        }
        if let Some(i) = label {
            let _ = write!(
                svg,
                "<text class=\"edge-label\" x=\"{}\" y=\"{}\">{i}</text>",
                (sx + tx) / 2 + 4,
                (sy + ty) / 2
            );
        }
    };
    edge(START, &shape.entry, None);
    for n in &shape.nodes {
        let many = n.edges.len() > 1;
        for (i, to) in n.edges.iter().enumerate() {
            edge(&n.name, to, many.then_some(i));
        }
    }
    for name in &order {
        let (x, y) = at[name];
        let (class, text) = match *name {
            START => ("node terminal".to_owned(), "START"),
            END => ("node terminal".to_owned(), "END"),
            other => {
                let class = match mark(other) {
                    Mark::Plain => "node",
                    Mark::Visited => "node visited",
                    Mark::Frontier => "node frontier",
                    Mark::Waiting => "node waiting",
                };
                (class.to_owned(), other)
            }
        };
        let _ = write!(
            svg,
            "<g class=\"{class}\" data-node=\"{}\"><rect x=\"{x}\" y=\"{y}\" width=\"{W}\" height=\"{H}\" rx=\"8\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text></g>",
            escape(text),
            x + W / 2,
            y + H / 2 + 5,
            escape(&shorten(text))
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A name cut to what fits a node's box.
fn shorten(name: &str) -> String {
    if name.chars().count() <= 20 { name.to_owned() } else { name.chars().take(19).chain(['…']).collect() }
}

/// `text` as XML character data and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(json: serde_json::Value) -> GraphShape {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn nodes_are_drawn_in_layers_with_their_marks_and_names_escaped() {
        let s = shape(serde_json::json!({
            "name": "g<1>", "fingerprint": "f", "entry": "a", "version": 1,
            "nodes": [
                { "name": "a", "edges": ["<b>"] },
                { "name": "<b>", "edges": ["a", "__end__"] }
            ]
        }));
        let svg = render(&s, |n| if n == "a" { Mark::Visited } else { Mark::Waiting });
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("aria-label=\"graph g&lt;1&gt;\""));
        assert!(svg.contains("class=\"node visited\" data-node=\"a\""));
        assert!(svg.contains("class=\"node waiting\" data-node=\"&lt;b&gt;\""));
        assert!(!svg.contains("<b>"), "a name is text: {svg}");
        assert!(svg.contains("edge back"), "b → a goes back up");
        assert_eq!(svg.matches("class=\"node terminal\"").count(), 2);
    }
}
