//! Group commit on PostgreSQL: the commits of concurrent runs share one transaction.
//!
//! Commits queue in the contract's group-commit queue (`graph_store::group`). A commit made while no
//! group is being written or queued, and fewer than [`MAX_INLINE`] other commits of this store are
//! going alone, goes alone on its caller's task, in the single-commit
//! statements (`SqlStore`'s own transaction): they cost the server less than a group's for one
//! or two commits, so a few concurrent runs pay nothing for grouping. Any other commit is queued; while
//! fewer than [`MAX_LEADERS`] groups are being written, it also starts a *leader* task, which takes
//! every queued commit (at most [`MAX_GROUP`], at most one per run) and writes them as one transaction
//! of two statements, whatever their number. Before taking each group a leader yields once to the
//! runtime, so that the runs its last group answered run their next step and queue their next commit
//! first (without it, a leader took the one or two commits already queued: at 64 runs, 735 of 1,366
//! groups held one commit; bench/analysis.md, "Larger groups").
//!
//! A group is written **in one statement** when this store knows the run row of each of its commits
//! (the row it last wrote for the run, at the version the commit expects; none for a first commit):
//! schema 3's `graph_commit_group` ([`sql::COMMIT_GROUP`]) does the steps below in the implicit
//! transaction of its one statement, one round trip instead of four, and writes a commit only if the
//! stored row is still the one the commit was computed from (its bytes compared), so a row changed by
//! another process since is never written over: that commit goes alone. Any other group is written
//! in steps, which read the rows (and keep them for the next group):
//!
//! 1. `BEGIN`;
//! 2. the keys and the row locks ([`sql::KEYS_THEN_LOCK`]): every key is inserted with `ON CONFLICT DO
//!    NOTHING` (a key that exists, or that a concurrent transaction holds and then commits, is not
//!    returned), then each inserted key's run row is locked and returned, in run order (two groups lock
//!    the rows they share in the same order);
//! 3. the writes ([`sql::WRITE_GROUP`], data-modifying CTEs over `unnest` of arrays): the checkpoints
//!    of the commits whose version matched (`ON CONFLICT DO NOTHING`: a step already taken writes
//!    nothing), and only for those inserted, their outbox rows, events, pending-step deletes and run
//!    rows;
//! 4. only when some commit was refused in 2 or 3: the keys of those commits deleted
//!    ([`sql::DELETE_KEYS`]);
//! 5. `COMMIT`: one WAL flush for the group.
//!
//! A commit the group cannot decide — its key existed, its version or step differed, or the whole
//! group failed (a lost race such as two first commits of one run, a deadlock, the server gone) — is
//! answered *alone*: its caller commits it on its own, as a single transaction
//! (`SqlStore`'s own transaction), which reports `AlreadyCommitted`, `StepTaken`,
//! `VersionConflict` or the error exactly as before. Nothing of such a commit was written by the
//! group: its key insert was deleted in the group's transaction, or the transaction rolled back. A
//! commit under a worker's lease is fenced in the group: after the row locks, the group reads the live
//! leases of its fenced commits' runs ([`sql::LIVE_LEASES`], only when it has any), and a commit whose
//! lease is not among them goes alone, where the single-commit fencing check answers `Fenced`.
//!
//! The leader is a task of its own, so a caller that stops waiting (a cancelled run) does not take
//! the group's other commits down with it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::Row as _;
use tokio::sync::oneshot;

use graph_store::events::ChainHead;
use graph_store::group::{Alone, GroupQueue};
use graph_store::known::Known;
use graph_store::lease::Lease;
use graph_store::record::{decode_run_of, encode, encode_run};
use graph_store::{CommitOutcome, FailPoint, RunInfo, RunStatus};

use super::PostgresStore;
use crate::dialect::{Commit, Shortcut};
use crate::{Abort, db_int};

/// At most this many commits in one group.
const MAX_GROUP: usize = 256;

/// At most this many groups written at once, each on its own pooled connection (measured: 2 made
/// groups twice as large as 4, and more commits a second at 8 and 64 runs; docs/stores.md, "Larger
/// groups").
const MAX_LEADERS: usize = 2;

/// At most this many commits go alone at once while no group is being written or queued (measured:
/// with 1, groups of one or two made 2 and 4 concurrent runs slower than one; docs/stores.md, "Few runs
/// at once, and plans").
const MAX_INLINE: usize = 4;

