//! The embedded default store: a write-ahead commit log in front of sled 0.34.7.
//!
//! # Where a commit is true
//!
//! sled alone loses acknowledged commits when a write fails (its recovery can discard a segment that was
//! flushed and `fdatasync`ed once a write into the next one has failed) and panics on some damaged
//! files. So the truth of an acknowledged commit is the store's own commit log (`wal/`, see
//! the `commit_log` module): a commit is acknowledged once its record is in the log and `fdatasync`ed, one
//! device round trip per commit group. sled is the index the engine reads: each commit group is applied
//! to sled once its record is durable, behind the answer, by the store's applier thread (reads first
//! bring sled up to date: see the `commit` module), and sled writes it to disk in its own time.
//! Every so often (a *checkpoint*, every [`SledOptions::checkpoint_bytes`] of log) sled is flushed and
//! `fdatasync`ed, and the manifest records the last commit sled then holds and the checkpoint before it.
//! Log segments are kept as the store's history up to [`SledOptions::history_bytes`]; past it, those
//! older than the previous checkpoint are retired.
//!
//! # Recovery
//!
//! sled also records, after each group's writes, the sequence number of the last commit group it applied.
//! `open` replays the log's records after the previous checkpoint into sled (older segments are not
//! read). If sled comes back behind them, the records in between are read from the history; if the log
//! no longer reaches back that far, `open` fails with `Corrupted` naming the lost commits: never a silent
//! rollback. While the log holds the index's whole history (since the store's first commit), an index
//! sled cannot read is set aside and rebuilt from the log ([`SledOptions::rebuild_index`] asks for it). Reads check a run's checkpoints against its row (they reach the step the row says), so
//! pages sled lost to damaged files are `Corrupted`, not a shorter history.
//!
//! # Fail-stop
//!
//! After any I/O error in a commit, a checkpoint or a read, the store refuses every operation with
//! [`StoreError::FailStopped`] until it is dropped and opened again: sled may hold in memory a commit
//! whose log record failed, and only a reopen, which reads the files back, knows what is durable. So
//! the engine never runs the items of a checkpoint whose commit failed. A panic inside sled (damaged
//! files) is caught and reported the same way: no panic escapes the store.
//!
//! # Layout
//!
//! `graph-runtime.lock` (one process at a time), `wal/` (log segments, spares, `manifest`), `db/` (sled:
//! trees `runs`, `checkpoints` keyed `u32_be(len(run)) ‖ run ‖ u64_be(step)`, `keys`, `meta`, the
//! effect journal's `effects` and `effect_keys`, `outbox`, `events` keyed like checkpoints by `seq`,
//! and `pending`, by run).
//! Checkpoints and run rows are stored in the envelope of [`graph_store::record`].

mod commit;
mod commit_log;
mod redo;

/// What the fuzz targets in `fuzz/` call (feature `fuzzing`): not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::commit_log::fuzz::*;
}

use std::fs::{File, OpenOptions};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::oneshot;

use commit::{Reply, Request, Writer};
use commit_log::{CommitLog, LogError, LogOptions, Manifest, Record};
use graph_store::events::Event;
use graph_store::journal::{decode_effect, decode_outbox};
use graph_store::mailbox::{Mailbox, MailboxOp, MailboxReply};
use graph_store::record::{decode, decode_run, of_run};
use graph_store::schedule::{Schedule, ScheduleOp, ScheduleReply};
use graph_store::{
    Checkpoint, CheckpointMeta, CommitOutcome, Durability, EffectOutcome, EffectRecord, EffectState,
    FailPoint, Integrity, OutboxRow, RunFilter, RunInfo, RunStatus, Store, StoreError,
};
use redo::{Op, TreeId};

/// Options of [`SledStore::open_with`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SledOptions {
    /// When commits are acknowledged.
    pub durability: Durability,
    /// Bytes of one commit-log segment file, preallocated (default 16 MiB).
    pub log_segment_size: u64,
    /// Bytes of log between two checkpoints (sled flushed, old segments retired; default 2 MiB). What
    /// `open` replays after a crash is bounded by about twice this; a checkpoint's flush stalls the
    /// store's reads for a time that grows with it (bench/analysis.md §8b).
    pub checkpoint_bytes: u64,
    /// Bytes of sled's page cache (default 1 GiB, sled's own default): what the store may hold in
    /// memory of what it has written or read, beside sled's table of every page.
    pub cache_bytes: u64,
    /// Bytes of commit log kept as the store's history (default 1 GiB; 0: none). While the log holds
    /// the index's whole history (from its first commit; not for a backup or salvage copy, nor a store
    /// ever opened with `Durability::Async`), an index whose files sled cannot read is rebuilt from
    /// the log at open, and the damaged files are kept beside it. Past this size, checkpoints retire the
    /// oldest segments as they would with 0 (keeping one checkpoint's worth), and the history is no
    /// longer whole.
    pub history_bytes: u64,
    /// Rebuild the index from the commit log's history at open even when sled can read its files
    /// (for damage sled reports only when a page is read): the index's files are set aside, and the
    /// open fails with `Unsupported` (changing nothing) when the log does not hold the whole history.
    pub rebuild_index: bool,
}

impl Default for SledOptions {
    fn default() -> Self {
        SledOptions {
            durability: Durability::Sync,
            log_segment_size: 16 << 20,
            checkpoint_bytes: 2 << 20,
            cache_bytes: 1 << 30,
            history_bytes: 1 << 30,
            rebuild_index: false,
        }
    }
}

impl SledOptions {
    /// Sets the durability.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets the size of a commit-log segment (a multiple of 8, at least 4 KiB).
    pub fn log_segment_size(mut self, bytes: u64) -> Self {
        self.log_segment_size = bytes;
        self
    }

    /// Sets the bytes of log between two checkpoints.
    pub fn checkpoint_bytes(mut self, bytes: u64) -> Self {
        self.checkpoint_bytes = bytes;
        self
    }

    /// Sets the size of sled's page cache.
    pub fn cache_bytes(mut self, bytes: u64) -> Self {
        self.cache_bytes = bytes;
        self
    }

    /// Sets the bytes of commit log kept as history.
    pub fn history_bytes(mut self, bytes: u64) -> Self {
        self.history_bytes = bytes;
        self
    }

    /// Rebuilds the index from the commit log at open.
    pub fn rebuild_index(mut self, rebuild: bool) -> Self {
        self.rebuild_index = rebuild;
        self
    }
}

/// A checkpoint store in a local folder. Clones share the database.
///
/// # Examples
///
/// ```
/// # fn main() -> Result<(), graph_store::StoreError> {
/// let dir = tempfile::tempdir().unwrap();
/// let store = graph_store_sled::SledStore::open(dir.path())?;
/// # drop(store);
/// # Ok(())
/// # }
/// ```
pub struct SledStore {
    inner: Arc<Inner>,
}

impl Clone for SledStore {
    fn clone(&self) -> Self {
        self.inner.handles.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        SledStore { inner: self.inner.clone() }
    }
}

impl Drop for SledStore {
    /// The last handle stops the applier thread, so the store closes here (its checkpoint applies what
    /// the thread left behind), not on the thread.
    fn drop(&mut self) {
        if self.inner.handles.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            self.inner.applier.close();
        }
    }
}

struct Inner {
    path: PathBuf,
    db: Quiet<sled::Db>,
    runs: Quiet<sled::Tree>,
    checkpoints: Quiet<sled::Tree>,
    keys: Quiet<sled::Tree>,
    meta: Quiet<sled::Tree>,
    effects: Quiet<sled::Tree>,
    effect_keys: Quiet<sled::Tree>,
    outbox: Quiet<sled::Tree>,
    events: Quiet<sled::Tree>,
    pending: Quiet<sled::Tree>,
    mailboxes: Quiet<sled::Tree>,
    schedules: Quiet<sled::Tree>,
    /// sled's log file, for the `fdatasync` its own flush leaves out (see [`Inner::flush_index`]).
    sled_log: File,
    options: SledOptions,
    /// What the open found, for [`Store::check_integrity`]: damage in bytes it did not need (commit
    /// groups the index held durably), an index rebuilt or repaired from the log's history.
    findings: Mutex<Vec<String>>,
    /// The commit log and what goes with it; the group's leader holds it while it writes a group.
    writer: Mutex<Writer>,
    /// Requests waiting for the group's leader.
    queue: commit::Queue,
    /// Groups in the log that sled has not applied yet, and their applier (see the `commit` module).
    applier: Arc<commit::Applier>,
    /// The store's handles (`SledStore`s): the last one's drop waits for the applier.
    handles: std::sync::atomic::AtomicUsize,
    /// The first I/O error: once set, every operation fails (fail-stop).
    failed: Mutex<Option<String>>,
    fail: FailPoint,
    /// sled reported damage to its files (`Corruption`) to a read or a write: an open that fails so is
    /// retried with a rebuild of the index, when the log allows it.
    sled_damage: std::sync::atomic::AtomicBool,
    _lock: File,
}

