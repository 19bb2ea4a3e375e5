//! The store's write-ahead commit log: where an acknowledged commit is true. The index (sled) is
//! brought up to date from it: the records of the segments `open` reads ([`LogOptions::read_from`]) are
//! replayed at open; older segments are the store's history, read on demand ([`CommitLog::history`]),
//! until the store retires them.
//!
//! # Guarantees
//!
//! - [`CommitLog::commit`] returns `Ok` only once its records are on the device (`fdatasync`): after a
//!   crash or power loss, [`CommitLog::open`] returns every record of every successful `commit`, in seq
//!   order. A group whose `commit` failed or was cut by a crash is returned whole or not at all.
//! - Damage is reported, never guessed around: [`LogError::Corrupted`] names the file and byte offset.
//!   The only damage `open` cannot tell from a crash is damage to the last group of the log, which it
//!   reads as a torn tail (the store can cross-check with its manifest's `checkpoint_seq`).
//! - Fail-stop: after an I/O error every call fails with [`LogError::Failed`] until the log is reopened,
//!   because after a failed write or `fdatasync` the state of the file is unknown (Linux may even drop
//!   the unwritten pages and report success to a later `fsync`); `open` re-reads and re-syncs it.
//! - One `CommitLog` per folder: `open` locks `wal.lock` ([`LogError::Locked`]).
//!
//! # Files
//!
//! A folder holds segments `wal-<first seq, 20 digits>.log`, spares `spare-<id, 20 digits>.wal` (files
//! ready to become the next segment: see `spares`), `wal.lock`, and may hold the store's `manifest`
//! ([`Manifest`]). Everything else is ignored. Only names of the segment form are read as segments, so
//! a spare's stale or half-written header is never mistaken for damage.
//!
//! All integers are little-endian. A segment starts with a 32-byte header:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `GRWL` |
//! | 4..8 | `u32` format version (2; version 1 is still read) |
//! | 8..16 | `u64` first seq (must match the file name) |
//! | 16..24 | `u64` salt, random, new each time the file becomes a segment |
//! | 24..28 | `u32` capacity: the file's size / 8 when it became a segment (zero in version 1) |
//! | 28..32 | `u32` crc32c of bytes 0..28 |
//!
//! then record groups, each starting at a multiple of 8 (zero padding between):
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | `u32` body length |
//! | 4..8 | `u32` count of records (≥ 1) |
//! | 8..16 | `u64` seq of the first record; the others follow contiguously |
//! | 16..20 | `u32` crc32c(salt ‖ body) |
//! | 20..24 | `u32` crc32c(salt ‖ bytes 0..20) |
//! | 24.. | body: per record `u32` payload length ‖ payload |
//!
//! Seqs are given by the caller and contiguous across segments. Segment `i + 1`'s first seq is one past
//! segment `i`'s last record, so a segment's range is known from the names alone.
//!
//! # Design, and why
//!
//! - **One `pwrite` and one `fdatasync` per commit, no metadata.** Segments are preallocated by writing
//!   zeros (not `fallocate`: on ext4 the first write into an unwritten extent is a metadata change), so
//!   a commit never changes the file's size and `fdatasync` has no inode to write.
//! - **A commit is one frame (a group), not one frame per record.** A `pwrite` of several records that
//!   a crash tears can leave a later record intact behind a torn one; with a checksum per record that
//!   reads as "a bad record followed by a valid one" — damage — after an ordinary power cut. A group has
//!   one checksum, so a torn commit is invalid as a whole, returned whole or not at all, and a valid
//!   group after an invalid one can only be real damage.
//! - **A salt per segment incarnation in every checksum.** A recycled file (or a spare a crash left
//!   half-prepared) still holds groups of its previous life; under a new salt none of them validates,
//!   whatever its seq. Together with the previous point this is why `open` does not need to zero a
//!   torn tail: the only group headers ever written in this incarnation of the file are at or before
//!   the end `open` finds, so nothing after it can be read as a record later, and the next commit
//!   overwrites it from the end. (The check of the seq against the expected one stays, as a second
//!   line.)
//! - **Tail or damage.** `open` reads groups while they are valid and carry the expected seq. Where that
//!   stops, it searches the rest of the segment (every 8th byte; the 24-byte header checksum is checked
//!   before the body) for any valid group: one is damage (`Corrupted` at the offset where reading
//!   stopped), none means this is the end of the segment. The end of a segment that is not the last
//!   must be followed by a segment starting at the expected seq, else `Corrupted`. The end of the last
//!   segment is the tail.
//! - **Undo on failure.** When a commit's write or sync fails, the log zeroes (best effort, unsynced)
//!   the header of the group it was writing before it stops. A reopen in the same process then reads
//!   the page cache: without the undo it could return the failed group (the write reached the cache,
//!   the sync failed), replay it, and append after it while the device may never get it, so a later
//!   power cut would leave acknowledged groups behind a hole.
//! - **A segment's size is in its header.** Segments are preallocated, and a commit never changes a
//!   file's size, so no crash can shorten a segment: one whose size is not its header's capacity was
//!   cut (or grown) by something else, and `open` reports it as damage. Without the capacity, a cut
//!   through the last segment read as the end of the log and silently dropped every group after it,
//!   not only a torn last one (found by `tests/tests/faults/faults_damage.rs`). Version-1 segments, written
//!   before the field, are read without this check.
//! - **Rotation.** When a group does not fit, the next segment is a spare: its header and the group are
//!   written in one `pwrite`, `fdatasync`ed, the file is renamed `wal-<seq>.log` and the folder
//!   fsynced; then the commit is acknowledged. A group larger than a segment gets a segment of its own,
//!   sized to it (that one commit also pays for the size change).
//! - **Spares ahead of time, on a thread.** A rotation that has to write its own 64 MiB of zeros took
//!   190–510 ms here; with the spare prepared beforehand it took 6–39 ms (two syncs and a folder sync,
//!   once per 64 MiB), against ~3 ms for a plain commit (`measure_commit_rate_against_fdatasync`, the
//!   ignored test). Preparing the spare right after the rotating commit instead would move the same
//!   stall onto the next group of a single commit thread. So a preparer thread keeps one spare ready,
//!   and retired segments of the standard size are recycled as spares (rename + folder sync, no
//!   writing) up to `max_spares`: a log whose retirement keeps up writes no zeros at all. A rotation
//!   that finds no spare waits for the thread (counted in [`LogStats::rotation_waits`]); so does the
//!   first commit of a new log.
//! - **Retiring** removes or recycles the oldest segments one at a time, syncing the folder after each,
//!   so a crash leaves a prefix retired and the rest contiguous.
//!
//! # Not handled here
//!
//! Concurrency: the log takes `&mut self`; the store's commit thread owns it. Replay and retirement
//! policy belong to the store.