/// The queue of a PostgreSQL store's commits waiting for a group, shared by its clones (the dialect's
/// state: opaque).
pub struct Groups {
    queue: Arc<GroupQueue<Request>>,
    /// Group transactions committed.
    pub(super) transactions: AtomicU64,
    /// Commits answered `Committed` by a group.
    pub(super) commits: AtomicU64,
    /// Groups sent in one statement ([`sql::COMMIT_GROUP`]), whether they committed or not.
    pub(super) at_once: AtomicU64,
}

impl std::fmt::Debug for Groups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Groups").field("transactions", &self.transactions).finish_non_exhaustive()
    }
}

impl Default for Groups {
    fn default() -> Self {
        Groups {
            queue: Arc::new(GroupQueue::new(MAX_LEADERS)),
            transactions: AtomicU64::default(),
            commits: AtomicU64::default(),
            at_once: AtomicU64::default(),
        }
    }
}

impl PostgresStore {
    /// The rows each commit of `group` is computed from, when every one is known: `None` inside for a
    /// first commit (expected version 0), the row kept at the expected version otherwise.
    fn priors(&self, group: &[Request]) -> Option<Vec<Option<Known>>> {
        group
            .iter()
            .map(|r| match r.expected_version {
                0 => Some(None),
                v => self.known.at(&r.run_id, v).map(Some),
            })
            .collect()
    }
}

