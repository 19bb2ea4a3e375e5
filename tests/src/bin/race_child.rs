//! A process that drives the same runs as another one on a shared store: `race_child <store> <runs>
//! <steps>` continues (or starts) runs `r0`…`r{runs-1}` of [`graph_tests::crash_graph`] concurrently
//! until each is completed, taking the typed outcomes of losing a race to the other process
//! (`VersionConflict`, `Superseded`, `AlreadyRunning`, `RunExists`) as "look again". Prints `done <run>
//! <state hash>` per run; any other error is printed as `error <run>: <error>` and the process exits 1.

use std::time::Duration;

use graph_runtime::{Engine, Error};
use graph_tests::backends::{SpecStore, open_spec};
use graph_tests::{Trace, crash_graph, state_hash};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, spec, runs, steps] = args.as_slice() else {
        eprintln!("usage: race_child <store> <runs> <steps>");
        std::process::exit(2);
    };
    let (runs, steps): (usize, u64) = (runs.parse().expect("runs"), steps.parse().expect("steps"));
    let engine = match open_spec(spec).await.expect("the store opens") {
        SpecStore::Sled(s) => Engine::builder(crash_graph(steps)).store(s).build(),
        #[cfg(feature = "sqlite")]
        SpecStore::Sqlite(s) => Engine::builder(crash_graph(steps)).store(s).build(),
        #[cfg(feature = "postgres")]
        SpecStore::Postgres(s) => Engine::builder(crash_graph(steps)).store(s).build(),
    };
    let mut tasks = Vec::new();
    for r in 0..runs {
        let engine = engine.clone();
        tasks.push(tokio::spawn(async move {
            let run = format!("r{r}");
            loop {
                match engine.run_or_resume(&run, Trace::default()).await {
                    Ok(out) if out.is_completed() => {
                        println!("done {run} {}", state_hash(&out.state));
                        return true;
                    }
                    Ok(_)
                    | Err(
                        Error::VersionConflict { .. }
                        | Error::Superseded { .. }
                        | Error::AlreadyRunning { .. }
                        | Error::RunExists { .. },
                    ) => tokio::time::sleep(Duration::from_millis(1)).await,
                    Err(other) => {
                        println!("error {run}: {other}");
                        return false;
                    }
                }
            }
        }));
    }
    let mut ok = true;
    for t in tasks {
        ok &= t.await.expect("the driver does not panic");
    }
    std::process::exit(if ok { 0 } else { 1 });
}
