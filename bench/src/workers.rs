//! The `workers_postgres` and `workers_mysql` workloads (features `postgres`, `mysql`):
//! `runs` submitted runs of the loop graph (`steps` steps each), drained by 1, 2 and 4 workers
//! (`graph_runtime::worker::Worker`, each with a store and pool of its own, 16 runs at once, in this
//! process), timed from the workers' start to the last run completed: runs/s and committed steps/s. The
//! database's own floor is the `floor` row of the `postgres` / `mysql` workloads.
//!
//! Beside each worker count, a `workers_stats` row: the server's own counters over its batches, per
//! committed step (PostgreSQL: `pg_stat_database`, `pg_stat_wal`, `pg_stat_user_tables`; MariaDB:
//! `SHOW GLOBAL STATUS`), and what the server's sessions of the database were doing, sampled every
//! 5 ms while the workers ran (PostgreSQL: `pg_stat_activity`'s state and wait event; MariaDB:
//! `information_schema.PROCESSLIST`'s state), as the mean number of sessions in each.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use graph_runtime::store::RunFilter;
use graph_runtime::worker::{LeaseStore, Worker};
use graph_runtime::{CancellationToken, Engine, EngineOptions, RunStatus};
use serde_json::json;

use crate::servers::{Emit, Scratch, Server, median};
use crate::{Count, loop_graph};

/// Counters or samples read off the server, by name.
type Readings = BTreeMap<String, f64>;

