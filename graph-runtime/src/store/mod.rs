//! The checkpoint store contract.
//!
//! A store keeps, per run, one checkpoint per committed step and a run row (status, latest step,
//! version). [`Store::save_checkpoint`] commits a checkpoint, its idempotency key (unique, enforced by the
//! store inside the commit, never check-then-insert) and the run row update in one atomic operation, or
//! nothing, and reports a typed [`CommitOutcome`]. Stores are state-type agnostic: the state travels as
//! JSON bytes.

#[cfg(feature = "sled")]
pub(crate) mod commit_log;
mod memory;
#[cfg(feature = "sled")]
mod sled;

pub use memory::MemoryStore;
#[cfg(feature = "sled")]
pub use sled::{Durability, SledOptions, SledStore};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::keys::{OrderKey, PathId};

/// The checkpoint format version this build writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

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

/// A recorded external interaction (filled by effects; empty until then).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedIo {
    /// The effect key.
    pub key: String,
    /// The effect's name.
    pub name: String,
    /// Hex SHA-256 of the request.
    pub request_hash: String,
    /// The recorded response.
    pub response: serde_json::Value,
}

/// The durable record of one step: the state the step's items read and the items themselves.
///
/// Checkpoint `N` holds `S_N` and frontier `F_N`; it is committed before any item of `F_N` runs. A run
/// whose latest checkpoint has an empty frontier is complete and its state is the final state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The run (shared by the run's checkpoints in memory).
    pub run_id: Arc<str>,
    /// The step number (0 holds the input).
    pub step: u64,
    /// Commit time, milliseconds since the Unix epoch (informational; not part of any hash).
    pub timestamp_ms: u64,
    /// An optional user label.
    pub label: Option<String>,
    /// The state `S_N`: in full, or as the deltas that turn `S_{N-1}` into it.
    pub state: StateRepr,
    /// Lowercase hex SHA-256 of `S_N`'s JSON: what a reconstructed state is verified against.
    pub state_hash: String,
    /// The run's seed.
    pub rng_seed: u64,
    /// The items of step `N`, sorted by order key.
    pub frontier: Vec<WorkItem>,
    /// Recorded I/O of the step that produced this checkpoint.
    pub recorded_ios: Vec<RecordedIo>,
    /// The commit's idempotency key (see [`crate::keys::idempotency_key`]).
    pub idempotency_key: String,
    /// The fingerprint of the graph running the run (shared with the graph in memory).
    pub graph_fingerprint: Arc<str>,
    /// The format version.
    pub schema_version: u32,
}

/// How a checkpoint stores its state.
///
/// Storage follows the delta, not the state: most steps store only the deltas their items returned, in
/// order key order; a full snapshot is written every so often (see `docs/stores.md`). Reducers are pure,
/// so applying a step's deltas to the previous state reproduces its state exactly, which the stored
/// [`Checkpoint::state_hash`] verifies.
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
pub struct CheckpointMeta {
    /// The step.
    pub step: u64,
    /// Its idempotency key.
    pub idempotency_key: String,
    /// Commit time, ms since the Unix epoch.
    pub timestamp_ms: u64,
    /// The label.
    pub label: Option<String>,
}

/// Where a run stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum RunStatus {
    /// Executing, or stopped by a crash: resumable.
    Running,
    /// Reached END; the latest checkpoint holds the final state.
    Completed,
    /// Paused with a durable checkpoint; `resume` continues.
    Paused(PauseReason),
    /// Stopped by an error; `resume` retries from the last committed step.
    Failed(String),
    /// Cancelled by the user; `resume` continues.
    Cancelled,
}

/// Why a run paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum PauseReason {
    /// Work items waited for admission longer than `backpressure_timeout`.
    Backpressure,
}

/// A run row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The run.
    pub run_id: String,
    /// Its status.
    pub status: RunStatus,
    /// The latest committed step.
    pub latest_step: u64,
    /// The optimistic-locking version, +1 per write.
    pub version: u64,
    /// The graph fingerprint the run started with.
    pub graph_fingerprint: String,
}

/// Which runs [`Store::list_runs`] returns.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RunFilter {
    /// Only runs whose status matches this one's variant.
    pub status: Option<RunStatus>,
    /// At most this many, in run-id order.
    pub limit: Option<usize>,
}

impl RunFilter {
    /// Every run.
    pub fn all() -> Self {
        RunFilter::default()
    }

