//! The in-memory store: the reference model of the store contract and the test oracle. Not durable.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::commit::{CommitFacts, Verdict, decide, decide_status};
use crate::events::{ChainHead, Event, EventType, Payload, head_after};
use crate::journal::decide_effect;
use crate::{
    Checkpoint, CheckpointMeta, CommitOutcome, EffectOutcome, EffectRecord, EffectState, FailPoint,
    OutboxRow, RunFilter, RunInfo, RunStatus, StateRepr, Store, StoreError, WaitingJoin, WorkItem,
};

/// A store in process memory, shared by clones. Every operation holds one lock, so each commit is atomic.
///
/// # Examples
///
/// ```
/// use graph_store::MemoryStore;
/// let store = MemoryStore::new();
/// let same = store.clone(); // shares the data
/// # let _ = same;
/// ```
#[derive(Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
    fail: FailPoint,
}

#[derive(Default)]
struct Inner {
    runs: BTreeMap<Arc<str>, RunInfo>,
    /// Each run's checkpoints, in step order.
    checkpoints: BTreeMap<Arc<str>, Steps>,
    /// The idempotency keys of every checkpoint committed (pruning keeps them).
    keys: Keys,
    effects: BTreeMap<String, EffectRecord>,
    /// Pending outbox rows by (run, step, emit order).
    outbox: BTreeMap<(Arc<str>, u64, usize), OutboxRow>,
    /// Event logs, by run, in `seq` order.
    events: BTreeMap<Arc<str>, Vec<KeptEvent>>,
    /// Pending steps, by run.
    pending: BTreeMap<Arc<str>, Vec<u8>>,
    /// Mailboxes (`mailbox::encode` bytes), by run.
    mailboxes: BTreeMap<String, Vec<u8>>,
    /// Schedules (`schedule::encode` bytes), by name.
    schedules: BTreeMap<String, Vec<u8>>,
}

/// A set of idempotency keys, compact: an engine-made key (`sha256:` and 64 lowercase hex digits) is
/// held as its 32 bytes, in the table itself, any other key as a `String`. A loop step's key was a
/// 71-byte allocation of its own, and growing the table rehashed every key through a pointer
/// (bench/analysis.md). The two forms cannot meet: a key has exactly one of them.
#[derive(Default)]
struct Keys {
    /// FxHash is enough to spread digests, and SipHash (the default) of a 64-byte key was 4 % of the
    /// loop benchmark's time. (Keys made to collide would only slow this in-process store down, not
    /// change what it answers.)
    digests: HashSet<[u8; 32], fxhash::FxBuildHasher>,
    other: HashSet<String, fxhash::FxBuildHasher>,
}

impl Keys {
    /// Adds `key` (an idempotency key as [`Hex::keep`] keeps it); false when it was there already.
    fn insert(&mut self, key: &Hex) -> bool {
        match key {
            Hex::Digest(d) => self.digests.insert(*d),
            Hex::Text(t) => !self.other.contains(&**t) && self.other.insert(t.to_string()),
        }
    }

    fn remove(&mut self, key: &Hex) {
        match key {
            Hex::Digest(d) => self.digests.remove(d),
            Hex::Text(t) => self.other.remove(&**t),
        };
    }

    fn len(&self) -> usize {
        self.digests.len() + self.other.len()
    }
}

/// The prefix of an engine-made idempotency key (`sha256:` and 64 lowercase hex digits).
const KEY: &str = "sha256:";

