//! The SQLite store (feature `sqlite`): one database file, one writing connection, group commit.
//!
//! # Commits
//!
//! Every write (`save_checkpoint`, `set_status`, `prune`, `put_effect`, `ack_outbox`) is a request for
//! the only writing connection. A caller on a multi-thread runtime that finds the connection free
//! commits its request itself, as a group of one, inside `tokio::task::block_in_place`: a sequential
//! run's commits never leave its thread. Otherwise (the connection is busy, or a current-thread
//! runtime) the request goes to the store's writer thread, which takes every request queued so far — a
//! *group* — and runs it in one transaction (`BEGIN IMMEDIATE` … `COMMIT`): a request whose checks
//! refuse it (`AlreadyCommitted`, `StepTaken`, `VersionConflict`) leaves nothing written, and one that
//! fails part-way is answered with its error while the rest of the group runs again without it (see
//! `writer`). One `COMMIT`, so one WAL sync, makes the whole group durable; only then is any request of
//! it answered. Requests that arrive while a
//! group commits form the next group: one sequential run pays one sync per step, and concurrent runs
//! share them. An I/O error of the writing connection stops the store: every operation after it gets
//! [`StoreError::FailStopped`] until the store is opened again; a full disk does not (`Stopped`).
//!
//! The checks are the database's own: the idempotency key row is inserted first, and its primary key
//! refuses a second one (`AlreadyCommitted`); the checkpoint's primary key `(run_id, step)` refuses a
//! second result for a step (`StepTaken`). Unique violations are recognised by SQLite's extended error
//! codes (`SQLITE_CONSTRAINT_PRIMARYKEY`, `SQLITE_CONSTRAINT_UNIQUE`), never by message text.
//!
//! The writer keeps the run row it last wrote for each run, so a commit does not read it again, and
//! remembers the runs that have no pending step, so a commit does not delete one; it forgets both when
//! another connection has committed (`PRAGMA data_version`, read at the start of each write
//! transaction) and when a transaction rolls back.
//!
//! # Durability
//!
//! The database is in WAL mode. [`Durability::Sync`] sets `synchronous = FULL`: the WAL is synced at
//! every commit, so an acknowledged commit survives a power loss. [`Durability::Async`] syncs as
//! `synchronous = NORMAL` does (the WAL at checkpoints, not at commits): never partial and safe against
//! a process crash, but the last commits may be lost on a power loss (until the next WAL checkpoint).
//! Its writer runs `synchronous = FULL` through the `vfs` module's `Async` VFS, which writes a commit's
//! log frames at its sync and syncs nothing ([`SqliteOptions::coalesce_log_writes`]); without that VFS
//! it runs `synchronous = NORMAL`.
//!
//! # Reads
//!
//! Reads run on `tokio::task::spawn_blocking`, on a small pool of read-only connections; in WAL mode
//! they never wait for the writer.
//!
//! # Files and schema
//!
//! `<file>`, `<file>-wal`, `<file>-shm`. The schema is `migrations/sqlite/*.sql`, applied by
//! [`SqliteStore::open`] in one transaction and recorded in `graph_schema_version`; a database of a
//! newer schema is refused with [`StoreError::UnsupportedSchemaVersion`]. Every value is stored as the
//! bytes of [`graph_store::record`] (checkpoints, run rows), [`graph_store::journal`] or [`graph_store::events`]; the
//! other columns exist to be queried by.

mod errors;
mod log_check;
mod vfs;
mod writer;

/// The byte ranges of the commit groups SQLite reads from the write-ahead log `bytes` of a SQLite
/// store (`<file>-wal`), in order, each from the frame after the previous commit frame to the end of
/// its own commit frame: for damage tests, which compare a damaged log with its original group by
/// group.
pub use log_check::groups as log_groups;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::oneshot;

use errors::{
    REMEDY_FILE, Stopped, beside, bound, is_io_failure, sql_error, sql_error_on, uint, write_open_error,
};
use graph_store::events::Event;
use graph_store::journal::{decode_effect, decode_outbox};
use graph_store::record::{decode, decode_run_of};
use graph_store::{
    Checkpoint, CheckpointMeta, CommitOutcome, Durability, EffectOutcome, EffectRecord, EffectState,
    FailPoint, Integrity, OutboxRow, RunFilter, RunInfo, RunStatus, Store, StoreError,
};
use writer::{Job, Op, Reply};

/// The schema migrations, in order: (version, SQL). Applied by `open`, each at most once.
const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../migrations/sqlite/0001_init.sql")),
    (2, include_str!("../migrations/sqlite/0002_rowid_appends.sql")),
    (3, include_str!("../migrations/sqlite/0003_mailboxes.sql")),
];

/// The schema version this build creates and reads (a database of an older version is upgraded in place
/// by [`SqliteStore::open`]).
pub const SQLITE_SCHEMA_VERSION: u32 = 3;

/// The write-ahead log's size at which the writer checkpoints it (SQLite's default, 1,000 pages, is
/// about this with its default 4 KiB pages), and so the size the log is preallocated to by default.
const WAL_CHECKPOINT_BYTES: i64 = 4 << 20;

/// The writer connection's page cache: 16 MiB (SQLite's default is 2 MiB).
const WRITER_CACHE: &str = "PRAGMA cache_size = -16384";

/// Options of [`SqliteStore::open_with`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// When commits are acknowledged: for `Sync` after the write-ahead log is synced, for `Async` once
    /// the commit is in the log's file (synced at checkpoints, as SQLite's `synchronous = NORMAL`).
    pub durability: Durability,
    /// How long a statement waits for a lock another connection (another process) holds before the
    /// call fails with [`StoreError::Unavailable`] (default 5 s).
    pub busy_timeout: Duration,
    /// At most this many read-only connections (default 4); more reads at once wait for one.
    pub readers: usize,
    /// The write-ahead log is grown to about this many bytes of written blocks when the store opens
    /// with a smaller one (default 4 MiB, what SQLite's automatic checkpoint lets it reach; 0: never),
    /// so that a commit overwrites blocks the log already has instead of appending to the file: a sync
    /// of an append also has to write the file's new size and blocks (docs/stores.md, "A write-ahead
    /// log of written blocks").
    pub wal_preallocation: u64,
    /// Whether the store's writer writes each commit's write-ahead-log frames to the file in one call
    /// (default `true`), through a VFS that wraps SQLite's default one, instead of SQLite's two calls a
    /// frame (docs/stores.md, "The log's frames in one write"). An `Async` store's writer then runs
    /// `synchronous = FULL` with the commit's sync made a write of the frames, not a sync; without it,
    /// `synchronous = NORMAL` on SQLite's default VFS.
    pub coalesce_log_writes: bool,
    /// The page size of a database this store creates (bytes, a power of two from 512 to 65,536;
    /// default 4,096, SQLite's). Every page a commit changes is written to the write-ahead log whole, so
    /// smaller pages mean fewer bytes a commit; a database that exists keeps the page size it was
    /// created with.
    pub page_size: u32,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            durability: Durability::Sync,
            busy_timeout: Duration::from_secs(5),
            readers: 4,
            wal_preallocation: WAL_CHECKPOINT_BYTES.unsigned_abs(),
            coalesce_log_writes: true,
            page_size: 4096,
        }
    }
}

