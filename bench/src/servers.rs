//! The `postgres` and `mysql` workloads (features `postgres`, `mysql` of graph-bench): durable
//! sequential commits of the engine on a database server beside a floor measured the same way (a bare
//! three-statement transaction: insert the key, insert the checkpoint, update the run row), each floor
//! repetition right after an engine run so that the pair sees the same load, and 2, 4, 8 and 64
//! concurrent runs against one.
//!
//! Servers: GRAPH_BENCH_POSTGRES_URL / GRAPH_BENCH_MYSQL_URL (default: the local ones, as superuser/root);
//! each workload creates a database of its own and drops it at the end.

use std::time::Instant;

use graph_runtime::store::server::sqlx::{self, Connection};
use graph_runtime::{Engine, EngineOptions, Store};
use serde_json::json;

use crate::{Count, loop_graph};

/// What a workload reports: one JSON object per measurement.
pub type Emit<'a> = &'a dyn Fn(serde_json::Value);

/// The median of `v`.
pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 }
}

/// A server workload on the store `connect` opens: durable sequential commits of one run of `n` steps
/// (`repeat` times, after a warm-up), each repetition followed by one of the floor's (`floor(store,
/// rep, record_len)`: `n + 1` bare transactions whose checkpoint records are as large as the run's,
/// returning their commits/s), so that the floor and the engine see the same load, pair by pair; then
/// 1, 2, 4, 8 and 64 concurrent runs of `steps` steps. `groups` reads a store's commit-group counters
/// (grouped commits, group transactions, groups written in one statement), where it has them: each
/// concurrent row records how many of its commits went through groups, and in how many.
#[allow(clippy::too_many_arguments)]
async fn server_workload<S, F, Fut>(
    mode: &str,
    n: u64,
    steps: u64,
    repeat: usize,
    connect: F,
    groups: impl Fn(&S) -> Option<(u64, u64, u64)>,
    floor: impl AsyncFn(&S, usize, usize) -> f64,
    emit: Emit<'_>,
) where
    S: Store + Clone,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = S>,
{
    let store = connect().await;
    let sequential_run = async |i: usize| {
        let engine = Engine::builder(loop_graph(n))
            .store(store.clone())
            .options(EngineOptions::default().max_steps(n + 1))
            .build();
        let t = Instant::now();
        let out = engine.run(&format!("seq-{i}"), Count::default()).await.expect("the durable run");
        assert_eq!(out.steps, n);
        t.elapsed().as_secs_f64()
    };
    // The warm-up (connections, statement caches), whose checkpoints give the floor's record size.
    sequential_run(0).await;
    let len = record_len(&store).await;
    let (mut all, mut floors) = (Vec::new(), Vec::new());
    for i in 1..=repeat {
        all.push(sequential_run(i).await);
        floors.push(floor(&store, i - 1, len).await);
    }
    let commits = n + 1;
    let m = median(&all);
    let sequential = commits as f64 / m;
    emit(json!({"workload": "durable", "mode": mode, "n": n, "repeat": all.len(), "seconds_median": m,
        "seconds_all": all, "commits_per_s": sequential,
        "note": "one run, sequential steps, each commit one server transaction"}));
    let mut one = 0.0;
    for runs in [1usize, 2, 4, 8, 64] {
        let before = groups(&store);
        let mut all = Vec::new();
        for rep in 0..repeat.min(3) {
            let engine = Engine::builder(loop_graph(steps))
                .store(store.clone())
                .options(EngineOptions::default().max_steps(steps + 1))
                .build();
            let t = Instant::now();
            let tasks: Vec<_> = (0..runs)
                .map(|r| {
                    let engine = engine.clone();
                    tokio::spawn(
                        async move { engine.run(&format!("c{runs}-{rep}-{r}"), Count::default()).await },
                    )
                })
                .collect();
            for task in tasks {
                task.await.expect("a run task").expect("a concurrent run");
            }
            all.push(t.elapsed().as_secs_f64());
        }
        let m = median(&all);
        let rate = (runs as u64 * (steps + 1)) as f64 / m;
        if runs == 1 {
            one = rate;
        }
        let grouped = groups(&store).zip(before).map(|(after, before)| {
            json!({"grouped_commits": after.0 - before.0, "group_transactions": after.1 - before.1,
                "groups_at_once": after.2 - before.2})
        });
        emit(json!({"workload": "concurrent", "mode": mode, "n": runs, "steps_per_run": steps,
            "repeat": all.len(), "seconds_median": m, "seconds_all": all, "commits_per_s": rate,
            "ratio_to_one_run": rate / one, "groups": grouped, "note": "aggregate durable commits of all runs"}));
    }
    // Each repetition's floor against the engine run just before it.
    let pairs: Vec<f64> = floors.iter().zip(&all).map(|(f, secs)| f * secs / commits as f64).collect();
    let floor_median = median(&floors);
    emit(json!({"workload": "floor", "mode": mode, "n": n, "repeat": floors.len(),
        "commits_per_s_median": floor_median, "commits_per_s_all": floors, "record_bytes": len,
        "durable_commits_per_s": sequential, "floor_over_durable": median(&pairs),
        "floor_over_durable_pairs": pairs, "floor_median_over_durable_median": floor_median / sequential,
        "note": "bare transaction: insert key, insert checkpoint, update run row; one connection; \
            each repetition right after an engine run (floor_over_durable: the median of the pairs' ratios)"}));
}

