//! State, deltas and their merge.
//!
//! A node never mutates the state: it returns a [`Delta`]. At the step barrier the engine applies the
//! deltas of every item of the step with [`Reducer::apply`], one after the other in ascending order key,
//! never in completion order. Reducers must be pure (the `#[reducer]` macro checks the common
//! violations), so a state is a function of the input and the committed deltas alone.
//!
//! Concurrent writes are detected per field: every delta reports the fields it writes and their
//! [`Strategy`]; [`ConflictPolicy`] decides what two writers of one field in one step mean.

pub mod merge;

use std::collections::BTreeMap;
use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::keys::OrderKey;

/// A workflow's state: how a [`Delta`] is merged into it.
///
/// Usually derived with `#[reducer]`; written by hand it looks like this:
///
/// ```
/// use graph_runtime::state::{Delta, FieldWrite, Reducer, Strategy, merge};
/// use graph_runtime::MergeError;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Clone, Debug, Default, Serialize, Deserialize)]
/// struct Count { n: u64, log: Vec<String> }
///
/// #[derive(Clone, Debug, Default, Serialize, Deserialize)]
/// struct CountDelta { n: Option<u64>, log: Option<Vec<String>> }
///
/// impl Delta for CountDelta {
///     fn writes(&self, visit: &mut dyn FnMut(FieldWrite)) {
///         if self.n.is_some() { visit(FieldWrite::new("n", Strategy::Sum)) }
///         if self.log.is_some() { visit(FieldWrite::new("log", Strategy::Append)) }
///     }
/// }
///
/// impl Reducer for Count {
///     type Delta = CountDelta;
///     fn apply(&mut self, d: CountDelta) -> Result<(), MergeError> {
///         if let Some(v) = d.n { merge::sum(&mut self.n, v, "n")? }
///         if let Some(v) = d.log { merge::append(&mut self.log, v, "log")? }
///         Ok(())
///     }
/// }
///
/// let mut s = Count::default();
/// s.apply(CountDelta { n: Some(2), log: Some(vec!["a".into()]) }).unwrap();
/// assert_eq!((s.n, s.log.len()), (2, 1));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a graph state",
    label = "this type has no `Reducer` impl",
    note = "put `#[reducer]` on the state struct, or implement `graph_runtime::state::Reducer` by hand"
)]
pub trait Reducer: Clone + Debug + Send + Sync + Serialize + DeserializeOwned + 'static {
    /// The partial update a node returns.
    type Delta: Delta;

    /// Merges one delta into the state, in place. Must be pure and deterministic.
    ///
    /// # Errors
    ///
    /// A merge that cannot be represented (for example an integer sum that overflows).
    fn apply(&mut self, delta: Self::Delta) -> Result<(), MergeError>;
}

/// A partial update of a [`Reducer`] state: one optional part per field.
pub trait Delta: Clone + Debug + Default + Send + Sync + Serialize + DeserializeOwned + 'static {
    /// Reports every field this delta writes, with the field's merge strategy.
    fn writes(&self, visit: &mut dyn FnMut(FieldWrite));

    /// True when the delta writes nothing.
    fn is_empty(&self) -> bool {
        let mut any = false;
        self.writes(&mut |_| any = true);
        !any
    }
}

/// The unit delta for states that take no updates (tests, pure routers).
impl Delta for () {
    fn writes(&self, _visit: &mut dyn FnMut(FieldWrite)) {}
}

/// One field written by a delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldWrite {
    /// The field's name, as written in the state struct.
    pub field: &'static str,
    /// How the field merges.
    pub strategy: Strategy,
}

impl FieldWrite {
    /// A write of `field` merged with `strategy`.
    pub const fn new(field: &'static str, strategy: Strategy) -> Self {
        FieldWrite { field, strategy }
    }
}

/// How a field merges a written value into the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Strategy {
    /// Replace the value (the default). Two writers in one step are a conflict under
    /// [`ConflictPolicy::Fail`].
    Overwrite,
    /// Append to a sequence (`Vec`, `VecDeque`, `String`): order-sensitive, merged in order-key order.
    Append,
    /// Add (integers with overflow checking, floats, durations).
    Sum,
    /// Keep the larger.
    Max,
    /// Keep the smaller.
    Min,
    /// Set or map union.
    Union,
    /// A user merge function (`#[reduce(with = f)]`); assumed order-sensitive.
    Custom,
}

impl Strategy {
    /// Whether merging in any order can give the same result (what [`ConflictPolicy::Crdt`] requires):
    /// sum, max, min and union. Two cases of these still depend on order, and `Crdt` checks the written
    /// values for them: a `sum` of floats (float addition is not associative) and a map `union` whose
    /// writers write one key with different values (the last applied wins).
    pub fn is_commutative(self) -> bool {
        matches!(self, Strategy::Sum | Strategy::Max | Strategy::Min | Strategy::Union)
    }
}

