//! The workload runner behind `docs/BENCHMARKS.md`: prints one JSON object per measurement (JSON Lines).
//!
//! ```text
//! cargo run --release -p graph-bench -- [--repeat K] [--quick] [--workloads loop,fanout,...] [--dir DIR]
//! ```
//!
//! Workloads (the first four mirror `bench/langgraph/bench.py`):
//! `loop` (one node routing to itself 10,000 times), `fanout` (1,000 forked branches and a join),
//! `durable` (1,000 sequential steps, each commit flushed, beside the disk's measured fdatasync rate and
//! bare sled's own commit rate), `effects` (the same loop with one journaled effect per step),
//! `concurrent` (1, 8, 64, 256 durable runs at once), `growth` (a 1 MiB state growing 1 KiB a step for
//! 1,000 steps: bytes written per step), `resume` (latency of resuming after 100 and 100,000 steps),
//! `memory` (resident memory of 10,000 runs in flight); `durable_sqlite` and `concurrent_sqlite`, the
//! `durable` and `concurrent` workloads on the SQLite store (not in the default list); with features
//! `postgres` / `mysql`, the `postgres` and `mysql` workloads (not in the default list either: see
//! `graph_bench::servers`), and `workers_postgres` / `workers_mysql` (1, 2 and 4 workers draining
//! submitted runs: `graph_bench::workers`); `inspector` (`graphctl serve`'s runs list and run pages over
//! 100,000 stored runs: `graph_bench::inspector`). `GRAPH_BENCH_MODE=memory` limits `loop` to one
//! store, for profiling. `loop`, `fanout` and `resume` repeat `3 × K` times (they take milliseconds);
//! `memory` runs in a child process of its own when other workloads run too.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use graph_bench::{Count, CountDelta, Fan, fanout_graph, growth_graph, growth_input, loop_graph};
use graph_runtime::store::{Durability, SledOptions, SledStore, SqliteOptions, SqliteStore, StateRepr};
use graph_runtime::{END, Engine, EngineOptions, Error, Graph, MemoryStore, Route, Store};
use serde_json::{Value, json};

struct Args {
    repeat: usize,
    quick: bool,
    workloads: Vec<String>,
    dir: PathBuf,
    /// A Prometheus recorder is installed: the engine's metrics are recorded (`metrics` workload).
    metrics_recorder: bool,
}

impl Args {
    /// Repetitions of the workloads that take milliseconds (loop, fan-out, resume): three times `--repeat`,
    /// since on a shared machine their spread is wide and more samples steady the median.
    fn cheap_repeat(&self) -> usize {
        self.repeat * 3
    }
}

/// The workloads run when `--workloads` is not given.
const DEFAULT_WORKLOADS: &[&str] = &[
    "loop",
    "fanout",
    "subgraph",
    "replay_check",
    "metrics",
    "durable",
    "effects",
    "concurrent",
    "growth",
    "resume",
    "memory",
];

/// The other workloads `main` knows (those of a server need its feature, which `main` says).
const OTHER_WORKLOADS: &[&str] = &[
    "durable_sqlite",
    "concurrent_sqlite",
    "postgres",
    "mysql",
    "workers_postgres",
    "workers_mysql",
    "sleepers",
    "wake_lateness",
    "event_latency",
    "event_latency_postgres",
    "inspector",
];

/// The command line, for `--help` and with an error.
fn usage() -> String {
    format!(
        "usage: graph-bench [--repeat K] [--quick] [--workloads a,b,...] [--dir DIR]\n\n\
         workloads: {} (the default list); {} (postgres and mysql ones with those features).\n\
         One JSON object per measurement on stdout (see docs/BENCHMARKS.md).",
        DEFAULT_WORKLOADS.join(", "),
        OTHER_WORKLOADS.join(", ")
    )
}

fn args() -> Args {
    match parse_args(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{}", usage());
            std::process::exit(0);
        }
        Err(e) => {
            eprintln!("graph-bench: {e}\n{}", usage());
            std::process::exit(2);
        }
    }
}

/// The arguments `args` hold; `None` for `--help`.
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut a = Args {
        repeat: 5,
        quick: false,
        workloads: DEFAULT_WORKLOADS.iter().map(|w| w.to_string()).collect(),
        dir: std::env::temp_dir(),
        metrics_recorder: false,
    };
    while let Some(arg) = args.next() {
        let mut value = |what: &str| args.next().ok_or(format!("{arg} needs {what}"));
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--repeat" => {
                let v = value("a count")?;
                a.repeat =
                    v.parse().ok().filter(|&k| k > 0).ok_or(format!("--repeat {v}: not a count above 0"))?;
            }
            "--quick" => a.quick = true,
            "--metrics-recorder" => a.metrics_recorder = true,
            "--workloads" => a.workloads = value("a list")?.split(',').map(String::from).collect(),
            "--dir" => a.dir = value("a folder")?.into(),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let known = |w: &str| DEFAULT_WORKLOADS.contains(&w) || OTHER_WORKLOADS.contains(&w);
    if let Some(w) = a.workloads.iter().find(|w| !known(w)) {
        return Err(format!("unknown workload {w}"));
    }
    Ok(Some(a))
}

