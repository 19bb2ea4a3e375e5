//! Group commit through the commit log.
//!
//! Requests queue in the contract's group-commit queue (`graph_store::group`), which has one leader:
//! the first request to find none leads. On a multi-thread runtime it leads its first group on its own
//! thread (inside `block_in_place`) and hands the lead to a commit thread only if more requests queued
//! meanwhile; elsewhere it starts the commit thread (a blocking task, so dropping a caller cannot stall
//! it). The leader takes every request queued so far — a *group* — and:
//!
//! 1. checks every request of the group (key, step, version; a later request of the group sees the
//!    earlier ones' writes) against sled and the group's own writes, and records those writes — writing
//!    nothing yet;
//! 2. appends the writes to the commit log as one record and `fdatasync`s it (one device round trip
//!    for the whole group): the commit point;
//! 3. hands the group to the applier thread, which applies it to sled (the group's sequence number
//!    last) *behind* the commit point;
//! 4. checkpoints when enough log has accumulated (see [`Inner::checkpoint`]: it waits for the applier);
//! 5. answers every request of the group, and repeats until the queue is empty.
//!
//! Requests arriving during a group form the next group, so one sequential run pays one log sync per
//! step and N concurrent runs share them. An I/O error in 2–4 fail-stops the store before anything is
//! answered: no request of a group whose record may not be durable is acknowledged, and sled never holds
//! a group the log does not.
//!
//! # The apply runs behind
//!
//! A group the log holds is committed; applying it to sled is bookkeeping that need not delay the
//! answer. So the groups logged but not yet applied wait in [`Behind`], oldest first, with their writes
//! by key: the next group's checks read through them (its own writes, then the groups behind, newest
//! first, then sled), and every read of the store first brings sled up to date ([`catch_up`], which
//! applies on the reader's thread what the applier has not reached), so a caller reads what it was
//! acknowledged. A checkpoint catches up before it flushes, and so does the store's close. An error
//! applying a group fail-stops the store; the group is in the log, and the next open applies it. More
//! than `MAX_BEHIND` groups behind (the applier thread starved of a core), the leader applies them
//! itself. The thread is one per open store, started by its first logged group; it takes the apply
//! (about a tenth of a sequential commit's time on a fast disk) off the answer's path, and its wake-up
//! costs the leader one condition-variable notify.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tokio::sync::oneshot;

use graph_store::commit::{CommitFacts, Verdict, decide, decide_status};
use graph_store::events::{Encoded, Event};
use graph_store::group::GroupQueue;
use graph_store::journal::{decide_effect, decode_effect, encode_effect, encode_outbox};
use graph_store::mailbox::{MailboxOp, MailboxReply, apply_to_bytes};
use graph_store::record::{decode, encode, encode_run};
use graph_store::schedule::{RowWrite, ScheduleOp, ScheduleReply};
use graph_store::{
    Checkpoint, CommitOutcome, EffectOutcome, EffectRecord, EffectState, FailPoint, OutboxRow, RunInfo,
    RunStatus, StoreError,
};

use crate::commit_log::{CommitLog, Manifest};
use crate::redo::{RedoWriter, TreeId};
use crate::{Inner, cp_key, effect_tree_key, outbox_key};

/// A write the commit thread performs.
pub(super) enum Request {
    /// `Store::save_checkpoint`.
    Save {
        run_id: Arc<str>,
        step: u64,
        key: String,
        record: Vec<u8>,
        outbox: Vec<OutboxRow>,
        events: Vec<Encoded>,
        fingerprint: Arc<str>,
        status: RunStatus,
        expected_version: u64,
    },
    /// `Store::set_status`.
    Status {
        run_id: String,
        status: RunStatus,
        events: Vec<Encoded>,
        pending: Option<Vec<u8>>,
        expected_version: u64,
    },
    /// Removes keys of a tree (`Store::prune`, `Store::ack_outbox`).
    Remove { tree: TreeId, keys: Vec<Vec<u8>> },
    /// `Store::put_effect`.
    Effect { record: Box<EffectRecord>, expected: Option<EffectState> },
    /// `Store::mailbox_op`.
    Mailbox { run_id: String, op: MailboxOp },
    /// `Store::schedule_op`.
    Schedule { name: String, op: ScheduleOp },
    /// Makes sled durable now (`SledStore::flush`).
    Checkpoint,
}

