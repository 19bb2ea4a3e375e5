//! The stored form of a step, in one place: what a checkpoint holds, how its state is stored (in full or
//! as the step's deltas), how a state is rebuilt from a delta chain and verified against its hash, and the
//! byte envelope a record is written in.
//!
//! The engine hands this module states and deltas (`draft`) and gets states back (`load_state`); a
//! backend stores [`Checkpoint`]s, usually as the bytes of [`encode`] beside the columns it queries by
//! (run, step, idempotency key), and reads them back with [`decode`]. No backend builds or interprets
//! state bytes itself, so every backend stores exactly the same thing and a new backend writes rows, not
//! format logic.
//!
//! # Storage follows the delta
//!
//! Reducers are pure, so a step's state is the previous state with the step's deltas applied in order-key
//! order. Most checkpoints store only those deltas ([`StateRepr::Delta`]), with a full snapshot
//! ([`StateRepr::Full`]) at step 0, whenever the delta bytes since the last snapshot would outweigh the
//! state, and at least every [`MAX_CHAIN`] steps. Bytes written per step follow the delta, and loading any
//! step applies at most `MAX_CHAIN` deltas.
//!
//! # Verification
//!
//! Every checkpoint carries `state_hash`, the SHA-256 of its full state's JSON. `load_state` rebuilds the
//! state and checks it against that hash, so a damaged or missing link is an error, never a wrong state.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{OutboxRow, RunInfo, Store};
use crate::error::{Error, StoreError};
use crate::events::ChainHead;
use crate::keys::{OrderKey, PathId, hex, idempotency_key_of_sorted, sha256_parts};
use crate::state::Reducer;

/// The record format version this build writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// At most this many deltas between two snapshots, so loading a state applies a bounded number of them.
pub const MAX_CHAIN: u64 = 1024;

/// One work item of a frontier, as persisted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkItem {
    /// The node to run (shared with the graph's node table).
    pub node: Arc<str>,
    /// Its order key within the step.
    pub order_key: OrderKey,
    /// Its path identity.
    pub path: PathId,
    /// Its branch input, when forked with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<serde_json::Value>,
}

/// A wait-for-all join that has seen some of its predecessors deliver and waits for the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WaitingJoin {
    /// The join node.
    pub node: Arc<str>,
    /// The predecessors that delivered so far, in the graph's node order.
    pub arrived: Vec<Arc<str>>,
    /// The path identity its activation will have: that of the first route into it.
    pub path: PathId,
}

/// The durable record of one step: the state the step's items read and the items themselves.
///
/// Checkpoint `N` holds `S_N` and frontier `F_N`; it is committed before any item of `F_N` runs. A run
/// whose latest checkpoint has an empty frontier is complete and its state is the final state.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Checkpoint {
    /// The run (shared by the run's checkpoints in memory).
    pub run_id: Arc<str>,
    /// The step number (0 holds the input).
    pub step: u64,
    /// Commit time, milliseconds since the Unix epoch: what `Ctx::now` reads in the step it schedules.
    pub timestamp_ms: u64,
    /// An optional user label.
    pub label: Option<String>,
    /// The state `S_N`: in full, or as the deltas that turn `S_{N-1}` into it.
    pub state: StateRepr,
    /// Lowercase hex SHA-256 of `S_N`'s JSON: what a rebuilt state is verified against.
    pub state_hash: String,
    /// The run's seed.
    pub rng_seed: u64,
    /// The items of step `N`, sorted by order key.
    pub frontier: Vec<WorkItem>,
    /// Wait-for-all joins still waiting for predecessors, in the graph's node order.
    pub waiting: Vec<WaitingJoin>,
    /// The messages the step's items emitted (`ctx.emit`), written to the outbox with this commit.
    pub outbox: Vec<OutboxRow>,
    /// The commit's idempotency key (see [`crate::keys::idempotency_key`]).
    pub idempotency_key: String,
    /// The fingerprint of the graph running the run (shared with the graph in memory).
    pub graph_fingerprint: Arc<str>,
    /// The run's event-log head this checkpoint was committed on: the last event before the ones written
    /// with it (`None` when they start the log). Verification resumes from here (see [`crate::events`]).
    pub event_head: Option<ChainHead>,
    /// The format version.
    pub schema_version: u32,
}

impl Checkpoint {
    /// Light metadata of this checkpoint.
    pub fn meta(&self) -> CheckpointMeta {
        CheckpointMeta {
            step: self.step,
            idempotency_key: self.idempotency_key.clone(),
            timestamp_ms: self.timestamp_ms,
            label: self.label.clone(),
            state_hash: self.state_hash.clone(),
            next: self.frontier.iter().map(|w| w.node.to_string()).collect(),
            event_head: self.event_head.clone(),
        }
    }
}

