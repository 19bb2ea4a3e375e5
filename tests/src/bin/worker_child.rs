//! A worker process of the worker tests (`tests/tests/stores/workers.rs`): runs a
//! [`graph_runtime::worker::Worker`] over [`graph_tests::graphs::worker_fanout`] on a server store until
//! its stdin closes (then shuts down gracefully and prints its report), or until it is killed.
//!
//! `worker_child <url> <worker id> <concurrency> <lease ms> <width> <iterations> <delay ms> [label]`,
//! the URL `postgres://…` or `mysql://…`. Every node execution is counted in the table `worker_execs`
//! (run_id, step, node, n) of the same database, which the test creates. `WORKER_HEARTBEAT_MS` sets the
//! heartbeat interval (default: a third of the lease); `WORKER_VERSIONS=2` makes the worker's graph
//! version 2 of the workflow ([`graph_tests::graphs::worker_fanout_version`]) serving version 1 too.

#[cfg(not(any(feature = "postgres", feature = "mysql")))]
fn main() {
    eprintln!("worker_child needs feature postgres or mysql");
    std::process::exit(2);
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
#[tokio::main]
async fn main() {
    imp::main().await;
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
mod imp {
    use std::sync::Arc;
    use std::time::Duration;

    use graph_runtime::CancellationToken;
    use graph_runtime::worker::{LeaseStore, Worker};
    use graph_tests::Trace;
    use graph_tests::graphs::{ExecutionLog, worker_fanout, worker_fanout_version};

    /// An [`ExecutionLog`] that counts each (run, step, node) execution in `worker_execs` with `sql`
    /// (the server's upsert) on `pool`, retrying until the row is written.
    macro_rules! execution_log {
        ($pool:expr, $sql:expr) => {{
            let pool = $pool;
            let log: ExecutionLog = Arc::new(move |run, step, node| {
                let pool = pool.clone();
                Box::pin(async move {
                    retry(|| {
                        let pool = pool.clone();
                        let (run, node) = (run.clone(), node.clone());
                        async move {
                            graph_runtime::store::server::sqlx::query($sql)
                                .bind(run)
                                .bind(step as i64)
                                .bind(node)
                                .execute(&pool)
                                .await
                                .map(drop)
                        }
                    })
                    .await;
                })
            });
            log
        }};
    }

    pub(crate) async fn main() {
        let args: Vec<String> = std::env::args().collect();
        let [_, url, id, concurrency, lease_ms, width, iterations, delay_ms, rest @ ..] = args.as_slice()
        else {
            eprintln!(
                "usage: worker_child <url> <id> <concurrency> <lease ms> <width> <iterations> <delay ms> [label]"
            );
            std::process::exit(2);
        };
        let number = |s: &str| s.parse::<u64>().unwrap_or_else(|e| panic!("`{s}` is not a number: {e}"));
        let label = rest.first().cloned().unwrap_or_default();
        let shape =
            (number(width) as usize, number(iterations) as usize, Duration::from_millis(number(delay_ms)));
        let lease = Duration::from_millis(number(lease_ms));
        let concurrency = number(concurrency) as usize;
        // Graceful shutdown when the test closes stdin.
        let shutdown = CancellationToken::new();
        let closing = shutdown.clone();
        std::thread::spawn(move || {
            let mut sink = String::new();
            while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {}
            closing.cancel();
        });
        if url.starts_with("postgres") {
            #[cfg(feature = "postgres")]
            {
                let store = graph_runtime::store::PostgresStore::connect(url).await.expect("connect");
                let pool = store.pool().clone();
                let log = execution_log!(
                    pool,
                    "INSERT INTO worker_execs (run_id, step, node, n) VALUES ($1, $2, $3, 1) \
                     ON CONFLICT (run_id, step, node) DO UPDATE SET n = worker_execs.n + 1"
                );
                serve(store, id, concurrency, lease, shape, label, log, shutdown).await;
                return;
            }
        }
        #[cfg(feature = "mysql")]
        {
            let store = graph_runtime::store::MySqlStore::connect(url).await.expect("connect");
            let pool = store.pool().clone();
            let log = execution_log!(
                pool,
                "INSERT INTO worker_execs (run_id, step, node, n) VALUES (?, ?, ?, 1) \
                 ON DUPLICATE KEY UPDATE n = n + 1"
            );
            serve(store, id, concurrency, lease, shape, label, log, shutdown).await;
            return;
        }
        #[allow(unreachable_code)]
        {
            eprintln!("worker_child: no store feature for `{url}`");
            std::process::exit(2);
        }
    }

    /// Runs `op` until it succeeds (the database may be busy; a node must not fail because of its log).
    async fn retry<F, Fut>(mut op: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), graph_runtime::store::server::sqlx::Error>>,
    {
        for attempt in 0.. {
            match op().await {
                Ok(()) => return,
                Err(e) if attempt < 100 => {
                    eprintln!("worker_child: counting an execution failed ({e}); retrying");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("counting an execution failed 100 times: {e}"),
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn serve<L: LeaseStore>(
        store: L,
        id: &str,
        concurrency: usize,
        lease: Duration,
        (width, iterations, delay): (usize, usize, Duration),
        label: String,
        log: ExecutionLog,
        shutdown: CancellationToken,
    ) {
        // `WORKER_VERSIONS=2`: the worker's graph is version 2 of the workflow, and it serves version 1.
        let versioned = std::env::var("WORKER_VERSIONS").is_ok_and(|v| v == "2");
        let version = if versioned { 2 } else { 1 };
        let graph = worker_fanout_version(version, width, iterations, delay, label.clone(), log.clone());
        let builder = Worker::builder(graph, store);
        let builder = match versioned {
            true => builder.serves(worker_fanout(width, iterations, delay, label, log)),
            false => builder,
        };
        let worker: Worker<Trace, L> = builder
            .id(id)
            .concurrency(concurrency)
            .lease(lease)
            .poll(Duration::from_millis(50))
            .heartbeat(match std::env::var("WORKER_HEARTBEAT_MS") {
                Ok(ms) => Duration::from_millis(ms.parse().expect("WORKER_HEARTBEAT_MS is a number")),
                Err(_) => lease / 3,
            })
            .build();
        println!("ready {id}");
        let report = worker.run(shutdown).await.expect("the worker runs");
        println!(
            "report claimed={} takeovers={} completed={} fenced={} failed={} handed_back={}",
            report.claimed,
            report.takeovers,
            report.completed,
            report.fenced,
            report.failed,
            report.handed_back
        );
    }
}
