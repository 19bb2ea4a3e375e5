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

/// The text that is hashed into a graph's fingerprint, format `graph-runtime/fingerprint/v1`:
///
/// ```text
/// graph-runtime/fingerprint/v1
/// entry <entry node>
/// node <name> -> <target> -> <target>      (one line per node, in declaration order; targets in edge
///                                           index order, END for the end)
/// sig <node> <signature>                   (one line per signature, sorted by (node, signature))
/// ```
///
/// `names[i]` is node `i`, `adjacency[i]` its edges in index order. Signatures are what the macros pass
/// (the node function's signature tokens); hand-built graphs may pass none.
pub fn fingerprint_text(
    names: &[&str],
    adjacency: &[Vec<Target>],
    entry: usize,
    signatures: &[(&str, &str)],
) -> String {
    let mut text = format!("graph-runtime/fingerprint/v1\nentry {}\n", names[entry]);
    for (name, edges) in names.iter().zip(adjacency) {
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
    let mut sigs = signatures.to_vec();
    sigs.sort_unstable();
    for (node, sig) in sigs {
        let _ = writeln!(text, "sig {node} {sig}");
    }
    text
}

/// Lowercase hex SHA-256 of [`fingerprint_text`]: what `Graph::fingerprint()` returns and what the
/// macros embed as `FINGERPRINT`.
///
/// # Examples
///
/// ```
/// use graph_core::{fingerprint, Target};
/// let fp = fingerprint(&["a"], &[vec![Target::End]], 0, &[]);
/// assert_eq!(fp.len(), 64);
/// ```
pub fn fingerprint(
    names: &[&str],
    adjacency: &[Vec<Target>],
    entry: usize,
    signatures: &[(&str, &str)],
) -> String {
    use sha2::{Digest, Sha256};
    hex(&Sha256::digest(fingerprint_text(names, adjacency, entry, signatures).as_bytes()))
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_text_lists_nodes_edges_and_sorted_signatures() {
        let names = ["plan", "work"];
        let adj = vec![vec![Target::Node(1), Target::End], vec![Target::Node(0)]];
        let text = fingerprint_text(&names, &adj, 0, &[("work", "fn work()"), ("plan", "fn plan()")]);
        assert_eq!(
            text,
            "graph-runtime/fingerprint/v1\nentry plan\nnode plan -> work -> END\nnode work -> plan\n\
             sig plan fn plan()\nsig work fn work()\n"
        );
    }

    // Computed outside Rust: python3 -c 'import hashlib; print(hashlib.sha256(
    //   b"graph-runtime/fingerprint/v1\nentry a\nnode a -> END\n").hexdigest())'
    #[test]
    fn fingerprint_golden_vector() {
        assert_eq!(
            fingerprint(&["a"], &[vec![Target::End]], 0, &[]),
            "ee089230e689ff117b5a04160485f7cdd304b917e02fcab50608293991dfbd4e"
        );
    }

    #[test]
    fn hex_is_lowercase() {
        assert_eq!(hex(&[0x00, 0xab, 0xff]), "00abff");
    }
}
