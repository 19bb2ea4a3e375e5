//! The database-server stores: [`PostgresStore`] (feature `postgres`) and [`MySqlStore`] for MySQL and
//! MariaDB (feature `mysql`), on sqlx's runtime query API (no compile-time checked queries, no database
//! needed to build).
//!
//! Both share this module's logic (the `sql_store!` macro): only their SQL text, their error codes
//! and how a transaction starts differ. What they store is the bytes of [`super::record`] and
//! [`super::journal`] beside query columns; they never interpret state bytes.
//!
//! # A commit
//!
//! One transaction at READ COMMITTED:
//!
//! 1. insert the idempotency key (primary key): a unique violation (23505 / 1062, through sqlx's typed
//!    `is_unique_violation`) is `AlreadyCommitted`; a concurrent commit of the same key waits on the
//!    key's index entry until the first one commits or rolls back;
//! 2. lock the run row (`SELECT … FOR UPDATE`): commits of one run are serialized from here on;
//! 3. when the version differs: insert the checkpoint alone, its primary key (run, step) refusing it
//!    is `StepTaken` (read back after the rollback), else `VersionConflict` (both roll back, releasing
//!    the key);
//! 4. otherwise insert the checkpoint (refused: `StepTaken` as in 3), its outbox rows and events,
//!    delete the pending step (only when the run row says there is one), write the run row;
//! 5. commit.
//!
//! The statements are the backend's (`key_then_lock`, `write_step` in each backend's module): on
//! PostgreSQL steps 1–2 are one statement (the key insert's `RETURNING` feeds the row lock, so the key
//! is still first) and step 4 is one statement of data-modifying CTEs, so a commit is four round trips
//! (`BEGIN`, two statements, `COMMIT`); on MySQL steps 1–2 and steps 3–4 are each one *script*
//! (statements sent as one text query, values as hex literals: `Script` in `mysql.rs`), so a commit is
//! four round trips too, and three onto a run row the store knows (`MySqlStore::shortcut_save`: the
//! locking read left out, the run row's update checking the version it expects). The connection comes
//! from the pool without a ping (`pool_check`), and with Nagle's algorithm off (`nodelay`).
//!
//! On PostgreSQL, commits of concurrent runs are grouped: one transaction, two statements over arrays,
//! for a whole group (`postgres/group.rs`); a commit the group cannot decide, and a commit made while no
//! group is being written and fewer than four others go alone, runs the transaction above on its own.
//!
//! A unique violation after step 1 (two first commits of a new run racing past an absent run row),
//! a serialization failure or a deadlock (40001, 40P01 / 1213, 1205) rolls back and runs the whole
//! transaction again, up to [`CONFLICT_RETRIES`] times. Any other error rolls back everything.
//!
//! READ COMMITTED is enough because every decision is taken under a lock (the key's index entry, the
//! run row) or enforced by a unique index; SERIALIZABLE / REPEATABLE READ would only add aborts (and,
//! in InnoDB, gap locks) to commits that are already serialized per run.
//!
//! # Errors
//!
//! Connection-class failures (refused, reset, closed by the server, `pg_terminate_backend`, `KILL`,
//! server shutting down, pool timeout) are [`StoreError::Unavailable`] (retryable: the engine retries
//! through [`super::retry::RetryStore`]); everything else is a permanent `Backend` error.

pub mod lease;
#[cfg(feature = "mysql")]
mod mysql;
mod nodelay;
#[cfg(feature = "postgres")]
mod postgres;

pub use lease::{Lease, LeaseStore, LeasedStore};

#[cfg(feature = "mysql")]
pub use mysql::MySqlStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;

use std::time::Duration;

use crate::error::StoreError;
use crate::store::RunStatus;

/// The schema version this build writes and reads (`graph_schema_version`).
pub const SERVER_SCHEMA_VERSION: u32 = 4;

/// How often a transaction that lost a race (unique violation past the key, serialization failure,
/// deadlock) is run again before the error is reported.
pub const CONFLICT_RETRIES: u32 = 20;

/// How an sqlx error is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// A unique index refused a row.
    Unique,
    /// Lost a race (serialization failure, deadlock): run the transaction again.
    Conflict,
    /// The server cannot be reached for now.
    Unavailable,
    /// Anything else: permanent.
    Other,
}

/// The class of sqlx errors that do not come from the server's SQL engine.
pub(crate) fn client_class(e: &sqlx::Error) -> Class {
    match e {
        // A certificate the TLS handshake refused (rustls reports it as invalid data): permanent.
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::InvalidData => Class::Other,
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed => Class::Unavailable,
        // The server closed the connection in the middle of a message.
        sqlx::Error::Protocol(_) => Class::Unavailable,
        _ => Class::Other,
    }
}

/// A typed store error for `e`. A store's own errors go through its `error` method
/// ([`sql_store!`]), which also makes the store's idle connections suspect when `e` says the server
/// could not be reached.
pub(crate) fn store_error(class: Class, what: &str, e: sqlx::Error) -> StoreError {
    match class {
        Class::Unavailable => StoreError::unavailable(what.to_owned(), ServerError(e)),
        _ => StoreError::backend(what.to_owned(), ServerError(e)),
    }
}

/// The cause of a server store's [`StoreError`]: an sqlx error, said once.
///
/// sqlx's text of an error the server returned repeats the server's message as the error's source,
/// and PostgreSQL's adds the line of the server's own C source that raised it (`role "x" does not
/// exist at line 768: role "x" does not exist at line 768`). This says the server's message once,
/// with its code (PostgreSQL: the SQLSTATE, its detail and hint; MySQL: the error number and
/// SQLSTATE); any other sqlx error as sqlx says it, with its causes. [`ServerError::sqlx`] is the
/// error itself (`StoreError`'s `source()` downcasts to this type).
#[derive(Debug)]
pub struct ServerError(sqlx::Error);

