//! The embedded default store, on sled 0.34.7.
//!
//! Three trees: `runs` (run row), `checkpoints` (one record per step, keyed `run key || u64_be(step)` so
//! iteration is step order) and `keys` (idempotency keys). A commit is one sled transaction over the
//! three, which sled serializes: two writers of one key cannot both insert it.
//!
//! sled acknowledges a transaction before it is on disk. Under [`Durability::Sync`] (the default) a
//! commit is reported only after a flush covering it completed: sled's flush, then an `fdatasync` of its
//! log file, which sled's own flush leaves out on Linux (see `flush_durably`). Commits are grouped (see
//! `commit_loop`): the commits that arrive while one batch is being written form the next batch, which
//! is applied in one transaction and made durable by one flush, so many concurrent runs commit faster
//! than the disk's flush rate with the same guarantee. [`Durability::Async`] skips the wait: commits are never partial, but the most recent ones
//! (sled flushes every 500 ms) may be lost on a crash.
//!
//! Checkpoints and run rows are stored in the envelope of [`super::record`]: damaged bytes are
//! `StoreError::Corrupted`, a newer format `UnsupportedSchemaVersion`.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError};
use tokio::sync::{oneshot, watch};

use super::record::{decode, decode_run, encode, encode_run};
use super::{Checkpoint, CheckpointMeta, CommitOutcome, FailPoint, RunFilter, RunInfo, RunStatus, Store};
use crate::error::StoreError;

/// When a commit is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// After a flush covering it (shared with concurrent commits). A reported commit survives a crash.
    #[default]
    Sync,
    /// As soon as the transaction applied. Never partial; the most recent commits may be lost on a
    /// crash (sled flushes in the background every 500 ms).
    Async,
}

/// Options of [`SledStore::open_with`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SledOptions {
    /// When commits are acknowledged.
    pub durability: Durability,
}

impl SledOptions {
    /// Sets the durability.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }
}

/// A checkpoint store in a local folder. Clones share the database.
///
/// # Examples
///
/// ```
/// # fn main() -> Result<(), graph_runtime::StoreError> {
/// let dir = tempfile::tempdir().unwrap();
/// let store = graph_runtime::store::SledStore::open(dir.path())?;
/// # drop(store);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SledStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    db: sled::Db,
    runs: sled::Tree,
    checkpoints: sled::Tree,
    keys: sled::Tree,
    durability: Durability,
    /// sled's log file, for the `fdatasync` its own flush leaves out (see [`flush_durably`]).
    log: Arc<File>,
    flusher: Flusher,
    queue: Mutex<CommitQueue>,
    /// Flushes made by the commit thread.
    commit_flushes: std::sync::atomic::AtomicU64,
    fail: FailPoint,
    _lock: File,
}

impl std::fmt::Debug for SledStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledStore")
            .field("path", &self.inner.path)
            .field("durability", &self.inner.durability)
            .finish()
    }
}

