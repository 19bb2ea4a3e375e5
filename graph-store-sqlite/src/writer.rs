//! The writer connection: group commit.
//!
//! A caller that finds the connection free commits its own request as a group of one (see the module
//! above). The writer thread blocks for a request, takes the connection, then takes every other request
//! queued so far (a *group*, at most [`MAX_GROUP`]) and runs the group in one `BEGIN IMMEDIATE`
//! transaction, one request after the other. A request that its checks refuse (`AlreadyCommitted`,
//! `StepTaken`, `VersionConflict`) leaves nothing written: the key row is inserted first and a
//! conflict there writes nothing, and a later refusal deletes the rows the request inserted before it.
//! A request that fails part-way (an I/O error, a full disk, a fail point) cannot be undone alone: the
//! transaction is rolled back, that request is answered with its error, and the rest of the group runs
//! again in a new transaction. One `COMMIT` (one WAL sync under `synchronous = FULL`) makes the group
//! durable, and only then is each request answered: with its outcome, or with the error of the `COMMIT`
//! if that failed (then nothing of the group is written). A group whose requests were all refused is
//! rolled back: no sync.
//!
//! No savepoints: one around each request would let a failing request roll back alone, but SQLite then
//! copies every page a request touches first into the savepoint's journal. Measured on the
//! `concurrent_sqlite` bench (64 runs), see bench/analysis.md.

use std::cell::RefCell;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;

use graph_store::commit::{CommitFacts, Verdict, decide, decide_status};
use graph_store::events::{Encoded, Event};
use graph_store::journal::{decide_effect, decode_effect, encode_effect, encode_outbox};
use graph_store::known::KnownRows;
use graph_store::record::{decode, decode_run_of, encode, encode_run};
use graph_store::{
    Checkpoint, CommitOutcome, EffectOutcome, EffectRecord, EffectState, FailPoint, RunInfo, RunStatus,
    StoreError,
};

use crate::errors::{Stopped, int, is_io_failure, is_unique_violation, sql_error_on, uint};

/// At most this many requests in one transaction.
const MAX_GROUP: usize = 512;

/// Counters shared by the store and its writer thread: what the store reports, and the queue's length.
#[derive(Default)]
pub(super) struct Stats {
    /// Write transactions committed.
    pub(super) transactions: AtomicU64,
    /// Requests answered.
    pub(super) requests: AtomicU64,
    /// Requests sent to the writer thread and not yet taken into a group: while there are any, callers
    /// queue behind them rather than commit inline (the writer thread is not starved of the connection,
    /// and they share its group's sync).
    pub(super) queued: AtomicU64,
}