/// A commit going alone because no group was being written or queued: while [`MAX_INLINE`] of them
/// last, other commits queue for a group.
#[derive(Debug)]
pub struct Inline(#[allow(dead_code, reason = "held for its drop")] Alone<Request>);

/// One queued commit.
struct Request {
    run_id: String,
    step: u64,
    key: String,
    record: Vec<u8>,
    /// (outbox key, encoded row), in emit order.
    outbox: Vec<(String, Vec<u8>)>,
    /// (seq, encoded event).
    events: Vec<(i64, Vec<u8>)>,
    last_event: Option<ChainHead>,
    fingerprint: String,
    status: RunStatus,
    expected_version: u64,
    /// The lease the commit runs under, if any (a worker's): fenced in the group.
    fence: Option<Lease>,
    answer: oneshot::Sender<Answer>,
}

/// A group's answer to one commit.
enum Answer {
    /// Committed in the group, at this version.
    Committed(u64),
    /// The injected failure (test hook: the store's fail point): nothing of the group was written.
    Injected,
    /// Not decided by the group: nothing of it was written; commit it alone.
    Alone,
}

impl PostgresStore {
    /// Commits `commit` in a group with other runs' concurrent commits, or says to commit it alone
    /// (see the [module docs](self)), holding an [`Inline`] while it is when no group was being
    /// written.
    pub(super) async fn grouped(&self, commit: Commit<'_>) -> Shortcut<Option<Inline>> {
        let Commit { cp, events, status, expected_version, fence } = commit;
        if let Some(alone) = self.state.queue.alone(MAX_INLINE) {
            // No group is being written and few commits are: this commit goes alone, on the caller's
            // task, in the single-commit statements (cheaper than a group's for one or two).
            return Shortcut::Alone(Some(Inline(alone)));
        }
        let (answer, answered) = oneshot::channel();
        let request = Request {
            run_id: cp.run_id.to_string(),
            step: cp.step,
            key: cp.idempotency_key.as_str().to_owned(),
            record: encode(cp),
            outbox: cp
                .outbox
                .iter()
                .map(|row| (row.key.clone(), graph_store::journal::encode_outbox(row)))
                .collect(),
            events: events.iter().map(|e| (db_int(e.seq), graph_store::events::encode(e))).collect(),
            last_event: graph_store::events::head_after(None, events),
            fingerprint: cp.graph_fingerprint.to_string(),
            status: status.clone(),
            expected_version,
            fence: fence.cloned(),
            answer,
        };
        if self.state.queue.push(request) {
            tokio::spawn(self.clone().lead());
        }
        // A dropped sender (the leader task panicked, the runtime is shutting down): alone, where the
        // key tells whether the group had committed it.
        match answered.await.unwrap_or(Answer::Alone) {
            Answer::Committed(version) => Shortcut::Done(Ok(CommitOutcome::Committed { version })),
            Answer::Injected => Shortcut::Done(Err(FailPoint::error())),
            Answer::Alone => Shortcut::Alone(None),
        }
    }

    /// A leader: writes groups until the queue is empty.
    async fn lead(self) {
        let mut leading = Leading(Some(self.clone()));
        loop {
            // The runs answered last (or whose commits started this leader) queue their next commits
            // before the group is taken.
            tokio::task::yield_now().await;
            // Released under the lock a commit queues under: a commit queued after this sees one leader
            // fewer and starts one.
            let Some(group) = self.state.queue.next_group(take_group) else {
                leading.0 = None;
                return;
            };
            let answers = match self.write_group(&group).await {
                Ok(answers) => answers,
                Err(Abort::Store(e)) => {
                    tracing::debug!(error = %e, "a commit group failed; its commits go alone");
                    group.iter().map(|_| Answer::Alone).collect()
                }
                Err(Abort::Sql(class, e)) => {
                    if class == crate::Class::Unavailable {
                        // The commits going alone find the pool's idle connections suspect.
                        self.suspicion.connection_failed();
                    }
                    tracing::debug!(error = %e, ?class, "a commit group failed; its commits go alone");
                    group.iter().map(|_| Answer::Alone).collect()
                }
            };
            for (request, answer) in group.into_iter().zip(answers) {
                let _ = request.answer.send(answer);
            }
        }
    }

    /// One group's transaction; the answer for each of its commits, in order. In one statement when
    /// the run row of every commit is known, else in steps (which reads the rows, and keeps them).
    async fn write_group(&self, group: &[Request]) -> Result<Vec<Answer>, Abort> {
        match self.priors(group) {
            Some(priors) => self.write_group_at_once(group, priors).await,
            None => self.write_group_in_steps(group).await,
        }
    }

    /// A group in one statement, [`sql::COMMIT_GROUP`], in the implicit transaction of its own (one
    /// round trip; in a transaction while the test fail point is armed, so that it can fail after the
    /// writes): each commit computed from its known row, written only if the stored row is that one.
    async fn write_group_at_once(
        &self,
        group: &[Request],
        priors: Vec<Option<Known>>,
    ) -> Result<Vec<Answer>, Abort> {
        let abort = |e: sqlx::Error| Abort::Sql(super::classify(&e), e);
        let mut w = Writes::default();
        let mut prior: Vec<Option<&[u8]>> = Vec::with_capacity(group.len());
        let mut fences: (Vec<&str>, Vec<&str>, Vec<i64>) = Default::default();
        let mut accepted: Vec<Option<RunInfo>> = Vec::with_capacity(group.len());
        for (r, known) in group.iter().zip(&priors) {
            // A commit that moves the run to another graph (a migration's) goes alone, where the
            // row's graph column is set with it.
            if known.as_ref().is_some_and(|k| k.info.graph_fingerprint != r.fingerprint) {
                accepted.push(None);
                continue;
            }
            if let Some(lease) = &r.fence {
                if lease.run_id != r.run_id {
                    // Alone, where the fencing check answers `Fenced`.
                    accepted.push(None);
                    continue;
                }
                fences.0.push(&r.run_id);
                fences.1.push(&lease.owner);
                fences.2.push(db_int(lease.token));
            }
            let info = RunInfo::after_commit(
                known.as_ref().map(|k| &k.info),
                &r.run_id,
                r.step,
                &r.status,
                &r.fingerprint,
                r.last_event.clone(),
            );
            w.push(r, &info, known.is_none(), false);
            prior.push(known.as_ref().map(|k| k.bytes.as_slice()));
            accepted.push(Some(info));
        }
        let call = sqlx::query_scalar::<_, Vec<String>>(sql::COMMIT_GROUP)
            .bind(&w.keys)
            .bind(&w.runs)
            .bind(&w.steps)
            .bind(&w.records)
            .bind(&prior)
            .bind(&w.status)
            .bind(&w.latest)
            .bind(&w.version)
            .bind(&w.row_bytes);
        let call = w.bind_journal(call).bind(&fences.0).bind(&fences.1).bind(&fences.2);
        self.state.at_once.fetch_add(1, Ordering::Relaxed);
        let written = if self.fail.armed() {
            let mut tx = self.transaction().await.map_err(abort)?;
            let written = call.fetch_one(&mut *tx).await.map_err(abort)?;
            if self.fail.hit(1) || self.fail.hit(2) || self.fail.hit(3) {
                return Ok(group.iter().map(|_| Answer::Injected).collect());
            }
            tx.commit().await.map_err(abort)?;
            written
        } else {
            call.fetch_one(&self.pool).await.map_err(abort)?
        };
        Ok(self.answer(group, accepted, std::mem::take(&mut w.row_bytes), &written))
    }

    /// The answers of a committed group: `Committed` for the commits written (their rows kept),
    /// `Alone` for the others (their rows forgotten: they may have changed). `accepted` holds the row
    /// of each commit sent, `rows` their bytes in the same order.
    fn answer(
        &self,
        group: &[Request],
        accepted: Vec<Option<RunInfo>>,
        rows: Vec<Vec<u8>>,
        written: &[String],
    ) -> Vec<Answer> {
        self.state.transactions.fetch_add(1, Ordering::Relaxed);
        self.state.commits.fetch_add(written.len() as u64, Ordering::Relaxed);
        let mut rows = rows.into_iter();
        group
            .iter()
            .zip(accepted)
            .map(|(r, info)| {
                let bytes = info.as_ref().and_then(|_| rows.next());
                match (info, bytes) {
                    (Some(info), Some(bytes)) if written.contains(&r.run_id) => {
                        let version = info.version;
                        self.known.remember(bytes, info);
                        Answer::Committed(version)
                    }
                    _ => {
                        self.known.forget(&r.run_id);
                        Answer::Alone
                    }
                }
            })
            .collect()
    }

    /// A group in steps: `BEGIN`, the keys and row locks, the writes, `COMMIT` (see the [module
    /// docs](self)).
    async fn write_group_in_steps(&self, group: &[Request]) -> Result<Vec<Answer>, Abort> {
        let abort = |e: sqlx::Error| Abort::Sql(super::classify(&e), e);
        let mut tx = self.transaction().await.map_err(abort)?;
        let keys: Vec<&str> = group.iter().map(|r| r.key.as_str()).collect();
        let runs: Vec<&str> = group.iter().map(|r| r.run_id.as_str()).collect();
        let steps: Vec<i64> = group.iter().map(|r| db_int(r.step)).collect();
        let rows = sqlx::query(sql::KEYS_THEN_LOCK)
            .bind(&keys)
            .bind(&runs)
            .bind(&steps)
            .fetch_all(&mut *tx)
            .await
            .map_err(abort)?;
        if self.fail.hit(1) {
            return Ok(group.iter().map(|_| Answer::Injected).collect());
        }
        // key → (the run row's bytes, has_pending), for the keys inserted.
        let mut locked: HashMap<String, (Option<Vec<u8>>, bool)> = HashMap::with_capacity(rows.len());
        for row in rows {
            let key: String = row.try_get(0).map_err(abort)?;
            let bytes: Option<Vec<u8>> = row.try_get(1).map_err(abort)?;
            let pending: Option<bool> = row.try_get(2).map_err(abort)?;
            locked.insert(key, (bytes, pending.unwrap_or(false)));
        }
        let leases = self.leases_of(&mut tx, group).await.map_err(abort)?;
        let mut w = Writes::default();
        let mut accepted: Vec<Option<RunInfo>> = Vec::with_capacity(group.len());
        for r in group {
            let Some((bytes, pending)) = locked.remove(r.key.as_str()) else {
                accepted.push(None);
                continue;
            };
            let row = bytes.map(|b| decode_run_of(&r.run_id, None, &b)).transpose()?;
            let version = row.as_ref().map_or(0, |row| row.version);
            // A fenced commit whose lease is not the run's live lease goes alone, where its own
            // transaction finds the same and answers `Fenced`.
            let lost = r.fence.as_ref().is_some_and(|lease| {
                lease.run_id != r.run_id
                    || !leases.iter().any(|(run, owner, token)| {
                        *run == r.run_id && *owner == lease.owner && *token == lease.token
                    })
            });
            let moved = row.as_ref().is_some_and(|row| row.graph_fingerprint != r.fingerprint);
            if version != r.expected_version || lost || moved {
                w.undo.push(r.key.as_str());
                accepted.push(None);
                continue;
            }
            let info = RunInfo::after_commit(
                row.as_ref(),
                &r.run_id,
                r.step,
                &r.status,
                &r.fingerprint,
                r.last_event.clone(),
            );
            w.push(r, &info, version == 0, pending);
            accepted.push(Some(info));
        }
        let write =
            sqlx::query_scalar(sql::WRITE_GROUP).bind(&w.runs).bind(&w.steps).bind(&w.keys).bind(&w.records);
        let inserted: Vec<String> = w
            .bind_journal(write)
            .bind(&w.pending)
            .bind(&w.new_run)
            .bind(&w.status)
            .bind(&w.latest)
            .bind(&w.version)
            .bind(&w.row_bytes)
            .fetch_all(&mut *tx)
            .await
            .map_err(abort)?;
        // The keys of the commits refused here, or whose step was taken: deleted, so that each can
        // commit alone (rare: only when commits race).
        w.undo.extend(
            w.keys
                .iter()
                .zip(&w.runs)
                .filter(|(_, run)| !inserted.iter().any(|i| i == **run))
                .map(|(k, _)| *k),
        );
        if !w.undo.is_empty() {
            sqlx::query(sql::DELETE_KEYS).bind(&w.undo).execute(&mut *tx).await.map_err(abort)?;
        }
        if self.fail.hit(2) || self.fail.hit(3) {
            return Ok(group.iter().map(|_| Answer::Injected).collect());
        }
        tx.commit().await.map_err(abort)?;
        Ok(self.answer(group, accepted, std::mem::take(&mut w.row_bytes), &inserted))
    }
}

impl PostgresStore {
    /// The live leases (run, owner, token) of the runs of the group's fenced commits, read after their
    /// run rows were locked (as a single commit's fencing check does); none when no commit is fenced.
    async fn leases_of(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
        group: &[Request],
    ) -> Result<Vec<(String, String, u64)>, sqlx::Error> {
        let runs: Vec<&str> = group.iter().filter(|r| r.fence.is_some()).map(|r| r.run_id.as_str()).collect();
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(sql::LIVE_LEASES).bind(&runs).fetch_all(&mut **tx).await?;
        rows.iter()
            .map(|row| {
                let token: i64 = row.try_get(2)?;
                Ok((row.try_get(0)?, row.try_get(1)?, crate::from_db_int(token)))
            })
            .collect()
    }
}

/// A running leader. Dropped other than by the leader's own return (a panic, the runtime shutting
/// down), it gives its place up, and starts another leader when commits are queued, so that a queue is
/// never left without one.
struct Leading(Option<PostgresStore>);

impl Drop for Leading {
    fn drop(&mut self) {
        let Some(store) = self.0.take() else { return };
        if store.state.queue.abandon() {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn(store.lead())),
                Err(_) => store.state.queue.release(),
            }
        }
    }
}

