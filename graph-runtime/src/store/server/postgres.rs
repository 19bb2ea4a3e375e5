//! [`PostgresStore`]: the store on a PostgreSQL server (feature `postgres`).

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, Postgres};

use super::{SERVER_SCHEMA_VERSION, client_class, newer_schema, sql_store, statements};
use crate::store::FailPoint;

/// The migrations, in order: (version, file).
// Issue 18 (workers): 3 = leases. Version 2 is another change's; the runner applies every version the
// database lacks, so the gap is harmless and 2 is applied when it arrives.
const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../../../migrations/postgres/0001_init.sql")),
    (3, include_str!("../../../migrations/postgres/0003_leases.sql")),
];

/// The advisory lock key that serializes migrations (per database): "graph-rt" in ASCII.
const MIGRATION_LOCK: i64 = 0x6772_6170_682d_7274;

/// A checkpoint store on a PostgreSQL server (feature `postgres`). Clones share the pool.
///
/// [`PostgresStore::connect`] takes a libpq-style URL (`postgres://user:password@host:5432/db`), TLS
/// included (`?sslmode=require`, `verify-full`, `sslrootcert=…`: sqlx's [`PgConnectOptions`]); it
/// applies the embedded migrations and checks the schema version before it returns. See the
/// [module docs](crate::store::server) for how a commit works, and `docs/stores.md`.
///
/// # Examples
///
/// ```no_run
/// # async fn f() -> Result<(), graph_runtime::StoreError> {
/// let store = graph_runtime::store::PostgresStore::connect("postgres://postgres@127.0.0.1/test").await?;
/// # drop(store);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    fail: FailPoint,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = self.pool.connect_options();
        f.debug_struct("PostgresStore")
            .field("host", &o.get_host())
            .field("port", &o.get_port())
            .field("database", &o.get_database())
            .finish()
    }
}

impl PostgresStore {
    /// Connects to the server `url` names (a pool of up to 16 connections, 5 s to get one), creates or
    /// upgrades the schema, and checks its version.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when the server cannot be reached; [`StoreError::Backend`] for a bad
    /// URL, refused credentials or TLS; [`StoreError::UnsupportedSchemaVersion`] when the database holds
    /// a newer schema than this build knows.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::backend("the PostgreSQL connection URL is not valid", e))?;
        Self::connect_with(options, Self::pool_options()).await
    }

    /// The pool options [`PostgresStore::connect`] uses: 16 connections, 5 s to acquire one.
    pub fn pool_options() -> PgPoolOptions {
        PgPoolOptions::new().max_connections(16).acquire_timeout(Duration::from_secs(5))
    }

    /// Connects with explicit connection options (host, credentials, TLS: `ssl_mode`,
    /// `ssl_root_cert`, …) and pool options, then migrates as [`PostgresStore::connect`] does.
    ///
    /// # Errors
    ///
    /// As [`PostgresStore::connect`].
    pub async fn connect_with(options: PgConnectOptions, pool: PgPoolOptions) -> Result<Self, StoreError> {
        let pool = pool.connect_with(options).await.map_err(|e| {
            let class = classify(&e);
            super::store_error(class, "connecting to PostgreSQL", e)
        })?;
        let store = PostgresStore { pool, fail: Default::default() };
        store.migrate().await?;
        Ok(store)
    }

    /// Applies the migrations newer than the database's schema, one process at a time (an advisory
    /// lock held on one connection), each in a transaction with its version row.
    async fn migrate(&self) -> Result<(), StoreError> {
        let what = "migrating the PostgreSQL schema";
        let err = |e: sqlx::Error| super::store_error(classify(&e), what, e);
        let mut conn = self.pool.acquire().await.map_err(err)?;
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(MIGRATION_LOCK)
            .execute(&mut *conn)
            .await
            .map_err(err)?;
        let migrated = async {
            sqlx::query("CREATE TABLE IF NOT EXISTS graph_schema_version (version INTEGER NOT NULL)")
                .execute(&mut *conn)
                .await
                .map_err(err)?;
            // Every version the database lacks is applied, in order (not only those above the
            // highest): versions may land out of order from parallel changes (issue 18).
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
                let mut tx = sqlx::Connection::begin(&mut *conn).await.map_err(err)?;
                for statement in statements(file) {
                    sqlx::query(sqlx::AssertSqlSafe(statement)).execute(&mut *tx).await.map_err(err)?;
                }
                sqlx::query("INSERT INTO graph_schema_version (version) VALUES ($1)")
                    .bind(i32::try_from(version).unwrap_or(i32::MAX))
                    .execute(&mut *tx)
                    .await
                    .map_err(err)?;
                tx.commit().await.map_err(err)?;
                tracing::info!(version, "applied the PostgreSQL schema migration");
            }
            Ok(())
        }
        .await;
        let unlocked =
            sqlx::query("SELECT pg_advisory_unlock($1)").bind(MIGRATION_LOCK).execute(&mut *conn).await;
        migrated?;
        unlocked.map_err(err)?;
        Ok(())
    }

    /// A transaction at READ COMMITTED.
    pub(super) async fn begin(&self) -> Result<sqlx::Transaction<'static, Postgres>, sqlx::Error> {
        self.pool.begin_with("BEGIN ISOLATION LEVEL READ COMMITTED").await
    }
}