impl ServerError {
    /// The sqlx error.
    pub fn sqlx(&self) -> &sqlx::Error {
        &self.0
    }

    /// The sqlx error, owned.
    pub fn into_sqlx(self) -> sqlx::Error {
        self.0
    }
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sqlx::Error::Database(db) = &self.0 else { return std::fmt::Display::fmt(&self.0, f) };
        #[cfg(feature = "postgres")]
        if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
            write!(f, "{} (SQLSTATE {})", pg.message(), pg.code())?;
            if let Some(detail) = pg.detail() {
                write!(f, "; {detail}")?;
            }
            if let Some(hint) = pg.hint() {
                write!(f, "; hint: {hint}")?;
            }
            return Ok(());
        }
        // MySQL's: "1045 (28000): Access denied for user …".
        std::fmt::Display::fmt(db, f)
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0 {
            // Said in full by `Display`.
            sqlx::Error::Database(_) => None,
            e => std::error::Error::source(e),
        }
    }
}

/// How long [`connect_error`] waits for its one connection of its own.
const CONNECT_PROBE: Duration = Duration::from_secs(2);

/// The error of a store whose pool could not open its first connection to `target` (`host:port,
/// database name`) within `timeout`, its acquire timeout.
///
/// sqlx's pool tries a refused connection (and a server starting up) again until that timeout and
/// then says only "pool timed out while waiting for an open connection". So then one more connection
/// is tried outside the pool (`probe`, for at most [`CONNECT_PROBE`]) to say why: the error stays
/// [`StoreError::Unavailable`], with the probe's error as its cause ("Connection refused"). Any other
/// error is classified by `classify` as everywhere else.
pub(crate) async fn connect_error<C>(
    backend: &str,
    target: &str,
    timeout: Duration,
    e: sqlx::Error,
    classify: fn(&sqlx::Error) -> Class,
    probe: impl std::future::Future<Output = Result<C, sqlx::Error>>,
) -> StoreError {
    let what = format!("connecting to {backend} at {target}");
    if !matches!(e, sqlx::Error::PoolTimedOut) {
        return store_error(classify(&e), &what, e);
    }
    let what = format!("{what}: no connection within {timeout:?}");
    let message = match tokio::time::timeout(CONNECT_PROBE, probe).await {
        Ok(Err(cause)) => return StoreError::unavailable(what, ServerError(cause)),
        Ok(Ok(_)) => format!("{what} (one more attempt connected: the server may be back)"),
        Err(_) => format!(
            "{what}: no answer to one more attempt within {CONNECT_PROBE:?} (a {backend} server \
             that does not answer, or not a {backend} server)"
        ),
    };
    StoreError::Unavailable { message, source: None }
}

/// `host:port, database name` of a connection, for errors (never the user or the password).
pub(crate) fn target(host: &str, port: u16, database: Option<&str>) -> String {
    match database {
        Some(db) => format!("{host}:{port}, database {db}"),
        None => format!("{host}:{port}"),
    }
}

/// When a pooled connection is pinged before use.
///
/// sqlx pings every connection it takes from the pool by default (`test_before_acquire`): one more
/// round trip before every commit and read, whose only use is to find connections the server or the
/// network has closed. The stores' pools ping instead only a connection that is suspect: idle for
/// [`IDLE_PING`](pool_check::IDLE_PING) or more, or idle since before a connection failure of the same
/// store (its [`Suspicion`](pool_check::Suspicion), shared by the store's clones and its pool's hook).
/// A connection the server closed while it was idle (a restart, `pg_terminate_backend`, `KILL`) fails
/// its first statement; the store runs that read, or that transaction's `BEGIN`, once more
/// (`on_pool`, `transaction` in [`sql_store!`]), and the failure has made the pool's other idle
/// connections suspect: the second try pings them, drops the dead ones and gets a live or a new one,
/// instead of failing once per dead connection. (sqlx still pings a connection when it goes back to
/// the pool, in a task of its own, off the caller's path.)
///
/// A failure makes only its own store's connections suspect: another store of the process may be on
/// another server, and one on the same server finds its dead connections the same way. (Until
/// 2026-11-27 one failure anywhere in the process made every store's idle connections suspect: a
/// store that lost a connection cost every other store of the process a ping on its next commits.)
pub(crate) mod pool_check {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use sqlx::pool::PoolConnectionMetadata;

    /// How long a connection may sit idle in the pool before it is pinged when taken.
    pub(crate) const IDLE_PING: Duration = Duration::from_secs(10);

    /// A pool's last connection failure, which makes the connections idle since then suspect.
    #[derive(Debug)]
    pub(crate) struct Suspicion {
        /// What `last_failure` counts from.
        epoch: Instant,
        /// The last connection failure, in milliseconds since `epoch` plus one (0: none yet).
        last_failure: AtomicU64,
    }

    impl Suspicion {
        /// A pool's, with no failure yet.
        pub(crate) fn new() -> Arc<Self> {
            Arc::new(Suspicion { epoch: Instant::now(), last_failure: AtomicU64::new(0) })
        }

        fn now_ms(&self) -> u64 {
            u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
        }

        /// Notes that a connection of the pool failed (an sqlx error of class `Unavailable`).
        pub(crate) fn connection_failed(&self) {
            self.last_failure.store(self.now_ms().saturating_add(1), Ordering::Relaxed);
        }

        /// Whether a connection with `meta` must be pinged before use: idle for [`IDLE_PING`] or
        /// more, or idle since before (or about when: millisecond granularity) the pool's last
        /// connection failure.
        pub(crate) fn suspect(&self, meta: &PoolConnectionMetadata) -> bool {
            if meta.idle_for >= IDLE_PING {
                return true;
            }
            let last = self.last_failure.load(Ordering::Relaxed);
            let idle_ms = u64::try_from(meta.idle_for.as_millis()).unwrap_or(u64::MAX);
            last != 0 && self.now_ms().saturating_sub(last - 1) <= idle_ms.saturating_add(1)
        }

