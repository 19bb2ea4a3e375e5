//! [`SqlStore`]: the store contract on a database server, written once over a [`Dialect`].
//!
//! See the [crate docs](crate) for how a commit works. Every rule of the contract is the contract
//! crate's: this module gathers the facts inside its transactions and asks
//! [`graph_store::commit::decide`], [`graph_store::commit::decide_status`] and
//! [`graph_store::journal::decide_effect`] what to do.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use graph_store::commit::{CommitFacts, Verdict, decide, decide_status};
use graph_store::events::{Event, head_after};
use graph_store::journal::{decide_effect, decode_effect, decode_outbox, encode_effect};
use graph_store::known::KnownRows;
use graph_store::lease::Lease;
use graph_store::mailbox::{Mailbox, MailboxOp, MailboxReply};
use graph_store::record::{decode, decode_run_of, encode, encode_run};
use graph_store::schedule::{RowWrite, Schedule, ScheduleOp, ScheduleReply};
use graph_store::{
    Checkpoint, CheckpointMeta, CommitOutcome, EffectOutcome, EffectRecord, EffectState, FailPoint,
    Integrity, OutboxRow, ReadThrough, RunFilter, RunInfo, RunStatus, Store, StoreError, behind_run_row,
};
use sqlx::{
    ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row as _, Transaction, Type,
};

use crate::dialect::{Commit, Dialect, Shortcut, StepWrites};
use crate::pool_check::Suspicion;
use crate::{Abort, CONFLICT_RETRIES, Class, conflict_pause, db_int, from_db_int, store_error};

/// A checkpoint store on a database server, generic over its [`Dialect`]: [`crate::PostgresStore`] is
/// `SqlStore<Postgres>`, [`crate::MySqlStore`] is `SqlStore<MySql>`. Clones share the pool.
pub struct SqlStore<D: Dialect> {
    pub(crate) pool: Pool<D::Db>,
    pub(crate) fail: FailPoint,
    /// When the pool's idle connections are pinged before use ([`crate::pool_check`]).
    pub(crate) suspicion: Arc<Suspicion>,
    /// The run rows this store last committed (the dialects' shortcuts commit onto them).
    pub(crate) known: Arc<KnownRows>,
    /// The dialect's own.
    pub(crate) state: Arc<D::State>,
}

impl<D: Dialect> Clone for SqlStore<D> {
    fn clone(&self) -> Self {
        SqlStore {
            pool: self.pool.clone(),
            fail: self.fail.clone(),
            suspicion: self.suspicion.clone(),
            known: self.known.clone(),
            state: self.state.clone(),
        }
    }
}

/// A query of the dialect's database, as `sqlx::query` builds it.
type Query<'q, D> = sqlx::query::Query<'q, <D as Dialect>::Db, <<D as Dialect>::Db as Database>::Arguments>;

/// A transaction of the dialect's database.
type Tx<D> = Transaction<'static, <D as Dialect>::Db>;

/// A row of the dialect's database.
type Row<D> = <<D as Dialect>::Db as Database>::Row;

/// What `latest` / `history` read: the run row's latest step, and the checkpoints (step, record).
type WithRunRow = (Option<u64>, Vec<(u64, Vec<u8>)>);

/// An sqlx error of dialect `D` as an [`Abort`].
fn abort<D: Dialect>(e: sqlx::Error) -> Abort {
    Abort::Sql(D::classify(&e), e)
}

/// An sqlx error of reading a row already fetched (a column's type or value) as a store error. Errors
/// of the server or the connection go through the store's `error` method.
pub(crate) fn read_error<D: Dialect>(what: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |e| store_error(D::classify(&e), what, e)
}

/// How the server stores read a run's checkpoints, for `behind_run_row`: rows of a table and the
/// entries of its primary key's index, either of which damage can lose.
fn through() -> ReadThrough {
    ReadThrough {
        what: "the table of its checkpoints",
        lost: "checkpoint rows, or their index entries, were lost",
        file: None,
        remedy: "the database is damaged: restore it from a backup; `graphctl verify --all` (amcheck, \
                 CHECK TABLE) tells whether only an index is, which REINDEX or a table rebuild repairs",
    }
}

impl<D: Dialect> SqlStore<D> {
    /// A store over `pool`, whose `before_acquire` hook asks `suspicion` (migrations are the caller's).
    pub(crate) fn over(pool: Pool<D::Db>, suspicion: Arc<Suspicion>) -> Self {
        SqlStore {
            pool,
            fail: Default::default(),
            suspicion,
            known: Default::default(),
            state: Default::default(),
        }
    }