impl Request {
    pub(super) fn save(cp: &Checkpoint, events: &[Event], status: &RunStatus, expected_version: u64) -> Self {
        Request::Save {
            run_id: cp.run_id.clone(),
            step: cp.step,
            key: cp.idempotency_key.clone(),
            record: encode(cp),
            outbox: cp.outbox.clone(),
            events: Encoded::all(events),
            fingerprint: cp.graph_fingerprint.clone(),
            status: status.clone(),
            expected_version,
        }
    }
}

/// What a request did.
#[derive(Debug)]
pub(super) enum Reply {
    Outcome(CommitOutcome),
    Removed(usize),
    Effect(EffectOutcome),
    Mailbox(MailboxReply),
    Schedule(ScheduleReply),
    Done,
}

type Answer = oneshot::Sender<Result<Reply, StoreError>>;

/// Requests waiting for the group's leader (a caller leading on its own thread, or the commit thread).
pub(super) type Queue = GroupQueue<(Request, Answer)>;

/// The commit log and its bookkeeping, owned by whichever thread commits a group.
pub(super) struct Writer {
    pub(super) log: CommitLog,
    pub(super) manifest: Manifest,
    /// The sequence number of the next logged group.
    pub(super) next_seq: u64,
    /// Log bytes written since the last checkpoint.
    pub(super) since_checkpoint: u64,
    /// Log writes (each one `fdatasync`) since open.
    pub(super) syncs: u64,
    /// Test hook: fail the next log write as an I/O error would.
    pub(super) inject_log_failure: bool,
    redo: RedoWriter,
}

impl Writer {
    pub(super) fn new(log: CommitLog, manifest: Manifest, next_seq: u64) -> Self {
        Writer {
            log,
            manifest,
            next_seq,
            since_checkpoint: 0,
            syncs: 0,
            inject_log_failure: false,
            redo: RedoWriter::default(),
        }
    }
}

/// Queues a request; true when no leader runs and the caller must lead (`lead_here` or the commit thread).
pub(super) fn enqueue(inner: &Inner, request: Request, answer: Answer) -> bool {
    inner.queue.push((request, answer))
}

/// The writes of a group by tree and key (`None`: removed).
type Writes = BTreeMap<(TreeId, Vec<u8>), Option<Vec<u8>>>;

/// A group in the log that sled has not applied yet.
struct Logged {
    seq: u64,
    /// Its log record.
    record: Vec<u8>,
    writes: Writes,
}

/// The groups logged and not yet applied to sled, oldest first (see the module doc).
#[derive(Default)]
pub(super) struct Behind {
    groups: VecDeque<Arc<Logged>>,
    /// The applier thread runs.
    thread: bool,
    /// The store's last handle is being dropped: the thread stops.
    closing: bool,
}

impl Behind {
    /// The value the newest group behind wrote under `key` of `t`, if one did.
    fn get(&self, key: &(TreeId, Vec<u8>)) -> Option<Option<Vec<u8>>> {
        self.groups.iter().rev().find_map(|g| g.writes.get(key).cloned())
    }
}

/// The groups behind and the thread that applies them. The thread holds this and only a weak
/// reference to the store, so the last handle's drop ([`Applier::close`]) stops it and the store closes
/// on the dropping thread.
#[derive(Default)]
pub(super) struct Applier {
    behind: Mutex<Behind>,
    /// Told when a group is behind, or the store closes.
    wake: Condvar,
    /// Told when the thread stops.
    stopped: Condvar,
    /// Held by whoever applies groups to sled.
    pub(super) applying: Mutex<()>,
}

impl Applier {
    fn behind(&self) -> MutexGuard<'_, Behind> {
        self.behind.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True when sled holds every logged group (nothing to catch up).
    pub(super) fn caught_up(&self) -> bool {
        self.behind().groups.is_empty()
    }

