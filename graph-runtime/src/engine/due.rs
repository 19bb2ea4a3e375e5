//! The timer index an engine keeps: the runs it knows to be due at a time, shared with the older
//! versions it serves (`versions.rs`), read by its timer service (`timers.rs`).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The due times an engine knows of, earliest first; an entry may be stale (the run was answered, or
/// waits for a later time): waking reads the run's status first.
#[derive(Default)]
pub(crate) struct Timers {
    pub(super) index: Mutex<Index>,
    /// Told when a time earlier than the service's next one is noted, and when a schedule changes.
    pub(super) changed: Notify,
}

#[derive(Default)]
pub(super) struct Index {
    /// Filled from the store (the runs parked before this engine started).
    pub(super) loaded: bool,
    pub(super) due: BTreeSet<(u64, Arc<str>)>,
}

impl Timers {
    /// Notes that `run` is due at `at_ms`.
    pub(super) fn note(&self, at_ms: u64, run: &Arc<str>) {
        let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let earliest = index.due.first().is_none_or(|(t, _)| at_ms < *t);
        index.due.insert((at_ms, run.clone()));
        drop(index);
        if earliest {
            self.changed.notify_one();
        }
    }

    /// Takes the entries due at `now_ms`, and the earliest time left.
    pub(super) fn take_due(&self, now_ms: u64) -> (Vec<Arc<str>>, Option<u64>) {
        let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let (mut due, mut seen) = (Vec::new(), std::collections::HashSet::new());
        while index.due.first().is_some_and(|(t, _)| *t <= now_ms) {
            let (_, run) = index.due.pop_first().expect("checked above");
            if seen.insert(run.clone()) {
                due.push(run);
            }
        }
        (due, index.due.first().map(|(t, _)| *t))
    }

    pub(super) fn is_loaded(&self) -> bool {
        self.index.lock().unwrap_or_else(|e| e.into_inner()).loaded
    }

    /// How many entries the index holds.
    pub(super) fn len(&self) -> usize {
        self.index.lock().unwrap_or_else(|e| e.into_inner()).due.len()
    }
}
