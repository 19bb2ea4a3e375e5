//! The checkpoint store contract: the extension point for a new backend.
//!
//! A store keeps, per run, one checkpoint per committed step and a run row (status, latest step,
//! version). [`Store::save_checkpoint`] commits a checkpoint, its idempotency key (unique, enforced by the
//! store inside the commit, never check-then-insert) and the run row update in one atomic operation, or
//! nothing, and reports a typed [`CommitOutcome`]. Stores are state-type agnostic: what they keep is
//! described in [`record`], whose envelope ([`record::encode`]/[`record::decode`]) a backend writes and
//! reads, so it never builds or interprets state bytes itself.
//!
//! # Writing a backend
//!
//! Implement [`Store`] and run the conformance suite against it: with the `conformance` feature,
//! `graph_runtime::store::conformance` has one `async fn` per rule of the contract (atomicity, the
//! unique key under 100 concurrent commits, injected failures, restarts between operations) and a
//! model-based check against [`MemoryStore`]; the built-in backends pass the same suite.

#[cfg(feature = "sled")]
pub(crate) mod commit_log;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod journal;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
mod known;
mod memory;
pub mod record;
pub mod retry;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub mod server;
#[cfg(feature = "sled")]
mod sled;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use journal::{EffectClass, EffectOutcome, EffectRecord, EffectState, OutboxRow, Resolution};
pub use memory::MemoryStore;
pub use record::{Checkpoint, CheckpointMeta, SCHEMA_VERSION, StateRepr, WaitingJoin, WorkItem};
pub use retry::RetryStore;
#[cfg(feature = "mysql")]
pub use server::MySqlStore;
#[cfg(feature = "postgres")]
pub use server::PostgresStore;
#[cfg(feature = "sled")]
pub use sled::{SledOptions, SledStore};
#[cfg(feature = "sqlite")]
pub use sqlite::{SQLITE_SCHEMA_VERSION, SqliteOptions, SqliteStore};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::events::{ChainHead, Event};

/// When a durable store acknowledges a commit (the sled and SQLite stores).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// Once it is on disk and synced (`fdatasync`; shared with concurrent commits): a reported commit
    /// survives a crash and a power loss. sled: its commit-log record is synced; SQLite: `synchronous =
    /// FULL` in WAL mode.
    #[default]
    Sync,
    /// Without waiting for the sync. Never partial; the most recent commits may be lost on a crash
    /// (sled: those of the last 500 ms, until its background flush) or on a power loss (SQLite: the
    /// syncs of `synchronous = NORMAL`, the log at each WAL checkpoint; a process crash loses nothing).
    Async,
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
    /// Stopped for a person: nodes asked for input (`Ctx::interrupt`), or a breakpoint was reached.
    /// `Engine::resume_with_input` answers; `resume` continues past breakpoints.
    Interrupted(Vec<Interrupt>),
    /// Stopped by an error; `resume` retries from the last committed step.
    Failed(String),
    /// Cancelled by the user; `resume` continues.
    Cancelled,
}

#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
impl RunStatus {
    /// Whether the run stopped at an end of its own (completed, failed or cancelled), not waiting to go
    /// on (running, paused, interrupted). A failed or cancelled run commits again only if resumed.
    pub(crate) fn has_ended(&self) -> bool {
        matches!(self, RunStatus::Completed | RunStatus::Failed(_) | RunStatus::Cancelled)
    }
}

/// Why a run paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum PauseReason {
    /// Work items waited for admission longer than `backpressure_timeout`.
    Backpressure,
    /// A non-idempotent effect started before a crash and its outcome is unknown: a person must say what
    /// happened (`Engine::resolve_effect`) before `resume` continues.
    NeedsConfirmation {
        /// The effect key.
        key: String,
        /// The effect's name.
        name: String,
    },
}