/// The 32 bytes of `text` when it is `prefix` and 64 lowercase hex digits, `None` for any other text
/// (upper case included, so that two distinct texts never share a digest).
fn digest_of(text: &str, prefix: &str) -> Option<[u8; 32]> {
    // Eight digits at a time in a `u64` (SWAR), without a branch: a byte under 0x80 plus
    // `0x80 - lo` has its top bit set when it is at least `lo`, plus `0x7f - hi` when it is above
    // `hi`, and neither sum carries into the next byte. A byte at or past 0x80 is refused on its own
    // (what it did to its neighbours' sums does not matter then). A digit's value is its low nibble,
    // a letter's (`a`..`f`) its low nibble plus 9.
    const ONES: u64 = 0x0101_0101_0101_0101;
    const TOP: u64 = 0x80 * ONES;
    const fn at_least(lo: u8) -> u64 {
        (0x80 - lo as u64) * ONES
    }
    const fn above(hi: u8) -> u64 {
        (0x7f - hi as u64) * ONES
    }
    let hex: &[u8; 64] = text.strip_prefix(prefix)?.as_bytes().try_into().ok()?;
    let mut out = [0u8; 32];
    let mut bad = 0u64;
    for (o, eight) in out.chunks_exact_mut(4).zip(hex.chunks_exact(8)) {
        let x = u64::from_le_bytes(eight.try_into().expect("chunks of 8"));
        let digit = x.wrapping_add(at_least(b'0')) & !x.wrapping_add(above(b'9')) & TOP;
        let letter = x.wrapping_add(at_least(b'a')) & !x.wrapping_add(above(b'f')) & TOP;
        bad |= (x & TOP) | ((digit | letter) ^ TOP);
        let v = (x & (0x0f * ONES)) + (letter >> 7) * 9;
        // Byte 2k of `t` is digit 2k's value in the high nibble and digit 2k+1's in the low one.
        let t = (v << 4) | (v >> 8);
        o.copy_from_slice(&[t as u8, (t >> 16) as u8, (t >> 32) as u8, (t >> 48) as u8]);
    }
    (bad == 0).then_some(out)
}

/// A hash the engine writes as hex (a state hash, an event hash, an idempotency key after its prefix),
/// as the store keeps it: its 32 bytes, or the text as it is when it is not in that form (a record
/// written by hand). Each field knows its prefix, so the text comes back exactly.
#[derive(Clone)]
enum Hex {
    Digest([u8; 32]),
    Text(Box<str>),
}

impl Hex {
    fn keep(text: &str, prefix: &str) -> Hex {
        match digest_of(text, prefix) {
            Some(d) => Hex::Digest(d),
            None => Hex::Text(text.into()),
        }
    }

    fn text(&self, prefix: &str) -> String {
        match self {
            Hex::Digest(d) => {
                let mut out = String::with_capacity(prefix.len() + 64);
                out.push_str(prefix);
                out.push_str(&graph_core::hex(d));
                out
            }
            Hex::Text(t) => t.to_string(),
        }
    }
}

/// A checkpoint as the store keeps it: its three hashes (state hash, idempotency key, event head) as
/// [`Hex`] instead of three strings of their own, and no copy of the run id, which the map holding it
/// has. Keeping every checkpoint of a run is most of what a loop step on this store costs once the
/// step is done (new memory to fault in, allocations that are never reused): this form, held in its
/// run's [`Steps`] rather than boxed, is four allocations and ~200 bytes a step fewer
/// (bench/analysis.md).
struct Kept {
    step: u64,
    timestamp_ms: u64,
    label: Option<String>,
    state: StateRepr,
    state_hash: Hex,
    rng_seed: u64,
    frontier: Vec<WorkItem>,
    waiting: Vec<WaitingJoin>,
    outbox: Vec<OutboxRow>,
    idempotency_key: Hex,
    graph_fingerprint: Arc<str>,
    event_head: Option<(u64, Hex)>,
    schema_version: u32,
}

impl Kept {
    /// `cp`, whose idempotency key the caller has already kept as `key`.
    fn new(cp: &Checkpoint, key: Hex) -> Kept {
        // Every field named: a field added to `Checkpoint` does not compile here until it is kept.
        let Checkpoint {
            run_id: _, // the map's key
            step,
            timestamp_ms,
            label,
            state,
            state_hash,
            rng_seed,
            frontier,
            waiting,
            outbox,
            idempotency_key: _, // `key`
            graph_fingerprint,
            event_head,
            schema_version,
        } = cp;
        Kept {
            step: *step,
            timestamp_ms: *timestamp_ms,
            label: label.clone(),
            state: state.clone(),
            state_hash: Hex::keep(state_hash, ""),
            rng_seed: *rng_seed,
            frontier: frontier.clone(),
            waiting: waiting.clone(),
            outbox: outbox.clone(),
            idempotency_key: key,
            graph_fingerprint: Arc::clone(graph_fingerprint),
            event_head: event_head.as_ref().map(|h| (h.seq, Hex::keep(&h.hash, ""))),
            schema_version: *schema_version,
        }
    }