    /// Runs with `status`'s variant.
    pub fn status(mut self, status: RunStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// At most `n` runs.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    pub(crate) fn matches(&self, info: &RunInfo) -> bool {
        self.status.as_ref().is_none_or(|s| std::mem::discriminant(s) == std::mem::discriminant(&info.status))
    }
}

/// What a commit did. Never an error for the expected races: each is a typed outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitOutcome {
    /// Written; the run row is now at `version`.
    Committed {
        /// The run's new version.
        version: u64,
    },
    /// This exact commit (same idempotency key) happened before: treat as success.
    AlreadyCommitted {
        /// The run's current version.
        version: u64,
    },
    /// A different result was committed for this step: adopt the stored one, discard ours.
    StepTaken {
        /// The stored checkpoint's idempotency key.
        existing_key: String,
        /// The run's current version.
        version: u64,
    },
    /// The run row moved past the version the writer expected.
    VersionConflict {
        /// The run's current version (0: no such run).
        current: u64,
    },
}

/// A checkpoint store. Implementations must pass the conformance suite in the `graph-tests` crate.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Atomically commits `cp`, its idempotency key and the run row (`status`, latest step = `cp.step`,
    /// version + 1), provided the run row is at `expected_version` (0 for a run that does not exist yet).
    ///
    /// Checks, in order: the idempotency key exists → `AlreadyCommitted`; the step exists →
    /// `StepTaken`; the version differs → `VersionConflict`; else `Committed`.
    ///
    /// # Errors
    ///
    /// Backend failures only; nothing is written then.
    async fn save_checkpoint(
        &self,
        cp: &Checkpoint,
        status: &RunStatus,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError>;

    /// Updates the run's status alone (pause, failure, cancellation), under the same version check.
    ///
    /// # Errors
    ///
    /// Backend failures only.
    async fn set_status(
        &self,
        run_id: &str,
        status: &RunStatus,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError>;

    /// The run row.
    ///
    /// # Errors
    ///
    /// Backend failures, corrupt rows.
    async fn run_info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError>;

    /// One checkpoint.
    ///
    /// # Errors
    ///
    /// Backend failures; `Corrupted` / `UnsupportedSchemaVersion` for bad bytes.
    async fn load_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Checkpoint>, StoreError>;

    /// The latest checkpoint.
    ///
    /// # Errors
    ///
    /// As [`Store::load_checkpoint`].
    async fn latest(&self, run_id: &str) -> Result<Option<Checkpoint>, StoreError>;

    /// The stored checkpoints with `from <= step <= to`, in step order (pruned steps are absent).
    ///
    /// # Errors
    ///
    /// As [`Store::load_checkpoint`].
    async fn checkpoints(&self, run_id: &str, from: u64, to: u64) -> Result<Vec<Checkpoint>, StoreError> {
        let mut out = Vec::new();
        for step in from..=to {
            if let Some(cp) = self.load_checkpoint(run_id, step).await? {
                out.push(cp);
            }
        }
        Ok(out)
    }

    /// Metadata of every stored checkpoint of a run, in step order.
    ///
    /// # Errors
    ///
    /// Backend failures.
    async fn history(&self, run_id: &str) -> Result<Vec<CheckpointMeta>, StoreError>;

    /// Run rows, in run-id order.
    ///
    /// # Errors
    ///
    /// Backend failures.
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError>;

    /// Deletes all but the latest `keep` checkpoints of a run (at least the latest is always kept), and
    /// never the snapshot a kept checkpoint's delta chain starts from; returns how many were deleted.
    /// Idempotency keys of pruned steps are kept, so a pruned step is still never committed twice.
    ///
    /// # Errors
    ///
    /// Backend failures.
    async fn prune(&self, run_id: &str, keep: usize) -> Result<usize, StoreError>;
}

/// Test hook shared by the backends: makes the next commit fail after its `n`-th write, inside the
/// transaction, so the conformance suite can check that nothing of it becomes visible.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct FailPoint(Arc<AtomicUsize>);

impl FailPoint {
    /// Arms the fail point: the next commit fails after write `n` (1-based). 0 disarms.
    pub fn fail_after(&self, n: usize) {
        self.0.store(n, Ordering::SeqCst);
    }

    /// Called by a backend after its `n`-th write of a commit; true (once) when armed for `n`.
    pub fn hit(&self, n: usize) -> bool {
        self.0.compare_exchange(n, 0, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    }
}