impl std::fmt::Debug for SledStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledStore")
            .field("path", &self.inner.path)
            .field("durability", &self.inner.options.durability)
            .finish()
    }
}

/// The key of the last commit group sled applied, in the `meta` tree.
const APPLIED: &[u8] = b"applied_seq";

/// What to do about an index that lost commits the log no longer holds.
const REMEDY_INDEX: &str = "the index's files were damaged or lost writes after acknowledging them; \
     restore the store from a backup";
/// What to do about a damaged file of the store that cannot be read at all.
const REMEDY_FILE: &str = "restore the store from a backup; the store did not change any file";

impl SledStore {
    /// Opens (or creates) a store in `path` with [`Durability::Sync`].
    ///
    /// # Errors
    ///
    /// [`StoreError::Locked`] when another process holds the store (after waiting up to a second for
    /// its lock, which a child process holds from its fork to its `exec`); [`StoreError::Corrupted`] naming the
    /// damaged file (and the lost commits, when the index came back behind the log); backend errors.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, SledOptions::default())
    }

    /// Opens (or creates) a store in `path`: replays the commit log into sled and checks that nothing
    /// acknowledged was lost.
    ///
    /// # Errors
    ///
    /// As [`SledStore::open`].
    pub fn open_with(path: impl AsRef<Path>, options: SledOptions) -> Result<Self, StoreError> {
        let path = path.as_ref();
        let asked = options.rebuild_index.then(|| "the rebuild was asked for".to_owned());
        match Self::open_once(path, &options, asked.clone()) {
            Err((e, true)) if asked.is_none() => {
                tracing::warn!(store = %path.display(), error = %e, "the index is damaged: it is rebuilt from the commit log");
                // A rebuild that fails (damage in the log's history) leaves the files as they were, and the
                // error to report is the index's.
                Self::open_once(path, &options, Some(e.to_string())).map_err(|(rebuild, _)| {
                    tracing::warn!(store = %path.display(), error = %rebuild, "the rebuild of the index failed");
                    e
                })
            }
            opened => opened.map_err(|(e, _)| e),
        }
    }

    /// One open: with `rebuild` (why), the index is set aside and rebuilt from the log's history. An
    /// error comes with whether it is damage to the index that a rebuild would repair.
    fn open_once(
        path: &Path,
        options: &SledOptions,
        rebuild: Option<String>,
    ) -> Result<Self, (StoreError, bool)> {
        let options = options.clone();
        let plain = |e| (e, false);
        let path = path.to_path_buf();
        std::fs::create_dir_all(&path)
            .map_err(|e| plain(StoreError::backend(format!("cannot create {}", path.display()), e)))?;
        let lock = lock(&path).map_err(plain)?;
        let wal_dir = path.join("wal");
        // A damaged manifest is not needed to recover: without it every segment of the log is read and
        // replayed (no damage skipped), and it is written again. What is lost is the knowledge that the
        // log is the index's whole history.
        let (loaded, manifest_damage) = match Manifest::load(&wal_dir) {
            Ok(m) => (m, None),
            Err(e @ LogError::Corrupted { .. }) => {
                tracing::warn!(store = %path.display(), error = %e, "the manifest is damaged: the store opens without it");
                (None, Some(e.to_string()))
            }
            Err(e) => return Err(plain(log_error(e))),
        };
        let applied_through = loaded.as_ref().map(|m| m.checkpoint_seq);
        let mut manifest = loaded.clone().unwrap_or_default();
        let log_options = LogOptions {
            segment_size: options.log_segment_size,
            applied_through,
            read_from: manifest.replay_from(),
            ..LogOptions::default()
        };
        let (log, records) = CommitLog::open(&wal_dir, log_options).map_err(log_error).map_err(plain)?;
        // Records up to the last skipped group are not replayed: a skipped group's writes are in the index
        // only, and replaying older records over them would bring back older values.
        let skipped_through = log.skipped().iter().map(|s| s.seqs.end - 1).max();
        let mut findings: Vec<String> = log
            .skipped()
            .iter()
            .map(|s| {
                format!(
                    "{} at byte {}: commit groups {}..{} do not read ({}); the index held them, so nothing \
                     was lost, but the log's history has a hole there: the index can no longer be rebuilt \
                     from it",
                    s.file.display(),
                    s.offset,
                    s.seqs.start,
                    s.seqs.end,
                    s.why
                )
            })
            .collect();
        if let Some(damage) = &manifest_damage {
            findings.push(format!(
                "{damage}; the store opened without it (every segment of the log read and replayed) and wrote it \
                 again; the log is no longer taken as the store's whole history, so the index cannot be rebuilt \
                 from it"
            ));
        }
        // The index can be rebuilt from the log when the log holds the index's whole history, every
        // group of it readable at open, and reaches the last group the index held durably.
        let rebuildable = log.first_seq() == Some(1)
            && manifest_damage.is_none()
            && loaded.as_ref().is_none_or(Manifest::whole_history)
            && skipped_through.is_none()
            && log.next_seq().is_some_and(|n| n > manifest.checkpoint_seq);
        let db_dir = sled_folder(&path);
        // Damage to the index (sled's files) that a rebuild from the log would repair.
        let index = |e: StoreError, seen: bool| {
            let damage =
                seen || matches!(&e, StoreError::Corrupted { file: Some(f), .. } if f.starts_with(&db_dir));
            (e, rebuildable && rebuild.is_none() && damage)
        };
        let mut kept = None;
        if rebuild.is_some() {
            if !rebuildable {
                return Err(plain(StoreError::Unsupported {
                    operation: "a rebuild of its index",
                    detail: "its commit log does not hold the store's whole history (segments were retired \
                             past `history_bytes`, the store is a backup or salvage copy, or it was used with \
                             `Durability::Async`); nothing was changed: restore a backup instead"
                        .into(),
                }));
            }
            kept = set_aside(&db_dir).map_err(plain)?;
        }
        let db = open_sled(&db_dir, options.cache_bytes).map_err(|e| index(e, false))?;
        let db = Quiet::new(db);
        let tree = |name: &str| {
            guard(&path, || db.open_tree(name)).map_err(|e| index(e, false))?.map(Quiet::new).map_err(|e| {
                let damage = matches!(e, sled::Error::Corruption { .. });
                index(StoreError::backend(format!("cannot open the sled tree `{name}`"), e), damage)
            })
        };
        let (runs, checkpoints, keys, meta) =
            (tree("runs")?, tree("checkpoints")?, tree("keys")?, tree("meta")?);
        let (effects, effect_keys, outbox) = (tree("effects")?, tree("effect_keys")?, tree("outbox")?);
        let (events, pending, mailboxes) = (tree("events")?, tree("pending")?, tree("mailboxes")?);
        let schedules = tree("schedules")?;
        if let Some(why) = &rebuild {
            findings.push(format!(
                "the index (sled's files in {}) was rebuilt from the commit log's history, commit groups 1 to \
                 {} ({why}); {}",
                db_dir.display(),
                log.next_seq().map_or(0, |n| n - 1),
                kept.as_ref().map_or("there were none".to_owned(), |k| format!(
                    "the files it replaced are kept in {}",
                    k.display()
                ))
            ));
        }
        // Whether the log is, from here on, the index's whole history: a new store's log is, as long as
        // every write goes through it (not under `Durability::Async`).
        let whole = options.durability == Durability::Sync
            && manifest_damage.is_none()
            && skipped_through.is_none()
            && match (&loaded, log.first_seq()) {
                (Some(m), first) => m.whole_history() && first.is_none_or(|f| f == 1),
                (None, Some(first)) => first == 1,
                // No manifest and no log: a new store, or one whose writes never went through the log.
                (None, None) => {
                    let trees = [&runs, &checkpoints, &keys, &effects, &effect_keys, &outbox, &events];
                    let trees = trees.into_iter().chain([&pending, &mailboxes, &schedules]);
                    guard(&path, || trees.into_iter().all(|t| t.is_empty())).map_err(|e| index(e, false))?
                }
            };
        if !whole && loaded.as_ref().is_none_or(Manifest::whole_history) {
            // Durably, before any write that does not go through the log.
            manifest.set_whole_history(false);
            manifest.store(&wal_dir).map_err(log_error).map_err(plain)?;
        }
        manifest.set_whole_history(whole);
        let sled_log = open_sled_log(&path).map_err(plain)?;
        let inner = Inner {
            writer: Mutex::new(Writer::new(log, manifest.clone(), 0)),
            path,
            db,
            runs,
            checkpoints,
            keys,
            meta,
            effects,
            effect_keys,
            outbox,
            events,
            pending,
            mailboxes,
            schedules,
            sled_log,
            options,
            findings: Mutex::new(findings),
            queue: commit::Queue::new(1),
            applier: Arc::default(),
            handles: std::sync::atomic::AtomicUsize::new(1),
            failed: Mutex::new(None),
            fail: Default::default(),
            sled_damage: Default::default(),
            _lock: lock,
        };
        let recovered = match rebuild {
            Some(_) => inner.rebuild().and_then(|()| inner.recover(&manifest, Vec::new(), None)),
            None => inner.recover(&manifest, records, skipped_through),
        };
        if let Err(e) = recovered {
            // A store that did not open must not checkpoint when it is dropped: its writer was never
            // positioned (`next_seq` 0: the checkpoint's `next_seq - 1` overflowed, or in a release
            // build wrote `checkpoint_seq = u64::MAX` into the manifest), and a store reported damaged
            // must be left as it was found.
            let mut failed = inner.failed.lock().unwrap_or_else(|e| e.into_inner());
            failed.get_or_insert_with(|| format!("the store did not open: {e}"));
            drop(failed);
            let seen = inner.sled_damage.load(std::sync::atomic::Ordering::Relaxed);
            drop(inner);
            // A rebuild that did not finish leaves the index's files as they were found.
            if let Some(kept) = &kept {
                let back = std::fs::remove_dir_all(&db_dir).and_then(|()| std::fs::rename(kept, &db_dir));
                if let Err(b) = back {
                    tracing::warn!(error = %b, "cannot move {} back to {}", kept.display(), db_dir.display());
                }
            }
            return Err(index(e, seen));
        }
        Ok(SledStore { inner: Arc::new(inner) })
    }

    /// The store's folder.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Makes sled itself durable now (a checkpoint): what `Durability::Async` commits so far survives a
    /// crash once this returns. Under `Durability::Sync` every acknowledged commit is durable already.
    ///
    /// # Errors
    ///
    /// The flush failed (the store is then fail-stopped).
    pub async fn flush(&self) -> Result<(), StoreError> {
        match self.request(Request::Checkpoint).await? {
            Reply::Done => Ok(()),
            other => unreachable!("a checkpoint replies Done, not {other:?}"),
        }
    }

    /// Commit-log writes (each one `fdatasync`) this store made since it was opened: each makes every
    /// commit of its group durable.
    pub fn log_syncs(&self) -> u64 {
        self.inner.writer.lock().unwrap_or_else(|e| e.into_inner()).syncs
    }

    /// Bytes the index (sled) occupies on disk.
    ///
    /// # Errors
    ///
    /// Backend failures.
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.inner.read(|| self.inner.db.size_on_disk())
    }

    /// Test hook (feature `test-hooks`): the next commit fails after its `n`-th write (1 = the
    /// idempotency key, 2 = the checkpoint, 3 = the run row) and rolls back.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn fail_point(&self) -> &FailPoint {
        &self.inner.fail
    }

    /// Test hook (feature `test-hooks`): the next commit-log write fails as an I/O error would: the
    /// store fail-stops, and neither the log nor sled holds the group.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn fail_next_log_write(&self) {
        self.inner.writer.lock().unwrap_or_else(|e| e.into_inner()).inject_log_failure = true;
    }

    /// Test hook (feature `test-hooks`): overwrites the raw record of a checkpoint in the index (to
    /// simulate damage or a newer format).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn put_raw_checkpoint(&self, run_id: &str, step: u64, bytes: &[u8]) -> Result<(), StoreError> {
        self.inner.read(|| self.inner.checkpoints.insert(cp_key(run_id, step), bytes)).map(drop)
    }

    /// Test hook (feature `test-hooks`): removes a checkpoint from the index (sled) only, not through the
    /// log, as damaged sled files whose pages sled's recovery skips do.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn remove_from_index(&self, run_id: &str, step: u64) -> Result<(), StoreError> {
        self.inner.read(|| self.inner.checkpoints.remove(cp_key(run_id, step))).map(drop)
    }

    /// Test hook (feature `test-hooks`): the raw record of a checkpoint.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn raw_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.inner.read(|| self.inner.checkpoints.get(cp_key(run_id, step)))?.map(|v| v.to_vec()))
    }

    /// Hands `request` to the group's leader, leading it here when there is none (see `commit`); under
    /// `Durability::Async`, does it here.
    async fn request(&self, request: Request) -> Result<Reply, StoreError> {
        self.inner.check()?;
        if self.inner.options.durability == Durability::Async {
            return commit::run_inline(&self.inner, request);
        }
        let (reply, outcome) = oneshot::channel();
        if commit::enqueue(&self.inner, request, reply) {
            if graph_store::group::may_lead_here() {
                tokio::task::block_in_place(|| commit::lead_here(&self.inner));
            } else {
                let inner = self.inner.clone();
                tokio::task::spawn_blocking(move || commit::commit_loop(inner));
            }
        }
        outcome.await.map_err(|_| StoreError::backend("the commit thread stopped", "reply dropped"))?
    }
}

