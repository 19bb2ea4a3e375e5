//! A worker process of the schedule crash test (`tests/tests/stores/pool_time.rs`): runs a
//! [`graph_runtime::worker::Worker`] over [`graph_tests::graphs::schedule_tick`] on a server store, which
//! fires the store's schedules of that graph and drives the runs they start, until its stdin closes or
//! it is killed.
//!
//! `schedule_child <url> <worker id>`, the URL `postgres://…` or `mysql://…`.

#[cfg(not(any(feature = "postgres", feature = "mysql")))]
fn main() {
    eprintln!("schedule_child needs feature postgres or mysql");
    std::process::exit(2);
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
#[tokio::main]
async fn main() {
    use std::time::Duration;

    use graph_runtime::CancellationToken;
    use graph_runtime::worker::{LeaseStore, Worker};

    async fn work<L: LeaseStore>(store: L, id: &str, shutdown: CancellationToken) {
        let worker = Worker::builder(graph_tests::graphs::schedule_tick(Duration::from_millis(150)), store)
            .id(id)
            .poll(Duration::from_millis(20))
            .lease(Duration::from_millis(600))
            .build();
        worker.run(shutdown).await.expect("the worker runs");
    }

    let args: Vec<String> = std::env::args().collect();
    let [_, url, id] = args.as_slice() else {
        eprintln!("usage: schedule_child <url> <worker id>");
        std::process::exit(2);
    };
    let shutdown = CancellationToken::new();
    let closing = shutdown.clone();
    std::thread::spawn(move || {
        let mut sink = String::new();
        while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {}
        closing.cancel();
    });
    match url.split("://").next() {
        #[cfg(feature = "postgres")]
        Some("postgres" | "postgresql") => {
            let store = graph_runtime::store::PostgresStore::connect(url).await.expect("PostgreSQL");
            work(store, id, shutdown).await;
        }
        #[cfg(feature = "mysql")]
        Some("mysql" | "mariadb") => {
            let store = graph_runtime::store::MySqlStore::connect(url).await.expect("MySQL");
            work(store, id, shutdown).await;
        }
        _ => {
            eprintln!("unknown store URL {url}");
            std::process::exit(2);
        }
    }
}