impl SledStore {
    /// Opens (or creates) a store in `path` with [`Durability::Sync`].
    ///
    /// # Errors
    ///
    /// [`StoreError::Locked`] when another process holds the store; backend errors otherwise.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, SledOptions::default())
    }

    /// Opens (or creates) a store in `path`.
    ///
    /// # Errors
    ///
    /// As [`SledStore::open`].
    pub fn open_with(path: impl AsRef<Path>, options: SledOptions) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        std::fs::create_dir_all(&path)
            .map_err(|e| StoreError::backend(format!("cannot create {}", path.display()), e))?;
        // sled locks its own file but reports a held lock only as an I/O error with a message; this lock,
        // taken first, makes the case a typed error.
        let lock_path = path.join("graph-runtime.lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| StoreError::backend(format!("cannot open {}", lock_path.display()), e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(StoreError::Locked { path }),
            Err(TryLockError::Error(e)) => {
                return Err(StoreError::backend(format!("cannot lock {}", lock_path.display()), e));
            }
        }
        let db = open_sled(&path.join("db")).map_err(|e| {
            StoreError::backend(format!("cannot open the sled database in {}", path.display()), e)
        })?;
        let tree =
            |name: &str| db.open_tree(name).map_err(|e| StoreError::backend("cannot open a sled tree", e));
        let (runs, checkpoints, keys) = (tree("runs")?, tree("checkpoints")?, tree("keys")?);
        let log = open_log(&path)?;
        // sled's recovery rewrites the log's tail in the background while `open` returns. Wait for it to be
        // on disk here, where the cost belongs (it grows with the database; docs/BENCHMARKS.md §6), rather
        // than in the first commit's flush.
        flush_durably(&db, &log)?;
        Ok(SledStore {
            inner: Arc::new(Inner {
                flusher: Flusher::new(db.clone(), log.clone()),
                log,
                path,
                db,
                runs,
                checkpoints,
                keys,
                durability: options.durability,
                queue: Mutex::default(),
                commit_flushes: Default::default(),
                fail: FailPoint::default(),
                _lock: lock,
            }),
        })
    }

    /// The store's folder.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Waits until everything committed so far is on disk.
    ///
    /// # Errors
    ///
    /// The flush failed.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.inner.flusher.flush().await
    }

    /// Test hook (feature `test-hooks`): the next commit fails after its `n`-th write (1 = the
    /// idempotency key, 2 = the checkpoint, 3 = the run row) and rolls back.
    #[cfg(feature = "test-hooks")]
    pub fn fail_point(&self) -> &FailPoint {
        &self.inner.fail
    }

    /// Test hook (feature `test-hooks`): overwrites the raw record of a checkpoint (to simulate damage or
    /// a newer format).
    #[cfg(feature = "test-hooks")]
    pub fn put_raw_checkpoint(&self, run_id: &str, step: u64, bytes: &[u8]) -> Result<(), StoreError> {
        self.inner.checkpoints.insert(cp_key(run_id, step), bytes).map_err(backend)?;
        Ok(())
    }

    /// Test hook (feature `test-hooks`): the raw record of a checkpoint.
    #[cfg(feature = "test-hooks")]
    pub fn raw_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.inner.checkpoints.get(cp_key(run_id, step)).map_err(backend)?.map(|v| v.to_vec()))
    }

    /// Flushes this store performed so far (each makes every earlier commit durable).
    pub fn flushes(&self) -> u64 {
        self.inner.flusher.done.borrow().finished
            + self.inner.commit_flushes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes the database occupies on disk.
    ///
    /// # Errors
    ///
    /// Backend failures.
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.inner.db.size_on_disk().map_err(backend)
    }

    async fn durable(&self) -> Result<(), StoreError> {
        match self.inner.durability {
            Durability::Sync => self.inner.flusher.flush().await,
            Durability::Async => Ok(()),
        }
    }
}

/// A commit waiting for the commit thread.
struct Pending {
    run_id: Arc<str>,
    step: u64,
    key: String,
    record: Vec<u8>,
    fingerprint: Arc<str>,
    status: RunStatus,
    expected_version: u64,
    reply: oneshot::Sender<Result<CommitOutcome, StoreError>>,
}

#[derive(Default)]
struct CommitQueue {
    pending: Vec<Pending>,
    /// A commit thread is draining the queue.
    leader: bool,
}

/// Group commit. The first commit to find no commit thread starts one (a blocking task, so dropping a
/// caller cannot stall it); the thread takes every commit queued so far, applies them in ONE sled
/// transaction (each checked on its own: key, step, version — a later commit of the batch sees the
/// earlier ones), flushes once under `Durability::Sync`, answers them all, and repeats until the queue
/// is empty. Commits arriving during a flush form the next batch. One sequential run pays one
/// transaction and one flush per step; N concurrent runs share them.
fn commit_loop(inner: Arc<Inner>) {
    let mut inner = Some(inner);
    loop {
        let i = inner.as_ref().expect("held until the last batch");
        let batch = std::mem::take(&mut i.queue.lock().unwrap_or_else(|e| e.into_inner()).pending);
        let results = commit_batch(i, &batch);
        let done = {
            let mut q = i.queue.lock().unwrap_or_else(|e| e.into_inner());
            let done = q.pending.is_empty();
            if done {
                q.leader = false;
            }
            done
        };
        if done {
            // Release the store before answering: a caller that drops its handle and reopens the folder
            // right after its commit must find it closed.
            inner = None;
        }
        match results {
            Ok(outcomes) => {
                for (p, o) in batch.into_iter().zip(outcomes) {
                    let _ = p.reply.send(Ok(o));
                }
            }
            Err(e) => {
                let message = e.to_string();
                for p in batch {
                    let _ = p.reply.send(Err(StoreError::backend("the commit failed", message.clone())));
                }
            }
        }
        if done {
            return;
        }
    }
}