/// Set when a metrics recorder is installed: records say so in their mode.
static RECORDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn main() {
    let a = args();
    if a.metrics_recorder {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        metrics::set_global_recorder(recorder).expect("the first recorder");
        RECORDING.store(true, Ordering::SeqCst);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let scale = |n: u64| if a.quick { (n / 10).max(1) } else { n };
    for w in &a.workloads {
        eprintln!("== {w}");
        let t0 = Instant::now();
        match w.as_str() {
            "loop" => rt.block_on(loop_workload(&a, scale(10_000))),
            "fanout" => rt.block_on(fanout_workload(&a, scale(1_000))),
            "subgraph" => rt.block_on(subgraph_workload(&a, if a.quick { 10 } else { 100 }, 100)),
            "replay_check" => rt.block_on(replay_check_workload(&a, scale(10_000), 5)),
            "inspector" => {
                let dir = fresh_dir(&a);
                let runs = scale(100_000);
                for record in rt.block_on(graph_bench::inspector::inspector_workload(dir.path(), runs, 200)) {
                    emit(record);
                }
            }
            "durable" => rt.block_on(durable_workload(&a, scale(1_000))),
            "effects" => rt.block_on(effects_workload(&a, scale(1_000))),
            "concurrent" => rt.block_on(concurrent_workload(&a, if a.quick { 10 } else { 100 })),
            "durable_sqlite" => rt.block_on(durable_sqlite_workload(&a, scale(1_000))),
            "concurrent_sqlite" => {
                rt.block_on(concurrent_sqlite_workload(&a, if a.quick { 10 } else { 100 }))
            }
            "growth" => rt.block_on(growth_workload(&a, scale(1_000) as usize)),
            "resume" => rt.block_on(resume_workload(&a, scale(100_000))),
            // The loop and the fan-out on the memory store again, in a process with a Prometheus recorder
            // installed (a recorder is global to a process: the other workloads run without one).
            "metrics" => {
                let mut child = std::process::Command::new(std::env::current_exe().expect("own path"));
                child.args([
                    "--metrics-recorder",
                    "--workloads",
                    "loop,fanout",
                    "--repeat",
                    &a.repeat.to_string(),
                ]);
                child.env("GRAPH_BENCH_MODE", "memory");
                if a.quick {
                    child.arg("--quick");
                }
                assert!(child.status().expect("runs itself").success(), "the metrics workload failed");
            }
            // Resident memory is only meaningful in a process whose heap the other workloads did not grow.
            "memory" if a.workloads.len() > 1 => {
                let mut child = std::process::Command::new(std::env::current_exe().expect("own path"));
                child.args(["--workloads", "memory"]);
                if a.quick {
                    child.arg("--quick");
                }
                assert!(child.status().expect("runs itself").success(), "the memory workload failed");
            }
            "memory" => rt.block_on(memory_workload(scale(10_000) as usize)),
            // Resident memory again: a process of its own.
            "sleepers" if a.workloads.len() > 1 => {
                let mut child = std::process::Command::new(std::env::current_exe().expect("own path"));
                child.args(["--workloads", "sleepers", "--dir"]).arg(&a.dir);
                if a.quick {
                    child.arg("--quick");
                }
                assert!(child.status().expect("runs itself").success(), "the sleepers workload failed");
            }
            "sleepers" => {
                rt.block_on(graph_bench::timers::sleepers(scale(100_000) as usize, &a.dir, rss_bytes, &emit))
            }
            "wake_lateness" => {
                rt.block_on(graph_bench::timers::wake_lateness(scale(5_000) as usize, &a.dir, &emit))
            }
            "event_latency" => {
                rt.block_on(graph_bench::timers::event_latency_sled(scale(200) as usize, &a.dir, &emit))
            }
            #[cfg(feature = "postgres")]
            "event_latency_postgres" => {
                rt.block_on(graph_bench::timers::event_latency_postgres(scale(200) as usize, &emit))
            }
            #[cfg(not(feature = "postgres"))]
            "event_latency_postgres" => panic!(
                "built without feature postgres: cargo run --release -p graph-bench --features postgres"
            ),
            // Database servers (features `postgres`, `mysql`): see `graph_bench::servers`.
            #[cfg(feature = "postgres")]
            "postgres" => {
                rt.block_on(graph_bench::servers::postgres(scale(1_000), scale(200), a.repeat, &emit))
            }
            #[cfg(feature = "mysql")]
            "mysql" => rt.block_on(graph_bench::servers::mysql(scale(1_000), scale(200), a.repeat, &emit)),
            #[cfg(feature = "postgres")]
            "workers_postgres" => {
                rt.block_on(graph_bench::workers::postgres(scale(200), 20, a.repeat, &emit))
            }
            #[cfg(feature = "mysql")]
            "workers_mysql" => rt.block_on(graph_bench::workers::mysql(scale(200), 20, a.repeat, &emit)),
            #[cfg(not(feature = "postgres"))]
            "workers_postgres" => panic!(
                "built without feature postgres: cargo run --release -p graph-bench --features postgres"
            ),
            #[cfg(not(feature = "mysql"))]
            "workers_mysql" => {
                panic!("built without feature mysql: cargo run --release -p graph-bench --features mysql")
            }
            #[cfg(not(feature = "postgres"))]
            "postgres" => panic!(
                "built without feature postgres: cargo run --release -p graph-bench --features postgres"
            ),
            #[cfg(not(feature = "mysql"))]
            "mysql" => {
                panic!("built without feature mysql: cargo run --release -p graph-bench --features mysql")
            }
            other => unreachable!("parse_args lets only known workloads through, not {other}"),
        }
        eprintln!("   {:.1} s", t0.elapsed().as_secs_f64());
    }
}

fn emit(mut record: Value) {
    if RECORDING.load(Ordering::SeqCst) {
        let mode = format!("{}+metrics", record["mode"].as_str().unwrap_or_default());
        record["mode"] = json!(mode);
    }
    record["impl"] = json!("graph-runtime");
    record["version"] = json!(env!("CARGO_PKG_VERSION"));
    let mut out = std::io::stdout().lock();
    writeln!(out, "{record}").unwrap();
    out.flush().unwrap();
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 }
}