impl Inner {
    /// Brings sled up to date with the log (see the module doc), then checkpoints, so the next open
    /// replays nothing of what came before.
    fn recover(
        &self,
        manifest: &Manifest,
        records: Vec<Record>,
        skipped_through: Option<u64>,
    ) -> Result<(), StoreError> {
        let mut applied = self.applied_seq()?;
        let mut records = records;
        // The index came back behind the records `open` read, and the log holds older ones: read them.
        if records.first().is_some_and(|r| r.seq > applied.saturating_add(1)) {
            let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            if w.log.first_seq().is_some_and(|f| f <= applied.saturating_add(1)) {
                let mut older = Vec::new();
                for segment in w.log.history() {
                    older.extend(segment.map_err(log_error)?.into_iter().filter(|r| r.seq > applied));
                }
                let finding = format!(
                    "the index came back holding commit group {applied}, behind the {} groups the log replays \
                     at open: groups {}..{} were replayed from the log's history",
                    records.len(),
                    applied + 1,
                    records[0].seq
                );
                tracing::warn!(store = %self.path.display(), "{finding}");
                self.findings.lock().unwrap_or_else(|e| e.into_inner()).push(finding);
                records = older;
            }
        }
        // A damaged group is skipped only because the index held it durably: if the index came back
        // without it (behind it), it is lost, and that is damage the open must report.
        if let Some(skipped) = skipped_through.filter(|&s| applied < s) {
            return Err(StoreError::corrupted_file(
                self.path.join("wal"),
                format!(
                    "commit group {skipped} is damaged in the log, and the index came back holding only \
                     group {applied}: the groups between are in neither"
                ),
                REMEDY_INDEX,
            ));
        }
        if applied < manifest.checkpoint_seq
            && records.first().is_none_or(|r| r.seq > applied.saturating_add(1))
        {
            return Err(StoreError::corrupted_file(
                sled_folder(&self.path),
                format!(
                    "the index came back holding commit group {applied}, but had durably held group {}; \
                     groups {}..={} are lost and the commit log no longer holds them",
                    manifest.checkpoint_seq,
                    applied + 1,
                    manifest.checkpoint_seq
                ),
                REMEDY_INDEX,
            ));
        }
        if let Some(first) = records.first().filter(|r| r.seq > applied.saturating_add(1)) {
            let detail = format!(
                "the index holds commit group {applied} and the commit log starts at group {}: groups {}..{} \
                 are in neither",
                first.seq,
                applied + 1,
                first.seq
            );
            return Err(StoreError::corrupted_file(self.path.join("wal"), detail, REMEDY_INDEX));
        }
        let last_logged = records.last().map(|r| r.seq);
        // Replay every record `open` read (those after the previous checkpoint), not only those after the
        // last one: a record after it may be in sled only in part, and damaged sled files can make sled
        // come back without pages it had durably written before it (its recovery skips them without an
        // error), which the replayed window repairs. Records are blind writes applied in order, so replaying one that sled holds changes
        // nothing. The exception: sled holds groups the log does not (the log's tail was damaged after
        // sled applied it). sled's log is sequential, so it then holds every record of the log whole, and
        // replaying them would overwrite newer values with older ones: nothing is replayed.
        //
        // Nor are records up to a damaged group that the open skipped (the index held it durably): its
        // writes are in the index alone, and older records replayed over them would undo them.
        let from =
            if last_logged.is_some_and(|l| l < applied) { applied } else { skipped_through.unwrap_or(0) };
        for record in records.into_iter().filter(|r| r.seq > from) {
            self.apply_record(&record.payload, Some(record.seq))?;
            applied = applied.max(record.seq);
        }
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        w.next_seq = applied + 1;
        // A clean close checkpointed: nothing to make durable, nothing to retire.
        if applied != manifest.checkpoint_seq {
            self.checkpoint(&mut w)?;
        }
        // sled holds more than the log (the log's last group was damaged, and is read as a torn tail, after
        // sled had written it): the log starts over after sled. (An empty log takes any seq.)
        if last_logged.is_some_and(|l| l < applied) {
            w.log.restart().map_err(|e| self.fail_stop(e))?;
            w.manifest.set_whole_history(false);
        }
        Ok(())
    }

    /// Applies every record of the log's history to a new, empty index, and makes it durable (see
    /// [`SledOptions::history_bytes`]).
    fn rebuild(&self) -> Result<(), StoreError> {
        let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        for segment in w.log.history() {
            for record in segment.map_err(log_error)? {
                self.apply_record(&record.payload, Some(record.seq))?;
            }
        }
        self.flush_index()
    }