mod format;
#[cfg(feature = "fuzzing")]
pub(crate) mod fuzz;
mod io;
mod manifest;
mod spares;
/// How long [`lock_waiting`] tries a held lock again before it gives up.
pub(crate) const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Takes `file`'s exclusive lock; true when taken, false when another holder kept it for
/// [`LOCK_WAIT`]. A held lock is tried again every 2 ms meanwhile: a child process that this process
/// starts holds a copy of every descriptor from its fork until its `exec` closes them, these locks'
/// included, so a store dropped and opened again while another thread started a process found itself
/// locked out (`interrupts.rs`, whose tests run a child process, failed so once in CI).
pub(crate) fn lock_waiting(file: &File) -> std::io::Result<bool> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(true),
            Err(TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(TryLockError::WouldBlock) => return Ok(false),
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests;

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use format::{
    ALIGN, GROUP_HEADER, GroupBuilder, HeaderError, MAX_CAPACITY, RECORD_HEADER, SEGMENT_HEADER,
    SegmentHeader, decode_segment_header, encode_segment_header, find_valid_group, parse_group, salt_seed,
};
pub(crate) use io::{Io, Site};
pub(crate) use manifest::Manifest;
use spares::{Spares, parse_spare_name, spare_name};

#[cfg(test)]
pub(crate) use io::{Action, Faults, Op};

/// The default size of a segment file.
pub(crate) const DEFAULT_SEGMENT_SIZE: u64 = 64 << 20;
/// The lock file in the log's folder.
pub(crate) const LOCK_FILE: &str = "wal.lock";
/// The largest group body (the length field is a `u32`).
const MAX_BODY: usize = u32::MAX as usize;

/// Why the log refused an operation. Every message carries its whole cause.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LogError {
    /// A file operation failed. The log is failed (fail-stop) when this comes from a write.
    #[error("{context}: {source}")]
    Io {
        /// What the log was doing.
        context: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// An earlier operation failed; nothing is done until the log is reopened.
    #[error(
        "the commit log in {} failed earlier and must be reopened: {cause}", dir.display()
    )]
    Failed {
        /// The log's folder.
        dir: PathBuf,
        /// The first failure's message.
        cause: String,
    },
    /// Damaged bytes: what they should hold cannot be read, and valid data exists past them.
    #[error("{} is corrupted at byte {offset}: {detail}", file.display())]
    Corrupted {
        /// The damaged file.
        file: PathBuf,
        /// Where the damage starts (or where the missing data should be).
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// A valid file of a format this build does not know (written by a newer build).
    #[error(
        "{} has format version {found}, this build reads version {supported}; open it with a newer build",
        file.display()
    )]
    UnsupportedVersion {
        /// The file.
        file: PathBuf,
        /// Its version.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// Another `CommitLog` (in this process or another) has the folder open.
    #[error("the commit log in {} is open elsewhere ({LOCK_FILE} is locked)", dir.display())]
    Locked {
        /// The log's folder.
        dir: PathBuf,
    },
    /// An appended seq does not follow the previous one.
    #[error("the commit log expects seq {expected} next, not {found}")]
    Sequence {
        /// The seq that must come next.
        expected: u64,
        /// The seq given.
        found: u64,
    },
    /// An argument the log cannot take (nothing was written).
    #[error("refused: {detail}")]
    Refused {
        /// What and why.
        detail: String,
    },
}