/// Each thread of this process: its name and its time on a CPU so far, in nanoseconds (the first field of
/// `/proc/self/task/<tid>/schedstat`). Empty where `/proc` has no such files (not Linux).
fn thread_cpu() -> Vec<(u64, String, u64)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else { continue };
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(task.path().join("comm")),
            std::fs::read_to_string(task.path().join("schedstat")),
        ) else {
            continue; // the thread ended between the listing and the reads
        };
        let ns = stat.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
        out.push((tid, comm.trim_end().to_string(), ns));
    }
    out
}

/// CPU seconds between two [`thread_cpu`] readings: all threads', and by thread name.
struct CpuUsed {
    all: f64,
    by_name: Vec<(String, f64)>,
}

impl CpuUsed {
    /// The seconds of the threads whose name is `name`.
    fn named(&self, name: &str) -> f64 {
        self.by_name.iter().filter(|(n, _)| n == name).map(|(_, s)| s).sum()
    }
}

/// A thread that ended between the readings is not counted; one that began counts from zero.
fn cpu_since(before: &[(u64, String, u64)], after: &[(u64, String, u64)]) -> CpuUsed {
    let by_name: Vec<(String, f64)> = after
        .iter()
        .map(|(tid, name, ns)| {
            let was = before.iter().find(|(t, ..)| t == tid).map_or(0, |(.., n)| *n);
            (name.clone(), ns.saturating_sub(was) as f64 / 1e9)
        })
        .collect();
    CpuUsed { all: by_name.iter().map(|(_, s)| s).sum(), by_name }
}

fn fresh_dir(a: &Args) -> tempfile::TempDir {
    tempfile::tempdir_in(&a.dir).expect("a temp dir in --dir")
}

/// A sled store with `durability` (and the checkpoint interval `GRAPH_BENCH_SLED_CHECKPOINT`, bytes of
/// log, when set: for A/B runs of the interval).
fn sled(dir: &Path, durability: Durability) -> SledStore {
    let mut options = SledOptions::default().durability(durability);
    if let Ok(bytes) = std::env::var("GRAPH_BENCH_SLED_CHECKPOINT") {
        options = options.checkpoint_bytes(bytes.parse().expect("GRAPH_BENCH_SLED_CHECKPOINT is bytes"));
    }
    SledStore::open_with(dir, options).expect("sled opens")
}

fn sqlite(dir: &Path, durability: Durability) -> SqliteStore {
    // `GRAPH_BENCH_SQLITE_COALESCE=0`: SQLite's own two writes a log frame (for A/B runs).
    let coalesce = std::env::var("GRAPH_BENCH_SQLITE_COALESCE").map_or(true, |v| v != "0");
    // `GRAPH_BENCH_SQLITE_PAGE=<bytes>`: the page size of the store's new database (for A/B runs).
    let page = std::env::var("GRAPH_BENCH_SQLITE_PAGE").map_or(4096, |v| v.parse().expect("a page size"));
    let options =
        SqliteOptions::default().durability(durability).coalesce_log_writes(coalesce).page_size(page);
    SqliteStore::open_with(dir.join("store.sqlite"), options).expect("SQLite opens")
}

/// Times `f` `repeat` times after one warm-up.
async fn timed<F, Fut>(repeat: usize, mut f: F) -> Vec<f64>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    f(usize::MAX).await;
    let mut all = Vec::with_capacity(repeat);
    for i in 0..repeat {
        let t = Instant::now();
        f(i).await;
        all.push(t.elapsed().as_secs_f64());
    }
    all
}

