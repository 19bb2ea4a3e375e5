//! [`PostgresStore`]: the store on a PostgreSQL server (feature `postgres`), the [`SqlStore`] of the
//! [`PostgresDialect`].

use std::str::FromStr;
use std::time::Duration;

use graph_store::{Integrity, RunInfo, StoreError};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, Postgres};
use sqlx::{Pool, Transaction};

use crate::dialect::{Commit, Dialect, Shortcut, Statements, StepWrites};
use crate::{Class, SERVER_SCHEMA_VERSION, SqlStore, client_class, newer_schema, statements};

mod group;

/// The migrations, in order: (version, file).
const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../migrations/postgres/0001_init.sql")),
    (2, include_str!("../migrations/postgres/0002_leases.sql")),
    (3, include_str!("../migrations/postgres/0003_commit_group.sql")),
    (4, include_str!("../migrations/postgres/0004_run_graph.sql")),
    (5, include_str!("../migrations/postgres/0005_wake.sql")),
];

/// The advisory lock key that serializes migrations (per database): "graph-rt" in ASCII.
const MIGRATION_LOCK: i64 = 0x6772_6170_682d_7274;

/// PostgreSQL's SQL for [`SqlStore`]: its statements, SQLSTATEs, and commit groups.
#[derive(Debug, Clone, Copy, Default)]
pub struct PostgresDialect;