/// How a PostgreSQL error is handled, by SQLSTATE.
pub(super) fn classify(e: &sqlx::Error) -> Class {
    let Some(db) = e.as_database_error() else { return client_class(e) };
    if db.is_unique_violation() {
        return Class::Unique;
    }
    match db.code().as_deref() {
        // serialization_failure, deadlock_detected
        Some("40001" | "40P01") => Class::Conflict,
        // connection_exception (08xxx), admin_shutdown (pg_terminate_backend), crash_shutdown,
        // cannot_connect_now (starting up / shutting down), too_many_connections.
        Some(c) if c.starts_with("08") => Class::Unavailable,
        Some("57P01" | "57P02" | "57P03" | "53300") => Class::Unavailable,
        _ => Class::Other,
    }
}

mod sql {
    pub(super) const VERSION: &str = "SELECT version FROM graph_runs WHERE run_id = $1";
    pub(super) const INSERT_KEY: &str = "INSERT INTO graph_keys (idem_key, run_id, step) VALUES ($1, $2, $3)";
    pub(super) const LOCK_RUN: &str =
        "SELECT row_bytes, has_pending FROM graph_runs WHERE run_id = $1 FOR UPDATE";
    pub(super) const RUN: &str = "SELECT row_bytes FROM graph_runs WHERE run_id = $1";
    pub(super) const CHECKPOINT: &str =
        "SELECT record FROM graph_checkpoints WHERE run_id = $1 AND step = $2";
    #[cfg(feature = "test-hooks")]
    pub(super) const OVERWRITE_CHECKPOINT: &str =
        "UPDATE graph_checkpoints SET record = $1 WHERE run_id = $2 AND step = $3";
    pub(super) const INSERT_CHECKPOINT: &str =
        "INSERT INTO graph_checkpoints (run_id, step, idem_key, record) VALUES ($1, $2, $3, $4)";
    pub(super) const EVENTS_UPSERT: &str = " ON CONFLICT (run_id, seq) DO UPDATE SET bytes = EXCLUDED.bytes";
    pub(super) const OUTBOX_UPSERT: &str = " ON CONFLICT (run_id, step, idx) DO UPDATE SET \
         outbox_key = EXCLUDED.outbox_key, bytes = EXCLUDED.bytes";
    pub(super) const DELETE_PENDING: &str = "DELETE FROM graph_pending WHERE run_id = $1";
    pub(super) const UPSERT_PENDING: &str = "INSERT INTO graph_pending (run_id, bytes) VALUES ($1, $2) \
         ON CONFLICT (run_id) DO UPDATE SET bytes = EXCLUDED.bytes";
    pub(super) const PENDING: &str = "SELECT bytes FROM graph_pending WHERE run_id = $1";
    pub(super) const INSERT_RUN: &str = "INSERT INTO graph_runs \
         (status, latest_step, version, row_bytes, has_pending, run_id) VALUES ($1, $2, $3, $4, $5, $6)";
    pub(super) const UPDATE_RUN: &str = "UPDATE graph_runs SET status = $1, latest_step = $2, version = $3, row_bytes = $4, \
         has_pending = $5 WHERE run_id = $6";
    pub(super) const EVENTS: &str =
        "SELECT seq, bytes FROM graph_events WHERE run_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3";
    pub(super) const LATEST: &str =
        "SELECT step, record FROM graph_checkpoints WHERE run_id = $1 ORDER BY step DESC LIMIT 1";
    pub(super) const CHECKPOINTS: &str = "SELECT step, record FROM graph_checkpoints \
         WHERE run_id = $1 AND step >= $2 AND step <= $3 ORDER BY step";
    pub(super) const STEPS: &str = "SELECT step FROM graph_checkpoints WHERE run_id = $1 ORDER BY step";
    pub(super) const PRUNE: &str = "DELETE FROM graph_checkpoints WHERE run_id = $1 AND step < $2";
    pub(super) const RUNS: &str = "SELECT row_bytes FROM graph_runs ORDER BY run_id LIMIT $1";
    pub(super) const RUNS_BY_STATUS: &str =
        "SELECT row_bytes FROM graph_runs WHERE status = $1 ORDER BY run_id LIMIT $2";
    pub(super) const LOCK_EFFECT: &str = "SELECT record FROM graph_effects WHERE effect_key = $1 FOR UPDATE";
    pub(super) const EFFECT: &str = "SELECT record FROM graph_effects WHERE effect_key = $1";
    pub(super) const UPDATE_EFFECT: &str = "UPDATE graph_effects SET record = $1 WHERE effect_key = $2";
    pub(super) const INSERT_EFFECT: &str = "INSERT INTO graph_effects \
         (effect_key, run_id, step, path, call_index, record) VALUES ($1, $2, $3, $4, $5, $6)";
    pub(super) const EFFECTS: &str =
        "SELECT record FROM graph_effects WHERE run_id = $1 ORDER BY step, path, call_index";
    pub(super) const OUTBOX: &str = "SELECT bytes FROM graph_outbox ORDER BY run_id, step, idx LIMIT $1";
    pub(super) const DELETE_OUTBOX: &str = "DELETE FROM graph_outbox WHERE outbox_key = $1";
}

sql_store!(PostgresStore, Postgres);