/// What two items of one step writing the same field mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ConflictPolicy {
    /// Two writers of one overwrite field is an error naming the field and both nodes (default).
    #[default]
    Fail,
    /// The writer with the highest order key wins, deterministically.
    LastWriterWins,
    /// Concurrent writes are only allowed where the merge result cannot depend on their order: fields
    /// merged by sum (of integers or durations), max, min, or union (of sets, or of maps whose writers
    /// agree on every key they both write). Anything else written twice in a step is a conflict: other
    /// strategies, a sum of floats, a map union where two writers give one key different values.
    Crdt,
}

/// Two writers of one field in one step that the [`ConflictPolicy`] forbids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "merge conflict at step {step}: field `{field}` written by `{first_node}` (order key {first_key}) and \
     `{second_node}` (order key {second_key}) under ConflictPolicy::{policy:?}{}; give the field a merge \
     strategy (`#[reduce(append | sum | max | min | union | with = f)]`), let one node write it, or use \
     ConflictPolicy::LastWriterWins", detail.as_ref().map(|d| format!(" ({d})")).unwrap_or_default()
)]
pub struct ConflictError {
    /// The step whose merge conflicted.
    pub step: u64,
    /// The field.
    pub field: &'static str,
    /// The earlier writer (lower order key).
    pub first_node: String,
    /// Its order key.
    pub first_key: OrderKey,
    /// The later writer.
    pub second_node: String,
    /// Its order key.
    pub second_key: OrderKey,
    /// The policy in force.
    pub policy: ConflictPolicy,
    /// Why the written values cannot merge in either order, when the strategy alone would allow it.
    pub detail: Option<String>,
}

/// A reducer could not merge a delta.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// A `sum` overflowed.
    #[error("`sum` overflowed field `{field}`; use a wider integer type")]
    Overflow {
        /// The field.
        field: &'static str,
    },
    /// A custom merge function failed.
    #[error("custom merge of field `{field}` failed: {message}")]
    Custom {
        /// The field.
        field: &'static str,
        /// What the merge function said.
        message: String,
    },
}

/// Who wrote a delta: used to name both sides of a conflict.
#[derive(Debug, Clone)]
pub struct Writer<'a> {
    /// The node that returned the delta.
    pub node: &'a str,
    /// The item's order key.
    pub order_key: OrderKey,
}

