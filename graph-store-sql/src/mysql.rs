//! [`MySqlStore`]: the store on a MySQL or MariaDB server (feature `mysql`), the [`SqlStore`] of the
//! [`MySqlDialect`].

use std::str::FromStr;
use std::time::Duration;

use graph_store::commit::{CommitFacts, decide};
use graph_store::{CommitOutcome, Integrity, RunInfo, StoreError};
use sqlx::Row as _;
use sqlx::mysql::{MySql, MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{Pool, Transaction};

use crate::dialect::{Commit, Dialect, Shortcut, Statements, StepWrites};
use crate::store::read_error;
use crate::{
    Abort, Class, SERVER_SCHEMA_VERSION, SqlStore, client_class, db_int, from_db_int, newer_schema,
    statements,
};

/// The migrations, in order: (version, file).
const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../migrations/mysql/0001_init.sql")),
    (2, include_str!("../migrations/mysql/0002_leases.sql")),
    (3, include_str!("../migrations/mysql/0003_commit_group.sql")),
    (4, include_str!("../migrations/mysql/0004_run_graph.sql")),
    (5, include_str!("../migrations/mysql/0005_wake.sql")),
];

/// Seconds a connect waits for another process's migration (`GET_LOCK`).
const MIGRATION_LOCK_WAIT: i64 = 120;

/// A checkpoint store on a MySQL or MariaDB server (InnoDB; feature `mysql`). Clones share the pool.
///
/// [`MySqlStore::connect`] takes a URL (`mysql://user:password@host:3306/db`; `mariadb://` is read as
/// `mysql://`), TLS included (`?ssl-mode=required`, `verify_identity`, `ssl-ca=…`: sqlx's
/// [`MySqlConnectOptions`]); it applies the embedded migrations and checks the schema version before
/// it returns. Every connection of the pool is set to READ COMMITTED when it is opened. See the
/// [crate docs](crate) for how a commit works, and `docs/stores.md`.
///
/// # Examples
///
/// ```no_run
/// # async fn f() -> Result<(), graph_store::StoreError> {
/// let store = graph_store_sql::MySqlStore::connect("mysql://root@127.0.0.1/test").await?;
/// # drop(store);
/// # Ok(())
/// # }
/// ```
pub type MySqlStore = SqlStore<MySqlDialect>;

/// MySQL's and MariaDB's SQL for [`SqlStore`]: its statements, error numbers, and commits onto a known
/// run row in one script.
#[derive(Debug, Clone, Copy, Default)]
pub struct MySqlDialect;

impl std::fmt::Debug for MySqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = self.pool.connect_options();
        f.debug_struct("MySqlStore")
            .field("host", &o.get_host())
            .field("port", &o.get_port())
            .field("database", &o.get_database())
            .finish()
    }
}

