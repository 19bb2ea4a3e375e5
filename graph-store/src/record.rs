//! The stored form of a step, in one place: what a checkpoint holds and the byte envelope a record is
//! written in.
//!
//! A backend stores [`Checkpoint`]s, usually as the bytes of [`encode`] beside the columns it queries
//! by (run, step, idempotency key), and reads them back with [`decode`]. No backend builds or
//! interprets state bytes itself, so every backend stores exactly the same thing and a new backend
//! writes rows, not format logic. The engine builds checkpoints (its persistence module decides when a
//! state is stored in full and when as the step's deltas) and rebuilds states from them.
//!
//! # Storage follows the delta
//!
//! Reducers are pure, so a step's state is the previous state with the step's deltas applied in
//! order-key order. Most checkpoints store only those deltas ([`StateRepr::Delta`]), with a full
//! snapshot ([`StateRepr::Full`]) at step 0, whenever the delta bytes since the last snapshot would
//! outweigh the state, and at least every 1,024 steps. Every checkpoint carries `state_hash`, the SHA-256
//! of its full state's JSON, which a rebuilt state is checked against: a damaged or missing link is an
//! error, never a wrong state.
//!
//! # The envelope
//!
//! Every record (checkpoint, run row, effect entry, outbox row, pending step) is stored as magic (4
//! bytes naming the record's kind), `u32_be(schema_version)`, the SHA-256 of the version and the body,
//! then the body: any flipped byte is `StoreError::Corrupted`, a record of another version
//! `UnsupportedSchemaVersion` ([`seal`], [`unseal`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::events::ChainHead;
use crate::keys::{OrderKey, PathId};
use crate::{OutboxRow, RunInfo};

pub use crate::envelope::{SCHEMA_VERSION, seal, unseal};
use crate::envelope::{open, seal_version};

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
    /// The step it was first scheduled in, when a migration carried it to a later checkpoint
    /// (`None`: this checkpoint's step). Its effect keys, child-run ids and randomness derive from it,
    /// so the item keeps its identity across the migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_step: Option<u64>,
}

/// A wait-for-all join that has seen some of its predecessors deliver and waits for the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
// The envelope
// ---------------------------------------------------------------------------------------------------

const MAGIC: &[u8; 4] = b"GRCK";
const RUN_MAGIC: &[u8; 4] = b"GRRU";

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
/// # use graph_store::record::{decode, encode};
/// # fn roundtrip(cp: &graph_store::Checkpoint) {
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
pub fn of_run(e: StoreError, run_id: &str, file: Option<&std::path::Path>) -> StoreError {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunStatus;

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
                origin_step: Some(1),
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
}