/// A write for the writer thread.
pub(super) enum Op {
    /// `Store::save_checkpoint`.
    Save {
        run_id: Arc<str>,
        step: u64,
        key: String,
        record: Vec<u8>,
        /// (outbox key, encoded row), in emit order.
        outbox: Vec<(String, Vec<u8>)>,
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
    /// `Store::prune`.
    Prune { run_id: String, keep: usize },
    /// `Store::ack_outbox`.
    Ack { keys: Vec<String> },
    /// `Store::put_effect`.
    Effect { record: Box<EffectRecord>, expected: Option<EffectState> },
    /// `Store::mailbox_op`.
    Mailbox { run_id: String, op: graph_store::mailbox::MailboxOp },
    /// `Store::schedule_op`.
    Schedule { name: String, op: graph_store::schedule::ScheduleOp },
    /// Test hook: overwrite a checkpoint's bytes (`Some`), or delete its row (`None`).
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
    PutRaw { run_id: String, step: u64, bytes: Option<Vec<u8>> },
    /// The writer connection's `journal_mode` and `synchronous`, and its log's syncs.
    Pragmas,
}

impl Op {
    pub(super) fn save(cp: &Checkpoint, events: &[Event], status: &RunStatus, expected_version: u64) -> Self {
        Op::Save {
            run_id: cp.run_id.clone(),
            step: cp.step,
            key: cp.idempotency_key.clone(),
            record: encode(cp),
            outbox: cp.outbox.iter().map(|r| (r.key.clone(), encode_outbox(r))).collect(),
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
    Count(usize),
    Effect(EffectOutcome),
    Mailbox(graph_store::mailbox::MailboxReply),
    Schedule(graph_store::schedule::ScheduleReply),
    /// `journal_mode`, `synchronous`, and the log's syncs (`vfs::log_syncs`, read by a test hook).
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
    Pragmas(String, u32, Option<(u64, u64)>),
    Done,
}

/// A request and where its answer goes.
pub(super) struct Job {
    pub(super) op: Op,
    pub(super) answer: oneshot::Sender<Result<Reply, StoreError>>,
}

/// What a request did to the open transaction.
enum Applied {
    /// Its writes are part of the group's transaction.
    Keep(Reply),
    /// The checks refused it, and it left nothing written (what it wrote before a check refused it,
    /// it deleted again).
    Refused(Reply),
}

/// The writer thread's state.
pub(super) struct Writer {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
    pub(super) stats: Arc<Stats>,
    pub(super) fail: FailPoint,
    /// Test hook: as `fail`, with an I/O error.
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
    pub(super) io_fail: FailPoint,
    /// The run rows this connection committed: a commit of a run whose row is kept does not read it.
    /// Kept while no other connection commits to the file (`data_version`) and forgotten when a
    /// transaction rolls back (`rollback`).
    pub(super) known: KnownRows,
    /// `PRAGMA data_version` at the start of this connection's last write transaction: it changes when
    /// another connection commits.
    pub(super) data_version: Option<i64>,
    /// Runs without a pending step: those whose pending step this connection deleted since the kept
    /// rows were last forgotten, and forgotten with them or when the run ends (at most
    /// `KnownRows::MAX`, as the rows). A commit of one need not delete it again.
    pub(super) no_pending: RefCell<HashSet<Arc<str>>>,
    /// Set by an I/O error of this connection: the store refuses every operation from then on.
    pub(super) stopped: Arc<Stopped>,
}

/// Commits groups from `requests` until every sender is gone, taking `writer` for each group.
pub(super) fn run(writer: &std::sync::Mutex<Writer>, requests: mpsc::Receiver<Job>) {
    while let Ok(first) = requests.recv() {
        let mut group = vec![first];
        let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
        // Taken after the lock: the requests that queued while a caller committed inline join this group.
        while group.len() < MAX_GROUP {
            match requests.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        w.stats.queued.fetch_sub(group.len() as u64, Ordering::SeqCst);
        w.commit_group(group);
    }
}

impl Writer {
    fn err(&self, what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| {
            let io = is_io_failure(&e);
            let error = sql_error_on(&self.conn, &self.path, what, e);
            if !io {
                return error;
            }
            // No checkpoint when this connection closes: what the log holds is read back at the next
            // open, not copied into the database file by a store that can no longer trust its syncs.
            let _ =
                self.conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true);
            self.stopped.stop(&self.path, error)
        }
    }

    pub(super) fn commit_group(&mut self, group: Vec<Job>) {
        let mut jobs = Vec::with_capacity(group.len());
        for job in group {
            if matches!(job.op, Op::Pragmas) {
                let _ = job.answer.send(self.pragmas());
            } else {
                jobs.push(job);
            }
        }
        self.commit_jobs(jobs);
    }

    /// Runs `jobs` in one transaction and answers each. A request that fails part-way leaves writes
    /// that only rolling the transaction back undoes: then it is answered with its error and the
    /// others run again, in a new transaction (one request fewer each time), unless that error stopped
    /// the store (an I/O error: they get `FailStopped`).
    fn commit_jobs(&mut self, mut jobs: Vec<Job>) {
        'group: while !jobs.is_empty() {
            // Checked before each transaction: a request that failed part-way with an I/O error
            // stopped the store, and the rest of its group must not be committed after it.
            if let Err(e) = self.stopped.check(&self.path) {
                self.stats.requests.fetch_add(jobs.len() as u64, Ordering::Relaxed);
                return fail_all(jobs, &e);
            }
            if let Err(e) = self.begin() {
                return fail_all(jobs, &e);
            }
            let mut replies = Vec::with_capacity(jobs.len());
            let mut wrote = false;
            for (i, job) in jobs.iter().enumerate() {
                match self.apply(&job.op) {
                    Ok(Applied::Keep(r)) => {
                        wrote = true;
                        replies.push(Ok(r));
                    }
                    Ok(Applied::Refused(r)) => replies.push(Ok(r)),
                    Err(e) => {
                        if let Err(r) = self.rollback() {
                            return fail_all(jobs, &r);
                        }
                        self.stats.requests.fetch_add(1, Ordering::Relaxed);
                        let _ = jobs.remove(i).answer.send(Err(e));
                        continue 'group;
                    }
                }
            }
            if !wrote {
                // Every request was refused and wrote nothing: no sync for an empty transaction.
                if let Err(e) = self.rollback() {
                    return fail_all(jobs, &e);
                }
                return self.answer(jobs, replies);
            }
            if let Err(e) = self.exec("COMMIT") {
                let e = self.err("committing a write transaction")(e);
                let _ = self.rollback();
                return fail_all(jobs, &e);
            }
            self.stats.transactions.fetch_add(1, Ordering::Relaxed);
            return self.answer(jobs, replies);
        }
    }

    /// Answers `jobs` with `replies`.
    fn answer(&self, jobs: Vec<Job>, replies: Vec<Result<Reply, StoreError>>) {
        self.stats.requests.fetch_add(jobs.len() as u64, Ordering::Relaxed);
        for (job, reply) in jobs.into_iter().zip(replies) {
            let _ = job.answer.send(reply);
        }
    }

    /// Forgets what the writer keeps about the runs: their rows, and which have no pending step.
    fn forget(&self) {
        self.known.clear();
        self.no_pending.borrow_mut().clear();
    }

    /// Starts a write transaction, and forgets the kept run rows if another connection has committed
    /// since this one's last transaction.
    fn begin(&mut self) -> Result<(), StoreError> {
        self.exec("BEGIN IMMEDIATE").map_err(self.err("starting a write transaction"))?;
        let version = self
            .conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(self.err("reading the data version"));
        let version = match version {
            Ok(v) => v,
            Err(e) => {
                let _ = self.rollback();
                return Err(e);
            }
        };
        if self.data_version.replace(version) != Some(version) {
            self.forget();
        }
        Ok(())
    }

    /// Rolls the open transaction back (SQLite may have ended it already, after some errors), and
    /// forgets the kept run rows (some may have been written in it).
    fn rollback(&self) -> Result<(), StoreError> {
        self.forget();
        if self.conn.is_autocommit() {
            return Ok(());
        }
        self.exec("ROLLBACK").map_err(self.err("rolling back a write transaction"))
    }

    /// Runs a statement without parameters through the statement cache (transaction control).
    fn exec(&self, sql: &str) -> rusqlite::Result<()> {
        self.conn.prepare_cached(sql)?.execute([]).map(drop)
    }

    fn pragmas(&self) -> Result<Reply, StoreError> {
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .map_err(self.err("reading the journal mode"))?;
        let sync: u32 = self
            .conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .map_err(self.err("reading the synchronous setting"))?;
        Ok(Reply::Pragmas(mode, sync, crate::vfs::log_syncs(&self.conn)))
    }

    fn apply(&self, op: &Op) -> Result<Applied, StoreError> {
        match op {
            Op::Save { run_id, step, key, record, outbox, events, fingerprint, status, expected_version } => {
                self.save(Save {
                    run_id,
                    step: *step,
                    key,
                    record,
                    outbox,
                    events,
                    fingerprint,
                    status,
                    expected_version: *expected_version,
                })
            }
            Op::Status { run_id, status, events, pending, expected_version } => {
                self.status(run_id, status, events, pending.as_deref(), *expected_version)
            }
            Op::Prune { run_id, keep } => self.prune(run_id, *keep),
            Op::Ack { keys } => {
                let mut stmt = self
                    .conn
                    .prepare_cached("DELETE FROM outbox WHERE key = ?1")
                    .map_err(self.err("acknowledging outbox rows"))?;
                let mut n = 0;
                for k in keys {
                    n += stmt.execute(params![k]).map_err(self.err("acknowledging outbox rows"))?;
                }
                Ok(Applied::Keep(Reply::Count(n)))
            }
            Op::Effect { record, expected } => self.effect(record, expected.as_ref()),
            Op::Mailbox { run_id, op } => self.mailbox(run_id, op),
            Op::Schedule { name, op } => self.schedule(name, op),
            Op::PutRaw { run_id, step, bytes } => {
                let step = int(*step).unwrap_or(i64::MAX);
                match bytes {
                    Some(bytes) => self
                        .conn
                        .prepare_cached("UPDATE checkpoints SET record = ?3 WHERE run_id = ?1 AND step = ?2")
                        .and_then(|mut s| s.execute(params![run_id, step, bytes])),
                    None => self
                        .conn
                        .prepare_cached("DELETE FROM checkpoints WHERE run_id = ?1 AND step = ?2")
                        .and_then(|mut s| s.execute(params![run_id, step])),
                }
                .map_err(self.err("overwriting or removing a checkpoint"))?;
                Ok(Applied::Keep(Reply::Done))
            }
            Op::Pragmas => self.pragmas().map(Applied::Keep),
        }
    }

    /// The row of `run_id` in this transaction: the one kept, or the stored one.
    fn row(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        if let Some(info) = self.known.info(run_id) {
            return Ok(Some(info));
        }
        let bytes: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT row FROM runs WHERE run_id = ?1")
            .and_then(|mut s| s.query_row(params![run_id], |r| r.get(0)).optional())
            .map_err(self.err("reading a run row"))?;
        bytes.map(|b| decode_run_of(run_id, Some(&self.path), &b)).transpose()
    }

    /// Writes the run row `info` over a row whose status is `before` (read in this transaction; `None`:
    /// there is no row, insert it).
    /// The `status` column is written only when the status changes: `runs_by_status` is then left
    /// alone, and a commit dirties one page fewer.
    fn put_row(&self, info: RunInfo, before: Option<&RunStatus>) -> Result<(), StoreError> {
        let latest = int(info.latest_step).unwrap_or(i64::MAX);
        let version = int(info.version).unwrap_or(i64::MAX);
        let status = info.status.as_str();
        let bytes = encode_run(&info);
        let done = match before {
            None => self
                .conn
                .prepare_cached(
                    "INSERT INTO runs (run_id, status, latest_step, version, row) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .and_then(|mut s| s.execute(params![info.run_id, status, latest, version, bytes])),
            Some(b) if b.as_str() == status => self
                .conn
                .prepare_cached("UPDATE runs SET latest_step = ?2, version = ?3, row = ?4 WHERE run_id = ?1")
                .and_then(|mut s| s.execute(params![info.run_id, latest, version, bytes])),
            Some(_) => self
                .conn
                .prepare_cached(
                    "UPDATE runs SET status = ?2, latest_step = ?3, version = ?4, row = ?5 WHERE run_id = ?1",
                )
                .and_then(|mut s| s.execute(params![info.run_id, status, latest, version, bytes])),
        };
        done.map_err(self.err("writing a run row"))?;
        if info.status.has_ended() {
            // Kept for runs that commit again; one that ended does so only if resumed, and then its
            // commit deletes the pending step (if any) again.
            self.no_pending.borrow_mut().remove(info.run_id.as_str());
        }
        self.known.remember(bytes, info);
        Ok(())
    }

    /// The store contract's checks, by the database's constraints: the key row first, then the
    /// checkpoint row, then the version; each write followed by the fail point.
    fn save(&self, s: Save<'_>) -> Result<Applied, StoreError> {
        let row = self.row(s.run_id)?;
        let version = row.as_ref().map_or(0, |r| r.version);
        let step = int(s.step)?;
        let fail = |n: usize| {
            if self.fail.hit(n) {
                return Err(StoreError::backend("injected failure", "fail point"));
            }
            if self.io_fail.hit(n) {
                let io = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR_WRITE);
                let e = rusqlite::Error::SqliteFailure(io, Some("injected I/O error".into()));
                return Err(self.err("writing a commit (fail point)")(e));
            }
            Ok(())
        };
        // The facts, by the database's constraints: the key row refused is the key seen; the
        // checkpoint row refused, the step taken (by the key stored with it: this commit's own only when
        // the key's row was lost, which only a damaged index of keys does).
        let facts = CommitFacts::new(s.key, s.expected_version).version(version);
        let refused = |outcome| Ok(Applied::Refused(Reply::Outcome(outcome)));
        let key = self
            .conn
            .prepare_cached("INSERT INTO idempotency_keys (key, run_id, step) VALUES (?1, ?2, ?3)")
            .and_then(|mut st| st.execute(params![s.key, &**s.run_id, step]));
        match key {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => return refused(decide(&facts.key_seen(true)).outcome()),
            Err(e) => return Err(self.err("writing an idempotency key")(e)),
        }
        fail(1)?;
        let cp = self
            .conn
            .prepare_cached(
                "INSERT INTO checkpoints (run_id, step, idempotency_key, record) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut st| st.execute(params![&**s.run_id, step, s.key, s.record]));
        match cp {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => {
                let existing: String = self
                    .conn
                    .prepare_cached("SELECT idempotency_key FROM checkpoints WHERE run_id = ?1 AND step = ?2")
                    .and_then(|mut st| st.query_row(params![&**s.run_id, step], |r| r.get(0)))
                    .map_err(self.err("reading a checkpoint's key"))?;
                self.unwrite(s.key, None)?;
                return refused(decide(&facts.step_taken_by(Some(&existing))).outcome());
            }
            Err(e) => return Err(self.err("writing a checkpoint")(e)),
        }
        let version = match decide(&facts) {
            Verdict::Write { version } => version,
            Verdict::Refuse(outcome) => {
                self.unwrite(s.key, Some((&**s.run_id, step)))?;
                return refused(outcome);
            }
        };
        {
            let mut st = self
                .conn
                .prepare_cached(
                    "INSERT INTO outbox (run_id, step, idx, key, row) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(self.err("writing outbox rows"))?;
            for (i, (key, bytes)) in s.outbox.iter().enumerate() {
                st.execute(params![&**s.run_id, step, i as i64, key, bytes])
                    .map_err(self.err("writing outbox rows"))?;
            }
        }
        self.append_events(s.run_id, s.events)?;
        if !self.no_pending.borrow().contains(&**s.run_id) {
            self.conn
                .prepare_cached("DELETE FROM pending WHERE run_id = ?1")
                .and_then(|mut st| st.execute(params![&**s.run_id]))
                .map_err(self.err("clearing the pending step"))?;
            let mut none = self.no_pending.borrow_mut();
            if none.len() >= KnownRows::MAX {
                none.clear();
            }
            none.insert(s.run_id.clone());
        }
        fail(2)?;
        let info = RunInfo::after_commit(
            row.as_ref(),
            s.run_id,
            s.step,
            s.status,
            s.fingerprint,
            Encoded::head_after(None, s.events),
        );
        self.put_row(info, row.as_ref().map(|r| &r.status))?;
        fail(3)?;
        Ok(Applied::Keep(Reply::Outcome(CommitOutcome::Committed { version })))
    }

    /// Deletes what a refused commit wrote before its checks refused it: its key row, and its
    /// checkpoint row when given. (Cheaper than a savepoint around every request of a group, which makes
    /// SQLite copy each page the request touches first: refusals are rare, commits are not.)
    fn unwrite(&self, key: &str, checkpoint: Option<(&str, i64)>) -> Result<(), StoreError> {
        if let Some((run_id, step)) = checkpoint {
            self.conn
                .prepare_cached("DELETE FROM checkpoints WHERE run_id = ?1 AND step = ?2")
                .and_then(|mut st| st.execute(params![run_id, step]))
                .map_err(self.err("undoing a refused commit"))?;
        }
        self.conn
            .prepare_cached("DELETE FROM idempotency_keys WHERE key = ?1")
            .and_then(|mut st| st.execute(params![key]))
            .map_err(self.err("undoing a refused commit"))?;
        Ok(())
    }

    fn status(
        &self,
        run_id: &str,
        status: &RunStatus,
        events: &[Encoded],
        pending: Option<&[u8]>,
        expected_version: u64,
    ) -> Result<Applied, StoreError> {
        let row = self.row(run_id)?;
        let verdict = decide_status(row.as_ref().map(|r| r.version), false, expected_version);
        let Some(mut info) = row.filter(|_| verdict.writes()) else {
            return Ok(Applied::Refused(Reply::Outcome(verdict.outcome())));
        };
        let before = info.status.clone();
        info.after_status(status, Encoded::head_after(None, events));
        self.append_events(run_id, events)?;
        if let Some(p) = pending {
            self.no_pending.borrow_mut().remove(run_id);
            self.conn
                .prepare_cached("INSERT OR REPLACE INTO pending (run_id, step) VALUES (?1, ?2)")
                .and_then(|mut st| st.execute(params![run_id, p]))
                .map_err(self.err("writing the pending step"))?;
        }
        self.put_row(info, Some(&before))?;
        Ok(Applied::Keep(Reply::Outcome(verdict.outcome())))
    }

    fn append_events(&self, run_id: &str, events: &[Encoded]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut st = self
            .conn
            .prepare_cached("INSERT OR REPLACE INTO events (run_id, seq, event) VALUES (?1, ?2, ?3)")
            .map_err(self.err("appending events"))?;
        for e in events {
            st.execute(params![run_id, int(e.head.seq)?, e.bytes]).map_err(self.err("appending events"))?;
        }
        Ok(())
    }

    /// Deletes all but the latest `keep` checkpoints, never the snapshot a kept one starts from.
    fn prune(&self, run_id: &str, keep: usize) -> Result<Applied, StoreError> {
        let steps: Vec<i64> = self
            .conn
            .prepare_cached("SELECT step FROM checkpoints WHERE run_id = ?1 ORDER BY step")
            .and_then(|mut st| st.query_map(params![run_id], |r| r.get(0))?.collect())
            .map_err(self.err("listing checkpoints"))?;
        let Some(&oldest_kept) = steps.iter().rev().nth(keep.max(1) - 1).or(steps.first()) else {
            return Ok(Applied::Keep(Reply::Count(0)));
        };
        let bytes: Vec<u8> = self
            .conn
            .prepare_cached("SELECT record FROM checkpoints WHERE run_id = ?1 AND step = ?2")
            .and_then(|mut st| st.query_row(params![run_id, oldest_kept], |r| r.get(0)))
            .map_err(self.err("reading a checkpoint"))?;
        let oldest = uint(oldest_kept);
        let floor = decode(run_id, oldest, &bytes)?.state.base(oldest);
        let floor = int(floor)?;
        let n = self
            .conn
            .prepare_cached("DELETE FROM checkpoints WHERE run_id = ?1 AND step < ?2")
            .and_then(|mut st| st.execute(params![run_id, floor]))
            .map_err(self.err("pruning checkpoints"))?;
        Ok(Applied::Keep(Reply::Count(n)))
    }

    /// `Store::put_effect`: the compare-and-set the memory store defines.
    fn mailbox(&self, run_id: &str, op: &graph_store::mailbox::MailboxOp) -> Result<Applied, StoreError> {
        let read = self.err("reading a mailbox");
        let exists = self
            .conn
            .prepare_cached("SELECT 1 FROM runs WHERE run_id = ?1")
            .and_then(|mut st| st.query_row(params![run_id], |_| Ok(())).optional())
            .map_err(&read)?
            .is_some();
        let stored: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT bytes FROM mailboxes WHERE run_id = ?1")
            .and_then(|mut st| st.query_row(params![run_id], |r| r.get(0)).optional())
            .map_err(read)?;
        let (reply, write) = graph_store::mailbox::apply_to_bytes(stored.as_deref(), op.clone(), exists)?;
        if let Some(bytes) = write {
            self.conn
                .prepare_cached("INSERT OR REPLACE INTO mailboxes (run_id, bytes) VALUES (?1, ?2)")
                .and_then(|mut st| st.execute(params![run_id, bytes]))
                .map_err(self.err("writing a mailbox"))?;
        }
        Ok(Applied::Keep(Reply::Mailbox(reply)))
    }

    fn schedule(&self, name: &str, op: &graph_store::schedule::ScheduleOp) -> Result<Applied, StoreError> {
        let stored: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT bytes FROM schedules WHERE name = ?1")
            .and_then(|mut st| st.query_row(params![name], |r| r.get(0)).optional())
            .map_err(self.err("reading a schedule"))?;
        let (reply, write) = graph_store::schedule::apply_to_bytes(stored.as_deref(), op.clone())?;
        let written = match write {
            Some(graph_store::schedule::RowWrite::Put(bytes)) => self
                .conn
                .prepare_cached("INSERT OR REPLACE INTO schedules (name, bytes) VALUES (?1, ?2)")
                .and_then(|mut st| st.execute(params![name, bytes])),
            Some(graph_store::schedule::RowWrite::Delete) => self
                .conn
                .prepare_cached("DELETE FROM schedules WHERE name = ?1")
                .and_then(|mut st| st.execute(params![name])),
            None => Ok(0),
        };
        written.map_err(self.err("writing a schedule"))?;
        Ok(Applied::Keep(Reply::Schedule(reply)))
    }

    fn effect(&self, record: &EffectRecord, expected: Option<&EffectState>) -> Result<Applied, StoreError> {
        let bytes: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT record FROM effects WHERE key = ?1")
            .and_then(|mut st| st.query_row(params![record.key], |r| r.get(0)).optional())
            .map_err(self.err("reading an effect"))?;
        let current = bytes.map(|b| decode_effect(&b)).transpose()?;
        let outcome = decide_effect(false, current.as_ref(), expected);
        if outcome == EffectOutcome::Written {
            self.conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO effects (key, run_id, step, path, call_index, record) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .and_then(|mut st| {
                    st.execute(params![
                        record.key,
                        record.run_id,
                        int(record.step).unwrap_or(i64::MAX),
                        record.path,
                        record.call_index,
                        encode_effect(record)
                    ])
                })
                .map_err(self.err("writing an effect"))?;
        }
        Ok(Applied::Keep(Reply::Effect(outcome)))
    }
}

/// Answers every job with (a copy of) `e`.
fn fail_all(jobs: Vec<Job>, e: &StoreError) {
    for job in jobs {
        let _ = job.answer.send(Err(copy_error(e)));
    }
}

/// A copy of `e` for every request of a failed group (store errors are not `Clone`: they carry
/// sources).
fn copy_error(e: &StoreError) -> StoreError {
    match e {
        StoreError::Corrupted { run, step, file, detail, remedy } => StoreError::Corrupted {
            run: run.clone(),
            step: *step,
            file: file.clone(),
            detail: detail.clone(),
            remedy,
        },
        StoreError::Unavailable { message, .. } => StoreError::unavailable(message.clone(), e.to_string()),
        StoreError::UnsupportedSchemaVersion { found, supported } => {
            StoreError::UnsupportedSchemaVersion { found: *found, supported: *supported }
        }
        StoreError::FailStopped { path, cause } => {
            StoreError::FailStopped { path: path.clone(), cause: cause.clone() }
        }
        _ => StoreError::backend("the commit failed", e.to_string()),
    }
}

/// An `Op::Save`, borrowed.
struct Save<'a> {
    run_id: &'a Arc<str>,
    step: u64,
    key: &'a str,
    record: &'a [u8],
    outbox: &'a [(String, Vec<u8>)],
    events: &'a [Encoded],
    fingerprint: &'a Arc<str>,
    status: &'a RunStatus,
    expected_version: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqliteStore;
    use graph_store::Store;
    use graph_store::conformance::checkpoint;

    /// A save request for `run`'s `step` holding `value`, expecting `version`, and where its answer
    /// goes.
    fn save(
        run: &str,
        step: u64,
        value: u64,
        version: u64,
    ) -> (Job, oneshot::Receiver<Result<Reply, StoreError>>) {
        let (answer, rx) = oneshot::channel();
        let op = Op::save(&checkpoint(run, step, value), &[], &RunStatus::Running, version);
        (Job { op, answer }, rx)
    }

    /// The writer of `store` (opened for writing).
    fn writer(store: &SqliteStore) -> std::sync::MutexGuard<'_, Writer> {
        store.inner.writer.as_ref().expect("a writable store").lock().unwrap()
    }

    fn outcome(rx: &mut oneshot::Receiver<Result<Reply, StoreError>>) -> Result<CommitOutcome, String> {
        match rx.try_recv().expect("answered") {
            Ok(Reply::Outcome(o)) => Ok(o),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        }
    }

    /// One group holding a commit, and the three refusals after it: each refused request leaves
    /// nothing written (the same key or step commits afterwards), and one transaction commits the
    /// group.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refused_requests_of_a_group_leave_nothing_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("s.sqlite")).unwrap();
        let (a, mut ra) = save("r", 0, 1, 0);
        let (again, mut r_again) = save("r", 0, 1, 0); // the same key: AlreadyCommitted
        let (other, mut r_other) = save("r", 0, 2, 0); // another key for step 0: StepTaken
        let (stale, mut r_stale) = save("r", 1, 3, 7); // step 1 at a wrong version: VersionConflict
        let (step1, mut r_step1) = save("r", 1, 3, 1); // the same key as `stale`, right version
        let (redo, mut r_redo) = save("r", 0, 2, 1); // `other`'s key again, for step 0: StepTaken
        writer(&store).commit_group(vec![a, again, other, stale, step1, redo]);
        assert_eq!(outcome(&mut ra), Ok(CommitOutcome::Committed { version: 1 }));
        assert_eq!(outcome(&mut r_again), Ok(CommitOutcome::AlreadyCommitted { version: 1 }));
        let first_key = checkpoint("r", 0, 1).idempotency_key;
        let taken = Ok(CommitOutcome::StepTaken { existing_key: first_key.clone(), version: 1 });
        assert_eq!(outcome(&mut r_other), taken);
        assert_eq!(outcome(&mut r_stale), Ok(CommitOutcome::VersionConflict { current: 1 }));
        // Had `stale` left its key or checkpoint row, this would be AlreadyCommitted or StepTaken.
        assert_eq!(outcome(&mut r_step1), Ok(CommitOutcome::Committed { version: 2 }));
        // Had `other` left its key row, this would be AlreadyCommitted.
        let taken = Ok(CommitOutcome::StepTaken { existing_key: first_key, version: 2 });
        assert_eq!(outcome(&mut r_redo), taken);
        assert_eq!((store.transactions(), store.requests()), (1, 6));
        assert_eq!(store.history("r").await.unwrap().len(), 2);
    }

