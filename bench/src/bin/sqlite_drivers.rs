//! rusqlite against sqlx (0.9, `sqlite`, `runtime-tokio`) for the SQLite store's durable sequential
//! workload: one commit at a time, each its own `BEGIN IMMEDIATE` transaction in WAL mode with
//! `synchronous = FULL` (the store's `Durability::Sync`), writing what a step commit writes — the
//! idempotency key row, a ~600-byte checkpoint row, the run row — in the store's own schema. Beside
//! them: the disk's fdatasync rate, and `SqliteStore` under the engine (the `durable` loop). Prints JSON Lines.
//!
//! ```text
//! cargo run --release -p graph-bench --features drivers --bin sqlite_drivers -- [commits] [repeat] [dir]
//! ```

use std::io::Write;
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, Instant};

use graph_bench::{Count, loop_graph};
use graph_runtime::store::SqliteStore;
use graph_runtime::{Engine, EngineOptions};
use serde_json::json;

const SCHEMA: &str = include_str!("../../../graph-store-sqlite/migrations/sqlite/0001_init.sql");
const KEY: &str = "INSERT INTO idempotency_keys (key, run_id, step) VALUES (?1, ?2, ?3)";
const CHECKPOINT: &str =
    "INSERT INTO checkpoints (run_id, step, idempotency_key, record) VALUES (?1, ?2, ?3, ?4)";
const RUN: &str = "INSERT OR REPLACE INTO runs (run_id, status, latest_step, version, row) VALUES (?1, 'running', ?2, ?3, ?4)";

fn rusqlite_rate(path: &Path, n: u64) -> f64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)).unwrap();
    conn.execute_batch("PRAGMA synchronous = FULL").unwrap();
    conn.execute_batch(SCHEMA).unwrap();
    let record = vec![7u8; 600];
    let t = Instant::now();
    for step in 0..n as i64 {
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let key = format!("key-{step}");
        conn.prepare_cached(KEY).unwrap().execute(rusqlite::params![key, "run", step]).unwrap();
        conn.prepare_cached(CHECKPOINT)
            .unwrap()
            .execute(rusqlite::params!["run", step, key, record])
            .unwrap();
        conn.prepare_cached(RUN)
            .unwrap()
            .execute(rusqlite::params!["run", step, step + 1, &record[..80]])
            .unwrap();
        conn.execute_batch("COMMIT").unwrap();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

async fn sqlx_rate(path: &Path, n: u64) -> f64 {
    use sqlx::ConnectOptions;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
    let mut conn = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
        .unwrap()
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .connect()
        .await
        .unwrap();
    sqlx::raw_sql(SCHEMA).execute(&mut conn).await.unwrap();
    let record = vec![7u8; 600];
    let t = Instant::now();
    for step in 0..n as i64 {
        sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut conn).await.unwrap();
        let key = format!("key-{step}");
        sqlx::query(KEY).bind(&key).bind("run").bind(step).execute(&mut conn).await.unwrap();
        sqlx::query(CHECKPOINT)
            .bind("run")
            .bind(step)
            .bind(&key)
            .bind(&record)
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query(RUN)
            .bind("run")
            .bind(step)
            .bind(step + 1)
            .bind(&record[..80])
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::raw_sql("COMMIT").execute(&mut conn).await.unwrap();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

/// The engine's loop (`durable`'s workload) on `SqliteStore`: commits (steps + 1) per second.
async fn store_rate(path: &Path, n: u64) -> f64 {
    let engine = Engine::builder(loop_graph(n))
        .store(SqliteStore::open(path).unwrap())
        .options(EngineOptions::default().max_steps(n + 1))
        .build();
    let t = Instant::now();
    let out = engine.run("run", Count::default()).await.unwrap();
    assert_eq!(out.steps, n);
    (n + 1) as f64 / t.elapsed().as_secs_f64()
}

fn fdatasync_rate(dir: &Path, duration: Duration) -> f64 {
    let path = dir.join("fdatasync-probe");
    let mut f = std::fs::OpenOptions::new().create(true).truncate(true).write(true).open(&path).unwrap();
    let t = Instant::now();
    let mut n = 0u64;
    while t.elapsed() < duration {
        f.write_all(&[7u8; 512]).unwrap();
        f.sync_data().unwrap();
        n += 1;
    }
    let _ = std::fs::remove_file(path);
    n as f64 / t.elapsed().as_secs_f64()
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args.get(1).map_or(1000, |v| v.parse().expect("commits"));
    let repeat: usize = args.get(2).map_or(5, |v| v.parse().expect("repeat"));
    let base = args.get(3).map_or_else(std::env::temp_dir, std::path::PathBuf::from);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (mut disk, mut rusq, mut sqlx_, mut store) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Interleaved, so every driver sees the same disk conditions.
    // `SQLITE_DRIVERS=rusqlite` (or `sqlx`, `store`) runs one of them only, e.g. under `strace -c`.
    let only = std::env::var("SQLITE_DRIVERS").ok();
    let runs = |what: &str| only.as_deref().is_none_or(|o| o == what);
    for _ in 0..repeat {
        let dir = tempfile::tempdir_in(&base).unwrap();
        if only.is_none() {
            disk.push(fdatasync_rate(dir.path(), Duration::from_millis(700)));
        }
        if runs("rusqlite") {
            rusq.push(rusqlite_rate(&dir.path().join("rusqlite.sqlite"), n));
        }
        if runs("sqlx") {
            sqlx_.push(rt.block_on(sqlx_rate(&dir.path().join("sqlx.sqlite"), n)));
        }
        if runs("store") {
            store.push(rt.block_on(store_rate(&dir.path().join("store.sqlite"), n)));
        }
    }
    if only.is_some() {
        disk.push(f64::NAN);
    }
    let fsync = median(&disk);
    for (what, all) in [("fdatasync", &disk), ("rusqlite", &rusq), ("sqlx", &sqlx_), ("SqliteStore", &store)]
    {
        if all.is_empty() {
            continue;
        }
        let m = median(all);
        let record = json!({"workload": "sqlite-drivers", "mode": what, "n": n, "repeat": repeat,
            "per_s_median": m, "per_s_all": all, "ratio_to_fdatasync": m / fsync,
            "fdatasync_flags": option_env!("LIBSQLITE3_FLAGS").unwrap_or("")});
        println!("{record}");
    }
}