/// One reason a run is [`RunStatus::Interrupted`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Interrupt {
    /// What an answer names it by (`Engine::resume_with_inputs`): `"{path}#{index}"`.
    pub id: String,
    /// What stopped the run.
    pub kind: InterruptKind,
    /// The node.
    pub node: String,
    /// The work item's path identity (branches of one step have distinct paths).
    pub path: String,
    /// The step the node runs in (its item is in checkpoint `step`'s frontier).
    pub step: u64,
    /// Which `interrupt` call of the node's attempt, from 0 (0 for breakpoints).
    pub index: u32,
    /// What the node passed to `Ctx::interrupt` (null for breakpoints).
    pub payload: serde_json::Value,
}

/// What an [`Interrupt`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum InterruptKind {
    /// The node called `Ctx::interrupt` and waits for input.
    Input,
    /// A breakpoint before the node (`interrupt_before`): its step has not started.
    Before,
    /// A breakpoint after the node (`interrupt_after`): its step is committed.
    After,
}

/// A run row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
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
    /// The last event of the run's event log (`None` before the first, or for runs written before the
    /// event log existed). A store sets it from the events each write appends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_head: Option<ChainHead>,
}

impl RunInfo {
    /// A run row.
    pub fn new(
        run_id: impl Into<String>,
        status: RunStatus,
        latest_step: u64,
        version: u64,
        graph_fingerprint: impl Into<String>,
    ) -> Self {
        RunInfo {
            run_id: run_id.into(),
            status,
            latest_step,
            version,
            graph_fingerprint: graph_fingerprint.into(),
            event_head: None,
        }
    }

    /// The run row after a checkpoint of step `step` commits with `status`: one version past `before`
    /// (the row as it was; none for a run's first commit), the latest step the larger of the two, the
    /// fingerprint kept (`fingerprint` for a new run), and the event head `last_event` (the last event
    /// the commit appends) or, when it appends none, the one before. Every backend's commit writes this
    /// ([`RunInfo::commit`] in place, or [`RunInfo::first_commit`], for the memory store).
    #[cfg(any(feature = "sled", feature = "sqlite", feature = "postgres", feature = "mysql"))]
    pub(crate) fn after_commit(
        before: Option<&RunInfo>,
        run_id: &str,
        step: u64,
        status: &RunStatus,
        fingerprint: &str,
        last_event: Option<ChainHead>,
    ) -> RunInfo {
        match before {
            Some(r) => {
                let mut info = r.clone();
                info.commit(step, status, last_event);
                info
            }
            None => RunInfo::first_commit(run_id, step, status, fingerprint, last_event),
        }
    }

    /// This row after a checkpoint of step `step` commits with `status` ([`RunInfo::after_commit`]).
    pub(crate) fn commit(&mut self, step: u64, status: &RunStatus, last_event: Option<ChainHead>) {
        self.status = status.clone();
        self.latest_step = self.latest_step.max(step);
        self.version += 1;
        if last_event.is_some() {
            self.event_head = last_event;
        }
    }

    /// The row of a run whose first checkpoint commits ([`RunInfo::after_commit`]).
    pub(crate) fn first_commit(
        run_id: &str,
        step: u64,
        status: &RunStatus,
        fingerprint: &str,
        last_event: Option<ChainHead>,
    ) -> RunInfo {
        let mut info = RunInfo::new(run_id, status.clone(), step, 1, fingerprint);
        info.event_head = last_event;
        info
    }
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
    /// The commit was made under a worker's lease (`store::server::LeasedStore`, features `postgres` / `mysql`) that is no longer
    /// the run's live lease (expired, or taken over by another worker): nothing was written, and the
    /// writer must stop touching the run. Only the server stores report it.
    Fenced,
}

