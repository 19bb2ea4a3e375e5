//! [`MySqlStore`]: the store on a MySQL or MariaDB server (feature `mysql`).

use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySql, MySqlConnectOptions, MySqlPool, MySqlPoolOptions};

use super::{SERVER_SCHEMA_VERSION, StepWrites, client_class, newer_schema, sql_store, statements};
use crate::store::FailPoint;

/// The migrations, in order: (version, file).
const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../../../migrations/mysql/0001_init.sql")),
    (2, include_str!("../../../migrations/mysql/0002_leases.sql")),
    (3, include_str!("../../../migrations/mysql/0003_commit_group.sql")),
    (4, include_str!("../../../migrations/mysql/0004_run_graph.sql")),
];

/// Seconds a connect waits for another process's migration (`GET_LOCK`).
const MIGRATION_LOCK_WAIT: i64 = 120;

/// A checkpoint store on a MySQL or MariaDB server (InnoDB; feature `mysql`). Clones share the pool.
///
/// [`MySqlStore::connect`] takes a URL (`mysql://user:password@host:3306/db`; `mariadb://` is read as
/// `mysql://`), TLS included (`?ssl-mode=required`, `verify_identity`, `ssl-ca=…`: sqlx's
/// [`MySqlConnectOptions`]); it applies the embedded migrations and checks the schema version before
/// it returns. Every connection of the pool is set to READ COMMITTED when it is opened. See the
/// [module docs](crate::store::server) for how a commit works, and `docs/stores.md`.
///
/// # Examples
///
/// ```no_run
/// # async fn f() -> Result<(), graph_runtime::StoreError> {
/// let store = graph_runtime::store::MySqlStore::connect("mysql://root@127.0.0.1/test").await?;
/// # drop(store);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct MySqlStore {
    pool: MySqlPool,
    fail: FailPoint,
}

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
    /// [`StoreError::Unavailable`] when the server cannot be reached; [`StoreError::Backend`] for a bad
    /// URL, refused credentials or TLS; [`StoreError::UnsupportedSchemaVersion`] when the database holds
    /// a newer schema than this build knows.
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
    /// replaced by one that sets the session to READ COMMITTED and turns Nagle's algorithm off on the
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
            std::sync::Arc::new(super::nodelay::server_addrs(options.get_host(), options.get_port()).await);
        let pool = pool
            .before_acquire(|conn, meta| Box::pin(super::pool_check::ping_if_suspect(conn, meta)))
            .after_connect(move |conn, _| {
                super::nodelay::set_on_connections_to(&server);
                Box::pin(async move {
                    sqlx::query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .execute(&mut *conn)
                        .await
                        .map(drop)
                })
            })
            .connect_with(options)
            .await
            .map_err(|e| {
                let class = classify(&e);
                super::store_error(class, "connecting to MySQL", e)
            })?;
        let store = MySqlStore { pool, fail: Default::default() };
        store.migrate().await?;
        Ok(store)
    }

    /// Applies the migrations newer than the database's schema, one process at a time (`GET_LOCK` on a
    /// name of the database, held on one connection). MySQL commits DDL implicitly: every statement of
    /// a migration is idempotent, and its version row is written last.
    async fn migrate(&self) -> Result<(), StoreError> {
        let what = "migrating the MySQL schema";
        let err = |e: sqlx::Error| super::store_error(classify(&e), what, e);
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

    /// A transaction (READ COMMITTED: set on every connection when it opens).
    pub(super) async fn begin(&self) -> Result<sqlx::Transaction<'static, MySql>, sqlx::Error> {
        self.pool.begin().await
    }

    /// MySQL commits each step in a transaction of its own: alone (PostgreSQL groups
    /// concurrent runs' commits).
    #[allow(clippy::unused_async)]
    pub(super) async fn grouped_save(
        &self,
        _cp: &crate::store::Checkpoint,
        _events: &[crate::events::Event],
        _status: &crate::store::RunStatus,
        _expected_version: u64,
    ) -> super::Grouped<()> {
        super::Grouped::Alone(())
    }

    /// A run row this store just committed: MySQL keeps none (PostgreSQL keeps them for its groups).
    #[allow(clippy::unused_self)]
    pub(super) fn remember_row(&self, _bytes: Vec<u8>, _info: crate::store::RunInfo) {}
}

/// Steps 1 and 2 of a commit: inserts the idempotency key, then locks and returns the run row
/// (`row_bytes, has_pending`; none for a new run).
async fn key_then_lock(
    tx: &mut sqlx::Transaction<'static, MySql>,
    key: &str,
    run: &str,
    step: i64,
) -> Result<Option<sqlx::mysql::MySqlRow>, sqlx::Error> {
    sqlx::query(sql::INSERT_KEY).bind(key).bind(run).bind(step).execute(&mut **tx).await?;
    sqlx::query(sql::LOCK_RUN).bind(run).fetch_optional(&mut **tx).await
}

