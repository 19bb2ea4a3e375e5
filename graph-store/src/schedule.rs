//! Schedules: durable, cron-like definitions that start runs (`Engine::schedule`), kept by the store one
//! row a name, changed only through [`crate::Store::schedule_op`]: read the row under the store's lock,
//! [`apply`] the operation (the rules, written here once), write it back when it changed.
//!
//! A schedule's firing starts exactly one run whatever the number of engines or workers firing it: the
//! run id is derived from the schedule's name and the fire time, and a run id is created once. The row
//! keeps the cursor (the next fire time not yet fired), moved forward under a version check, so
//! firings already made are not looked at again.

use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// What to do with firings missed while no process was there to make them (downtime, a long pause of
/// every worker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Missed {
    /// Make the firings that are at most a minute late; skip the older ones.
    #[default]
    Skip,
    /// Make one firing, the latest missed one, in place of all of them.
    CatchUpOne,
    /// Make every missed firing (at most 1,000 at a time), oldest first.
    CatchUpAll,
}

/// A schedule, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Its name: unique in the store, part of every run id it makes.
    pub name: String,
    /// The graph its runs are of (`Graph::fingerprint`): only that graph's engines and workers fire it.
    pub graph_fingerprint: String,
    /// The spec, as given (`"0 2 * * *"`, `"@every 15m"`).
    pub spec: String,
    /// Each run's input: the graph's state, as JSON.
    pub input: serde_json::Value,
    /// What to do with missed firings.
    pub missed: Missed,
    /// Paused schedules do not fire; resumed, they go on from the resume's time.
    pub paused: bool,
    /// The next fire time not yet made, ms since the Unix epoch.
    pub next_fire_ms: u64,
    /// When it was last written, ms since the Unix epoch.
    pub updated_ms: u64,
    /// +1 per write, from 1: the version check of [`ScheduleOp::Put`].
    pub version: u64,
}

/// A change to a schedule.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ScheduleOp {
    /// Writes the schedule (its `version` is set by the rule): when `expected_version` is given, only
    /// if the stored row is at that version (`0`: only if there is none).
    Put {
        /// The schedule.
        schedule: Box<Schedule>,
        /// The version the writer read.
        expected_version: Option<u64>,
    },
    /// Deletes it.
    Delete,
}

/// What a [`ScheduleOp`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ScheduleReply {
    /// Written, at this version.
    Written {
        /// The new version.
        version: u64,
    },
    /// The stored row is not at the expected version: nothing written; here it is (`None`: no row).
    Conflict(Option<Box<Schedule>>),
    /// Whether there was a schedule to delete.
    Deleted(bool),
}

/// The rule of [`crate::Store::schedule_op`]: the reply, and the row to write (`Some(None)`: delete it),
/// given the stored row.
pub fn apply(current: Option<&Schedule>, op: ScheduleOp) -> (ScheduleReply, Option<Option<Schedule>>) {
    match op {
        ScheduleOp::Put { mut schedule, expected_version } => {
            let found = current.map_or(0, |c| c.version);
            if expected_version.is_some_and(|v| v != found) {
                return (ScheduleReply::Conflict(current.cloned().map(Box::new)), None);
            }
            schedule.version = found + 1;
            (ScheduleReply::Written { version: schedule.version }, Some(Some(*schedule)))
        }
        ScheduleOp::Delete => match current {
            Some(_) => (ScheduleReply::Deleted(true), Some(None)),
            None => (ScheduleReply::Deleted(false), None),
        },
    }
}

const SCHEDULE_MAGIC: &[u8; 4] = b"GRSC";

/// The bytes a schedule is stored as (the checksummed envelope of [`crate::envelope`]).
pub fn encode(s: &Schedule) -> Vec<u8> {
    crate::envelope::seal(SCHEDULE_MAGIC, &serde_json::to_vec(s).expect("a schedule is plain data"))
}

/// Decodes a schedule.
///
/// # Errors
///
/// `Corrupted` for damaged bytes, `UnsupportedSchemaVersion` for another format.
pub fn decode(bytes: &[u8]) -> Result<Schedule, StoreError> {
    crate::envelope::unseal(SCHEDULE_MAGIC, bytes, "a schedule")
}

/// What a backend does with a schedule's row after [`apply_to_bytes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowWrite {
    /// Writes these bytes.
    Put(Vec<u8>),
    /// Deletes the row.
    Delete,
}

/// The whole of [`crate::Store::schedule_op`] for a backend that holds the row's bytes (`stored`) under
/// its lock: the reply, and what to do with the row (`None`: nothing).
///
/// # Errors
///
/// Damaged stored bytes.
pub fn apply_to_bytes(
    stored: Option<&[u8]>,
    op: ScheduleOp,
) -> Result<(ScheduleReply, Option<RowWrite>), StoreError> {
    let current = stored.map(decode).transpose()?;
    let (reply, write) = apply(current.as_ref(), op);
    let write = write.map(|row| match row {
        Some(s) => RowWrite::Put(encode(&s)),
        None => RowWrite::Delete,
    });
    Ok((reply, write))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(name: &str) -> Schedule {
        Schedule {
            name: name.into(),
            graph_fingerprint: "fp".into(),
            spec: "@every 1h".into(),
            input: serde_json::json!({}),
            missed: Missed::Skip,
            paused: false,
            next_fire_ms: 3_600_000,
            updated_ms: 0,
            version: 0,
        }
    }

    #[test]
    fn puts_are_checked_against_the_version_read() {
        let put =
            |expected| ScheduleOp::Put { schedule: Box::new(schedule("s")), expected_version: expected };
        let (reply, write) = apply(None, put(Some(0)));
        assert_eq!(reply, ScheduleReply::Written { version: 1 });
        let stored = write.unwrap().unwrap();
        assert!(matches!(apply(Some(&stored), put(Some(0))).0, ScheduleReply::Conflict(Some(_))));
        assert_eq!(apply(Some(&stored), put(Some(1))).0, ScheduleReply::Written { version: 2 });
        assert_eq!(apply(Some(&stored), put(None)).0, ScheduleReply::Written { version: 2 });
        assert_eq!(apply(Some(&stored), ScheduleOp::Delete), (ScheduleReply::Deleted(true), Some(None)));
        assert_eq!(apply(None, ScheduleOp::Delete), (ScheduleReply::Deleted(false), None));
        let bytes = encode(&stored);
        assert_eq!(decode(&bytes).unwrap(), stored);
    }
}