impl MySqlStore {
    /// Connects to the server `url` names (a pool of up to 16 connections, 5 s to get one), creates or
    /// upgrades the schema, and checks its version. `mariadb://` URLs are accepted as `mysql://`.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when the server cannot be reached (its text names the server and,
    /// once the pool's acquire timeout has passed, says what one more attempt got: "Connection
    /// refused", no answer); [`StoreError::Backend`] for a bad URL, refused credentials or TLS;
    /// [`StoreError::UnsupportedSchemaVersion`] when the database holds a newer schema than this build
    /// knows.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let url = match url.strip_prefix("mariadb://") {
            Some(rest) => format!("mysql://{rest}"),
            None => url.to_owned(),
        };
        let options = MySqlConnectOptions::from_str(&url)
            .map_err(|e| StoreError::backend("the MySQL connection URL is not valid", e))?;
        Self::connect_with(options, Self::pool_options()).await
    }

    /// The pool options [`MySqlStore::connect`] uses: 16 connections, 5 s to acquire one, and no
    /// ping each time a connection is taken (the store's own check pings only suspect connections:
    /// idle for 10 s or more, or idle since a connection failure).
    pub fn pool_options() -> MySqlPoolOptions {
        MySqlPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(5))
            .test_before_acquire(false)
    }

    /// Connects with explicit connection options (host, credentials, TLS: `ssl_mode`, `ssl_ca`, …) and
    /// pool options, then migrates as [`MySqlStore::connect`] does. The pool's `after_connect` hook is
    /// replaced by one that sets the session to READ COMMITTED and (MariaDB) `idle_transaction_timeout`
    /// ([`IDLE_IN_TRANSACTION`](crate::IDLE_IN_TRANSACTION)), and turns Nagle's algorithm off on the
    /// connection (see `docs/stores.md`, "Connecting, TLS"), and its `before_acquire` hook by the
    /// store's check of suspect connections; start from [`MySqlStore::pool_options`] to keep sqlx from
    /// also pinging every connection it hands out.
    ///
    /// # Errors
    ///
    /// As [`MySqlStore::connect`].
    pub async fn connect_with(
        options: MySqlConnectOptions,
        pool: MySqlPoolOptions,
    ) -> Result<Self, StoreError> {
        let server =
            std::sync::Arc::new(crate::nodelay::server_addrs(options.get_host(), options.get_port()).await);
        let suspicion = crate::pool_check::Suspicion::new();
        let hook = suspicion.clone();
        let target = crate::target(options.get_host(), options.get_port(), options.get_database());
        let timeout = pool.get_acquire_timeout();
        let pool = pool
            .before_acquire(move |conn, meta| Box::pin(hook.clone().ping_if_suspect(conn, meta)))
            .after_connect(move |conn, _| {
                crate::nodelay::set_on_connections_to(&server);
                Box::pin(async move {
                    sqlx::query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .execute(&mut *conn)
                        .await?;
                    // MariaDB ends a session idle inside a transaction for this long, so the rows it
                    // locked do not keep other workers from a run whose lease has expired (see
                    // `IDLE_IN_TRANSACTION`). MySQL has no such setting; there a stopped session keeps
                    // its locks until its connection closes.
                    let idle = format!(
                        "SET SESSION idle_transaction_timeout = {}",
                        crate::IDLE_IN_TRANSACTION.as_secs()
                    );
                    crate::support::optional_setting::<sqlx::MySql>(&mut *conn, &idle).await;
                    Ok(())
                })
            })
            .connect_with(options.clone())
            .await;
        let pool = match pool {
            Ok(pool) => pool,
            Err(e) => {
                let probe = sqlx::ConnectOptions::connect(&options);
                return Err(crate::connect_error("MySQL", &target, timeout, e, classify, probe).await);
            }
        };
        let store = MySqlStore::over(pool, suspicion);
        store.migrate().await?;
        Ok(store)
    }

    /// [`Store::check_integrity`](graph_store::Store::check_integrity): `CHECK TABLE` on the store's
    /// tables (InnoDB reads each index and compares its entries with the table's).
    async fn integrity(&self) -> Result<Integrity, StoreError> {
        let what = "checking the tables";
        let rows = self.rows(what, || sqlx::query(sql::CHECK_TABLES)).await?;
        let mut found = Vec::new();
        for r in &rows {
            // Table, Op, Msg_type, Msg_text: one `status` row a table (`OK` when sound), after any
            // `error`, `warning` or `note` rows. Damage: an `error` row, or a status other than `OK`.
            let text = |i: usize| -> Result<String, StoreError> {
                let b: Vec<u8> = r.try_get(i).map_err(read_error::<MySqlDialect>(what))?;
                Ok(String::from_utf8_lossy(&b).into_owned())
            };
            let (table, kind, message) = (text(0)?, text(2)?.to_ascii_lowercase(), text(3)?);
            if kind == "error" || (kind == "status" && message != "OK") {
                found.push(format!("{table}: {kind}: {message}"));
            }
        }
        if found.is_empty() {
            let tables = sql::CHECK_TABLES.matches("graph_").count();
            return Ok(Integrity::Sound { check: format!("CHECK TABLE on {tables} tables") });
        }
        Err(StoreError::Corrupted {
            run: None,
            step: None,
            file: None,
            detail: format!("CHECK TABLE found: {}", found.join("; ")),
            remedy: "rebuild the table it names (`ALTER TABLE … FORCE`: InnoDB rebuilds its indexes from the \
                     rows) and look at the server's storage; if rows are damaged, restore the database \
                     from a backup",
        })
    }

    /// Applies the migrations newer than the database's schema, one process at a time (`GET_LOCK` on a
    /// name of the database, held on one connection). MySQL commits DDL implicitly: every statement of
    /// a migration is idempotent, and its version row is written last.
    async fn migrate(&self) -> Result<(), StoreError> {
        let what = "migrating the MySQL schema";
        let err = |e: sqlx::Error| self.error(classify(&e), what, e);
        let mut conn = self.pool.acquire().await.map_err(err)?;
        let locked: Option<i64> =
            sqlx::query_scalar("SELECT GET_LOCK(CONCAT('graph_migrate.', DATABASE()), ?)")
                .bind(MIGRATION_LOCK_WAIT)
                .fetch_one(&mut *conn)
                .await
                .map_err(err)?;
        if locked != Some(1) {
            return Err(StoreError::unavailable(
                what,
                format!("another process held the migration lock for more than {MIGRATION_LOCK_WAIT} s"),
            ));
        }
        let migrated = async {
            sqlx::query(
                "CREATE TABLE IF NOT EXISTS graph_schema_version (version INT NOT NULL) ENGINE = InnoDB",
            )
            .execute(&mut *conn)
            .await
            .map_err(err)?;
            // Every version the database lacks is applied, in order (not only those above the
            // highest): versions may land out of order from parallel changes.
            let applied: Vec<i32> = sqlx::query_scalar("SELECT version FROM graph_schema_version")
                .fetch_all(&mut *conn)
                .await
                .map_err(err)?;
            let found = i64::from(applied.iter().copied().max().unwrap_or(0));
            if found > i64::from(SERVER_SCHEMA_VERSION) {
                return Err(newer_schema(found));
            }
            let missing = |v: &u32| !applied.iter().any(|a| i64::from(*a) == i64::from(*v));
            for &(version, file) in MIGRATIONS.iter().filter(|(v, _)| missing(v)) {
                for statement in statements(file) {
                    match sqlx::query(sqlx::AssertSqlSafe(statement)).execute(&mut *conn).await {
                        Ok(_) => {}
                        // A column or index an interrupted earlier attempt already added.
                        Err(e) if already_applied(&e) => {}
                        Err(e) => return Err(err(e)),
                    }
                }
                sqlx::query("INSERT INTO graph_schema_version (version) VALUES (?)")
                    .bind(i32::try_from(version).unwrap_or(i32::MAX))
                    .execute(&mut *conn)
                    .await
                    .map_err(err)?;
                tracing::info!(version, "applied the MySQL schema migration");
            }
            Ok(())
        }
        .await;
        let unlocked = sqlx::query("SELECT RELEASE_LOCK(CONCAT('graph_migrate.', DATABASE()))")
            .execute(&mut *conn)
            .await;
        migrated?;
        unlocked.map_err(err)?;
        Ok(())
    }

    /// A commit onto the run row this store last wrote (or a new run's first), without reading the row
    /// first: `BEGIN`, one [`Script`] (the key, the checkpoint with its outbox rows and events, then the
    /// run row written only where it still holds the version this commit expects and no pending step),
    /// `COMMIT`: three round trips and four statements (an engine step with events, no outbox),
    /// against four and five for a commit that locks and reads the row ([`key_then_lock`],
    /// [`write_step`]). `Alone` when the row is not known at the expected version, under a worker's
    /// lease (fenced after the row lock), when the writes are too large for a script, or when the
    /// stored row was not the one kept: nothing of it was written, and the commit that reads the row
    /// decides it.
    async fn onto_known_row(&self, commit: Commit<'_>) -> Shortcut<()> {
        let Commit { cp, events, status, expected_version, fence } = commit;
        if fence.is_some() {
            return Shortcut::Alone(());
        }
        let before = match expected_version {
            0 => None,
            v => match self.known.at(&cp.run_id, v) {
                Some(known) => Some(known),
                None => return Shortcut::Alone(()),
            },
        };
        let record = graph_store::record::encode(cp);
        let (w, info) = StepWrites::of(cp, &record, events, status, before.as_ref().map(|k| &k.info), false);
        let done = match self.try_save_known(&w, expected_version).await {
            Ok(Some(outcome)) => Ok(outcome),
            Ok(None) => {
                self.known.forget(&cp.run_id);
                return Shortcut::Alone(());
            }
            // Lost a race: the commit that reads the row runs it again.
            Err(Abort::Sql(Class::Conflict | Class::Unique, _)) => return Shortcut::Alone(()),
            Err(Abort::Sql(class, e)) => Err(self.error(class, "committing a checkpoint", e)),
            Err(Abort::Store(e)) => Err(e),
        };
        if let Ok(CommitOutcome::Committed { .. }) = done {
            self.known.remember(w.row_bytes, info);
        }
        Shortcut::Done(done)
    }

    /// One attempt of [`Self::shortcut_save`]: the outcome, or none when the run row was not as known
    /// (rolled back, nothing written).
    async fn try_save_known(
        &self,
        w: &StepWrites<'_>,
        expected_version: u64,
    ) -> Result<Option<CommitOutcome>, Abort> {
        let abort = |e: sqlx::Error| Abort::Sql(classify(&e), e);
        let facts = CommitFacts::new(w.key, expected_version);
        let rows = Rows::of(w);
        let Some(script) = Script::of_step(w, &rows, Some(expected_version)) else { return Ok(None) };
        let mut tx = self.transaction().await.map_err(abort)?;
        let mut results = sqlx::raw_sql(sqlx::AssertSqlSafe(script.0)).execute_many(&mut *tx);
        // One result a statement, up to the first that failed.
        let (mut done, mut last) = (0, None);
        let failed = loop {
            match std::future::poll_fn(|cx| results.as_mut().poll_next(cx)).await {
                Some(Ok(r)) => {
                    done += 1;
                    last = Some(r.rows_affected());
                }
                Some(Err(e)) => break Some(e),
                None => break None,
            }
        };
        drop(results);
        if let Some(e) = failed {
            if classify(&e) != Class::Unique {
                return Err(abort(e));
            }
            tx.rollback().await.map_err(abort)?;
            let run = w.run_id;
            return if done == 0 {
                // The key, first: committed before.
                Ok(Some(decide(&facts.key_seen(true).version(self.version_of(run).await?)).outcome()))
            } else {
                // The checkpoint (`StepTaken`), or a new run's row inserted meanwhile (not known).
                match self.step_taken(facts, run, from_db_int(w.step), e).await {
                    Ok(outcome) => Ok(Some(outcome)),
                    Err(Abort::Sql(Class::Unique, _)) => Ok(None),
                    Err(other) => Err(other),
                }
            };
        }
        self.wrote(1)?;
        self.wrote(2)?;
        if last != Some(1) {
            // The run row held another version, or a pending step.
            tx.rollback().await.map_err(abort)?;
            return Ok(None);
        }
        self.wrote(3)?;
        tx.commit().await.map_err(abort)?;
        Ok(Some(CommitOutcome::Committed { version: from_db_int(w.version) }))
    }
}

