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
    /// Whether merging in any order gives the same result (what [`ConflictPolicy::Crdt`] requires).
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
    /// Concurrent writes are only allowed on commutative strategies (sum, max, min, union); any other
    /// field written twice in a step is a conflict, so the merge result cannot depend on order.
    Crdt,
}

/// Two writers of one field in one step that the [`ConflictPolicy`] forbids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "merge conflict at step {step}: field `{field}` written by `{first_node}` (order key {first_key}) and \
     `{second_node}` (order key {second_key}) under ConflictPolicy::{policy:?}; give the field a merge \
     strategy (`#[reduce(append | sum | max | min | union | with = f)]`), let one node write it, or use \
     ConflictPolicy::LastWriterWins"
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
/// Returns the number of tolerated conflicts (last-writer-wins overrides).
///
/// # Errors
///
/// [`MergeFailure::Conflict`] when the policy forbids a concurrent write, [`MergeFailure::Merge`] when a
/// reducer fails. On error the state may be partly merged; the engine discards it.
pub fn merge_step<S: Reducer>(
    state: &mut S,
    step: u64,
    deltas: Vec<(Writer<'_>, S::Delta)>,
    policy: ConflictPolicy,
) -> Result<u64, MergeFailure> {
    let mut tolerated = 0u64;
    if deltas.len() > 1 {
        let mut first: BTreeMap<&'static str, (usize, Strategy)> = BTreeMap::new();
        for (i, (_, delta)) in deltas.iter().enumerate() {
            let mut clash: Option<(&'static str, usize)> = None;
            delta.writes(&mut |w| {
                if clash.is_some() {
                    return;
                }
                match first.get(w.field) {
                    None => {
                        first.insert(w.field, (i, w.strategy));
                    }
                    Some(&(j, strategy)) => {
                        let forbidden = match policy {
                            ConflictPolicy::Fail => strategy == Strategy::Overwrite,
                            ConflictPolicy::LastWriterWins => false,
                            ConflictPolicy::Crdt => !strategy.is_commutative(),
                        };
                        if forbidden {
                            clash = Some((w.field, j));
                        } else if strategy == Strategy::Overwrite {
                            tolerated += 1;
                        }
                    }
                }
            });
            if let Some((field, j)) = clash {
                let a = &deltas[j].0;
                let b = &deltas[i].0;
                tracing::warn!(step, field, first = a.node, second = b.node, "merge conflict");
                return Err(MergeFailure::Conflict(ConflictError {
                    step,
                    field,
                    first_node: a.node.to_owned(),
                    first_key: a.order_key,
                    second_node: b.node.to_owned(),
                    second_key: b.order_key,
                    policy,
                }));
            }
        }
        if tolerated > 0 {
            tracing::debug!(step, tolerated, "last-writer-wins overrides");
        }
    }
    for (writer, delta) in deltas {
        state.apply(delta).map_err(|e| MergeFailure::Merge { node: writer.node.to_owned(), error: e })?;
    }
    Ok(tolerated)
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
