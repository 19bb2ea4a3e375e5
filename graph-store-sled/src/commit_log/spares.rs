//! Spare segments: files of exactly the segment size, ready to become the next segment, so that a
//! rotation only rewrites a header and renames a file instead of writing a whole segment of zeros while
//! a commit waits.
//!
//! A spare is either a retired segment renamed `spare-<id>.wal` (recycled: its stale groups are
//! unreadable under the new salt the next header gets) or a file the preparer thread filled with zeros.
//! It is written under `spare-<id>.tmp`, synced, and renamed, so a spare file is always complete; `open`
//! deletes the `.tmp` leftovers of an interrupted preparation.

use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::io::{Io, Site};

/// Zeros are written in pieces of this size, checking in between whether the log was dropped.
const ZERO_CHUNK: usize = 1 << 20;

pub(super) fn spare_name(id: u64) -> String {
    format!("spare-{id:020}.wal")
}

pub(super) fn spare_tmp_name(id: u64) -> String {
    format!("spare-{id:020}.tmp")
}

/// The spares of one log, shared by the log and its preparer thread.
#[derive(Debug)]
pub(super) struct Spares {
    dir: PathBuf,
    size: u64,
    io: Io,
    state: Mutex<State>,
    changed: Condvar,
    /// Set when the log is dropped: an unfinished preparation stops and removes its file.
    stopping: AtomicBool,
}

#[derive(Debug)]
struct State {
    /// Spare files ready to use, oldest first.
    ready: VecDeque<PathBuf>,
    /// Why the last preparation failed; taken by the rotation that needed it.
    error: Option<io::Error>,
    /// The preparer thread ended (it only does when stopped, or if it panicked).
    gone: bool,
    next_id: u64,
    created: u64,
}

impl State {
    /// None is ready, and the last attempt did not fail (a failure waits for the rotation to see it).
    fn needs_spare(&self) -> bool {
        self.ready.is_empty() && self.error.is_none()
    }
}

impl Spares {
    pub(super) fn new(dir: PathBuf, size: u64, io: Io, ready: Vec<PathBuf>, next_id: u64) -> Arc<Self> {
        Arc::new(Spares {
            dir,
            size,
            io,
            state: Mutex::new(State { ready: ready.into(), error: None, gone: false, next_id, created: 0 }),
            changed: Condvar::new(),
            stopping: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh file id (spare names never repeat within a folder).
    pub(super) fn alloc_id(&self) -> u64 {
        let mut s = self.lock();
        s.next_id += 1;
        s.next_id - 1
    }

    /// Adds a recycled segment, already renamed to a spare name.
    pub(super) fn add_ready(&self, path: PathBuf) {
        self.lock().ready.push_back(path);
        self.changed.notify_all();
    }

    pub(super) fn ready_count(&self) -> usize {
        self.lock().ready.len()
    }

    /// Spares the log zero-filled so far.
    #[cfg(test)]
    pub(super) fn created(&self) -> u64 {
        self.lock().created
    }

    /// A spare for the next segment, and whether the caller had to wait for it. With `background`, waits
    /// for the preparer thread when none is ready (and reports its failure); without, makes one here.
    pub(super) fn take(&self, background: bool) -> io::Result<(PathBuf, bool)> {
        let mut waited = false;
        let mut s = self.lock();
        loop {
            if let Some(p) = s.ready.pop_front() {
                if s.ready.is_empty() {
                    // An old failure is stale now: let the thread try again for the next rotation.
                    s.error = None;
                    self.changed.notify_all();
                }
                return Ok((p, waited));
            }
            if !background {
                drop(s);
                let id = self.alloc_id();
                let p = self.make(id)?;
                self.lock().created += 1;
                return Ok((p, true));
            }
            if let Some(e) = s.error.take() {
                return Err(e);
            }
            if s.gone {
                return Err(io::Error::other("the thread preparing spare segments stopped"));
            }
            waited = true;
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Stops the preparer thread (an unfinished spare is removed).
    pub(super) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let _guard = self.lock();
        self.changed.notify_all();
    }

    /// The preparer thread: keeps one spare ready while there is none, until stopped.
    pub(super) fn run(self: Arc<Self>) {
        // Whatever ends the thread (a stop, or a panic), a rotation waiting for it must not wait forever.
        struct Gone<'a>(&'a Spares);
        impl Drop for Gone<'_> {
            fn drop(&mut self) {
                self.0.lock().gone = true;
                self.0.changed.notify_all();
            }
        }
        let _gone = Gone(&self);
        loop {
            let id = {
                let mut s = self.lock();
                while !self.stopping.load(Ordering::SeqCst) && !s.needs_spare() {
                    s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
                }
                if self.stopping.load(Ordering::SeqCst) {
                    return;
                }
                s.next_id += 1;
                s.next_id - 1
            };
            let made = self.make(id);
            let mut s = self.lock();
            match made {
                Ok(p) => {
                    s.ready.push_back(p);
                    s.created += 1;
                }
                Err(_) if self.stopping.load(Ordering::SeqCst) => return,
                Err(e) => s.error = Some(e),
            }
            self.changed.notify_all();
        }
    }

    /// Writes a spare of zeros: `spare-<id>.tmp`, `fsync` (its size changed), rename to
    /// `spare-<id>.wal`, folder sync. Zeros rather than `fallocate`: an unwritten extent would make the
    /// first write into it a metadata change, costing the commit a second device round trip.
    fn make(&self, id: u64) -> io::Result<PathBuf> {
        let tmp = self.dir.join(spare_tmp_name(id));
        let path = self.dir.join(spare_name(id));
        let result = (|| {
            let file = self.io.create(Site::Spare, &tmp)?;
            let zeros = vec![0u8; ZERO_CHUNK];
            let mut at = 0u64;
            while at < self.size {
                if self.stopping.load(Ordering::SeqCst) {
                    return Err(io::Error::other("the commit log was closed"));
                }
                let n = (self.size - at).min(ZERO_CHUNK as u64) as usize;
                self.io.write_at(Site::Spare, &file, &zeros[..n], at)?;
                at += n as u64;
            }
            self.io.sync_all(Site::Spare, &file)?;
            self.io.rename(Site::Spare, &tmp, &path)?;
            self.io.sync_dir(Site::Spare, &self.dir)
        })();
        if let Err(e) = result {
            // Best effort: `open` removes `.tmp` leftovers anyway.
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(path)
    }
}

/// Parses `spare-<20 digits>.wal` (a spare) or `spare-<20 digits>.tmp` (an unfinished one): its id, and
/// whether it is unfinished.
pub(super) fn parse_spare_name(name: &str) -> Option<(u64, bool)> {
    let rest = name.strip_prefix("spare-")?;
    let (digits, tmp) =
        if let Some(d) = rest.strip_suffix(".wal") { (d, false) } else { (rest.strip_suffix(".tmp")?, true) };
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, tmp))
}