    /// Applies one log record to sled: its writes in order, then (with a `seq`) the record's sequence
    /// number as the last group applied. No sled transaction: the group's leader is the only writer, the
    /// log is the truth, and recovery replays every record after the last checkpoint, so a record that a
    /// crash cut short in sled is completed from the log. (A sled transaction or batch also makes sled
    /// write and `sync_file_range` its log at once, a second device round trip per commit.)
    fn apply_record(&self, bytes: &[u8], seq: Option<u64>) -> Result<(), StoreError> {
        let ops = redo::parse(bytes).map_err(|detail| {
            let what = seq.map_or_else(|| "a commit".to_owned(), |s| format!("commit group {s}"));
            StoreError::corrupted_file(
                self.path.join("wal"),
                format!("{what} does not parse: {detail}"),
                REMEDY_FILE,
            )
        })?;
        let applied = guard(&self.path, || -> sled::Result<()> {
            for op in ops {
                match op {
                    Op::Put { tree: t, key, value } => drop(self.tree(t).insert(key, value)?),
                    Op::Remove { tree: t, key } => drop(self.tree(t).remove(key)?),
                }
            }
            if let Some(seq) = seq {
                self.meta.insert(APPLIED, &seq.to_be_bytes())?;
            }
            Ok(())
        })?;
        applied.map_err(|e| self.sled_failed("writing", &e))
    }

    /// The step a run's row says the run reached (`None`: no row), read BEFORE its checkpoints by the
    /// reads that [`Inner::check_index`] checks.
    fn latest_step(&self, run_id: &str) -> Result<Option<u64>, StoreError> {
        let row = self.read(|| self.runs.get(run_id.as_bytes()))?;
        Ok(row.map(|b| self.decode_run(run_id, &b)).transpose()?.map(|info| info.latest_step))
    }

    /// Checks what the index returned for a run against the run's own row, read before: its last
    /// checkpoint (`last`) is at least the step the row said the run reached (`latest`). A commit writes
    /// the checkpoint before the row, so a read of the row followed by a read of the checkpoints finds the
    /// row's step even while commits go on (a later one may add more). Fewer means sled lost some of its
    /// pages (damaged files whose pages sled's recovery skipped without an error): `Corrupted` naming the
    /// run, the step and sled's folder, never a shorter history. (Holes before the last step are not
    /// checked: a fork cut short by a crash leaves some; nor are checkpoints without a row, which a
    /// commit racing the read also shows.)
    fn check_index(&self, run_id: &str, latest: Option<u64>, last: Option<u64>) -> Result<(), StoreError> {
        let Some(latest) = latest else { return Ok(()) };
        let detail = match last {
            Some(last) if last >= latest => return Ok(()),
            Some(last) => format!(
                "the run's row says it reached step {latest} but its last checkpoint in the index is step {last}"
            ),
            None => {
                format!(
                    "the run's row says it reached step {latest} but the index holds none of its checkpoints"
                )
            }
        };
        Err(StoreError::Corrupted {
            run: Some(run_id.to_owned()),
            step: Some(latest),
            file: Some(sled_folder(&self.path)),
            detail,
            remedy: REMEDY_INDEX,
        })
    }

    /// The sled tree of `t`.
    fn tree(&self, t: TreeId) -> &sled::Tree {
        match t {
            TreeId::Runs => &self.runs,
            TreeId::Checkpoints => &self.checkpoints,
            TreeId::Keys => &self.keys,
            TreeId::Effects => &self.effects,
            TreeId::EffectKeys => &self.effect_keys,
            TreeId::Outbox => &self.outbox,
            TreeId::Events => &self.events,
            TreeId::Pending => &self.pending,
            TreeId::Mailboxes => &self.mailboxes,
            TreeId::Schedules => &self.schedules,
        }
    }

    /// The last commit group sled applied (0: none).
    fn applied_seq(&self) -> Result<u64, StoreError> {
        let v = self.read(|| self.meta.get(APPLIED))?;
        match v {
            None => Ok(0),
            Some(b) => b.as_ref().try_into().map(u64::from_be_bytes).map_err(|_| {
                StoreError::corrupted_file(
                    sled_folder(&self.path),
                    "the applied commit group is damaged",
                    REMEDY_FILE,
                )
            }),
        }
    }

    /// Makes everything sled applied durable, records it in the manifest, and retires log segments older
    /// than the previous checkpoint (one checkpoint's worth stays, for an index that loses its last
    /// writes after an I/O error).
    fn checkpoint(&self, w: &mut Writer) -> Result<(), StoreError> {
        commit::catch_up(self)?;
        self.flush_index()?;
        let previous = w.manifest.checkpoint_seq;
        w.manifest.checkpoint_seq = w.next_seq - 1;
        w.manifest.set_replay_from(previous);
        w.manifest.store(&self.path.join("wal")).map_err(|e| self.fail_stop(e))?;
        let keep = if w.manifest.whole_history() { self.options.history_bytes } else { 0 };
        if w.log.retire_through(previous, keep).map_err(|e| self.fail_stop(e))? > 0 {
            // Stored with the next checkpoint; until then the log's first seq says it.
            w.manifest.set_whole_history(false);
        }
        w.since_checkpoint = 0;
        Ok(())
    }

    /// [`Store::check_integrity`]: the open's findings, then every closed segment of the log read and
    /// checked again (without holding the log: they never change; one retired meanwhile ends the read).
    fn integrity(&self) -> Result<Integrity, StoreError> {
        self.check()?;
        let (mut history, whole) = {
            let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            (w.log.closed_history(), w.manifest.whole_history() && w.log.first_seq() == Some(1))
        };
        // A segment retired while it was read (deleted, or recycled and written again) is not damage.
        let retired = |segment: Option<u64>| {
            let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            segment.is_some_and(|s| w.log.first_seq().is_none_or(|first| first > s))
        };
        let mut findings = self.findings.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (mut segments, mut groups) = (0, 0);
        while let Some(segment) = history.next() {
            match segment {
                Ok(records) => (segments, groups) = (segments + 1, groups + records.len()),
                Err(_) if retired(history.last_read()) => break,
                Err(e) => {
                    findings.push(format!(
                        "the commit log's history does not read: {e}; {}",
                        if whole {
                            "the index could no longer be rebuilt from it: take a backup"
                        } else {
                            "the index holds these groups durably"
                        }
                    ));
                    break;
                }
            }
        }
        let check = format!(
            "the commit log's checksums: {segments} closed segments ({groups} commit groups) read again, the \
             current one at open; the log {} the store's whole history",
            if whole { "holds" } else { "does not hold" }
        );
        Ok(if findings.is_empty() {
            Integrity::Sound { check }
        } else {
            Integrity::Findings { check, findings }
        })
    }

    /// [`Store::backup_to`] (`runs` `None`) and [`Store::salvage_to`]: a new store at `dest`, then
    /// every record of every tree (of the runs in `runs`, and every schedule) copied into its index,
    /// with no commit in between (the writer lock is held throughout), then made durable. The copy has
    /// a commit log of its own, empty: its records are all in its index.
    fn copy_to(
        &self,
        dest: &Path,
        runs: Option<&std::collections::HashSet<&[u8]>>,
    ) -> Result<(), StoreError> {
        self.check()?;
        if dest.exists() {
            return Err(StoreError::backend(
                format!("cannot copy the store to {}", dest.display()),
                "it exists already: a backup or a salvage goes to a new path",
            ));
        }
        let _no_commits = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let copied = SledStore::open(dest).and_then(|copy| {
            // The copy's index holds what its log never will: its log is not its whole history.
            let mut w = copy.inner.writer.lock().unwrap_or_else(|e| e.into_inner());
            w.manifest.set_whole_history(false);
            w.manifest.store(&dest.join("wal")).map_err(log_error)?;
            drop(w);
            for t in TreeId::ALL {
                let to = copy.inner.tree(t);
                let mut entries = self.tree(t).iter();
                while let Some((k, v)) = self.read(|| entries.next().transpose())? {
                    if let Some(runs) = runs
                        && run_of(t, &k, &v).is_some_and(|run| !runs.contains(run))
                    {
                        continue;
                    }
                    guard(dest, || to.insert(k, v))?
                        .map_err(|e| StoreError::backend(format!("writing {}", dest.display()), e))?;
                }
            }
            copy.inner.flush_index()?;
            let parent = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            File::open(parent)
                .and_then(|d| d.sync_all())
                .map_err(|e| StoreError::backend(format!("cannot sync the folder {}", parent.display()), e))
        });
        if copied.is_err() {
            let _ = std::fs::remove_dir_all(dest);
        }
        copied
    }