impl SqliteOptions {
    /// Sets the durability.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets the busy timeout.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Sets the most read-only connections.
    pub fn readers(mut self, n: usize) -> Self {
        self.readers = n;
        self
    }

    /// Sets how large a write-ahead log the store grows at open (bytes; 0: never).
    pub fn wal_preallocation(mut self, bytes: u64) -> Self {
        self.wal_preallocation = bytes;
        self
    }

    /// Sets whether the store writes a commit's log frames in one call.
    pub fn coalesce_log_writes(mut self, on: bool) -> Self {
        self.coalesce_log_writes = on;
        self
    }

    /// Sets the page size of a database the store creates.
    pub fn page_size(mut self, bytes: u32) -> Self {
        self.page_size = bytes;
        self
    }
}

/// A checkpoint store in one SQLite database file (feature `sqlite`). Clones share the writer thread
/// and the readers; several stores (in one process or several) may open the same file.
///
/// # Examples
///
/// ```
/// # fn main() -> Result<(), graph_store::StoreError> {
/// let dir = tempfile::tempdir().unwrap();
/// let store = graph_store_sqlite::SqliteStore::open(dir.path().join("runs.sqlite"))?;
/// # drop(store);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    options: SqliteOptions,
    /// Requests to the writer thread; `None` once the store is being dropped.
    sender: Option<mpsc::Sender<Job>>,
    /// The writer connection: the writer thread takes it for each group, and a caller on a multi-thread
    /// runtime that finds it free commits its own request inline (no thread hand-off). `None` for a
    /// store opened read-only ([`SqliteStore::open_read_only`]).
    writer: Option<Arc<Mutex<writer::Writer>>>,
    /// The readers open the file as immutable (SQLite's `immutable=1`): a read-only store on a file
    /// system SQLite cannot write, with no write-ahead log beside the file.
    immutable: bool,
    thread: Option<JoinHandle<()>>,
    /// Read-only connections: the idle ones, and how many exist (at most `options.readers`).
    readers: Mutex<Readers>,
    /// Signalled when a reader is returned.
    reader_returned: Condvar,
    stats: Arc<writer::Stats>,
    /// Shared with the writer: set by an I/O error of the writing connection.
    stopped: Arc<Stopped>,
    #[cfg_attr(not(any(test, feature = "test-hooks")), allow(dead_code))]
    fail: FailPoint,
    #[cfg_attr(not(any(test, feature = "test-hooks")), allow(dead_code))]
    io_fail: FailPoint,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Readers first, so the writer's connection is the last one to close: SQLite then checkpoints
        // the WAL into the database file and removes it. Closing the channel ends the writer thread
        // once the requests queued so far are answered; the writer connection closes after this body,
        // with the `writer` field (the thread's handle on it ended with the thread).
        self.readers.get_mut().unwrap_or_else(|e| e.into_inner()).idle.clear();
        self.sender = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .field("durability", &self.inner.options.durability)
            .field("read_only", &self.is_read_only())
            .finish()
    }
}