    /// A typed store error for `e` ([`store_error`]); when it says the server could not be reached,
    /// the pool's idle connections become suspect.
    pub(crate) fn error(&self, class: Class, what: &str, e: sqlx::Error) -> StoreError {
        if class == Class::Unavailable {
            self.suspicion.connection_failed();
        }
        store_error(class, what, e)
    }

    /// The connection pool (for tools and benchmarks that query the store's tables).
    pub fn pool(&self) -> &Pool<D::Db> {
        &self.pool
    }

    /// Closes every connection of the pool, waiting for those in use to be returned.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Test hook (feature `test-hooks`): the next commit fails after its `n`-th write (1 = the
    /// idempotency key, 2 = the checkpoint with its outbox rows and events, 3 = the run row), and its
    /// transaction rolls back.
    #[cfg(feature = "test-hooks")]
    pub fn fail_point(&self) -> &FailPoint {
        &self.fail
    }

    /// The fail point after write `n` of a commit (test hook).
    pub(crate) fn wrote(&self, n: usize) -> Result<(), Abort> {
        if self.fail.hit(n) { Err(Abort::Store(FailPoint::error())) } else { Ok(()) }
    }

    /// Runs `op` (a read, a write that may run twice, or a `BEGIN`, on the pool), once more when it
    /// could not reach the server: a connection the server closed while it sat in the pool fails its
    /// first statement (the pool pings only suspect connections, [`crate::pool_check`]), and that
    /// failure makes every connection of the pool idle since then suspect, so the second try runs on
    /// a live connection or a new one. `what` names the operation in the log.
    pub(crate) async fn once_more<T, F, Fut>(&self, what: &str, op: F) -> Result<T, sqlx::Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, sqlx::Error>>,
    {
        match op().await {
            Err(e) if D::classify(&e) == Class::Unavailable => {
                self.suspicion.connection_failed();
                tracing::debug!(error = %e, what, "a pooled connection was closed; trying again");
                op().await
            }
            done => done,
        }
    }

    /// [`Self::once_more`], its error as a store error.
    pub(crate) async fn on_pool<T, F, Fut>(&self, what: &str, op: F) -> Result<T, StoreError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, sqlx::Error>>,
    {
        self.once_more(what, op).await.map_err(|e| self.error(D::classify(&e), what, e))
    }

    /// A transaction; its `BEGIN` is sent once more when it could not reach the server
    /// ([`Self::once_more`]: nothing was written yet).
    pub(crate) async fn transaction(&self) -> Result<Tx<D>, sqlx::Error> {
        self.once_more("beginning a transaction", || D::begin(&self.pool)).await
    }

    /// Runs `attempt` (one transaction) until it returns an outcome, running it again when it lost a
    /// race; `what` names the operation in errors.
    pub(crate) async fn with_conflicts<T, F, Fut>(&self, what: &str, mut attempt: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Abort>>,
    {
        let mut tries = 0;
        loop {
            match attempt().await {
                Ok(t) => return Ok(t),
                Err(Abort::Store(e)) => return Err(e),
                Err(Abort::Sql(Class::Conflict | Class::Unique, e)) if tries < CONFLICT_RETRIES => {
                    tracing::debug!(error = %e, what, "transaction lost a race; running it again");
                    tries += 1;
                    conflict_pause(tries).await;
                }
                Err(Abort::Sql(class, e)) => return Err(self.error(class, what, e)),
            }
        }
    }
}

/// The sqlx capabilities the generic store uses of its database: executors for the pool and for a
/// connection, and the column types it binds and reads (text, bytes, 64-bit integers, booleans). Every
/// sqlx database with those types has them; the bound is written out on each generic `impl` because
/// Rust does not imply it from a trait.
impl<D: Dialect> SqlStore<D>
where
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'q> &'q str: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> &'q [u8]: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> i64: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    for<'q> bool: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    for<'q> Vec<u8>: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    for<'q> String: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    usize: ColumnIndex<Row<D>>,
{
    /// The rows of the query `q` builds ([`Self::on_pool`]).
    pub(crate) async fn rows<'q>(
        &self,
        what: &str,
        q: impl Fn() -> Query<'q, D>,
    ) -> Result<Vec<Row<D>>, StoreError> {
        self.on_pool(what, || q().fetch_all(&self.pool)).await
    }