    /// Stops the thread and waits until it holds no reference to the store (what it left behind, the
    /// store's close applies).
    pub(super) fn close(&self) {
        let mut behind = self.behind();
        behind.closing = true;
        self.wake.notify_all();
        while behind.thread {
            behind = self.stopped.wait(behind).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The thread: applies groups as they come, until the store closes (or an error fail-stopped it:
    /// what is left is in the log, for the next open).
    fn run(&self, store: &std::sync::Weak<Inner>) {
        /// Marks the thread stopped when `run` returns or unwinds (after the store's reference it held
        /// is dropped), so a close never waits for a thread that is gone.
        struct Stopped<'a>(&'a Applier);
        impl Drop for Stopped<'_> {
            fn drop(&mut self) {
                self.0.behind().thread = false;
                self.0.stopped.notify_all();
            }
        }
        let _stopped = Stopped(self);
        loop {
            let mut behind = self.behind();
            while behind.groups.is_empty() && !behind.closing {
                behind = self.wake.wait(behind).unwrap_or_else(|e| e.into_inner());
            }
            if behind.closing {
                break;
            }
            drop(behind);
            let Some(inner) = store.upgrade() else { break };
            let applied = catch_up(&inner);
            drop(inner);
            if applied.is_err() {
                break;
            }
        }
    }
}

/// The most groups left behind before the leader applies them itself (when the applier thread gets no
/// core, or is slower than the log): bounds the groups a plan reads through.
const MAX_BEHIND: usize = 64;

/// Hands a logged group to the applier thread, starting it when none runs; applies on this thread when
/// too many groups are behind or no thread can start.
fn apply_behind(inner: &Arc<Inner>, seq: u64, record: Vec<u8>, writes: Writes) -> Result<(), StoreError> {
    let (start, full) = {
        let mut behind = inner.applier.behind();
        behind.groups.push_back(Arc::new(Logged { seq, record, writes }));
        (!std::mem::replace(&mut behind.thread, true), behind.groups.len() > MAX_BEHIND)
    };
    if !start {
        inner.applier.wake.notify_one();
    } else {
        let (store, applier) = (Arc::downgrade(inner), inner.applier.clone());
        let thread = std::thread::Builder::new()
            .name("graph-store-sled-apply".into())
            .spawn(move || applier.run(&store));
        if thread.is_err() {
            inner.applier.behind().thread = false;
            return catch_up(inner);
        }
    }
    if full {
        return catch_up(inner);
    }
    Ok(())
}

/// Applies every group behind to sled, in order, on this thread (the applier's, or a reader's that
/// must see them); returns once none is left, or with the error that fail-stopped the store.
pub(super) fn catch_up(inner: &Inner) -> Result<(), StoreError> {
    let _applying = inner.applier.applying.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        inner.check()?;
        let Some(group) = inner.applier.behind().groups.front().cloned() else { return Ok(()) };
        inner.apply_record(&group.record, Some(group.seq))?;
        inner.applier.behind().groups.pop_front();
    }
}

/// The commit thread: commits groups, every request queued so far, until the queue is empty.
pub(super) fn commit_loop(inner: Arc<Inner>) {
    let mut inner = Some(inner);
    loop {
        let i = inner.as_ref().expect("held until the last group");
        let Some(group) = i.queue.next_group(|waiting| waiting.drain(..).collect()) else { return };
        let (answers, replies, done) = commit_next(i, group);
        if done {
            // Release the store before answering: a caller that drops its handle and reopens the folder
            // right after its commit must find it closed.
            inner = None;
        }
        answer(answers, replies);
        if done {
            return;
        }
    }
}

/// The leader's first group on the caller's own thread (the caller found no leader, so its request
/// is in this group): a sequential commit then crosses no thread, as a commit thread's start and its
/// answer would make it cross two. When more requests queued meanwhile, the lead passes to a commit
/// thread (the caller goes on at once, its own answer sent).
pub(super) fn lead_here(inner: &Arc<Inner>) {
    let Some(group) = inner.queue.next_group(|waiting| waiting.drain(..).collect()) else { return };
    let (answers, replies, done) = commit_next(inner, group);
    answer(answers, replies);
    if !done {
        let inner = inner.clone();
        tokio::task::spawn_blocking(move || commit_loop(inner));
    }
}

