//! A checkpoint store written against `graph-store` alone, the way a backend outside this workspace
//! would be written: [`RowStore`] keeps *rows* (bytes under keys, as a key-value database or a table
//! would) and takes every decision from the contract: the commit rule ([`decide`]), the status rule
//! ([`decide_status`]), the effect journal's compare-and-set ([`decide_effect`]), the run row a write
//! leaves ([`RunInfo::after_commit`], [`RunInfo::after_status`]) and the byte form of every record
//! ([`graph_store::record`], [`graph_store::journal`], [`graph_store::events`]). Its tests are the
//! conformance suite, unchanged (`tests/conformance.rs`).
//!
//! Its "disk" is a [`Disk`]: ordered maps behind a lock, shared by the stores opened on it, so a test
//! can drop a store and open the same data again (a restart). A commit is a transaction: it reads the
//! facts, asks the rule, stages its writes (consulting the fail point after each, as the suite
//! requires) and applies them all at once, or nothing.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use graph_examples_custom_store::{Disk, RowStore};
//! use graph_store::{CommitOutcome, RunStatus, Store};
//!
//! let disk = Disk::default();
//! let store = RowStore::open(&disk);
//! let cp = graph_store::conformance::checkpoint("run-1", 0, 1);
//! let outcome = store.save_checkpoint(&cp, &[], &RunStatus::Running, 0).await.unwrap();
//! assert_eq!(outcome, CommitOutcome::Committed { version: 1 });
//! // Committed again, the same key: the rule says it happened.
//! let again = store.save_checkpoint(&cp, &[], &RunStatus::Running, 1).await.unwrap();
//! assert_eq!(again, CommitOutcome::AlreadyCommitted { version: 1 });
//! // Another store on the same disk (a restart) reads it back.
//! assert_eq!(RowStore::open(&disk).latest("run-1").await.unwrap(), Some(cp));
//! # }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use graph_store::commit::{CommitFacts, Verdict, decide, decide_status};
use graph_store::events::{Event, head_after};
use graph_store::journal::{decide_effect, decode_effect, decode_outbox, encode_effect, encode_outbox};
use graph_store::mailbox::{self, Mailbox, MailboxOp, MailboxReply};
use graph_store::record::{decode, decode_run_of, encode, encode_run};
use graph_store::schedule::{self, Schedule, ScheduleOp, ScheduleReply};
use graph_store::{
    Checkpoint, CheckpointMeta, CommitOutcome, EffectOutcome, EffectRecord, EffectState, FailPoint,
    OutboxRow, RunFilter, RunInfo, RunStatus, Store, StoreError,
};

/// The rows of a [`RowStore`], shared by every store opened on them.
#[derive(Clone, Default)]
pub struct Disk(Arc<Mutex<Tables>>);

impl std::fmt::Debug for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Disk").finish_non_exhaustive()
    }
}

/// The tables: every value is the contract's bytes of a record.
#[derive(Default)]
struct Tables {
    /// Run rows (`record::encode_run`), by run.
    runs: BTreeMap<String, Vec<u8>>,
    /// Checkpoints (`record::encode`), by (run, step).
    checkpoints: BTreeMap<(String, u64), Vec<u8>>,
    /// Every idempotency key committed (a prune keeps them).
    keys: BTreeSet<String>,
    /// Events (`events::encode`), by (run, seq).
    events: BTreeMap<(String, u64), Vec<u8>>,
    /// Pending steps, by run.
    pending: BTreeMap<String, Vec<u8>>,
    /// Effect entries (`journal::encode_effect`), by effect key.
    effects: BTreeMap<String, Vec<u8>>,
    /// Outbox rows: their key and bytes (`journal::encode_outbox`), by (run, step, emit order).
    outbox: BTreeMap<(String, u64, usize), (String, Vec<u8>)>,
    /// Mailboxes (`mailbox::encode`), by run.
    mailboxes: BTreeMap<String, Vec<u8>>,
    /// Schedules (`schedule::encode`), by name.
    schedules: BTreeMap<String, Vec<u8>>,
}

/// A store over a [`Disk`]. Clones share it.
#[derive(Clone, Debug)]
pub struct RowStore {
    disk: Disk,
    fail: FailPoint,
}

impl RowStore {
    /// A store over the rows of `disk`.
    pub fn open(disk: &Disk) -> Self {
        RowStore { disk: disk.clone(), fail: FailPoint::default() }
    }