/// Takes the next group from the queue: at most [`MAX_GROUP`] commits, the first queued of each run
/// (a run's later commits stay queued, in order, for the next group), sorted by run.
fn take_group(waiting: &mut VecDeque<Request>) -> Vec<Request> {
    let n = waiting.len().min(MAX_GROUP);
    let mut group: Vec<Request> = waiting.drain(..n).collect();
    // Stable: a run's commits keep their order.
    group.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    let mut again = Vec::new();
    let mut kept: Vec<Request> = Vec::with_capacity(group.len());
    for r in group {
        if kept.last().is_some_and(|k| k.run_id == r.run_id) {
            again.push(r);
        } else {
            kept.push(r);
        }
    }
    for r in again.into_iter().rev() {
        waiting.push_front(r);
    }
    kept
}

/// The columns of [`sql::WRITE_GROUP`].
#[derive(Default)]
struct Writes<'a> {
    runs: Vec<&'a str>,
    steps: Vec<i64>,
    keys: Vec<&'a str>,
    records: Vec<&'a [u8]>,
    undo: Vec<&'a str>,
    outbox_runs: Vec<&'a str>,
    outbox_steps: Vec<i64>,
    outbox_idx: Vec<i64>,
    outbox_keys: Vec<&'a str>,
    outbox_bytes: Vec<&'a [u8]>,
    event_runs: Vec<&'a str>,
    event_seqs: Vec<i64>,
    event_bytes: Vec<&'a [u8]>,
    pending: Vec<&'a str>,
    new_run: Vec<bool>,
    status: Vec<&'static str>,
    latest: Vec<i64>,
    version: Vec<i64>,
    row_bytes: Vec<Vec<u8>>,
}