impl Dialect for MySqlDialect {
    type Db = MySql;
    type State = ();
    type Alone = ();

    const NAME: &'static str = "MySQL";
    const SQL: Statements = sql::STATEMENTS;

    fn classify(e: &sqlx::Error) -> Class {
        classify(e)
    }

    /// A transaction (READ COMMITTED: set on every connection when it opens).
    async fn begin(pool: &Pool<MySql>) -> Result<Transaction<'static, MySql>, sqlx::Error> {
        pool.begin().await
    }

    async fn key_then_lock<'t>(
        tx: &'t mut Transaction<'static, MySql>,
        key: &'t str,
        run: &'t str,
        step: i64,
    ) -> Result<Option<(Vec<u8>, bool)>, sqlx::Error> {
        key_then_lock(tx, key, run, step).await
    }

    async fn write_step<'t>(
        tx: &'t mut Transaction<'static, MySql>,
        w: &'t StepWrites<'t>,
    ) -> Result<(), sqlx::Error> {
        write_step(tx, w).await
    }

    async fn shortcut_save<'s>(store: &'s MySqlStore, commit: Commit<'s>) -> Shortcut<()> {
        store.onto_known_row(commit).await
    }

    fn rows_affected(done: &sqlx::mysql::MySqlQueryResult) -> u64 {
        done.rows_affected()
    }

    async fn integrity(store: &MySqlStore) -> Result<Integrity, StoreError> {
        store.integrity().await
    }

    /// Keeps the run row this store just committed, for the next commit onto it.
    fn remember_row(store: &MySqlStore, bytes: Vec<u8>, info: RunInfo) {
        store.known.remember(bytes, info);
    }
}