impl SqliteStore {
    /// Opens (or creates) the database file `path` with [`Durability::Sync`].
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupted`] naming the file when it is damaged or not a database, or naming its
    /// write-ahead log when a damaged frame inside it would make SQLite drop the commits after it (not
    /// checked for [`Durability::Async`], which may lose its unsynced commits);
    /// [`StoreError::UnsupportedSchemaVersion`] when a newer build created it; [`StoreError::Unavailable`]
    /// when another connection holds it locked past the busy timeout; backend errors, among them a path
    /// that cannot be opened, saying why (a folder, a missing folder, the OS's error), an I/O error or
    /// a full disk, with the operating system's error.
    ///
    /// Once open, an I/O error of the store's writing connection stops it: that operation and every
    /// one after it fail with [`StoreError::FailStopped`] until the store is dropped and opened again
    /// (a full disk does not stop it; docs/stores.md, "Fail-stop after an I/O error, not after a full
    /// disk").
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens (or creates) the database file `path`: sets WAL mode and the durability, applies the
    /// schema migrations this build knows in one transaction (safe when several open it at once), and
    /// starts the writer thread.
    ///
    /// # Errors
    ///
    /// As [`SqliteStore::open`].
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if !(options.page_size.is_power_of_two() && (512..=65_536).contains(&options.page_size)) {
            return Err(StoreError::backend(
                format!("cannot open {}", path.display()),
                format!("page size {} is not a power of two from 512 to 65536", options.page_size),
            ));
        }
        // SQLite reads these as a database that lives only as long as its connection.
        if path.as_os_str().is_empty() || path.as_os_str() == ":memory:" {
            return Err(StoreError::backend(
                format!("cannot open {:?} as a SQLite store", path.display().to_string()),
                "SQLite keeps such a database only while it is open: give a file's path (`MemoryStore` keeps \
                 runs in memory)",
            ));
        }
        // Before SQLite reads the log: it would drop, without an error, every commit after a damaged
        // frame (`log_check`). An `Async` store may lose its unsynced commits, gaps included, by its
        // contract: SQLite's reading stands.
        if options.durability == Durability::Sync {
            log_check::check(&path)?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        // The writer writes each commit's log frames in one call (`vfs`); the VFSs are correct under
        // `synchronous = FULL` only, and the `Async` one with `checkpoint_fullfsync` on (set below).
        let coalesced = options.coalesce_log_writes && vfs::register();
        let opened = if coalesced {
            // Anything but `Async` is synced (a mode added later is never weaker by surprise).
            let name = match options.durability {
                Durability::Async => vfs::NAME_ASYNC,
                _ => vfs::NAME,
            };
            Connection::open_with_flags_and_vfs(&path, flags, name)
        } else {
            Connection::open_with_flags(&path, flags)
        };
        let conn = opened.map_err(|e| cannot_open(&path, e))?;
        let err = |what: &'static str| {
            let (path, conn) = (path.clone(), &conn);
            move |e| sql_error_on(conn, &path, what, e)
        };
        conn.busy_timeout(options.busy_timeout).map_err(err("setting the busy timeout"))?;
        // Applies only while the file is empty (a database that exists keeps its page size).
        conn.execute_batch(&format!("PRAGMA page_size = {}", options.page_size))
            .map_err(err("setting the page size"))?;
        // Switching a new file to WAL takes its exclusive lock, and SQLite answers SQLITE_BUSY at once,
        // without its busy handler, to a connection that would otherwise wait on one that waits on it
        // (several stores opening a new file at once): tried again until the busy timeout, as the busy
        // handler would (`concurrent_opens_migrate_once` failed 12 times in 60 without it).
        let switch_until = std::time::Instant::now() + options.busy_timeout;
        let mode: String = loop {
            match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)) {
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if f.code == rusqlite::ErrorCode::DatabaseBusy
                        && std::time::Instant::now() < switch_until =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                mode => break mode.map_err(err("switching to WAL mode"))?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::backend(
                format!("cannot use {}", path.display()),
                format!("SQLite kept journal mode `{mode}` instead of WAL"),
            ));
        }
        // `Async` through the VFS: FULL marks each commit's sync, which the VFS makes a write of the
        // frames; `checkpoint_fullfsync` gives the checkpoint's syncs, which it passes on, the other
        // flag (`vfs`, "`Async`").
        let durability = match (options.durability, coalesced) {
            (Durability::Async, true) => "PRAGMA synchronous = FULL; PRAGMA checkpoint_fullfsync = ON",
            (Durability::Async, false) => "PRAGMA synchronous = NORMAL",
            _ => "PRAGMA synchronous = FULL",
        };
        conn.execute_batch(durability).map_err(err("setting the durability"))?;
        // 16 MiB of page cache for the writer (SQLite's default is 2 MiB): a group of concurrent runs'
        // commits touches pages all over the checkpoint and key b-trees.
        conn.execute_batch(WRITER_CACHE).map_err(err("setting the page cache"))?;
        // The automatic checkpoint after about 4 MiB of log whatever the page size (SQLite counts
        // pages: its 1,000 are 4 MiB of 4 KiB pages, but 1 MiB of 1 KiB ones, and at 64 runs a
        // 1 KiB-page store then checkpointed four times as often: 6,800–7,200 commits/s against 8,300–10,900).
        let page: i64 =
            conn.query_row("PRAGMA page_size", [], |r| r.get(0)).map_err(err("reading the page size"))?;
        conn.execute_batch(&format!("PRAGMA wal_autocheckpoint = {}", WAL_CHECKPOINT_BYTES / page.max(512)))
            .map_err(err("setting the automatic checkpoint"))?;
        // The statement journal (the page copies that let a statement that changes several rows, a
        // prune's delete, roll back alone) in memory: otherwise SQLite spills it to a temporary file
        // past 64 KiB.
        conn.execute_batch("PRAGMA temp_store = MEMORY").map_err(err("setting the temporary store"))?;
        // Every statement the writer runs stays prepared (rusqlite keeps 16 by default; the writer has
        // about 25, transaction control included).
        conn.set_prepared_statement_cache_capacity(64);
        migrate(&conn, &path)?;
        preallocate_wal(&conn, &path, page, options.wal_preallocation)?;
        let stats = Arc::new(writer::Stats::default());
        let stopped = Arc::new(Stopped::default());
        let fail: FailPoint = Default::default();
        let io_fail: FailPoint = Default::default();
        let (sender, receiver) = mpsc::channel();
        let writer = Arc::new(Mutex::new(writer::Writer {
            conn,
            path: path.clone(),
            stats: stats.clone(),
            fail: fail.clone(),
            io_fail: io_fail.clone(),
            known: Default::default(),
            data_version: None,
            no_pending: Default::default(),
            stopped: stopped.clone(),
        }));
        let shared = writer.clone();
        let thread = std::thread::Builder::new()
            .name("graph-sqlite-writer".into())
            .spawn(move || writer::run(&shared, receiver))
            .map_err(|e| StoreError::backend("cannot start the SQLite writer thread", e))?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path,
                options,
                sender: Some(sender),
                writer: Some(writer),
                immutable: false,
                thread: Some(thread),
                readers: Mutex::new(Readers::default()),
                reader_returned: Condvar::new(),
                stats,
                stopped,
                fail,
                io_fail,
            }),
        })
    }

    /// Opens the database file `path` for reading only: no writer connection or thread, no schema
    /// migration, nothing written to the file. Every read of [`Store`] works as on a store opened with
    /// [`open`](Self::open), alongside a process that has the store open for writing (its commits
    /// appear as they are made); every write fails with [`StoreError::ReadOnly`]. This is how graphctl
    /// reads a SQLite store.
    ///
    /// It also opens a store on a file system that cannot be written (mounted read-only, or turned
    /// read-only by the kernel after an error), where [`open`](Self::open) fails: through the
    /// write-ahead log and its index when they are there (a store that was not closed), else the
    /// database file alone as SQLite's immutable file (a store closed cleanly has no log; its commits
    /// are all in the file).
    ///
    /// # Errors
    ///
    /// A backend error when `path` is not a file (a read-only open never creates one) or holds no
    /// store of this crate; [`StoreError::UnsupportedSchemaVersion`] when a newer build created it;
    /// [`StoreError::Corrupted`] when it is damaged or not a database, or its write-ahead log is damaged
    /// inside (as for [`open`](Self::open)); a backend error with the
    /// operating system's cause when SQLite cannot read it.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if !path.is_file() {
            let why = if path.is_dir() { "it is a folder" } else { "there is no such file" };
            return Err(StoreError::backend(
                format!("cannot open {} read-only", path.display()),
                format!("{why}; a read-only open never creates a store"),
            ));
        }
        log_check::check(&path)?;
        let options = SqliteOptions::default();
        // First as any reader: the log and its index, created beside the file if missing. On a file
        // system that cannot be written SQLite cannot create them; with no log there, the file holds
        // every commit, and nothing can change it while the file system stays read-only.
        let mut immutable = false;
        let conn = loop {
            let conn =
                open_reader(&path, immutable, options.busy_timeout).map_err(|e| cannot_open(&path, e))?;
            match conn.query_row("SELECT MAX(version) FROM graph_schema_version", [], |r| r.get(0)) {
                Ok(version) => {
                    check_schema_version(&path, version)?;
                    break conn;
                }
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if f.code == rusqlite::ErrorCode::CannotOpen && !immutable && !has_log(&path) =>
                {
                    immutable = true;
                }
                Err(rusqlite::Error::SqliteFailure(_, Some(m))) if m.starts_with("no such table") => {
                    return Err(no_store(&path));
                }
                Err(e) => return Err(sql_error_on(&conn, &path, "reading the schema version", e)),
            }
        };
        let mut readers = Readers::default();
        readers.idle.push(conn);
        readers.open = 1;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path,
                options,
                sender: None,
                writer: None,
                immutable,
                thread: None,
                readers: Mutex::new(readers),
                reader_returned: Condvar::new(),
                stats: Default::default(),
                stopped: Default::default(),
                fail: Default::default(),
                io_fail: Default::default(),
            }),
        })
    }

    /// Whether this store was opened read-only ([`open_read_only`](Self::open_read_only)).
    pub fn is_read_only(&self) -> bool {
        self.inner.writer.is_none()
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Write transactions committed since open: one per commit group, however many commits it held.
    pub fn transactions(&self) -> u64 {
        self.inner.stats.transactions.load(Ordering::Relaxed)
    }

    /// Write requests answered since open (commits, status updates, prunes, journal writes).
    pub fn requests(&self) -> u64 {
        self.inner.stats.requests.load(Ordering::Relaxed)
    }

    /// The writer connection's `journal_mode` and `synchronous` (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA), as
    /// SQLite reports them.
    ///
    /// # Errors
    ///
    /// Backend failures.
    pub async fn writer_pragmas(&self) -> Result<(String, u32), StoreError> {
        match self.request(Op::Pragmas).await? {
            Reply::Pragmas(mode, sync, _) => Ok((mode, sync)),
            other => Err(unexpected(&other)),
        }
    }

    /// Test hook (feature `test-hooks`): the syncs of the writer's write-ahead log since the store
    /// opened it — those that went to the device, and the commit syncs of an `Async` store that only
    /// wrote the commit's frames to the file; `None` without [`SqliteOptions::coalesce_log_writes`].
    ///
    /// # Errors
    ///
    /// Backend failures.
    #[cfg(any(test, feature = "test-hooks"))]
    pub async fn log_syncs(&self) -> Result<Option<(u64, u64)>, StoreError> {
        match self.request(Op::Pragmas).await? {
            Reply::Pragmas(_, _, syncs) => Ok(syncs),
            other => Err(unexpected(&other)),
        }
    }

    /// Test hook (feature `test-hooks`): the next commit fails after its `n`-th write (1 = the
    /// idempotency key, 2 = the checkpoint with its outbox rows and events, 3 = the run row) and rolls
    /// back.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn fail_point(&self) -> &FailPoint {
        &self.inner.fail
    }

    /// Test hook (feature `test-hooks`): as [`fail_point`](Self::fail_point), but the failure is an
    /// I/O error of the writing connection (`SQLITE_IOERR_WRITE`), which stops the store as a real
    /// one does.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn io_fail_point(&self) -> &FailPoint {
        &self.inner.io_fail
    }

    /// Test hook (feature `test-hooks`): overwrites the stored bytes of a checkpoint (to simulate damage
    /// or a newer format).
    ///
    /// # Errors
    ///
    /// Backend failures.
    #[cfg(any(test, feature = "test-hooks"))]
    pub async fn put_raw_checkpoint(&self, run_id: &str, step: u64, bytes: &[u8]) -> Result<(), StoreError> {
        let op = Op::PutRaw { run_id: run_id.to_owned(), step, bytes: Some(bytes.to_vec()) };
        self.request(op).await.map(drop)
    }

    /// Test hook (feature `test-hooks`): deletes a checkpoint's row, as damage that loses it would
    /// (the run row and the event log keep naming its commit).
    ///
    /// # Errors
    ///
    /// Backend failures.
    #[cfg(any(test, feature = "test-hooks"))]
    pub async fn remove_raw_checkpoint(&self, run_id: &str, step: u64) -> Result<(), StoreError> {
        let op = Op::PutRaw { run_id: run_id.to_owned(), step, bytes: None };
        self.request(op).await.map(drop)
    }

    /// Test hook (feature `test-hooks`): the stored bytes of a checkpoint.
    ///
    /// # Errors
    ///
    /// Backend failures.
    #[cfg(any(test, feature = "test-hooks"))]
    pub async fn raw_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let run = run_id.to_owned();
        let step = errors::int(step)?;
        self.read(move |c| {
            c.prepare_cached("SELECT record FROM checkpoints WHERE run_id = ?1 AND step = ?2")?
                .query_row(params![run, step], |r| r.get(0))
                .optional()
        })
        .await
    }

    /// `Corrupted` when the run row `row` of `run_id` (its bytes checked) names a later step than
    /// `last`, the last checkpoint the index of checkpoints gives: that index is damaged. A damaged
    /// index leaf can drop entries without SQLite noticing, and a run would then read as behind the
    /// step it committed (measured: docs/stores.md, "A damaged index").
    fn check_index(&self, run_id: &str, row: Option<&[u8]>, last: Option<u64>) -> Result<(), StoreError> {
        let file = Some(self.inner.path.as_path());
        let latest = row.map(|b| decode_run_of(run_id, file, b)).transpose()?.map(|info| info.latest_step);
        let through = graph_store::ReadThrough {
            what: "the index of its checkpoints",
            lost: "the index is damaged",
            file: Some(self.inner.path.clone()),
            remedy: REMEDY_FILE,
        };
        graph_store::behind_run_row(run_id, latest, last, through)
    }

    /// Commits `op`, inline or through the writer thread, and waits for its answer (after its group
    /// committed).
    async fn request(&self, op: Op) -> Result<Reply, StoreError> {
        if self.inner.writer.is_none() {
            return Err(StoreError::ReadOnly { path: self.inner.path.clone() });
        }
        let (answer, reply) = oneshot::channel();
        let job = Job { op, answer };
        let Some(job) = self.commit_inline(job) else {
            return reply.await.map_err(|_| writer_gone(&self.inner.path))?;
        };
        let sender = self.inner.sender.as_ref().ok_or_else(|| writer_gone(&self.inner.path))?;
        self.inner.stats.queued.fetch_add(1, Ordering::SeqCst);
        if sender.send(job).is_err() {
            self.inner.stats.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(writer_gone(&self.inner.path));
        }
        reply.await.map_err(|_| writer_gone(&self.inner.path))?
    }

    /// Commits `job` as a group of one on the caller's thread when the writer connection is free, no
    /// request waits for the writer thread, and the runtime lets a task block (`block_in_place`: a
    /// multi-thread runtime); gives it back (`Some`) otherwise.
    fn commit_inline(&self, job: Job) -> Option<Job> {
        if !graph_store::group::may_lead_here() {
            return Some(job);
        }
        if self.inner.stats.queued.load(Ordering::SeqCst) > 0 {
            return Some(job);
        }
        let Ok(mut writer) = self.inner.writer.as_ref()?.try_lock() else { return Some(job) };
        tokio::task::block_in_place(|| writer.commit_group(vec![job]));
        None
    }

    /// Runs `f` on a read-only connection of the pool, on a blocking thread.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let path = self.inner.path.clone();
        self.read_decoded(move |c| f(c).map_err(|e| sql_error_on(c, &path, "reading the database", e))).await
    }

    /// Runs `f` on a read-only connection of the pool, on a blocking thread; `f` decodes what it read.
    async fn read_decoded<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.inner.stopped.check(&self.inner.path)?;
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let conn = inner.reader()?;
            let out = f(&conn);
            inner.readers.lock().unwrap_or_else(|e| e.into_inner()).idle.push(conn);
            inner.reader_returned.notify_one();
            out
        })
        .await
        .map_err(|e| StoreError::backend("a read of the SQLite store did not finish", e))?
    }

    /// [`Store::backup_to`] (`runs` `None`) and [`Store::salvage_to`]: `VACUUM INTO` from one read
    /// transaction (the copy is the database as of its start, while the writer goes on), then, for a
    /// salvage, every row of another run deleted from the copy's tables; then synced.
    async fn copy_to(&self, dest: &Path, runs: Option<&[String]>) -> Result<(), StoreError> {
        if dest.exists() {
            return Err(cannot_copy(dest, "it exists already: a backup or a salvage goes to a new path"));
        }
        let target = dest.to_str().ok_or_else(|| cannot_copy(dest, "the path is not UTF-8"))?.to_owned();
        let (path, copy, keep) = (self.inner.path.clone(), dest.to_path_buf(), runs.map(<[String]>::to_vec));
        let done = self
            .read_decoded(move |c| {
                c.execute("VACUUM INTO ?1", [target])
                    .map_err(|e| sql_error_on(c, &path, "reading the database", e))?;
                finish_copy(&copy, keep.as_deref())
            })
            .await;
        if done.is_err() {
            let _ = std::fs::remove_file(dest);
        }
        done
    }

    async fn outcome(&self, op: Op) -> Result<CommitOutcome, StoreError> {
        match self.request(op).await? {
            Reply::Outcome(o) => Ok(o),
            other => Err(unexpected(&other)),
        }
    }

    async fn count(&self, op: Op) -> Result<usize, StoreError> {
        match self.request(op).await? {
            Reply::Count(n) => Ok(n),
            other => Err(unexpected(&other)),
        }
    }
}

impl Inner {
    /// An idle read-only connection; a new one while fewer than `options.readers` exist; else waits
    /// for one to be returned (on a blocking thread).
    fn reader(&self) -> Result<Connection, StoreError> {
        let mut pool = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(c) = pool.idle.pop() {
                return Ok(c);
            }
            if pool.open < self.options.readers.max(1) {
                pool.open += 1;
                break;
            }
            pool = self.reader_returned.wait(pool).unwrap_or_else(|e| e.into_inner());
        }
        drop(pool);
        let opened = self.open_reader();
        if opened.is_err() {
            self.readers.lock().unwrap_or_else(|e| e.into_inner()).open -= 1;
            self.reader_returned.notify_one();
        }
        opened
    }

    fn open_reader(&self) -> Result<Connection, StoreError> {
        open_reader(&self.path, self.immutable, self.options.busy_timeout)
            .map_err(|e| sql_error(&self.path, "opening a reader", e))
    }
}

/// The read-only connections of a store.
#[derive(Default)]
struct Readers {
    idle: Vec<Connection>,
    /// Connections that exist, idle or in use.
    open: usize,
}

/// The stored run row of `run`, its bytes.
fn run_row(c: &Connection, run: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    c.prepare_cached("SELECT row FROM runs WHERE run_id = ?1")?
        .query_row(params![run], |r| r.get(0))
        .optional()
}

/// A read-only connection to `path` that waits `busy_timeout` for a lock; `immutable`: SQLite's
/// `immutable=1` (no locks, no log read).
fn open_reader(path: &Path, immutable: bool, busy_timeout: Duration) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = if immutable {
        // A URI: the characters that mean something in one are escaped in the path.
        let mut uri = String::from("file:");
        for c in path.to_string_lossy().chars() {
            match c {
                '%' | '?' | '#' => uri.push_str(&format!("%{:02X}", c as u32)),
                c => uri.push(c),
            }
        }
        uri.push_str("?immutable=1");
        Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)?
    } else {
        Connection::open_with_flags(path, flags)?
    };
    conn.busy_timeout(busy_timeout)?;
    Ok(conn)
}

/// The schema version `version` (`MAX(version)` of its table) of the file `path`, checked: none holds
/// no store, and a newer one is refused.
fn check_schema_version(path: &Path, version: Option<i64>) -> Result<(), StoreError> {
    let Some(version) = version else { return Err(no_store(path)) };
    refuse_newer(version)
}

/// `UnsupportedSchemaVersion` for a schema version newer than this build's.
fn refuse_newer(version: i64) -> Result<(), StoreError> {
    if version > i64::from(SQLITE_SCHEMA_VERSION) {
        return Err(StoreError::UnsupportedSchemaVersion {
            found: u32::try_from(version).unwrap_or(u32::MAX),
            supported: SQLITE_SCHEMA_VERSION,
        });
    }
    Ok(())
}

fn no_store(path: &Path) -> StoreError {
    StoreError::backend(
        format!("cannot open {} read-only", path.display()),
        "the file holds no graph-runtime store (it has no schema version)",
    )
}

/// Whether the database file `path` has a write-ahead log beside it.
fn has_log(path: &Path) -> bool {
    beside(path, "-wal").exists()
}

fn writer_gone(path: &Path) -> StoreError {
    StoreError::backend(
        format!("the SQLite store at {} cannot write", path.display()),
        "its writer thread stopped",
    )
}

fn unexpected(reply: &Reply) -> StoreError {
    StoreError::backend("the SQLite writer answered another request", format!("{reply:?}"))
}

/// Applies the migrations the database lacks, in one `BEGIN IMMEDIATE` transaction: two processes
/// opening a new file at once serialize here, and the second finds the schema in place.
fn migrate(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    // `new_unchecked`: a shared borrow, so that an error can still read the connection's OS error.
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| sql_error_on(conn, path, "starting the schema migration", e))?;
    let err = |e| sql_error_on(&tx, path, "migrating the schema", e);
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS graph_schema_version (
             version    INTEGER NOT NULL PRIMARY KEY,
             applied_ms INTEGER NOT NULL
         )",
    )
    .map_err(err)?;
    let current: i64 = tx
        .query_row("SELECT COALESCE(MAX(version), 0) FROM graph_schema_version", [], |r| r.get(0))
        .map_err(err)?;
    refuse_newer(current)?;
    if current == 0 {
        // No version recorded, yet the store's tables are there: the version table's pages are gone.
        let tables: i64 = tx
            .query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'runs'", [], |r| {
                r.get(0)
            })
            .map_err(err)?;
        if tables > 0 {
            return Err(StoreError::corrupted_file(
                path,
                "the store's tables are there but its schema version is not: the file is damaged",
                REMEDY_FILE,
            ));
        }
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| i64::from(*v) > current) {
        tx.execute_batch(sql).map_err(err)?;
        tx.execute(
            "INSERT INTO graph_schema_version (version, applied_ms) VALUES (?1, ?2)",
            params![version, now],
        )
        .map_err(err)?;
    }
    tx.commit().map_err(|e| sql_error_on(conn, path, "committing the schema migration", e))
}

/// Grows the write-ahead log of `path` to about `bytes` of written blocks when it is smaller, through
/// SQLite itself: a transaction on a 16-page cache inserts that many pages into a scratch table, SQLite
/// spills them into the log as frames of no commit, and the transaction is rolled back (the database
/// is unchanged; the frames are past the log's last commit, so readers and recovery never read them,
/// and the next commits overwrite them). A write that changes nothing (a row of the schema-version
/// table rewritten) is then committed, so that its sync flushes the log's new blocks now, not in the
/// first commit. Best effort: a failure (a full disk, another process holding the write lock past the
/// busy timeout) leaves the log as SQLite grows it and the store opens all the same. An I/O error
/// (a failed write or sync) fails the open, as it would stop an open store ([`Stopped`]).
fn preallocate_wal(conn: &Connection, path: &Path, page: i64, bytes: u64) -> Result<(), StoreError> {
    let have = std::fs::metadata(beside(path, "-wal")).map_or(0, |m| m.len());
    if bytes == 0 || have >= bytes {
        return Ok(());
    }
    let grow = || -> rusqlite::Result<()> {
        let pages = i64::try_from(bytes).unwrap_or(i64::MAX) / page.max(512);
        conn.execute_batch("PRAGMA cache_size = 16; BEGIN IMMEDIATE")?;
        let spilled = conn.execute_batch(&format!(
            "CREATE TABLE graph_wal_preallocation (b BLOB); \
             INSERT INTO graph_wal_preallocation SELECT zeroblob({}) FROM \
             (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {pages}) SELECT i FROM n)",
            page * 85 / 100
        ));
        let rolled_back = if conn.is_autocommit() { Ok(()) } else { conn.execute_batch("ROLLBACK") };
        spilled?;
        rolled_back?;
        conn.execute_batch(
            "BEGIN IMMEDIATE; \
             UPDATE graph_schema_version SET applied_ms = applied_ms \
                 WHERE version = (SELECT MAX(version) FROM graph_schema_version); \
             COMMIT",
        )
    };
    let grown = grow();
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    let restored = conn.execute_batch(WRITER_CACHE);
    match grown.and(restored) {
        Ok(()) => Ok(()),
        Err(e) if is_io_failure(&e) => Err(sql_error_on(conn, path, "preallocating the write-ahead log", e)),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "the write-ahead log was not preallocated");
            Ok(())
        }
    }
}

/// Why SQLite could not open the database file `path`: its "unable to open database file" does not
/// say, so a refused open is explained from the file system (a folder at the path, a missing folder,
/// the OS's own error opening the file or creating one beside it). Any other error is [`sql_error`]'s.
fn cannot_open(path: &Path, e: rusqlite::Error) -> StoreError {
    let refused =
        matches!(&e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::CannotOpen);
    if !refused {
        return sql_error(path, "opening the database", e);
    }
    let what = format!("cannot open the database file {}", path.display());
    if path.is_dir() {
        return StoreError::backend(
            what,
            "it is a folder: give the path of a database file (created if missing)",
        );
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return StoreError::backend(what, format!("the folder {} does not exist", folder.display()));
    }
    // The OS's error, without touching the database file: opening it for writing when it exists
    // (never creating it), else creating and removing a file of another name in its folder.
    let tried = if path.exists() {
        write_open_error(path).map_or(Ok(()), Err)
    } else {
        // A name of this process and this call: two opens at once never take each other's.
        static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = PROBES.fetch_add(1, Ordering::Relaxed);
        let probe = folder.join(format!(".graph-runtime-open-{}-{n}", std::process::id()));
        std::fs::OpenOptions::new().write(true).create_new(true).open(&probe).map(|_| {
            let _ = std::fs::remove_file(&probe);
        })
    };
    match tried {
        Err(io) => StoreError::backend(what, io),
        Ok(()) => sql_error(path, "opening the database", e),
    }
}

/// The name `runs.status` holds for a status (its variant).
#[async_trait]
impl Store for SqliteStore {
    async fn backup_to(&self, dest: &Path) -> Result<(), StoreError> {
        self.copy_to(dest, None).await
    }

    async fn salvage_to(&self, dest: &Path, runs: &[String]) -> Result<(), StoreError> {
        self.copy_to(dest, Some(runs)).await
    }

    async fn save_checkpoint(
        &self,
        cp: &Checkpoint,
        events: &[Event],
        status: &RunStatus,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        self.outcome(Op::save(cp, events, status, expected_version)).await
    }

    async fn set_status(
        &self,
        run_id: &str,
        status: &RunStatus,
        events: &[Event],
        pending: Option<&[u8]>,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        let op = Op::Status {
            run_id: run_id.to_owned(),
            status: status.clone(),
            events: graph_store::events::Encoded::all(events),
            pending: pending.map(<[u8]>::to_vec),
            expected_version,
        };
        self.outcome(op).await
    }

    async fn events(&self, run_id: &str, from: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let run = run_id.to_owned();
        let (from, limit) = (bound(from), i64::try_from(limit).unwrap_or(i64::MAX));
        let rows: Vec<(i64, Vec<u8>)> = self
            .read(move |c| {
                c.prepare_cached(
                    "SELECT seq, event FROM events WHERE run_id = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3",
                )?
                .query_map(params![run, from, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
            })
            .await?;
        rows.iter().map(|(seq, b)| graph_store::events::decode(run_id, uint(*seq), b)).collect()
    }

    async fn pending(&self, run_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let run = run_id.to_owned();
        self.read(move |c| {
            c.prepare_cached("SELECT step FROM pending WHERE run_id = ?1")?
                .query_row(params![run], |r| r.get(0))
                .optional()
        })
        .await
    }

    async fn run_info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        let run = run_id.to_owned();
        let row = self.read(move |c| run_row(c, &run)).await?;
        row.map(|b| decode_run_of(run_id, Some(&self.inner.path), &b)).transpose()
    }

    async fn load_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Checkpoint>, StoreError> {
        let Ok(at) = i64::try_from(step) else { return Ok(None) };
        let run = run_id.to_owned();
        let row: Option<Vec<u8>> = self
            .read(move |c| {
                c.prepare_cached("SELECT record FROM checkpoints WHERE run_id = ?1 AND step = ?2")?
                    .query_row(params![run, at], |r| r.get(0))
                    .optional()
            })
            .await?;
        row.map(|b| decode(run_id, step, &b)).transpose()
    }

    async fn latest(&self, run_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        let run = run_id.to_owned();
        let (row, last): (Option<Vec<u8>>, Option<(i64, Vec<u8>)>) = self
            .read(move |c| {
                // One read transaction: the run row and the last checkpoint of the same moment.
                let tx = c.unchecked_transaction()?;
                let row = run_row(&tx, &run)?;
                let last = tx
                    .prepare_cached(
                        "SELECT step, record FROM checkpoints WHERE run_id = ?1 ORDER BY step DESC LIMIT 1",
                    )?
                    .query_row(params![run], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                Ok((row, last))
            })
            .await?;
        self.check_index(run_id, row.as_deref(), last.as_ref().map(|(step, _)| uint(*step)))?;
        last.map(|(step, b)| decode(run_id, uint(step), &b)).transpose()
    }

    async fn checkpoints(&self, run_id: &str, from: u64, to: u64) -> Result<Vec<Checkpoint>, StoreError> {
        if from > to {
            return Ok(Vec::new());
        }
        let run = run_id.to_owned();
        let (from, to) = (bound(from), bound(to));
        let rows: Vec<(i64, Vec<u8>)> = self
            .read(move |c| {
                c.prepare_cached(
                    "SELECT step, record FROM checkpoints WHERE run_id = ?1 AND step BETWEEN ?2 AND ?3 \
                     ORDER BY step",
                )?
                .query_map(params![run, from, to], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
            })
            .await?;
        rows.iter().map(|(step, b)| decode(run_id, uint(*step), b)).collect()
    }

    async fn history(&self, run_id: &str) -> Result<Vec<CheckpointMeta>, StoreError> {
        let run = run_id.to_owned();
        let (row, rows): (Option<Vec<u8>>, Vec<(i64, Vec<u8>)>) = self
            .read(move |c| {
                let tx = c.unchecked_transaction()?;
                let row = run_row(&tx, &run)?;
                let rows = tx
                    .prepare_cached("SELECT step, record FROM checkpoints WHERE run_id = ?1 ORDER BY step")?
                    .query_map(params![run], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<rusqlite::Result<_>>()?;
                Ok((row, rows))
            })
            .await?;
        self.check_index(run_id, row.as_deref(), rows.last().map(|(step, _)| uint(*step)))?;
        rows.iter().map(|(step, b)| Ok(decode(run_id, uint(*step), b)?.meta())).collect()
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        let limit = filter.rows_to_read().map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let status = filter.status.map(graph_store::StatusKind::as_str);
        let start = filter.start().to_owned();
        let rows: Vec<(String, Vec<u8>)> = self
            .read(move |c| match status {
                Some(s) => c
                    .prepare_cached(
                        "SELECT run_id, row FROM runs WHERE status = ?1 AND run_id >= ?2 ORDER BY run_id LIMIT ?3",
                    )?
                    .query_map(params![s, start, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect(),
                None => c
                    .prepare_cached("SELECT run_id, row FROM runs WHERE run_id >= ?1 ORDER BY run_id LIMIT ?2")?
                    .query_map(params![start, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect(),
            })
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for (run_id, b) in rows {
            if filter.past(&run_id) || filter.limit.is_some_and(|n| out.len() >= n) {
                break;
            }
            let info = decode_run_of(&run_id, Some(&self.inner.path), &b)?;
            if filter.matches(&info) {
                out.push(info);
            }
        }
        Ok(out)
    }

    async fn prune(&self, run_id: &str, keep: usize) -> Result<usize, StoreError> {
        self.count(Op::Prune { run_id: run_id.to_owned(), keep }).await
    }

    async fn load_effect(&self, key: &str) -> Result<Option<EffectRecord>, StoreError> {
        let key = key.to_owned();
        let row: Option<Vec<u8>> = self
            .read(move |c| {
                c.prepare_cached("SELECT record FROM effects WHERE key = ?1")?
                    .query_row(params![key], |r| r.get(0))
                    .optional()
            })
            .await?;
        row.map(|b| decode_effect(&b)).transpose()
    }

    async fn put_effect(
        &self,
        record: &EffectRecord,
        expected: Option<&EffectState>,
    ) -> Result<EffectOutcome, StoreError> {
        let op = Op::Effect { record: Box::new(record.clone()), expected: expected.cloned() };
        match self.request(op).await? {
            Reply::Effect(o) => Ok(o),
            other => Err(unexpected(&other)),
        }
    }

    async fn mailbox_op(
        &self,
        run_id: &str,
        op: graph_store::mailbox::MailboxOp,
    ) -> Result<graph_store::mailbox::MailboxReply, StoreError> {
        match self.request(Op::Mailbox { run_id: run_id.to_owned(), op }).await? {
            Reply::Mailbox(r) => Ok(r),
            other => Err(unexpected(&other)),
        }
    }

    async fn schedule_op(
        &self,
        name: &str,
        op: graph_store::schedule::ScheduleOp,
    ) -> Result<graph_store::schedule::ScheduleReply, StoreError> {
        match self.request(Op::Schedule { name: name.to_owned(), op }).await? {
            Reply::Schedule(r) => Ok(r),
            other => Err(unexpected(&other)),
        }
    }

    async fn schedules(&self) -> Result<Vec<graph_store::schedule::Schedule>, StoreError> {
        let rows: Vec<Vec<u8>> = self
            .read(move |c| {
                c.prepare_cached("SELECT bytes FROM schedules ORDER BY name")?
                    .query_map([], |r| r.get(0))?
                    .collect()
            })
            .await?;
        rows.iter().map(|b| graph_store::schedule::decode(b)).collect()
    }

    async fn mailbox(&self, run_id: &str) -> Result<graph_store::mailbox::Mailbox, StoreError> {
        let run = run_id.to_owned();
        let bytes: Option<Vec<u8>> = self
            .read(move |c| {
                c.prepare_cached("SELECT bytes FROM mailboxes WHERE run_id = ?1")?
                    .query_row(params![run], |r| r.get(0))
                    .optional()
            })
            .await?;
        Ok(bytes.map(|b| graph_store::mailbox::decode(&b)).transpose()?.unwrap_or_default())
    }

    async fn effects(&self, run_id: &str) -> Result<Vec<EffectRecord>, StoreError> {
        let run = run_id.to_owned();
        let rows: Vec<Vec<u8>> = self
            .read(move |c| {
                c.prepare_cached(
                    "SELECT record FROM effects WHERE run_id = ?1 ORDER BY step, path, call_index",
                )?
                .query_map(params![run], |r| r.get(0))?
                .collect()
            })
            .await?;
        rows.iter().map(|b| decode_effect(b)).collect()
    }

    async fn outbox(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<Vec<u8>> = self
            .read(move |c| {
                c.prepare_cached("SELECT row FROM outbox ORDER BY run_id, step, idx LIMIT ?1")?
                    .query_map(params![limit], |r| r.get(0))?
                    .collect()
            })
            .await?;
        rows.iter().map(|b| decode_outbox(b)).collect()
    }

    async fn ack_outbox(&self, keys: &[String]) -> Result<usize, StoreError> {
        if keys.is_empty() {
            return Ok(0);
        }
        self.count(Op::Ack { keys: keys.to_vec() }).await
    }

    /// `PRAGMA integrity_check` on a reader: every page, every b-tree's order, every index entry
    /// against its table row. Its first ten findings are the `Corrupted` error's detail.
    async fn check_integrity(&self) -> Result<Integrity, StoreError> {
        const CHECK: &str = "PRAGMA integrity_check";
        let found: Vec<String> = self
            .read(|c| {
                let mut st = c.prepare("PRAGMA integrity_check(10)")?;
                let rows = st.query_map([], |r| r.get(0))?;
                rows.collect()
            })
            .await?;
        if found.len() == 1 && found[0] == "ok" {
            return Ok(Integrity::Sound { check: CHECK.to_owned() });
        }
        Err(StoreError::corrupted_file(
            &self.inner.path,
            format!("{CHECK} found the file inconsistent: {}", found.join("; ")),
            REMEDY_FILE,
        ))
    }
}

fn cannot_copy(dest: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::backend(format!("cannot copy the store to {}", dest.display()), e.to_string())
}

/// The end of [`SqliteStore::copy_to`], on the copy at `dest` that `VACUUM INTO` wrote: for a salvage
/// (`keep`), every row of another run deleted from each table with a `run_id`; then the file and its
/// folder synced.
fn finish_copy(dest: &Path, keep: Option<&[String]>) -> Result<(), StoreError> {
    let cannot = |e: rusqlite::Error| cannot_copy(dest, e);
    if let Some(keep) = keep {
        let c = Connection::open(dest).map_err(cannot)?;
        c.execute_batch("CREATE TEMP TABLE graph_keep (run_id TEXT PRIMARY KEY)").map_err(cannot)?;
        for run in keep {
            c.execute("INSERT OR IGNORE INTO graph_keep VALUES (?1)", [run]).map_err(cannot)?;
        }
        let tables: Vec<String> = c
            .prepare(
                "SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) p \
                 WHERE m.type = 'table' AND p.name = 'run_id'",
            )
            .and_then(|mut q| q.query_map([], |r| r.get(0))?.collect())
            .map_err(cannot)?;
        for t in tables {
            let sql = format!("DELETE FROM \"{t}\" WHERE run_id NOT IN (SELECT run_id FROM temp.graph_keep)");
            c.execute(&sql, []).map_err(cannot)?;
        }
    }
    let parent = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::File::open(dest)
        .and_then(|f| f.sync_all())
        .and_then(|()| std::fs::File::open(parent)?.sync_all())
        .map_err(|e| cannot_copy(dest, e))
}
