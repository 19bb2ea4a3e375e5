//! What a server's SQL brings to the generic store: its statements, its error classes, how a
//! transaction starts, and the two statements of a commit it writes its own way.

use std::future::Future;
use std::time::Duration;

use graph_store::events::{Event, head_after};
use graph_store::lease::Lease;
use graph_store::record::encode_run;
use graph_store::{Checkpoint, CommitOutcome, Integrity, OutboxRow, RunInfo, RunStatus, StoreError};
use sqlx::{Database, Pool, Transaction};

use crate::{Class, SqlStore, db_int};

/// The SQL text of a dialect's statements, by what they do. Parameters are bound in the order each
/// field's documentation gives (`$n` on PostgreSQL, `?` on MySQL).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Statements {
    /// (run) → version.
    pub version: &'static str,
    /// (run) → row_bytes, has_pending; the row locked.
    pub lock_run: &'static str,
    /// (run) → row_bytes.
    pub run: &'static str,
    /// (run, step) → record.
    pub checkpoint: &'static str,
    /// (record, run, step): overwrites a checkpoint's record (test hook).
    pub overwrite_checkpoint: &'static str,
    /// (run, step): deletes a checkpoint's row (test hook).
    pub remove_checkpoint: &'static str,
    /// (run, step, key, record).
    pub insert_checkpoint: &'static str,
    /// Appended to `INSERT INTO graph_events (run_id, seq, bytes) VALUES …`: an event already written
    /// (by a commit that landed, retried) is written over.
    pub events_upsert: &'static str,
    /// (run, bytes): the pending step, inserted or written over.
    pub upsert_pending: &'static str,
    /// (run) → bytes.
    pub pending: &'static str,
    /// (run) → bytes: the run's mailbox.
    pub mailbox: &'static str,
    /// (run, bytes): the run's mailbox, inserted or written over.
    pub upsert_mailbox: &'static str,
    /// (name) → bytes: a schedule, its row locked.
    pub lock_schedule: &'static str,
    /// (name, bytes): a schedule, inserted or written over.
    pub upsert_schedule: &'static str,
    /// (name).
    pub delete_schedule: &'static str,
    /// () → bytes: every schedule, in name order.
    pub schedules: &'static str,
    /// (status, latest step, version, row bytes, has_pending, wake_at_ms (-1: NULL), run).
    pub update_run: &'static str,
    /// (run, from seq, limit) → seq, bytes.
    pub events: &'static str,
    /// (run) → one row: the run row's latest step, the last checkpoint's step and record (each NULL
    /// when absent), of one snapshot.
    pub latest: &'static str,
    /// (run) → the run row's latest step beside each checkpoint's step and record, in step order (one
    /// row of NULLs when there is none).
    pub history: &'static str,
    /// (run, from, to) → step, record, in step order.
    pub checkpoints: &'static str,
    /// (run) → step, in order.
    pub steps: &'static str,
    /// (run, floor): deletes the checkpoints below `floor`.
    pub prune: &'static str,
    /// (least run id, limit) → row_bytes, run_id, in run order from the least id.
    pub runs: &'static str,
    /// (status, least run id, limit) → row_bytes, run_id, in run order from the least id.
    pub runs_by_status: &'static str,
    /// (key) → record; the row locked.
    pub lock_effect: &'static str,
    /// (key) → record.
    pub effect: &'static str,
    /// (record, key).
    pub update_effect: &'static str,
    /// (key, run, step, path, call index, record).
    pub insert_effect: &'static str,
    /// (run) → record, by (step, path, call index).
    pub effects: &'static str,
    /// (limit) → bytes, oldest commit first.
    pub outbox: &'static str,
    /// (key).
    pub delete_outbox: &'static str,
    /// (run) → owner, token, live (1 or 0): the run's lease, in the database's clock.
    pub fence: &'static str,
    /// (run) → owner, token, live; the lease row locked.
    pub lock_lease: &'static str,
    /// (limit) → run_id, row_bytes: runnable runs whose graph no claim has read yet, their rows
    /// locked, locked ones skipped.
    pub unsorted: &'static str,
    /// (graph, run).
    pub set_graph: &'static str,
    /// (graph, now, now, limit) → run_id: runnable runs of the graph, and its parked runs due by now
    /// (ms since the epoch; below 0: the database's clock), without a live lease, their rows locked,
    /// locked ones skipped.
    pub candidates: &'static str,
    /// (run, token, owner, run): the claim log's row, the previous holder and expiry read from the
    /// lease row before it is replaced.
    pub log_claim: &'static str,
    /// (run, owner, token, lease in µs).
    pub upsert_lease: &'static str,
    /// (lease in µs, run, owner, token): extends a live lease still held.
    pub heartbeat: &'static str,
    /// (run, owner, token).
    pub release: &'static str,
}