/// Steps 1 and 2 of a commit in one round trip (a [`Script`]): inserts the idempotency key, then locks
/// and returns the run row (`row_bytes, has_pending`; none for a new run). The server runs the
/// statements in order and stops at the first that fails, so the key is still first.
async fn key_then_lock(
    tx: &mut Transaction<'static, MySql>,
    key: &str,
    run: &str,
    step: i64,
) -> Result<Option<(Vec<u8>, bool)>, sqlx::Error> {
    let mut s = Script::default();
    s.key(key, run, step);
    s.sql(";\nSELECT row_bytes, has_pending FROM graph_runs WHERE run_id = ").text(run).sql(" FOR UPDATE");
    let mut rows = sqlx::raw_sql(sqlx::AssertSqlSafe(s.0)).fetch_all(&mut **tx).await?;
    rows.pop().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose()
}

/// Steps 3 to 5 of a commit: the checkpoint, its outbox rows and the events (one multi-row statement
/// each, only when there are rows), the pending step (only when there is one), the run row. One round
/// trip (a [`Script`]) when the writes are small enough for one ([`SCRIPT_LIMIT`]), else a prepared
/// statement each.
async fn write_step(tx: &mut Transaction<'static, MySql>, w: &StepWrites<'_>) -> Result<(), sqlx::Error> {
    let rows = Rows::of(w);
    match Script::of_step(w, &rows, None) {
        Some(s) => sqlx::raw_sql(sqlx::AssertSqlSafe(s.0)).execute(&mut **tx).await.map(drop),
        None => write_step_in_statements(tx, w, rows).await,
    }
}

/// [`write_step`] as prepared statements, one round trip each (for writes too large for a [`Script`]).
async fn write_step_in_statements(
    tx: &mut Transaction<'static, MySql>,
    w: &StepWrites<'_>,
    rows: Rows<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query(sql::INSERT_CHECKPOINT)
        .bind(w.run_id)
        .bind(w.step)
        .bind(w.key)
        .bind(w.record)
        .execute(&mut **tx)
        .await?;
    if !rows.outbox.is_empty() {
        let mut q = sqlx::QueryBuilder::<MySql>::new(
            "INSERT INTO graph_outbox (run_id, step, idx, outbox_key, bytes) ",
        );
        q.push_values(rows.idx.into_iter().zip(rows.keys).zip(rows.outbox), |mut b, ((i, k), bytes)| {
            b.push_bind(w.run_id).push_bind(w.step).push_bind(i).push_bind(k).push_bind(bytes);
        });
        q.push(sql::OUTBOX_UPSERT);
        q.build().execute(&mut **tx).await?;
    }
    if !rows.events.is_empty() {
        let mut q = sqlx::QueryBuilder::<MySql>::new("INSERT INTO graph_events (run_id, seq, bytes) ");
        q.push_values(rows.seqs.into_iter().zip(rows.events), |mut b, (seq, bytes)| {
            b.push_bind(w.run_id).push_bind(seq).push_bind(bytes);
        });
        q.push(sql::EVENTS_UPSERT);
        q.build().execute(&mut **tx).await?;
    }
    if w.clear_pending {
        sqlx::query(sql::DELETE_PENDING).bind(w.run_id).execute(&mut **tx).await?;
    }
    let run = sqlx::query(if w.new_run { sql::INSERT_RUN } else { sql::COMMIT_RUN })
        .bind(w.status)
        .bind(w.latest_step)
        .bind(w.version)
        .bind(&w.row_bytes)
        .bind(false)
        .bind(w.run_id);
    let run = if w.new_run { run.bind(w.graph) } else { run };
    run.execute(&mut **tx).await?;
    if w.graph_changed {
        sqlx::query(sql::SET_GRAPH).bind(w.graph).bind(w.run_id).execute(&mut **tx).await?;
    }
    Ok(())
}

/// A step's outbox rows and events as columns, encoded once for a [`Script`] or for statements.
struct Rows<'w> {
    /// The outbox rows' indexes, keys and bytes.
    idx: Vec<i64>,
    keys: Vec<&'w str>,
    outbox: Vec<Vec<u8>>,
    /// The events' sequence numbers and bytes.
    seqs: Vec<i64>,
    events: Vec<Vec<u8>>,
}

impl<'w> Rows<'w> {
    fn of(w: &'w StepWrites<'_>) -> Self {
        let (idx, keys, outbox) = w.outbox_columns();
        let (seqs, events) = w.event_columns();
        Rows { idx, keys, outbox, seqs, events }
    }
}

/// The longest [`Script`] a commit sends, in bytes of SQL text; a step whose script would be longer is
/// written as prepared statements, one round trip each: a script carries bytes as hex (twice their
/// size) and all its statements in one packet, which must stay under the server's
/// `max_allowed_packet` (16 MiB by default on MariaDB, 64 MiB on MySQL).
const SCRIPT_LIMIT: usize = 128 * 1024;