/// A checkpoint store: the extension point for a new backend (see the [module docs](self)).
///
/// Implementations must pass the conformance suite (`store::conformance`, feature `conformance`).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Atomically commits `cp`, its idempotency key, its outbox rows, `events` (appended to the run's
    /// event log under their `seq`) and the run row (`status`, latest step = `cp.step`, version + 1,
    /// event head = the last of `events` when there are any), and clears the run's pending step
    /// ([`Store::pending`]), provided the run row is at `expected_version` (0 for a run that does not
    /// exist yet).
    ///
    /// Checks, in order: the idempotency key exists → `AlreadyCommitted`; the step exists →
    /// `StepTaken`; the version differs → `VersionConflict`; else `Committed`. Only `Committed` writes.
    ///
    /// # Errors
    ///
    /// Backend failures only; nothing is written then.
    async fn save_checkpoint(
        &self,
        cp: &Checkpoint,
        events: &[Event],
        status: &RunStatus,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError>;

    /// Updates the run's status (pause, interrupt, failure, cancellation, resumption) under the same
    /// version check, appending `events` and moving the event head with them, and, with `pending`,
    /// replacing the run's pending step (the partial step an interrupt leaves; `None` keeps it). One
    /// atomic write, or nothing.
    ///
    /// # Errors
    ///
    /// Backend failures only; nothing is written then.
    async fn set_status(
        &self,
        run_id: &str,
        status: &RunStatus,
        events: &[Event],
        pending: Option<&[u8]>,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError>;

    /// Up to `limit` events of a run's log with `seq >= from`, in `seq` order (decoded with
    /// [`crate::events::decode`]).
    ///
    /// # Errors
    ///
    /// Backend failures; `CorruptedEvent` for bytes that are not an event.
    async fn events(&self, run_id: &str, from: u64, limit: usize) -> Result<Vec<Event>, StoreError>;

    /// The run's pending step: the opaque bytes the last `set_status` stored with `pending`, until the
    /// next `save_checkpoint` of the run clears them.
    ///
    /// # Errors
    ///
    /// Backend failures.
    async fn pending(&self, run_id: &str) -> Result<Option<Vec<u8>>, StoreError>;

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

    /// The journal entry of an effect, by its key.
    ///
    /// # Errors
    ///
    /// Backend failures; `Corrupted` for damaged bytes.
    async fn load_effect(&self, key: &str) -> Result<Option<EffectRecord>, StoreError>;

    /// Durably journals an effect entry, compare-and-set on its key: with `expected = None` it is
    /// written only if the key has no entry; with `Some(state)`, only if the entry is in that state.
    /// Otherwise nothing is written and the outcome says why (`Exists` with the current entry, or
    /// `Missing`): an entry is never overwritten by surprise.
    ///
    /// # Errors
    ///
    /// Backend failures; nothing is written then.
    async fn put_effect(
        &self,
        record: &EffectRecord,
        expected: Option<&EffectState>,
    ) -> Result<EffectOutcome, StoreError>;

    /// The journal of a run, ordered by (step, path, call index).
    ///
    /// # Errors
    ///
    /// Backend failures; `Corrupted` for damaged bytes.
    async fn effects(&self, run_id: &str) -> Result<Vec<EffectRecord>, StoreError>;

    /// Outbox rows not yet acknowledged, oldest commit first (by run, then step, then emit order),
    /// at most `limit`.
    ///
    /// # Errors
    ///
    /// Backend failures; `Corrupted` for damaged bytes.
    async fn outbox(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError>;

    /// Acknowledges outbox rows by key (deletes them); returns how many were pending.
    ///
    /// # Errors
    ///
    /// Backend failures.
    async fn ack_outbox(&self, keys: &[String]) -> Result<usize, StoreError>;

    /// Reads the whole store to check what its reads cannot: that its structures agree with each
    /// other (for the SQLite store, `PRAGMA integrity_check`: every index entry against its table, so an
    /// entry damage removed, which would hide a checkpoint from [`Store::history`] or a run from
    /// [`Store::list_runs`] without an error, is found). It takes as long as reading every page, so
    /// it is for an operator's check (`graphctl verify --all`), not for each open.
    ///
    /// The PostgreSQL store runs amcheck's `bt_index_check` (with `heapallindexed`) on each of its
    /// indexes when the extension is installed in its database and its role may run it (else
    /// `NotChecked`, saying what to do); the MySQL store runs `CHECK TABLE` on its tables. The default,
    /// for stores that check what they read as they read it and have no whole-store check (the memory
    /// and sled stores): [`Integrity::NotChecked`].
    ///
    /// # Errors
    ///
    /// `Corrupted` naming what is damaged; backend failures.
    async fn check_integrity(&self) -> Result<Integrity, StoreError> {
        Ok(Integrity::NotChecked {
            why: "this store has no whole-store check; it checks each record as it reads it",
        })
    }
}

/// What [`Store::check_integrity`] found (damage is an error, `StoreError::Corrupted`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Integrity {
    /// The check read the whole store and found nothing wrong; `check` names it and what it covered
    /// (e.g. "PRAGMA integrity_check", "CHECK TABLE on 9 tables").
    Sound {
        /// The check that ran.
        check: String,
    },
    /// The store has no whole-store check, or cannot run it here.
    NotChecked {
        /// Why, and what would make it run.
        why: &'static str,
    },
}

/// What a store's reads of a run's checkpoints went through, for [`behind_run_row`]'s message: "the
/// index of its checkpoints", and what it means when that ends before the run row ("the index is
/// damaged"); the damaged file, if the store has one; what to do.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) struct ReadThrough {
    pub(crate) what: &'static str,
    pub(crate) lost: &'static str,
    pub(crate) file: Option<std::path::PathBuf>,
    pub(crate) remedy: &'static str,
}