/// A checkpoint of run `r` at `step` with an empty state and frontier and the key `key-<step>`: the
/// fixture of the stores' unit tests.
#[cfg(test)]
pub(crate) fn test_checkpoint(step: u64) -> Checkpoint {
    Checkpoint {
        run_id: "r".into(),
        step,
        timestamp_ms: step,
        label: None,
        state: StateRepr::Full(b"{}".to_vec()),
        state_hash: String::new(),
        rng_seed: 0,
        frontier: Vec::new(),
        waiting: Vec::new(),
        outbox: Vec::new(),
        idempotency_key: format!("key-{step}"),
        graph_fingerprint: "fp".into(),
        event_head: None,
        schema_version: SCHEMA_VERSION,
    }
}

/// How a checkpoint stores its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum StateRepr {
    /// The whole state, as JSON.
    Full(Vec<u8>),
    /// The step's item deltas as a JSON array, applied in order to the previous step's state.
    Delta {
        /// The step of the full snapshot this chain of deltas starts from.
        base: u64,
        /// The JSON array of deltas.
        deltas: Vec<u8>,
    },
}

impl StateRepr {
    /// The snapshot step a chain ending here starts from (`step` itself for a full state).
    pub fn base(&self, step: u64) -> u64 {
        match self {
            StateRepr::Full(_) => step,
            StateRepr::Delta { base, .. } => *base,
        }
    }

    /// Bytes of state payload.
    pub fn len(&self) -> usize {
        match self {
            StateRepr::Full(b) | StateRepr::Delta { deltas: b, .. } => b.len(),
        }
    }

