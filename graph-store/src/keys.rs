//! Deterministic identities: order keys, path identities, run seeds and idempotency keys.
//!
//! Every formula here is fixed: changing one changes stored data and replay results. Each has
//! golden-vector tests whose expected values were computed outside this crate (Python's `hashlib`).
//!
//! Two different things are both called an "order key" in LangGraph-Go's determinism guarantees, and they are kept apart:
//!
//! * [`compute_order_key`] is LangGraph-Go's 64-bit *identity hash* of `(parent, edge)`: the first 8 bytes of
//!   [`identity_hash`]. The path identity of an item is that same hash, untruncated and chained from the
//!   entry, so that formula is what identifies items here; but hash order is an arbitrary order and
//!   identity from `(parent node, edge)` alone collides as soon as a node runs twice (loops, joins,
//!   retries), so it does not sort work.
//! * [`OrderKey`] is what sorts a step: `(rank of the producing item in its own step, slot)`, packed into a
//!   `u64` (high 32 bits rank, low 32 bits slot). It is unique within a step by construction, and siblings
//!   sort in edge order, the order a user reads in the source.
//!
//! A work item also carries a [`PathId`]: a SHA-256 chain from the entry item through every
//! `(parent path, slot)` hop. It is unique per activation of a run (loop iterations included), seeds the
//! item's RNG and keys its recorded I/O.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The seed formula of item identities: `SHA256(utf8(parent_id) || u32_be(edge_index))`.
///
/// [`PathId`]s chain it from the entry (`parent_id` is the parent's path in hex), and
/// [`compute_order_key`] is its first 8 bytes.
pub fn identity_hash(parent_id: &str, edge_index: u32) -> [u8; 32] {
    sha256_parts(&[parent_id.as_bytes(), &edge_index.to_be_bytes()])
}

/// LangGraph-Go's order-key hash: `u64_be(SHA256(utf8(parent_id) || u32_be(edge_index))[0..8])`,
/// the first 8 bytes of [`identity_hash`]; for an item, `compute_order_key(parent.path, slot)` is the
/// first 8 bytes of its own path identity ([`PathId::identity_u64`]).
///
/// Kept exactly as LangGraph-Go writes it, golden-vector tested. With 64 bits, the birthday bound for `n` distinct
/// inputs is about `n² / 2⁶⁵`: 10⁶ keys collide with probability ≈ 2.7·10⁻⁸, 10⁹ keys ≈ 2.7·10⁻². That is
/// why identities are the full 256-bit [`PathId`] and scheduling uses the structured [`OrderKey`], which
/// cannot collide within a step.
///
/// # Examples
///
/// ```
/// use graph_store::keys::compute_order_key;
/// assert_eq!(compute_order_key("start", 0), 0x25ad_a9bc_823f_da6a);
/// ```
pub fn compute_order_key(parent_id: &str, edge_index: u32) -> u64 {
    let digest = identity_hash(parent_id, edge_index);
    u64::from_be_bytes(digest[..8].try_into().expect("sha256 digest is 32 bytes"))
}

/// The key that orders the items of one step: `(rank, slot)` packed as `rank << 32 | slot`.
///
/// `rank` is the position of the producing item in its own (sorted) step; `slot` is the edge index for a
/// plain route, or the branch position for a fork (graph-runtime's `Route::Fork`). The entry item has key 0.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OrderKey(pub u64);

impl OrderKey {
    /// The key of the run's first item.
    pub const ENTRY: OrderKey = OrderKey(0);

    /// Packs a producing item's rank and the route slot.
    pub fn new(rank: u32, slot: u32) -> Self {
        OrderKey(((rank as u64) << 32) | slot as u64)
    }

    /// The rank of the producing item in its step.
    pub fn rank(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The edge index (plain route) or branch position (fork) within the producer.
    pub fn slot(self) -> u32 {
        self.0 as u32
    }
}

impl fmt::Debug for OrderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OrderKey({}:{})", self.rank(), self.slot())
    }
}

impl fmt::Display for OrderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.rank(), self.slot())
    }
}

