//! The `workers_postgres` and `workers_mysql` workloads (features `postgres`, `mysql`):
//! `runs` submitted runs of the loop graph (`steps` steps each), drained by 1, 2 and 4 workers
//! (`graph_runtime::worker::Worker`, each with a store and pool of its own, 16 runs at once, in this
//! process), timed from the workers' start to the last run completed: runs/s and committed steps/s. The
//! database's own floor is the `floor` row of the `postgres` / `mysql` workloads.

use std::time::{Duration, Instant};

use graph_runtime::store::RunFilter;
use graph_runtime::worker::{LeaseStore, Worker};
use graph_runtime::{CancellationToken, Engine, EngineOptions, RunStatus};
use serde_json::json;

use crate::servers::{Emit, Scratch, Server, median};
use crate::{Count, loop_graph};

/// Workers drain `runs` submitted runs, for 1, 2 and 4 workers, `repeat.min(3)` times each.
async fn drain<L, F, Fut>(mode: &str, runs: u64, steps: u64, repeat: usize, connect: F, emit: Emit<'_>)
where
    L: LeaseStore,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = L>,
{
    let options = EngineOptions::default().max_steps(steps + 1);
    let submitter =
        Engine::builder(loop_graph(steps)).store(connect().await).options(options.clone()).build();
    for workers in [1usize, 2, 4] {
        let mut all = Vec::new();
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
                    .poll(Duration::from_millis(10))
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
        let m = median(&all);
        emit(json!({"workload": "workers", "mode": mode, "n": workers, "runs": runs, "steps_per_run": steps,
            "repeat": all.len(), "seconds_median": m, "seconds_all": all, "runs_per_s": runs as f64 / m,
            "steps_per_s": (runs * steps) as f64 / m,
            "note": "workers in one process, each its own pool, 16 runs at once each"}));
    }
}

/// The PostgreSQL workers workload.
#[cfg(feature = "postgres")]
pub async fn postgres(runs: u64, steps: u64, repeat: usize, emit: Emit<'_>) {
    use graph_runtime::store::PostgresStore;
    let scratch = Scratch::create(Server::Postgres).await;
    let url = scratch.url.clone();
    let connect = || async { PostgresStore::connect(&url).await.expect("connect the store") };
    drain("postgres", runs, steps, repeat, connect, emit).await;
    scratch.drop_database().await;
}

/// The MySQL / MariaDB workers workload.
#[cfg(feature = "mysql")]
pub async fn mysql(runs: u64, steps: u64, repeat: usize, emit: Emit<'_>) {
    use graph_runtime::store::MySqlStore;
    let scratch = Scratch::create(Server::MySql).await;
    let url = scratch.url.clone();
    let connect = || async { MySqlStore::connect(&url).await.expect("connect the store") };
    drain("mysql", runs, steps, repeat, connect, emit).await;
    scratch.drop_database().await;
}
