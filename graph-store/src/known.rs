//! The run rows a store last committed, kept so that its next commit of a run need not read the row
//! first.
//!
//! Each SQL store keeps its own and decides when a kept row is still the stored one:
//! - PostgreSQL and MySQL/MariaDB: every write of a row's bytes or pending flag sets a new version
//!   (commits, `set_status`; a claim writes only the graph column), so a row kept at version `v` is the
//!   stored row whenever the stored version is `v`, and the writes built on it check that version (or
//!   the bytes) in the same statement that writes (PostgreSQL's commit groups in one statement, MySQL's
//!   commits of a known row).
//! - SQLite: a store writes through one connection, in transactions that hold the database's write
//!   lock; the rows it keeps are forgotten when another connection (another store on the file, in this
//!   process or another) has committed since its last transaction (`PRAGMA data_version`), and when a
//!   transaction rolls back.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::RunInfo;

/// The run rows a store last committed, by run, shared by its clones.
#[derive(Default)]
pub struct KnownRows(Mutex<HashMap<String, Known>>);

/// A run row as a store last wrote it: its bytes and what they decode to.
#[derive(Clone)]
pub struct Known {
    /// The row's bytes (`record::encode_run`; PostgreSQL's groups compare the stored row with them).
    pub bytes: Vec<u8>,
    /// What they decode to.
    pub info: RunInfo,
}

impl KnownRows {
    /// At most this many rows are kept; past it the map starts again empty (a run whose row is not
    /// known is committed the way that reads the row). The SQLite writer bounds the runs it knows to
    /// have no pending step by it too.
    pub const MAX: usize = 16_384;

    fn map(&self) -> MutexGuard<'_, HashMap<String, Known>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `bytes`, the row of `info.run_id` the store just committed; a run that ended is forgotten
    /// (it commits again only if resumed, and then its row is read).
    pub fn remember(&self, bytes: Vec<u8>, info: RunInfo) {
        let mut map = self.map();
        if info.status.has_ended() {
            map.remove(&info.run_id);
            return;
        }
        if map.len() >= Self::MAX && !map.contains_key(&info.run_id) {
            map.clear();
        }
        map.insert(info.run_id.clone(), Known { bytes, info });
    }

    /// The row of `run` kept at `version`, if that is the one kept.
    pub fn at(&self, run: &str, version: u64) -> Option<Known> {
        self.map().get(run).filter(|k| k.info.version == version).cloned()
    }

    /// The row of `run` kept, whatever its version.
    pub fn info(&self, run: &str) -> Option<RunInfo> {
        self.map().get(run).map(|k| k.info.clone())
    }

    /// Forgets the row of `run` (it may have changed).
    pub fn forget(&self, run: &str) {
        self.map().remove(run);
    }

    /// Forgets every row.
    pub fn clear(&self) {
        self.map().clear();
    }
}