fn commit_batch(inner: &Inner, batch: &[Pending]) -> Result<Vec<CommitOutcome>, StoreError> {
    let outcomes =
        tx_result((&inner.runs, &inner.checkpoints, &inner.keys).transaction(|(runs, cps, keys)| {
            let mut outcomes = Vec::with_capacity(batch.len());
            for p in batch {
                let rk = p.run_id.as_bytes();
                let ck = cp_key(&p.run_id, p.step);
                let row: Option<RunInfo> = match runs.get(rk)? {
                    Some(b) => Some(decode_run(&b).map_err(abort)?),
                    None => None,
                };
                let version = row.as_ref().map_or(0, |r| r.version);
                if keys.get(p.key.as_bytes())?.is_some() {
                    outcomes.push(CommitOutcome::AlreadyCommitted { version });
                    continue;
                }
                if let Some(existing) = cps.get(&ck)? {
                    let existing = decode(&p.run_id, p.step, &existing).map_err(abort)?;
                    outcomes
                        .push(CommitOutcome::StepTaken { existing_key: existing.idempotency_key, version });
                    continue;
                }
                if version != p.expected_version {
                    outcomes.push(CommitOutcome::VersionConflict { current: version });
                    continue;
                }
                let mut writes = 0;
                let mut wrote = || -> Result<(), ConflictableTransactionError<StoreError>> {
                    writes += 1;
                    if inner.fail.hit(writes) {
                        return Err(abort(StoreError::backend("injected failure", "fail point")));
                    }
                    Ok(())
                };
                keys.insert(p.key.as_bytes(), ck.as_slice())?;
                wrote()?;
                cps.insert(ck.as_slice(), p.record.as_slice())?;
                wrote()?;
                let info = RunInfo {
                    run_id: p.run_id.to_string(),
                    status: p.status.clone(),
                    latest_step: row.as_ref().map_or(p.step, |r| r.latest_step.max(p.step)),
                    version: version + 1,
                    graph_fingerprint: row.map_or_else(|| p.fingerprint.to_string(), |r| r.graph_fingerprint),
                };
                runs.insert(rk, encode_run(&info))?;
                wrote()?;
                outcomes.push(CommitOutcome::Committed { version: version + 1 });
            }
            Ok(outcomes)
        }))?;
    // Every outcome but a version conflict reports a commit (ours or another writer's) that must be on
    // disk before it is acknowledged.
    let needs_flush = outcomes.iter().any(|o| !matches!(o, CommitOutcome::VersionConflict { .. }));
    if inner.durability == Durability::Sync && needs_flush {
        flush_durably(&inner.db, &inner.log)?;
        inner.commit_flushes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(outcomes)
}

/// Opens the sled database. Our lock file is already held, so no other process has it; if sled's own
/// lock is still taken, it is by this process's previous instance, whose background writes sled
/// finishes on its thread pool after the `Db` is dropped. Wait for them (bounded), rather than fail a
/// reopen. (sled reports its lock only as an `Io` error of kind `Other`.)
fn open_sled(path: &Path) -> sled::Result<sled::Db> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match sled::Config::new().path(path).mode(sled::Mode::HighThroughput).open() {
            Err(sled::Error::Io(e))
                if e.kind() == std::io::ErrorKind::Other && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// Opens sled's log file (`<store>/db/db`) for [`flush_durably`], and makes the store's folders durable
/// (a file just created is only on disk once its directory entry is).
fn open_log(path: &Path) -> Result<Arc<File>, StoreError> {
    let log_path = path.join("db").join("db");
    let log = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&log_path)
        .map_err(|e| StoreError::backend(format!("cannot open {}", log_path.display()), e))?;
    #[cfg(unix)]
    for dir in [path.to_path_buf(), path.join("db")] {
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| StoreError::backend(format!("cannot sync the folder {}", dir.display()), e))?;
    }
    Ok(Arc::new(log))
}

/// Makes every commit sled acknowledged so far durable.
///
/// On Linux `sled::Db::flush` writes the log with `sync_file_range`, which waits for the data pages but
/// neither writes the file's metadata (its length grows as the log does) nor flushes the device's write
/// cache; sled calls `fsync` only from its periodic background flush. That survives a killed process,
/// not a power loss. The `fdatasync` (`File::sync_data`) after it, on the same file, does both.
fn flush_durably(db: &sled::Db, log: &File) -> Result<(), StoreError> {
    db.flush().map_err(backend)?;
    log.sync_data().map_err(|e| StoreError::backend("fdatasync of the sled log failed", e))
}