/// Commits `group` under the writer lock; returns its answers, their replies, and whether the queue
/// released its leader (no request waits: the next one starts a leader again).
fn commit_next(
    i: &Arc<Inner>,
    group: Vec<(Request, Answer)>,
) -> (Vec<Answer>, Result<Vec<Reply>, StoreError>, bool) {
    let (requests, answers): (Vec<Request>, Vec<Answer>) = group.into_iter().unzip();
    let replies = {
        let mut w = i.writer.lock().unwrap_or_else(|e| e.into_inner());
        commit_group(i, &mut w, &requests)
    };
    (answers, replies, i.queue.release_if_idle())
}

/// Sends each request of a group its reply, or a copy of the group's error.
fn answer(answers: Vec<Answer>, replies: Result<Vec<Reply>, StoreError>) {
    match replies {
        Ok(replies) => {
            for (answer, reply) in answers.into_iter().zip(replies) {
                let _ = answer.send(Ok(reply));
            }
        }
        Err(e) => {
            let message = e.to_string();
            for answer in answers {
                let _ = answer.send(Err(clone_error(&e, &message)));
            }
        }
    }
}

/// A copy of `e` for every request of a failed group (store errors are not `Clone`: they carry sources).
fn clone_error(e: &StoreError, message: &str) -> StoreError {
    match e {
        StoreError::FailStopped { path, cause } => {
            StoreError::FailStopped { path: path.clone(), cause: cause.clone() }
        }
        StoreError::Corrupted { run, step, file, detail, remedy } => StoreError::Corrupted {
            run: run.clone(),
            step: *step,
            file: file.clone(),
            detail: detail.clone(),
            remedy,
        },
        _ => StoreError::backend("the commit failed", message.to_owned()),
    }
}

/// Commits one group: validates it against sled, the groups behind and itself, writes its record to
/// the log (the commit point), hands it to the applier, then checkpoints when due. Nothing is answered
/// before the record is durable, and nothing reaches sled before it is in the log.
fn commit_group(inner: &Arc<Inner>, w: &mut Writer, requests: &[Request]) -> Result<Vec<Reply>, StoreError> {
    inner.check()?;
    w.redo.clear();
    let (replies, writes) = plan(inner, &mut w.redo, requests)?;
    if !w.redo.is_empty() {
        let seq = w.next_seq;
        let logged = if std::mem::take(&mut w.inject_log_failure) {
            Err(std::io::Error::other("injected log write failure").to_string())
        } else {
            w.log.append(seq, w.redo.bytes()).and_then(|()| w.log.commit()).map_err(|e| e.to_string())
        };
        logged.map_err(|cause| inner.fail_stop(format!("writing commit group {seq} to the log: {cause}")))?;
        w.syncs += 1;
        w.next_seq += 1;
        w.since_checkpoint += w.redo.bytes().len() as u64;
        apply_behind(inner, seq, w.redo.take(), writes)?;
    }
    let asked = requests.iter().any(|r| matches!(r, Request::Checkpoint));
    if asked || w.since_checkpoint >= inner.options.checkpoint_bytes {
        inner.checkpoint(w)?;
    }
    Ok(replies)
}

/// Under `Durability::Async`: the request alone, applied to sled without the log (serialized with the
/// other writers by the writer lock).
pub(super) fn run_inline(inner: &Inner, request: Request) -> Result<Reply, StoreError> {
    let mut w = inner.writer.lock().unwrap_or_else(|e| e.into_inner());
    if matches!(request, Request::Checkpoint) {
        inner.flush_index()?;
        return Ok(Reply::Done);
    }
    w.redo.clear();
    let (mut replies, _) = plan(inner, &mut w.redo, std::slice::from_ref(&request))?;
    if !w.redo.is_empty() {
        inner.apply_record(w.redo.bytes(), None)?;
    }
    Ok(replies.remove(0))
}

/// Checks every request of a group, in order, against sled, the groups behind and the group's own
/// earlier writes, and records the writes of those that commit in `redo` (and returns them by key).
/// Writes nothing: on any error (an injected failure, a damaged row) the whole group fails and nothing
/// of it is anywhere.
fn plan(
    inner: &Inner,
    redo: &mut RedoWriter,
    requests: &[Request],
) -> Result<(Vec<Reply>, Writes), StoreError> {
    let mut tx = Overlay { inner, writes: BTreeMap::new(), redo };
    let replies = requests.iter().map(|r| tx.request(r)).collect::<Result<_, _>>()?;
    Ok((replies, tx.writes))
}