/// Workers drain `runs` submitted runs, for 1, 2 and 4 workers, `repeat.min(3)` times each; `counters`
/// reads the server's counters, `sample` what its sessions are doing (see the module doc).
#[allow(clippy::too_many_arguments)]
async fn drain<L, F, Fut>(
    mode: &str,
    runs: u64,
    steps: u64,
    repeat: usize,
    connect: F,
    counters: impl AsyncFn() -> Readings,
    sample: impl AsyncFn() -> Readings,
    emit: Emit<'_>,
) where
    L: LeaseStore,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = L>,
{
    let options = EngineOptions::default().max_steps(steps + 1);
    // `GRAPH_BENCH_WORKER_POLL_MS`: the workers' poll interval (default 10 ms; for A/B runs).
    let poll = std::env::var("GRAPH_BENCH_WORKER_POLL_MS").map_or(10, |v| v.parse().expect("milliseconds"));
    let submitter =
        Engine::builder(loop_graph(steps)).store(connect().await).options(options.clone()).build();
    for workers in [1usize, 2, 4] {
        let mut all = Vec::new();
        let (before, mut waits, mut samples) = (counters().await, Readings::new(), 0u64);
        for rep in 0..repeat.clamp(1, 3) {
            for r in 0..runs {
                submitter.submit(&format!("w{workers}-{rep}-{r}"), Count::default()).await.expect("submit");
            }
            let shutdown = CancellationToken::new();
            let t = Instant::now();
            let mut pool = Vec::new();
            for w in 0..workers {
                let worker = Worker::builder(loop_graph(steps), connect().await)
                    .id(format!("bench-{workers}-{rep}-{w}"))
                    .concurrency(16)
                    .lease(Duration::from_secs(30))
                    .poll(Duration::from_millis(poll))
                    .options(options.clone())
                    .build();
                let stop = shutdown.clone();
                pool.push(tokio::spawn(async move { worker.run(stop).await }));
            }
            // Done when no run of this batch is still running (submitted runs are `Running` until
            // claimed and driven): one indexed look-up a poll, whatever the number of runs completed
            // before (listing every completed run made the poll grow with the batches measured
            // earlier, and so cost the later, larger worker counts more).
            let unfinished =
                RunFilter::all().prefix(format!("w{workers}-{rep}-")).status(RunStatus::Running).limit(1);
            loop {
                let left = submitter.store().list_runs(&unfinished).await.expect("list");
                if left.is_empty() {
                    break;
                }
                for (what, n) in sample().await {
                    *waits.entry(what).or_default() += n;
                }
                samples += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            all.push(t.elapsed().as_secs_f64());
            let completed =
                RunFilter::all().prefix(format!("w{workers}-{rep}-")).status(RunStatus::Completed);
            let completed = submitter.store().list_runs(&completed).await.expect("list").len();
            assert_eq!(completed, runs as usize, "every run of the batch completed");
            shutdown.cancel();
            for w in pool {
                w.await.expect("a worker task").expect("a worker");
            }
        }
        // PostgreSQL's sessions report their counters when they end (or a second after their last):
        // the workers' have ended; the submitter's is given the second.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let after = counters().await;
        let committed = (runs * steps * all.len() as u64) as f64;
        let per_step: Readings =
            after.iter().map(|(k, v)| (k.clone(), (v - before.get(k).unwrap_or(&0.0)) / committed)).collect();
        let sessions: Readings = waits.into_iter().map(|(k, v)| (k, v / samples.max(1) as f64)).collect();
        emit(json!({"workload": "workers_stats", "mode": mode, "n": workers, "committed_steps": committed,
            "per_step": per_step, "sessions": sessions, "samples": samples,
            "note": "the server's counters over the batches ÷ the steps committed (submissions and the \
                     bench's polls included); sessions: mean number of the database's sessions in each \
                     state while the workers ran"}));
        let m = median(&all);
        emit(json!({"workload": "workers", "mode": mode, "n": workers, "runs": runs, "steps_per_run": steps,
            "repeat": all.len(), "seconds_median": m, "seconds_all": all, "runs_per_s": runs as f64 / m,
            "steps_per_s": (runs * steps) as f64 / m,
            "poll_ms": poll, "note": "workers in one process, each its own pool, 16 runs at once each"}));
    }
}

/// The PostgreSQL workers workload.
#[cfg(feature = "postgres")]
pub async fn postgres(runs: u64, steps: u64, repeat: usize, emit: Emit<'_>) {
    use graph_runtime::store::PostgresStore;
    use graph_runtime::store::server::sqlx::{self, Column, Row};
    let scratch = Scratch::create(Server::Postgres).await;
    let url = scratch.url.clone();
    let connect = || async { PostgresStore::connect(&url).await.expect("connect the store") };
    let watch = tokio::sync::Mutex::new(
        <sqlx::PgConnection as sqlx::Connection>::connect(&url).await.expect("a session to watch with"),
    );
    let counters = async || {
        let sql = "SELECT d.xact_commit::float8 AS xact_commit, d.xact_rollback::float8 AS xact_rollback, \
                   d.tup_returned::float8 AS tup_returned, d.tup_fetched::float8 AS tup_fetched, \
                   d.tup_inserted::float8 AS tup_inserted, d.tup_updated::float8 AS tup_updated, \
                   d.tup_deleted::float8 AS tup_deleted, d.blks_hit::float8 AS blks_hit, \
                   d.deadlocks::float8 AS deadlocks, w.wal_records::float8 AS wal_records, \
                   w.wal_bytes::float8 AS wal_bytes, w.wal_write::float8 AS wal_write, \
                   w.wal_sync::float8 AS wal_sync, \
                   (SELECT sum(seq_scan)::float8 FROM pg_stat_user_tables) AS seq_scan, \
                   (SELECT sum(idx_scan)::float8 FROM pg_stat_user_tables) AS idx_scan \
                   FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()";
        let row = sqlx::query(sql).fetch_one(&mut *watch.lock().await).await.expect("the server's counters");
        // Each counter by its column's name.
        row.columns()
            .iter()
            .map(|c| (c.name().to_owned(), row.get::<Option<f64>, _>(c.ordinal()).unwrap_or(0.0)))
            .collect()
    };
    let sample = async || {
        let sql = "SELECT CASE WHEN state = 'active' THEN 'active: ' || coalesce(wait_event_type || ' ' || \
                   wait_event, 'on CPU') ELSE coalesce(state, '?') END, count(*)::float8 FROM pg_stat_activity \
                   WHERE datname = current_database() AND pid <> pg_backend_pid() \
                   AND backend_type = 'client backend' GROUP BY 1";
        let rows = sqlx::query(sql).fetch_all(&mut *watch.lock().await).await.expect("the server's sessions");
        rows.iter().map(|r| (r.get::<String, _>(0), r.get::<f64, _>(1))).collect()
    };
    drain("postgres", runs, steps, repeat, connect, counters, sample, emit).await;
    drop(watch);
    scratch.drop_database().await;
}

/// The MySQL / MariaDB workers workload.
#[cfg(feature = "mysql")]
pub async fn mysql(runs: u64, steps: u64, repeat: usize, emit: Emit<'_>) {
    use graph_runtime::store::MySqlStore;
    use graph_runtime::store::server::sqlx::{self, Row};
    let scratch = Scratch::create(Server::MySql).await;
    let url = scratch.url.clone();
    let connect = || async { MySqlStore::connect(&url).await.expect("connect the store") };
    let watch = tokio::sync::Mutex::new(
        <sqlx::MySqlConnection as sqlx::Connection>::connect(&url).await.expect("a session to watch with"),
    );
    let counters = async || {
        let sql = "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit', 'Com_rollback', 'Com_select', \
                   'Com_insert', 'Com_update', 'Com_delete', 'Handler_read_key', 'Handler_read_next', \
                   'Handler_write', 'Handler_update', 'Innodb_row_lock_waits', 'Innodb_row_lock_time', \
                   'Innodb_os_log_fsyncs', 'Innodb_log_writes', 'Innodb_rows_read', 'Questions')";
        let rows = sqlx::query(sql).fetch_all(&mut *watch.lock().await).await.expect("the server's counters");
        rows.iter().map(|r| (r.get::<String, _>(0), r.get::<String, _>(1).parse().unwrap_or(0.0))).collect()
    };
    let sample = async || {
        let sql = "SELECT CAST(COALESCE(NULLIF(STATE, ''), COMMAND) AS CHAR), CAST(COUNT(*) AS DOUBLE) \
                   FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID() \
                   GROUP BY 1";
        let rows = sqlx::query(sql).fetch_all(&mut *watch.lock().await).await.expect("the server's sessions");
        rows.iter().map(|r| (r.get::<String, _>(0), r.get::<f64, _>(1))).collect()
    };
    drain("mysql", runs, steps, repeat, connect, counters, sample, emit).await;
    drop(watch);
    scratch.drop_database().await;
}