/// A name for the bench's database.
fn database_name() -> String {
    format!("graph_bench_{}", std::process::id())
}

/// `url` with its database replaced by `database`.
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let slash = base[scheme_end..].find('/').map_or(base.len(), |i| scheme_end + i);
    match query {
        Some(q) => format!("{}/{database}?{q}", &base[..slash]),
        None => format!("{}/{database}", &base[..slash]),
    }
}

/// The server a [`Scratch`] database lives on.
#[derive(Clone, Copy)]
pub(crate) enum Server {
    #[cfg(feature = "postgres")]
    Postgres,
    #[cfg(feature = "mysql")]
    MySql,
}

/// The bench's own database on a server (`GRAPH_BENCH_POSTGRES_URL` / `GRAPH_BENCH_MYSQL_URL`, default
/// the local one), created fresh (dropped first if a killed run left it) and dropped by
/// [`Scratch::drop_database`].
pub(crate) struct Scratch {
    kind: Server,
    server: String,
    name: String,
    /// The URL of the fresh database.
    pub(crate) url: String,
}

impl Scratch {
    /// A fresh database named after this process on `kind`'s server.
    pub(crate) async fn create(kind: Server) -> Scratch {
        let (var, default) = match kind {
            #[cfg(feature = "postgres")]
            Server::Postgres => ("GRAPH_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
            #[cfg(feature = "mysql")]
            Server::MySql => ("GRAPH_BENCH_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"),
        };
        let server = std::env::var(var).unwrap_or_else(|_| default.into());
        let name = database_name();
        let url = with_database(&server, &name);
        let scratch = Scratch { kind, server, name, url };
        scratch.drop_database().await;
        scratch.admin(format!("CREATE DATABASE {}", scratch.name)).await;
        scratch
    }

    /// Drops the database (PostgreSQL: closing the sessions that still use it).
    pub(crate) async fn drop_database(&self) {
        let force = match self.kind {
            #[cfg(feature = "postgres")]
            Server::Postgres => " WITH (FORCE)",
            #[cfg(feature = "mysql")]
            Server::MySql => "",
        };
        self.admin(format!("DROP DATABASE IF EXISTS {}{force}", self.name)).await;
    }

    /// Runs `sql` on a connection of its own to the server's default database.
    async fn admin(&self, sql: String) {
        let sql = sqlx::AssertSqlSafe(sql);
        match self.kind {
            #[cfg(feature = "postgres")]
            Server::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.server).await.expect("the PostgreSQL server");
                sqlx::query(sql).execute(&mut c).await.expect("admin statement");
                let _ = c.close().await;
            }
            #[cfg(feature = "mysql")]
            Server::MySql => {
                let mut c = sqlx::MySqlConnection::connect(&self.server).await.expect("the MySQL server");
                sqlx::query(sql).execute(&mut c).await.expect("admin statement");
                let _ = c.close().await;
            }
        }
    }
}

/// A record as large as the loop's checkpoints, for the floor's inserts.
fn record_bytes(len: usize) -> Vec<u8> {
    vec![0x5a; len]
}

