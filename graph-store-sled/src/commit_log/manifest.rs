//! The manifest: a few `u64`s the store must find again after a crash, replaced atomically.
//!
//! File `manifest` (all little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `GRMF` |
//! | 4..8 | `u32` format version (1) |
//! | 8..12 | `u32` n, the number of fields (1..=64) |
//! | 12..16 | `u32` crc32c of bytes 0..12 and 16..end |
//! | 16.. | n × `u64`: field 0 is `checkpoint_seq`, the others are [`Manifest::extra`] |
//!
//! The store's extra fields: 1, the checkpoint before `checkpoint_seq` (the log's records after it are
//! replayed at open; [`Manifest::replay_from`]); 2, 1 when the log's records from seq 1 on are the whole
//! history of the index ([`Manifest::whole_history`]). A manifest without them (written by an earlier
//! build) reads as 0 and 0: every segment replayed, the history not whole.
//!
//! Every version keeps the first 16 bytes and the checksum's definition, so an unknown version is
//! recognised as such (not as damage). New fields go after the known ones without a version change:
//! a reader keeps the fields it does not know in `extra` and writes them back unchanged.
//!
//! Written as `manifest.tmp`, `fdatasync`ed, renamed over `manifest`, then the folder is fsynced: a
//! reader finds either the old manifest or the new one, never a mix. A `manifest.tmp` left by a crash
//! is never read, and the next write replaces it.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::LogError;
use super::io::{Io, Site};

/// The manifest's file name.
pub(crate) const MANIFEST_FILE: &str = "manifest";
const MANIFEST_TMP: &str = "manifest.tmp";
const MAGIC: &[u8; 4] = b"GRMF";
/// The manifest format this build writes and reads.
pub(crate) const MANIFEST_VERSION: u32 = 1;
const PREAMBLE: usize = 16;
const MAX_FIELDS: usize = 64;

/// The store's durable bookkeeping beside the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Manifest {
    /// The last commit seq the index is known to hold durably: the log's records up to it need no
    /// replay, and its segments up to it can be retired.
    pub(crate) checkpoint_seq: u64,
    /// Further fields (at most 63), kept in order; a later build names them.
    pub(crate) extra: Vec<u64>,
}

impl Manifest {
    /// Extra field 1: the log's records after this seq are replayed at open (the checkpoint before
    /// `checkpoint_seq`); older ones are history.
    pub(crate) fn replay_from(&self) -> u64 {
        self.extra.first().copied().unwrap_or(0)
    }

    /// Extra field 2: the log's records from seq 1 on are the index's whole history (the index was
    /// empty before seq 1, and every write to it since went through the log), so the index can be
    /// rebuilt from the log alone while the log still starts at seq 1.
    pub(crate) fn whole_history(&self) -> bool {
        self.extra.get(1) == Some(&1)
    }

    /// Sets [`Manifest::replay_from`].
    pub(crate) fn set_replay_from(&mut self, seq: u64) {
        self.set_extra(0, seq);
    }

    /// Sets [`Manifest::whole_history`].
    pub(crate) fn set_whole_history(&mut self, whole: bool) {
        self.set_extra(1, u64::from(whole));
    }

    fn set_extra(&mut self, i: usize, value: u64) {
        if self.extra.len() <= i {
            self.extra.resize(i + 1, 0);
        }
        self.extra[i] = value;
    }

    /// Reads `dir/manifest`. `Ok(None)`: there is none (a new store).
    ///
    /// # Errors
    ///
    /// [`LogError::Corrupted`] for damaged bytes, [`LogError::UnsupportedVersion`] for a valid manifest
    /// of another format, [`LogError::Io`] when it cannot be read.
    pub(crate) fn load(dir: &Path) -> Result<Option<Manifest>, LogError> {
        let path = dir.join(MANIFEST_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LogError::io(format!("cannot read {}", path.display()), e)),
        };
        Manifest::decode(path, &bytes).map(Some)
    }

    /// Reads a manifest's bytes (`path` names the file in errors).
    ///
    /// # Errors
    ///
    /// As [`Manifest::load`].
    pub(crate) fn decode(path: PathBuf, bytes: &[u8]) -> Result<Manifest, LogError> {
        let corrupted = |offset: u64, detail: &str| LogError::Corrupted {
            file: path.clone(),
            offset,
            detail: detail.into(),
        };
        if bytes.len() < PREAMBLE {
            return Err(corrupted(0, "the manifest is shorter than its header"));
        }
        if &bytes[0..4] != MAGIC {
            return Err(corrupted(0, "the manifest's magic is not GRMF"));
        }
        if checksum(bytes) != u32_at(bytes, 12) {
            return Err(corrupted(12, "the manifest's checksum does not match"));
        }
        let version = u32_at(bytes, 4);
        if version != MANIFEST_VERSION {
            return Err(LogError::UnsupportedVersion {
                file: path,
                found: version,
                supported: MANIFEST_VERSION,
            });
        }
        let n = u32_at(bytes, 8) as usize;
        if n == 0 || n > MAX_FIELDS || bytes.len() != PREAMBLE + 8 * n {
            return Err(corrupted(8, "the manifest's field count does not match its length"));
        }
        let mut fields =
            bytes[PREAMBLE..].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")));
        let checkpoint_seq = fields.next().expect("n >= 1");
        Ok(Manifest { checkpoint_seq, extra: fields.collect() })
    }

    /// Replaces `dir/manifest` atomically and durably.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] (the previous manifest is then still in place, or this one is: never a mix);
    /// [`LogError::Refused`] for more than 63 extra fields.
    pub(crate) fn store(&self, dir: &Path) -> Result<(), LogError> {
        self.store_with(dir, &Io::default())
    }

    pub(super) fn store_with(&self, dir: &Path, io: &Io) -> Result<(), LogError> {
        if self.extra.len() >= MAX_FIELDS {
            return Err(LogError::Refused {
                detail: format!(
                    "a manifest holds at most {} extra fields, not {}",
                    MAX_FIELDS - 1,
                    self.extra.len()
                ),
            });
        }
        let bytes = self.encode();
        let tmp = dir.join(MANIFEST_TMP);
        let path = dir.join(MANIFEST_FILE);
        io.replace(Site::Manifest, &tmp, &path, &bytes)
            .map_err(|e| LogError::io(format!("cannot write {}", path.display()), e))
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let n = 1 + self.extra.len();
        let mut b = Vec::with_capacity(PREAMBLE + 8 * n);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&MANIFEST_VERSION.to_le_bytes());
        b.extend_from_slice(&(n as u32).to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&self.checkpoint_seq.to_le_bytes());
        for f in &self.extra {
            b.extend_from_slice(&f.to_le_bytes());
        }
        let crc = checksum(&b);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        b
    }
}

/// crc32c of everything but the checksum field itself.
fn checksum(bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&bytes[0..12]), &bytes[PREAMBLE..])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