/// Statements sent together, in one round trip, as one text query (MySQL's multi-statement protocol,
/// which sqlx's connections enable). The server runs them in order and stops at the first that fails.
///
/// A text query takes no bound parameters: every value is written as a literal that cannot end early
/// whatever it holds: bytes as hex (`X'…'`), strings as the hex of their UTF-8 (`_utf8mb4 X'…'`, the
/// columns' character set) and integers in decimal. Nothing of a value is ever written as SQL text.
#[derive(Default)]
struct Script(String);

impl Script {
    /// The idempotency key's insert.
    fn key(&mut self, key: &str, run: &str, step: i64) -> &mut Self {
        self.sql("INSERT INTO graph_keys (idem_key, run_id, step) VALUES (").text(key).sql(", ").text(run);
        self.sql(", ").int(step).sql(")")
    }

    /// The writes of a step in one script, none when it would be longer than [`SCRIPT_LIMIT`].
    /// Without `expected`: [`write_step`]'s (after the row lock: the checkpoint, its outbox rows, the
    /// events, the pending step, the run row). With `expected`: the key first, then the same writes
    /// with no pending step, the run row updated only where it holds version `expected` and no pending
    /// step (the last statement's count says whether it did), or inserted when `w` is a new run's.
    fn of_step(w: &StepWrites<'_>, rows: &Rows<'_>, expected: Option<u64>) -> Option<Script> {
        // A commit that moves the run to another graph (a migration's, rare) goes as statements.
        if w.graph_changed {
            return None;
        }
        // Hex doubles the bytes: writes over half the limit are not even written out.
        let bytes = w.record.len()
            + w.row_bytes.len()
            + rows.keys.iter().map(|k| k.len()).sum::<usize>()
            + rows.outbox.iter().chain(&rows.events).map(Vec::len).sum::<usize>()
            + (rows.outbox.len() + rows.events.len() + 3) * w.run_id.len();
        if bytes > SCRIPT_LIMIT / 2 {
            return None;
        }
        let mut s = Script::default();
        if expected.is_some() {
            s.key(w.key, w.run_id, w.step).sql(";\n");
        }
        s.sql("INSERT INTO graph_checkpoints (run_id, step, idem_key, record) VALUES (").text(w.run_id);
        s.sql(", ").int(w.step).sql(", ").text(w.key).sql(", ").bytes(w.record).sql(");\n");
        if !rows.outbox.is_empty() {
            s.sql("INSERT INTO graph_outbox (run_id, step, idx, outbox_key, bytes) VALUES ");
            for (n, ((i, key), bytes)) in rows.idx.iter().zip(&rows.keys).zip(&rows.outbox).enumerate() {
                s.sql(if n == 0 { "(" } else { ", (" }).text(w.run_id).sql(", ").int(w.step).sql(", ");
                s.int(*i).sql(", ").text(key).sql(", ").bytes(bytes).sql(")");
            }
            s.sql(sql::OUTBOX_UPSERT).sql(";\n");
        }
        if !rows.events.is_empty() {
            s.sql("INSERT INTO graph_events (run_id, seq, bytes) VALUES ");
            for (n, (seq, bytes)) in rows.seqs.iter().zip(&rows.events).enumerate() {
                s.sql(if n == 0 { "(" } else { ", (" }).text(w.run_id).sql(", ").int(*seq).sql(", ");
                s.bytes(bytes).sql(")");
            }
            s.sql(sql::EVENTS_UPSERT).sql(";\n");
        }
        if w.clear_pending {
            s.sql("DELETE FROM graph_pending WHERE run_id = ").text(w.run_id).sql(";\n");
        }
        if w.new_run {
            s.sql("INSERT INTO graph_runs (status, latest_step, version, row_bytes, has_pending, run_id, graph_fingerprint) VALUES (");
            s.text(w.status)
                .sql(", ")
                .int(w.latest_step)
                .sql(", ")
                .int(w.version)
                .sql(", ")
                .bytes(&w.row_bytes);
            s.sql(", FALSE, ").text(w.run_id).sql(", ").text(w.graph).sql(")");
        } else {
            s.sql("UPDATE graph_runs SET status = ")
                .text(w.status)
                .sql(", latest_step = ")
                .int(w.latest_step);
            s.sql(", version = ").int(w.version).sql(", row_bytes = ").bytes(&w.row_bytes);
            s.sql(", has_pending = FALSE WHERE run_id = ").text(w.run_id);
            if let Some(v) = expected {
                s.sql(" AND version = ").int(db_int(v)).sql(" AND has_pending = FALSE");
            }
        }
        (s.0.len() <= SCRIPT_LIMIT).then_some(s)
    }

    /// SQL text of the store's own (never a value).
    fn sql(&mut self, sql: &str) -> &mut Self {
        self.0.push_str(sql);
        self
    }

    /// `bytes` as a hex literal.
    fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.push_str("X'");
        graph_core::push_hex(&mut self.0, bytes);
        self.0.push('\'');
        self
    }

    /// A string as the hex literal of its UTF-8 bytes, in the columns' character set.
    fn text(&mut self, s: &str) -> &mut Self {
        self.0.push_str("_utf8mb4 ");
        self.bytes(s.as_bytes())
    }

    /// An integer.
    fn int(&mut self, i: i64) -> &mut Self {
        use std::fmt::Write as _;
        let _ = write!(self.0, "{i}");
        self
    }
}

/// ER_DUP_FIELDNAME (1060) or ER_DUP_KEYNAME (1061): a migration's `ADD COLUMN` or `CREATE INDEX` found
/// what it adds already there (MySQL has no `IF NOT EXISTS` for them).
fn already_applied(e: &sqlx::Error) -> bool {
    e.as_database_error().and_then(error_number).is_some_and(|n| matches!(n, 1060 | 1061))
}