/// A checkpoint store on a PostgreSQL server (feature `postgres`). Clones share the pool.
///
/// [`PostgresStore::connect`] takes a libpq-style URL (`postgres://user:password@host:5432/db`), TLS
/// included (`?sslmode=require`, `verify-full`, `sslrootcert=…`: sqlx's [`PgConnectOptions`]); it
/// applies the embedded migrations and checks the schema version before it returns. See the
/// [crate docs](crate) for how a commit works, and `docs/stores.md`.
///
/// # Examples
///
/// ```no_run
/// # async fn f() -> Result<(), graph_store::StoreError> {
/// let store = graph_store_sql::PostgresStore::connect("postgres://postgres@127.0.0.1/test").await?;
/// # drop(store);
/// # Ok(())
/// # }
/// ```
pub type PostgresStore = SqlStore<PostgresDialect>;

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
    /// [`StoreError::Unavailable`] when the server cannot be reached (its text names the server and,
    /// once the pool's acquire timeout has passed, says what one more attempt got: "Connection
    /// refused", no answer); [`StoreError::Backend`] for a bad URL, refused credentials or TLS;
    /// [`StoreError::UnsupportedSchemaVersion`] when the database holds a newer schema than this build
    /// knows.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::backend("the PostgreSQL connection URL is not valid", e))?;
        Self::connect_with(options, Self::pool_options()).await
    }

    /// The pool options [`PostgresStore::connect`] uses: 16 connections, 5 s to acquire one, and no
    /// ping each time a connection is taken (the store's own check pings only suspect connections:
    /// idle for 10 s or more, or idle since a connection failure).
    pub fn pool_options() -> PgPoolOptions {
        PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(5))
            .test_before_acquire(false)
    }

    /// Connects with explicit connection options (host, credentials, TLS: `ssl_mode`,
    /// `ssl_root_cert`, …) and pool options, then migrates as [`PostgresStore::connect`] does. The
    /// pool's `before_acquire` hook is replaced by the store's check of suspect connections, and its
    /// `after_connect` hook by one that turns Nagle's algorithm off on the new connection (see
    /// `docs/stores.md`, "Connecting, TLS") and sets `plan_cache_mode = force_generic_plan` and
    /// `idle_in_transaction_session_timeout` ([`IDLE_IN_TRANSACTION`](crate::IDLE_IN_TRANSACTION)) for
    /// its session; start from [`PostgresStore::pool_options`] to keep sqlx from also pinging every
    /// connection it hands out.
    ///
    /// # Errors
    ///
    /// As [`PostgresStore::connect`].
    pub async fn connect_with(options: PgConnectOptions, pool: PgPoolOptions) -> Result<Self, StoreError> {
        let server =
            std::sync::Arc::new(crate::nodelay::server_addrs(options.get_host(), options.get_port()).await);
        let suspicion = crate::pool_check::Suspicion::new();
        let hook = suspicion.clone();
        let pool = pool
            .before_acquire(move |conn, meta| Box::pin(hook.clone().ping_if_suspect(conn, meta)))
            .after_connect(move |conn, _| {
                crate::nodelay::set_on_connections_to(&server);
                Box::pin(async move {
                    // Plan each prepared statement once, not at every call: the group's statements over
                    // arrays otherwise get a fresh plan each time (docs/stores.md, "Group commit on
                    // PostgreSQL"). A server without the setting (before PostgreSQL 12) keeps its
                    // default; the store works either way.
                    crate::support::optional_setting::<sqlx::Postgres>(
                        &mut *conn,
                        "SET plan_cache_mode = force_generic_plan",
                    )
                    .await;
                    // A session that stops inside a transaction (its process stopped, its machine
                    // stalled) is ended by the server, so the run rows it locked do not keep other
                    // workers from a run whose lease has expired (see `IDLE_IN_TRANSACTION`).
                    let idle = format!(
                        "SET idle_in_transaction_session_timeout = {}",
                        crate::IDLE_IN_TRANSACTION.as_millis()
                    );
                    crate::support::optional_setting::<sqlx::Postgres>(&mut *conn, &idle).await;
                    Ok(())
                })
            });
        let target = crate::target(options.get_host(), options.get_port(), options.get_database());
        let timeout = pool.get_acquire_timeout();
        let pool = match pool.connect_with(options.clone()).await {
            Ok(pool) => pool,
            Err(e) => {
                let probe = sqlx::ConnectOptions::connect(&options);
                return Err(crate::connect_error("PostgreSQL", &target, timeout, e, classify, probe).await);
            }
        };
        let store = PostgresStore::over(pool, suspicion);
        store.migrate().await?;
        Ok(store)
    }

    /// [`Store::check_integrity`](graph_store::Store::check_integrity): amcheck's `bt_index_check`
    /// with `heapallindexed` (every table row has its index entry, every page of the index in order) on
    /// each B-tree index of the store's tables, when the extension is installed in this database (the
    /// store never installs one: `CREATE EXTENSION amcheck` needs a superuser).
    async fn integrity(&self) -> Result<Integrity, StoreError> {
        let what = "checking the indexes with amcheck";
        if self.row(what, || sqlx::query(sql::AMCHECK)).await?.is_none() {
            return Ok(Integrity::NotChecked {
                why: "the amcheck extension is not installed in this database (`CREATE EXTENSION amcheck`, as a \
                      superuser, lets this check run)",
            });
        }
        let e = match self.once_more(what, || sqlx::query(sql::CHECK_INDEXES).fetch_all(&self.pool)).await {
            Ok(rows) => {
                let check = format!("amcheck bt_index_check (heapallindexed) on {} indexes", rows.len());
                return Ok(Integrity::Sound { check });
            }
            Err(e) => e,
        };
        let code = e.as_database_error().and_then(|d| d.code()).unwrap_or_default();
        match &*code {
            // amcheck's functions are revoked from PUBLIC when it is installed.
            "42501" => Ok(Integrity::NotChecked {
                why: "the store's database role may not run amcheck's functions (a superuser can `GRANT \
                      EXECUTE ON FUNCTION bt_index_check(regclass, boolean) TO` it)",
            }),
            // Class XX: "data corrupted" (XX001), "index corrupted" (XX002), which amcheck raises.
            c if c.starts_with("XX") => Err(StoreError::Corrupted {
                run: None,
                step: None,
                file: None,
                detail: format!("amcheck found an index inconsistent with its table: {e}"),
                remedy: "rebuild the index it names (`REINDEX INDEX CONCURRENTLY …`: the tables hold \
                         the data) and look at the server's storage; if a table is damaged, restore \
                         the database from a backup",
            }),
            _ => Err(self.error(classify(&e), what, e)),
        }
    }

    /// Applies the migrations newer than the database's schema, one process at a time (an advisory
    /// lock held on one connection), each in a transaction with its version row.
    async fn migrate(&self) -> Result<(), StoreError> {
        let what = "migrating the PostgreSQL schema";
        let err = |e: sqlx::Error| self.error(classify(&e), what, e);
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

    /// Group transactions committed since connect (this store and its clones): one per commit group,
    /// however many runs' commits it held (see the [crate docs](crate)).
    pub fn group_transactions(&self) -> u64 {
        self.state.transactions.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Commits answered `Committed` by a commit group since connect; the others (made while nothing else
    /// was being committed, or refused by a group and answered by a transaction of their own) are not
    /// counted.
    pub fn grouped_commits(&self) -> u64 {
        self.state.commits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Commit groups sent in one statement since connect (schema 3's `graph_commit_group`: every
    /// commit's run row known to this store), whether they committed or not; the others are written
    /// in steps (see `docs/stores.md`, "One round trip a group").
    pub fn groups_at_once(&self) -> u64 {
        self.state.at_once.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Dialect for PostgresDialect {
    type Db = Postgres;
    type State = group::Groups;
    type Alone = Option<group::Inline>;

    const NAME: &'static str = "PostgreSQL";
    const SQL: Statements = sql::STATEMENTS;

    fn classify(e: &sqlx::Error) -> Class {
        classify(e)
    }

    async fn begin(pool: &Pool<Postgres>) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        pool.begin_with("BEGIN ISOLATION LEVEL READ COMMITTED").await
    }

    async fn key_then_lock<'t>(
        tx: &'t mut Transaction<'static, Postgres>,
        key: &'t str,
        run: &'t str,
        step: i64,
    ) -> Result<Option<(Vec<u8>, bool)>, sqlx::Error> {
        key_then_lock(tx, key, run, step).await
    }

    async fn write_step<'t>(
        tx: &'t mut Transaction<'static, Postgres>,
        w: &'t StepWrites<'t>,
    ) -> Result<(), sqlx::Error> {
        write_step(tx, w).await
    }

    async fn shortcut_save<'s>(store: &'s PostgresStore, commit: Commit<'s>) -> Shortcut<Self::Alone> {
        store.grouped(commit).await
    }

    fn rows_affected(done: &sqlx::postgres::PgQueryResult) -> u64 {
        done.rows_affected()
    }

    async fn integrity(store: &PostgresStore) -> Result<Integrity, StoreError> {
        store.integrity().await
    }

    fn remember_row(store: &PostgresStore, bytes: Vec<u8>, info: RunInfo) {
        store.known.remember(bytes, info);
    }
}

/// Steps 1 and 2 of a commit in one statement: inserts the idempotency key, then locks and returns the
/// run row (`row_bytes, has_pending`; none for a new run). The row's lookup key is read from the key
/// insert's `RETURNING`, so the key is inserted (or waited for) before the row is locked.
async fn key_then_lock(
    tx: &mut Transaction<'static, Postgres>,
    key: &str,
    run: &str,
    step: i64,
) -> Result<Option<(Vec<u8>, bool)>, sqlx::Error> {
    sqlx::query_as(sql::KEY_THEN_LOCK).bind(key).bind(run).bind(step).fetch_optional(&mut **tx).await
}

/// Steps 3 to 5 of a commit in one statement (data-modifying CTEs): the checkpoint, its outbox rows
/// and the events (`unnest` of arrays), the pending step, the run row.
async fn write_step(tx: &mut Transaction<'static, Postgres>, w: &StepWrites<'_>) -> Result<(), sqlx::Error> {
    let (idx, keys, rows) = w.outbox_columns();
    let (seqs, events) = w.event_columns();
    let q = sqlx::query(if w.new_run { sql::WRITE_STEP_NEW_RUN } else { sql::WRITE_STEP })
        .bind(w.run_id)
        .bind(w.step)
        .bind(w.key)
        .bind(w.record)
        .bind(idx)
        .bind(keys)
        .bind(rows)
        .bind(seqs)
        .bind(events)
        .bind(w.clear_pending)
        .bind(w.status)
        .bind(w.latest_step)
        .bind(w.version)
        .bind(&w.row_bytes);
    let q = if w.new_run { q.bind(w.graph) } else { q };
    q.execute(&mut **tx).await?;
    if w.graph_changed {
        sqlx::query(sql::SET_GRAPH).bind(w.graph).bind(w.run_id).execute(&mut **tx).await?;
    }
    Ok(())
}

/// How a PostgreSQL error is handled, by SQLSTATE.
pub(crate) fn classify(e: &sqlx::Error) -> Class {
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
    /// The key's `RETURNING` feeds the run row's lookup: the key is written (or waited for) first.
    pub(super) const KEY_THEN_LOCK: &str = "WITH k AS (INSERT INTO graph_keys (idem_key, run_id, step) \
         VALUES ($1, $2, $3) RETURNING run_id) \
         SELECT row_bytes, has_pending FROM graph_runs WHERE run_id = (SELECT run_id FROM k) FOR UPDATE";
    /// The writes of a `Committed` step but the run row ($1 run, $2 step, $3 key, $4 record, $5–$7 the
    /// outbox columns, $8–$9 the event columns, $10 clear the pending step).
    macro_rules! step_writes {
        () => {
            "WITH c AS (INSERT INTO graph_checkpoints (run_id, step, idem_key, record) VALUES ($1, $2, $3, $4)), \
             o AS (INSERT INTO graph_outbox (run_id, step, idx, outbox_key, bytes) \
                 SELECT $1, $2, t.idx, t.outbox_key, t.bytes \
                 FROM unnest($5::BIGINT[], $6::TEXT[], $7::BYTEA[]) AS t (idx, outbox_key, bytes) \
                 ON CONFLICT (run_id, step, idx) DO UPDATE SET \
                 outbox_key = EXCLUDED.outbox_key, bytes = EXCLUDED.bytes), \
             e AS (INSERT INTO graph_events (run_id, seq, bytes) \
                 SELECT $1, t.seq, t.bytes FROM unnest($8::BIGINT[], $9::BYTEA[]) AS t (seq, bytes) \
                 ON CONFLICT (run_id, seq) DO UPDATE SET bytes = EXCLUDED.bytes), \
             p AS (DELETE FROM graph_pending WHERE run_id = $1 AND $10) "
        };
    }
    /// A `Committed` step of a run with a row ($11 status, $12 latest step, $13 version, $14 row bytes).
    pub(super) const WRITE_STEP: &str = concat!(
        step_writes!(),
        "UPDATE graph_runs SET status = $11, latest_step = $12, version = $13, row_bytes = $14, \
         has_pending = FALSE WHERE run_id = $1"
    );
    /// The first `Committed` step of a run: the row is inserted ($15 its graph fingerprint).
    pub(super) const WRITE_STEP_NEW_RUN: &str = concat!(
        step_writes!(),
        "INSERT INTO graph_runs (status, latest_step, version, row_bytes, has_pending, run_id, graph_fingerprint) \
         VALUES ($11, $12, $13, $14, FALSE, $1, $15)"
    );
    pub(super) const LOCK_RUN: &str =
        "SELECT row_bytes, has_pending FROM graph_runs WHERE run_id = $1 FOR UPDATE";
    pub(super) const RUN: &str = "SELECT row_bytes FROM graph_runs WHERE run_id = $1";
    pub(super) const CHECKPOINT: &str =
        "SELECT record FROM graph_checkpoints WHERE run_id = $1 AND step = $2";
    pub(super) const OVERWRITE_CHECKPOINT: &str =
        "UPDATE graph_checkpoints SET record = $1 WHERE run_id = $2 AND step = $3";
    pub(super) const REMOVE_CHECKPOINT: &str =
        "DELETE FROM graph_checkpoints WHERE run_id = $1 AND step = $2";
    pub(super) const INSERT_CHECKPOINT: &str =
        "INSERT INTO graph_checkpoints (run_id, step, idem_key, record) VALUES ($1, $2, $3, $4)";
    pub(super) const EVENTS_UPSERT: &str = " ON CONFLICT (run_id, seq) DO UPDATE SET bytes = EXCLUDED.bytes";
    pub(super) const UPSERT_PENDING: &str = "INSERT INTO graph_pending (run_id, bytes) VALUES ($1, $2) \
         ON CONFLICT (run_id) DO UPDATE SET bytes = EXCLUDED.bytes";
    pub(super) const MAILBOX: &str = "SELECT bytes FROM graph_mailboxes WHERE run_id = $1";
    pub(super) const UPSERT_MAILBOX: &str = "INSERT INTO graph_mailboxes (run_id, bytes) VALUES ($1, $2) \
         ON CONFLICT (run_id) DO UPDATE SET bytes = EXCLUDED.bytes";
    pub(super) const LOCK_SCHEDULE: &str = "SELECT bytes FROM graph_schedules WHERE name = $1 FOR UPDATE";
    pub(super) const UPSERT_SCHEDULE: &str = "INSERT INTO graph_schedules (name, bytes) VALUES ($1, $2) \
         ON CONFLICT (name) DO UPDATE SET bytes = EXCLUDED.bytes";
    pub(super) const DELETE_SCHEDULE: &str = "DELETE FROM graph_schedules WHERE name = $1";
    pub(super) const SCHEDULES: &str = "SELECT bytes FROM graph_schedules ORDER BY name";
    pub(super) const PENDING: &str = "SELECT bytes FROM graph_pending WHERE run_id = $1";
    pub(super) const UPDATE_RUN: &str = "UPDATE graph_runs SET status = $1, latest_step = $2, version = $3, row_bytes = $4, \
         has_pending = $5, wake_at_ms = NULLIF($6, -1) WHERE run_id = $7";
    pub(super) const EVENTS: &str =
        "SELECT seq, bytes FROM graph_events WHERE run_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3";
    /// One row always: the run row's latest step and the last checkpoint, each NULL when absent, of one
    /// snapshot (one statement).
    pub(super) const LATEST: &str = "SELECT r.latest_step, c.step, c.record FROM (SELECT $1::text AS id) p \
         LEFT JOIN graph_runs r ON r.run_id = p.id LEFT JOIN graph_checkpoints c ON c.run_id = p.id \
         AND c.step = (SELECT MAX(step) FROM graph_checkpoints m WHERE m.run_id = p.id)";
    /// The run row's latest step beside each checkpoint (one row with NULLs when there is none).
    pub(super) const HISTORY: &str = "SELECT r.latest_step, c.step, c.record FROM (SELECT $1::text AS id) p \
         LEFT JOIN graph_runs r ON r.run_id = p.id LEFT JOIN graph_checkpoints c ON c.run_id = p.id \
         ORDER BY c.step";
    pub(super) const CHECKPOINTS: &str = "SELECT step, record FROM graph_checkpoints \
         WHERE run_id = $1 AND step >= $2 AND step <= $3 ORDER BY step";
    pub(super) const STEPS: &str = "SELECT step FROM graph_checkpoints WHERE run_id = $1 ORDER BY step";
    pub(super) const PRUNE: &str = "DELETE FROM graph_checkpoints WHERE run_id = $1 AND step < $2";
    pub(super) const RUNS: &str =
        "SELECT row_bytes, run_id FROM graph_runs WHERE run_id >= $1 ORDER BY run_id LIMIT $2";
    pub(super) const AMCHECK: &str = "SELECT 1 FROM pg_extension WHERE extname = 'amcheck'";
    /// Every B-tree index of the store's tables that the search path finds.
    pub(super) const CHECK_INDEXES: &str = "SELECT bt_index_check(c.oid, true) FROM pg_index i \
        JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid \
        JOIN pg_am a ON a.oid = c.relam \
        WHERE a.amname = 'btree' AND t.relname LIKE 'graph\\_%' AND pg_table_is_visible(t.oid) ORDER BY c.relname";
    pub(super) const RUNS_BY_STATUS: &str = "SELECT row_bytes, run_id FROM graph_runs WHERE status = $1 AND run_id >= $2 ORDER BY run_id LIMIT $3";
    pub(super) const LOCK_EFFECT: &str = "SELECT record FROM graph_effects WHERE effect_key = $1 FOR UPDATE";
    pub(super) const EFFECT: &str = "SELECT record FROM graph_effects WHERE effect_key = $1";
    pub(super) const UPDATE_EFFECT: &str = "UPDATE graph_effects SET record = $1 WHERE effect_key = $2";
    pub(super) const INSERT_EFFECT: &str = "INSERT INTO graph_effects \
         (effect_key, run_id, step, path, call_index, record) VALUES ($1, $2, $3, $4, $5, $6)";
    pub(super) const EFFECTS: &str =
        "SELECT record FROM graph_effects WHERE run_id = $1 ORDER BY step, path, call_index";
    pub(super) const OUTBOX: &str = "SELECT bytes FROM graph_outbox ORDER BY run_id, step, idx LIMIT $1";
    pub(super) const DELETE_OUTBOX: &str = "DELETE FROM graph_outbox WHERE outbox_key = $1";

    /// Runnable runs whose graph no claim has read yet, their rows locked, skipping locked ones.
    pub(super) const UNSORTED: &str = "SELECT run_id, row_bytes FROM graph_runs \
         WHERE (status = 'running' OR (status IN ('waiting', 'interrupted') AND wake_at_ms IS NOT NULL)) \
         AND graph_fingerprint IS NULL \
         ORDER BY run_id LIMIT $1 FOR UPDATE SKIP LOCKED";
    pub(super) const SET_GRAPH: &str = "UPDATE graph_runs SET graph_fingerprint = $1 WHERE run_id = $2";
    /// Runnable runs of graph $1, and its parked runs due by $2 = $3 (ms since the epoch; below 0: the
    /// database's clock), without a live lease, at most $4, their run rows locked, skipping locked ones.
    pub(super) const CANDIDATES: &str = "SELECT r.run_id FROM graph_runs r WHERE r.graph_fingerprint = $1 \
         AND (r.status = 'running' OR (r.status IN ('waiting', 'interrupted') AND r.wake_at_ms <= \
         (CASE WHEN $2 < 0 THEN (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT ELSE $3 END))) \
         AND NOT EXISTS (SELECT 1 FROM graph_leases l WHERE l.run_id = r.run_id AND l.owner <> '' \
         AND l.expires_at > clock_timestamp()) \
         ORDER BY r.run_id LIMIT $4 FOR UPDATE OF r SKIP LOCKED";
    /// (owner, token, live) of a run's lease.
    pub(super) const FENCE: &str = "SELECT owner, token, \
         (CASE WHEN expires_at > clock_timestamp() THEN 1 ELSE 0 END)::BIGINT \
         FROM graph_leases WHERE run_id = $1";
    pub(super) const LOCK_LEASE: &str = "SELECT owner, token, \
         (CASE WHEN expires_at > clock_timestamp() THEN 1 ELSE 0 END)::BIGINT \
         FROM graph_leases WHERE run_id = $1 FOR UPDATE";
    /// Before the lease is replaced: the previous holder and expiry come from its row.
    pub(super) const LOG_CLAIM: &str = "INSERT INTO graph_lease_claims \
         (run_id, token, owner, claimed_at, prev_owner, prev_expires) VALUES ($1, $2, $3, clock_timestamp(), \
         (SELECT owner FROM graph_leases WHERE run_id = $4), \
         (SELECT expires_at FROM graph_leases WHERE run_id = $4))";
    pub(super) const UPSERT_LEASE: &str = "INSERT INTO graph_leases (run_id, owner, token, expires_at) \
         VALUES ($1, $2, $3, clock_timestamp() + $4::float8 * interval '1 microsecond') \
         ON CONFLICT (run_id) DO UPDATE SET owner = EXCLUDED.owner, token = EXCLUDED.token, \
         expires_at = EXCLUDED.expires_at";
    pub(super) const HEARTBEAT: &str = "UPDATE graph_leases \
         SET expires_at = clock_timestamp() + $1::float8 * interval '1 microsecond' \
         WHERE run_id = $2 AND owner = $3 AND token = $4 AND expires_at > clock_timestamp()";
    pub(super) const RELEASE: &str = "UPDATE graph_leases SET owner = '', \
         expires_at = LEAST(expires_at, clock_timestamp()) WHERE run_id = $1 AND owner = $2 AND token = $3";

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