    /// A group whose requests are all refused writes nothing and commits no transaction.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_of_refusals_commits_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("s.sqlite")).unwrap();
        let (a, mut ra) = save("r", 0, 1, 0);
        writer(&store).commit_group(vec![a]);
        assert_eq!(outcome(&mut ra), Ok(CommitOutcome::Committed { version: 1 }));
        let (b, mut rb) = save("r", 0, 2, 1);
        let (c, mut rc) = save("r", 1, 2, 0);
        writer(&store).commit_group(vec![b, c]);
        assert!(matches!(outcome(&mut rb), Ok(CommitOutcome::StepTaken { .. })));
        assert_eq!(outcome(&mut rc), Ok(CommitOutcome::VersionConflict { current: 1 }));
        assert_eq!((store.transactions(), store.requests()), (1, 3));
        assert_eq!(store.history("r").await.unwrap().len(), 1);
    }

    /// A run that ends leaves the writer's set of runs without a pending step, as it leaves the kept
    /// rows, whether it ends by its last commit or by a status change: a store that sees many short
    /// runs does not keep one entry for each.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_ended_run_leaves_what_the_writer_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("s.sqlite")).unwrap();
        let kept = |run: &str| {
            let w = writer(&store);
            (w.no_pending.borrow().contains(run), w.known.info(run).is_some())
        };
        let (a, mut ra) = save("done", 0, 1, 0);
        let (b, mut rb) = save("failed", 0, 1, 0);
        writer(&store).commit_group(vec![a, b]);
        assert_eq!(outcome(&mut ra), Ok(CommitOutcome::Committed { version: 1 }));
        assert_eq!(outcome(&mut rb), Ok(CommitOutcome::Committed { version: 1 }));
        assert_eq!((kept("done"), kept("failed")), ((true, true), (true, true)));
        // "done" ends with its last commit, "failed" with a status change.
        let (answer, mut r_last) = oneshot::channel();
        let last = Job { op: Op::save(&checkpoint("done", 1, 2), &[], &RunStatus::Completed, 1), answer };
        let (answer, mut r_fail) = oneshot::channel();
        let op = Op::Status {
            run_id: "failed".into(),
            status: RunStatus::Failed("a node failed".into()),
            events: Vec::new(),
            pending: None,
            expected_version: 1,
        };
        writer(&store).commit_group(vec![last, Job { op, answer }]);
        assert_eq!(outcome(&mut r_last), Ok(CommitOutcome::Committed { version: 2 }));
        assert_eq!(outcome(&mut r_fail), Ok(CommitOutcome::Committed { version: 2 }));
        assert_eq!((kept("done"), kept("failed")), ((false, false), (false, false)));
        // Resumed, the failed run commits again from its stored row.
        let (again, mut r_again) = save("failed", 1, 2, 2);
        writer(&store).commit_group(vec![again]);
        assert_eq!(outcome(&mut r_again), Ok(CommitOutcome::Committed { version: 3 }));
        assert_eq!(kept("failed"), (true, true));
    }

    /// A request that fails part-way is answered with its error and nothing of it is written; the
    /// others of its group commit (in a second transaction), the one before it written once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_failing_part_way_is_left_out_of_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("s.sqlite")).unwrap();
        let (s0, mut rs0) = save("s", 0, 1, 0);
        writer(&store).commit_group(vec![s0]);
        assert_eq!(outcome(&mut rs0), Ok(CommitOutcome::Committed { version: 1 }));
        // A status change first (written, then rolled back with the failing request, then written again).
        // Paused, not ended: the writer keeps the row it wrote, and must forget it with the rollback
        // (else the second transaction finds `s` at version 2 and refuses the change).
        let paused = RunStatus::Paused(graph_store::PauseReason::Backpressure);
        let (answer, mut rs) = oneshot::channel();
        let op = Op::Status {
            run_id: "s".into(),
            status: paused.clone(),
            events: Vec::new(),
            pending: None,
            expected_version: 1,
        };
        let status = Job { op, answer };
        let (a, mut ra) = save("a", 0, 1, 0);
        let (b, mut rb) = save("b", 0, 1, 0);
        store.fail_point().fail_after(2); // the first save reaching its second write: `a`
        writer(&store).commit_group(vec![status, a, b]);
        assert_eq!(outcome(&mut rs), Ok(CommitOutcome::Committed { version: 2 }));
        assert!(outcome(&mut ra).unwrap_err().contains("injected failure"));
        assert_eq!(outcome(&mut rb), Ok(CommitOutcome::Committed { version: 1 }));
        assert_eq!((store.transactions(), store.requests()), (2, 4));
        let s = store.run_info("s").await.unwrap().unwrap();
        assert_eq!((s.version, s.status), (2, paused));
        assert!(store.run_info("a").await.unwrap().is_none());
        assert!(store.load_checkpoint("a", 0).await.unwrap().is_none());
        // Its key row went with the rolled-back transaction: the same commit now succeeds.
        let again = store.save_checkpoint(&checkpoint("a", 0, 1), &[], &RunStatus::Running, 0).await;
        assert_eq!(again.unwrap(), CommitOutcome::Committed { version: 1 });
    }

    /// A request that fails part-way with an I/O error stops the store: it is answered with that error,
    /// the rest of its group with `FailStopped`, and none of the group is committed (the others are not
    /// run again in a new transaction, as after another error), before or after the store reopens.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_io_error_part_way_stops_the_store_and_the_rest_of_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        let store = SqliteStore::open(&path).unwrap();
        let (a, mut ra) = save("a", 0, 1, 0);
        let (b, mut rb) = save("b", 0, 1, 0);
        let (c, mut rc) = save("c", 0, 1, 0);
        store.io_fail_point().fail_after(2); // the first save reaching its second write: `a`'s
        writer(&store).commit_group(vec![a, b, c]);
        // `a` with the error that stopped the store, `b` and `c` refused by the stopped store: each
        // names that error as the cause.
        for (run, r) in [("a", outcome(&mut ra)), ("b", outcome(&mut rb)), ("c", outcome(&mut rc))] {
            let e = r.unwrap_err();
            assert!(e.contains("stopped after an I/O error") && e.contains("(fail point)"), "{run}: {e}");
        }
        assert_eq!((store.transactions(), store.requests()), (0, 3));
        // Every later operation is refused, reads included.
        let refused = store.run_info("c").await.unwrap_err();
        assert!(matches!(refused, StoreError::FailStopped { .. }), "{refused}");
        let refused = store.save_checkpoint(&checkpoint("d", 0, 1), &[], &RunStatus::Running, 0).await;
        assert!(matches!(refused, Err(StoreError::FailStopped { .. })), "{refused:?}");
        drop(store);
        let store = SqliteStore::open(&path).unwrap();
        for run in ["a", "b", "c", "d"] {
            assert!(store.run_info(run).await.unwrap().is_none(), "{run} was committed");
        }
    }
}
