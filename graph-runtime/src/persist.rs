//! How the engine persists a run: the checkpoint a step commits, built from the state and the step's
//! deltas ([`draft`]); the state rebuilt from a stored delta chain and verified against its hash
//! ([`load_state`]); the copies a fork writes ([`fork_copies`]); and the partial step an interrupt
//! leaves ([`PendingStep`]). The store keeps the records (`graph_store::record`); deciding how a state
//! is stored, and reading it back, is the engine's.
//!
//! # Storage follows the delta
//!
//! Most checkpoints store only the step's deltas (`StateRepr::Delta`), with a full snapshot
//! (`StateRepr::Full`) at step 0, whenever the delta bytes since the last snapshot would outweigh the
//! state, and at least every [`MAX_CHAIN`] steps. Bytes written per step follow the delta, and loading
//! any step applies at most `MAX_CHAIN` deltas. Every checkpoint carries `state_hash`, which
//! `load_state` checks the rebuilt state against: a damaged or missing link is an error, never a wrong
//! state.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, StoreError};
use crate::events::ChainHead;
use crate::keys::{hex, idempotency_key_of_sorted, sha256_parts};
use crate::state::Reducer;
use crate::store::record::{SCHEMA_VERSION, seal, unseal};
use crate::store::{Checkpoint, OutboxRow, StateRepr, Store, WaitingJoin, WorkItem};

/// At most this many deltas between two snapshots, so loading a state applies a bounded number of them.
pub(crate) const MAX_CHAIN: u64 = 1024;

// ---------------------------------------------------------------------------------------------------
// Building a checkpoint
// ---------------------------------------------------------------------------------------------------

/// Where a run's delta chain stands: the snapshot it starts from and the delta bytes written since.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Chain {
    base: u64,
    delta_bytes: usize,
}

impl Chain {
    /// The chain as it stands after a stored checkpoint.
    pub(crate) async fn after(store: &dyn Store, cp: &Checkpoint) -> Result<Chain, Error> {
        Ok(match &cp.state {
            StateRepr::Full(_) => Chain { base: cp.step, delta_bytes: 0 },
            StateRepr::Delta { base, .. } => {
                let links = store.checkpoints(&cp.run_id, *base + 1, cp.step).await?;
                Chain { base: *base, delta_bytes: links.iter().map(|c| c.state.len()).sum() }
            }
        })
    }

    /// How checkpoint `step` stores its state, given the full state's bytes and the step's delta bytes
    /// (`None` at step 0): a delta while the chain is short and lighter than the state, else a snapshot
    /// that starts a new chain.
    fn repr(&mut self, step: u64, state_json: &[u8], deltas: Option<Vec<u8>>) -> StateRepr {
        match deltas {
            Some(deltas)
                if step - self.base < MAX_CHAIN && self.delta_bytes + deltas.len() <= state_json.len() =>
            {
                self.delta_bytes += deltas.len();
                StateRepr::Delta { base: self.base, deltas }
            }
            _ => {
                *self = Chain { base: step, delta_bytes: 0 };
                StateRepr::Full(state_json.to_vec())
            }
        }
    }
}

/// What a step commits, before it is encoded.
pub(crate) struct Draft<'a, S> {
    pub(crate) run_id: &'a Arc<str>,
    pub(crate) step: u64,
    pub(crate) state: &'a S,
    /// The step's deltas as [`delta_bytes`] wrote them; `None` for the run's first checkpoint.
    pub(crate) deltas: Option<Vec<u8>>,
    pub(crate) frontier: Vec<WorkItem>,
    pub(crate) waiting: Vec<WaitingJoin>,
    pub(crate) outbox: Vec<OutboxRow>,
    pub(crate) seed: u64,
    pub(crate) label: Option<String>,
    pub(crate) fingerprint: &'a Arc<str>,
    /// The time the checkpoint records, ms since the Unix epoch: the engine's clock, never before the
    /// previous checkpoint's (`Engine::step_time`), or a replay's recorded time.
    pub(crate) at_ms: u64,
    /// The event-log head the checkpoint is committed on.
    pub(crate) event_head: Option<ChainHead>,
}