        /// The pool's `before_acquire` hook: pings a [`suspect`](Self::suspect) connection (an error
        /// drops it from the pool, which then tries another or opens a new one).
        pub(crate) async fn ping_if_suspect<C: sqlx::Connection>(
            self: Arc<Self>,
            conn: &mut C,
            meta: PoolConnectionMetadata,
        ) -> Result<bool, sqlx::Error> {
            if self.suspect(&meta) {
                conn.ping().await?;
            }
            Ok(true)
        }
    }
}

/// What a transaction attempt ended with when it did not return an outcome.
pub(crate) enum Abort {
    /// An sqlx error and its class.
    Sql(Class, sqlx::Error),
    /// A store error (a damaged row, an injected failure).
    Store(StoreError),
}

impl From<StoreError> for Abort {
    fn from(e: StoreError) -> Self {
        Abort::Store(e)
    }
}

/// The variant name of a status: the `status` column, which `list_runs` filters on.
pub(crate) fn status_name(s: &RunStatus) -> &'static str {
    match s {
        RunStatus::Running => "running",
        RunStatus::Completed => "completed",
        RunStatus::Paused(_) => "paused",
        RunStatus::Interrupted(_) => "interrupted",
        RunStatus::Failed(_) => "failed",
        RunStatus::Cancelled => "cancelled",
    }
}

/// A `u64` (step, version, seq) as the `BIGINT` the schema keeps, saturating.
pub(crate) fn db_int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A `BIGINT` read back as a `u64`.
pub(crate) fn from_db_int(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// What a `Committed` step writes after the key and the run row lock: handed to the backend's
/// `write_step`, which writes it in as few statements as its SQL allows.
pub(crate) struct StepWrites<'a> {
    /// The run.
    pub(crate) run_id: &'a str,
    /// The checkpoint's step.
    pub(crate) step: i64,
    /// The checkpoint's idempotency key.
    pub(crate) key: &'a str,
    /// The checkpoint's bytes (`record::encode`).
    pub(crate) record: &'a [u8],
    /// The checkpoint's outbox rows, in emit order.
    pub(crate) outbox: &'a [crate::store::OutboxRow],
    /// The events appended with the checkpoint.
    pub(crate) events: &'a [crate::events::Event],
    /// The run has a pending step to delete.
    pub(crate) clear_pending: bool,
    /// The run has no row yet: insert it (a racing first commit makes the insert a unique violation).
    pub(crate) new_run: bool,
    /// The run's graph fingerprint, the `graph_fingerprint` column of an inserted row (schema 4; rows
    /// inserted without it have it filled in by the first claim that reads them).
    pub(crate) graph: &'a str,
    /// The run row's `status` column.
    pub(crate) status: &'static str,
    /// The run row's `latest_step` column.
    pub(crate) latest_step: i64,
    /// The run row's `version` column.
    pub(crate) version: i64,
    /// The run row's bytes (`record::encode_run`).
    pub(crate) row_bytes: Vec<u8>,
}

impl<'a> StepWrites<'a> {
    /// The writes of committing `cp` (its `record`, `events`, `status`) onto the run row `before`
    /// (none: a new run) whose pending flag is `has_pending`, and the run row after it.
    pub(crate) fn of(
        cp: &'a crate::store::Checkpoint,
        record: &'a [u8],
        events: &'a [crate::events::Event],
        status: &RunStatus,
        before: Option<&crate::store::RunInfo>,
        has_pending: bool,
    ) -> (Self, crate::store::RunInfo) {
        let info = crate::store::RunInfo::after_commit(
            before,
            &cp.run_id,
            cp.step,
            status,
            &cp.graph_fingerprint,
            crate::events::head_after(None, events),
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
            status: status_name(status),
            latest_step: db_int(info.latest_step),
            version: db_int(info.version),
            row_bytes: crate::store::record::encode_run(&info),
        };
        (writes, info)
    }

    /// The outbox rows as (index, key, bytes) columns.
    pub(crate) fn outbox_columns(&self) -> (Vec<i64>, Vec<&str>, Vec<Vec<u8>>) {
        let mut idx = Vec::with_capacity(self.outbox.len());
        let mut keys = Vec::with_capacity(self.outbox.len());
        let mut bytes = Vec::with_capacity(self.outbox.len());
        for (i, row) in self.outbox.iter().enumerate() {
            idx.push(db_int(i as u64));
            keys.push(row.key.as_str());
            bytes.push(crate::store::journal::encode_outbox(row));
        }
        (idx, keys, bytes)
    }

    /// The events as (seq, bytes) columns.
    pub(crate) fn event_columns(&self) -> (Vec<i64>, Vec<Vec<u8>>) {
        self.events.iter().map(|e| (db_int(e.seq), crate::events::encode(e))).unzip()
    }
}

/// What a backend's `shortcut_save` did with a commit: committed it its own way (PostgreSQL in a group
/// with other runs' commits, MySQL onto the run row it knows), or left it to the transaction of its
/// own that reads the run row, holding `G` until it is.
pub(crate) enum Shortcut<G> {
    /// The commit's outcome.
    Done(Result<crate::store::CommitOutcome, StoreError>),
    /// Commit it alone (a transaction of its own); `G` is held until then.
    Alone(G),
}

/// A short pause before a transaction that lost a race runs again (grows with the attempt, a few ms).
pub(crate) async fn conflict_pause(attempt: u32) {
    tokio::time::sleep(Duration::from_millis(u64::from(attempt.min(10)) * 2 + 1)).await;
}