    fn event_head(&self) -> Option<ChainHead> {
        self.event_head.as_ref().map(|(seq, hash)| ChainHead { seq: *seq, hash: hash.text("") })
    }

    fn checkpoint(&self, run_id: &Arc<str>) -> Checkpoint {
        Checkpoint {
            run_id: Arc::clone(run_id),
            step: self.step,
            timestamp_ms: self.timestamp_ms,
            label: self.label.clone(),
            state: self.state.clone(),
            state_hash: self.state_hash.text(""),
            rng_seed: self.rng_seed,
            frontier: self.frontier.clone(),
            waiting: self.waiting.clone(),
            outbox: self.outbox.clone(),
            idempotency_key: self.idempotency_key.text(KEY),
            graph_fingerprint: Arc::clone(&self.graph_fingerprint),
            event_head: self.event_head(),
            schema_version: self.schema_version,
        }
    }

    fn meta(&self) -> CheckpointMeta {
        CheckpointMeta {
            step: self.step,
            idempotency_key: self.idempotency_key.text(KEY),
            timestamp_ms: self.timestamp_ms,
            label: self.label.clone(),
            state_hash: self.state_hash.text(""),
            next: self.frontier.iter().map(|w| w.node.to_string()).collect(),
            event_head: self.event_head(),
        }
    }
}

/// A run's checkpoints, in step order: held in one vector rather than a map of boxes, so that what a
/// long run keeps grows as one buffer (glibc serves a large one from `mmap` and grows it with `mremap`)
/// instead of one small allocation a step from the heap of the thread's arena, which glibc grows a page
/// and a system call at a time (bench/analysis.md). Steps are committed in order; one out of order is
/// put in its place.
struct Steps(Vec<Kept>);

impl Steps {
    fn position(&self, step: u64) -> Result<usize, usize> {
        self.0.binary_search_by_key(&step, |k| k.step)
    }

    fn get(&self, step: u64) -> Option<&Kept> {
        self.position(step).ok().map(|i| &self.0[i])
    }

    /// Adds `kept`, whose step the caller checked is not here.
    fn insert(&mut self, kept: Kept) {
        match self.0.last() {
            Some(last) if last.step >= kept.step => {
                let at = self.position(kept.step).unwrap_or_else(|at| at);
                self.0.insert(at, kept);
            }
            _ => self.0.push(kept),
        }
    }

    fn remove(&mut self, step: u64) {
        if let Ok(i) = self.position(step) {
            self.0.remove(i);
        }
    }