/// A statement of a group, returning one column of type `O`.
type Scalar<'q, O> = sqlx::query::QueryScalar<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>;

impl<'a> Writes<'a> {
    /// Binds the outbox rows' five columns (run, step, idx, key, bytes) and the events' three (run,
    /// seq, bytes), the next eight parameters of either group statement.
    fn bind_journal<'q, O>(&'q self, q: Scalar<'q, O>) -> Scalar<'q, O> {
        q.bind(&self.outbox_runs)
            .bind(&self.outbox_steps)
            .bind(&self.outbox_idx)
            .bind(&self.outbox_keys)
            .bind(&self.outbox_bytes)
            .bind(&self.event_runs)
            .bind(&self.event_seqs)
            .bind(&self.event_bytes)
    }

    /// The writes of one accepted commit, its run row `info`.
    fn push(&mut self, r: &'a Request, info: &RunInfo, new_run: bool, pending: bool) {
        let run = r.run_id.as_str();
        self.runs.push(run);
        self.steps.push(db_int(r.step));
        self.keys.push(&r.key);
        self.records.push(&r.record);
        for (i, (key, bytes)) in r.outbox.iter().enumerate() {
            self.outbox_runs.push(run);
            self.outbox_steps.push(db_int(r.step));
            self.outbox_idx.push(db_int(i as u64));
            self.outbox_keys.push(key);
            self.outbox_bytes.push(bytes);
        }
        for (seq, bytes) in &r.events {
            self.event_runs.push(run);
            self.event_seqs.push(*seq);
            self.event_bytes.push(bytes);
        }
        if pending {
            self.pending.push(run);
        }
        self.new_run.push(new_run);
        self.status.push(info.status.as_str());
        self.latest.push(db_int(info.latest_step));
        self.version.push(db_int(info.version));
        self.row_bytes.push(encode_run(info));
    }
}

