//! The [`Store`] trait: what every backend implements, and what it promises.

use async_trait::async_trait;

use crate::events::Event;
use crate::mailbox::{Mailbox, MailboxOp, MailboxReply};
use crate::schedule::{Schedule, ScheduleOp, ScheduleReply};
use crate::{
    Checkpoint, CheckpointMeta, CommitOutcome, EffectOutcome, EffectRecord, EffectState, OutboxRow,
    RunFilter, RunInfo, RunStatus, StoreError,
};

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

/// A checkpoint store: the extension point for a new backend (see the [crate docs](crate)).
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

    /// Changes a run's mailbox (see [`crate::mailbox`]): reads its bytes under the store's lock (with
    /// whether the run row exists), applies `op` with [`crate::mailbox::apply_to_bytes`] (the rules,
    /// written once), and writes the bytes back when they changed, in one atomic, durable write (as
    /// durable as a commit), or nothing.
    ///
    /// # Errors
    ///
    /// Backend failures (nothing written then); `Corrupted` for damaged bytes.
    async fn mailbox_op(&self, run_id: &str, op: MailboxOp) -> Result<MailboxReply, StoreError>;

    /// A run's mailbox (empty when it has none).
    ///
    /// # Errors
    ///
    /// Backend failures; `Corrupted` for damaged bytes.
    async fn mailbox(&self, run_id: &str) -> Result<Mailbox, StoreError>;

    /// Changes the schedule `name` (see [`crate::schedule`]): reads its row under the store's lock,
    /// applies `op` with [`crate::schedule::apply_to_bytes`] (the rule, written once), and writes the row
    /// back (or deletes it) when the rule says so, in one atomic, durable write, or nothing.
    ///
    /// # Errors
    ///
    /// Backend failures (nothing written then); `Corrupted` for damaged bytes.
    async fn schedule_op(&self, name: &str, op: ScheduleOp) -> Result<ScheduleReply, StoreError>;

    /// Every schedule, in name order.
    ///
    /// # Errors
    ///
    /// Backend failures; `Corrupted` for damaged bytes.
    async fn schedules(&self) -> Result<Vec<Schedule>, StoreError>;

    /// Reads the whole store to check what its reads cannot: that its structures agree with each
    /// other (for the SQLite store, `PRAGMA integrity_check`: every index entry against its table, so an
    /// entry damage removed, which would hide a checkpoint from [`Store::history`] or a run from
    /// [`Store::list_runs`] without an error, is found). It takes as long as reading every page, so
    /// it is for an operator's check (`graphctl verify --all`), not for each open.
    ///
    /// The PostgreSQL store runs amcheck's `bt_index_check` (with `heapallindexed`) on each of its
    /// indexes when the extension is installed in its database and its role may run it (else
    /// `NotChecked`, saying what to do); the MySQL store runs `CHECK TABLE` on its tables; the sled
    /// store reads its commit log's closed segments again (the history its index can be rebuilt from)
    /// and reports what its open found. The default, for stores that check what they read as they read
    /// it and have no whole-store check (the memory store): [`Integrity::NotChecked`].
    ///
    /// # Errors
    ///
    /// `Corrupted` naming what is damaged; backend failures.
    async fn check_integrity(&self) -> Result<Integrity, StoreError> {
        Ok(Integrity::NotChecked {
            why: "this store has no whole-store check; it checks each record as it reads it",
        })
    }

    /// Whether a call of this store can fail with a retryable error ([`StoreError::is_retryable`]:
    /// `Unavailable`, a server or a file that went away for a while). The engine wraps only such stores
    /// in a [`RetryStore`](crate::retry::RetryStore); one that answers `false` is called directly,
    /// without the wrapper's boxed future on every call. The default, `true`, is right for every store
    /// that talks to something that can go away and for every store that wraps another; the memory
    /// store, which holds everything in the process, answers `false`.
    fn can_be_unavailable(&self) -> bool {
        true
    }

    /// Writes a consistent copy of the whole store to `dest`, a path that must not exist yet, while
    /// other tasks go on using the store: the copy holds the store as of one instant between two
    /// commits, and is itself a store of the same kind, complete and durable when this returns (open it
    /// as the original is opened). Restoring is opening the copy, or backing the copy up again to where
    /// the original was.
    ///
    /// The sled store copies its records into a new store (commits wait meanwhile); the SQLite store
    /// writes `VACUUM INTO` from a read transaction (commits go on). The default, for the memory store
    /// and the server stores, whose databases have their own tools (`pg_dump`, `mariadb-dump`;
    /// docs/stores.md): [`StoreError::Unsupported`].
    ///
    /// # Errors
    ///
    /// `Unsupported`; `Backend` when `dest` exists or cannot be written (nothing is left at `dest`
    /// then); `Corrupted` when a record read for the copy is damaged.
    async fn backup_to(&self, dest: &std::path::Path) -> Result<(), StoreError> {
        let _ = dest;
        Err(StoreError::Unsupported {
            operation: "backup",
            detail: "this store has no backup of its own: back its database up with the database's tools"
                .into(),
        })
    }

    /// Writes a new store at `dest` (a path that must not exist yet) holding every record of the runs
    /// in `runs`, byte for byte, and every schedule, as [`Store::backup_to`] does for all runs: what
    /// `graphctl salvage` writes after it has verified which runs read back intact.
    ///
    /// The default, for the memory and server stores: [`StoreError::Unsupported`].
    ///
    /// # Errors
    ///
    /// As [`Store::backup_to`].
    async fn salvage_to(&self, dest: &std::path::Path, runs: &[String]) -> Result<(), StoreError> {
        let _ = (dest, runs);
        Err(StoreError::Unsupported {
            operation: "salvage",
            detail: "this store has no salvage of its own: restore its database with the database's tools"
                .into(),
        })
    }
}

/// What [`Store::check_integrity`] found (damage is an error, `StoreError::Corrupted`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Integrity {
    /// The check read the whole store and found nothing wrong; `check` names it and what it covered
    /// (e.g. "PRAGMA integrity_check", "CHECK TABLE on 11 tables").
    Sound {
        /// The check that ran.
        check: String,
    },
    /// The check found damage in bytes the store does not need, or what its open repaired (the sled
    /// store: commit-log groups its index held, a damaged manifest, an index rebuilt from the log):
    /// nothing stored is lost, and the store works; each finding names the file, the byte and what it
    /// held, or what was done.
    Findings {
        /// The check that ran.
        check: String,
        /// What it found, one line each.
        findings: Vec<String>,
    },
    /// The store has no whole-store check, or cannot run it here.
    NotChecked {
        /// Why, and what would make it run.
        why: &'static str,
    },
}