    /// The checkpoints with `from <= step <= to`.
    fn range(&self, from: u64, to: u64) -> &[Kept] {
        let start = self.0.partition_point(|k| k.step < from);
        let end = self.0.partition_point(|k| k.step <= to).max(start);
        &self.0[start..end]
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An event as the store keeps it: its hash as [`Hex`].
struct KeptEvent {
    seq: u64,
    event_type: EventType,
    timestamp_ms: u64,
    payload: Payload,
    hash: Hex,
    schema_version: u32,
}

impl KeptEvent {
    fn new(e: &Event) -> KeptEvent {
        let Event { seq, event_type, timestamp_ms, payload, hash, schema_version } = e;
        KeptEvent {
            seq: *seq,
            event_type: *event_type,
            timestamp_ms: *timestamp_ms,
            payload: payload.clone(),
            hash: Hex::keep(hash, ""),
            schema_version: *schema_version,
        }
    }

    fn event(&self) -> Event {
        Event {
            seq: self.seq,
            event_type: self.event_type,
            timestamp_ms: self.timestamp_ms,
            payload: self.payload.clone(),
            hash: self.hash.text(""),
            schema_version: self.schema_version,
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// Test hook (feature `test-hooks`): the next commit fails after its `n`-th write and rolls back.
    #[cfg(feature = "test-hooks")]
    pub fn fail_point(&self) -> &FailPoint {
        &self.fail
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-applied commit (every commit mutates after
        // all checks), so a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = self.lock();
        f.debug_struct("MemoryStore").field("runs", &g.runs.len()).field("keys", &g.keys.len()).finish()
    }
}

#[async_trait]
impl Store for MemoryStore {
    /// Nothing here can go away: no call fails retryably.
    fn can_be_unavailable(&self) -> bool {
        false
    }

    async fn save_checkpoint(
        &self,
        cp: &Checkpoint,
        events: &[Event],
        status: &RunStatus,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        let mut g = self.lock();
        let run: &str = &cp.run_id;
        let current = g.runs.get(run).map_or(0, |r| r.version);
        // The key is claimed first (one hash on the common path) and released if the commit goes no
        // further; the lock makes the claim and the checks one atomic step.
        // Parsed once: the key set and the kept checkpoint hold the same form.
        let key = Hex::keep(&cp.idempotency_key, KEY);
        let claimed = g.keys.insert(&key);
        let taken = match claimed {
            true => g.checkpoints.get(run).and_then(|c| c.get(cp.step)).map(|k| k.idempotency_key.text(KEY)),
            false => None, // decided by the key
        };
        let facts = CommitFacts::new(&cp.idempotency_key, expected_version)
            .key_seen(!claimed)
            .step_taken_by(taken.as_deref())
            .version(current);
        let version = match decide(&facts) {
            Verdict::Write { version } => version,
            Verdict::Refuse(outcome) => {
                if claimed {
                    g.keys.remove(&key);
                }
                return Ok(outcome);
            }
        };
        // Three writes (the key above, the checkpoint, the run row), each followed by the fail point; a
        // failure undoes the earlier ones, as a database transaction would.
        let mut undo = Undo { key: &key, run, step: None, events: None, pending: None };
        if self.fail.hit(1) {
            return Err(undo.apply(&mut g));
        }
        // The run's maps are looked up before an entry is made: `entry` would take (and mostly drop) a
        // clone of the run id, two atomic operations on a count other threads also touch.
        match g.checkpoints.get_mut(run) {
            Some(c) => c.insert(Kept::new(cp, key.clone())),
            None => drop(g.checkpoints.insert(cp.run_id.clone(), Steps(vec![Kept::new(cp, key.clone())]))),
        }
        for (i, row) in cp.outbox.iter().enumerate() {
            g.outbox.insert((cp.run_id.clone(), cp.step, i), row.clone());
        }
        let log = match g.events.get_mut(run) {
            Some(log) => log,
            None => g.events.entry(cp.run_id.clone()).or_default(),
        };
        undo.events = Some(log.len());
        log.extend(events.iter().map(KeptEvent::new));
        undo.pending = Some(g.pending.remove(run));
        undo.step = Some(cp.step);
        if self.fail.hit(2) {
            return Err(undo.apply(&mut g));
        }
        // The third write, the run row, is the last: failing after it leaves what failing before it
        // leaves, so the check comes first and the row needs no copy to undo.
        if self.fail.hit(3) {
            return Err(undo.apply(&mut g));
        }
        match g.runs.get_mut(run) {
            Some(row) => {
                // The head moved in place (its hash written over): no copy of the last event's.
                row.commit(cp.step, status, &cp.graph_fingerprint, None);
                ChainHead::advance(&mut row.event_head, events);
            }
            None => {
                let last_event = head_after(None, events);
                let row = RunInfo::first_commit(run, cp.step, status, &cp.graph_fingerprint, last_event);
                g.runs.insert(cp.run_id.clone(), row);
            }
        }
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
        let mut g = self.lock();
        let g = &mut *g;
        let verdict = decide_status(g.runs.get(run_id).map(|r| r.version), false, expected_version);
        let Some(r) = g.runs.get_mut(run_id).filter(|_| verdict.writes()) else {
            return Ok(verdict.outcome());
        };
        r.after_status(status, head_after(None, events));
        let run: Arc<str> = r.run_id.as_str().into();
        if !events.is_empty() {
            g.events.entry(Arc::clone(&run)).or_default().extend(events.iter().map(KeptEvent::new));
        }
        if let Some(p) = pending {
            g.pending.insert(run, p.to_vec());
        }
        Ok(verdict.outcome())
    }

    async fn events(&self, run_id: &str, from: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let g = self.lock();
        let Some(log) = g.events.get(run_id) else { return Ok(Vec::new()) };
        // Sequence numbers are positions in a log that was written in order.
        let start = log.partition_point(|e| e.seq < from);
        Ok(log[start..].iter().take(limit).map(KeptEvent::event).collect())
    }

    async fn pending(&self, run_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.lock().pending.get(run_id).cloned())
    }

    async fn mailbox_op(
        &self,
        run_id: &str,
        op: crate::mailbox::MailboxOp,
    ) -> Result<crate::mailbox::MailboxReply, StoreError> {
        if self.fail.hit(1) {
            return Err(StoreError::backend("injected failure", "fail point"));
        }
        let mut inner = self.lock();
        let exists = inner.runs.contains_key(run_id);
        let (reply, write) =
            crate::mailbox::apply_to_bytes(inner.mailboxes.get(run_id).map(Vec::as_slice), op, exists)?;
        if let Some(bytes) = write {
            inner.mailboxes.insert(run_id.to_owned(), bytes);
        }
        Ok(reply)
    }

    async fn schedule_op(
        &self,
        name: &str,
        op: crate::schedule::ScheduleOp,
    ) -> Result<crate::schedule::ScheduleReply, StoreError> {
        if self.fail.hit(1) {
            return Err(StoreError::backend("injected failure", "fail point"));
        }
        let mut inner = self.lock();
        let (reply, write) =
            crate::schedule::apply_to_bytes(inner.schedules.get(name).map(Vec::as_slice), op)?;
        match write {
            Some(crate::schedule::RowWrite::Put(bytes)) => {
                inner.schedules.insert(name.to_owned(), bytes);
            }
            Some(crate::schedule::RowWrite::Delete) => {
                inner.schedules.remove(name);
            }
            None => {}
        }
        Ok(reply)
    }

    async fn schedules(&self) -> Result<Vec<crate::schedule::Schedule>, StoreError> {
        self.lock().schedules.values().map(|b| crate::schedule::decode(b)).collect()
    }

    async fn mailbox(&self, run_id: &str) -> Result<crate::mailbox::Mailbox, StoreError> {
        let inner = self.lock();
        Ok(inner.mailboxes.get(run_id).map(|b| crate::mailbox::decode(b)).transpose()?.unwrap_or_default())
    }

    async fn run_info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        Ok(self.lock().runs.get(run_id).cloned())
    }

    async fn load_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Checkpoint>, StoreError> {
        let g = self.lock();
        let Some((run, c)) = g.checkpoints.get_key_value(run_id) else { return Ok(None) };
        Ok(c.get(step).map(|cp| cp.checkpoint(run)))
    }

    async fn latest(&self, run_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        let g = self.lock();
        let Some((run, c)) = g.checkpoints.get_key_value(run_id) else { return Ok(None) };
        Ok(c.0.last().map(|cp| cp.checkpoint(run)))
    }

    async fn checkpoints(&self, run_id: &str, from: u64, to: u64) -> Result<Vec<Checkpoint>, StoreError> {
        let g = self.lock();
        let Some((run, c)) = g.checkpoints.get_key_value(run_id) else { return Ok(Vec::new()) };
        Ok(c.range(from, to).iter().map(|cp| cp.checkpoint(run)).collect())
    }

    async fn history(&self, run_id: &str) -> Result<Vec<CheckpointMeta>, StoreError> {
        Ok(self
            .lock()
            .checkpoints
            .get(run_id)
            .map(|c| c.0.iter().map(Kept::meta).collect())
            .unwrap_or_default())
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        let g = self.lock();
        let it = g
            .runs
            .range::<str, _>((std::ops::Bound::Included(filter.start()), std::ops::Bound::Unbounded))
            .take_while(|(id, _)| !filter.past(id))
            .map(|(_, r)| r)
            .filter(|r| filter.matches(r))
            .cloned();
        Ok(match filter.limit {
            Some(n) => it.take(n).collect(),
            None => it.collect(),
        })
    }

    async fn prune(&self, run_id: &str, keep: usize) -> Result<usize, StoreError> {
        let mut g = self.lock();
        let Some(c) = g.checkpoints.get_mut(run_id) else {
            return Ok(0);
        };
        // The oldest checkpoint kept is the `keep`-th latest (or the first), and the snapshot its state
        // is rebuilt from stays with it.
        let Some(oldest_kept) = c.0.iter().rev().nth(keep.max(1) - 1).or(c.0.first()) else {
            return Ok(0);
        };
        let floor = oldest_kept.state.base(oldest_kept.step);
        let dropped = c.0.partition_point(|k| k.step < floor);
        c.0.drain(..dropped);
        if c.0.len() < c.0.capacity() / 4 {
            c.0.shrink_to_fit(); // what was pruned is given back, as a map's nodes were
        }
        Ok(dropped)
    }

    async fn load_effect(&self, key: &str) -> Result<Option<EffectRecord>, StoreError> {
        Ok(self.lock().effects.get(key).cloned())
    }

    async fn put_effect(
        &self,
        record: &EffectRecord,
        expected: Option<&EffectState>,
    ) -> Result<EffectOutcome, StoreError> {
        let mut g = self.lock();
        let current = g.effects.get(&record.key);
        let outcome = decide_effect(false, current, expected);
        if outcome == EffectOutcome::Written {
            g.effects.insert(record.key.clone(), record.clone());
        }
        Ok(outcome)
    }

    async fn effects(&self, run_id: &str) -> Result<Vec<EffectRecord>, StoreError> {
        let g = self.lock();
        let mut out: Vec<EffectRecord> = g.effects.values().filter(|e| e.run_id == run_id).cloned().collect();
        out.sort_by(|a, b| (a.step, &a.path, a.call_index).cmp(&(b.step, &b.path, b.call_index)));
        Ok(out)
    }

    async fn outbox(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        Ok(self.lock().outbox.values().take(limit).cloned().collect())
    }

    async fn ack_outbox(&self, keys: &[String]) -> Result<usize, StoreError> {
        let mut g = self.lock();
        let before = g.outbox.len();
        g.outbox.retain(|_, row| !keys.contains(&row.key));
        Ok(before - g.outbox.len())
    }
}

/// What a commit wrote so far, to undo on an injected failure.
struct Undo<'a> {
    key: &'a Hex,
    run: &'a str,
    /// The checkpoint written.
    step: Option<u64>,
    /// The length of the run's event log before the commit appended to it.
    events: Option<usize>,
    /// The pending step the commit cleared.
    pending: Option<Option<Vec<u8>>>,
}

impl Undo<'_> {
    fn apply(self, g: &mut Inner) -> StoreError {
        g.keys.remove(self.key);
        if let Some(step) = self.step {
            g.outbox.retain(|(run, s, _), _| !(&**run == self.run && *s == step));
            if let Some(c) = g.checkpoints.get_mut(self.run) {
                c.remove(step);
                if c.is_empty() {
                    g.checkpoints.remove(self.run);
                }
            }
        }
        if let Some(len) = self.events
            && let Some(log) = g.events.get_mut(self.run)
        {
            log.truncate(len);
            if log.is_empty() {
                g.events.remove(self.run);
            }
        }
        if let Some(Some(p)) = self.pending {
            g.pending.insert(self.run.into(), p);
        }
        StoreError::backend("injected failure", "fail point")
    }
}

#[cfg(test)]
mod tests {
    use super::{Hex, KEY, Kept, Keys, Steps, digest_of};
    use crate::record::test_checkpoint;