impl LogError {
    fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        LogError::Io { context: context.into(), source }
    }
}

/// Options of [`CommitLog::open`].
#[derive(Debug, Clone)]
pub(crate) struct LogOptions {
    /// Bytes of a segment file (a multiple of 8, at least 64). Default 64 MiB.
    pub(crate) segment_size: u64,
    /// Retired segments kept as spares for recycling (more are deleted). Default 2.
    pub(crate) max_spares: usize,
    /// Prepare spares on a thread (default) rather than in the rotation that needs one.
    pub(crate) background_spares: bool,
    /// The last seq the index holds durably (the manifest's `checkpoint_seq`), when known: damage that
    /// lies wholly in records up to it is not needed to recover, and is skipped and reported
    /// ([`CommitLog::skipped`]) rather than refused. `None` (default): any damage is refused.
    pub(crate) applied_through: Option<u64>,
    /// Segments all of whose records have seq ≤ this are history: `open` lists them without reading
    /// them (their records are not returned, their bytes not checked); [`CommitLog::history`] reads
    /// them. Default 0: every segment is read.
    pub(crate) read_from: u64,
    /// Fault rules for tests.
    #[cfg(test)]
    pub(crate) faults: Option<Arc<Faults>>,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            segment_size: DEFAULT_SEGMENT_SIZE,
            max_spares: 2,
            background_spares: true,
            applied_through: None,
            read_from: 0,
            #[cfg(test)]
            faults: None,
        }
    }
}

impl LogOptions {
    fn io(&self) -> Io {
        Io {
            #[cfg(test)]
            faults: self.faults.clone(),
        }
    }
}

/// Damage [`CommitLog::open`] skipped: bytes holding only records the index already held durably.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skipped {
    /// The segment.
    pub(crate) file: PathBuf,
    /// Where the unreadable bytes start.
    pub(crate) offset: u64,
    /// The seqs they held, `from..to`.
    pub(crate) seqs: std::ops::Range<u64>,
    /// Why they did not read.
    pub(crate) why: &'static str,
}

/// One record: a seq and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// Its seq.
    pub(crate) seq: u64,
    /// Its bytes, as appended.
    pub(crate) payload: Vec<u8>,
}

/// Counters of one open log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LogStats {
    /// Successful commits (each one `pwrite` and one `fdatasync`).
    pub(crate) commits: u64,
    /// Commits that moved to a new segment.
    pub(crate) rotations: u64,
    /// Rotations that had no spare ready and waited for (or made) one.
    pub(crate) rotation_waits: u64,
    /// Retired segments renamed into spares.
    pub(crate) recycled: u64,
    /// Retired segments deleted.
    pub(crate) deleted: u64,
    /// Spares written as zeros.
    pub(crate) spares_created: u64,
}

/// A segment on disk.
#[derive(Debug)]
struct Segment {
    first_seq: u64,
    path: PathBuf,
    len: u64,
}

/// The segment commits go to.
#[derive(Debug)]
struct Current {
    file: File,
    path: PathBuf,
    /// Where the next group goes.
    offset: u64,
    /// The file's size: a group must end within it.
    capacity: u64,
    salt: u64,
}

/// The commit log of one folder. See the module doc.
#[derive(Debug)]
pub(crate) struct CommitLog {
    dir: PathBuf,
    options: LogOptions,
    io: Io,
    /// Segments in seq order; the last is `current`'s.
    segments: Vec<Segment>,
    current: Option<Current>,
    /// The seq the next group must start with; `None` until the log holds a segment.
    next_seq: Option<u64>,
    group: GroupBuilder,
    /// The message of the failure that stopped the log.
    failed: Option<String>,
    spares: Arc<Spares>,
    preparer: Option<JoinHandle<()>>,
    stats: LogStats,
    /// What `open` skipped.
    skipped: Vec<Skipped>,
    _lock: File,
}