fn backend(e: sled::Error) -> StoreError {
    StoreError::backend("sled", e)
}

fn run_key(run_id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + run_id.len() + 8);
    k.extend_from_slice(&(run_id.len() as u32).to_be_bytes());
    k.extend_from_slice(run_id.as_bytes());
    k
}

fn cp_key(run_id: &str, step: u64) -> Vec<u8> {
    let mut k = run_key(run_id);
    k.extend_from_slice(&step.to_be_bytes());
    k
}

/// A commit transaction stopped on purpose, with the error to report.
fn abort(e: StoreError) -> ConflictableTransactionError<StoreError> {
    ConflictableTransactionError::Abort(e)
}

fn tx_result<T>(r: Result<T, TransactionError<StoreError>>) -> Result<T, StoreError> {
    r.map_err(|e| match e {
        TransactionError::Abort(e) => e,
        TransactionError::Storage(e) => backend(e),
    })
}

#[async_trait]
impl Store for SledStore {
    async fn save_checkpoint(
        &self,
        cp: &Checkpoint,
        status: &RunStatus,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        let (reply, outcome) = oneshot::channel();
        let pending = Pending {
            run_id: cp.run_id.clone(),
            step: cp.step,
            key: cp.idempotency_key.clone(),
            record: encode(cp),
            fingerprint: cp.graph_fingerprint.clone(),
            status: status.clone(),
            expected_version,
            reply,
        };
        if self.inner.durability == Durability::Async {
            // Nothing to wait for: commit on the caller's thread, a transaction of its own.
            return commit_batch(&self.inner, std::slice::from_ref(&pending)).map(|mut o| o.remove(0));
        }
        let lead = {
            let mut q = self.inner.queue.lock().unwrap_or_else(|e| e.into_inner());
            q.pending.push(pending);
            !std::mem::replace(&mut q.leader, true)
        };
        if lead {
            let inner = self.inner.clone();
            tokio::task::spawn_blocking(move || commit_loop(inner));
        }
        outcome.await.map_err(|_| StoreError::backend("the commit thread stopped", "reply dropped"))?
    }

    async fn set_status(
        &self,
        run_id: &str,
        status: &RunStatus,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        let outcome = tx_result(self.inner.runs.transaction(|runs| {
            let Some(bytes) = runs.get(run_id.as_bytes())? else {
                return Ok(CommitOutcome::VersionConflict { current: 0 });
            };
            let mut info = decode_run(&bytes).map_err(abort)?;
            if info.version != expected_version {
                return Ok(CommitOutcome::VersionConflict { current: info.version });
            }
            info.version += 1;
            info.status = status.clone();
            runs.insert(run_id.as_bytes(), encode_run(&info))?;
            Ok(CommitOutcome::Committed { version: info.version })
        }))?;
        if matches!(outcome, CommitOutcome::Committed { .. }) {
            self.durable().await?;
        }
        Ok(outcome)
    }

