//! The rules of a graph that both the runtime's `GraphBuilder` (at `build()`) and the `#[graph]` macro (at
//! compile time) apply: one implementation each, so the two can never disagree.
//!
//! * [`fingerprint`]: the hash a run records to detect that it is resumed by a different graph;
//! * [`algo`]: reachability from the entry and loops without an exit, grouped into one finding per mistake;
//! * [`suggest`]: the "did you mean" of unknown names.
//!
//! No proc-macro and no async runtime here: the macros crate compiles it for the host, the runtime for the
//! target, and both stay fast to build.

#![forbid(unsafe_code)]

pub mod algo;
pub mod suggest;

use std::fmt::Write;

pub use algo::Target;

/// What a graph's fingerprint covers: its structure and the signatures of its nodes.
#[derive(Debug, Clone, Copy)]
pub struct Shape<'a> {
    /// `names[i]` is node `i`, in declaration order.
    pub names: &'a [&'a str],
    /// `adjacency[i]`: node `i`'s edges in index order.
    pub adjacency: &'a [Vec<Target>],
    /// The entry node.
    pub entry: usize,
    /// `(node, signature)`: what the macros pass (the node function's signature tokens); hand-built
    /// graphs may pass none.
    pub signatures: &'a [(&'a str, &'a str)],
    /// Nodes whose route a router computes from the updated state.
    pub routed: &'a [usize],
    /// `(node, predecessors)`: wait-for-all joins.
    pub waits: &'a [(usize, Vec<usize>)],
    /// The graph's version (`#[graph(version = N)]`, `GraphBuilder::version`); 1 when not declared.
    pub version: u32,
}

/// The text that is hashed into a graph's fingerprint, format `graph-runtime/fingerprint/v1`:
///
/// ```text
/// graph-runtime/fingerprint/v1
/// entry <entry node>
/// node <name> -> <target> -> <target>      (one line per node, in declaration order; targets in edge
///                                           index order, END for the end)
/// route <node>                             (one line per routed node, in node order)
/// wait <node> <- <pred> <pred>             (one line per wait-for-all join, in node order)
/// sig <node> <signature>                   (one line per signature, sorted by (node, signature))
/// ```
///
/// A graph without routers and joins has no `route`/`wait` lines, so its fingerprint is what it was
/// before those existed. A graph of version 2 or later ends with a `version <N>` line; version 1 has
/// none, so a graph that declares no version keeps the fingerprint its stored runs record.
pub fn fingerprint_text(shape: &Shape<'_>) -> String {
    let names = shape.names;
    let mut text = format!("graph-runtime/fingerprint/v1\nentry {}\n", names[shape.entry]);
    for (name, edges) in names.iter().zip(shape.adjacency) {
        let _ = write!(text, "node {name}");
        for t in edges {
            match t {
                Target::Node(j) => {
                    let _ = write!(text, " -> {}", names[*j]);
                }
                Target::End => text.push_str(" -> END"),
            }
        }
        text.push('\n');
    }
    let mut routed = shape.routed.to_vec();
    routed.sort_unstable();
    for n in routed {
        let _ = writeln!(text, "route {}", names[n]);
    }
    let mut waits = shape.waits.to_vec();
    waits.sort_unstable();
    for (n, preds) in waits {
        let _ = write!(text, "wait {} <-", names[n]);
        for p in preds {
            let _ = write!(text, " {}", names[p]);
        }
        text.push('\n');
    }
    let mut sigs = shape.signatures.to_vec();
    sigs.sort_unstable();
    for (node, sig) in sigs {
        let _ = writeln!(text, "sig {node} {sig}");
    }
    if shape.version > 1 {
        let _ = writeln!(text, "version {}", shape.version);
    }
    text
}

/// The version a fingerprint names: `N` for `"v<N>:<hex>"` (a graph of version 2 or later), 1 for a
/// plain hex fingerprint (version 1, or a graph that declares none).
///
/// # Examples
///
/// ```
/// assert_eq!(graph_core::fingerprint_version("v3:0a1b"), 3);
/// assert_eq!(graph_core::fingerprint_version("0a1b"), 1);
/// ```
pub fn fingerprint_version(fingerprint: &str) -> u32 {
    fingerprint
        .strip_prefix('v')
        .and_then(|rest| rest.split_once(':'))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(1)
}