impl CommitLog {
    /// Opens (or creates) the log in `dir`: checks every segment, returns every record in seq order and
    /// positions the writer after the last one.
    ///
    /// # Errors
    ///
    /// [`LogError::Corrupted`] for damage (see the module doc for what is a torn tail instead),
    /// [`LogError::UnsupportedVersion`], [`LogError::Locked`], [`LogError::Refused`] for bad options,
    /// [`LogError::Io`].
    pub(crate) fn open(
        dir: impl AsRef<Path>,
        options: LogOptions,
    ) -> Result<(CommitLog, Vec<Record>), LogError> {
        let dir = dir.as_ref().to_path_buf();
        let min = (SEGMENT_HEADER + GROUP_HEADER + ALIGN) as u64;
        if options.segment_size < min
            || !options.segment_size.is_multiple_of(ALIGN as u64)
            || options.segment_size > MAX_CAPACITY
        {
            return Err(LogError::Refused {
                detail: format!(
                    "segment_size {} must be a multiple of {ALIGN}, at least {min} and at most {MAX_CAPACITY}",
                    options.segment_size
                ),
            });
        }
        let io = options.io();
        std::fs::create_dir_all(&dir)
            .map_err(|e| LogError::io(format!("cannot create the folder {}", dir.display()), e))?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| LogError::io(format!("cannot open {}", lock_path.display()), e))?;
        match lock_waiting(&lock) {
            Ok(true) => {}
            Ok(false) => return Err(LogError::Locked { dir }),
            Err(e) => return Err(LogError::io(format!("cannot lock {}", lock_path.display()), e)),
        }
        // The folder's entries (a previous instance's renames, whose folder sync may have failed) and the
        // folder itself must be durable before any record in it is relied on.
        let sync_dir = |d: &Path| {
            io.sync_dir(Site::Open, d)
                .map_err(|e| LogError::io(format!("cannot sync the folder {}", d.display()), e))
        };
        sync_dir(&dir)?;
        if let Some(parent) = dir.parent() {
            sync_dir(if parent.as_os_str().is_empty() { Path::new(".") } else { parent })?;
        }

        let listing = list(&dir)?;
        let mut removed = false;
        let mut ready = Vec::new();
        for (path, _, tmp) in &listing.spares {
            // An unfinished preparation, a spare of another size, or more spares than wanted: delete.
            let keep = !tmp
                && ready.len() < options.max_spares.max(1)
                && std::fs::metadata(path).is_ok_and(|m| m.len() == options.segment_size);
            if keep {
                ready.push(path.clone());
            } else {
                std::fs::remove_file(path)
                    .map_err(|e| LogError::io(format!("cannot remove the spare {}", path.display()), e))?;
                removed = true;
            }
        }
        if removed {
            sync_dir(&dir)?;
        }
        let next_id = listing.spares.iter().map(|(_, id, _)| id + 1).max().unwrap_or(0);

