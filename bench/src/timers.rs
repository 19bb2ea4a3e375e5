//! The workloads of runs that wait, on sled (and, with feature `postgres`, on a PostgreSQL worker):
//!
//! - `sleepers`: `n` runs each asleep for a day (`ctx.sleep`), parked on a sled store by one engine,
//!   whose timer index then holds them all: the process's resident memory per sleeping run (VmRSS after
//!   minus before, in a process of its own), the parking rate.
//! - `wake_lateness`: `n` runs asleep until times 1 ms apart (1,000 due a second), on sled, woken by the
//!   engine's timer service (`Engine::run_timers`, the wall clock): how late each node resumes after its
//!   due time, p50 / p99 / max.
//! - `event_latency`: runs waiting for an event (`ctx.wait_event`), sent one at a time: from the start of
//!   `engine.send_event` to the node resuming, p50 / p99; on sled with the timer service, and on
//!   PostgreSQL with one worker polling every 20 ms (`event_latency_postgres`).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use graph_runtime::prelude::*;
use graph_runtime::{Clock as _, SystemClock};
use serde_json::json;

/// What a workload reports: one JSON object per measurement.
pub type Emit<'a> = &'a dyn Fn(serde_json::Value);

/// When each run's node resumed past its wait, by run id (the wall clock, ms, and an `Instant`).
fn resumed() -> &'static Mutex<HashMap<String, (u64, Instant)>> {
    static R: OnceLock<Mutex<HashMap<String, (u64, Instant)>>> = OnceLock::new();
    R.get_or_init(Mutex::default)
}

/// A parked run's state: when it is due (ms since the epoch; 0: a day from now).
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Waiter {
    /// When the sleep ends, ms since the epoch (0: sleep a day).
    pub due_ms: u64,
}

#[graph(state = Waiter, name = "bench_waiter")]
mod waiter {
    use super::*;

    #[node(entry, to = END)]
    async fn wait(s: &Waiter, ctx: &mut Ctx) -> NodeResult<Waiter> {
        if s.due_ms == 0 {
            ctx.sleep(Duration::from_secs(24 * 3600))?;
        } else {
            ctx.sleep_until(std::time::UNIX_EPOCH + Duration::from_millis(s.due_ms))?;
        }
        note(ctx.run_id());
        Ok(WaiterDelta::default())
    }
}

#[graph(state = Waiter, name = "bench_listener")]
mod listener {
    use super::*;

    #[node(entry, to = END)]
    async fn listen(_s: &Waiter, ctx: &mut Ctx) -> NodeResult<Waiter> {
        let _: u64 = ctx.wait_event("go")?;
        note(ctx.run_id());
        Ok(WaiterDelta::default())
    }
}

fn note(run: &str) {
    resumed().lock().unwrap().insert(run.to_owned(), (SystemClock.now_ms(), Instant::now()));
}

