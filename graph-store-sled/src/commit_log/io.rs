//! Every write-side file operation of the log goes through [`Io`], so unit tests can make a chosen call
//! fail (or write only part of its buffer) and check what the log does about it. Outside tests the seam
//! is a zero-sized pass-through.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Which step of the log an operation belongs to (fault rules name one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Site {
    /// Writing a group into the current segment, and its `fdatasync`.
    Commit,
    /// Moving to a new segment: its header and first group, their sync, the rename, the folder sync.
    Rotate,
    /// Removing or recycling retired segments.
    Retire,
    /// Making a zero-filled spare segment.
    Spare,
    /// Zeroing the header of a group whose commit failed.
    Undo,
    /// `open`: syncing the folder and the last segment.
    Open,
    /// Writing the manifest.
    Manifest,
    /// Finishing sled's `conf` when the store opens (`store::sled`), through [`Io::replace`].
    SledConf,
}

/// The kind of operation (fault rules name one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Creating (or truncating) a file.
    Create,
    /// A positioned write.
    Write,
    /// `fdatasync`.
    SyncData,
    /// `fsync`.
    SyncAll,
    /// A rename.
    Rename,
    /// Removing a file.
    Remove,
    /// Syncing a folder.
    SyncDir,
}

/// The file operations of the log, with the fault seam of tests.
#[derive(Debug, Clone, Default)]
pub(crate) struct Io {
    #[cfg(test)]
    pub(crate) faults: Option<std::sync::Arc<Faults>>,
}

impl Io {
    /// Creates (or truncates) a file for writing and reading.
    pub(super) fn create(&self, site: Site, path: &Path) -> io::Result<File> {
        self.check(site, Op::Create, 0)?;
        OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)
    }

    /// Writes all of `buf` at `offset`.
    pub(super) fn write_at(&self, site: Site, file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
        if let Some(written) = self.check(site, Op::Write, buf.len())? {
            // A torn write: part of the buffer reached the file, then the call failed.
            file.write_all_at(&buf[..written], offset)?;
            return Err(injected());
        }
        file.write_all_at(buf, offset)
    }

    /// `fdatasync`.
    pub(super) fn sync_data(&self, site: Site, file: &File) -> io::Result<()> {
        self.check(site, Op::SyncData, 0)?;
        file.sync_data()
    }

    /// `fsync`.
    pub(super) fn sync_all(&self, site: Site, file: &File) -> io::Result<()> {
        self.check(site, Op::SyncAll, 0)?;
        file.sync_all()
    }

    /// Renames (replacing `to` if it exists).
    pub(super) fn rename(&self, site: Site, from: &Path, to: &Path) -> io::Result<()> {
        self.check(site, Op::Rename, 0)?;
        std::fs::rename(from, to)
    }

    /// Removes a file.
    pub(super) fn remove(&self, site: Site, path: &Path) -> io::Result<()> {
        self.check(site, Op::Remove, 0)?;
        std::fs::remove_file(path)
    }

    /// Puts `bytes` at `path` whole or not at all: written to `tmp` (in the same folder), synced,
    /// renamed over `path`, the folder synced. A crash leaves the old file or the new one, and at worst
    /// a stray `tmp`.
    pub(crate) fn replace(&self, site: Site, tmp: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let file = self.create(site, tmp)?;
        self.write_at(site, &file, bytes, 0)?;
        self.sync_data(site, &file)?;
        self.rename(site, tmp, path)?;
        self.sync_dir(site, path.parent().unwrap_or(Path::new(".")))
    }

    /// Makes the folder's entries (creations, renames, removals) durable.
    pub(super) fn sync_dir(&self, site: Site, dir: &Path) -> io::Result<()> {
        self.check(site, Op::SyncDir, 0)?;
        File::open(dir)?.sync_all()
    }

    /// `Ok(None)`: go ahead. `Ok(Some(n))`: write only `n` bytes, then fail. `Err`: fail now.
    #[cfg(test)]
    fn check(&self, site: Site, op: Op, len: usize) -> io::Result<Option<usize>> {
        match self.faults.as_ref().and_then(|f| f.hit(site, op)) {
            None => Ok(None),
            Some(Action::Fail(errno)) => Err(io::Error::from_raw_os_error(errno)),
            Some(Action::Partial(n)) => Ok(Some(n.min(len))),
        }
    }

    #[cfg(not(test))]
    #[inline(always)]
    fn check(&self, _site: Site, _op: Op, _len: usize) -> io::Result<Option<usize>> {
        Ok(None)
    }
}

/// The error of a torn write once its part is written: `EIO`.
fn injected() -> io::Error {
    io::Error::from_raw_os_error(5)
}

/// What a fault rule does to the call it catches.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Fail with this OS error number (28 = ENOSPC, 5 = EIO), writing nothing.
    Fail(i32),
    /// Write only the first `n` bytes, then fail with EIO.
    Partial(usize),
}

/// Armed fault rules, shared by a test and the log's [`Io`].
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Faults {
    rules: std::sync::Mutex<Vec<Rule>>,
}

#[cfg(test)]
#[derive(Debug)]
struct Rule {
    site: Site,
    op: Op,
    skip: u32,
    action: Action,
}

#[cfg(test)]
impl Faults {
    /// The call at `site` of kind `op` after the next `skip` such calls does `action` (once).
    pub(crate) fn arm(&self, site: Site, op: Op, skip: u32, action: Action) {
        self.rules.lock().unwrap_or_else(|e| e.into_inner()).push(Rule { site, op, skip, action });
    }

    /// Rules armed but not yet triggered.
    pub(crate) fn pending(&self) -> usize {
        self.rules.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn hit(&self, site: Site, op: Op) -> Option<Action> {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        let i = rules.iter().position(|r| r.site == site && r.op == op)?;
        if rules[i].skip > 0 {
            rules[i].skip -= 1;
            return None;
        }
        Some(rules.remove(i).action)
    }
}