        let mut records = Vec::new();
        let mut skipped = Vec::new();
        let mut segments = Vec::new();
        let mut current = None;
        // Where the previous segment's records end, and why reading stopped there.
        let mut prev: Option<End> = None;
        for (i, (name_seq, path)) in listing.segments.iter().enumerate() {
            let last = i + 1 == listing.segments.len();
            // A prefix of segments whose records all precede `read_from` is history: listed, not read.
            if prev.is_none() && !last && listing.segments[i + 1].0 <= options.read_from.saturating_add(1) {
                let len = std::fs::metadata(path)
                    .map_err(|e| LogError::io(format!("cannot read the size of {}", path.display()), e))?
                    .len();
                segments.push(Segment { first_seq: *name_seq, path: path.clone(), len });
                continue;
            }
            let (file, bytes) = read_segment(&io, path, last)?;
            let mut push = |seq, payload: &[u8]| records.push(Record { seq, payload: payload.to_vec() });
            let s = scan_segment(path, *name_seq, &bytes, options.applied_through, prev.as_ref(), &mut push)?;
            skipped.extend(s.skipped);
            segments.push(Segment { first_seq: *name_seq, path: path.clone(), len: bytes.len() as u64 });
            if last {
                current = Some(Current {
                    file,
                    path: path.clone(),
                    offset: s.end.at as u64,
                    capacity: bytes.len() as u64,
                    salt: s.salt,
                });
            }
            prev = Some(s.end);
        }
        let next_seq = prev.map(|e| e.next_seq);
        let spares = Spares::new(dir.clone(), options.segment_size, io.clone(), ready, next_id);
        let preparer = if options.background_spares {
            let s = spares.clone();
            let handle = std::thread::Builder::new()
                .name("graph-wal-spares".into())
                .spawn(move || s.run())
                .map_err(|e| LogError::io("cannot start the thread preparing spare segments", e))?;
            Some(handle)
        } else {
            None
        };
        let log = CommitLog {
            dir,
            options,
            io,
            segments,
            current,
            next_seq,
            group: GroupBuilder::default(),
            failed: None,
            spares,
            preparer,
            stats: LogStats::default(),
            skipped,
            _lock: lock,
        };
        Ok((log, records))
    }

    /// The damage `open` skipped (see [`LogOptions::applied_through`]).
    pub(crate) fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// The log's folder.
    #[cfg(test)]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The seq the next appended record must have (`None` for an empty new log: any seq but `u64::MAX`).
    /// Records staged but not committed count.
    pub(crate) fn next_seq(&self) -> Option<u64> {
        match self.group.count() {
            0 => self.next_seq,
            n => Some(self.group.first_seq() + u64::from(n)),
        }
    }

    /// The first seq of each segment, oldest first (the last is the current segment).
    #[cfg(test)]
    pub(crate) fn segment_seqs(&self) -> Vec<u64> {
        self.segments.iter().map(|s| s.first_seq).collect()
    }

    /// Counters since `open`.
    #[cfg(test)]
    pub(crate) fn stats(&self) -> LogStats {
        LogStats { spares_created: self.spares.created(), ..self.stats }
    }

    /// Stages a record; nothing is written until [`CommitLog::commit`].
    ///
    /// # Errors
    ///
    /// [`LogError::Sequence`] when `seq` is not [`CommitLog::next_seq`], [`LogError::Refused`] for
    /// `u64::MAX` or a group over 4 GiB (both leave the staged records as they were),
    /// [`LogError::Failed`].
    pub(crate) fn append(&mut self, seq: u64, payload: &[u8]) -> Result<(), LogError> {
        self.check_failed()?;
        if let Some(expected) = self.next_seq()
            && seq != expected
        {
            return Err(LogError::Sequence { expected, found: seq });
        }
        if seq == u64::MAX {
            return Err(LogError::Refused { detail: "seq u64::MAX is reserved".into() });
        }
        let body = self.group.body_len() + RECORD_HEADER + payload.len();
        if body > MAX_BODY || self.group.count() == u32::MAX {
            return Err(LogError::Refused {
                detail: format!("a commit group is limited to {MAX_BODY} bytes; this record makes it {body}"),
            });
        }
        if self.group.count() == 0 {
            self.group.begin(seq);
        }
        self.group.push(payload);
        Ok(())
    }

    /// Writes the staged records with one positioned write and one `fdatasync` (moving to a new segment
    /// first when they do not fit), and returns once they are durable. Nothing staged: nothing done.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`], after which the log is failed: the records may or may not be found by the next
    /// `open`. [`LogError::Failed`].
    pub(crate) fn commit(&mut self) -> Result<(), LogError> {
        self.check_failed()?;
        let count = self.group.count();
        if count == 0 {
            return Ok(());
        }
        let first = self.group.first_seq();
        let frame_len = self.group.frame_len() as u64;
        let fits = self.current.as_ref().is_some_and(|c| c.offset + frame_len <= c.capacity);
        let written = if fits { self.write_in_current() } else { self.rotate() };
        if let Err(e) = written {
            return Err(self.fail(e));
        }
        self.next_seq = Some(first + u64::from(count));
        self.group.begin(0);
        self.stats.commits += 1;
        Ok(())
    }

    fn write_in_current(&mut self) -> Result<(), LogError> {
        let cur = self.current.as_mut().expect("the caller checked the group fits");
        let (first, count) = (self.group.first_seq(), self.group.count());
        let frame = self.group.finish(cur.salt);
        let written = self
            .io
            .write_at(Site::Commit, &cur.file, frame, cur.offset)
            .and_then(|()| self.io.sync_data(Site::Commit, &cur.file));
        if let Err(e) = written {
            undo(&self.io, &cur.file, cur.offset);
            return Err(LogError::io(
                format!(
                    "cannot write seqs {first}..={} at byte {} of {}",
                    first + u64::from(count) - 1,
                    cur.offset,
                    cur.path.display()
                ),
                e,
            ));
        }
        cur.offset += frame.len() as u64;
        Ok(())
    }

    /// Starts segment `wal-<first staged seq>.log` with the staged group in it.
    fn rotate(&mut self) -> Result<(), LogError> {
        let first = self.group.first_seq();
        let need = (SEGMENT_HEADER + self.group.frame_len()) as u64;
        let path = self.dir.join(segment_name(first));
        let (from, file, capacity) = if need <= self.options.segment_size {
            let (from, waited) = self
                .spares
                .take(self.options.background_spares)
                .map_err(|e| LogError::io("cannot prepare a spare segment", e))?;
            self.stats.rotation_waits += u64::from(waited);
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&from)
                .map_err(|e| LogError::io(format!("cannot open the spare {}", from.display()), e))?;
            let capacity = file
                .metadata()
                .map_err(|e| LogError::io(format!("cannot read the size of {}", from.display()), e))?
                .len();
            (from, file, capacity)
        } else {
            // A group larger than a segment gets a segment of its own, sized to it. It is never appended to
            // (the next group does not fit), so not preallocating it costs this one commit a metadata sync.
            let from = self.dir.join(spares::spare_tmp_name(self.spares.alloc_id()));
            let file = self
                .io
                .create(Site::Rotate, &from)
                .map_err(|e| LogError::io(format!("cannot create {}", from.display()), e))?;
            (from, file, need)
        };
        let salt = new_salt();
        let mut buf = Vec::with_capacity(need as usize);
        let header = SegmentHeader { first_seq: first, salt, capacity: Some(capacity) };
        buf.extend_from_slice(&encode_segment_header(header));
        buf.extend_from_slice(self.group.finish(salt));
        let started = (|| {
            self.io.write_at(Site::Rotate, &file, &buf, 0)?;
            self.io.sync_data(Site::Rotate, &file)?;
            // `path` exists already only if the current segment is empty and starts at `first` (a
            // segment a crash left without records, with a group too large for it): replacing it loses
            // nothing.
            self.io.rename(Site::Rotate, &from, &path)?;
            self.io.sync_dir(Site::Rotate, &self.dir)
        })();
        if let Err(e) = started {
            undo(&self.io, &file, SEGMENT_HEADER as u64);
            return Err(LogError::io(format!("cannot start the segment {}", path.display()), e));
        }
        if self.segments.last().is_some_and(|s| s.first_seq == first) {
            self.segments.pop();
        }
        self.segments.push(Segment { first_seq: first, path: path.clone(), len: capacity });
        self.current = Some(Current { file, path, offset: need, capacity, salt });
        self.stats.rotations += 1;
        Ok(())
    }

    /// The first seq the log holds (`None`: no segment yet).
    pub(crate) fn first_seq(&self) -> Option<u64> {
        self.segments.first().map(|s| s.first_seq)
    }

    /// Every record the log holds, oldest first, a segment at a time: each segment is read again and
    /// checked as `open` checks the segments it reads, except that no damage is skipped (an error ends
    /// the iteration).
    pub(crate) fn history(&self) -> History {
        History::new(self, self.segments.len())
    }

    /// [`CommitLog::history`] without the current segment, which commits go on writing: the others
    /// never change, so they can be read without holding the log (a segment retired meanwhile is an
    /// I/O error of its read).
    pub(crate) fn closed_history(&self) -> History {
        History::new(self, self.segments.len().saturating_sub(1))
    }

    /// Removes the segments whose records all have seq ≤ `seq`, oldest first, while the log's segments
    /// take more than `keep_bytes`, recycling up to `max_spares` of them as spares. The current segment
    /// is never retired. Returns how many were.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] (the log is then failed), [`LogError::Failed`].
    pub(crate) fn retire_through(&mut self, seq: u64, keep_bytes: u64) -> Result<usize, LogError> {
        self.check_failed()?;
        let mut retired = 0;
        let mut bytes: u64 = self.segments.iter().map(|s| s.len).sum();
        // Segment 0 holds seqs up to segment 1's first seq - 1.
        while self.segments.len() > 1
            && self.segments[1].first_seq <= seq.saturating_add(1)
            && bytes > keep_bytes
        {
            bytes -= self.segments[0].len;
            self.retire_oldest()?;
            retired += 1;
        }
        Ok(retired)
    }

    /// Retires every segment, the current one included, and forgets the seq: the next append may start
    /// at any seq. For when the index durably holds everything the log holds and more (its commits went
    /// on after a log write failed), so the log must continue from the index's seq.
    ///
    /// # Errors
    ///
    /// [`LogError::Refused`] with records staged; [`LogError::Io`] (the log is then failed),
    /// [`LogError::Failed`].
    pub(crate) fn restart(&mut self) -> Result<(), LogError> {
        self.check_failed()?;
        if self.group.count() > 0 {
            return Err(LogError::Refused { detail: "records are staged".into() });
        }
        self.current = None;
        while !self.segments.is_empty() {
            self.retire_oldest()?;
        }
        self.next_seq = None;
        Ok(())
    }

    /// Removes (or recycles) the oldest segment.
    fn retire_oldest(&mut self) -> Result<(), LogError> {
        let (path, len) = (self.segments[0].path.clone(), self.segments[0].len);
        let recycle = len == self.options.segment_size && self.spares.ready_count() < self.options.max_spares;
        let done = if recycle {
            let to = self.dir.join(spare_name(self.spares.alloc_id()));
            self.io.rename(Site::Retire, &path, &to).map(|()| Some(to))
        } else {
            self.io.remove(Site::Retire, &path).map(|()| None)
        }
        // One folder sync per segment: retired segments must disappear oldest first, or a crash could
        // leave a hole between the remaining ones.
        .and_then(|to| self.io.sync_dir(Site::Retire, &self.dir).map(|()| to));
        match done {
            Ok(Some(to)) => {
                self.spares.add_ready(to);
                self.stats.recycled += 1;
            }
            Ok(None) => self.stats.deleted += 1,
            Err(e) => {
                let e = LogError::io(format!("cannot retire the segment {}", path.display()), e);
                return Err(self.fail(e));
            }
        }
        self.segments.remove(0);
        Ok(())
    }

    fn check_failed(&self) -> Result<(), LogError> {
        match &self.failed {
            None => Ok(()),
            Some(cause) => Err(LogError::Failed { dir: self.dir.clone(), cause: cause.clone() }),
        }
    }

    /// Records `e` as the failure that stops the log, and returns it.
    fn fail(&mut self, e: LogError) -> LogError {
        self.failed = Some(e.to_string());
        e
    }
}