    #[test]
    fn engine_keys_are_held_as_digests_and_others_as_text() {
        let engine = format!("sha256:{}", "0123456789abcdef".repeat(4));
        let upper = engine.to_uppercase().replace("SHA256:", "sha256:");
        let d = digest_of(&engine, KEY).expect("the engine's form");
        assert_eq!(d[0], 0x01);
        assert_eq!(d[31], 0xef);
        for not_engine in [&upper, "sha256:abc", "sha256:", &format!("{engine}0"), "k-1", &engine[7..]] {
            assert_eq!(digest_of(not_engine, KEY), None, "{not_engine}");
        }
        let mut keys = Keys::default();
        let key = |k: &str| Hex::keep(k, KEY);
        assert!(keys.insert(&key(&engine)));
        assert!(!keys.insert(&key(&engine)));
        // The same digits in upper case are another key, not the same digest.
        assert!(keys.insert(&key(&upper)));
        assert!(keys.insert(&key("k-1")));
        assert!(!keys.insert(&key("k-1")));
        assert_eq!((keys.digests.len(), keys.other.len(), keys.len()), (1, 2, 3));
        keys.remove(&key(&engine));
        keys.remove(&key("k-1"));
        assert!(keys.insert(&key(&engine)));
        assert!(keys.insert(&key("k-1")));
        assert_eq!(keys.len(), 3);
    }