    /// The fail point the conformance suite arms (with graph-store's `test-hooks`).
    pub fn fail_point(&self) -> &FailPoint {
        &self.fail
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        // Every write applies after its checks and fail points: a panic cannot leave half of one.
        self.disk.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The fail point after write `n` of a commit: the staged writes are dropped, nothing applied.
    fn wrote(&self, n: usize) -> Result<(), StoreError> {
        if self.fail.hit(n) { Err(FailPoint::error()) } else { Ok(()) }
    }
}

impl Tables {
    fn run(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        self.runs.get(run_id).map(|b| decode_run_of(run_id, None, b)).transpose()
    }

    fn append_events(&mut self, run_id: &str, events: &[Event]) {
        for e in events {
            self.events.insert((run_id.to_owned(), e.seq), graph_store::events::encode(e));
        }
    }
}

#[async_trait]
impl Store for RowStore {
    async fn save_checkpoint(
        &self,
        cp: &Checkpoint,
        events: &[Event],
        status: &RunStatus,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        let mut t = self.tables();
        let run: &str = &cp.run_id;
        // The facts, then the rule.
        let row = t.run(run)?;
        let key_seen = t.keys.contains(&cp.idempotency_key);
        let taken = t
            .checkpoints
            .get(&(run.to_owned(), cp.step))
            .map(|b| decode(run, cp.step, b))
            .transpose()?
            .map(|stored| stored.idempotency_key);
        let facts = CommitFacts::new(&cp.idempotency_key, expected_version)
            .key_seen(key_seen)
            .step_taken_by(taken.as_deref())
            .version(row.as_ref().map_or(0, |r| r.version));
        let version = match decide(&facts) {
            Verdict::Write { version } => version,
            Verdict::Refuse(outcome) => return Ok(outcome),
        };
        // Staged: the key (write 1), the checkpoint with its outbox rows, events and cleared pending
        // step (write 2), the run row (write 3). Nothing is applied until all three are.
        self.wrote(1)?;
        let record = encode(cp);
        let outbox: Vec<(String, Vec<u8>)> =
            cp.outbox.iter().map(|r| (r.key.clone(), encode_outbox(r))).collect();
        self.wrote(2)?;
        let info = RunInfo::after_commit(
            row.as_ref(),
            run,
            cp.step,
            status,
            &cp.graph_fingerprint,
            head_after(None, events),
        );
        let row_bytes = encode_run(&info);
        self.wrote(3)?;
        t.keys.insert(cp.idempotency_key.clone());
        t.checkpoints.insert((run.to_owned(), cp.step), record);
        for (i, row) in outbox.into_iter().enumerate() {
            t.outbox.insert((run.to_owned(), cp.step, i), row);
        }
        t.append_events(run, events);
        t.pending.remove(run);
        t.runs.insert(run.to_owned(), row_bytes);
        Ok(CommitOutcome::Committed { version })
    }

    async fn set_status(
        &self,
        run_id: &str,
        status: &RunStatus,
        events: &[Event],
        pending: Option<&[u8]>,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        let mut t = self.tables();
        let row = t.run(run_id)?;
        let verdict = decide_status(row.as_ref().map(|r| r.version), false, expected_version);
        let Some(mut info) = row.filter(|_| verdict.writes()) else { return Ok(verdict.outcome()) };
        info.after_status(status, head_after(None, events));
        t.append_events(run_id, events);
        if let Some(p) = pending {
            t.pending.insert(run_id.to_owned(), p.to_vec());
        }
        t.runs.insert(run_id.to_owned(), encode_run(&info));
        Ok(verdict.outcome())
    }

    async fn events(&self, run_id: &str, from: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let t = self.tables();
        let range = (run_id.to_owned(), from)..=(run_id.to_owned(), u64::MAX);
        t.events
            .range(range)
            .take(limit)
            .map(|((_, seq), b)| graph_store::events::decode(run_id, *seq, b))
            .collect()
    }

    async fn pending(&self, run_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.tables().pending.get(run_id).cloned())
    }

    async fn mailbox_op(&self, run_id: &str, op: MailboxOp) -> Result<MailboxReply, StoreError> {
        let mut t = self.tables();
        let exists = t.runs.contains_key(run_id);
        // The contract's rule decides; the table holds its bytes.
        let (reply, write) = mailbox::apply_to_bytes(t.mailboxes.get(run_id).map(Vec::as_slice), op, exists)?;
        self.wrote(1)?;
        if let Some(bytes) = write {
            t.mailboxes.insert(run_id.to_owned(), bytes);
        }
        Ok(reply)
    }