async fn loop_workload(a: &Args, n: u64) {
    for mode in ["memory", "sled-async"] {
        if std::env::var("GRAPH_BENCH_MODE").is_ok_and(|m| m != mode) {
            continue;
        }
        let dir = fresh_dir(a);
        let engine = match mode {
            "memory" => {
                Engine::builder(loop_graph(n)).options(EngineOptions::default().max_steps(n + 1)).build()
            }
            _ => Engine::builder(loop_graph(n))
                .store(sled(dir.path(), Durability::Async))
                .options(EngineOptions::default().max_steps(n + 1))
                .build(),
        };
        let all = timed(a.cheap_repeat(), |i| {
            let engine = engine.clone();
            async move {
                let out = engine.run(&format!("loop-{i}"), Count::default()).await.unwrap();
                assert_eq!(out.state.count, n);
            }
        })
        .await;
        let m = median(&all);
        emit(json!({"workload": "loop", "mode": mode, "n": n, "repeat": all.len(), "seconds_median": m,
            "seconds_all": all, "us_per_step": m / n as f64 * 1e6,
            "note": "every step committed to the store; sled-async: not flushed per commit (see durable)"}));
    }
}

/// Steps inside a subgraph against the same steps inline, on the memory store: `calls` subgraph runs of
/// `inner` steps each ([`graph_bench::nested_loop_graph`]) against one loop of `calls * inner` steps.
async fn subgraph_workload(a: &Args, calls: u64, inner: u64) {
    let n = calls * inner;
    let options = EngineOptions::default().max_steps(n + 1);
    for (mode, graph) in [("inline", loop_graph(n)), ("nested", graph_bench::nested_loop_graph(calls, inner))]
    {
        let engine = Engine::builder(graph).options(options.clone()).build();
        let all = timed(a.cheap_repeat(), |i| {
            let engine = engine.clone();
            async move {
                let out = engine.run(&format!("sub-{i}"), Count::default()).await.unwrap();
                assert_eq!(out.state.count, n);
            }
        })
        .await;
        let m = median(&all);
        emit(json!({"workload": "subgraph", "mode": mode, "n": n, "calls": calls, "inner": inner,
            "repeat": all.len(), "seconds_median": m, "seconds_all": all, "us_per_step": m / n as f64 * 1e6,
            "note": "memory store; nested: each call a subgraph run of `inner` steps (its start, steps and end \
                     committed), the parent a step per call"}));
    }
}

/// The replay check before a deploy ([`Engine::check_replays`]): `runs` completed runs of `steps` steps
/// each, stored on sled, re-executed with the same build's graph in strict mode (each step's
/// checkpoint compared byte for byte with the stored one). Filling the store is not timed.
async fn replay_check_workload(a: &Args, runs: u64, steps: u64) {
    let dir = fresh_dir(a);
    let engine = Engine::builder(loop_graph(steps)).store(sled(dir.path(), Durability::Async)).build();
    for i in 0..runs {
        engine.run(&format!("r{i:05}"), Count::default()).await.unwrap();
    }
    let t = Instant::now();
    let checks = engine.check_replays(&graph_runtime::store::RunFilter::all()).await.unwrap();
    let seconds = t.elapsed().as_secs_f64();
    assert_eq!(checks.len() as u64, runs);
    assert!(checks.iter().all(|c| matches!(c.verdict, graph_runtime::ReplayVerdict::Same { .. })));
    emit(
        json!({"workload": "replay_check", "mode": "sled", "runs": runs, "steps": steps, "seconds": seconds,
        "ms_per_run": seconds / runs as f64 * 1e3, "us_per_step": seconds / (runs * steps) as f64 * 1e6,
        "note": "Engine::check_replays over every stored run (graphctl replay --all runs the same per run)"}),
    );
}

async fn fanout_workload(a: &Args, width: u64) {
    for mode in ["memory", "sled-sync"] {
        if std::env::var("GRAPH_BENCH_MODE").is_ok_and(|m| m != mode) {
            continue;
        }
        let dir = fresh_dir(a);
        let opts = EngineOptions::default().max_concurrent_nodes(64).queue_depth(4096);
        let engine = match mode {
            "memory" => Engine::builder(fanout_graph(width)).options(opts).build(),
            _ => Engine::builder(fanout_graph(width))
                .store(sled(dir.path(), Durability::Sync))
                .options(opts)
                .build(),
        };
        let all = timed(a.cheap_repeat(), |i| {
            let engine = engine.clone();
            async move {
                let out = engine.run(&format!("fan-{i}"), Fan::default()).await.unwrap();
                assert_eq!(out.state.joined, width);
            }
        })
        .await;
        let m = median(&all);
        emit(
            json!({"workload": "fanout", "mode": mode, "n": width, "repeat": all.len(), "seconds_median": m,
            "seconds_all": all, "us_per_activation": m / (width + 2) as f64 * 1e6,
            "note": "max_concurrent_nodes = 64"}),
        );
    }
}