/// The floor of a server store: bare transactions on the store's own tables, on one connection of
/// `store`'s pool: the run row inserted once (repetition 0), then `n + 1` transactions of a key, a
/// checkpoint (a record of `len` bytes) and the run row's update. The four statements are the
/// backend's (its placeholders); evaluates to commits per second.
macro_rules! floor {
    ($store:expr, $rep:expr, $len:expr, $n:expr, [$run_row:expr, $key:expr, $checkpoint:expr, $update:expr $(,)?]) => {{
        let (rep, len, n) = ($rep, $len, $n);
        let mut conn = $store.pool().acquire().await.expect("a connection");
        let record = record_bytes(len);
        if rep == 0 {
            sqlx::query($run_row)
                .bind(&record[..64.min(len)])
                .execute(&mut *conn)
                .await
                .expect("the floor's run row");
        }
        let t = Instant::now();
        for step in 0..=n {
            let mut tx = sqlx::Connection::begin(&mut *conn).await.expect("begin");
            sqlx::query($key)
                .bind(format!("floor-{rep}-{step}"))
                .bind(step as i64)
                .execute(&mut *tx)
                .await
                .expect("key");
            sqlx::query($checkpoint)
                .bind((rep as u64 * (n + 1) + step) as i64)
                .bind(format!("floor-{rep}-{step}"))
                .bind(&record[..])
                .execute(&mut *tx)
                .await
                .expect("checkpoint");
            sqlx::query($update).bind(step as i64).execute(&mut *tx).await.expect("run row");
            tx.commit().await.expect("commit");
        }
        (n + 1) as f64 / t.elapsed().as_secs_f64()
    }};
}

/// The PostgreSQL workload.
#[cfg(feature = "postgres")]
pub async fn postgres(n: u64, steps: u64, repeat: usize, emit: Emit<'_>) {
    use graph_runtime::store::PostgresStore;
    let scratch = Scratch::create(Server::Postgres).await;
    let url = scratch.url.clone();
    let connect = || async { PostgresStore::connect(&url).await.expect("connect the store") };
    let groups = |s: &PostgresStore| Some((s.grouped_commits(), s.group_transactions(), s.groups_at_once()));
    let floor = async |store: &PostgresStore, rep: usize, len: usize| {
        floor!(
            store,
            rep,
            len,
            n,
            [
                "INSERT INTO graph_runs (run_id, status, latest_step, version, row_bytes) VALUES ('floor', 'running', 0, 0, $1)",
                "INSERT INTO graph_keys (idem_key, run_id, step) VALUES ($1, 'floor', $2)",
                "INSERT INTO graph_checkpoints (run_id, step, idem_key, record) VALUES ('floor', $1, $2, $3)",
                "UPDATE graph_runs SET version = version + 1, latest_step = $1 WHERE run_id = 'floor'",
            ]
        )
    };
    server_workload("postgres", n, steps, repeat, connect, groups, floor, emit).await;
    scratch.drop_database().await;
}

/// The MySQL / MariaDB workload.
#[cfg(feature = "mysql")]
pub async fn mysql(n: u64, steps: u64, repeat: usize, emit: Emit<'_>) {
    use graph_runtime::store::MySqlStore;
    let scratch = Scratch::create(Server::MySql).await;
    let url = scratch.url.clone();
    let connect = || async { MySqlStore::connect(&url).await.expect("connect the store") };
    let floor = async |store: &MySqlStore, rep: usize, len: usize| {
        floor!(
            store,
            rep,
            len,
            n,
            [
                "INSERT INTO graph_runs (run_id, status, latest_step, version, row_bytes) VALUES ('floor', 'running', 0, 0, ?)",
                "INSERT INTO graph_keys (idem_key, run_id, step) VALUES (?, 'floor', ?)",
                "INSERT INTO graph_checkpoints (run_id, step, idem_key, record) VALUES ('floor', ?, ?, ?)",
                "UPDATE graph_runs SET version = version + 1, latest_step = ? WHERE run_id = 'floor'",
            ]
        )
    };
    server_workload("mysql", n, steps, repeat, connect, |_: &MySqlStore| None, floor, emit).await;
    scratch.drop_database().await;
}

/// The size of the sequential run's middle checkpoint record, as the store encodes it.
async fn record_len(store: &impl Store) -> usize {
    let history = store.history("seq-0").await.expect("the sequential run's history");
    let step = history.get(history.len() / 2).map_or(0, |m| m.step);
    store
        .load_checkpoint("seq-0", step)
        .await
        .expect("a checkpoint")
        .map_or(256, |cp| graph_runtime::store::record::encode(&cp).len())
}