    async fn schedule_op(&self, name: &str, op: ScheduleOp) -> Result<ScheduleReply, StoreError> {
        let mut t = self.tables();
        let (reply, write) = schedule::apply_to_bytes(t.schedules.get(name).map(Vec::as_slice), op)?;
        self.wrote(1)?;
        match write {
            Some(schedule::RowWrite::Put(bytes)) => {
                t.schedules.insert(name.to_owned(), bytes);
            }
            Some(schedule::RowWrite::Delete) => {
                t.schedules.remove(name);
            }
            None => {}
        }
        Ok(reply)
    }

    async fn schedules(&self) -> Result<Vec<Schedule>, StoreError> {
        self.tables().schedules.values().map(|b| schedule::decode(b)).collect()
    }

    async fn mailbox(&self, run_id: &str) -> Result<Mailbox, StoreError> {
        Ok(self.tables().mailboxes.get(run_id).map(|b| mailbox::decode(b)).transpose()?.unwrap_or_default())
    }

    async fn run_info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        self.tables().run(run_id)
    }

    async fn load_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Checkpoint>, StoreError> {
        let t = self.tables();
        t.checkpoints.get(&(run_id.to_owned(), step)).map(|b| decode(run_id, step, b)).transpose()
    }

    async fn latest(&self, run_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        let t = self.tables();
        let range = (run_id.to_owned(), 0)..=(run_id.to_owned(), u64::MAX);
        t.checkpoints.range(range).next_back().map(|((_, step), b)| decode(run_id, *step, b)).transpose()
    }

    async fn history(&self, run_id: &str) -> Result<Vec<CheckpointMeta>, StoreError> {
        let t = self.tables();
        let range = (run_id.to_owned(), 0)..=(run_id.to_owned(), u64::MAX);
        t.checkpoints.range(range).map(|((_, step), b)| Ok(decode(run_id, *step, b)?.meta())).collect()
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        let t = self.tables();
        let mut out = Vec::new();
        // In run-id order from the filter's start, up to the end of its prefix.
        for (run_id, bytes) in t.runs.range(filter.start().to_owned()..) {
            if filter.past(run_id) || filter.limit.is_some_and(|n| out.len() >= n) {
                break;
            }
            let info = decode_run_of(run_id, None, bytes)?;
            if filter.matches(&info) {
                out.push(info);
            }
        }
        Ok(out)
    }

    async fn prune(&self, run_id: &str, keep: usize) -> Result<usize, StoreError> {
        let mut t = self.tables();
        let range = (run_id.to_owned(), 0)..=(run_id.to_owned(), u64::MAX);
        let steps: Vec<u64> = t.checkpoints.range(range).map(|((_, s), _)| *s).collect();
        let Some(&oldest_kept) = steps.iter().rev().nth(keep.max(1) - 1).or(steps.first()) else {
            return Ok(0);
        };
        // Never the snapshot the oldest kept checkpoint's delta chain starts from.
        let bytes = &t.checkpoints[&(run_id.to_owned(), oldest_kept)];
        let floor = decode(run_id, oldest_kept, bytes)?.state.base(oldest_kept);
        let dropped: Vec<u64> = steps.into_iter().filter(|&s| s < floor).collect();
        for s in &dropped {
            t.checkpoints.remove(&(run_id.to_owned(), *s));
        }
        Ok(dropped.len())
    }

    async fn load_effect(&self, key: &str) -> Result<Option<EffectRecord>, StoreError> {
        self.tables().effects.get(key).map(|b| decode_effect(b)).transpose()
    }

    async fn put_effect(
        &self,
        record: &EffectRecord,
        expected: Option<&EffectState>,
    ) -> Result<EffectOutcome, StoreError> {
        let mut t = self.tables();
        let current = t.effects.get(&record.key).map(|b| decode_effect(b)).transpose()?;
        let outcome = decide_effect(false, current.as_ref(), expected);
        if outcome == EffectOutcome::Written {
            t.effects.insert(record.key.clone(), encode_effect(record));
        }
        Ok(outcome)
    }

    async fn effects(&self, run_id: &str) -> Result<Vec<EffectRecord>, StoreError> {
        let t = self.tables();
        let mut out = Vec::new();
        for bytes in t.effects.values() {
            let e = decode_effect(bytes)?;
            if e.run_id == run_id {
                out.push(e);
            }
        }
        out.sort_by(|a, b| (a.step, &a.path, a.call_index).cmp(&(b.step, &b.path, b.call_index)));
        Ok(out)
    }

    async fn outbox(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        self.tables().outbox.values().take(limit).map(|(_, b)| decode_outbox(b)).collect()
    }

    async fn ack_outbox(&self, keys: &[String]) -> Result<usize, StoreError> {
        let mut t = self.tables();
        let before = t.outbox.len();
        t.outbox.retain(|_, (key, _)| !keys.contains(key));
        Ok(before - t.outbox.len())
    }
}