    #[test]
    fn steps_stay_in_step_order_whatever_order_they_come_in() {
        let cp = |step| {
            let c = test_checkpoint(step);
            Kept::new(&c, Hex::keep(&c.idempotency_key, KEY))
        };
        let mut steps = Steps(Vec::new());
        for s in [4, 1, 7, 2, 9, 3] {
            steps.insert(cp(s));
        }
        let order = |steps: &[Kept]| steps.iter().map(|k| k.step).collect::<Vec<_>>();
        assert_eq!(order(&steps.0), [1, 2, 3, 4, 7, 9]);
        assert_eq!(order(steps.range(2, 7)), [2, 3, 4, 7]);
        assert_eq!(order(steps.range(5, 6)), Vec::<u64>::new());
        assert_eq!(order(steps.range(8, 3)), Vec::<u64>::new());
        assert_eq!(order(steps.range(0, u64::MAX)), [1, 2, 3, 4, 7, 9]);
        assert_eq!(steps.get(7).map(|k| k.idempotency_key.text(KEY)), Some("key-7".to_owned()));
        assert!(steps.get(5).is_none());
        steps.remove(4);
        steps.remove(5);
        assert_eq!(order(&steps.0), [1, 2, 3, 7, 9]);
    }

    #[test]
    fn digests_are_read_from_lowercase_hex_and_nothing_else() {
        // The reference: 64 lowercase hex digits, each pair one byte.
        fn reference(text: &str) -> Option<[u8; 32]> {
            let ok =
                text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            ok.then(|| std::array::from_fn(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap()))
        }
        let base: String = (0..64).map(|i| char::from(b"0123456789abcdef"[(i * 7 + 3) % 16])).collect();
        assert!(digest_of(&base, "").is_some());
        for pos in 0..64 {
            for c in (0u8..0x80).map(char::from) {
                let mut text = base.clone();
                text.replace_range(pos..pos + 1, c.encode_utf8(&mut [0; 4]));
                assert_eq!(digest_of(&text, ""), reference(&text), "{text:?}");
            }
            if pos < 63 {
                // A two-byte character where two digits were: the length stays 64.
                let mut text = base.clone();
                text.replace_range(pos..pos + 2, "é");
                assert_eq!(digest_of(&text, ""), None, "{text:?}");
            }
        }
    }

    #[test]
    fn kept_hashes_come_back_as_they_were_written() {
        let digits = "00ff10a9".repeat(8);
        for (text, prefix, compact) in [
            (digits.clone(), "", true),
            (format!("sha256:{digits}"), KEY, true),
            // Not the field's form: kept as text.
            (digits.clone(), KEY, false),
            (format!("sha256:{digits}"), "", false),
            (digits.to_uppercase(), "", false),
            (digits[1..].to_owned(), "", false),
            (String::new(), "", false),
            ("h-1".to_owned(), "", false),
        ] {
            let kept = Hex::keep(&text, prefix);
            assert_eq!(matches!(kept, Hex::Digest(_)), compact, "{text:?} after {prefix:?}");
            assert_eq!(kept.text(prefix), text);
        }
    }
}