    /// Makes every write sled acknowledged so far durable.
    ///
    /// On Linux `sled::Db::flush` writes the log with `sync_file_range`, which waits for the data pages
    /// but neither writes the file's metadata (its length grows as the log does) nor flushes the
    /// device's write cache. The `fdatasync` (`File::sync_data`) after it, on the same file, does both.
    fn flush_index(&self) -> Result<(), StoreError> {
        guard(&self.path, || self.db.flush())?
            .map_err(|e| self.fail_stop(format!("flushing sled: {}", sled_cause(&e))))?;
        self.sled_log.sync_data().map_err(|e| self.fail_stop(format!("fdatasync of the sled log: {e}")))
    }

    /// Stops the store after sled's error `e` while `doing` (reading, writing) and notes damage sled
    /// reported.
    fn sled_failed(&self, doing: &str, e: &sled::Error) -> StoreError {
        if matches!(e, sled::Error::Corruption { .. } | sled::Error::ReportableBug(_)) {
            self.sled_damage.store(true, std::sync::atomic::Ordering::Relaxed);
            return self.fail_stop(format!(
                "{doing} sled: {} (sled's files are damaged, or the device returned wrong bytes; if the \
                 device is sound, `graphctl rebuild` rebuilds the index from the commit log)",
                sled_cause(e)
            ));
        }
        self.fail_stop(format!("{doing} sled: {}", sled_cause(e)))
    }

    /// Fails with `FailStopped` once an I/O error stopped the store.
    fn check(&self) -> Result<(), StoreError> {
        match &*self.failed.lock().unwrap_or_else(|e| e.into_inner()) {
            None => Ok(()),
            Some(cause) => Err(StoreError::FailStopped { path: self.path.clone(), cause: cause.clone() }),
        }
    }

    /// Stops the store after an I/O error (see the module doc) and returns the error to report.
    fn fail_stop(&self, cause: impl std::fmt::Display) -> StoreError {
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        let cause = failed.get_or_insert_with(|| cause.to_string()).clone();
        tracing::error!(store = %self.path.display(), %cause, "store stopped after an I/O error");
        StoreError::FailStopped { path: self.path.clone(), cause }
    }

    /// The row of `run_id`: damage names the run and sled's folder (a path built only then: every
    /// commit reads its run's row).
    fn decode_run(&self, run_id: &str, bytes: &[u8]) -> Result<RunInfo, StoreError> {
        decode_run(bytes).map_err(|e| of_run(e, run_id, Some(&sled_folder(&self.path))))
    }

    /// A read of the store: sled, once it holds every group the log does (see `commit::catch_up`).
    fn read<T>(&self, f: impl FnOnce() -> sled::Result<T>) -> Result<T, StoreError> {
        if !self.applier.caught_up() {
            commit::catch_up(self)?;
        }
        self.read_index(f)
    }

    /// A read of sled as it is: fail-stopped stores refuse it, sled errors fail-stop the store, panics
    /// are caught.
    fn read_index<T>(&self, f: impl FnOnce() -> sled::Result<T>) -> Result<T, StoreError> {
        self.check()?;
        guard(&self.path, f)?.map_err(|e| self.sled_failed("reading", &e))
    }
}

impl Drop for Inner {
    /// A clean close checkpoints, so the next open replays nothing.
    fn drop(&mut self) {
        if self.check().is_err() {
            return;
        }
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = self.checkpoint(&mut w) {
            tracing::warn!(store = %self.path.display(), error = %e, "checkpoint at close failed");
        }
    }
}

/// A sled error as a message. sled shows an I/O error with `Debug` (`IO error: Os { code: 28, .. }`);
/// this shows the operating system's message, as every other I/O error of the store does.
fn sled_cause(e: &sled::Error) -> String {
    match e {
        sled::Error::Io(io) => io.to_string(),
        other => other.to_string(),
    }
}

/// A sled handle whose drop cannot panic out of the store.
///
/// sled's log, dropped with the last handle, `fsync`s its file and unwraps the result
/// (`pagecache/logger.rs`, `impl Drop for Log`): on a file system that failed (full, read-only after
/// an I/O error) dropping the store, or a failed `open`, panicked the caller's thread instead of
/// returning the error. Every handle is wrapped, so whichever one is dropped last catches it. (The
/// panic hook still prints the panic.)
struct Quiet<T>(Option<T>);

impl<T> Quiet<T> {
    fn new(handle: T) -> Self {
        Quiet(Some(handle))
    }
}

impl<T> std::ops::Deref for Quiet<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0.as_ref().expect("a handle is present until it is dropped")
    }
}

impl<T> Drop for Quiet<T> {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take()
            && catch_unwind(AssertUnwindSafe(|| drop(handle))).is_err()
        {
            tracing::error!(
                "sled panicked while closing its files (an I/O error); nothing is lost: the commit log holds every acknowledged commit"
            );
        }
    }
}

/// sled's own folder inside the store's folder `path` (`<store>/db`): what damage reported by sled names.
fn sled_folder(path: &Path) -> PathBuf {
    path.join("db")
}

/// Runs a sled call, turning a panic (sled's reaction to some damaged files) into `Corrupted`.
fn guard<T>(path: &Path, f: impl FnOnce() -> T) -> Result<T, StoreError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("a panic without a message");
        StoreError::corrupted_file(
            sled_folder(path),
            format!("sled cannot read its files: {message}"),
            REMEDY_FILE,
        )
    })
}

fn log_error(e: LogError) -> StoreError {
    match e {
        LogError::Corrupted { file, offset, detail } => {
            StoreError::corrupted_file(file, format!("at byte {offset}: {detail}"), REMEDY_FILE)
        }
        LogError::UnsupportedVersion { found, supported, .. } => {
            StoreError::UnsupportedSchemaVersion { found, supported }
        }
        other => StoreError::backend("the commit log", other),
    }
}

/// Takes the store's process lock: sled locks its own file but reports a held lock only as an I/O
/// error with a message; this lock, taken first, makes the case a typed error. A held lock is waited
/// for up to a second first ([`commit_log::lock_waiting`]: a child process holds it from its fork to its
/// `exec`).
fn lock(path: &Path) -> Result<File, StoreError> {
    let lock_path = path.join("graph-runtime.lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| StoreError::backend(format!("cannot open {}", lock_path.display()), e))?;
    match commit_log::lock_waiting(&lock) {
        Ok(true) => Ok(lock),
        Ok(false) => Err(StoreError::Locked { path: path.to_path_buf() }),
        Err(e) => Err(StoreError::backend(format!("cannot lock {}", lock_path.display()), e)),
    }
}

/// Moves the index's folder aside (`db.damaged-<n>`, the first free n) and syncs the store's folder:
/// the files are kept for whoever wants to look at them, and a new index is made in their place.
fn set_aside(db: &Path) -> Result<Option<PathBuf>, StoreError> {
    let store = db.parent().unwrap_or(Path::new("."));
    let kept =
        (1..).map(|n| store.join(format!("db.damaged-{n}"))).find(|p| !p.exists()).expect("a free name");
    if !db.exists() {
        return Ok(None);
    }
    let moved = std::fs::rename(db, &kept).and_then(|()| File::open(store)?.sync_all());
    moved
        .map_err(|e| StoreError::backend(format!("cannot move {} to {}", db.display(), kept.display()), e))?;
    Ok(Some(kept))
}

/// Opens the sled database. Our lock file is already held, so no other process has it; if sled's own
/// lock is still taken, it is by this process's previous instance, whose background writes sled
/// finishes on its thread pool after the `Db` is dropped. Wait for them (bounded), rather than fail a
/// reopen. (sled reports its lock only as an `Io` error of kind `Other`.)
fn open_sled(path: &Path, cache_bytes: u64) -> Result<sled::Db, StoreError> {
    let store = path.parent().unwrap_or(path);
    check_sled_conf(path)?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let opened = guard(store, || {
            sled::Config::new().path(path).mode(sled::Mode::HighThroughput).cache_capacity(cache_bytes).open()
        })?;
        match opened {
            Err(sled::Error::Io(e))
                if e.kind() == std::io::ErrorKind::Other && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(sled::Error::Corruption { .. }) if remove_unfinished_snapshots(path)? => {}
            Err(sled::Error::Corruption { .. }) | Err(sled::Error::ReportableBug(_)) => {
                let detail = format!(
                    "sled cannot read its files: {}",
                    opened.err().map(|e| e.to_string()).unwrap_or_default()
                );
                return Err(StoreError::corrupted_file(path, detail, REMEDY_FILE));
            }
            other => {
                return other.map_err(|e| {
                    StoreError::backend(format!("cannot open the sled database in {}", store.display()), e)
                });
            }
        }
    }
}