/// The statements of one migration file, split on `;` at the end of a line outside a `$$`-quoted
/// function body (the files hold no other `;` and no other dollar quotes); comment lines are left out.
pub(crate) fn statements(file: &str) -> impl Iterator<Item = String> + '_ {
    let mut current = String::new();
    let mut out = Vec::new();
    let mut in_body = false;
    for line in file.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("--") || trimmed.is_empty() {
            continue;
        }
        current.push_str(line);
        current.push('\n');
        in_body ^= line.matches("$$").count() % 2 == 1;
        if trimmed.ends_with(';') && !in_body {
            out.push(std::mem::take(&mut current).trim().trim_end_matches(';').to_owned());
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_owned());
    }
    out.into_iter()
}

/// The error for a database whose schema is newer than this build.
pub(crate) fn newer_schema(found: i64) -> StoreError {
    StoreError::UnsupportedSchemaVersion {
        found: u32::try_from(found).unwrap_or(u32::MAX),
        supported: SERVER_SCHEMA_VERSION,
    }
}

/// The `Store` implementation of a server store, shared by PostgreSQL and MySQL.
///
/// Expects in scope: `$store` with fields `pool: sqlx::Pool<$db>`, `fail: FailPoint` and `suspicion:
/// Arc<pool_check::Suspicion>` (the one its pool's `before_acquire` hook asks), a method
/// `begin(&self) -> Result<Transaction<'static, $db>, sqlx::Error>` (READ COMMITTED), a function
/// `classify(&sqlx::Error) -> Class`, the commit's statements `key_then_lock(&mut Transaction, key,
/// run, step)` (insert the key, then lock and return the run row's `row_bytes, has_pending`) and
/// `write_step(&mut Transaction, &StepWrites)`, and a module `sql` with the other statements.
macro_rules! sql_store {
    ($store:ident, $db:ty) => {
        use async_trait::async_trait;
        use sqlx::Row as _;

        use $crate::error::StoreError;
        use $crate::events::Event;
        use $crate::store::journal::{decode_effect, decode_outbox, encode_effect};
        use $crate::store::memory::effect_cas;
        use $crate::store::record::{decode, decode_run_of, encode, encode_run};
        use $crate::store::server::{
            Abort, CONFLICT_RETRIES, Class, conflict_pause, db_int, from_db_int, status_name,
            store_error,
        };
        use $crate::store::{
            Checkpoint, CheckpointMeta, CommitOutcome, EffectOutcome, EffectRecord, EffectState, OutboxRow,
            RunFilter, RunInfo, RunStatus, Store,
        };

        type Tx = sqlx::Transaction<'static, $db>;

        /// An sqlx error as an [`Abort`].
        fn abort(e: sqlx::Error) -> Abort {
            Abort::Sql(classify(&e), e)
        }

        /// An sqlx error of reading a row already fetched (a column's type or value) as a store error.
        /// Errors of the server or the connection go through the store's `error` method.
        fn read_error(what: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
            move |e| store_error(classify(&e), what, e)
        }

        /// The rows of `sql::LATEST` / `sql::HISTORY`: the run row's latest step (`None`: no run row), and
        /// the checkpoints (step, record) in step order.
        fn with_run_row(
            rows: &[<$db as sqlx::Database>::Row],
            what: &str,
        ) -> Result<(Option<u64>, Vec<(u64, Vec<u8>)>), StoreError> {
            let mut latest = None;
            let mut checkpoints = Vec::with_capacity(rows.len());
            for r in rows {
                latest = r.try_get::<Option<i64>, _>(0).map_err(read_error(what))?.map(from_db_int);
                let step: Option<i64> = r.try_get(1).map_err(read_error(what))?;
                let record: Option<Vec<u8>> = r.try_get(2).map_err(read_error(what))?;
                if let (Some(step), Some(record)) = (step, record) {
                    checkpoints.push((from_db_int(step), record));
                }
            }
            Ok((latest, checkpoints))
        }

        /// How the server stores read a run's checkpoints, for `behind_run_row`: rows of a table and
        /// the entries of its primary key's index, either of which damage can lose.
        fn through() -> $crate::store::ReadThrough {
            $crate::store::ReadThrough {
                what: "the table of its checkpoints",
                lost: "checkpoint rows, or their index entries, were lost",
                file: None,
                remedy: "the database is damaged: restore it from a backup; `graphctl verify --all` (amcheck, \
                         CHECK TABLE) tells whether only an index is, which REINDEX or a table rebuild repairs",
            }
        }

        /// A query of the backend, as `sqlx::query` builds it.
        type Query<'a> = sqlx::query::Query<'a, $db, <$db as sqlx::Database>::Arguments>;

        impl $store {
            /// Runs `op` (a read, a write that may run twice, or a `BEGIN`, on the pool), once more when
            /// it could not reach the server: a connection the server closed while it sat in the pool
            /// fails its first statement (the pool pings only suspect connections,
            /// [`pool_check`](crate::store::server::pool_check)), and that failure makes every
            /// connection of the pool idle since then suspect, so the second try runs on a live
            /// connection or a new one. `what` names the operation in the log.
            async fn once_more<T, F, Fut>(&self, what: &str, op: F) -> Result<T, sqlx::Error>
            where
                F: Fn() -> Fut,
                Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
            {
                match op().await {
                    Err(e) if classify(&e) == Class::Unavailable => {
                        self.suspicion.connection_failed();
                        tracing::debug!(error = %e, what, "a pooled connection was closed; trying again");
                        op().await
                    }
                    done => done,
                }
            }

            /// A typed store error for `e` ([`store_error`]); when it says the server could not be
            /// reached, the pool's idle connections become suspect.
            pub(crate) fn error(&self, class: Class, what: &str, e: sqlx::Error) -> StoreError {
                if class == Class::Unavailable {
                    self.suspicion.connection_failed();
                }
                store_error(class, what, e)
            }

            /// [`Self::once_more`], its error as a store error.
            pub(crate) async fn on_pool<T, F, Fut>(&self, what: &str, op: F) -> Result<T, StoreError>
            where
                F: Fn() -> Fut,
                Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
            {
                self.once_more(what, op).await.map_err(|e| self.error(classify(&e), what, e))
            }

            /// The rows of the query `q` builds ([`Self::on_pool`]).
            async fn rows<'q>(&self, what: &str, q: impl Fn() -> Query<'q>) -> Result<Vec<<$db as sqlx::Database>::Row>, StoreError> {
                self.on_pool(what, || q().fetch_all(&self.pool)).await
            }

            /// The row, if any, of the query `q` builds ([`Self::on_pool`]).
            async fn row<'q>(&self, what: &str, q: impl Fn() -> Query<'q>) -> Result<Option<<$db as sqlx::Database>::Row>, StoreError> {
                self.on_pool(what, || q().fetch_optional(&self.pool)).await
            }

            /// A transaction; its `BEGIN` is sent once more when it could not reach the server
            /// ([`Self::once_more`]: nothing was written yet).
            pub(crate) async fn transaction(&self) -> Result<sqlx::Transaction<'static, $db>, sqlx::Error> {
                self.once_more("beginning a transaction", || self.begin()).await
            }

            /// Runs `attempt` (one transaction) until it returns an outcome, running it again when it
            /// lost a race; `what` names the operation in errors.
            async fn with_conflicts<T, F, Fut>(&self, what: &str, mut attempt: F) -> Result<T, StoreError>
            where
                F: FnMut() -> Fut,
                Fut: std::future::Future<Output = Result<T, Abort>>,
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

            /// The fail point after write `n` of a commit (test hook).
            fn wrote(&self, n: usize) -> Result<(), Abort> {
                if self.fail.hit(n) {
                    Err(Abort::Store(StoreError::backend("injected failure", "fail point")))
                } else {
                    Ok(())
                }
            }

            /// The run's current version (0: no such run), outside any transaction.
            async fn version_of(&self, run_id: &str) -> Result<u64, Abort> {
                let row = sqlx::query(sql::VERSION).bind(run_id).fetch_optional(&self.pool).await.map_err(abort)?;
                Ok(match row {
                    Some(r) => from_db_int(r.try_get::<i64, _>(0).map_err(abort)?),
                    None => 0,
                })
            }

            /// `StepTaken` for a checkpoint insert refused by the primary key (after rollback: the stored
            /// checkpoint is committed); a race lost otherwise (pruned meanwhile), run again.
            async fn step_taken(&self, run_id: &str, step: u64, refused: sqlx::Error) -> Result<CommitOutcome, Abort> {
                let row = sqlx::query(sql::CHECKPOINT)
                    .bind(run_id)
                    .bind(db_int(step))
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(abort)?;
                let Some(row) = row else { return Err(Abort::Sql(Class::Unique, refused)) };
                let bytes: Vec<u8> = row.try_get(0).map_err(abort)?;
                let existing_key = decode(run_id, step, &bytes)?.idempotency_key;
                let version = self.version_of(run_id).await?;
                Ok(CommitOutcome::StepTaken { existing_key, version })
            }

            /// Appends `events` to the run's log in one statement.
            async fn put_events(tx: &mut Tx, run_id: &str, events: &[Event]) -> Result<(), Abort> {
                if events.is_empty() {
                    return Ok(());
                }
                let mut q = sqlx::QueryBuilder::<$db>::new("INSERT INTO graph_events (run_id, seq, bytes) ");
                q.push_values(events, |mut b, e| {
                    b.push_bind(run_id).push_bind(db_int(e.seq)).push_bind($crate::events::encode(e));
                });
                q.push(sql::EVENTS_UPSERT);
                q.build().execute(&mut **tx).await.map_err(abort)?;
                Ok(())
            }

            /// One attempt of `save_checkpoint`.
            async fn try_save(
                &self,
                cp: &Checkpoint,
                record: &[u8],
                events: &[Event],
                status: &RunStatus,
                expected_version: u64,
            ) -> Result<CommitOutcome, Abort> {
                let run: &str = &cp.run_id;
                let step = db_int(cp.step);
                let mut tx = self.transaction().await.map_err(abort)?;
                // 1. The key, first: a duplicate waits here for the holder and is then refused. 2. The
                // run row, locked: commits of one run are serialized from here on.
                let row = match key_then_lock(&mut tx, cp.idempotency_key.as_str(), run, step).await {
                    Ok(row) => row,
                    Err(e) if classify(&e) == Class::Unique => {
                        tx.rollback().await.map_err(abort)?;
                        let version = self.version_of(run).await?;
                        return Ok(CommitOutcome::AlreadyCommitted { version });
                    }
                    Err(e) => return Err(abort(e)),
                };
                self.wrote(1)?;
                let (row, has_pending) = match row {
                    Some(r) => (
                        Some(decode_run_of(run, None, &r.try_get::<Vec<u8>, _>(0).map_err(abort)?)?),
                        r.try_get::<bool, _>(1).map_err(abort)?,
                    ),
                    None => (None, false),
                };
                let version = row.as_ref().map_or(0, |r| r.version);
                // Fencing (store/server/lease.rs): under a worker's lease, a lost lease writes nothing.
                if Self::fenced(&mut tx, run).await? {
                    tx.rollback().await.map_err(abort)?;
                    return Ok(CommitOutcome::Fenced);
                }
                if version != expected_version {
                    // 3. The step comes before the version: a checkpoint the primary key refuses is
                    // `StepTaken`, else `VersionConflict`. Both roll back, releasing the key.
                    let inserted = sqlx::query(sql::INSERT_CHECKPOINT)
                        .bind(run)
                        .bind(step)
                        .bind(cp.idempotency_key.as_str())
                        .bind(record)
                        .execute(&mut *tx)
                        .await;
                    tx.rollback().await.map_err(abort)?;
                    return match inserted {
                        Ok(_) => Ok(CommitOutcome::VersionConflict { current: version }),
                        Err(e) if classify(&e) == Class::Unique => self.step_taken(run, cp.step, e).await,
                        Err(e) => Err(abort(e)),
                    };
                }
                // 3.–5. The checkpoint (its primary key refuses a second one for the step: `StepTaken`),
                // its outbox rows, the events, the pending step gone, the run row.
                let (writes, info) = StepWrites::of(cp, record, events, status, row.as_ref(), has_pending);
                match write_step(&mut tx, &writes).await {
                    Ok(()) => {}
                    Err(e) if classify(&e) == Class::Unique => {
                        tx.rollback().await.map_err(abort)?;
                        return self.step_taken(run, cp.step, e).await;
                    }
                    Err(e) => return Err(abort(e)),
                }
                self.wrote(2)?;
                self.wrote(3)?;
                tx.commit().await.map_err(abort)?;
                let version = info.version;
                self.remember_row(writes.row_bytes, info);
                Ok(CommitOutcome::Committed { version })
            }

            /// One attempt of `set_status`.
            async fn try_status(
                &self,
                run_id: &str,
                status: &RunStatus,
                events: &[Event],
                pending: Option<&[u8]>,
                expected_version: u64,
            ) -> Result<CommitOutcome, Abort> {
                let mut tx = self.transaction().await.map_err(abort)?;
                let row = sqlx::query(sql::LOCK_RUN).bind(run_id).fetch_optional(&mut *tx).await.map_err(abort)?;
                let Some(row) = row else {
                    tx.rollback().await.map_err(abort)?;
                    return Ok(CommitOutcome::VersionConflict { current: 0 });
                };
                // Fencing (store/server/lease.rs): under a worker's lease, a lost lease writes nothing.
                if Self::fenced(&mut tx, run_id).await? {
                    tx.rollback().await.map_err(abort)?;
                    return Ok(CommitOutcome::Fenced);
                }
                let mut info = decode_run_of(run_id, None, &row.try_get::<Vec<u8>, _>(0).map_err(abort)?)?;
                let has_pending = pending.is_some() || row.try_get::<bool, _>(1).map_err(abort)?;
                if info.version != expected_version {
                    tx.rollback().await.map_err(abort)?;
                    return Ok(CommitOutcome::VersionConflict { current: info.version });
                }
                info.version += 1;
                info.status = status.clone();
                info.event_head = $crate::events::head_after(info.event_head.take(), events);
                Self::put_events(&mut tx, run_id, events).await?;
                if let Some(p) = pending {
                    sqlx::query(sql::UPSERT_PENDING).bind(run_id).bind(p).execute(&mut *tx).await.map_err(abort)?;
                }
                let bytes = encode_run(&info);
                sqlx::query(sql::UPDATE_RUN)
                    .bind(status_name(status))
                    .bind(db_int(info.latest_step))
                    .bind(db_int(info.version))
                    .bind(&bytes)
                    .bind(has_pending)
                    .bind(run_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(abort)?;
                tx.commit().await.map_err(abort)?;
                let version = info.version;
                self.remember_row(bytes, info);
                Ok(CommitOutcome::Committed { version })
            }

            /// One attempt of `put_effect`.
            async fn try_effect(
                &self,
                record: &EffectRecord,
                expected: Option<&EffectState>,
            ) -> Result<EffectOutcome, Abort> {
                let mut tx = self.transaction().await.map_err(abort)?;
                if $crate::store::server::lease::current_fence().is_some() {
                    // Under a lease: the run row locked first, as a commit does (a claim needs that
                    // lock, so no takeover lands between this check and the write), then the lease.
                    sqlx::query(sql::LOCK_RUN)
                        .bind(record.run_id.as_str())
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(abort)?;
                    if Self::fenced(&mut tx, record.run_id.as_str()).await? {
                        tx.rollback().await.map_err(abort)?;
                        return Ok(EffectOutcome::Fenced);
                    }
                }
                let row = sqlx::query(sql::LOCK_EFFECT)
                    .bind(record.key.as_str())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(abort)?;
                let current = match &row {
                    Some(r) => Some(decode_effect(&r.try_get::<Vec<u8>, _>(0).map_err(abort)?)?),
                    None => None,
                };
                let outcome = effect_cas(current.as_ref(), expected);
                if outcome != EffectOutcome::Written {
                    tx.rollback().await.map_err(abort)?;
                    return Ok(outcome);
                }
                let bytes = encode_effect(record);
                if current.is_some() {
                    sqlx::query(sql::UPDATE_EFFECT)
                        .bind(bytes)
                        .bind(record.key.as_str())
                        .execute(&mut *tx)
                        .await
                        .map_err(abort)?;
                } else {
                    sqlx::query(sql::INSERT_EFFECT)
                        .bind(record.key.as_str())
                        .bind(record.run_id.as_str())
                        .bind(db_int(record.step))
                        .bind(record.path.as_str())
                        .bind(i64::from(record.call_index))
                        .bind(bytes)
                        .execute(&mut *tx)
                        .await
                        .map_err(abort)?;
                }
                tx.commit().await.map_err(abort)?;
                Ok(outcome)
            }

            /// One attempt of `ack_outbox`.
            async fn try_ack(&self, keys: &[String]) -> Result<usize, Abort> {
                let mut tx = self.transaction().await.map_err(abort)?;
                let mut removed = 0;
                for k in keys {
                    let done = sqlx::query(sql::DELETE_OUTBOX).bind(k.as_str()).execute(&mut *tx).await.map_err(abort)?;
                    removed += done.rows_affected() as usize;
                }
                tx.commit().await.map_err(abort)?;
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
                let row = self.row(what, || sqlx::query(sql::CHECKPOINT).bind(run_id).bind(db_int(step))).await?;
                row.map(|r| r.try_get::<Vec<u8>, _>(0)).transpose().map_err(read_error(what))
            }

            /// Test hook (feature `test-hooks`): overwrites the stored record of a checkpoint (to
            /// simulate damage or a newer format).
            ///
            /// # Errors
            ///
            /// Backend failures.
            #[cfg(feature = "test-hooks")]
            pub async fn put_raw_checkpoint(&self, run_id: &str, step: u64, bytes: &[u8]) -> Result<(), StoreError> {
                sqlx::query(sql::OVERWRITE_CHECKPOINT)
                    .bind(bytes)
                    .bind(run_id)
                    .bind(db_int(step))
                    .execute(&self.pool)
                    .await
                    .map_err(|e| self.error(classify(&e), "overwriting a checkpoint", e))?;
                Ok(())
            }

            /// Test hook (feature `test-hooks`): deletes a checkpoint's row, as damage that loses it
            /// would (the run row and the event log keep naming its commit).
            ///
            /// # Errors
            ///
            /// Backend failures.
            #[cfg(feature = "test-hooks")]
            pub async fn remove_raw_checkpoint(&self, run_id: &str, step: u64) -> Result<(), StoreError> {
                sqlx::query(sql::REMOVE_CHECKPOINT)
                    .bind(run_id)
                    .bind(db_int(step))
                    .execute(&self.pool)
                    .await
                    .map_err(|e| self.error(classify(&e), "removing a checkpoint", e))?;
                Ok(())
            }

            /// Test hook (feature `test-hooks`): the next commit fails after its `n`-th write (1 = the
            /// idempotency key, 2 = the checkpoint with its outbox rows and events, 3 = the run row),
            /// and its transaction rolls back.
            #[cfg(feature = "test-hooks")]
            pub fn fail_point(&self) -> &$crate::store::FailPoint {
                &self.fail
            }

            /// The connection pool (for tools and benchmarks that query the store's tables).
            pub fn pool(&self) -> &sqlx::Pool<$db> {
                &self.pool
            }

            /// Closes every connection of the pool, waiting for those in use to be returned.
            pub async fn close(&self) {
                self.pool.close().await;
            }
        }

        #[async_trait]
        impl Store for $store {
            async fn save_checkpoint(
                &self,
                cp: &Checkpoint,
                events: &[Event],
                status: &RunStatus,
                expected_version: u64,
            ) -> Result<CommitOutcome, StoreError> {
                let _alone = match self.shortcut_save(cp, events, status, expected_version).await {
                    $crate::store::server::Shortcut::Done(done) => return done,
                    $crate::store::server::Shortcut::Alone(slot) => slot,
                };
                let record = encode(cp);
                self.with_conflicts("committing a checkpoint", || {
                    self.try_save(cp, &record, events, status, expected_version)
                })
                .await
            }

            async fn set_status(
                &self,
                run_id: &str,
                status: &RunStatus,
                events: &[Event],
                pending: Option<&[u8]>,
                expected_version: u64,
            ) -> Result<CommitOutcome, StoreError> {
                self.with_conflicts("updating a run's status", || {
                    self.try_status(run_id, status, events, pending, expected_version)
                })
                .await
            }

            async fn events(&self, run_id: &str, from: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
                let what = "reading events";
                let rows = self
                    .rows(what, || sqlx::query(sql::EVENTS).bind(run_id).bind(db_int(from)).bind(db_int(limit as u64)))
                    .await?;
                rows.iter()
                    .map(|r| {
                        let seq: i64 = r.try_get(0).map_err(read_error(what))?;
                        let bytes: Vec<u8> = r.try_get(1).map_err(read_error(what))?;
                        $crate::events::decode(run_id, from_db_int(seq), &bytes)
                    })
                    .collect()
            }

            async fn pending(&self, run_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
                let what = "reading a pending step";
                let row = self.row(what, || sqlx::query(sql::PENDING).bind(run_id)).await?;
                row.map(|r| r.try_get::<Vec<u8>, _>(0)).transpose().map_err(read_error(what))
            }

            async fn run_info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
                let what = "reading a run";
                let row = self.row(what, || sqlx::query(sql::RUN).bind(run_id)).await?;
                match row {
                    Some(r) => Ok(Some(decode_run_of(run_id, None, &r.try_get::<Vec<u8>, _>(0).map_err(read_error(what))?)?)),
                    None => Ok(None),
                }
            }

            async fn load_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Checkpoint>, StoreError> {
                let what = "reading a checkpoint";
                let row = self.row(what, || sqlx::query(sql::CHECKPOINT).bind(run_id).bind(db_int(step))).await?;
                match row {
                    Some(r) => Ok(Some(decode(run_id, step, &r.try_get::<Vec<u8>, _>(0).map_err(read_error(what))?)?)),
                    None => Ok(None),
                }
            }

            async fn latest(&self, run_id: &str) -> Result<Option<Checkpoint>, StoreError> {
                let what = "reading the latest checkpoint";
                let rows = self.rows(what, || sqlx::query(sql::LATEST).bind(run_id)).await?;
                let (latest, last) = with_run_row(&rows, what)?;
                let last = last.into_iter().next_back();
                $crate::store::behind_run_row(run_id, latest, last.as_ref().map(|(s, _)| *s), through())?;
                last.map(|(step, bytes)| decode(run_id, step, &bytes)).transpose()
            }

            async fn checkpoints(&self, run_id: &str, from: u64, to: u64) -> Result<Vec<Checkpoint>, StoreError> {
                if from > to {
                    return Ok(Vec::new());
                }
                let what = "reading checkpoints";
                let rows = self
                    .rows(what, || sqlx::query(sql::CHECKPOINTS).bind(run_id).bind(db_int(from)).bind(db_int(to)))
                    .await?;
                rows.iter()
                    .map(|r| {
                        let step: i64 = r.try_get(0).map_err(read_error(what))?;
                        let bytes: Vec<u8> = r.try_get(1).map_err(read_error(what))?;
                        decode(run_id, from_db_int(step), &bytes)
                    })
                    .collect()
            }

            async fn history(&self, run_id: &str) -> Result<Vec<CheckpointMeta>, StoreError> {
                let what = "reading the checkpoints";
                let rows = self.rows(what, || sqlx::query(sql::HISTORY).bind(run_id)).await?;
                let (latest, all) = with_run_row(&rows, what)?;
                $crate::store::behind_run_row(run_id, latest, all.last().map(|(s, _)| *s), through())?;
                all.iter().map(|(step, bytes)| Ok(decode(run_id, *step, bytes)?.meta())).collect()
            }

            async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
                let what = "listing runs";
                let limit = filter.limit.map_or(i64::MAX, |n| db_int(n as u64));
                let rows = match &filter.status {
                    Some(s) => self.rows(what, || sqlx::query(sql::RUNS_BY_STATUS).bind(status_name(s)).bind(limit)).await?,
                    None => self.rows(what, || sqlx::query(sql::RUNS).bind(limit)).await?,
                };
                rows.iter()
                    .map(|r| {
                        let run_id: String = r.try_get(1).map_err(read_error(what))?;
                        decode_run_of(&run_id, None, &r.try_get::<Vec<u8>, _>(0).map_err(read_error(what))?)
                    })
                    .collect()
            }

            async fn prune(&self, run_id: &str, keep: usize) -> Result<usize, StoreError> {
                let what = "pruning";
                let rows = self.rows(what, || sqlx::query(sql::STEPS).bind(run_id)).await?;
                let steps: Vec<u64> = rows
                    .iter()
                    .map(|r| r.try_get::<i64, _>(0).map(from_db_int))
                    .collect::<Result<_, _>>()
                    .map_err(read_error(what))?;
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
                    .on_pool(what, || sqlx::query(sql::PRUNE).bind(run_id).bind(db_int(floor)).execute(&self.pool))
                    .await?;
                Ok(done.rows_affected() as usize)
            }

            async fn load_effect(&self, key: &str) -> Result<Option<EffectRecord>, StoreError> {
                let what = "reading an effect";
                let row = self.row(what, || sqlx::query(sql::EFFECT).bind(key)).await?;
                match row {
                    Some(r) => Ok(Some(decode_effect(&r.try_get::<Vec<u8>, _>(0).map_err(read_error(what))?)?)),
                    None => Ok(None),
                }
            }

            async fn put_effect(
                &self,
                record: &EffectRecord,
                expected: Option<&EffectState>,
            ) -> Result<EffectOutcome, StoreError> {
                self.with_conflicts("journaling an effect", || self.try_effect(record, expected)).await
            }

            async fn effects(&self, run_id: &str) -> Result<Vec<EffectRecord>, StoreError> {
                let what = "reading the effect journal";
                let rows = self.rows(what, || sqlx::query(sql::EFFECTS).bind(run_id)).await?;
                rows.iter().map(|r| decode_effect(&r.try_get::<Vec<u8>, _>(0).map_err(read_error(what))?)).collect()
            }

            async fn outbox(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
                let what = "reading the outbox";
                let rows = self.rows(what, || sqlx::query(sql::OUTBOX).bind(db_int(limit as u64))).await?;
                rows.iter().map(|r| decode_outbox(&r.try_get::<Vec<u8>, _>(0).map_err(read_error(what))?)).collect()
            }

            async fn ack_outbox(&self, keys: &[String]) -> Result<usize, StoreError> {
                if keys.is_empty() {
                    return Ok(0);
                }
                self.with_conflicts("acknowledging outbox rows", || self.try_ack(keys)).await
            }

            async fn check_integrity(&self) -> Result<$crate::store::Integrity, StoreError> {
                self.integrity().await
            }
        }
    };
}
pub(crate) use sql_store;