impl Drop for CommitLog {
    fn drop(&mut self) {
        // Join, so the folder is quiet (no spare half-written) once the log is gone and can be reopened.
        self.spares.stop();
        if let Some(h) = self.preparer.take() {
            let _ = h.join();
        }
    }
}

/// After a failed commit: zero the header of the group being written, so that a reopen reading the page
/// cache cannot find it (see the module doc). Unsynced and best effort: the log is failing anyway.
fn undo(io: &Io, file: &File, offset: u64) {
    let _ = io.write_at(Site::Undo, file, &[0; GROUP_HEADER], offset);
}

/// `wal-<seq, 20 digits>.log`.
fn segment_name(first_seq: u64) -> String {
    format!("wal-{first_seq:020}.log")
}

fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The log's files in a folder.
struct Listing {
    /// By first seq.
    segments: Vec<(u64, PathBuf)>,
    /// (path, id, unfinished), by id.
    spares: Vec<(PathBuf, u64, bool)>,
}

fn list(dir: &Path) -> Result<Listing, LogError> {
    let err = |e| LogError::io(format!("cannot list {}", dir.display()), e);
    let mut listing = Listing { segments: Vec::new(), spares: Vec::new() };
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(seq) = parse_segment_name(name) {
            listing.segments.push((seq, entry.path()));
        } else if let Some((id, tmp)) = parse_spare_name(name) {
            listing.spares.push((entry.path(), id, tmp));
        }
    }
    listing.segments.sort_unstable_by_key(|s| s.0);
    listing.spares.sort_unstable_by_key(|s| s.1);
    Ok(listing)
}