/// Removes the snapshot files sled left unfinished; true when there were any (the open is worth trying
/// again).
///
/// sled writes a snapshot as `snap.<lsn>.generating`, syncs it, renames it `snap.<lsn>` and only then
/// deletes the older ones; but `open` reads the last `snap.*` file in name order, a `.generating` one
/// included. So a crash during the write (a SIGKILL while the store was opening was enough: `crash.rs`,
/// on a loaded machine) left a store that failed every open with "Read corrupted data" (sled issue
/// #1527). An unfinished file is never the snapshot in force and the previous one is still there:
/// removing it puts sled back where it was before the write began. Done only after sled refused to
/// open, so the files of a previous instance of this process that sled is still finishing are never
/// touched.
fn remove_unfinished_snapshots(db: &Path) -> Result<bool, StoreError> {
    let err = |e| StoreError::backend(format!("cannot list {}", db.display()), e);
    let mut removed = false;
    for entry in std::fs::read_dir(db).map_err(err)? {
        let entry = entry.map_err(err)?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            std::fs::remove_file(entry.path()).map_err(|e| {
                StoreError::backend(format!("cannot remove sled's unfinished snapshot {name}"), e)
            })?;
            tracing::warn!(file = %entry.path().display(), "removed sled's unfinished snapshot (a crash interrupted it)");
            removed = true;
        }
    }
    Ok(removed)
}

/// Checks the checksum of sled's `conf` file, which sled itself only warns about: a damaged `conf` that
/// still parses would open the database with other parameters (a different segment size reads its log
/// wrongly), and one that does not parse is reported as an unsupported old version. The file is
/// `key: value` lines followed by the little-endian CRC-32 (IEEE) of the lines. Like sled, a file of 8
/// bytes or fewer counts as absent (sled writes a new one).
///
/// sled writes the file when it creates a database (or finds none) in two `write` calls, the lines and
/// then their checksum, with no temporary file and no sync: a process killed between the two leaves the
/// lines alone, and every later open failed (found by `tests/tests/faults/effects_crash.rs`, a SIGKILL during
/// a store's first open). A file that is exactly sled's three lines with no checksum after them is that
/// interrupted write, not damage (damage to a checksummed file leaves the checksum's four bytes, which
/// are not such a line; a cut of exactly those four bytes reads the same, and finishing it restores the
/// file): the write is finished here, atomically, as sled would have finished it.
fn check_sled_conf(db: &Path) -> Result<(), StoreError> {
    let path = db.join("conf");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::backend(format!("cannot read {}", path.display()), e)),
    };
    if bytes.len() <= 8 {
        return Ok(());
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32_ieee(body).to_le_bytes() == crc {
        return Ok(());
    }
    if !is_unsummed_sled_conf(&bytes) {
        return Err(StoreError::corrupted_file(
            path,
            "sled's configuration does not match its checksum",
            REMEDY_FILE,
        ));
    }
    tracing::warn!(file = %path.display(), "sled's configuration lacks its checksum (a process was killed while sled wrote it): finishing the write");
    let mut whole = bytes.clone();
    whole.extend_from_slice(&crc32_ieee(&bytes).to_le_bytes());
    commit_log::Io::default()
        .replace(commit_log::Site::SledConf, &db.join("conf.graph-runtime.tmp"), &path, &whole)
        .map_err(|e| StoreError::backend(format!("cannot finish writing {}", path.display()), e))
}

/// Whether `bytes` are the lines sled writes in its `conf` (`segment_size: <n>`, `use_compression:
/// <bool>`, `version: <major>.<minor>`, each ending in a newline) and nothing else.
fn is_unsummed_sled_conf(bytes: &[u8]) -> bool {
    let Some(body) = std::str::from_utf8(bytes).ok().and_then(|t| t.strip_suffix('\n')) else {
        return false;
    };
    let [size, compression, version] = body.split('\n').collect::<Vec<_>>()[..] else { return false };
    let number = |v: &str| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
    size.strip_prefix("segment_size: ").is_some_and(number)
        && compression.strip_prefix("use_compression: ").is_some_and(|v| v == "true" || v == "false")
        && version
            .strip_prefix("version: ")
            .and_then(|v| v.split_once('.'))
            .is_some_and(|(major, minor)| number(major) && number(minor))
}

/// CRC-32 (IEEE 802.3, as `crc32fast` computes it for sled), bit by bit: it checks one small file.
fn crc32_ieee(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// Opens sled's log file (`<store>/db/db`) for [`Inner::flush_index`], and makes the store's folders
/// durable (a file just created is only on disk once its directory entry is).
fn open_sled_log(path: &Path) -> Result<File, StoreError> {
    let log_path = sled_folder(path).join("db");
    let log = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&log_path)
        .map_err(|e| StoreError::backend(format!("cannot open {}", log_path.display()), e))?;
    for dir in [path.to_path_buf(), sled_folder(path)] {
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| StoreError::backend(format!("cannot sync the folder {}", dir.display()), e))?;
    }
    Ok(log)
}

fn run_key(run_id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + run_id.len() + 8);
    k.extend_from_slice(&(run_id.len() as u32).to_be_bytes());
    k.extend_from_slice(run_id.as_bytes());
    k
}

/// The run a record of tree `t` belongs to (`None`: a schedule, which belongs to none): its key in the
/// trees keyed by run id, the run key its key starts with in those keyed by run and step, and the one
/// its value starts with in the two trees that point into those.
fn run_of<'a>(t: TreeId, key: &'a [u8], value: &'a [u8]) -> Option<&'a [u8]> {
    let prefixed = |b: &'a [u8]| {
        let len = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
        b.get(4..4 + len)
    };
    match t {
        TreeId::Runs | TreeId::Pending | TreeId::Mailboxes => Some(key),
        TreeId::Checkpoints | TreeId::Outbox | TreeId::Effects | TreeId::Events => prefixed(key),
        TreeId::Keys | TreeId::EffectKeys => prefixed(value),
        TreeId::Schedules => None,
    }
}

fn cp_key(run_id: &str, step: u64) -> Vec<u8> {
    let mut k = run_key(run_id);
    k.extend_from_slice(&step.to_be_bytes());
    k
}

/// The key of an outbox row: `cp_key(run, step) ‖ u32_be(emit order)`, so rows drain in commit order
/// within a run.
fn outbox_key(run_id: &str, step: u64, index: usize) -> Vec<u8> {
    let mut k = cp_key(run_id, step);
    k.extend_from_slice(&(index as u32).to_be_bytes());
    k
}

/// The key of an effect entry: `cp_key(run, step) ‖ path ‖ u32_be(call index)`, so a run's journal
/// reads in (step, path, call) order.
fn effect_tree_key(r: &EffectRecord) -> Vec<u8> {
    let mut k = cp_key(&r.run_id, r.step);
    k.extend_from_slice(r.path.as_bytes());
    k.extend_from_slice(&r.call_index.to_be_bytes());
    k
}

fn step_of(key: &[u8]) -> u64 {
    u64::from_be_bytes(key[key.len() - 8..].try_into().expect("checkpoint keys end with the step"))
}

#[async_trait]
impl Store for SledStore {
    /// A local store: its errors are I/O failures (fail-stop), damage and refusals, never `Unavailable`.
    fn can_be_unavailable(&self) -> bool {
        false
    }

    async fn save_checkpoint(
        &self,
        cp: &Checkpoint,
        events: &[Event],
        status: &RunStatus,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        let request = Request::save(cp, events, status, expected_version);
        match self.request(request).await? {
            Reply::Outcome(o) => Ok(o),
            other => unreachable!("a commit replies an outcome, not {other:?}"),
        }
    }

    async fn set_status(
        &self,
        run_id: &str,
        status: &RunStatus,
        events: &[Event],
        pending: Option<&[u8]>,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        let request = Request::Status {
            run_id: run_id.to_owned(),
            status: status.clone(),
            events: graph_store::events::Encoded::all(events),
            pending: pending.map(<[u8]>::to_vec),
            expected_version,
        };
        match self.request(request).await? {
            Reply::Outcome(o) => Ok(o),
            other => unreachable!("a status update replies an outcome, not {other:?}"),
        }
    }

    async fn events(&self, run_id: &str, from: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let range = cp_key(run_id, from)..=cp_key(run_id, u64::MAX);
        let rows = self
            .inner
            .read(|| self.inner.events.range(range).take(limit).collect::<sled::Result<Vec<_>>>())?;
        rows.iter().map(|(k, v)| graph_store::events::decode(run_id, step_of(k), v)).collect()
    }