mod sql {
    /// A whole group in one statement (schema 3's `graph_commit_group`, migrations/postgres): $1–$4
    /// the checkpoints (key, run, step, record); $5 the run row each was computed from (NULL: none);
    /// $6–$9 the run rows after it (status, latest step, version, bytes); $10–$14 the outbox rows
    /// (run, step, idx, key, bytes); $15–$17 the events (run, seq, bytes); $18–$20 the leases of the
    /// fenced commits (run, owner, token). Returns the runs whose commit was written.
    pub(super) const COMMIT_GROUP: &str = "SELECT graph_commit_group($1::TEXT[], $2::TEXT[], $3::BIGINT[], \
         $4::BYTEA[], $5::BYTEA[], $6::TEXT[], $7::BIGINT[], $8::BIGINT[], $9::BYTEA[], $10::TEXT[], $11::BIGINT[], \
         $12::BIGINT[], $13::TEXT[], $14::BYTEA[], $15::TEXT[], $16::BIGINT[], $17::BYTEA[], $18::TEXT[], \
         $19::TEXT[], $20::BIGINT[])";

    /// The live leases (run, owner, token) of the runs $1.
    pub(super) const LIVE_LEASES: &str = "SELECT run_id, owner, token FROM graph_leases \
         WHERE run_id = ANY($1::TEXT[]) AND owner <> '' AND expires_at > clock_timestamp()";

    /// Deletes the keys $1 (of commits the group did not write).
    pub(super) const DELETE_KEYS: &str = "DELETE FROM graph_keys WHERE idem_key = ANY($1::TEXT[])";

    /// $1 keys, $2 runs, $3 steps (sorted by run): inserts the keys that are free, then locks the run
    /// row of each, in order; returns (key, row bytes, has_pending) per inserted key, NULLs for a run
    /// without a row.
    pub(super) const KEYS_THEN_LOCK: &str = "WITH k AS (INSERT INTO graph_keys (idem_key, run_id, step) \
         SELECT * FROM unnest($1::TEXT[], $2::TEXT[], $3::BIGINT[]) \
         ON CONFLICT DO NOTHING RETURNING idem_key, run_id) \
         SELECT k.idem_key, r.row_bytes, r.has_pending FROM k LEFT JOIN LATERAL \
         (SELECT row_bytes, has_pending FROM graph_runs g WHERE g.run_id = k.run_id FOR UPDATE) r ON TRUE \
         ORDER BY k.run_id";