/// Steps 3 to 5 of a commit: the checkpoint, its outbox rows and the events (one multi-row statement
/// each, only when there are rows), the pending step (only when there is one), the run row.
async fn write_step(
    tx: &mut sqlx::Transaction<'static, MySql>,
    w: &StepWrites<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query(sql::INSERT_CHECKPOINT)
        .bind(w.run_id)
        .bind(w.step)
        .bind(w.key)
        .bind(w.record)
        .execute(&mut **tx)
        .await?;
    if !w.outbox.is_empty() {
        let (idx, keys, rows) = w.outbox_columns();
        let mut q = sqlx::QueryBuilder::<MySql>::new(
            "INSERT INTO graph_outbox (run_id, step, idx, outbox_key, bytes) ",
        );
        q.push_values(idx.into_iter().zip(keys).zip(rows), |mut b, ((i, k), bytes)| {
            b.push_bind(w.run_id).push_bind(w.step).push_bind(i).push_bind(k).push_bind(bytes);
        });
        q.push(sql::OUTBOX_UPSERT);
        q.build().execute(&mut **tx).await?;
    }
    if !w.events.is_empty() {
        let (seqs, events) = w.event_columns();
        let mut q = sqlx::QueryBuilder::<MySql>::new("INSERT INTO graph_events (run_id, seq, bytes) ");
        q.push_values(seqs.into_iter().zip(events), |mut b, (seq, bytes)| {
            b.push_bind(w.run_id).push_bind(seq).push_bind(bytes);
        });
        q.push(sql::EVENTS_UPSERT);
        q.build().execute(&mut **tx).await?;
    }
    if w.clear_pending {
        sqlx::query(sql::DELETE_PENDING).bind(w.run_id).execute(&mut **tx).await?;
    }
    let run = sqlx::query(if w.new_run { sql::INSERT_RUN } else { sql::UPDATE_RUN })
        .bind(w.status)
        .bind(w.latest_step)
        .bind(w.version)
        .bind(&w.row_bytes)
        .bind(false)
        .bind(w.run_id);
    let run = if w.new_run { run.bind(w.graph) } else { run };
    run.execute(&mut **tx).await.map(drop)
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
pub(super) fn classify(e: &sqlx::Error) -> Class {
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
    pub(super) const INSERT_KEY: &str = "INSERT INTO graph_keys (idem_key, run_id, step) VALUES (?, ?, ?)";
    pub(super) const LOCK_RUN: &str =
        "SELECT row_bytes, has_pending FROM graph_runs WHERE run_id = ? FOR UPDATE";
    pub(super) const RUN: &str = "SELECT row_bytes FROM graph_runs WHERE run_id = ?";
    pub(super) const CHECKPOINT: &str = "SELECT record FROM graph_checkpoints WHERE run_id = ? AND step = ?";
    #[cfg(feature = "test-hooks")]
    pub(super) const OVERWRITE_CHECKPOINT: &str =
        "UPDATE graph_checkpoints SET record = ? WHERE run_id = ? AND step = ?";
    pub(super) const INSERT_CHECKPOINT: &str =
        "INSERT INTO graph_checkpoints (run_id, step, idem_key, record) VALUES (?, ?, ?, ?)";
    pub(super) const EVENTS_UPSERT: &str = " ON DUPLICATE KEY UPDATE bytes = VALUES(bytes)";
    pub(super) const OUTBOX_UPSERT: &str = " ON DUPLICATE KEY UPDATE \
         outbox_key = VALUES(outbox_key), bytes = VALUES(bytes)";
    pub(super) const DELETE_PENDING: &str = "DELETE FROM graph_pending WHERE run_id = ?";
    pub(super) const UPSERT_PENDING: &str = "INSERT INTO graph_pending (run_id, bytes) VALUES (?, ?) \
         ON DUPLICATE KEY UPDATE bytes = VALUES(bytes)";
    pub(super) const PENDING: &str = "SELECT bytes FROM graph_pending WHERE run_id = ?";
    /// The binds of [`UPDATE_RUN`], then the graph fingerprint.
    pub(super) const INSERT_RUN: &str = "INSERT INTO graph_runs \
         (status, latest_step, version, row_bytes, has_pending, run_id, graph_fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?)";
    pub(super) const UPDATE_RUN: &str = "UPDATE graph_runs SET status = ?, latest_step = ?, version = ?, row_bytes = ?, \
         has_pending = ? WHERE run_id = ?";
    pub(super) const EVENTS: &str =
        "SELECT seq, bytes FROM graph_events WHERE run_id = ? AND seq >= ? ORDER BY seq LIMIT ?";
    pub(super) const LATEST: &str =
        "SELECT step, record FROM graph_checkpoints WHERE run_id = ? ORDER BY step DESC LIMIT 1";
    pub(super) const CHECKPOINTS: &str = "SELECT step, record FROM graph_checkpoints \
         WHERE run_id = ? AND step >= ? AND step <= ? ORDER BY step";
    pub(super) const STEPS: &str = "SELECT step FROM graph_checkpoints WHERE run_id = ? ORDER BY step";
    pub(super) const PRUNE: &str = "DELETE FROM graph_checkpoints WHERE run_id = ? AND step < ?";
    pub(super) const RUNS: &str = "SELECT row_bytes FROM graph_runs ORDER BY run_id LIMIT ?";
    pub(super) const RUNS_BY_STATUS: &str =
        "SELECT row_bytes FROM graph_runs WHERE status = ? ORDER BY run_id LIMIT ?";
    pub(super) const LOCK_EFFECT: &str = "SELECT record FROM graph_effects WHERE effect_key = ? FOR UPDATE";
    pub(super) const EFFECT: &str = "SELECT record FROM graph_effects WHERE effect_key = ?";
    pub(super) const UPDATE_EFFECT: &str = "UPDATE graph_effects SET record = ? WHERE effect_key = ?";
    pub(super) const INSERT_EFFECT: &str = "INSERT INTO graph_effects \
         (effect_key, run_id, step, path, call_index, record) VALUES (?, ?, ?, ?, ?, ?)";
    pub(super) const EFFECTS: &str =
        "SELECT record FROM graph_effects WHERE run_id = ? ORDER BY step, path, call_index";
    pub(super) const OUTBOX: &str = "SELECT bytes FROM graph_outbox ORDER BY run_id, step, idx LIMIT ?";
    pub(super) const DELETE_OUTBOX: &str = "DELETE FROM graph_outbox WHERE outbox_key = ?";
}

sql_store!(MySqlStore, MySql);
