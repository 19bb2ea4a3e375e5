//! Group commit through the commit log.
//!
//! The first request to find no commit thread starts one (a blocking task, so dropping a caller cannot
//! stall it). The thread takes every request queued so far — a *group* — and:
//!
//! 1. applies the group to sled in ONE transaction (each request checked on its own: key, step,
//!    version; a later request of the group sees the earlier ones), recording its writes;
//! 2. appends those writes to the commit log as one record and `fdatasync`s it (one device round trip
//!    for the whole group);
//! 3. checkpoints when enough log has accumulated (see [`Inner::checkpoint`]);
//! 4. answers every request of the group, and repeats until the queue is empty.
//!
//! Requests arriving during a group form the next group, so one sequential run pays one log sync per
//! step and N concurrent runs share them. An I/O error in 1–3 fail-stops the store before anything is
//! answered: no request of a group whose record may not be durable is acknowledged.

use std::cell::RefCell;
use std::sync::Arc;

use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError, TransactionalTree};
use tokio::sync::oneshot;

use super::redo::{RedoWriter, TreeId};
use super::{APPLIED, Inner, cp_key, guard};
use crate::error::StoreError;
use crate::store::commit_log::{CommitLog, Manifest};
use crate::store::record::{decode, decode_run, encode, encode_run};
use crate::store::{Checkpoint, CommitOutcome, RunInfo, RunStatus};

/// A write the commit thread performs.
pub(super) enum Request {
    /// `Store::save_checkpoint`.
    Save {
        run_id: Arc<str>,
        step: u64,
        key: String,
        record: Vec<u8>,
        fingerprint: Arc<str>,
        status: RunStatus,
        expected_version: u64,
    },
    /// `Store::set_status`.
    Status { run_id: String, status: RunStatus, expected_version: u64 },
    /// Removes keys of a tree (`Store::prune`).
    Remove { tree: TreeId, keys: Vec<Vec<u8>> },
    /// Makes sled durable now (`SledStore::flush`).
    Checkpoint,
}