/// The bytes a step's deltas are stored as: a canonical JSON array (maps sorted by key), in the order
/// given (ascending order key).
pub(crate) fn delta_bytes<'d, D: Serialize + 'd>(
    run_id: &str,
    deltas: impl Iterator<Item = &'d D> + Clone,
) -> Result<Vec<u8>, Error> {
    /// The deltas as a JSON array, serialized from the iterator (no vector of them).
    struct Seq<I>(I);
    impl<'d, D: Serialize + 'd, I: Iterator<Item = &'d D> + Clone> Serialize for Seq<I> {
        fn serialize<Z: serde::Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
            s.collect_seq(self.0.clone())
        }
    }
    crate::canonical::to_vec(&Seq(deltas)).map_err(|source| Error::Serialization {
        run: run_id.to_owned(),
        what: "a delta",
        source,
    })
}

/// The canonical bytes of a state (see `crate::canonical`): what its hash and the idempotency key are of.
fn state_bytes<S: Serialize>(run_id: &str, state: &S) -> Result<Vec<u8>, Error> {
    crate::canonical::to_vec(state).map_err(state_error(run_id))
}

/// The error of a state that does not serialize, or does not read back from its bytes.
fn state_error(run_id: &str) -> impl FnOnce(serde_json::Error) -> Error + '_ {
    move |source| Error::Serialization { run: run_id.to_owned(), what: "the state", source }
}

/// Runs `f` over the canonical bytes of `state`, written into a buffer this thread keeps for the next
/// call: a step's state bytes are hashed and, at most steps, not stored (the deltas are), so they need
/// no allocation of their own. Calls may nest (each takes a buffer of its own); buffers past 64 KiB are
/// not kept.
fn with_state_bytes<S: Serialize, R>(
    run_id: &str,
    state: &S,
    f: impl FnOnce(&[u8]) -> Result<R, Error>,
) -> Result<R, Error> {
    const KEPT: usize = 64 * 1024;
    thread_local!(static BUFFERS: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) });
    let mut buf = BUFFERS.with_borrow_mut(Vec::pop).unwrap_or_default();
    buf.clear();
    let bytes = crate::canonical::to_vec_in(buf, state).map_err(state_error(run_id))?;
    let out = f(&bytes);
    if bytes.capacity() <= KEPT {
        BUFFERS.with_borrow_mut(|b| b.push(bytes));
    }
    out
}

/// Builds checkpoint `draft.step`: the full state's canonical JSON feeds the idempotency key and the
/// state hash; what is stored is the step's deltas unless the chain calls for a snapshot.
///
/// A snapshot is also where a state whose bytes are not a function of its value is caught: it must
/// serialize to the same bytes twice, and again after a round trip through those bytes (a `HashSet`
/// hidden in a user type, or a custom `Serialize` that writes a counter, fails one or the other).
pub(crate) fn draft<S: Reducer>(draft: Draft<'_, S>, chain: &mut Chain) -> Result<Checkpoint, Error> {
    let Draft {
        run_id,
        step,
        state,
        deltas,
        frontier,
        waiting,
        outbox,
        seed,
        label,
        fingerprint,
        at_ms,
        event_head,
    } = draft;
    let (idempotency_key, state_hash, repr) = with_state_bytes(run_id, state, |state_json| {
        // The frontier is sorted by order key, and order keys are unique within a step.
        let idempotency_key = idempotency_key_of_sorted(
            run_id,
            step,
            frontier.iter().map(|w| (&*w.node, w.order_key.0)),
            waiting.iter().map(|w| (&*w.node, w.arrived.iter().map(|a| &**a))),
            state_json,
        );
        let state_hash = hex(&sha256_parts(&[state_json]));
        let repr = chain.repr(step, state_json, deltas);
        if let StateRepr::Full(bytes) = &repr {
            check_deterministic::<S>(run_id, step, state, bytes)?;
        }
        Ok((idempotency_key, state_hash, repr))
    })?;
    Ok(Checkpoint {
        run_id: run_id.clone(),
        step,
        timestamp_ms: at_ms,
        label,
        state: repr,
        state_hash,
        rng_seed: seed,
        frontier,
        waiting,
        outbox,
        idempotency_key,
        graph_fingerprint: fingerprint.clone(),
        event_head,
        schema_version: SCHEMA_VERSION,
    })
}