    /// The row, if any, of the query `q` builds ([`Self::on_pool`]).
    pub(crate) async fn row<'q>(
        &self,
        what: &str,
        q: impl Fn() -> Query<'q, D>,
    ) -> Result<Option<Row<D>>, StoreError> {
        self.on_pool(what, || q().fetch_optional(&self.pool)).await
    }

    /// The bytes in column 0 of `row`.
    fn bytes(row: &Row<D>, what: &str) -> Result<Vec<u8>, StoreError> {
        row.try_get::<Vec<u8>, _>(0).map_err(read_error::<D>(what))
    }

    /// The rows of `latest` / `history`: the run row's latest step (`None`: no run row), and the
    /// checkpoints (step, record) in step order.
    fn with_run_row(rows: &[Row<D>], what: &str) -> Result<WithRunRow, StoreError> {
        let mut latest = None;
        let mut checkpoints = Vec::with_capacity(rows.len());
        for r in rows {
            latest = r.try_get::<Option<i64>, _>(0).map_err(read_error::<D>(what))?.map(from_db_int);
            let step: Option<i64> = r.try_get(1).map_err(read_error::<D>(what))?;
            let record: Option<Vec<u8>> = r.try_get(2).map_err(read_error::<D>(what))?;
            if let (Some(step), Some(record)) = (step, record) {
                checkpoints.push((from_db_int(step), record));
            }
        }
        Ok((latest, checkpoints))
    }

    /// The run's current version (0: no such run), outside any transaction.
    pub(crate) async fn version_of(&self, run_id: &str) -> Result<u64, Abort> {
        let row =
            sqlx::query(D::SQL.version).bind(run_id).fetch_optional(&self.pool).await.map_err(abort::<D>)?;
        Ok(match row {
            Some(r) => from_db_int(r.try_get::<i64, _>(0).map_err(abort::<D>)?),
            None => 0,
        })
    }

    /// The outcome of a commit of `key` whose checkpoint insert the primary key refused (`refused`),
    /// read after the rollback: the rule with the step taken by the stored checkpoint's key; a race
    /// lost otherwise (pruned meanwhile), run again.
    pub(crate) async fn step_taken(
        &self,
        facts: CommitFacts<'_>,
        run_id: &str,
        step: u64,
        refused: sqlx::Error,
    ) -> Result<CommitOutcome, Abort> {
        let row = sqlx::query(D::SQL.checkpoint)
            .bind(run_id)
            .bind(db_int(step))
            .fetch_optional(&self.pool)
            .await
            .map_err(abort::<D>)?;
        let Some(row) = row else { return Err(Abort::Sql(Class::Unique, refused)) };
        let bytes: Vec<u8> = row.try_get(0).map_err(abort::<D>)?;
        let existing = decode(run_id, step, &bytes)?.idempotency_key;
        let version = self.version_of(run_id).await?;
        Ok(decide(&facts.step_taken_by(Some(&existing)).version(version)).outcome())
    }

    /// Whether a write under `fence` must stop: called inside the write's transaction right after it
    /// locked the run row (a claim needs that lock, so no takeover lands between this check and the
    /// write). True when `fence` is not the run's live lease any more (owner, token, expiry in the
    /// database's clock); false without a fence.
    pub(crate) async fn fenced(tx: &mut Tx<D>, run: &str, fence: Option<&Lease>) -> Result<bool, Abort> {
        let Some(lease) = fence else { return Ok(false) };
        if lease.run_id != run {
            return Ok(true);
        }
        let row = sqlx::query(D::SQL.fence).bind(run).fetch_optional(&mut **tx).await.map_err(abort::<D>)?;
        let Some(row) = row else { return Ok(true) };
        let (owner, token, live) = lease_row(&row).map_err(abort::<D>)?;
        Ok(!(live && owner == lease.owner && token == lease.token))
    }

    /// Appends `events` to the run's log in one statement.
    async fn put_events(tx: &mut Tx<D>, run_id: &str, events: &[Event]) -> Result<(), Abort> {
        if events.is_empty() {
            return Ok(());
        }
        let encoded: Vec<(i64, Vec<u8>)> =
            events.iter().map(|e| (db_int(e.seq), graph_store::events::encode(e))).collect();
        let mut q = sqlx::QueryBuilder::<D::Db>::new("INSERT INTO graph_events (run_id, seq, bytes) ");
        q.push_values(&encoded, |mut b, (seq, bytes)| {
            b.push_bind(run_id).push_bind(*seq).push_bind(bytes.as_slice());
        });
        q.push(D::SQL.events_upsert);
        q.build().execute(&mut **tx).await.map_err(abort::<D>)?;
        Ok(())
    }

    /// `save_checkpoint`, fenced by `fence` when given: the dialect's shortcut first, else a
    /// transaction of its own.
    pub(crate) async fn save(
        &self,
        cp: &Checkpoint,
        events: &[Event],
        status: &RunStatus,
        expected_version: u64,
        fence: Option<&Lease>,
    ) -> Result<CommitOutcome, StoreError> {
        let commit = Commit { cp, events, status, expected_version, fence };
        let _alone = match D::shortcut_save(self, commit).await {
            Shortcut::Done(done) => return done,
            Shortcut::Alone(held) => held,
        };
        let record = encode(cp);
        self.with_conflicts("committing a checkpoint", || {
            self.try_save(cp, &record, events, status, expected_version, fence)
        })
        .await
    }

    /// One attempt of `save_checkpoint`.
    async fn try_save(
        &self,
        cp: &Checkpoint,
        record: &[u8],
        events: &[Event],
        status: &RunStatus,
        expected_version: u64,
        fence: Option<&Lease>,
    ) -> Result<CommitOutcome, Abort> {
        let run: &str = &cp.run_id;
        let step = db_int(cp.step);
        let facts = CommitFacts::new(&cp.idempotency_key, expected_version);
        let mut tx = self.transaction().await.map_err(abort::<D>)?;
        // 1. The key, first: a duplicate waits here for the holder and is then refused. 2. The run row,
        // locked: commits of one run are serialized from here on.
        let row = match D::key_then_lock(&mut tx, cp.idempotency_key.as_str(), run, step).await {
            Ok(row) => row,
            Err(e) if D::classify(&e) == Class::Unique => {
                tx.rollback().await.map_err(abort::<D>)?;
                let version = self.version_of(run).await?;
                return Ok(decide(&facts.key_seen(true).version(version)).outcome());
            }
            Err(e) => return Err(abort::<D>(e)),
        };
        self.wrote(1)?;
        let (row, has_pending) = match row {
            Some((bytes, pending)) => (Some(decode_run_of(run, None, &bytes)?), pending),
            None => (None, false),
        };
        let facts = facts.version(row.as_ref().map_or(0, |r| r.version));
        // Fencing: under a worker's lease, a lost lease writes nothing.
        let facts = facts.fenced(Self::fenced(&mut tx, run, fence).await?);
        if let Verdict::Refuse(outcome) = decide(&facts) {
            // 3. The step comes before the version: a checkpoint the primary key refuses is the step
            // taken. Both roll back, releasing the key.
            if !matches!(outcome, CommitOutcome::VersionConflict { .. }) {
                tx.rollback().await.map_err(abort::<D>)?;
                return Ok(outcome);
            }
            let inserted = sqlx::query(D::SQL.insert_checkpoint)
                .bind(run)
                .bind(step)
                .bind(cp.idempotency_key.as_str())
                .bind(record)
                .execute(&mut *tx)
                .await;
            tx.rollback().await.map_err(abort::<D>)?;
            return match inserted {
                Ok(_) => Ok(outcome),
                Err(e) if D::classify(&e) == Class::Unique => self.step_taken(facts, run, cp.step, e).await,
                Err(e) => Err(abort::<D>(e)),
            };
        }
        // 3.–5. The checkpoint (its primary key refuses a second one for the step: the step taken), its
        // outbox rows, the events, the pending step gone, the run row.
        let (writes, info) = StepWrites::of(cp, record, events, status, row.as_ref(), has_pending);
        match D::write_step(&mut tx, &writes).await {
            Ok(()) => {}
            Err(e) if D::classify(&e) == Class::Unique => {
                tx.rollback().await.map_err(abort::<D>)?;
                return self.step_taken(facts, run, cp.step, e).await;
            }
            Err(e) => return Err(abort::<D>(e)),
        }
        self.wrote(2)?;
        self.wrote(3)?;
        tx.commit().await.map_err(abort::<D>)?;
        let version = info.version;
        D::remember_row(self, writes.row_bytes, info);
        Ok(CommitOutcome::Committed { version })
    }

    /// `set_status`, fenced by `fence` when given.
    pub(crate) async fn status(
        &self,
        run_id: &str,
        status: &RunStatus,
        events: &[Event],
        pending: Option<&[u8]>,
        expected_version: u64,
        fence: Option<&Lease>,
    ) -> Result<CommitOutcome, StoreError> {
        self.with_conflicts("updating a run's status", || {
            self.try_status(run_id, status, events, pending, expected_version, fence)
        })
        .await
    }

    /// One attempt of `set_status`.
    async fn try_status(
        &self,
        run_id: &str,
        status: &RunStatus,
        events: &[Event],
        pending: Option<&[u8]>,
        expected_version: u64,
        fence: Option<&Lease>,
    ) -> Result<CommitOutcome, Abort> {
        let mut tx = self.transaction().await.map_err(abort::<D>)?;
        let row =
            sqlx::query(D::SQL.lock_run).bind(run_id).fetch_optional(&mut *tx).await.map_err(abort::<D>)?;
        let (info, has_pending) = match &row {
            Some(row) => {
                let info = decode_run_of(run_id, None, &Self::bytes(row, "reading a run row")?)?;
                (Some(info), row.try_get::<bool, _>(1).map_err(abort::<D>)?)
            }
            None => (None, false),
        };
        let fenced = info.is_some() && Self::fenced(&mut tx, run_id, fence).await?;
        let verdict = decide_status(info.as_ref().map(|i| i.version), fenced, expected_version);
        let Some(mut info) = info.filter(|_| verdict.writes()) else {
            tx.rollback().await.map_err(abort::<D>)?;
            return Ok(verdict.outcome());
        };
        info.after_status(status, head_after(None, events));
        Self::put_events(&mut tx, run_id, events).await?;
        if let Some(p) = pending {
            sqlx::query(D::SQL.upsert_pending)
                .bind(run_id)
                .bind(p)
                .execute(&mut *tx)
                .await
                .map_err(abort::<D>)?;
        }
        let bytes = encode_run(&info);
        sqlx::query(D::SQL.update_run)
            .bind(status.as_str())
            .bind(db_int(info.latest_step))
            .bind(db_int(info.version))
            .bind(bytes.as_slice())
            .bind(has_pending || pending.is_some())
            .bind(status.wake_at_ms().map_or(-1, db_int))
            .bind(run_id)
            .execute(&mut *tx)
            .await
            .map_err(abort::<D>)?;
        tx.commit().await.map_err(abort::<D>)?;
        D::remember_row(self, bytes, info);
        Ok(verdict.outcome())
    }

    /// `put_effect`, fenced by `fence` when given.
    pub(crate) async fn effect(
        &self,
        record: &EffectRecord,
        expected: Option<&EffectState>,
        fence: Option<&Lease>,
    ) -> Result<EffectOutcome, StoreError> {
        self.with_conflicts("journaling an effect", || self.try_effect(record, expected, fence)).await
    }

    /// One attempt of `put_effect`.
    async fn try_effect(
        &self,
        record: &EffectRecord,
        expected: Option<&EffectState>,
        fence: Option<&Lease>,
    ) -> Result<EffectOutcome, Abort> {
        let mut tx = self.transaction().await.map_err(abort::<D>)?;
        let mut fenced = false;
        if fence.is_some() {
            // Under a lease: the run row locked first, as a commit does (a claim needs that lock, so no
            // takeover lands between this check and the write), then the lease.
            sqlx::query(D::SQL.lock_run)
                .bind(record.run_id.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(abort::<D>)?;
            fenced = Self::fenced(&mut tx, record.run_id.as_str(), fence).await?;
        }
        let current = match fenced {
            true => None, // decided by the fence
            false => {
                let row = sqlx::query(D::SQL.lock_effect)
                    .bind(record.key.as_str())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(abort::<D>)?;
                match &row {
                    Some(r) => Some(decode_effect(&Self::bytes(r, "reading an effect")?)?),
                    None => None,
                }
            }
        };
        let outcome = decide_effect(fenced, current.as_ref(), expected);
        if outcome != EffectOutcome::Written {
            tx.rollback().await.map_err(abort::<D>)?;
            return Ok(outcome);
        }
        let bytes = encode_effect(record);
        if current.is_some() {
            sqlx::query(D::SQL.update_effect)
                .bind(bytes.as_slice())
                .bind(record.key.as_str())
                .execute(&mut *tx)
                .await
                .map_err(abort::<D>)?;
        } else {
            sqlx::query(D::SQL.insert_effect)
                .bind(record.key.as_str())
                .bind(record.run_id.as_str())
                .bind(db_int(record.step))
                .bind(record.path.as_str())
                .bind(i64::from(record.call_index))
                .bind(bytes.as_slice())
                .execute(&mut *tx)
                .await
                .map_err(abort::<D>)?;
        }
        tx.commit().await.map_err(abort::<D>)?;
        Ok(outcome)
    }

    /// One attempt of `mailbox_op`: the run row locked (every change of a run's mailbox waits for the
    /// others and for the run's commits), the mailbox read, changed by the contract's rule, written back.
    async fn try_mailbox(&self, run_id: &str, op: &MailboxOp) -> Result<MailboxReply, Abort> {
        let mut tx = self.transaction().await.map_err(abort::<D>)?;
        let exists = sqlx::query(D::SQL.lock_run)
            .bind(run_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(abort::<D>)?
            .is_some();
        let row =
            sqlx::query(D::SQL.mailbox).bind(run_id).fetch_optional(&mut *tx).await.map_err(abort::<D>)?;
        let stored = row.map(|r| Self::bytes(&r, "reading a mailbox")).transpose()?;
        let (reply, write) = graph_store::mailbox::apply_to_bytes(stored.as_deref(), op.clone(), exists)?;
        match write {
            Some(bytes) => {
                sqlx::query(D::SQL.upsert_mailbox)
                    .bind(run_id)
                    .bind(bytes.as_slice())
                    .execute(&mut *tx)
                    .await
                    .map_err(abort::<D>)?;
                tx.commit().await.map_err(abort::<D>)?;
            }
            None => tx.rollback().await.map_err(abort::<D>)?,
        }
        Ok(reply)
    }

    /// One attempt of `schedule_op`: the row locked (a missing row's insert is made unique by its
    /// primary key: a concurrent first put is a conflict, retried), changed by the contract's rule.
    async fn try_schedule(&self, name: &str, op: &ScheduleOp) -> Result<ScheduleReply, Abort> {
        let mut tx = self.transaction().await.map_err(abort::<D>)?;
        let row = sqlx::query(D::SQL.lock_schedule)
            .bind(name)
            .fetch_optional(&mut *tx)
            .await
            .map_err(abort::<D>)?;
        let stored = row.map(|r| Self::bytes(&r, "reading a schedule")).transpose()?;
        let (reply, write) = graph_store::schedule::apply_to_bytes(stored.as_deref(), op.clone())?;
        let statement = match &write {
            Some(RowWrite::Put(bytes)) => {
                Some(sqlx::query(D::SQL.upsert_schedule).bind(name).bind(bytes.as_slice()))
            }
            Some(RowWrite::Delete) => Some(sqlx::query(D::SQL.delete_schedule).bind(name)),
            None => None,
        };
        match statement {
            Some(q) => {
                q.execute(&mut *tx).await.map_err(abort::<D>)?;
                tx.commit().await.map_err(abort::<D>)?;
            }
            None => tx.rollback().await.map_err(abort::<D>)?,
        }
        Ok(reply)
    }

    /// One attempt of `ack_outbox`.
    async fn try_ack(&self, keys: &[String]) -> Result<usize, Abort> {
        let mut tx = self.transaction().await.map_err(abort::<D>)?;
        let mut removed = 0;
        for k in keys {
            let done = sqlx::query(D::SQL.delete_outbox)
                .bind(k.as_str())
                .execute(&mut *tx)
                .await
                .map_err(abort::<D>)?;
            removed += D::rows_affected(&done) as usize;
        }
        tx.commit().await.map_err(abort::<D>)?;
        Ok(removed)
    }

    /// Test hook (feature `test-hooks`): the stored record of a checkpoint.
    ///
    /// # Errors
    ///
    /// Backend failures.
    #[cfg(feature = "test-hooks")]
    pub async fn raw_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let what = "reading a checkpoint";
        let row = self.row(what, || sqlx::query(D::SQL.checkpoint).bind(run_id).bind(db_int(step))).await?;
        row.map(|r| Self::bytes(&r, what)).transpose()
    }

    /// Test hook (feature `test-hooks`): overwrites the stored record of a checkpoint (to simulate
    /// damage or a newer format).
    ///
    /// # Errors
    ///
    /// Backend failures.
    #[cfg(feature = "test-hooks")]
    pub async fn put_raw_checkpoint(&self, run_id: &str, step: u64, bytes: &[u8]) -> Result<(), StoreError> {
        sqlx::query(D::SQL.overwrite_checkpoint)
            .bind(bytes)
            .bind(run_id)
            .bind(db_int(step))
            .execute(&self.pool)
            .await
            .map_err(|e| self.error(D::classify(&e), "overwriting a checkpoint", e))?;
        Ok(())
    }

    /// Test hook (feature `test-hooks`): deletes a checkpoint's row, as damage that loses it would (the
    /// run row and the event log keep naming its commit).
    ///
    /// # Errors
    ///
    /// Backend failures.
    #[cfg(feature = "test-hooks")]
    pub async fn remove_raw_checkpoint(&self, run_id: &str, step: u64) -> Result<(), StoreError> {
        sqlx::query(D::SQL.remove_checkpoint)
            .bind(run_id)
            .bind(db_int(step))
            .execute(&self.pool)
            .await
            .map_err(|e| self.error(D::classify(&e), "removing a checkpoint", e))?;
        Ok(())
    }
}