    /// True when the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Light metadata of a stored checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CheckpointMeta {
    /// The step.
    pub step: u64,
    /// Its idempotency key.
    pub idempotency_key: String,
    /// Commit time, ms since the Unix epoch.
    pub timestamp_ms: u64,
    /// The label.
    pub label: Option<String>,
    /// The SHA-256 of the state.
    pub state_hash: String,
    /// The nodes of its frontier, in order: what the next step runs (empty once the run is complete).
    pub next: Vec<String>,
    /// The event-log head it was committed on.
    pub event_head: Option<ChainHead>,
}

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
    fn repr(&mut self, step: u64, state_json: Vec<u8>, deltas: Option<Vec<u8>>) -> StateRepr {
        match deltas {
            Some(deltas)
                if step - self.base < MAX_CHAIN && self.delta_bytes + deltas.len() <= state_json.len() =>
            {
                self.delta_bytes += deltas.len();
                StateRepr::Delta { base: self.base, deltas }
            }
            _ => {
                *self = Chain { base: step, delta_bytes: 0 };
                StateRepr::Full(state_json)
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
    /// The previous checkpoint's time: recorded time never goes backwards along a run, whatever the wall
    /// clock does.
    pub(crate) not_before_ms: u64,
    /// The time to record instead of the clock's (a replay records the original times).
    pub(crate) at_ms: Option<u64>,
    /// The event-log head the checkpoint is committed on.
    pub(crate) event_head: Option<ChainHead>,
}

/// The bytes a step's deltas are stored as: a canonical JSON array (maps sorted by key), in the order
/// given (ascending order key).
pub(crate) fn delta_bytes<D: Serialize>(run_id: &str, deltas: &[D]) -> Result<Vec<u8>, Error> {
    crate::canonical::to_vec(deltas).map_err(|source| Error::Serialization {
        run: run_id.to_owned(),
        what: "a delta",
        source,
    })
}

/// The canonical bytes of a state (see `crate::canonical`): what its hash and the idempotency key are of.
fn state_bytes<S: Serialize>(run_id: &str, state: &S) -> Result<Vec<u8>, Error> {
    crate::canonical::to_vec(state).map_err(|source| Error::Serialization {
        run: run_id.to_owned(),
        what: "the state",
        source,
    })
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
        not_before_ms,
        at_ms,
        event_head,
    } = draft;
    let state_json = state_bytes(run_id, state)?;
    // The frontier is sorted by order key, and order keys are unique within a step.
    let idempotency_key = idempotency_key_of_sorted(
        run_id,
        step,
        frontier.iter().map(|w| (&*w.node, w.order_key.0)),
        waiting.iter().map(|w| (&*w.node, w.arrived.iter().map(|a| &**a))),
        &state_json,
    );
    let state_hash = hex(&sha256_parts(&[&state_json]));
    let repr = chain.repr(step, state_json, deltas);
    if let StateRepr::Full(bytes) = &repr {
        check_deterministic::<S>(run_id, step, state, bytes)?;
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    Ok(Checkpoint {
        run_id: run_id.clone(),
        step,
        timestamp_ms: at_ms.unwrap_or(now.max(not_before_ms)),
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
    if state_bytes(run_id, state)? != bytes {
        return Err(nondeterministic("serializing it twice gave different bytes"));
    }
    let back: S = serde_json::from_slice(bytes).map_err(|source| Error::Serialization {
        run: run_id.to_owned(),
        what: "the state",
        source,
    })?;
    if state_bytes(run_id, &back)? != bytes {
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
    pub(crate) effects: Vec<crate::effect::EffectNote>,
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
    /// Its stored bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        seal(PENDING_MAGIC, &serde_json::to_vec(self).expect("a pending step is plain data"))
    }

    /// Reads [`PendingStep::encode`]'s bytes.
    pub(crate) fn decode(bytes: &[u8]) -> Result<PendingStep, StoreError> {
        unseal(PENDING_MAGIC, bytes, "a pending step")
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

// ---------------------------------------------------------------------------------------------------
// The envelope
// ---------------------------------------------------------------------------------------------------

const MAGIC: &[u8; 4] = b"GRCK";
const RUN_MAGIC: &[u8; 4] = b"GRRU";
const HEADER: usize = 4 + 4 + 32;

/// Everything of a checkpoint but its state bytes, as stored in the record body.
#[derive(Serialize, Deserialize)]
struct Meta {
    run_id: Arc<str>,
    step: u64,
    timestamp_ms: u64,
    label: Option<String>,
    /// `None`: a full state; `Some(base)`: deltas over the chain from `base`.
    delta_base: Option<u64>,
    state_hash: String,
    rng_seed: u64,
    frontier: Vec<WorkItem>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    waiting: Vec<WaitingJoin>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    outbox: Vec<OutboxRow>,
    idempotency_key: String,
    graph_fingerprint: Arc<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    event_head: Option<ChainHead>,
}

/// The bytes a checkpoint is stored as: magic `GRCK`, `u32_be(schema_version)`, SHA-256 of the version
/// and the body, then the body: `u32_be(len(meta)) || meta JSON || state payload`.
///
/// # Examples
///
/// ```
/// # use graph_runtime::store::record::{decode, encode};
/// # fn roundtrip(cp: &graph_runtime::store::Checkpoint) {
/// let bytes = encode(cp);
/// assert_eq!(&decode(&cp.run_id, cp.step, &bytes).unwrap(), cp);
/// # }
/// ```
pub fn encode(cp: &Checkpoint) -> Vec<u8> {
    let (delta_base, payload) = match &cp.state {
        StateRepr::Full(b) => (None, b),
        StateRepr::Delta { base, deltas } => (Some(*base), deltas),
    };
    let meta = Meta {
        run_id: cp.run_id.clone(),
        step: cp.step,
        timestamp_ms: cp.timestamp_ms,
        label: cp.label.clone(),
        delta_base,
        state_hash: cp.state_hash.clone(),
        rng_seed: cp.rng_seed,
        frontier: cp.frontier.clone(),
        waiting: cp.waiting.clone(),
        outbox: cp.outbox.clone(),
        idempotency_key: cp.idempotency_key.clone(),
        graph_fingerprint: cp.graph_fingerprint.clone(),
        event_head: cp.event_head.clone(),
    };
    let meta = serde_json::to_vec(&meta).expect("checkpoint metadata is plain data");
    let mut body = Vec::with_capacity(4 + meta.len() + payload.len());
    body.extend_from_slice(&(meta.len() as u32).to_be_bytes());
    body.extend_from_slice(&meta);
    body.extend_from_slice(payload);
    seal_version(MAGIC, cp.schema_version, &body)
}

/// Decodes a record stored under `(run, step)`.
///
/// # Errors
///
/// `Corrupted` for any damage (the checksum covers every byte), `UnsupportedSchemaVersion` for a valid
/// record of another format version.
pub fn decode(run: &str, step: u64, bytes: &[u8]) -> Result<Checkpoint, StoreError> {
    let corrupted = |detail: &str| StoreError::corrupted_record(run, step, detail);
    let (version, body) = open(MAGIC, bytes).map_err(corrupted)?;
    if version != SCHEMA_VERSION {
        return Err(StoreError::UnsupportedSchemaVersion { found: version, supported: SCHEMA_VERSION });
    }
    let meta_len =
        u32::from_be_bytes(body.get(..4).ok_or_else(|| corrupted("short body"))?.try_into().expect("4"))
            as usize;
    let meta = body.get(4..4 + meta_len).ok_or_else(|| corrupted("short body"))?;
    let payload = body[4 + meta_len..].to_vec();
    let m: Meta =
        serde_json::from_slice(meta).map_err(|e| corrupted(&format!("metadata does not decode: {e}")))?;
    if &*m.run_id != run || m.step != step {
        return Err(corrupted("the record belongs to another run or step"));
    }
    Ok(Checkpoint {
        run_id: m.run_id,
        step: m.step,
        timestamp_ms: m.timestamp_ms,
        label: m.label,
        state: match m.delta_base {
            None => StateRepr::Full(payload),
            Some(base) => StateRepr::Delta { base, deltas: payload },
        },
        state_hash: m.state_hash,
        rng_seed: m.rng_seed,
        frontier: m.frontier,
        waiting: m.waiting,
        outbox: m.outbox,
        idempotency_key: m.idempotency_key,
        graph_fingerprint: m.graph_fingerprint,
        event_head: m.event_head,
        schema_version: version,
    })
}

/// The bytes a run row is stored as: the checkpoint envelope with magic `GRRU` around the row's JSON.
pub fn encode_run(info: &RunInfo) -> Vec<u8> {
    seal(RUN_MAGIC, &serde_json::to_vec(info).expect("a run row is plain data"))
}

/// Decodes a run row ([`encode_run`]; a bare JSON row, as the first format wrote, is read too).
///
/// # Errors
///
/// `Corrupted` for any damage, `UnsupportedSchemaVersion` for a row of another format version.
pub fn decode_run(bytes: &[u8]) -> Result<RunInfo, StoreError> {
    let corrupted = |detail: String| StoreError::Corrupted {
        run: std::str::from_utf8(bytes.get(..64).unwrap_or(bytes)).ok().map(str::to_owned),
        step: None,
        file: None,
        detail,
        remedy: crate::error::REMEDY_RECORD,
    };
    let body = if bytes.first() == Some(&b'{') {
        bytes
    } else {
        let (version, body) = open(RUN_MAGIC, bytes).map_err(|e| corrupted(format!("a run row: {e}")))?;
        if version != SCHEMA_VERSION {
            return Err(StoreError::UnsupportedSchemaVersion { found: version, supported: SCHEMA_VERSION });
        }
        body
    };
    serde_json::from_slice(body).map_err(|e| corrupted(format!("a run row does not decode: {e}")))
}

/// [`decode_run`] of the row of `run_id`, read from `file` when the store keeps its rows in one:
/// damage names both (a list of runs meets rows of runs nobody asked for by name).
///
/// # Errors
///
/// As [`decode_run`].
pub fn decode_run_of(
    run_id: &str,
    file: Option<&std::path::Path>,
    bytes: &[u8],
) -> Result<RunInfo, StoreError> {
    decode_run(bytes).map_err(|e| of_run(e, run_id, file))
}

/// `e` naming `run_id` and `file` when it is `Corrupted` ([`decode_run_of`], for callers that would
/// rather build `file` only on an error).
pub(crate) fn of_run(e: StoreError, run_id: &str, file: Option<&std::path::Path>) -> StoreError {
    match e {
        StoreError::Corrupted { step, detail, remedy, .. } => StoreError::Corrupted {
            run: Some(run_id.to_owned()),
            step,
            file: file.map(std::path::Path::to_path_buf),
            detail,
            remedy,
        },
        other => other,
    }
}

/// An envelope of the current version around `body` (for the other records of the store).
pub(crate) fn seal(magic: &[u8; 4], body: &[u8]) -> Vec<u8> {
    seal_version(magic, SCHEMA_VERSION, body)
}

/// The JSON record inside an envelope of `magic`; `what` names it in errors.
pub(crate) fn unseal<T: serde::de::DeserializeOwned>(
    magic: &[u8; 4],
    bytes: &[u8],
    what: &str,
) -> Result<T, StoreError> {
    let corrupted = |detail: String| StoreError::Corrupted {
        run: None,
        step: None,
        file: None,
        detail: format!("{what}: {detail}"),
        remedy: crate::error::REMEDY_RECORD,
    };
    let (version, body) = open(magic, bytes).map_err(|e| corrupted(e.to_owned()))?;
    if version != SCHEMA_VERSION {
        return Err(StoreError::UnsupportedSchemaVersion { found: version, supported: SCHEMA_VERSION });
    }
    serde_json::from_slice(body).map_err(|e| corrupted(format!("does not decode: {e}")))
}

fn seal_version(magic: &[u8; 4], version: u32, body: &[u8]) -> Vec<u8> {
    let version = version.to_be_bytes();
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&version);
    out.extend_from_slice(&sha256_parts(&[&version, body]));
    out.extend_from_slice(body);
    out
}

/// Checks an envelope; returns its version and body.
fn open<'b>(magic: &[u8; 4], bytes: &'b [u8]) -> Result<(u32, &'b [u8]), &'static str> {
    if bytes.len() < HEADER || &bytes[..4] != magic {
        return Err("the record header is damaged");
    }
    let (version, body) = (&bytes[4..8], &bytes[HEADER..]);
    if sha256_parts(&[version, body])[..] != bytes[8..40] {
        return Err("the record's checksum does not match");
    }
    Ok((u32::from_be_bytes(version.try_into().expect("4 bytes")), body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::RunStatus;

    fn cp(state: StateRepr) -> Checkpoint {
        Checkpoint {
            run_id: "r".into(),
            step: 3,
            timestamp_ms: 9,
            label: Some("l".into()),
            state,
            state_hash: "h".into(),
            rng_seed: 7,
            frontier: vec![WorkItem {
                node: "n".into(),
                order_key: OrderKey::new(1, 2),
                path: PathId::entry("n"),
                input: Some(serde_json::json!({"x": 1})),
            }],
            waiting: vec![WaitingJoin {
                node: "d".into(),
                arrived: vec!["b".into()],
                path: PathId::entry("b"),
            }],
            event_head: Some(ChainHead { seq: 4, hash: "ab".into() }),
            outbox: vec![OutboxRow {
                key: "o".into(),
                run_id: "r".into(),
                step: 3,
                topic: "t".into(),
                payload: serde_json::json!(1),
            }],
            idempotency_key: "k".into(),
            graph_fingerprint: "fp".into(),
            schema_version: SCHEMA_VERSION,
        }
    }

    #[test]
    fn records_round_trip_and_any_flipped_byte_is_detected() {
        for state in [StateRepr::Full(b"{}".to_vec()), StateRepr::Delta { base: 1, deltas: b"[]".to_vec() }] {
            let c = cp(state);
            let bytes = encode(&c);
            assert_eq!(decode("r", 3, &bytes).unwrap(), c);
            assert!(matches!(decode("r", 4, &bytes), Err(StoreError::Corrupted { step: Some(4), .. })));
            for i in 0..bytes.len() {
                let mut bad = bytes.clone();
                bad[i] ^= 0x01;
                let e = decode("r", 3, &bad).unwrap_err();
                assert!(
                    matches!(e, StoreError::Corrupted { .. } | StoreError::UnsupportedSchemaVersion { .. }),
                    "byte {i}: {e:?}"
                );
            }
        }
    }

    #[test]
    fn run_rows_round_trip_and_legacy_json_rows_read() {
        let info = RunInfo {
            run_id: "r".into(),
            status: RunStatus::Running,
            latest_step: 4,
            version: 5,
            graph_fingerprint: "fp".into(),
            event_head: Some(ChainHead { seq: 2, hash: "cd".into() }),
        };
        assert_eq!(decode_run(&encode_run(&info)).unwrap(), info);
        assert_eq!(decode_run(&serde_json::to_vec(&info).unwrap()).unwrap(), info);
        let mut bad = encode_run(&info);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(decode_run(&bad), Err(StoreError::Corrupted { .. })));
    }

    #[test]
    fn the_chain_snapshots_when_deltas_outweigh_the_state_or_grow_long() {
        let mut chain = Chain::default();
        assert!(matches!(chain.repr(0, vec![0; 100], None), StateRepr::Full(_)));
        assert!(matches!(chain.repr(1, vec![0; 100], Some(vec![0; 60])), StateRepr::Delta { base: 0, .. }));
        // 60 + 60 > 100: a snapshot, and the chain restarts there.
        assert!(matches!(chain.repr(2, vec![0; 100], Some(vec![0; 60])), StateRepr::Full(_)));
        assert_eq!(chain, Chain { base: 2, delta_bytes: 0 });
        for step in 3..2 + MAX_CHAIN {
            assert!(matches!(chain.repr(step, vec![0; 100], Some(vec![])), StateRepr::Delta { base: 2, .. }));
        }
        assert!(matches!(chain.repr(2 + MAX_CHAIN, vec![0; 100], Some(vec![])), StateRepr::Full(_)));
    }
}