/// Lowercase hex SHA-256 of [`fingerprint_text`], prefixed `v<N>:` for a graph of version `N` ≥ 2
/// (so the version can be read back from a stored fingerprint, [`fingerprint_version`]): what
/// `Graph::fingerprint()` returns and what the macros embed as `FINGERPRINT`.
///
/// # Examples
///
/// ```
/// use graph_core::{fingerprint, Shape, Target};
/// let shape = Shape { names: &["a"], adjacency: &[vec![Target::End]], entry: 0, signatures: &[], routed: &[], waits: &[], version: 1 };
/// assert_eq!(fingerprint(&shape).len(), 64);
/// ```
pub fn fingerprint(shape: &Shape<'_>) -> String {
    use sha2::{Digest, Sha256};
    let hash = hex(&Sha256::digest(fingerprint_text(shape).as_bytes()));
    match shape.version {
        0 | 1 => hash,
        n => format!("v{n}:{hash}"),
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::new();
    push_hex(&mut out, bytes);
    out
}

/// Appends the lowercase hex of `bytes` to `out` (for text that holds many values, such as a SQL
/// script: no string of its own per value).
pub fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() * 2);
    // Digits written into a buffer and appended a chunk at a time: a `char` pushed at a time is checked
    // and encoded one by one (about 24 instructions a byte, against 5).
    let mut buf = [0u8; 128];
    for chunk in bytes.chunks(64) {
        let digits = &mut buf[..chunk.len() * 2];
        for (pair, b) in digits.chunks_exact_mut(2).zip(chunk) {
            pair[0] = DIGITS[usize::from(b >> 4)];
            pair[1] = DIGITS[usize::from(b & 15)];
        }
        out.push_str(std::str::from_utf8(digits).expect("hex digits are ASCII"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_text_lists_nodes_edges_and_sorted_signatures() {
        let names = ["plan", "work"];
        let adj = vec![vec![Target::Node(1), Target::End], vec![Target::Node(0)]];
        let sigs = [("work", "fn work()"), ("plan", "fn plan()")];
        let mut shape = Shape {
            names: &names,
            adjacency: &adj,
            entry: 0,
            signatures: &sigs,
            routed: &[],
            waits: &[],
            version: 1,
        };
        assert_eq!(
            fingerprint_text(&shape),
            "graph-runtime/fingerprint/v1\nentry plan\nnode plan -> work -> END\nnode work -> plan\n\
             sig plan fn plan()\nsig work fn work()\n"
        );
        let waits = [(1, vec![0])];
        shape.routed = &[0];
        shape.waits = &waits;
        assert_eq!(
            fingerprint_text(&shape),
            "graph-runtime/fingerprint/v1\nentry plan\nnode plan -> work -> END\nnode work -> plan\n\
             route plan\nwait work <- plan\nsig plan fn plan()\nsig work fn work()\n"
        );
    }

    // Computed outside Rust: python3 -c 'import hashlib; print(hashlib.sha256(
    //   b"graph-runtime/fingerprint/v1\nentry a\nnode a -> END\n").hexdigest())'
    #[test]
    fn fingerprint_golden_vector() {
        assert_eq!(
            fingerprint(&Shape {
                names: &["a"],
                adjacency: &[vec![Target::End]],
                entry: 0,
                signatures: &[],
                routed: &[],
                waits: &[],
                version: 1,
            }),
            "ee089230e689ff117b5a04160485f7cdd304b917e02fcab50608293991dfbd4e"
        );
    }

    // python3 -c 'import hashlib; print(hashlib.sha256(
    //   b"graph-runtime/fingerprint/v1\nentry a\nnode a -> END\nversion 2\n").hexdigest())'
    #[test]
    fn a_version_is_hashed_and_named_in_the_fingerprint() {
        let adjacency = [vec![Target::End]];
        let shape = |version| Shape {
            names: &["a"],
            adjacency: &adjacency,
            entry: 0,
            signatures: &[],
            routed: &[],
            waits: &[],
            version,
        };
        let v2 = fingerprint(&shape(2));
        assert_eq!(v2, "v2:fd4519bd9de814a919a41496d3bbf3845611583d1e0be63b81270eee42cbf401");
        assert_eq!(fingerprint_version(&v2), 2);
        assert_eq!(fingerprint_version(&fingerprint(&shape(1))), 1);
        assert_eq!(fingerprint_version("v:x"), 1);
    }

    #[test]
    fn hex_is_lowercase() {
        assert_eq!(hex(&[0x00, 0xab, 0xff]), "00abff");
        // Longer than one chunk of the buffer, every byte value.
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex(&all), expected);
        assert_eq!(hex(&[]), "");
        let mut s = String::from("X'");
        push_hex(&mut s, &[0x10, 0xfe]);
        assert_eq!(s, "X'10fe");
    }
}