/// (owner, token, live) of a lease row read with the `fence` / `lock_lease` statements.
pub(crate) fn lease_row<R: sqlx::Row>(row: &R) -> Result<(String, u64, bool), sqlx::Error>
where
    usize: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let owner: String = row.try_get(0)?;
    let token: i64 = row.try_get(1)?;
    let live: i64 = row.try_get(2)?;
    Ok((owner, from_db_int(token), live != 0))
}

#[async_trait]
impl<D: Dialect> Store for SqlStore<D>
where
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'q> &'q str: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> &'q [u8]: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> i64: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    for<'q> bool: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    for<'q> Vec<u8>: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    for<'q> String: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    usize: ColumnIndex<Row<D>>,
{
    async fn save_checkpoint(
        &self,
        cp: &Checkpoint,
        events: &[Event],
        status: &RunStatus,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        self.save(cp, events, status, expected_version, None).await
    }

    async fn set_status(
        &self,
        run_id: &str,
        status: &RunStatus,
        events: &[Event],
        pending: Option<&[u8]>,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        self.status(run_id, status, events, pending, expected_version, None).await
    }

    async fn events(&self, run_id: &str, from: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let what = "reading events";
        let rows = self
            .rows(what, || {
                sqlx::query(D::SQL.events).bind(run_id).bind(db_int(from)).bind(db_int(limit as u64))
            })
            .await?;
        rows.iter()
            .map(|r| {
                let seq: i64 = r.try_get(0).map_err(read_error::<D>(what))?;
                let bytes: Vec<u8> = r.try_get(1).map_err(read_error::<D>(what))?;
                graph_store::events::decode(run_id, from_db_int(seq), &bytes)
            })
            .collect()
    }

    async fn pending(&self, run_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let what = "reading a pending step";
        let row = self.row(what, || sqlx::query(D::SQL.pending).bind(run_id)).await?;
        row.map(|r| Self::bytes(&r, what)).transpose()
    }

    async fn mailbox_op(&self, run_id: &str, op: MailboxOp) -> Result<MailboxReply, StoreError> {
        self.with_conflicts("changing a mailbox", || self.try_mailbox(run_id, &op)).await
    }

    async fn schedule_op(&self, name: &str, op: ScheduleOp) -> Result<ScheduleReply, StoreError> {
        self.with_conflicts("changing a schedule", || self.try_schedule(name, &op)).await
    }

    async fn schedules(&self) -> Result<Vec<Schedule>, StoreError> {
        let what = "reading the schedules";
        let rows = self.rows(what, || sqlx::query(D::SQL.schedules)).await?;
        rows.iter().map(|r| graph_store::schedule::decode(&Self::bytes(r, what)?)).collect()
    }

    async fn mailbox(&self, run_id: &str) -> Result<Mailbox, StoreError> {
        let what = "reading a mailbox";
        let row = self.row(what, || sqlx::query(D::SQL.mailbox).bind(run_id)).await?;
        let bytes = row.map(|r| Self::bytes(&r, what)).transpose()?;
        Ok(bytes.map(|b| graph_store::mailbox::decode(&b)).transpose()?.unwrap_or_default())
    }

    async fn run_info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        let what = "reading a run";
        let row = self.row(what, || sqlx::query(D::SQL.run).bind(run_id)).await?;
        match row {
            Some(r) => Ok(Some(decode_run_of(run_id, None, &Self::bytes(&r, what)?)?)),
            None => Ok(None),
        }
    }

    async fn load_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Checkpoint>, StoreError> {
        let what = "reading a checkpoint";
        let row = self.row(what, || sqlx::query(D::SQL.checkpoint).bind(run_id).bind(db_int(step))).await?;
        match row {
            Some(r) => Ok(Some(decode(run_id, step, &Self::bytes(&r, what)?)?)),
            None => Ok(None),
        }
    }

    async fn latest(&self, run_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        let what = "reading the latest checkpoint";
        let rows = self.rows(what, || sqlx::query(D::SQL.latest).bind(run_id)).await?;
        let (latest, last) = Self::with_run_row(&rows, what)?;
        let last = last.into_iter().next_back();
        behind_run_row(run_id, latest, last.as_ref().map(|(s, _)| *s), through())?;
        last.map(|(step, bytes)| decode(run_id, step, &bytes)).transpose()
    }

    async fn checkpoints(&self, run_id: &str, from: u64, to: u64) -> Result<Vec<Checkpoint>, StoreError> {
        if from > to {
            return Ok(Vec::new());
        }
        let what = "reading checkpoints";
        let rows = self
            .rows(what, || sqlx::query(D::SQL.checkpoints).bind(run_id).bind(db_int(from)).bind(db_int(to)))
            .await?;
        rows.iter()
            .map(|r| {
                let step: i64 = r.try_get(0).map_err(read_error::<D>(what))?;
                let bytes: Vec<u8> = r.try_get(1).map_err(read_error::<D>(what))?;
                decode(run_id, from_db_int(step), &bytes)
            })
            .collect()
    }

    async fn history(&self, run_id: &str) -> Result<Vec<CheckpointMeta>, StoreError> {
        let what = "reading the checkpoints";
        let rows = self.rows(what, || sqlx::query(D::SQL.history).bind(run_id)).await?;
        let (latest, all) = Self::with_run_row(&rows, what)?;
        behind_run_row(run_id, latest, all.last().map(|(s, _)| *s), through())?;
        all.iter().map(|(step, bytes)| Ok(decode(run_id, *step, bytes)?.meta())).collect()
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        let what = "listing runs";
        let limit = filter.rows_to_read().map_or(i64::MAX, |n| db_int(n as u64));
        let start = filter.start();
        let rows = match filter.status {
            Some(kind) => {
                let q = || sqlx::query(D::SQL.runs_by_status).bind(kind.as_str()).bind(start).bind(limit);
                self.rows(what, q).await?
            }
            None => self.rows(what, || sqlx::query(D::SQL.runs).bind(start).bind(limit)).await?,
        };
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let run_id: String = r.try_get(1).map_err(read_error::<D>(what))?;
            if filter.past(&run_id) || filter.limit.is_some_and(|n| out.len() >= n) {
                break;
            }
            let info = decode_run_of(&run_id, None, &Self::bytes(r, what)?)?;
            if filter.matches(&info) {
                out.push(info);
            }
        }
        Ok(out)
    }

    async fn prune(&self, run_id: &str, keep: usize) -> Result<usize, StoreError> {
        let what = "pruning";
        let rows = self.rows(what, || sqlx::query(D::SQL.steps).bind(run_id)).await?;
        let steps: Vec<u64> = rows
            .iter()
            .map(|r| r.try_get::<i64, _>(0).map(from_db_int))
            .collect::<Result<_, _>>()
            .map_err(read_error::<D>(what))?;
        let Some(&oldest_kept) = steps.iter().rev().nth(keep.max(1) - 1).or(steps.first()) else {
            return Ok(0);
        };
        let floor = match self.load_checkpoint(run_id, oldest_kept).await? {
            Some(cp) => cp.state.base(oldest_kept),
            None => oldest_kept,
        };
        if !steps.iter().any(|&s| s < floor) {
            return Ok(0);
        }
        let done = self
            .on_pool(what, || sqlx::query(D::SQL.prune).bind(run_id).bind(db_int(floor)).execute(&self.pool))
            .await?;
        Ok(D::rows_affected(&done) as usize)
    }

    async fn load_effect(&self, key: &str) -> Result<Option<EffectRecord>, StoreError> {
        let what = "reading an effect";
        let row = self.row(what, || sqlx::query(D::SQL.effect).bind(key)).await?;
        match row {
            Some(r) => Ok(Some(decode_effect(&Self::bytes(&r, what)?)?)),
            None => Ok(None),
        }
    }

    async fn put_effect(
        &self,
        record: &EffectRecord,
        expected: Option<&EffectState>,
    ) -> Result<EffectOutcome, StoreError> {
        self.effect(record, expected, None).await
    }

    async fn effects(&self, run_id: &str) -> Result<Vec<EffectRecord>, StoreError> {
        let what = "reading the effect journal";
        let rows = self.rows(what, || sqlx::query(D::SQL.effects).bind(run_id)).await?;
        rows.iter().map(|r| decode_effect(&Self::bytes(r, what)?)).collect()
    }

    async fn outbox(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        let what = "reading the outbox";
        let rows = self.rows(what, || sqlx::query(D::SQL.outbox).bind(db_int(limit as u64))).await?;
        rows.iter().map(|r| decode_outbox(&Self::bytes(r, what)?)).collect()
    }

    async fn ack_outbox(&self, keys: &[String]) -> Result<usize, StoreError> {
        if keys.is_empty() {
            return Ok(0);
        }
        self.with_conflicts("acknowledging outbox rows", || self.try_ack(keys)).await
    }

    async fn check_integrity(&self) -> Result<Integrity, StoreError> {
        D::integrity(self).await
    }
}