/// The state serializes to `bytes` again, and so does the state read back from `bytes`.
fn check_deterministic<S: Reducer>(run_id: &str, step: u64, state: &S, bytes: &[u8]) -> Result<(), Error> {
    let nondeterministic = |detail: &str| Error::NondeterministicState {
        run: run_id.to_owned(),
        step,
        detail: detail.to_owned(),
    };
    if !with_state_bytes(run_id, state, |again| Ok(again == bytes))? {
        return Err(nondeterministic("serializing it twice gave different bytes"));
    }
    let back: S = serde_json::from_slice(bytes).map_err(state_error(run_id))?;
    if !with_state_bytes(run_id, &back, |again| Ok(again == bytes))? {
        return Err(nondeterministic("the state read back from its bytes serializes to other bytes"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// Rebuilding a state
// ---------------------------------------------------------------------------------------------------

/// The full state of checkpoint `cp`: its snapshot plus the deltas after it, verified against the stored
/// state hash; and the chain it ends.
///
/// # Errors
///
/// `Corrupted` for a missing or damaged link, a state that does not decode or does not match its hash;
/// `UnsupportedSchemaVersion` for a record of a newer format; store errors.
pub(crate) async fn load_state<S: Reducer>(store: &dyn Store, cp: &Checkpoint) -> Result<(S, Chain), Error> {
    let corrupted =
        |step: u64, detail: String| Error::Store(StoreError::corrupted_record(&*cp.run_id, step, detail));
    check_version(cp)?;
    let (state, chain) = match &cp.state {
        StateRepr::Full(bytes) => {
            if hex(&sha256_parts(&[bytes])) != cp.state_hash {
                return Err(corrupted(cp.step, "the state does not match its hash".into()));
            }
            let state = serde_json::from_slice(bytes)
                .map_err(|e| corrupted(cp.step, format!("the state does not decode: {e}")))?;
            return Ok((state, Chain { base: cp.step, delta_bytes: 0 }));
        }
        StateRepr::Delta { base, .. } => {
            let links = store.checkpoints(&cp.run_id, *base, cp.step).await?;
            replay_chain::<S>(cp, *base, links).map_err(|(step, detail)| corrupted(step, detail))?
        }
    };
    // Every record of the chain passed its checksum, so bytes that differ now were not damaged on disk:
    // the state's serialization (or the reducer) is not a function of the value.
    if hex(&sha256_parts(&[&state_bytes(&cp.run_id, &state)?])) != cp.state_hash {
        return Err(Error::NondeterministicState {
            run: cp.run_id.to_string(),
            step: cp.step,
            detail: "the state rebuilt from its snapshot and deltas serializes to other bytes than when it \
                     was committed"
                .into(),
        });
    }
    Ok((state, chain))
}

/// Applies the chain `links` (the snapshot at `base`, then one delta per step up to `cp.step`).
/// `Err((step, what))` names the first bad link.
fn replay_chain<S: Reducer>(
    cp: &Checkpoint,
    base: u64,
    links: Vec<Checkpoint>,
) -> Result<(S, Chain), (u64, String)> {
    let mut links = links.into_iter();
    let mut state: S = match links.next() {
        Some(Checkpoint { step, state: StateRepr::Full(bytes), .. }) if step == base => {
            serde_json::from_slice(&bytes)
                .map_err(|e| (base, format!("the snapshot does not decode: {e}")))?
        }
        _ => return Err((cp.step, format!("its snapshot at step {base} is missing"))),
    };
    let mut delta_bytes = 0;
    let mut expected = base + 1;
    for link in links {
        check_version(&link).map_err(|e| (link.step, e.to_string()))?;
        let StateRepr::Delta { deltas, .. } = &link.state else {
            return Err((link.step, "a snapshot inside a delta chain".into()));
        };
        if link.step != expected {
            return Err((expected, "missing from a delta chain".into()));
        }
        let items: Vec<S::Delta> = serde_json::from_slice(deltas)
            .map_err(|e| (link.step, format!("the deltas do not decode: {e}")))?;
        for d in items {
            state.apply(d).map_err(|e| (link.step, format!("a stored delta does not apply: {e}")))?;
        }
        delta_bytes += deltas.len();
        expected += 1;
    }
    if expected != cp.step + 1 {
        return Err((expected, "missing from a delta chain".into()));
    }
    Ok((state, Chain { base, delta_bytes }))
}

// ---------------------------------------------------------------------------------------------------
// Forks
// ---------------------------------------------------------------------------------------------------

/// Copies of the consecutive checkpoints `cps` (from a snapshot on) for a new run `run_id`: the same
/// states, frontiers, seeds and times, re-keyed for the new run (an idempotency key names its run), with
/// no outbox rows (the parent delivered them) and no event head (the fork's log starts with them).
/// Every state is rebuilt on the way and checked against its hash.
///
/// # Errors
///
/// `Corrupted` for a damaged or missing link; `UnsupportedSchemaVersion`.
pub(crate) fn fork_copies<S: Reducer>(
    cps: &[Checkpoint],
    run_id: &Arc<str>,
) -> Result<Vec<Checkpoint>, Error> {
    let mut state: Option<S> = None;
    let mut out = Vec::with_capacity(cps.len());
    for cp in cps {
        check_version(cp)?;
        let corrupted =
            |detail: String| Error::Store(StoreError::corrupted_record(&*cp.run_id, cp.step, detail));
        let next: S = match (&cp.state, state.take()) {
            (StateRepr::Full(bytes), _) => serde_json::from_slice(bytes)
                .map_err(|e| corrupted(format!("the state does not decode: {e}")))?,
            (StateRepr::Delta { deltas, .. }, Some(mut s))
                if out.last().is_some_and(|p: &Checkpoint| p.step + 1 == cp.step) =>
            {
                let items: Vec<S::Delta> = serde_json::from_slice(deltas)
                    .map_err(|e| corrupted(format!("the deltas do not decode: {e}")))?;
                for d in items {
                    s.apply(d).map_err(|e| corrupted(format!("a stored delta does not apply: {e}")))?;
                }
                s
            }
            (StateRepr::Delta { .. }, _) => {
                return Err(corrupted("a link of its delta chain is missing".into()));
            }
        };
        let state_json = state_bytes(run_id, &next)?;
        if hex(&sha256_parts(&[&state_json])) != cp.state_hash {
            return Err(corrupted("the state does not match its hash".into()));
        }
        let mut copy = cp.clone();
        copy.run_id = run_id.clone();
        copy.outbox = Vec::new();
        copy.event_head = None;
        copy.idempotency_key = idempotency_key_of_sorted(
            run_id,
            cp.step,
            cp.frontier.iter().map(|w| (&*w.node, w.order_key.0)),
            cp.waiting.iter().map(|w| (&*w.node, w.arrived.iter().map(|a| &**a))),
            &state_json,
        );
        out.push(copy);
        state = Some(next);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------
// Pending steps
// ---------------------------------------------------------------------------------------------------

/// A step an interrupt stopped before its barrier: what its finished items produced and the inputs
/// given so far to its interrupted ones. Stored with the `Interrupted` status (`Store::set_status`'s
/// `pending`), read back when the run resumes, cleared by the step's commit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct PendingStep {
    /// The checkpoint whose frontier the step runs.
    pub(crate) step: u64,
    /// Its items that finished or took input, by path.
    pub(crate) items: Vec<PendingItem>,
}

/// One item of a [`PendingStep`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PendingItem {
    /// The item's path identity.
    pub(crate) path: String,
    /// What it produced, once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) done: Option<DoneItem>,
    /// The inputs given to its `interrupt` calls so far, by call index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) inputs: Vec<serde_json::Value>,
    /// The due time of each timed wait it asked (`(call index, ms since the epoch)`): a sleep or a
    /// deadline asked again when the step runs again keeps its first time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) wakes: Vec<(u32, u64)>,
}

/// A finished item's output, as stored in a pending step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DoneItem {
    /// Its delta, as JSON.
    pub(crate) delta: serde_json::Value,
    /// Its route.
    pub(crate) route: StoredRoute,
    /// What it emitted, for the outbox.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) emits: Vec<(String, serde_json::Value)>,
    /// The effects it used, for the event log.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) effects: Vec<crate::env::EffectNote>,
}

/// A [`crate::node::Route`], as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum StoredRoute {
    Declared,
    Goto(u32),
    Fork(Vec<(u32, Option<serde_json::Value>)>),
    End,
}

const PENDING_MAGIC: &[u8; 4] = b"GRPS";

impl PendingStep {
    /// The entry of the item at `path`, added when missing.
    pub(crate) fn item_mut(&mut self, path: &str) -> &mut PendingItem {
        let at = match self.items.iter().position(|i| i.path == path) {
            Some(at) => at,
            None => {
                self.items.push(PendingItem {
                    path: path.to_owned(),
                    done: None,
                    inputs: Vec::new(),
                    wakes: Vec::new(),
                });
                self.items.len() - 1
            }
        };
        &mut self.items[at]
    }

    /// Its stored bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        seal(PENDING_MAGIC, &serde_json::to_vec(self).expect("a pending step is plain data"))
    }

    /// Reads [`PendingStep::encode`]'s bytes.
    pub(crate) fn decode(bytes: &[u8]) -> Result<PendingStep, StoreError> {
        unseal(PENDING_MAGIC, bytes, "a pending step")
    }
}

/// What the fuzz targets in `fuzz/` call (feature `fuzzing`; not part of the API).
#[cfg(feature = "fuzzing")]
pub(crate) mod fuzz {
    use super::PendingStep;

    /// A pending step's stored bytes, arbitrary: decoded or refused; when decoded, encoding it again and
    /// decoding that gives the same step. Returns whether it decoded.
    pub fn pending_step(bytes: &[u8]) -> bool {
        let Ok(p) = PendingStep::decode(bytes) else { return false };
        assert_eq!(PendingStep::decode(&p.encode()).expect("its own encoding decodes"), p);
        true
    }
}

fn check_version(cp: &Checkpoint) -> Result<(), Error> {
    if cp.schema_version == SCHEMA_VERSION {
        Ok(())
    } else {
        Err(Error::Store(StoreError::UnsupportedSchemaVersion {
            found: cp.schema_version,
            supported: SCHEMA_VERSION,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_snapshots_when_deltas_outweigh_the_state_or_grow_long() {
        let mut chain = Chain::default();
        assert!(matches!(chain.repr(0, &[0; 100], None), StateRepr::Full(_)));
        assert!(matches!(chain.repr(1, &[0; 100], Some(vec![0; 60])), StateRepr::Delta { base: 0, .. }));
        // 60 + 60 > 100: a snapshot, and the chain restarts there.
        assert!(matches!(chain.repr(2, &[0; 100], Some(vec![0; 60])), StateRepr::Full(_)));
        assert_eq!(chain, Chain { base: 2, delta_bytes: 0 });
        for step in 3..2 + MAX_CHAIN {
            assert!(matches!(chain.repr(step, &[0; 100], Some(vec![])), StateRepr::Delta { base: 2, .. }));
        }
        assert!(matches!(chain.repr(2 + MAX_CHAIN, &[0; 100], Some(vec![])), StateRepr::Full(_)));
    }
}