/// A server's SQL for [`SqlStore`]: implemented by `PostgresDialect` and `MySqlDialect` (features `postgres`, `mysql`), and by a
/// dialect of your own for another server with sqlx support, unique indexes, `SELECT … FOR UPDATE
/// SKIP LOCKED` and READ COMMITTED.
pub trait Dialect: Sized + Send + Sync + 'static {
    /// The sqlx database.
    type Db: Database;
    /// What the dialect keeps for a store beside its pool, shared by its clones (PostgreSQL: the queue
    /// of its commit groups).
    type State: Default + Send + Sync + 'static;
    /// Held while a commit that [`Dialect::shortcut_save`] left to the store goes alone.
    type Alone: Send;

    /// The server's name, in errors ("PostgreSQL").
    const NAME: &'static str;
    /// The statements.
    const SQL: Statements;

    /// How an error is handled.
    fn classify(e: &sqlx::Error) -> Class;

    /// A transaction at READ COMMITTED.
    fn begin(
        pool: &Pool<Self::Db>,
    ) -> impl Future<Output = Result<Transaction<'static, Self::Db>, sqlx::Error>> + Send;

    /// Steps 1 and 2 of a commit: inserts the idempotency key (a unique violation: the key is
    /// stored), then locks and returns the run row (`row_bytes, has_pending`; none for a new run). The
    /// key must come first, so that a duplicate waits for its holder and is then refused.
    fn key_then_lock<'t>(
        tx: &'t mut Transaction<'static, Self::Db>,
        key: &'t str,
        run: &'t str,
        step: i64,
    ) -> impl Future<Output = Result<Option<(Vec<u8>, bool)>, sqlx::Error>> + Send + 't;

    /// Steps 3 to 5 of a commit whose version matched: the checkpoint (its primary key refusing a
    /// second one for the step: a unique violation), its outbox rows, the events, the pending step
    /// deleted when there is one, the run row.
    fn write_step<'t>(
        tx: &'t mut Transaction<'static, Self::Db>,
        w: &'t StepWrites<'t>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 't;

    /// The dialect's own way to commit, tried before the store's transaction: committed (or refused)
    /// its own way, or left to the store (holding `Alone` until then).
    fn shortcut_save<'s>(
        store: &'s SqlStore<Self>,
        commit: Commit<'s>,
    ) -> impl Future<Output = Shortcut<Self::Alone>> + Send + 's;

    /// The count of rows a statement affected.
    fn rows_affected(done: &<Self::Db as Database>::QueryResult) -> u64;

    /// [`graph_store::Store::check_integrity`] on this server.
    fn integrity(store: &SqlStore<Self>) -> impl Future<Output = Result<Integrity, StoreError>> + Send;

    /// Remembers the run row a commit of the store wrote (a dialect whose shortcut commits onto known
    /// rows keeps it). The default forgets nothing and keeps nothing.
    fn remember_row(store: &SqlStore<Self>, bytes: Vec<u8>, info: RunInfo) {
        let _ = (store, bytes, info);
    }
}

/// A commit as [`Dialect::shortcut_save`] is given it.
#[derive(Debug, Clone, Copy)]
pub struct Commit<'a> {
    /// The checkpoint.
    pub cp: &'a Checkpoint,
    /// The events written with it.
    pub events: &'a [Event],
    /// The run's status after it.
    pub status: &'a RunStatus,
    /// The version the writer expects.
    pub expected_version: u64,
    /// The lease it is fenced by, if any.
    pub fence: Option<&'a Lease>,
}