/// Opens a segment and reads it whole. The last one is opened for writing and synced first: a write-back
/// error left by an earlier instance is reported here, before its bytes are trusted.
fn read_segment(io: &Io, path: &Path, last: bool) -> Result<(File, Vec<u8>), LogError> {
    let err = |what: &str, e| LogError::io(format!("cannot {what} {}", path.display()), e);
    let mut file = OpenOptions::new().read(true).write(last).open(path).map_err(|e| err("open", e))?;
    if last {
        io.sync_data(Site::Open, &file).map_err(|e| err("sync", e))?;
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| err("read", e))?;
    Ok((file, bytes))
}

/// A salt no earlier incarnation of a file is likely to have had: std's per-process random hash keys
/// over the time, the process and a counter.
fn new_salt() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// The records of a log's segments, read again one segment at a time (see [`CommitLog::history`]).
pub(crate) struct History {
    io: Io,
    segments: std::vec::IntoIter<(u64, PathBuf)>,
    prev: Option<End>,
    failed: bool,
    last: Option<u64>,
}

impl History {
    fn new(log: &CommitLog, count: usize) -> History {
        let segments: Vec<_> = log.segments[..count].iter().map(|s| (s.first_seq, s.path.clone())).collect();
        History { io: log.io.clone(), segments: segments.into_iter(), prev: None, failed: false, last: None }
    }

    /// The first seq of the segment the last `next` read (or failed to read).
    pub(crate) fn last_read(&self) -> Option<u64> {
        self.last
    }
}

impl Iterator for History {
    type Item = Result<Vec<Record>, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let (first_seq, path) = self.segments.next()?;
        self.last = Some(first_seq);
        let read = (|| {
            let (_, bytes) = read_segment(&self.io, &path, false)?;
            let mut records = Vec::new();
            let mut push = |seq, payload: &[u8]| records.push(Record { seq, payload: payload.to_vec() });
            let s = scan_segment(&path, first_seq, &bytes, None, self.prev.as_ref(), &mut push)?;
            self.prev = Some(s.end);
            Ok(records)
        })();
        self.failed = read.is_err();
        Some(read)
    }
}

/// Where a segment's records end: the file, the byte, why reading stopped there, and the seq the next
/// record must have.
#[derive(Debug, Clone)]
struct End {
    file: PathBuf,
    at: usize,
    why: &'static str,
    next_seq: u64,
}