    async fn run_info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        match self.inner.runs.get(run_id.as_bytes()).map_err(backend)? {
            Some(b) => Ok(Some(decode_run(&b)?)),
            None => Ok(None),
        }
    }

    async fn load_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Checkpoint>, StoreError> {
        match self.inner.checkpoints.get(cp_key(run_id, step)).map_err(backend)? {
            Some(b) => Ok(Some(decode(run_id, step, &b)?)),
            None => Ok(None),
        }
    }

    async fn latest(&self, run_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        match self.inner.checkpoints.scan_prefix(run_key(run_id)).next_back() {
            Some(Ok((k, v))) => Ok(Some(decode(run_id, step_of(&k), &v)?)),
            Some(Err(e)) => Err(backend(e)),
            None => Ok(None),
        }
    }

    async fn checkpoints(&self, run_id: &str, from: u64, to: u64) -> Result<Vec<Checkpoint>, StoreError> {
        if from > to {
            return Ok(Vec::new());
        }
        self.inner
            .checkpoints
            .range(cp_key(run_id, from)..=cp_key(run_id, to))
            .map(|r| {
                let (k, v) = r.map_err(backend)?;
                decode(run_id, step_of(&k), &v)
            })
            .collect()
    }

    async fn history(&self, run_id: &str) -> Result<Vec<CheckpointMeta>, StoreError> {
        self.inner
            .checkpoints
            .scan_prefix(run_key(run_id))
            .map(|r| {
                let (k, v) = r.map_err(backend)?;
                Ok(decode(run_id, step_of(&k), &v)?.meta())
            })
            .collect()
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        let mut out = Vec::new();
        for r in self.inner.runs.iter() {
            let (_, v) = r.map_err(backend)?;
            let info = decode_run(&v)?;
            if filter.matches(&info) {
                out.push(info);
                if filter.limit.is_some_and(|n| out.len() >= n) {
                    break;
                }
            }
        }
        Ok(out)
    }

    async fn prune(&self, run_id: &str, keep: usize) -> Result<usize, StoreError> {
        let prefix = run_key(run_id);
        let keys: Vec<sled::IVec> =
            self.inner.checkpoints.scan_prefix(&prefix).keys().collect::<Result<_, _>>().map_err(backend)?;
        let Some(oldest_kept) = keys.iter().rev().nth(keep.max(1) - 1).or(keys.first()) else {
            return Ok(0);
        };
        let oldest_step = step_of(oldest_kept);
        let floor = match self.load_checkpoint(run_id, oldest_step).await? {
            Some(cp) => cp.state.base(oldest_step),
            None => oldest_step,
        };
        let mut batch = sled::Batch::default();
        let mut n = 0;
        for k in keys.iter().filter(|k| step_of(k) < floor) {
            batch.remove(k.clone());
            n += 1;
        }
        self.inner.checkpoints.apply_batch(batch).map_err(backend)?;
        self.durable().await?;
        Ok(n)
    }
}

fn step_of(key: &[u8]) -> u64 {
    u64::from_be_bytes(key[key.len() - 8..].try_into().expect("checkpoint keys end with the step"))
}

/// Group commit: one flush in flight at a time; every caller waits for a flush that started after it
/// asked. The flush loop runs in its own task, so a caller that is cancelled mid-wait cannot stall it.
struct Flusher {
    // The flush task holds only a weak handle between flushes, so dropping the store closes the database
    // (and releases its file lock) as soon as the last commit was acknowledged.
    db: Arc<sled::Db>,
    log: Arc<File>,
    state: Arc<Mutex<FlushState>>,
    done: watch::Sender<FlushDone>,
}

#[derive(Default)]
struct FlushState {
    /// Flushes started so far.
    started: u64,
    /// The highest flush number a caller waits for.
    wanted: u64,
    running: bool,
}

#[derive(Clone, Copy, Default)]
struct FlushDone {
    /// Flushes finished so far (each covers every commit made before it started).
    finished: u64,
    /// The last flush that failed.
    failed: u64,
}

impl Flusher {
    fn new(db: sled::Db, log: Arc<File>) -> Self {
        Flusher {
            db: Arc::new(db),
            log,
            state: Arc::default(),
            done: watch::Sender::new(FlushDone::default()),
        }
    }

    async fn flush(&self) -> Result<(), StoreError> {
        let (target, lead) = {
            let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let target = g.started + 1;
            g.wanted = g.wanted.max(target);
            let lead = !g.running;
            g.running = true;
            (target, lead)
        };
        let mut rx = self.done.subscribe();
        if lead {
            let (db, state, done) = (Arc::downgrade(&self.db), self.state.clone(), self.done.clone());
            let log = Arc::downgrade(&self.log);
            tokio::spawn(async move {
                loop {
                    let n = {
                        let mut g = state.lock().unwrap_or_else(|e| e.into_inner());
                        if g.wanted <= g.started {
                            g.running = false;
                            return;
                        }
                        g.started += 1;
                        g.started
                    };
                    let ok = match (db.upgrade(), log.upgrade()) {
                        (Some(db), Some(log)) => matches!(
                            tokio::task::spawn_blocking(move || flush_durably(&db, &log)).await,
                            Ok(Ok(()))
                        ),
                        _ => false, // the store is gone: nobody waits any more
                    };
                    done.send_modify(|d| {
                        d.finished = n;
                        if !ok {
                            d.failed = n;
                        }
                    });
                }
            });
        }
        let d = *rx
            .wait_for(|d| d.finished >= target)
            .await
            .map_err(|_| StoreError::backend("the flusher stopped", "channel closed"))?;
        if d.failed >= target {
            return Err(StoreError::backend("flushing the sled database failed", "flush error"));
        }
        Ok(())
    }
}