impl Request {
    pub(super) fn save(cp: &Checkpoint, status: &RunStatus, expected_version: u64) -> Self {
        Request::Save {
            run_id: cp.run_id.clone(),
            step: cp.step,
            key: cp.idempotency_key.clone(),
            record: encode(cp),
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
    Done,
}

type Answer = oneshot::Sender<Result<Reply, StoreError>>;

/// Requests waiting for the commit thread.
#[derive(Default)]
pub(super) struct Queue {
    pending: Vec<(Request, Answer)>,
    /// A commit thread is draining the queue.
    leader: bool,
}

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

/// Queues a request; true when the caller must start the commit thread.
pub(super) fn enqueue(inner: &Inner, request: Request, answer: Answer) -> bool {
    let mut q = inner.queue.lock().unwrap_or_else(|e| e.into_inner());
    q.pending.push((request, answer));
    !std::mem::replace(&mut q.leader, true)
}

/// The commit thread: commits groups until the queue is empty.
pub(super) fn commit_loop(inner: Arc<Inner>) {
    let mut inner = Some(inner);
    loop {
        let i = inner.as_ref().expect("held until the last group");
        let group = std::mem::take(&mut i.queue.lock().unwrap_or_else(|e| e.into_inner()).pending);
        let (requests, answers): (Vec<Request>, Vec<Answer>) = group.into_iter().unzip();
        let replies = {
            let mut w = i.writer.lock().unwrap_or_else(|e| e.into_inner());
            commit_group(i, &mut w, &requests)
        };
        let done = {
            let mut q = i.queue.lock().unwrap_or_else(|e| e.into_inner());
            let done = q.pending.is_empty();
            if done {
                q.leader = false;
            }
            done
        };
        if done {
            // Release the store before answering: a caller that drops its handle and reopens the folder
            // right after its commit must find it closed.
            inner = None;
        }
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
        if done {
            return;
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

/// Commits one group: sled, then the log, then a checkpoint when due. Nothing is answered before the
/// group's log record is durable.
fn commit_group(inner: &Inner, w: &mut Writer, requests: &[Request]) -> Result<Vec<Reply>, StoreError> {
    inner.check()?;
    let redo = RefCell::new(std::mem::take(&mut w.redo));
    let replies = apply(inner, &redo, Some(w.next_seq), requests);
    w.redo = redo.into_inner();
    let replies = replies?;
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
    }
    let asked = requests.iter().any(|r| matches!(r, Request::Checkpoint));
    if asked || w.since_checkpoint >= inner.options.checkpoint_bytes {
        inner.checkpoint(w)?;
    }
    Ok(replies)
}

/// Under `Durability::Async`: the request alone, applied to sled without the log.
pub(super) fn run_inline(inner: &Inner, request: Request) -> Result<Reply, StoreError> {
    if matches!(request, Request::Checkpoint) {
        inner.flush_index()?;
        return Ok(Reply::Done);
    }
    let redo = RefCell::new(RedoWriter::default());
    let mut replies = apply(inner, &redo, None, std::slice::from_ref(&request))?;
    Ok(replies.remove(0))
}

/// Applies `requests` to sled in one transaction, recording their writes in `redo`; with a `seq`, also
/// records it as the last group sled applied.
fn apply(
    inner: &Inner,
    redo: &RefCell<RedoWriter>,
    seq: Option<u64>,
    requests: &[Request],
) -> Result<Vec<Reply>, StoreError> {
    let trees = (&*inner.runs, &*inner.checkpoints, &*inner.keys, &*inner.meta);
    let result = guard(&inner.path, || {
        trees.transaction(|(runs, cps, keys, meta)| {
            let mut redo = redo.borrow_mut();
            // sled may run the closure again after a conflict: start from nothing each time.
            redo.clear();
            let tx = Tx { inner, runs, cps, keys };
            let replies = requests.iter().map(|r| tx.apply(r, &mut redo)).collect::<Result<Vec<_>, _>>()?;
            if let Some(seq) = seq
                && !redo.is_empty()
            {
                meta.insert(APPLIED, &seq.to_be_bytes())?;
            }
            Ok(replies)
        })
    })?;
    result.map_err(|e| match e {
        TransactionError::Abort(e) => e,
        TransactionError::Storage(e) => inner.fail_stop(format!("writing sled: {}", super::sled_cause(&e))),
    })
}

type TxResult<T> = Result<T, ConflictableTransactionError<StoreError>>;

fn abort(e: StoreError) -> ConflictableTransactionError<StoreError> {
    ConflictableTransactionError::Abort(e)
}

/// The trees of one commit transaction.
struct Tx<'a> {
    inner: &'a Inner,
    runs: &'a TransactionalTree,
    cps: &'a TransactionalTree,
    keys: &'a TransactionalTree,
}

impl Tx<'_> {
    fn apply(&self, request: &Request, redo: &mut RedoWriter) -> TxResult<Reply> {
        Ok(match request {
            Request::Save { run_id, step, key, record, fingerprint, status, expected_version } => {
                let save = Save {
                    run_id,
                    step: *step,
                    key,
                    record,
                    fingerprint,
                    status,
                    expected_version: *expected_version,
                };
                Reply::Outcome(self.save(save, redo)?)
            }
            Request::Status { run_id, status, expected_version } => {
                Reply::Outcome(self.status(run_id, status, *expected_version, redo)?)
            }
            Request::Remove { tree, keys } => {
                let t = match tree {
                    TreeId::Runs => self.runs,
                    TreeId::Checkpoints => self.cps,
                    TreeId::Keys => self.keys,
                };
                for k in keys {
                    t.remove(k.as_slice())?;
                    redo.remove(*tree, k);
                }
                Reply::Removed(keys.len())
            }
            Request::Checkpoint => Reply::Done,
        })
    }

    fn row(&self, run_id: &str) -> TxResult<Option<RunInfo>> {
        match self.runs.get(run_id.as_bytes())? {
            Some(b) => Ok(Some(decode_run(&b).map_err(abort)?)),
            None => Ok(None),
        }
    }

    /// The store contract's checks, in order, then the three writes (each followed by the fail point).
    fn save(&self, s: Save<'_>, redo: &mut RedoWriter) -> TxResult<CommitOutcome> {
        let ck = cp_key(s.run_id, s.step);
        let row = self.row(s.run_id)?;
        let version = row.as_ref().map_or(0, |r| r.version);
        if self.keys.get(s.key.as_bytes())?.is_some() {
            return Ok(CommitOutcome::AlreadyCommitted { version });
        }
        if let Some(existing) = self.cps.get(&ck)? {
            let existing = decode(s.run_id, s.step, &existing).map_err(abort)?;
            return Ok(CommitOutcome::StepTaken { existing_key: existing.idempotency_key, version });
        }
        if version != s.expected_version {
            return Ok(CommitOutcome::VersionConflict { current: version });
        }
        let mut writes = 0;
        let mut wrote = || -> TxResult<()> {
            writes += 1;
            if self.inner.fail.hit(writes) {
                return Err(abort(StoreError::backend("injected failure", "fail point")));
            }
            Ok(())
        };
        self.keys.insert(s.key.as_bytes(), ck.as_slice())?;
        redo.put(TreeId::Keys, s.key.as_bytes(), &ck);
        wrote()?;
        self.cps.insert(ck.as_slice(), s.record)?;
        redo.put(TreeId::Checkpoints, &ck, s.record);
        wrote()?;
        let info = RunInfo::new(
            &**s.run_id,
            s.status.clone(),
            row.as_ref().map_or(s.step, |r| r.latest_step.max(s.step)),
            version + 1,
            row.map_or_else(|| s.fingerprint.to_string(), |r| r.graph_fingerprint),
        );
        let encoded = encode_run(&info);
        self.runs.insert(s.run_id.as_bytes(), encoded.as_slice())?;
        redo.put(TreeId::Runs, s.run_id.as_bytes(), &encoded);
        wrote()?;
        Ok(CommitOutcome::Committed { version: version + 1 })
    }

    fn status(
        &self,
        run_id: &str,
        status: &RunStatus,
        expected_version: u64,
        redo: &mut RedoWriter,
    ) -> TxResult<CommitOutcome> {
        let Some(mut info) = self.row(run_id)? else {
            return Ok(CommitOutcome::VersionConflict { current: 0 });
        };
        if info.version != expected_version {
            return Ok(CommitOutcome::VersionConflict { current: info.version });
        }
        info.version += 1;
        info.status = status.clone();
        let encoded = encode_run(&info);
        self.runs.insert(run_id.as_bytes(), encoded.as_slice())?;
        redo.put(TreeId::Runs, run_id.as_bytes(), &encoded);
        Ok(CommitOutcome::Committed { version: info.version })
    }
}

/// A `Request::Save`, borrowed.
struct Save<'a> {
    run_id: &'a Arc<str>,
    step: u64,
    key: &'a str,
    record: &'a [u8],
    fingerprint: &'a Arc<str>,
    status: &'a RunStatus,
    expected_version: u64,
}