/// The server's error number of a database error.
fn error_number(db: &dyn sqlx::error::DatabaseError) -> Option<u16> {
    db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>().map(sqlx::mysql::MySqlDatabaseError::number)
}

/// How a MySQL / MariaDB error is handled, by error number.
pub(crate) fn classify(e: &sqlx::Error) -> Class {
    let Some(db) = e.as_database_error() else { return client_class(e) };
    if db.is_unique_violation() {
        return Class::Unique;
    }
    match error_number(db) {
        // ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT
        Some(1213 | 1205) => Class::Conflict,
        // ER_CON_COUNT_ERROR, ER_SERVER_SHUTDOWN, ER_ABORTING_CONNECTION, ER_NET_READ_ERROR…,
        // ER_CONNECTION_KILLED (MariaDB), ER_QUERY_INTERRUPTED (KILL), CR_SERVER_GONE_ERROR, CR_SERVER_LOST
        Some(1040 | 1053 | 1152 | 1158..=1161 | 1927 | 1317 | 2006 | 2013) => Class::Unavailable,
        _ => Class::Other,
    }
}

mod sql {
    pub(super) const VERSION: &str = "SELECT version FROM graph_runs WHERE run_id = ?";
    pub(super) const LOCK_RUN: &str =
        "SELECT row_bytes, has_pending FROM graph_runs WHERE run_id = ? FOR UPDATE";
    pub(super) const RUN: &str = "SELECT row_bytes FROM graph_runs WHERE run_id = ?";
    pub(super) const CHECKPOINT: &str = "SELECT record FROM graph_checkpoints WHERE run_id = ? AND step = ?";
    pub(super) const OVERWRITE_CHECKPOINT: &str =
        "UPDATE graph_checkpoints SET record = ? WHERE run_id = ? AND step = ?";
    pub(super) const REMOVE_CHECKPOINT: &str = "DELETE FROM graph_checkpoints WHERE run_id = ? AND step = ?";
    pub(super) const INSERT_CHECKPOINT: &str =
        "INSERT INTO graph_checkpoints (run_id, step, idem_key, record) VALUES (?, ?, ?, ?)";
    pub(super) const EVENTS_UPSERT: &str = " ON DUPLICATE KEY UPDATE bytes = VALUES(bytes)";
    pub(super) const OUTBOX_UPSERT: &str = " ON DUPLICATE KEY UPDATE \
         outbox_key = VALUES(outbox_key), bytes = VALUES(bytes)";
    pub(super) const DELETE_PENDING: &str = "DELETE FROM graph_pending WHERE run_id = ?";
    pub(super) const UPSERT_PENDING: &str = "INSERT INTO graph_pending (run_id, bytes) VALUES (?, ?) \
         ON DUPLICATE KEY UPDATE bytes = VALUES(bytes)";
    pub(super) const MAILBOX: &str = "SELECT bytes FROM graph_mailboxes WHERE run_id = ?";
    pub(super) const UPSERT_MAILBOX: &str = "INSERT INTO graph_mailboxes (run_id, bytes) VALUES (?, ?) \
         ON DUPLICATE KEY UPDATE bytes = VALUES(bytes)";
    pub(super) const LOCK_SCHEDULE: &str = "SELECT bytes FROM graph_schedules WHERE name = ? FOR UPDATE";
    pub(super) const UPSERT_SCHEDULE: &str = "INSERT INTO graph_schedules (name, bytes) VALUES (?, ?) \
         ON DUPLICATE KEY UPDATE bytes = VALUES(bytes)";
    pub(super) const DELETE_SCHEDULE: &str = "DELETE FROM graph_schedules WHERE name = ?";
    pub(super) const SCHEDULES: &str = "SELECT bytes FROM graph_schedules ORDER BY name";
    pub(super) const PENDING: &str = "SELECT bytes FROM graph_pending WHERE run_id = ?";
    /// The binds of [`COMMIT_RUN`], then the graph fingerprint.
    pub(super) const INSERT_RUN: &str = "INSERT INTO graph_runs \
         (status, latest_step, version, row_bytes, has_pending, run_id, graph_fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?)";
    /// A commit's run row: (status, latest step, version, row bytes, has_pending, run). A commit leaves
    /// `wake_at_ms` as it was: its status is `running` or `completed`, which claims read without it.
    pub(super) const COMMIT_RUN: &str = "UPDATE graph_runs SET status = ?, latest_step = ?, version = ?, row_bytes = ?, \
         has_pending = ? WHERE run_id = ?";
    pub(super) const UPDATE_RUN: &str = "UPDATE graph_runs SET status = ?, latest_step = ?, version = ?, row_bytes = ?, \
         has_pending = ?, wake_at_ms = NULLIF(?, -1) WHERE run_id = ?";
    pub(super) const EVENTS: &str =
        "SELECT seq, bytes FROM graph_events WHERE run_id = ? AND seq >= ? ORDER BY seq LIMIT ?";
    /// One row always: the run row's latest step and the last checkpoint, each NULL when absent, of one
    /// snapshot (one statement).
    pub(super) const LATEST: &str = "SELECT r.latest_step, c.step, c.record FROM (SELECT ? AS id) p \
         LEFT JOIN graph_runs r ON r.run_id = p.id LEFT JOIN graph_checkpoints c ON c.run_id = p.id \
         AND c.step = (SELECT MAX(step) FROM graph_checkpoints m WHERE m.run_id = p.id)";
    /// The run row's latest step beside each checkpoint (one row with NULLs when there is none).
    pub(super) const HISTORY: &str = "SELECT r.latest_step, c.step, c.record FROM (SELECT ? AS id) p \
         LEFT JOIN graph_runs r ON r.run_id = p.id LEFT JOIN graph_checkpoints c ON c.run_id = p.id \
         ORDER BY c.step";
    pub(super) const CHECKPOINTS: &str = "SELECT step, record FROM graph_checkpoints \
         WHERE run_id = ? AND step >= ? AND step <= ? ORDER BY step";
    pub(super) const STEPS: &str = "SELECT step FROM graph_checkpoints WHERE run_id = ? ORDER BY step";
    pub(super) const PRUNE: &str = "DELETE FROM graph_checkpoints WHERE run_id = ? AND step < ?";
    pub(super) const RUNS: &str =
        "SELECT row_bytes, CAST(run_id AS CHAR) FROM graph_runs WHERE run_id >= ? ORDER BY run_id LIMIT ?";
    pub(super) const CHECK_TABLES: &str = "CHECK TABLE graph_runs, graph_checkpoints, graph_keys, graph_events, \
        graph_pending, graph_effects, graph_outbox, graph_leases, graph_lease_claims, graph_mailboxes, \
        graph_schedules";
    pub(super) const RUNS_BY_STATUS: &str = "SELECT row_bytes, CAST(run_id AS CHAR) FROM graph_runs WHERE status = ? AND run_id >= ? \
         ORDER BY run_id LIMIT ?";
    pub(super) const LOCK_EFFECT: &str = "SELECT record FROM graph_effects WHERE effect_key = ? FOR UPDATE";
    pub(super) const EFFECT: &str = "SELECT record FROM graph_effects WHERE effect_key = ?";
    pub(super) const UPDATE_EFFECT: &str = "UPDATE graph_effects SET record = ? WHERE effect_key = ?";
    pub(super) const INSERT_EFFECT: &str = "INSERT INTO graph_effects \
         (effect_key, run_id, step, path, call_index, record) VALUES (?, ?, ?, ?, ?, ?)";
    pub(super) const EFFECTS: &str =
        "SELECT record FROM graph_effects WHERE run_id = ? ORDER BY step, path, call_index";
    pub(super) const OUTBOX: &str = "SELECT bytes FROM graph_outbox ORDER BY run_id, step, idx LIMIT ?";
    pub(super) const DELETE_OUTBOX: &str = "DELETE FROM graph_outbox WHERE outbox_key = ?";