/// The path identity of a work item: lowercase hex of a 32-byte SHA-256 chain.
///
/// `path(entry) = SHA256(utf8(entry_node) || u32_be(0))`, `path(child) = SHA256(utf8(hex(path(parent)))
/// || u32_be(slot))`. A join takes the path of its lowest-ordered contributor, which is unique because
/// that contributor's `(path, slot)` produced nothing else.
///
/// Held inline (64 ASCII bytes, no allocation), serialized as the hex string.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PathId([u8; 64]);

impl PathId {
    /// The path of the run's entry item: [`identity_hash`]`(entry_node, 0)`.
    pub fn entry(entry_node: &str) -> Self {
        PathId(hex_array(&identity_hash(entry_node, 0)))
    }

    /// The path of the item reached from `self` through `slot`: [`identity_hash`]`(self, slot)`.
    pub fn child(&self, slot: u32) -> Self {
        PathId(hex_array(&identity_hash(self.as_str(), slot)))
    }

    /// The first 8 bytes of the identity, big-endian: LangGraph-Go's 64-bit order key of this item,
    /// [`compute_order_key`]`(parent, slot)`. Short enough for logs.
    pub fn identity_u64(&self) -> u64 {
        let mut bytes = [0u8; 8];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (hex_value(self.0[2 * i]) << 4) | hex_value(self.0[2 * i + 1]);
        }
        u64::from_be_bytes(bytes)
    }

    /// The hex string.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("a path identity is ASCII hex")
    }

    /// Parses the 64-character lowercase hex form.
    pub fn parse(s: &str) -> Option<Self> {
        let bytes: [u8; 64] = s.as_bytes().try_into().ok()?;
        bytes.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')).then_some(PathId(bytes))
    }
}

impl fmt::Debug for PathId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PathId({})", &self.as_str()[..12])
    }
}

impl fmt::Display for PathId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for PathId {
    fn serialize<Ser: serde::Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for PathId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        PathId::parse(&s).ok_or_else(|| {
            serde::de::Error::invalid_value(serde::de::Unexpected::Str(&s), &"64 lowercase hex digits")
        })
    }
}

/// The run seed derived from a run id when none is given: `u64_be(SHA256("graph-runtime/seed\0" ||
/// utf8(run_id))[0..8])`.
pub fn derive_run_seed(run_id: &str) -> u64 {
    let d = sha256_parts(&[b"graph-runtime/seed\0", run_id.as_bytes()]);
    u64::from_be_bytes(d[..8].try_into().expect("32 bytes"))
}

/// The 32-byte ChaCha seed of one attempt of one item: `SHA256(u64_be(run_seed) || utf8(path) ||
/// u32_be(attempt))`. Distinct paths (loop iterations) and attempts (retries) get distinct streams.
pub fn item_rng_seed(run_seed: u64, path: &PathId, attempt: u32) -> [u8; 32] {
    sha256_parts(&[&run_seed.to_be_bytes(), path.as_str().as_bytes(), &attempt.to_be_bytes()])
}

/// A deterministic value in `[0, 1)` for backoff jitter of `(path, attempt)`.
pub fn jitter_unit(path: &PathId, attempt: u32) -> f64 {
    let d = sha256_parts(&[b"jitter\0", path.as_str().as_bytes(), &attempt.to_be_bytes()]);
    let x = u64::from_be_bytes(d[..8].try_into().expect("32 bytes")) >> 11;
    x as f64 / (1u64 << 53) as f64
}

/// One frontier entry as the idempotency key sees it.
#[derive(Debug, Clone, Copy)]
pub struct KeyItem<'a> {
    /// The node the item runs.
    pub node_id: &'a str,
    /// Its order key.
    pub order_key: u64,
}