/// What a dialect's [`Dialect::shortcut_save`] did with a commit: committed it its own way
/// (PostgreSQL in a group with other runs' commits, MySQL onto the run row it knows), or left it to the
/// store's transaction, which reads the run row, holding `G` until it is done.
#[derive(Debug)]
pub enum Shortcut<G> {
    /// The commit's outcome.
    Done(Result<CommitOutcome, StoreError>),
    /// Commit it alone (a transaction of its own); `G` is held until then.
    Alone(G),
}

/// What a `Committed` step writes after the key and the run row lock: handed to the dialect's
/// [`Dialect::write_step`], which writes it in as few statements as its SQL allows.
#[derive(Debug)]
#[non_exhaustive]
pub struct StepWrites<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The checkpoint's step.
    pub step: i64,
    /// The checkpoint's idempotency key.
    pub key: &'a str,
    /// The checkpoint's bytes (`record::encode`).
    pub record: &'a [u8],
    /// The checkpoint's outbox rows, in emit order.
    pub outbox: &'a [OutboxRow],
    /// The events appended with the checkpoint.
    pub events: &'a [Event],
    /// The run has a pending step to delete.
    pub clear_pending: bool,
    /// The run has no row yet: insert it (a racing first commit makes the insert a unique violation).
    pub new_run: bool,
    /// The run's graph fingerprint, the `graph_fingerprint` column of an inserted row (schema 4; rows
    /// inserted without it have it filled in by the first claim that reads them).
    pub graph: &'a str,
    /// The commit moves an existing run to another graph (a migration's): the row's
    /// `graph_fingerprint` column is set to [`StepWrites::graph`] in the same transaction.
    pub graph_changed: bool,
    /// The run row's `status` column.
    pub status: &'static str,
    /// The run row's `latest_step` column.
    pub latest_step: i64,
    /// The run row's `version` column.
    pub version: i64,
    /// The run row's bytes (`record::encode_run`).
    pub row_bytes: Vec<u8>,
}

impl<'a> StepWrites<'a> {
    /// The writes of committing `cp` (its `record`, `events`, `status`) onto the run row `before`
    /// (none: a new run) whose pending flag is `has_pending`, and the run row after it.
    pub fn of(
        cp: &'a Checkpoint,
        record: &'a [u8],
        events: &'a [Event],
        status: &RunStatus,
        before: Option<&RunInfo>,
        has_pending: bool,
    ) -> (Self, RunInfo) {
        let info = RunInfo::after_commit(
            before,
            &cp.run_id,
            cp.step,
            status,
            &cp.graph_fingerprint,
            head_after(None, events),
        );
        let writes = StepWrites {
            run_id: &cp.run_id,
            step: db_int(cp.step),
            key: cp.idempotency_key.as_str(),
            record,
            outbox: &cp.outbox,
            events,
            clear_pending: has_pending,
            new_run: before.is_none(),
            graph: &cp.graph_fingerprint,
            graph_changed: before.is_some_and(|b| b.graph_fingerprint != *cp.graph_fingerprint),
            status: status.as_str(),
            latest_step: db_int(info.latest_step),
            version: db_int(info.version),
            row_bytes: encode_run(&info),
        };
        (writes, info)
    }

    /// The outbox rows as (index, key, bytes) columns.
    pub fn outbox_columns(&self) -> (Vec<i64>, Vec<&str>, Vec<Vec<u8>>) {
        let mut idx = Vec::with_capacity(self.outbox.len());
        let mut keys = Vec::with_capacity(self.outbox.len());
        let mut bytes = Vec::with_capacity(self.outbox.len());
        for (i, row) in self.outbox.iter().enumerate() {
            idx.push(db_int(i as u64));
            keys.push(row.key.as_str());
            bytes.push(graph_store::journal::encode_outbox(row));
        }
        (idx, keys, bytes)
    }

    /// The events as (seq, bytes) columns.
    pub fn event_columns(&self) -> (Vec<i64>, Vec<Vec<u8>>) {
        self.events.iter().map(|e| (db_int(e.seq), graph_store::events::encode(e))).unzip()
    }
}

/// A lease as microseconds, the unit both dialects' lease statements take.
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}