/// The disk's own rate of one small write + fdatasync at a time, in the directory the stores use.
fn fdatasync_rate(dir: &Path, duration: Duration) -> (f64, u64) {
    let path = dir.join("fdatasync-probe");
    let mut f = std::fs::OpenOptions::new().create(true).truncate(true).write(true).open(&path).unwrap();
    let block = [7u8; 512];
    let t = Instant::now();
    let mut n = 0u64;
    while t.elapsed() < duration {
        f.write_all(&block).unwrap();
        f.sync_data().unwrap();
        n += 1;
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(path);
    (rate, n)
}

/// The bytes of a sequential `Sync` commit to the SQLite store's write-ahead log: about seven frames,
/// each a 24-byte header and a 4 KiB page (bench/analysis.md, "SQL stores: where a commit's time goes").
const SQLITE_COMMIT_BYTES: usize = 7 * (24 + 4096);

/// The disk's rate of one write of `bytes` + fdatasync at a time, each write overwriting blocks of a
/// file written and synced beforehand (as the SQLite store's preallocated log is), in `dir`.
fn overwrite_sync_rate(dir: &Path, bytes: usize, duration: Duration) -> f64 {
    use std::os::unix::fs::FileExt;
    let path = dir.join("overwrite-probe");
    let f =
        std::fs::OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&path).unwrap();
    let span = 4u64 << 20;
    f.write_all_at(&vec![0u8; span as usize], 0).unwrap();
    f.sync_all().unwrap();
    let block = vec![7u8; bytes];
    let (t, mut n, mut at) = (Instant::now(), 0u64, 0u64);
    while t.elapsed() < duration {
        f.write_all_at(&block, at).unwrap();
        f.sync_data().unwrap();
        at = (at + bytes as u64) % (span - bytes as u64);
        n += 1;
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(path);
    rate
}

/// What sled alone allows for one commit at a time, on a fresh database like the store's: a transaction
/// over three trees (three reads, three writes, a ~600-byte record), `flush`, and, when `fdatasync`, the
/// `fdatasync` of its log that makes the commit survive a power loss (see `SledStore`). One thread, no
/// engine, no encoding: the floor our durable commit stands on.
fn sled_floor_rate(dir: &Path, n: u64, fdatasync: bool) -> f64 {
    use sled::Transactional;
    let db = sled::Config::new().path(dir.join("db")).mode(sled::Mode::HighThroughput).open().unwrap();
    let log = std::fs::OpenOptions::new().read(true).write(true).open(dir.join("db").join("db")).unwrap();
    let (runs, cps, keys) =
        (db.open_tree("runs").unwrap(), db.open_tree("checkpoints").unwrap(), db.open_tree("keys").unwrap());
    let record = vec![7u8; 600];
    let t = Instant::now();
    for step in 0..n {
        let k = step.to_be_bytes();
        (&runs, &cps, &keys)
            .transaction(|(runs, cps, keys)| {
                runs.get(b"run")?;
                cps.get(k)?;
                keys.get(k)?;
                runs.insert(&b"run"[..], &k[..])?;
                cps.insert(&k[..], record.clone())?;
                keys.insert(&k[..], &b"k"[..])?;
                Ok::<_, sled::transaction::ConflictableTransactionError<()>>(())
            })
            .unwrap();
        db.flush().unwrap();
        if fdatasync {
            log.sync_data().unwrap();
        }
    }
    n as f64 / t.elapsed().as_secs_f64()
}

async fn durable_workload(a: &Args, n: u64) {
    let dir = fresh_dir(a);
    let commits = n + 1; // checkpoints 0..=n (the last one is the END checkpoint)
    let (mut rates, mut all, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut floor, mut flush_only) = (Vec::new(), Vec::new());
    for i in 0..a.repeat {
        // The disk's rate drifts from one second to the next: each run is compared with the probes
        // taken just before and just after it.
        let before = fdatasync_rate(dir.path(), Duration::from_millis(700)).0;
        let run_dir = fresh_dir(a);
        let engine = Engine::builder(loop_graph(n))
            .store(sled(run_dir.path(), Durability::Sync))
            .options(EngineOptions::default().max_steps(n + 1))
            .build();
        let t = Instant::now();
        let out = engine.run(&format!("durable-{i}"), Count::default()).await.unwrap();
        let seconds = t.elapsed().as_secs_f64();
        assert_eq!(out.steps, n);
        let after = fdatasync_rate(dir.path(), Duration::from_millis(700)).0;
        ratios.push(commits as f64 / seconds / ((before + after) / 2.0));
        all.push(seconds);
        rates.extend([before, after]);
        floor.push(sled_floor_rate(fresh_dir(a).path(), n, true));
        flush_only.push(sled_floor_rate(fresh_dir(a).path(), n, false));
    }
    let m = median(&all);
    let fsync = median(&rates);
    emit(json!({"workload": "fdatasync", "mode": "disk", "n": rates.len(), "repeat": a.repeat,
        "ops_per_s_median": fsync, "ops_per_s_all": rates,
        "note": "512-byte append + fdatasync, one at a time, same file system as the stores, before and after each run"}));
    emit(json!({"workload": "durable", "mode": "sled-sync", "n": n, "repeat": a.repeat, "seconds_median": m,
        "seconds_all": all, "steps_per_s": n as f64 / m, "commits_per_s": commits as f64 / m,
        "ratio_to_fdatasync": median(&ratios), "ratios_all": ratios,
        "note": "every commit acknowledged only after a flush; ratio: the median over the runs of each run's \
                 commits/s ÷ the mean of the probes just before and after it"}));
    emit(json!({"workload": "sled-floor", "mode": "flush+fdatasync", "n": n, "repeat": a.repeat,
        "commits_per_s_median": median(&floor), "commits_per_s_all": floor,
        "ratio_to_fdatasync": median(&floor) / fsync,
        "note": "bare sled, one thread: transaction over three trees, flush, fdatasync of the log"}));
    emit(json!({"workload": "sled-floor", "mode": "flush", "n": n, "repeat": a.repeat,
        "commits_per_s_median": median(&flush_only), "commits_per_s_all": flush_only,
        "ratio_to_fdatasync": median(&flush_only) / fsync,
        "note": "bare sled, one thread: transaction over three trees, flush (sync_file_range only)"}));
}

/// `durable` on the SQLite store: 1,000 sequential steps, each commit durable (`Durability::Sync`:
/// `synchronous = FULL`), beside the disk's fdatasync rate probed in between; and the same under
/// `Durability::Async` (the log synced at checkpoints only, as `synchronous = NORMAL`).
async fn durable_sqlite_workload(a: &Args, n: u64) {
    let dir = fresh_dir(a);
    let mut rates = Vec::new();
    let (mut sync, mut not_synced, mut commit_bytes) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..a.repeat {
        rates.push(fdatasync_rate(dir.path(), Duration::from_millis(700)).0);
        commit_bytes.push(overwrite_sync_rate(dir.path(), SQLITE_COMMIT_BYTES, Duration::from_millis(700)));
        for (durability, all) in [(Durability::Sync, &mut sync), (Durability::Async, &mut not_synced)] {
            let run_dir = fresh_dir(a);
            let engine = Engine::builder(loop_graph(n))
                .store(sqlite(run_dir.path(), durability))
                .options(EngineOptions::default().max_steps(n + 1))
                .build();
            let t = Instant::now();
            let out = engine.run(&format!("durable-{i}"), Count::default()).await.unwrap();
            all.push(t.elapsed().as_secs_f64());
            assert_eq!(out.steps, n);
        }
    }
    let commits = n + 1;
    let fsync = median(&rates);
    emit(json!({"workload": "fdatasync", "mode": "disk-sqlite-run", "n": a.repeat, "repeat": a.repeat,
        "ops_per_s_median": fsync, "ops_per_s_all": rates,
        "note": "512-byte append + fdatasync, one at a time, probed between the SQLite runs"}));
    let m = median(&commit_bytes);
    emit(
        json!({"workload": "fdatasync", "mode": "disk-sqlite-commit-bytes", "n": a.repeat, "repeat": a.repeat,
        "bytes": SQLITE_COMMIT_BYTES, "ops_per_s_median": m, "ops_per_s_all": commit_bytes,
        "ratio_to_fdatasync": m / fsync,
        "note": "a Sync commit's log bytes (7 frames of 4 KiB) overwritten in a synced file + fdatasync, one at a time"}),
    );
    for (mode, all) in [("sqlite-sync", sync), ("sqlite-async", not_synced)] {
        let m = median(&all);
        emit(json!({"workload": "durable", "mode": mode, "n": n, "repeat": a.repeat, "seconds_median": m,
            "seconds_all": all, "steps_per_s": n as f64 / m, "commits_per_s": commits as f64 / m,
            "ratio_to_fdatasync": (commits as f64 / m) / fsync,
            "note": "SqliteStore: sync = synchronous FULL (durable), async = synchronous NORMAL"}));
    }
}

/// `concurrent` on the SQLite store (`Durability::Sync`): 1, 8, 64, 256 runs at once.
async fn concurrent_sqlite_workload(a: &Args, steps: u64) {
    for runs in [1usize, 8, 64, 256] {
        let mut all = Vec::new();
        let (mut cpu_all, mut writer_all) = (Vec::new(), Vec::new());
        let mut transactions = 0;
        for rep in 0..a.repeat.min(3) {
            let dir = fresh_dir(a);
            let store = sqlite(dir.path(), Durability::Sync);
            let engine = Engine::builder(loop_graph(steps))
                .store(store.clone())
                .options(EngineOptions::default().max_steps(steps + 1))
                .build();
            let before = thread_cpu();
            let t = Instant::now();
            let tasks: Vec<_> = (0..runs)
                .map(|r| {
                    let engine = engine.clone();
                    tokio::spawn(async move {
                        engine.run(&format!("c{rep}-{r}"), Count::default()).await.unwrap()
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            all.push(t.elapsed().as_secs_f64());
            let cpu = cpu_since(&before, &thread_cpu());
            cpu_all.push(cpu.all);
            // `graph-sqlite-writer` as /proc shows it: a thread's name cut to 15 bytes.
            writer_all.push(cpu.named("graph-sqlite-wr"));
            transactions = store.transactions();
        }
        let commits = runs as u64 * (steps + 1);
        let m = median(&all);
        // The process's CPU a commit (all its threads, on a CPU, in user space or the kernel), and the
        // rate at which that much CPU a commit would keep every core busy: no schedule of this process's
        // work can commit faster. Kernel threads (writeback, interrupts) are not counted, so the ceiling is
        // if anything high.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        // `None` where /proc gave no readings.
        let per_commit = |s: &[f64]| Some(median(s) * 1e6 / commits as f64).filter(|us| *us > 0.0);
        let (cpu_us, writer_us) = (per_commit(&cpu_all), per_commit(&writer_all));
        emit(json!({"workload": "concurrent", "mode": "sqlite-sync", "n": runs, "steps_per_run": steps,
            "repeat": all.len(), "seconds_median": m, "seconds_all": all,
            "commits_per_s": commits as f64 / m, "transactions_last_repeat": transactions,
            "cpu_us_per_commit": cpu_us, "writer_cpu_us_per_commit": writer_us, "cores": cores,
            "cpu_ceiling_commits_per_s": cpu_us.map(|us| cores as f64 * 1e6 / us),
            "note": "aggregate durable commits of all runs, SqliteStore, group commit; cpu: the process's \
                     threads' time on a CPU (/proc schedstat) a commit, and the writer thread's"}));
    }
}

/// One effect per step on the durable sled store: the same loop as `durable`, whose step journals an
/// effect (an idempotent one: its response, one log write; a non-idempotent one: `Started`, then the
/// response, two) before the step commits.
async fn effects_workload(a: &Args, n: u64) {
    for class in ["idempotent", "non_idempotent"] {
        let mut all = Vec::new();
        for i in 0..a.repeat {
            let run_dir = fresh_dir(a);
            let engine = Engine::builder(graph_bench::effect_graph(n, class))
                .store(sled(run_dir.path(), Durability::Sync))
                .options(EngineOptions::default().max_steps(n + 1))
                .build();
            let t = Instant::now();
            let out = engine.run(&format!("effects-{i}"), Count::default()).await.unwrap();
            all.push(t.elapsed().as_secs_f64());
            assert_eq!(out.steps, n);
        }
        let m = median(&all);
        emit(json!({"workload": "effects", "mode": class, "n": n, "repeat": a.repeat, "seconds_median": m,
            "seconds_all": all, "steps_per_s": n as f64 / m,
            "note": "one effect per step, sled Durability::Sync: journal writes plus the step commit"}));
    }
}

async fn concurrent_workload(a: &Args, steps: u64) {
    for runs in [1usize, 8, 64, 256] {
        let mut all = Vec::new();
        for rep in 0..a.repeat.min(3) {
            let dir = fresh_dir(a);
            let engine = Engine::builder(loop_graph(steps))
                .store(sled(dir.path(), Durability::Sync))
                .options(EngineOptions::default().max_steps(steps + 1))
                .build();
            let t = Instant::now();
            let tasks: Vec<_> = (0..runs)
                .map(|r| {
                    let engine = engine.clone();
                    tokio::spawn(async move {
                        engine.run(&format!("c{rep}-{r}"), Count::default()).await.unwrap()
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            all.push(t.elapsed().as_secs_f64());
        }
        let commits = runs as u64 * (steps + 1);
        let m = median(&all);
        emit(json!({"workload": "concurrent", "mode": "sled-sync", "n": runs, "steps_per_run": steps,
            "repeat": all.len(), "seconds_median": m, "seconds_all": all,
            "commits_per_s": commits as f64 / m, "note": "aggregate durable commits of all runs"}));
    }
}

async fn growth_workload(a: &Args, steps: usize) {
    for mode in ["memory", "sled-sync"] {
        let dir = fresh_dir(a);
        let sled_store = (mode == "sled-sync").then(|| sled(dir.path(), Durability::Sync));
        let store: Arc<dyn Store> = match &sled_store {
            Some(s) => Arc::new(s.clone()),
            None => Arc::new(MemoryStore::new()),
        };
        let engine = Engine::builder(growth_graph(steps))
            .shared_store(store.clone())
            .options(EngineOptions::default().max_steps(steps as u64 + 2))
            .build();
        let t = Instant::now();
        let out = engine.run("growth", growth_input()).await.unwrap();
        let seconds = t.elapsed().as_secs_f64();
        assert_eq!(out.state.chunks.len(), steps + 1);
        // State bytes written by the steps after the input (step 0), as stored: deltas and snapshots.
        let cps = store.checkpoints("growth", 1, out.steps).await.unwrap();
        let state_bytes: usize = cps.iter().map(|c| c.state.len()).sum();
        let snapshots = cps.iter().filter(|c| matches!(c.state, StateRepr::Full(_))).count();
        let mut record = json!({"workload": "growth", "mode": mode, "n": steps, "repeat": 1,
            "seconds_median": seconds, "seconds_all": [seconds], "steps": out.steps,
            "state_bytes_per_step": state_bytes as f64 / out.steps as f64, "snapshots": snapshots,
            "delta_bytes": 1024, "note": "state bytes: deltas and periodic snapshots as stored"});
        if let Some(sled_store) = sled_store {
            // Whole records as written: envelope, metadata (frontier, keys, hashes) and state payload.
            let raw: usize = cps.iter().map(|c| graph_runtime::store::record::encode(c).len()).sum();
            drop((engine, store, sled_store));
            record["record_bytes_per_step"] = json!(raw as f64 / out.steps as f64);
            record["store_bytes_on_disk"] = json!(dir_size(dir.path()));
        }
        emit(record);
    }
}

async fn resume_workload(a: &Args, long: u64) {
    for history in [100u64, long] {
        let dir = fresh_dir(a);
        // Build the history fast (no flush per commit), then flush once.
        let store = sled(dir.path(), Durability::Async);
        let build = Engine::builder(loop_graph(u64::MAX))
            .store(store.clone())
            .options(EngineOptions::default().max_steps(history))
            .build();
        let err = build.run("long", Count::default()).await.unwrap_err();
        assert!(matches!(err, Error::MaxStepsExceeded { .. }));
        store.flush().await.unwrap();
        // One event per committed step and per status change: what an unbounded verification would read.
        let events = store.run_info("long").await.unwrap().unwrap().event_head.map_or(0, |h| h.seq + 1);
        drop(build);
        drop(store);
        // Each repetition opens the store (timed apart: sled reads its page table on open, which grows
        // with the database), then resumes: load the latest checkpoint, rebuild and verify the state,
        // execute exactly one more step and commit it durably.
        let (mut opens, mut resumes) = (Vec::new(), Vec::new());
        for i in 0..a.cheap_repeat() as u64 {
            let t = Instant::now();
            let store = sled(dir.path(), Durability::Sync);
            opens.push(t.elapsed().as_secs_f64());
            let engine = Engine::builder(loop_graph(u64::MAX))
                .store(store)
                .options(EngineOptions::default().max_steps(history + i + 1))
                .build();
            let t = Instant::now();
            let err = engine.resume("long").await.unwrap_err();
            resumes.push(t.elapsed().as_secs_f64());
            assert!(matches!(err, Error::MaxStepsExceeded { .. }), "{err:?}");
        }
        let (m, open) = (median(&resumes), median(&opens));
        emit(json!({"workload": "resume", "mode": "sled-sync", "n": history, "repeat": resumes.len(),
            "seconds_median": m, "seconds_all": resumes, "ms_median": m * 1e3,
            "open_ms_median": open * 1e3, "open_seconds_all": opens,
            "store_bytes_on_disk": dir_size(dir.path()), "events": events,
            "note": "resume: verify the event log from the latest checkpoint on, load and rebuild the latest state, execute and durably commit one step; open: SledStore::open"}));
    }
}

/// Bytes under `path`, recursively: what the store occupies on disk.
fn dir_size(path: &Path) -> u64 {
    std::fs::read_dir(path).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| match e.metadata() {
                Ok(m) if m.is_dir() => dir_size(&e.path()),
                Ok(m) => m.len(),
                Err(_) => 0,
            })
            .sum()
    })
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

async fn memory_workload(runs: usize) {
    let (tx, rx) = tokio::sync::watch::channel(false);
    let parked = Arc::new(AtomicUsize::new(0));
    let p = parked.clone();
    let graph = Graph::<Count>::builder("park")
        .node("park", move |_s, _c| {
            let (mut rx, p) = (rx.clone(), p.clone());
            Box::pin(async move {
                p.fetch_add(1, Ordering::SeqCst);
                rx.wait_for(|go| *go).await.map_err(graph_runtime::NodeError::from_error)?;
                Ok((CountDelta { count: Some(1) }, Route::Declared))
            })
        })
        .entry("park")
        .edge("park", END)
        .build()
        .unwrap();
    let engine = Engine::builder(graph).options(EngineOptions::default().queue_depth(runs * 2)).build();
    let before = rss_bytes();
    let tasks: Vec<_> = (0..runs)
        .map(|i| {
            let engine = engine.clone();
            tokio::spawn(async move { engine.run(&format!("m{i}"), Count::default()).await.unwrap() })
        })
        .collect();
    while parked.load(Ordering::SeqCst) < runs {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let during = rss_bytes();
    tx.send(true).unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    emit(json!({"workload": "memory", "mode": "memory", "n": runs, "repeat": 1,
        "rss_before": before, "rss_in_flight": during,
        "bytes_per_run": (during.saturating_sub(before)) as f64 / runs as f64,
        "note": "VmRSS with every run parked inside its node, checkpoints in a MemoryStore"}));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Option<Args>, String> {
        parse_args(args.iter().map(|a| a.to_string()))
    }

    #[test]
    fn the_command_line_is_checked_before_anything_runs() {
        let a = parse(&[]).unwrap().unwrap();
        assert_eq!(a.workloads, DEFAULT_WORKLOADS);
        assert_eq!(a.repeat, 5);
        let a =
            parse(&["--workloads", "durable_sqlite,postgres", "--repeat", "3", "--quick"]).unwrap().unwrap();
        assert_eq!((a.workloads.len(), a.repeat, a.quick), (2, 3, true));
        assert!(parse(&["--help"]).unwrap().is_none());
        assert_eq!(parse(&["--workloads", "loop,nope"]).err().unwrap(), "unknown workload nope");
        assert_eq!(parse(&["--repeat"]).err().unwrap(), "--repeat needs a count");
        assert_eq!(parse(&["--repeat", "0"]).err().unwrap(), "--repeat 0: not a count above 0");
        assert_eq!(parse(&["--fast"]).err().unwrap(), "unknown argument --fast");
    }
}