    /// Runnable runs whose graph no claim has read yet, their rows locked, skipping locked ones.
    pub(super) const UNSORTED: &str = "SELECT CAST(run_id AS CHAR), row_bytes FROM graph_runs \
         WHERE (status = 'running' OR (status IN ('waiting', 'interrupted') AND wake_at_ms IS NOT NULL)) \
         AND graph_fingerprint IS NULL \
         ORDER BY run_id LIMIT ? FOR UPDATE SKIP LOCKED";
    pub(super) const SET_GRAPH: &str = "UPDATE graph_runs SET graph_fingerprint = ? WHERE run_id = ?";
    /// Runnable runs of graph ?, and its parked runs due by ? = ? (ms since the epoch; below 0: the
    /// database's clock), without a live lease, at most ?, their run rows locked, skipping locked ones
    /// (the subquery's rows are read, not locked: InnoDB locks only the outer query's rows).
    pub(super) const CANDIDATES: &str = "SELECT CAST(r.run_id AS CHAR) FROM graph_runs r WHERE r.graph_fingerprint = ? \
         AND (r.status = 'running' OR (r.status IN ('waiting', 'interrupted') AND r.wake_at_ms <= \
         (CASE WHEN ? < 0 THEN CAST(FLOOR(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED) ELSE ? END))) \
         AND NOT EXISTS (SELECT 1 FROM graph_leases l WHERE l.run_id = r.run_id AND l.owner <> '' \
         AND l.expires_at > CURRENT_TIMESTAMP(6)) \
         ORDER BY r.run_id LIMIT ? FOR UPDATE SKIP LOCKED";
    /// (owner, token, live) of a run's lease.
    pub(super) const FENCE: &str = "SELECT CAST(owner AS CHAR), token, CAST(expires_at > CURRENT_TIMESTAMP(6) AS SIGNED) \
         FROM graph_leases WHERE run_id = ?";
    pub(super) const LOCK_LEASE: &str = "SELECT CAST(owner AS CHAR), token, \
         CAST(expires_at > CURRENT_TIMESTAMP(6) AS SIGNED) FROM graph_leases WHERE run_id = ? FOR UPDATE";
    /// Before the lease is replaced: the previous holder and expiry come from its row.
    pub(super) const LOG_CLAIM: &str = "INSERT INTO graph_lease_claims \
         (run_id, token, owner, claimed_at, prev_owner, prev_expires) \
         SELECT ?, ?, ?, CURRENT_TIMESTAMP(6), l.owner, l.expires_at \
         FROM (SELECT 1 AS one) x LEFT JOIN graph_leases l ON l.run_id = ?";
    pub(super) const UPSERT_LEASE: &str = "INSERT INTO graph_leases (run_id, owner, token, expires_at) \
         VALUES (?, ?, ?, CURRENT_TIMESTAMP(6) + INTERVAL ? MICROSECOND) \
         ON DUPLICATE KEY UPDATE owner = VALUES(owner), token = VALUES(token), \
         expires_at = VALUES(expires_at)";
    pub(super) const HEARTBEAT: &str = "UPDATE graph_leases \
         SET expires_at = CURRENT_TIMESTAMP(6) + INTERVAL ? MICROSECOND \
         WHERE run_id = ? AND owner = ? AND token = ? AND expires_at > CURRENT_TIMESTAMP(6)";
    pub(super) const RELEASE: &str = "UPDATE graph_leases SET owner = '', \
         expires_at = LEAST(expires_at, CURRENT_TIMESTAMP(6)) WHERE run_id = ? AND owner = ? AND token = ?";