/// The sqlx these stores are built on, for [`PostgresStore::connect_with`] / [`MySqlStore::connect_with`]
/// options and for queries on [`PostgresStore::pool`] / [`MySqlStore::pool`].
pub use sqlx;

#[cfg(test)]
mod tests {
    use super::statements;

    #[test]
    fn a_function_body_is_one_statement_and_the_files_split_on_their_semicolons() {
        let file = "-- a comment;\nCREATE TABLE a (x INT);\n\nCREATE FUNCTION f() RETURNS INT LANGUAGE plpgsql AS $$\n\
                    BEGIN\n    -- inside;\n    PERFORM 1;\n    RETURN 2;\nEND\n$$;\nCREATE INDEX i ON a (x);\n";
        let got: Vec<String> = statements(file).collect();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0], "CREATE TABLE a (x INT)");
        assert!(got[1].starts_with("CREATE FUNCTION f()") && got[1].contains("PERFORM 1;\n    RETURN 2;"));
        assert!(got[1].ends_with("$$"), "{:?}", got[1]);
        assert_eq!(got[2], "CREATE INDEX i ON a (x)");
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn the_commit_group_migration_is_one_statement() {
        let file = include_str!("../../../migrations/postgres/0003_commit_group.sql");
        let got: Vec<String> = statements(file).collect();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].contains("RETURN l_written;"));
    }

    #[cfg(feature = "mysql")]
    #[test]
    fn mysql_schema_3_has_no_statement() {
        let file = include_str!("../../../migrations/mysql/0003_commit_group.sql");
        assert_eq!(statements(file).count(), 0);
    }
}