/// The step commit's idempotency key, exactly as LangGraph-Go's store guarantees write it:
/// `"sha256:" + hex(SHA256(utf8(run_id) || u64_be(step_id) || for each item sorted by order key:
/// utf8(node_id) || u64_be(order_key) || state_json))`.
///
/// The items are sorted here; callers may pass them in any order.
///
/// # Examples
///
/// ```
/// use graph_store::keys::{idempotency_key, KeyItem};
/// let key = idempotency_key("run-001", 1, &[KeyItem { node_id: "a", order_key: 0 }], br#"{"n":1}"#);
/// assert!(key.starts_with("sha256:") && key.len() == 7 + 64);
/// ```
pub fn idempotency_key(run_id: &str, step_id: u64, items: &[KeyItem<'_>], state_json: &[u8]) -> String {
    let order = |a: &KeyItem<'_>, b: &KeyItem<'_>| {
        a.order_key.cmp(&b.order_key).then_with(|| a.node_id.cmp(b.node_id))
    };
    // The engine passes its frontier, which is sorted already: copy only when it is not.
    let copy;
    let sorted = if items.is_sorted_by(|a, b| order(a, b).is_le()) {
        items
    } else {
        let mut v = items.to_vec();
        v.sort_by(order);
        copy = v;
        &copy[..]
    };
    let no_waits = std::iter::empty::<(&str, std::iter::Empty<&str>)>();
    idempotency_key_of_sorted(
        run_id,
        step_id,
        sorted.iter().map(|i| (i.node_id, i.order_key)),
        no_waits,
        state_json,
    )
}

/// [`idempotency_key`] of items already in `(order_key, node_id)` order, extended by the step's waiting
/// joins (`(node, arrived predecessors)` in node order; a step without waiting joins hashes exactly
/// LangGraph-Go's formula): after the items and before the state, each as `b"wait" || u32_be(len(node)) ||
/// node || u32_be(count) || for each arrived predecessor: u32_be(len) || name`.
pub fn idempotency_key_of_sorted<'a, A: Iterator<Item = &'a str>>(
    run_id: &str,
    step_id: u64,
    items: impl Iterator<Item = (&'a str, u64)>,
    waiting: impl Iterator<Item = (&'a str, A)>,
    state_json: &[u8],
) -> String {
    let mut h = Sha256::new();
    h.update(run_id.as_bytes());
    h.update(step_id.to_be_bytes());
    for (node_id, order_key) in items {
        h.update(node_id.as_bytes());
        h.update(order_key.to_be_bytes());
    }
    for (node, arrived) in waiting {
        h.update(b"wait");
        h.update((node.len() as u32).to_be_bytes());
        h.update(node.as_bytes());
        let arrived: Vec<&str> = arrived.collect();
        h.update((arrived.len() as u32).to_be_bytes());
        for a in arrived {
            h.update((a.len() as u32).to_be_bytes());
            h.update(a.as_bytes());
        }
    }
    h.update(state_json);
    let digest: [u8; 32] = h.finalize().into();
    let mut key = String::with_capacity(7 + 64);
    key.push_str("sha256:");
    key.push_str(std::str::from_utf8(&hex_array(&digest)).expect("hex digits are ASCII"));
    key
}

/// SHA-256 over the concatenation of `parts`.
pub fn sha256_parts(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

pub use graph_core::hex;

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        _ => digit - b'a' + 10,
    }
}

/// Lowercase hex of a digest, inline.
fn hex_array(digest: &[u8; 32]) -> [u8; 64] {
    let mut out = [0u8; 64];
    for (i, b) in digest.iter().enumerate() {
        out[2 * i] = HEX_DIGITS[(b >> 4) as usize];
        out[2 * i + 1] = HEX_DIGITS[(b & 15) as usize];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values computed with Python 3 `hashlib`, independently of this crate:
    //   int.from_bytes(hashlib.sha256(b"start" + (0).to_bytes(4, "big")).digest()[:8], "big")
    #[test]
    fn order_key_golden_vectors() {
        assert_eq!(compute_order_key("start", 0), 0x25ad_a9bc_823f_da6a);
        assert_eq!(compute_order_key("start", 1), 0x40cb_6451_8397_640b);
        assert_eq!(compute_order_key("start", 2), 0xfa92_afb8_69f1_2f3f);
        assert_eq!(compute_order_key("", 0), 0xdf3f_6198_04a9_2fdb);
        assert_eq!(compute_order_key("nœud-é", 4_294_967_295), 0xb49f_e986_552a_10d6);
    }

    // Python: "sha256:" + hashlib.sha256(run + step.to_bytes(8) + b"".join(n + k.to_bytes(8) for n, k in
    // sorted(items, key=order_key)) + state).hexdigest()
    #[test]
    fn idempotency_key_golden_vectors() {
        let items =
            [KeyItem { node_id: "b", order_key: (1 << 32) | 1 }, KeyItem { node_id: "a", order_key: 0 }];
        assert_eq!(
            idempotency_key("run-001", 1, &items, br#"{"n":1}"#),
            "sha256:6a0d4eeda2bf5eca07764c5f30c2f263226d6f5863720ff0b1a8a6a674c95c94"
        );
        assert_eq!(
            idempotency_key("run-001", 0, &[], b"null"),
            "sha256:87491ee5ee641e6042096a1a93487faa2d07630b2237ebd824c93087cf5323a3"
        );
        let items = [KeyItem { node_id: "x", order_key: 5 }, KeyItem { node_id: "y", order_key: 3 }];
        assert_eq!(
            idempotency_key("r", u64::MAX, &items, br#"{"a":[1,2]}"#),
            "sha256:e78f0ef654cd471aab329327f5228dc7bfdbc0a61a803655facc057a3f85dab5"
        );
    }

    #[test]
    fn the_spec_order_key_is_the_head_of_the_path_identity() {
        let parent = PathId::entry("plan");
        for slot in [0, 1, 7, u32::MAX] {
            assert_eq!(parent.child(slot).identity_u64(), compute_order_key(parent.as_str(), slot));
        }
        assert_eq!(PathId::entry("start").identity_u64(), compute_order_key("start", 0));
    }

    #[test]
    fn path_and_seed_golden_vectors() {
        let e = PathId::entry("plan");
        assert_eq!(e.as_str(), "774b1681e08e1d5f688743e7dcfb80f347560c93b6346fbe2ce6b2aba04654a7");
        assert_eq!(e.child(2).as_str(), "02c2403a6c1924a26ab0811b768885948d7101ff98ff4da1f56a49157d2116d8");
        assert_eq!(derive_run_seed("run-42"), 0x0fd5_152a_61f2_6f78);
    }

    #[test]
    fn structured_order_key_packs_rank_then_slot() {
        let k = OrderKey::new(3, 7);
        assert_eq!((k.rank(), k.slot()), (3, 7));
        assert!(OrderKey::new(0, u32::MAX) < OrderKey::new(1, 0));
        assert!(OrderKey::new(2, 0) < OrderKey::new(2, 1));
    }

    #[test]
    fn paths_chain_and_differ_per_slot() {
        let e = PathId::entry("plan");
        assert_eq!(e.as_str().len(), 64);
        assert_ne!(e.child(0), e.child(1));
        assert_ne!(e.child(0).child(0), e.child(0));
        assert_eq!(e.child(2), PathId::entry("plan").child(2));
    }

    #[test]
    fn paths_serialize_as_their_hex_and_reject_anything_else() {
        let p = PathId::entry("plan").child(3);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, format!("\"{}\"", p.as_str()));
        assert_eq!(serde_json::from_str::<PathId>(&json).unwrap(), p);
        for bad in ["\"abc\"", &json.to_uppercase(), &json.replace('a', "g"), "17"] {
            assert!(serde_json::from_str::<PathId>(bad).is_err(), "{bad} must not decode");
        }
    }

    #[test]
    fn sorted_and_unsorted_items_give_one_key() {
        let items = [KeyItem { node_id: "b", order_key: 2 }, KeyItem { node_id: "a", order_key: 1 }];
        let mut sorted = items;
        sorted.reverse();
        assert_eq!(idempotency_key("r", 4, &items, b"{}"), idempotency_key("r", 4, &sorted, b"{}"));
    }
}