/// The `q` quantile of `v` (nearest rank).
fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return 0.0;
    }
    s[((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1]
}

/// Starts `n` runs of `engine` named `{prefix}{i}` with `input(i)`, 512 at a time.
async fn park_all(engine: &Engine<Waiter>, prefix: &str, n: usize, input: impl Fn(usize) -> Waiter) {
    let mut set = tokio::task::JoinSet::new();
    for i in 0..n {
        if set.len() >= 512 {
            set.join_next().await.unwrap().unwrap();
        }
        let (engine, run, input) = (engine.clone(), format!("{prefix}{i}"), input(i));
        set.spawn(async move {
            let out = engine.run(&run, input).await.expect("the run parks");
            assert!(matches!(out.status, RunStatus::Waiting(_)), "{:?}", out.status);
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
}

/// `sleepers`: `n` runs asleep on sled in one process (see the module docs), with sled's page cache at
/// its default (1 GiB) or bounded to 64 MiB: VmRSS before, after `n / 2` and after `n`. The second
/// half's growth is the marginal cost of a sleeping run once the bounded cache is full.
pub async fn sleepers(n: usize, dir: &std::path::Path, rss: fn() -> u64, emit: Emit<'_>) {
    let cache: u64 = match std::env::var("GRAPH_BENCH_SLED_CACHE") {
        Ok(v) => v.parse().expect("GRAPH_BENCH_SLED_CACHE is bytes"),
        Err(_) => 64 << 20,
    };
    let options = graph_runtime::store::SledOptions::default().cache_bytes(cache);
    let store = SledStore::open_with(dir.join(format!("sleepers-{cache}")), options).expect("sled");
    let engine = Engine::builder(waiter::graph())
        .store(store)
        .options(EngineOptions::default().queue_depth(4096))
        .build();
    // Warm: one run parked and the index loaded, so the baseline holds the engine's fixed costs.
    park_all(&engine, "warm", 1, |_| Waiter::default()).await;
    engine.wake_due().await.unwrap();
    let before = rss();
    let t = Instant::now();
    park_all(&engine, "a", n / 2, |_| Waiter::default()).await;
    let mid = rss();
    park_all(&engine, "b", n - n / 2, |_| Waiter::default()).await;
    let parked_s = t.elapsed().as_secs_f64();
    let after = rss();
    let waiting = graph_runtime::store::RunFilter::all().status(graph_runtime::store::StatusKind::Waiting);
    assert_eq!(engine.store().list_runs(&waiting).await.unwrap().len(), n + 1);
    emit(json!({"workload": "sleepers", "mode": "sled", "n": n, "repeat": 1, "sled_cache_bytes": cache,
        "rss_before": before, "rss_half": mid, "rss_after": after,
        "bytes_per_sleeping_run": after.saturating_sub(before) as f64 / n as f64,
        "bytes_per_sleeping_run_marginal": after.saturating_sub(mid) as f64 / (n - n / 2) as f64,
        "parked_per_s": n as f64 / parked_s,
        "note": "VmRSS with n runs parked asleep (sled, Sync; the engine's timer index holds each), minus before; marginal: the second half's"}));
}

/// `wake_lateness`: `n` runs due 1 ms apart, woken by the timer service on sled.
pub async fn wake_lateness(n: usize, dir: &std::path::Path, emit: Emit<'_>) {
    let mut options = graph_runtime::store::SledOptions::default();
    if let Ok(bytes) = std::env::var("GRAPH_BENCH_SLED_CHECKPOINT") {
        options = options.checkpoint_bytes(bytes.parse().expect("GRAPH_BENCH_SLED_CHECKPOINT is bytes"));
    }
    let engine = Engine::builder(waiter::graph())
        .store(SledStore::open_with(dir.join("lateness"), options).expect("sled"))
        .options(EngineOptions::default().queue_depth(4096))
        .build();
    let lead = Duration::from_secs(5) + Duration::from_millis(n as u64 * 2);
    let base = SystemClock.now_ms() + lead.as_millis() as u64;
    let t = Instant::now();
    park_all(&engine, "l", n, |i| Waiter { due_ms: base + i as u64 }).await;
    assert!(SystemClock.now_ms() < base, "parking took {:?}, longer than the lead {lead:?}", t.elapsed());
    let shutdown = CancellationToken::new();
    let service = tokio::spawn({
        let (engine, shutdown) = (engine.clone(), shutdown.clone());
        async move { engine.run_timers(shutdown).await }
    });
    let deadline = Instant::now() + lead + Duration::from_secs(120);
    loop {
        let done = resumed().lock().unwrap().keys().filter(|k| k.starts_with('l')).count();
        if done >= n || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    service.await.unwrap().unwrap();
    let r = resumed().lock().unwrap();
    let late: Vec<f64> = (0..n)
        .map(|i| {
            let (at, _) = r.get(&format!("l{i}")).expect("every run resumed");
            at.saturating_sub(base + i as u64) as f64
        })
        .collect();
    emit(json!({"workload": "wake_lateness", "mode": "sled", "n": n, "repeat": 1,
        "due_per_s": 1000, "lateness_ms_p50": quantile(&late, 0.5), "lateness_ms_p99": quantile(&late, 0.99),
        "lateness_ms_max": quantile(&late, 1.0),
        "note": "wall clock from each run's due time to its node resuming; the engine's timer service on sled (Sync)"}));
}

/// From the start of each send to its node resuming, `n` runs one at a time.
async fn event_latencies(engine: &Engine<Waiter>, prefix: &str, n: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let run = format!("{prefix}{i}");
        let t = Instant::now();
        engine.send_event(&run, "go", &1u64).await.expect("sent");
        let deadline = t + Duration::from_secs(30);
        loop {
            if let Some((_, at)) = resumed().lock().unwrap().get(&run) {
                out.push(at.duration_since(t).as_secs_f64() * 1000.0);
                break;
            }
            assert!(Instant::now() < deadline, "run {run} did not resume");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
    out
}

fn emit_latency(mode: &str, n: usize, lat: &[f64], note: &str, emit: Emit<'_>) {
    emit(json!({"workload": "event_latency", "mode": mode, "n": n, "repeat": 1,
        "latency_ms_p50": quantile(lat, 0.5), "latency_ms_p99": quantile(lat, 0.99), "note": note}));
}

/// `event_latency` on sled, with the engine's timer service delivering.
pub async fn event_latency_sled(n: usize, dir: &std::path::Path, emit: Emit<'_>) {
    let engine =
        Engine::builder(listener::graph()).store(SledStore::open(dir.join("events")).expect("sled")).build();
    park_all(&engine, "e", n, |_| Waiter::default()).await;
    let shutdown = CancellationToken::new();
    let service = tokio::spawn({
        let (engine, shutdown) = (engine.clone(), shutdown.clone());
        async move { engine.run_timers(shutdown).await }
    });
    let lat = event_latencies(&engine, "e", n).await;
    shutdown.cancel();
    service.await.unwrap().unwrap();
    emit_latency(
        "sled",
        n,
        &lat,
        "send_event to the node resuming; the timer service delivers (sled, Sync)",
        emit,
    );
}

/// `event_latency_postgres`: the runs parked on PostgreSQL, one worker (poll 20 ms) delivering.
#[cfg(feature = "postgres")]
pub async fn event_latency_postgres(n: usize, emit: Emit<'_>) {
    use crate::servers::{Scratch, Server};
    use graph_runtime::store::PostgresStore;
    use graph_runtime::worker::Worker;
    let scratch = Scratch::create(Server::Postgres).await;
    let store = PostgresStore::connect(&scratch.url).await.expect("connect the store");
    let engine = Engine::builder(listener::graph()).store(store.clone()).build();
    park_all(&engine, "pe", n, |_| Waiter::default()).await;
    let shutdown = CancellationToken::new();
    let worker =
        Worker::builder(listener::graph(), store).poll(Duration::from_millis(20)).concurrency(4).build();
    let running = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { worker.run(shutdown).await }
    });
    let lat = event_latencies(&engine, "pe", n).await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    emit_latency(
        "postgres",
        n,
        &lat,
        "send_event to the node resuming; one worker polling every 20 ms claims the run made due",
        emit,
    );
    scratch.drop_database().await;
}