    async fn pending(&self, run_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.inner.read(|| self.inner.pending.get(run_id.as_bytes()))?.map(|v| v.to_vec()))
    }

    async fn run_info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        match self.inner.read(|| self.inner.runs.get(run_id.as_bytes()))? {
            Some(b) => Ok(Some(self.inner.decode_run(run_id, &b)?)),
            None => Ok(None),
        }
    }

    async fn load_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Checkpoint>, StoreError> {
        match self.inner.read(|| self.inner.checkpoints.get(cp_key(run_id, step)))? {
            Some(b) => Ok(Some(decode(run_id, step, &b)?)),
            None => Ok(None),
        }
    }

    async fn latest(&self, run_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        let latest = self.inner.latest_step(run_id)?;
        let last = self
            .inner
            .read(|| self.inner.checkpoints.scan_prefix(run_key(run_id)).next_back().transpose())?;
        self.inner.check_index(run_id, latest, last.as_ref().map(|(k, _)| step_of(k)))?;
        match last {
            Some((k, v)) => Ok(Some(decode(run_id, step_of(&k), &v)?)),
            None => Ok(None),
        }
    }

    async fn checkpoints(&self, run_id: &str, from: u64, to: u64) -> Result<Vec<Checkpoint>, StoreError> {
        if from > to {
            return Ok(Vec::new());
        }
        let range = cp_key(run_id, from)..=cp_key(run_id, to);
        let rows =
            self.inner.read(|| self.inner.checkpoints.range(range).collect::<sled::Result<Vec<_>>>())?;
        rows.iter().map(|(k, v)| decode(run_id, step_of(k), v)).collect()
    }

    async fn history(&self, run_id: &str) -> Result<Vec<CheckpointMeta>, StoreError> {
        let latest = self.inner.latest_step(run_id)?;
        let rows = self
            .inner
            .read(|| self.inner.checkpoints.scan_prefix(run_key(run_id)).collect::<sled::Result<Vec<_>>>())?;
        self.inner.check_index(run_id, latest, rows.last().map(|(k, _)| step_of(k)))?;
        rows.iter().map(|(k, v)| Ok(decode(run_id, step_of(k), v)?.meta())).collect()
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        use std::ops::Bound;
        let want = filter.limit.unwrap_or(usize::MAX);
        let mut out = Vec::new();
        if want == 0 {
            return Ok(out);
        }
        // Read in chunks from the filter's start (a page reads about its own rows, a status filter
        // reads on until it has them), each chunk from the last key of the one before.
        let chunk = filter.rows_to_read().unwrap_or(usize::MAX).clamp(16, 1024);
        let mut from = Bound::Included(sled::IVec::from(filter.start().as_bytes()));
        loop {
            let rows = self.inner.read(|| {
                self.inner
                    .runs
                    .range((from.clone(), Bound::Unbounded))
                    .take(chunk)
                    .collect::<sled::Result<Vec<_>>>()
            })?;
            let full = rows.len() == chunk;
            for (k, v) in rows {
                let run_id = String::from_utf8_lossy(&k);
                if filter.past(&run_id) {
                    return Ok(out);
                }
                let info = self.inner.decode_run(&run_id, &v)?;
                if filter.matches(&info) {
                    out.push(info);
                    if out.len() >= want {
                        return Ok(out);
                    }
                }
                from = Bound::Excluded(k);
            }
            if !full {
                return Ok(out);
            }
        }
    }

    async fn prune(&self, run_id: &str, keep: usize) -> Result<usize, StoreError> {
        let prefix = run_key(run_id);
        let keys: Vec<sled::IVec> =
            self.inner.read(|| self.inner.checkpoints.scan_prefix(&prefix).keys().collect())?;
        let Some(oldest_kept) = keys.iter().rev().nth(keep.max(1) - 1).or(keys.first()) else {
            return Ok(0);
        };
        let oldest_step = step_of(oldest_kept);
        let floor = match self.load_checkpoint(run_id, oldest_step).await? {
            Some(cp) => cp.state.base(oldest_step),
            None => oldest_step,
        };
        let doomed: Vec<Vec<u8>> = keys.iter().filter(|k| step_of(k) < floor).map(|k| k.to_vec()).collect();
        if doomed.is_empty() {
            return Ok(0);
        }
        match self.request(Request::Remove { tree: TreeId::Checkpoints, keys: doomed }).await? {
            Reply::Removed(n) => Ok(n),
            other => unreachable!("a removal replies a count, not {other:?}"),
        }
    }
    async fn load_effect(&self, key: &str) -> Result<Option<EffectRecord>, StoreError> {
        let Some(at) = self.inner.read(|| self.inner.effect_keys.get(key.as_bytes()))? else {
            return Ok(None);
        };
        match self.inner.read(|| self.inner.effects.get(&at))? {
            Some(b) => Ok(Some(decode_effect(&b)?)),
            None => Err(StoreError::corrupted_file(
                sled_folder(&self.inner.path),
                format!("effect `{key}` is indexed but its entry is missing"),
                REMEDY_FILE,
            )),
        }
    }

    async fn put_effect(
        &self,
        record: &EffectRecord,
        expected: Option<&EffectState>,
    ) -> Result<EffectOutcome, StoreError> {
        let request = Request::Effect { record: Box::new(record.clone()), expected: expected.cloned() };
        match self.request(request).await? {
            Reply::Effect(o) => Ok(o),
            other => unreachable!("a journal write replies an effect outcome, not {other:?}"),
        }
    }

    async fn effects(&self, run_id: &str) -> Result<Vec<EffectRecord>, StoreError> {
        let prefix = run_key(run_id);
        let rows = self
            .inner
            .read(|| self.inner.effects.scan_prefix(&prefix).values().collect::<sled::Result<Vec<_>>>())?;
        rows.iter().map(|v| decode_effect(v)).collect()
    }

    async fn mailbox_op(&self, run_id: &str, op: MailboxOp) -> Result<MailboxReply, StoreError> {
        match self.request(Request::Mailbox { run_id: run_id.to_owned(), op }).await? {
            Reply::Mailbox(r) => Ok(r),
            other => unreachable!("a mailbox change replies a mailbox reply, not {other:?}"),
        }
    }

    /// What the open found (damage in bytes it did not need, an index rebuilt or repaired from the
    /// log), and the commit log's closed segments read again: the history a rebuild of the index needs.
    async fn check_integrity(&self) -> Result<Integrity, StoreError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.integrity())
            .await
            .map_err(|e| StoreError::backend("the integrity check did not finish", e))?
    }

    async fn backup_to(&self, dest: &Path) -> Result<(), StoreError> {
        let (inner, dest) = (self.inner.clone(), dest.to_path_buf());
        tokio::task::spawn_blocking(move || inner.copy_to(&dest, None))
            .await
            .map_err(|e| StoreError::backend("the backup did not finish", e))?
    }

    async fn salvage_to(&self, dest: &Path, runs: &[String]) -> Result<(), StoreError> {
        let (inner, dest, runs) = (self.inner.clone(), dest.to_path_buf(), runs.to_vec());
        tokio::task::spawn_blocking(move || {
            let keep = runs.iter().map(|r| r.as_bytes()).collect();
            inner.copy_to(&dest, Some(&keep))
        })
        .await
        .map_err(|e| StoreError::backend("the salvage did not finish", e))?
    }

    async fn schedule_op(&self, name: &str, op: ScheduleOp) -> Result<ScheduleReply, StoreError> {
        match self.request(Request::Schedule { name: name.to_owned(), op }).await? {
            Reply::Schedule(r) => Ok(r),
            other => unreachable!("a schedule change replies a schedule reply, not {other:?}"),
        }
    }

    async fn schedules(&self) -> Result<Vec<Schedule>, StoreError> {
        let rows =
            self.inner.read(|| self.inner.schedules.iter().values().collect::<sled::Result<Vec<_>>>())?;
        rows.iter().map(|b| graph_store::schedule::decode(b)).collect()
    }

    async fn mailbox(&self, run_id: &str) -> Result<Mailbox, StoreError> {
        let bytes = self.inner.read(|| self.inner.mailboxes.get(run_id.as_bytes()))?;
        Ok(bytes.map(|b| graph_store::mailbox::decode(&b)).transpose()?.unwrap_or_default())
    }

    async fn outbox(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        let rows = self
            .inner
            .read(|| self.inner.outbox.iter().values().take(limit).collect::<sled::Result<Vec<_>>>())?;
        rows.iter().map(|v| decode_outbox(v)).collect()
    }

    async fn ack_outbox(&self, keys: &[String]) -> Result<usize, StoreError> {
        let rows = self.inner.read(|| self.inner.outbox.iter().collect::<sled::Result<Vec<_>>>())?;
        let mut doomed = Vec::new();
        for (k, v) in rows {
            if keys.contains(&decode_outbox(&v)?.key) {
                doomed.push(k.to_vec());
            }
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        match self.request(Request::Remove { tree: TreeId::Outbox, keys: doomed }).await? {
            Reply::Removed(n) => Ok(n),
            other => unreachable!("a removal replies a count, not {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sled's log `fsync`s and unwraps in its `Drop`; on a failed file system that panicked out of
    /// dropping the store (seen with ext4 turned read-only by a write error: `faults_device.rs`).
    #[test]
    fn a_handle_whose_drop_panics_is_dropped_without_unwinding() {
        struct PanicsOnDrop;
        impl Drop for PanicsOnDrop {
            fn drop(&mut self) {
                panic!("Read-only file system (os error 30)");
            }
        }
        let dropped = catch_unwind(|| drop(Quiet::new(PanicsOnDrop)));
        assert!(dropped.is_ok(), "the panic escaped the handle's drop");
    }

    #[test]
    fn crc32_is_the_ieee_one_sled_uses() {
        assert_eq!(crc32_ieee(b"123456789"), 0xCBF4_3926);
    }

    /// Found by `faults_damage.rs`: sled only warns about a bad checksum of its `conf`, then failed with
    /// "unsupported: created using a sled version earlier than 0.29" (flipped bytes that are not UTF-8),
    /// a `Backend` error instead of `Corrupted`.
    #[test]
    fn a_damaged_sled_conf_is_corrupted() {
        let dir = tempfile::tempdir().unwrap();
        drop(SledStore::open(dir.path()).unwrap());
        let conf = dir.path().join("db").join("conf");
        let good = std::fs::read(&conf).unwrap();
        for at in [0, 5, good.len() / 2, good.len() - 5, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x80;
            std::fs::write(&conf, &bad).unwrap();
            match SledStore::open(dir.path()) {
                Err(StoreError::Corrupted { file: Some(f), .. }) => assert_eq!(f, conf),
                other => panic!("flip at {at}: {other:?}"),
            }
        }
        std::fs::write(&conf, &good).unwrap();
        drop(SledStore::open(dir.path()).unwrap());
    }

    /// Found by `effects_crash.rs` under load: a SIGKILL while sled created its database, between its
    /// two writes of `conf` (the lines, then their checksum), left the lines alone, and every later open
    /// failed with `Corrupted`. The interrupted write is finished instead, for a new store and for one
    /// that holds data; anything else that fails the checksum is still `Corrupted`.
    #[test]
    fn a_sled_conf_whose_checksum_was_never_written_is_finished() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path()).unwrap();
        let conf = dir.path().join("db").join("conf");
        let good = std::fs::read(&conf).unwrap();
        let lines = &good[..good.len() - 4];
        assert!(is_unsummed_sled_conf(lines), "{:?}", String::from_utf8_lossy(lines));
        drop(store);
        // A store killed during its first open: sled's folder holds the lines of `conf` and nothing else.
        let fresh = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(fresh.path().join("db")).unwrap();
        std::fs::write(fresh.path().join("db").join("conf"), lines).unwrap();
        drop(SledStore::open(fresh.path()).unwrap());
        assert_eq!(std::fs::read(fresh.path().join("db").join("conf")).unwrap(), good);
        assert!(!fresh.path().join("db").join("conf.graph-runtime.tmp").exists());
        // A store with data whose `conf` sled rewrote and was killed in (it had found none).
        let store = SledStore::open(dir.path()).unwrap();
        store.inner.keys.insert(b"survives", b"yes").unwrap();
        store.inner.db.flush().unwrap();
        drop(store);
        std::fs::write(&conf, lines).unwrap();
        let store = SledStore::open(dir.path()).unwrap();
        assert_eq!(store.inner.keys.get(b"survives").unwrap().as_deref(), Some(&b"yes"[..]));
        drop(store);
        assert_eq!(std::fs::read(&conf).unwrap(), good);
        // Lines that are not sled's three, or cut short, with no checksum: damage.
        for bad in [&lines[..lines.len() - 1], &lines[..lines.len() - 3], b"segment_size: 1\nversion: 0.34\n"]
        {
            std::fs::write(&conf, bad).unwrap();
            match SledStore::open(dir.path()) {
                Err(StoreError::Corrupted { file: Some(f), .. }) => assert_eq!(f, conf),
                other => panic!("{:?}: {other:?}", String::from_utf8_lossy(bad)),
            }
        }
    }

    /// Found by `faults_damage.rs`: when `open` failed after the store was assembled (here a log record
    /// that does not parse), dropping it checkpointed with an unpositioned writer: `next_seq - 1`
    /// overflowed (a panic in a debug build; `checkpoint_seq = u64::MAX` written to the manifest in a
    /// release build).
    #[test]
    fn a_store_that_fails_to_open_changes_nothing_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let options = SledOptions::default().log_segment_size(64 << 10);
        drop(SledStore::open_with(dir.path(), options.clone()).unwrap());
        let manifest = std::fs::read(dir.path().join("wal").join("manifest")).unwrap();
        {
            let log_options = LogOptions { segment_size: 64 << 10, ..LogOptions::default() };
            let (mut log, records) = CommitLog::open(dir.path().join("wal"), log_options).unwrap();
            assert!(records.is_empty());
            // A valid record (its checksums hold) whose operations name a tree that does not exist.
            log.append(1, &[0x7f, 0, 0, 0, 0]).unwrap();
            log.commit().unwrap();
        }
        for _ in 0..2 {
            match SledStore::open_with(dir.path(), options.clone()) {
                Err(StoreError::Corrupted { detail, .. }) => {
                    assert!(detail.contains("does not parse"), "{detail}")
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(std::fs::read(dir.path().join("wal").join("manifest")).unwrap(), manifest);
        }
    }

    /// The apply runs behind the commit point: with the applier held, commits are still acknowledged,
    /// each one's checks (its run's version) see the groups not yet in sled, sled itself holds none of
    /// them, and a read waits for them. The log holds them, so a reopen finds them too.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[allow(clippy::await_holding_lock, reason = "the test holds the applier off while it commits")]
    async fn commits_are_acknowledged_before_sled_applies_them_and_every_read_sees_them() {
        use graph_store::conformance::{checkpoint, commit_steps};
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path()).unwrap();
        let held = store.inner.applier.applying.lock().unwrap();
        commit_steps(&store, "r", 0..5).await;
        // A stale version is refused by the groups behind, before sled has any of them.
        let stale = store.save_checkpoint(&checkpoint("r", 5, 5), &[], &RunStatus::Running, 3).await.unwrap();
        assert_eq!(stale, CommitOutcome::VersionConflict { current: 5 });
        assert!(store.inner.runs.get("r").unwrap().is_none(), "sled holds none of the groups yet");
        assert!(!store.inner.applier.caught_up());
        let reader = {
            let store = store.clone();
            tokio::spawn(async move { store.latest("r").await.unwrap().map(|cp| cp.step) })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!reader.is_finished(), "a read waits for the groups behind");
        drop(held);
        assert_eq!(reader.await.unwrap(), Some(4));
        assert!(store.inner.applier.caught_up());
        assert_eq!(store.run_info("r").await.unwrap().unwrap().version, 5);
        drop(store);
        let store = SledStore::open(dir.path()).unwrap();
        assert_eq!(store.latest("r").await.unwrap().map(|cp| cp.step), Some(4));
    }

    /// Read-your-writes with the apply behind, under load: runs committing at once, each reading its
    /// own checkpoint and row back right after every acknowledged commit, while other tasks read every
    /// run; the store closes and reopens with all of it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_acknowledged_commit_reads_back_at_once_while_many_runs_commit() {
        use graph_store::conformance::checkpoint;
        const RUNS: u64 = 12;
        const STEPS: u64 = 40;
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path()).unwrap();
        let mut tasks = Vec::new();
        for r in 0..RUNS {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let run = format!("run-{r}");
                for step in 0..STEPS {
                    let cp = checkpoint(&run, step, step);
                    let o = store.save_checkpoint(&cp, &[], &RunStatus::Running, step).await.unwrap();
                    assert_eq!(o, CommitOutcome::Committed { version: step + 1 });
                    let latest = store.latest(&run).await.unwrap().expect("its checkpoint");
                    assert_eq!((latest.step, latest.idempotency_key), (step, cp.idempotency_key));
                    assert_eq!(store.run_info(&run).await.unwrap().unwrap().version, step + 1);
                }
            }));
        }
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    for _ in 0..200 {
                        for r in 0..RUNS {
                            let run = format!("run-{r}");
                            let row = store.run_info(&run).await.unwrap().map_or(0, |i| i.version);
                            let seen = store.history(&run).await.unwrap().len() as u64;
                            assert!(
                                seen >= row,
                                "{run}: the row says version {row}, {seen} checkpoints read"
                            );
                        }
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for t in tasks.into_iter().chain(readers) {
            t.await.unwrap();
        }
        drop(store);
        let store = SledStore::open(dir.path()).unwrap();
        for r in 0..RUNS {
            assert_eq!(store.history(&format!("run-{r}")).await.unwrap().len() as u64, STEPS);
        }
    }

    /// Found by `crash.rs` on a loaded machine: a SIGKILL while sled wrote a snapshot left an empty
    /// `snap.<lsn>.generating`, which sled then read as its latest snapshot: every open failed.
    #[test]
    fn an_unfinished_sled_snapshot_left_by_a_crash_does_not_stop_the_store() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = SledStore::open(dir.path()).unwrap();
            store.inner.keys.insert(b"survives", b"yes").unwrap();
            store.inner.db.flush().unwrap();
        }
        for content in [&b""[..], &[0xAB; 40][..]] {
            std::fs::write(dir.path().join("db").join("snap.FFFFFFFFFFFFFFF0.generating"), content).unwrap();
            let store = SledStore::open(dir.path()).unwrap();
            assert_eq!(store.inner.keys.get(b"survives").unwrap().as_deref(), Some(&b"yes"[..]));
        }
    }

    #[test]
    fn sled_io_errors_read_as_the_operating_system_says() {
        let e = sled::Error::Io(std::io::Error::from_raw_os_error(28));
        assert_eq!(sled_cause(&e), std::io::Error::from_raw_os_error(28).to_string());
        assert!(sled_cause(&e).contains("(os error 28)"), "{}", sled_cause(&e));
    }
}