    /// The writes of a group: $1–$4 the checkpoints (run, step, key, record); $5–$9 the outbox rows
    /// (run, step, idx, key, bytes); $10–$12 the events (run, seq, bytes); $13 the runs whose pending
    /// step goes; $14–$18 per checkpoint, the run row (new, status, latest step, version, bytes).
    /// Returns the runs whose checkpoint was inserted; a checkpoint refused by its primary key writes
    /// nothing else.
    pub(super) const WRITE_GROUP: &str = "WITH c AS (INSERT INTO graph_checkpoints (run_id, step, idem_key, record) \
             SELECT * FROM unnest($1::TEXT[], $2::BIGINT[], $3::TEXT[], $4::BYTEA[]) \
             ON CONFLICT DO NOTHING RETURNING run_id), \
         o AS (INSERT INTO graph_outbox (run_id, step, idx, outbox_key, bytes) \
             SELECT t.* FROM unnest($5::TEXT[], $6::BIGINT[], $7::BIGINT[], $8::TEXT[], $9::BYTEA[]) \
                 AS t (run_id, step, idx, outbox_key, bytes) \
             WHERE t.run_id IN (SELECT run_id FROM c) \
             ON CONFLICT (run_id, step, idx) DO UPDATE SET outbox_key = EXCLUDED.outbox_key, bytes = EXCLUDED.bytes), \
         e AS (INSERT INTO graph_events (run_id, seq, bytes) \
             SELECT t.* FROM unnest($10::TEXT[], $11::BIGINT[], $12::BYTEA[]) AS t (run_id, seq, bytes) \
             WHERE t.run_id IN (SELECT run_id FROM c) \
             ON CONFLICT (run_id, seq) DO UPDATE SET bytes = EXCLUDED.bytes), \
         p AS (DELETE FROM graph_pending WHERE run_id = ANY($13::TEXT[]) AND run_id IN (SELECT run_id FROM c)), \
         v AS (SELECT * FROM unnest($1::TEXT[], $14::BOOLEAN[], $15::TEXT[], $16::BIGINT[], $17::BIGINT[], $18::BYTEA[]) \
                 AS v (run_id, new_run, status, latest_step, version, row_bytes) \
             WHERE v.run_id IN (SELECT run_id FROM c)), \
         u AS (UPDATE graph_runs g SET status = v.status, latest_step = v.latest_step, version = v.version, \
                 row_bytes = v.row_bytes, has_pending = FALSE \
             FROM v WHERE g.run_id = v.run_id AND NOT v.new_run), \
         n AS (INSERT INTO graph_runs (status, latest_step, version, row_bytes, has_pending, run_id) \
             SELECT v.status, v.latest_step, v.version, v.row_bytes, FALSE, v.run_id FROM v WHERE v.new_run) \
         SELECT run_id FROM c";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(run: &str, key: &str) -> Request {
        let (answer, _) = oneshot::channel();
        Request {
            run_id: run.into(),
            step: 0,
            key: key.into(),
            record: Vec::new(),
            outbox: Vec::new(),
            events: Vec::new(),
            last_event: None,
            fingerprint: String::new(),
            status: RunStatus::Running,
            expected_version: 0,
            fence: None,
            answer,
        }
    }

    #[test]
    fn a_group_takes_one_commit_per_run_and_leaves_the_rest_in_order() {
        let mut q: VecDeque<Request> =
            [("b", "b1"), ("a", "a1"), ("b", "b2"), ("c", "c1"), ("b", "b3"), ("a", "a2")]
                .into_iter()
                .map(|(r, k)| request(r, k))
                .collect();
        let group = take_group(&mut q);
        let keys: Vec<&str> = group.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["a1", "b1", "c1"]);
        let rest: Vec<&str> = q.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(rest, ["a2", "b2", "b3"]);
        let group = take_group(&mut q);
        let keys: Vec<&str> = group.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["a2", "b2"]);
        let rest: Vec<&str> = q.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(rest, ["b3"]);
    }

    #[test]
    fn a_group_holds_at_most_max_group_commits() {
        let mut q: VecDeque<Request> =
            (0..MAX_GROUP + 3).map(|i| request(&format!("r{i:04}"), &format!("k{i}"))).collect();
        assert_eq!(take_group(&mut q).len(), MAX_GROUP);
        assert_eq!(q.len(), 3);
    }
}