/// Merges `deltas` (already sorted by ascending order key) into `state`, enforcing `policy`.
///
/// Returns the number of tolerated conflicts (last-writer-wins overrides). A step of one delta is
/// applied as it comes (nothing to check it against); several are gathered and checked first.
///
/// # Errors
///
/// [`MergeFailure::Conflict`] when the policy forbids a concurrent write, [`MergeFailure::Merge`] when a
/// reducer fails. On error the state may be partly merged; the engine discards it.
pub fn merge_step<'a, S: Reducer, I>(
    state: &mut S,
    step: u64,
    deltas: I,
    policy: ConflictPolicy,
) -> Result<u64, MergeFailure>
where
    I: IntoIterator<Item = (Writer<'a>, S::Delta)>,
    I::IntoIter: ExactSizeIterator,
{
    let apply = |state: &mut S, (writer, delta): (Writer<'_>, S::Delta)| {
        state.apply(delta).map_err(|e| MergeFailure::Merge { node: writer.node.to_owned(), error: e })
    };
    let deltas = deltas.into_iter();
    if deltas.len() <= 1 {
        for d in deltas {
            apply(state, d)?;
        }
        return Ok(0);
    }
    let deltas: Vec<_> = deltas.collect();
    let tolerated = check_writers(step, &deltas, policy)?;
    if tolerated > 0 {
        tracing::debug!(step, tolerated, "last-writer-wins overrides");
    }
    for d in deltas {
        apply(state, d)?;
    }
    Ok(tolerated)
}

/// Applies `policy` to the fields written by more than one delta; returns the tolerated overrides.
fn check_writers<D: Delta>(
    step: u64,
    deltas: &[(Writer<'_>, D)],
    policy: ConflictPolicy,
) -> Result<u64, MergeFailure> {
    let conflict = |field: &'static str, i: usize, j: usize, detail: Option<String>| {
        let (a, b) = (&deltas[i].0, &deltas[j].0);
        tracing::warn!(step, field, first = a.node, second = b.node, "merge conflict");
        MergeFailure::Conflict(ConflictError {
            step,
            field,
            first_node: a.node.to_owned(),
            first_key: a.order_key,
            second_node: b.node.to_owned(),
            second_key: b.order_key,
            policy,
            detail,
        })
    };
    let mut tolerated = 0u64;
    // Per field: its strategy and its writers, in order.
    let mut writers: BTreeMap<&'static str, (Strategy, Vec<usize>)> = BTreeMap::new();
    for (i, (_, delta)) in deltas.iter().enumerate() {
        let mut clash: Option<(&'static str, usize)> = None;
        delta.writes(&mut |w| {
            let (strategy, who) = writers.entry(w.field).or_insert((w.strategy, Vec::new()));
            if let (Some(&first), None) = (who.first(), clash) {
                let forbidden = match policy {
                    ConflictPolicy::Fail => *strategy == Strategy::Overwrite,
                    ConflictPolicy::LastWriterWins => false,
                    ConflictPolicy::Crdt => !strategy.is_commutative(),
                };
                if forbidden {
                    clash = Some((w.field, first));
                } else if *strategy == Strategy::Overwrite {
                    tolerated += 1;
                }
            }
            who.push(i);
        });
        if let Some((field, first)) = clash {
            return Err(conflict(field, first, i, None));
        }
    }
    if policy == ConflictPolicy::Crdt {
        let shared: Vec<_> = writers.into_iter().filter(|(_, (_, who))| who.len() > 1).collect();
        if !shared.is_empty() {
            let values: Vec<serde_json::Value> =
                deltas.iter().map(|(_, d)| serde_json::to_value(d).unwrap_or_default()).collect();
            for (field, (strategy, who)) in shared {
                if let Some((i, j, detail)) = order_dependence(field, strategy, &who, &values) {
                    return Err(conflict(field, i, j, Some(detail)));
                }
            }
        }
    }
    Ok(tolerated)
}

/// For a commutative strategy written by several deltas (`values` are the deltas as JSON): two writers
/// whose values would merge differently in the other order, and why.
fn order_dependence(
    field: &str,
    strategy: Strategy,
    who: &[usize],
    values: &[serde_json::Value],
) -> Option<(usize, usize, String)> {
    let written = |i: usize| values[i].get(field);
    match strategy {
        Strategy::Sum => {
            let float = who.iter().position(|&i| written(i).is_none_or(|v| v.is_f64()))?;
            let other = if float == 0 { who[1] } else { who[0] };
            Some((
                other.min(who[float]),
                other.max(who[float]),
                "a sum of floats depends on the order".into(),
            ))
        }
        Strategy::Union => {
            for (x, &i) in who.iter().enumerate() {
                for &j in &who[x + 1..] {
                    match (written(i), written(j)) {
                        (Some(serde_json::Value::Object(a)), Some(serde_json::Value::Object(b))) => {
                            if let Some(k) = a.keys().find(|k| b.get(*k).is_some_and(|v| v != &a[*k])) {
                                let detail = format!("both write key `{k}` with different values");
                                return Some((i, j, detail));
                            }
                        }
                        (Some(serde_json::Value::Array(_)), Some(serde_json::Value::Array(_))) => {}
                        // The field's JSON could not be found or read: merged in order, so not known to commute.
                        _ => return Some((i, j, "its written values could not be compared".into())),
                    }
                }
            }
            None
        }
        _ => None,
    }
}

/// Why a step's merge failed.
#[derive(Debug)]
pub enum MergeFailure {
    /// Two writers of a field the policy does not let share.
    Conflict(ConflictError),
    /// A reducer error while applying `node`'s delta.
    Merge {
        /// The node whose delta failed to merge.
        node: String,
        /// The reducer's error.
        error: MergeError,
    },
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::{any, prop_assert_eq, proptest};
    use proptest::strategy::Strategy as _;
    use serde::{Deserialize, Serialize};

    use super::*;

    /// One field per commutative strategy, including the two order-dependent cases `Crdt` checks.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    struct S {
        n: u64,
        hi: u8,
        lo: u8,
        set: BTreeSet<u8>,
        map: BTreeMap<u8, u8>,
        f: f64,
    }

    #[derive(Clone, Debug, Default, Serialize, Deserialize)]
    struct D {
        #[serde(skip_serializing_if = "Option::is_none")]
        n: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        hi: Option<u8>,
        #[serde(skip_serializing_if = "Option::is_none")]
        lo: Option<u8>,
        #[serde(skip_serializing_if = "Option::is_none")]
        set: Option<BTreeSet<u8>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        map: Option<BTreeMap<u8, u8>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        f: Option<f64>,
    }

    impl Delta for D {
        fn writes(&self, visit: &mut dyn FnMut(FieldWrite)) {
            let parts = [
                (self.n.is_some(), "n", Strategy::Sum),
                (self.hi.is_some(), "hi", Strategy::Max),
                (self.lo.is_some(), "lo", Strategy::Min),
                (self.set.is_some(), "set", Strategy::Union),
                (self.map.is_some(), "map", Strategy::Union),
                (self.f.is_some(), "f", Strategy::Sum),
            ];
            for (set, field, strategy) in parts {
                if set {
                    visit(FieldWrite::new(field, strategy));
                }
            }
        }
    }

    impl Reducer for S {
        type Delta = D;
        fn apply(&mut self, d: D) -> Result<(), MergeError> {
            if let Some(v) = d.n {
                merge::sum(&mut self.n, v, "n")?;
            }
            if let Some(v) = d.hi {
                merge::max(&mut self.hi, v, "hi")?;
            }
            if let Some(v) = d.lo {
                merge::min(&mut self.lo, v, "lo")?;
            }
            if let Some(v) = d.set {
                merge::union(&mut self.set, v, "set")?;
            }
            if let Some(v) = d.map {
                merge::union(&mut self.map, v, "map")?;
            }
            if let Some(v) = d.f {
                merge::sum(&mut self.f, v, "f")?;
            }
            Ok(())
        }
    }

    fn delta() -> impl proptest::strategy::Strategy<Value = D> {
        use proptest::collection::{btree_map, btree_set};
        use proptest::option::weighted;
        (
            weighted(0.5, 0u64..1000),
            weighted(0.5, any::<u8>()),
            weighted(0.5, any::<u8>()),
            weighted(0.5, btree_set(0u8..8, 0..4)),
            // Few keys and values, so writers often share a key, with equal or different values.
            weighted(0.6, btree_map(0u8..4, 0u8..3, 0..3)),
            weighted(0.2, -1e6f64..1e6),
        )
            .prop_map(|(n, hi, lo, set, map, f)| D { n, hi, lo, set, map, f })
    }

    fn merged(deltas: &[D]) -> Result<S, MergeFailure> {
        let mut state = S { lo: u8::MAX, f: 0.1, ..S::default() };
        let names: Vec<String> = (0..deltas.len()).map(|i| format!("w{i}")).collect();
        let writers = deltas
            .iter()
            .enumerate()
            .map(|(i, d)| (Writer { node: &names[i], order_key: OrderKey::new(i as u32, 0) }, d.clone()));
        merge_step(&mut state, 1, writers.collect::<Vec<_>>(), ConflictPolicy::Crdt).map(|_| state)
    }

    proptest! {
        /// Under `Crdt` the merge either refuses or gives one state whatever the order of the writers,
        /// maps with shared keys and float sums included; and it refuses exactly when an order could
        /// change the state.
        #[test]
        fn crdt_merges_are_order_independent_or_refused(deltas in proptest::collection::vec(delta(), 2..5)) {
            let forward = merged(&deltas);
            let reversed: Vec<D> = deltas.iter().rev().cloned().collect();
            let backward = merged(&reversed);
            prop_assert_eq!(forward.is_ok(), backward.is_ok(), "refusal does not depend on the order");
            if let (Ok(a), Ok(b)) = (&forward, &backward) {
                prop_assert_eq!(a, b);
            }
            // What makes it refuse: a map key written twice with different values, or two float sums.
            let mut seen: BTreeMap<u8, u8> = BTreeMap::new();
            let clash = deltas.iter().flat_map(|d| d.map.iter().flatten()).any(|(k, v)| *seen.entry(*k).or_insert(*v) != *v);
            let floats = deltas.iter().filter(|d| d.f.is_some()).count() > 1;
            prop_assert_eq!(forward.is_err(), clash || floats, "{:?}", forward.err());
        }
    }

    #[test]
    fn a_map_key_written_twice_with_different_values_names_the_key() {
        let a = D { map: Some(BTreeMap::from([(1, 1)])), ..D::default() };
        let b = D { map: Some(BTreeMap::from([(1, 2), (3, 3)])), ..D::default() };
        let Err(MergeFailure::Conflict(e)) = merged(&[a.clone(), b]) else { panic!("a conflict") };
        assert_eq!((e.field, e.first_node.as_str(), e.second_node.as_str()), ("map", "w0", "w1"));
        assert!(e.to_string().contains("both write key `1` with different values"), "{e}");
        // The same value for the same key commutes.
        let c = D { map: Some(BTreeMap::from([(1, 1), (2, 0)])), ..D::default() };
        assert!(merged(&[a, c]).is_ok());
    }
}