/// What [`scan_segment`] found.
struct Scanned {
    salt: u64,
    end: End,
    skipped: Vec<Skipped>,
}

/// Checks one segment's bytes (`path` named `wal-<name_seq>.log`; `prev`: where the segment before it
/// ended, when it was read) and hands every record to `record`, in seq order. Damage wholly in records
/// up to `applied_through` is skipped and reported in [`Scanned::skipped`]; any other is refused.
fn scan_segment(
    path: &Path,
    name_seq: u64,
    bytes: &[u8],
    applied_through: Option<u64>,
    prev: Option<&End>,
    record: &mut dyn FnMut(u64, &[u8]),
) -> Result<Scanned, LogError> {
    let corrupted = |offset: usize, detail: String| LogError::Corrupted {
        file: path.to_path_buf(),
        offset: offset as u64,
        detail,
    };
    let header = decode_segment_header(bytes).map_err(|e| match e {
        HeaderError::Damaged(d) => corrupted(0, d.to_owned()),
        HeaderError::Version(found) => LogError::UnsupportedVersion {
            file: path.to_path_buf(),
            found,
            supported: format::FORMAT_VERSION,
        },
    })?;
    if let Some(capacity) = header.capacity
        && capacity != bytes.len() as u64
    {
        return Err(corrupted(
            bytes.len().min(capacity as usize),
            format!(
                "the segment is {} bytes, but was {capacity} when it became a segment: it was cut short or \
                 extended, and the commits it held past this byte may be lost",
                bytes.len()
            ),
        ));
    }
    if header.first_seq != name_seq {
        return Err(corrupted(
            0,
            format!("the header's first seq is {}, the file name's {name_seq}", header.first_seq),
        ));
    }
    if let Some(prev) = prev
        && header.first_seq != prev.next_seq
    {
        let expected = prev.next_seq;
        return Err(if header.first_seq > expected {
            LogError::Corrupted {
                file: prev.file.clone(),
                offset: prev.at as u64,
                detail: format!(
                    "seqs {expected}..{} are missing: here {}, and the next segment {} starts at seq {}",
                    header.first_seq,
                    prev.why,
                    path.display(),
                    header.first_seq
                ),
            }
        } else {
            corrupted(
                0,
                format!(
                    "the segment starts at seq {}, but the previous one already holds seqs up to {}",
                    header.first_seq,
                    expected - 1
                ),
            )
        });
    }
    let seed = salt_seed(header.salt);
    let mut skipped = Vec::new();
    let mut at = SEGMENT_HEADER;
    let mut seq = header.first_seq;
    let why = loop {
        let why = match parse_group(bytes, at, seed) {
            Ok(g) if g.first_seq == seq => {
                let Some(next) = seq.checked_add(u64::from(g.count)).filter(|&n| n < u64::MAX) else {
                    return Err(corrupted(at, "the group's seqs run past the largest seq".into()));
                };
                for (r, seq) in g.payloads.iter().zip(seq..) {
                    record(seq, &bytes[r.clone()]);
                }
                seq = next;
                at = g.next;
                continue;
            }
            // Reported by the search below, which finds this very group.
            Ok(_) => "a group of another seq",
            Err(why) => why,
        };
        // Unreadable bytes followed by a valid group of a later seq, all of whose seqs the index holds
        // durably: not needed to recover. Skipped, and reported.
        let skip = applied_through.and_then(|applied| {
            find_valid_group(bytes, at, seed)
                .filter(|(_, g)| g.first_seq > seq && g.first_seq <= applied.saturating_add(1))
        });
        let Some((found_at, g)) = skip else { break why };
        tracing::warn!(
            file = %path.display(),
            offset = at,
            "commit log: bytes holding commit groups {seq}..{} are damaged ({why}); the index holds them \
             durably, so they are not needed and are skipped",
            g.first_seq
        );
        skipped.push(Skipped { file: path.to_path_buf(), offset: at as u64, seqs: seq..g.first_seq, why });
        (at, seq) = (found_at, g.first_seq);
    };
    // Nothing valid may follow where reading stopped: if anything does, the bytes here are damage, not the
    // end of what was written.
    if let Some((found_at, g)) = find_valid_group(bytes, at, seed) {
        let detail = if found_at == at {
            format!("the group here starts at seq {} where seq {seq} was expected", g.first_seq)
        } else {
            format!(
                "the group of seq {seq} expected here is unreadable ({why}), but a valid group of seq {} follows \
                 at byte {found_at}",
                g.first_seq
            )
        };
        return Err(corrupted(at, detail));
    }
    Ok(Scanned { salt: header.salt, end: End { file: path.to_path_buf(), at, why, next_seq: seq }, skipped })
}