/// sled as the group being planned sees it: sled's values, under the groups behind (newest on top),
/// under the group's own writes.
struct Overlay<'a> {
    inner: &'a Inner,
    writes: Writes,
    redo: &'a mut RedoWriter,
}

impl Overlay<'_> {
    fn get(&self, t: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let key = (t, key.to_vec());
        if let Some(v) = self.writes.get(&key) {
            return Ok(v.clone());
        }
        // No group is added behind while this one is planned (its leader adds them), and the applier
        // drops a group only once sled holds it: a key no group behind wrote reads the same in sled.
        if let Some(v) = self.inner.applier.behind().get(&key) {
            return Ok(v);
        }
        Ok(self.inner.read_index(|| self.inner.tree(t).get(&key.1))?.map(|v| v.to_vec()))
    }

    fn put(&mut self, t: TreeId, key: &[u8], value: &[u8]) {
        self.redo.put(t, key, value);
        self.writes.insert((t, key.to_vec()), Some(value.to_vec()));
    }

    fn remove(&mut self, t: TreeId, key: &[u8]) {
        self.redo.remove(t, key);
        self.writes.insert((t, key.to_vec()), None);
    }

    fn request(&mut self, request: &Request) -> Result<Reply, StoreError> {
        Ok(match request {
            Request::Save {
                run_id,
                step,
                key,
                record,
                outbox,
                events,
                fingerprint,
                status,
                expected_version,
            } => {
                let save = Save {
                    run_id,
                    step: *step,
                    key,
                    record,
                    outbox,
                    events,
                    fingerprint,
                    status,
                    expected_version: *expected_version,
                };
                Reply::Outcome(self.save(save)?)
            }
            Request::Status { run_id, status, events, pending, expected_version } => {
                Reply::Outcome(self.status(run_id, status, events, pending.as_deref(), *expected_version)?)
            }
            Request::Remove { tree, keys } => {
                let mut removed = 0;
                for k in keys {
                    if self.get(*tree, k)?.is_some() {
                        self.remove(*tree, k);
                        removed += 1;
                    }
                }
                Reply::Removed(removed)
            }
            Request::Effect { record, expected } => Reply::Effect(self.effect(record, expected.as_ref())?),
            Request::Mailbox { run_id, op } => {
                let exists = self.get(TreeId::Runs, run_id.as_bytes())?.is_some();
                let stored = self.get(TreeId::Mailboxes, run_id.as_bytes())?;
                let (reply, write) = apply_to_bytes(stored.as_deref(), op.clone(), exists)?;
                if let Some(bytes) = write {
                    self.put(TreeId::Mailboxes, run_id.as_bytes(), &bytes);
                }
                Reply::Mailbox(reply)
            }
            Request::Schedule { name, op } => {
                let stored = self.get(TreeId::Schedules, name.as_bytes())?;
                let (reply, write) = graph_store::schedule::apply_to_bytes(stored.as_deref(), op.clone())?;
                match write {
                    Some(RowWrite::Put(bytes)) => self.put(TreeId::Schedules, name.as_bytes(), &bytes),
                    Some(RowWrite::Delete) => self.remove(TreeId::Schedules, name.as_bytes()),
                    None => {}
                }
                Reply::Schedule(reply)
            }
            Request::Checkpoint => Reply::Done,
        })
    }

    fn row(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        self.get(TreeId::Runs, run_id.as_bytes())?.map(|b| self.inner.decode_run(run_id, &b)).transpose()
    }

    /// The store contract's checks, in order, then the three writes (each followed by the fail point).
    fn save(&mut self, s: Save<'_>) -> Result<CommitOutcome, StoreError> {
        let ck = cp_key(s.run_id, s.step);
        let row = self.row(s.run_id)?;
        // A step past the run's latest has neither a checkpoint nor a key yet: both are written with the
        // row that moves the latest step on (one group, applied as one). The two reads, misses that
        // search sled's index, are left out for it: the common commit, the next step of a run.
        let past_latest = row.as_ref().is_some_and(|r| s.step > r.latest_step);
        let key_seen = !past_latest && self.get(TreeId::Keys, s.key.as_bytes())?.is_some();
        let taken = match key_seen || past_latest {
            false => self.get(TreeId::Checkpoints, &ck)?.map(|b| decode(s.run_id, s.step, &b)).transpose()?,
            true => None, // decided by the key, or nothing to find
        };
        let facts = CommitFacts::new(s.key, s.expected_version)
            .key_seen(key_seen)
            .step_taken_by(taken.as_ref().map(|t| t.idempotency_key.as_str()))
            .version(row.as_ref().map_or(0, |r| r.version));
        let version = match decide(&facts) {
            Verdict::Write { version } => version,
            Verdict::Refuse(outcome) => return Ok(outcome),
        };
        let fail = &self.inner.fail;
        let wrote = |n: usize| if fail.hit(n) { Err(FailPoint::error()) } else { Ok(()) };
        self.put(TreeId::Keys, s.key.as_bytes(), &ck);
        wrote(1)?;
        self.put(TreeId::Checkpoints, &ck, s.record);
        for (i, row) in s.outbox.iter().enumerate() {
            self.put(TreeId::Outbox, &outbox_key(s.run_id, s.step, i), &encode_outbox(row));
        }
        self.append_events(s.run_id, s.events);
        // Removed unread: a read of sled on the commit's path costs more than a removal behind it.
        self.remove(TreeId::Pending, s.run_id.as_bytes());
        wrote(2)?;
        let info = RunInfo::after_commit(
            row.as_ref(),
            s.run_id,
            s.step,
            s.status,
            s.fingerprint,
            Encoded::head_after(None, s.events),
        );
        self.put(TreeId::Runs, s.run_id.as_bytes(), &encode_run(&info));
        wrote(3)?;
        Ok(CommitOutcome::Committed { version })
    }

    /// `Store::put_effect`: the compare-and-set the memory store defines, on the journal's trees.
    fn effect(
        &mut self,
        record: &EffectRecord,
        expected: Option<&EffectState>,
    ) -> Result<EffectOutcome, StoreError> {
        let at = self.get(TreeId::EffectKeys, record.key.as_bytes())?;
        let current = match &at {
            Some(at) => self.get(TreeId::Effects, at)?.map(|b| decode_effect(&b)).transpose()?,
            None => None,
        };
        let outcome = decide_effect(false, current.as_ref(), expected);
        if outcome == EffectOutcome::Written {
            let at = at.unwrap_or_else(|| effect_tree_key(record));
            self.put(TreeId::EffectKeys, record.key.as_bytes(), &at);
            self.put(TreeId::Effects, &at, &encode_effect(record));
        }
        Ok(outcome)
    }

    fn status(
        &mut self,
        run_id: &str,
        status: &RunStatus,
        events: &[Encoded],
        pending: Option<&[u8]>,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        let row = self.row(run_id)?;
        let verdict = decide_status(row.as_ref().map(|r| r.version), false, expected_version);
        let Some(mut info) = row.filter(|_| verdict.writes()) else { return Ok(verdict.outcome()) };
        info.after_status(status, Encoded::head_after(None, events));
        self.append_events(run_id, events);
        if let Some(p) = pending {
            self.put(TreeId::Pending, run_id.as_bytes(), p);
        }
        self.put(TreeId::Runs, run_id.as_bytes(), &encode_run(&info));
        Ok(verdict.outcome())
    }

    fn append_events(&mut self, run_id: &str, events: &[Encoded]) {
        for e in events {
            self.put(TreeId::Events, &cp_key(run_id, e.head.seq), &e.bytes);
        }
    }
}

/// A `Request::Save`, borrowed.
struct Save<'a> {
    run_id: &'a Arc<str>,
    step: u64,
    key: &'a str,
    record: &'a [u8],
    outbox: &'a [OutboxRow],
    events: &'a [Encoded],
    fingerprint: &'a Arc<str>,
    status: &'a RunStatus,
    expected_version: u64,
}