/// `Corrupted` for `run_id` when its run row says it committed step `latest` but the last checkpoint
/// of the run a read found is `last`, an earlier one or none. A sound store never shows that: the run
/// row is written in the commit of its checkpoint, and a prune keeps the latest. Without a run row
/// there is nothing to compare.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) fn behind_run_row(
    run_id: &str,
    latest: Option<u64>,
    last: Option<u64>,
    through: ReadThrough,
) -> Result<(), StoreError> {
    let Some(latest) = latest else { return Ok(()) };
    if last.is_some_and(|last| last >= latest) {
        return Ok(());
    }
    let ReadThrough { what, lost, file, remedy } = through;
    Err(StoreError::Corrupted {
        run: Some(run_id.to_owned()),
        step: Some(latest),
        file,
        detail: format!(
            "the run's row is at step {latest} but {what} ends at {}: {lost}",
            last.map_or("none".to_owned(), |s| format!("step {s}"))
        ),
        remedy,
    })
}

/// Test hook shared by the backends (feature `test-hooks`): makes the next commit fail after its `n`-th
/// write, inside the transaction, so the conformance suite can check that nothing of it becomes visible.
#[cfg(feature = "test-hooks")]
#[derive(Debug, Clone, Default)]
pub struct FailPoint(std::sync::Arc<std::sync::atomic::AtomicUsize>);

#[cfg(feature = "test-hooks")]
impl FailPoint {
    /// Arms the fail point: the next commit fails after write `n` (1-based). 0 disarms.
    pub fn fail_after(&self, n: usize) {
        self.0.store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the fail point is armed (for a backend whose commit is one statement: it then commits
    /// in a transaction, so that the failure can come after the writes).
    pub fn armed(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst) != 0
    }

    /// Called by a backend after its `n`-th write of a commit; true (once) when armed for `n`.
    pub fn hit(&self, n: usize) -> bool {
        self.0
            .compare_exchange(n, 0, std::sync::atomic::Ordering::SeqCst, std::sync::atomic::Ordering::SeqCst)
            .is_ok()
    }
}

/// Without `test-hooks` the fail point compiles to nothing: `hit` is always false.
#[cfg(not(feature = "test-hooks"))]
#[derive(Debug, Clone, Default)]
pub(crate) struct FailPoint;

#[cfg(not(feature = "test-hooks"))]
impl FailPoint {
    #[inline(always)]
    pub(crate) fn hit(&self, _n: usize) -> bool {
        false
    }

    #[inline(always)]
    #[allow(dead_code)] // used by the PostgreSQL store only
    pub(crate) fn armed(&self) -> bool {
        false
    }
}