    /// The statements of the generic store.
    pub(super) const STATEMENTS: crate::Statements = crate::Statements {
        version: VERSION,
        lock_run: LOCK_RUN,
        run: RUN,
        checkpoint: CHECKPOINT,
        overwrite_checkpoint: OVERWRITE_CHECKPOINT,
        remove_checkpoint: REMOVE_CHECKPOINT,
        insert_checkpoint: INSERT_CHECKPOINT,
        events_upsert: EVENTS_UPSERT,
        upsert_pending: UPSERT_PENDING,
        pending: PENDING,
        mailbox: MAILBOX,
        lock_schedule: LOCK_SCHEDULE,
        upsert_schedule: UPSERT_SCHEDULE,
        delete_schedule: DELETE_SCHEDULE,
        schedules: SCHEDULES,
        upsert_mailbox: UPSERT_MAILBOX,
        update_run: UPDATE_RUN,
        events: EVENTS,
        latest: LATEST,
        history: HISTORY,
        checkpoints: CHECKPOINTS,
        steps: STEPS,
        prune: PRUNE,
        runs: RUNS,
        runs_by_status: RUNS_BY_STATUS,
        lock_effect: LOCK_EFFECT,
        effect: EFFECT,
        update_effect: UPDATE_EFFECT,
        insert_effect: INSERT_EFFECT,
        effects: EFFECTS,
        outbox: OUTBOX,
        delete_outbox: DELETE_OUTBOX,
        fence: FENCE,
        lock_lease: LOCK_LEASE,
        unsorted: UNSORTED,
        set_graph: SET_GRAPH,
        candidates: CANDIDATES,
        log_claim: LOG_CLAIM,
        upsert_lease: UPSERT_LEASE,
        heartbeat: HEARTBEAT,
        release: RELEASE,
    };
}

#[cfg(test)]
mod tests {
    use graph_store::OutboxRow;

    use super::{Rows, SCRIPT_LIMIT, Script, StepWrites};

    fn writes<'a>(run: &'a str, key: &'a str, record: &'a [u8], outbox: &'a [OutboxRow]) -> StepWrites<'a> {
        StepWrites {
            run_id: run,
            step: 7,
            key,
            record,
            outbox,
            events: &[],
            clear_pending: false,
            new_run: false,
            graph: "g",
            graph_changed: false,
            status: graph_store::StatusKind::Running.as_str(),
            latest_step: 7,
            version: 4,
            row_bytes: b"row ' \\ \0 bytes".to_vec(),
        }
    }

    fn outbox(run: &str, n: usize) -> Vec<OutboxRow> {
        (0..n).map(|i| OutboxRow::new(format!("k{i:031}"), run, 7, "t", serde_json::json!(i))).collect()
    }

    /// The script with every hex literal (`X'…'`) taken out.
    fn without_hex(script: &str) -> String {
        let mut out = String::new();
        let mut rest = script;
        while let Some(at) = rest.find("X'") {
            out.push_str(&rest[..at]);
            let body = &rest[at + 2..];
            let end = body.find('\'').expect("a hex literal ends");
            assert!(body[..end].bytes().all(|b| b.is_ascii_hexdigit()), "{}", &body[..end]);
            rest = &body[end + 1..];
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn a_script_writes_every_value_as_hex() {
        let run = "r'); DROP TABLE graph_runs; -- \\";
        let key = "key\\'\"`";
        let rows = outbox(run, 2);
        let w = writes(run, key, b"\0'\\\"; DROP TABLE graph_keys", &rows);
        let s = Script::of_step(&w, &Rows::of(&w), Some(3)).expect("a small step is one script").0;
        let sql = without_hex(&s);
        assert!(!sql.contains('\''), "a quote outside a hex literal: {sql}");
        assert!(!sql.contains("DROP") && !sql.contains('\\') && !sql.contains('"'), "{sql}");
        assert!(sql.starts_with("INSERT INTO graph_keys"), "the key first: {sql}");
        assert!(sql.ends_with("AND version = 3 AND has_pending = FALSE"), "{sql}");
        assert_eq!(sql.matches(";\n").count(), 3, "key, checkpoint, outbox, run row: {sql}");
    }

    #[test]
    fn no_script_is_longer_than_the_limit() {
        let run = "a-run";
        let (mut some, mut none) = (0, 0);
        for n in (0..1_200).step_by(25) {
            let rows = outbox(run, n);
            let w = writes(run, "key", b"record", &rows);
            match Script::of_step(&w, &Rows::of(&w), None) {
                Some(s) => {
                    assert!(s.0.len() <= SCRIPT_LIMIT, "{n} rows: a script of {} bytes", s.0.len());
                    some += 1;
                }
                None => none += 1,
            }
        }
        assert!(some > 0 && none > 0, "{some} scripts, {none} refused");
        let large = writes(run, "key", &[7; 70_000], &[]);
        assert!(
            Script::of_step(&large, &Rows::of(&large), None).is_none(),
            "a 70 KB record goes as statements"
        );
    }
}
