//! The process the crash tests kill: starts or resumes one run of [`graph_tests::crash_graph`] on a
//! store and prints the final state's hash.
//!
//! `crash_child <store> <run id> <iterations>`, the store as [`graph_tests::backends::open_spec`] reads
//! it (`sled:<folder>`, `sqlite:<file>`, or a sled folder's path) (with `CRASH_GRAPH=join`, the rounds of
//! [`graph_tests::graphs::wait_for_join`] instead); with `CRASH_AT=<step>:<before|during|after>` the
//! process aborts just before, in the middle of, or just after the commit of that step. Every commit the
//! store acknowledged is printed as `ack <step>` the moment it is, so the test can check that no
//! acknowledged commit is lost by a kill.

use std::sync::Arc;
use std::time::Duration;

use graph_runtime::node::BoxFuture;
use graph_runtime::store::Checkpoint;
use graph_runtime::{CommitOutcome, Engine, Store, StoreError};
use graph_tests::backends::{SpecStore, open_spec};
use graph_tests::hooked::{Hooked, Hooks};
use graph_tests::{Trace, crash_graph, random_delay, state_hash};

/// Reports acknowledged commits and aborts the process at one commit point.
struct Crashing {
    step: u64,
    point: String,
}

impl Hooks for Crashing {
    fn save<'a>(
        &'a self,
        cp: &'a Checkpoint,
        call: BoxFuture<'a, Result<CommitOutcome, StoreError>>,
    ) -> BoxFuture<'a, Result<CommitOutcome, StoreError>> {
        Box::pin(async move {
            let armed = cp.step == self.step;
            if armed && self.point == "before" {
                std::process::abort();
            }
            if armed && self.point == "during" {
                // Abort from another thread while this one is inside the commit or its sync.
                let delay = random_delay(Duration::from_micros(3000), cp.step);
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    std::process::abort();
                });
            }
            let out = call.await?;
            if matches!(out, CommitOutcome::Committed { .. } | CommitOutcome::AlreadyCommitted { .. }) {
                println!("ack {}", cp.step); // stdout is line-buffered: this line is out before the next commit
            }
            if armed && self.point == "after" {
                std::process::abort();
            }
            Ok(out)
        })
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, spec, run, iterations] = args.as_slice() else {
        eprintln!("usage: crash_child <store> <run id> <iterations>");
        std::process::exit(2);
    };
    let iterations: u64 = iterations.parse().expect("iterations is a number");
    let opened = open_spec(spec).await.expect("the store opens");
    let (step, point) = match std::env::var("CRASH_AT") {
        Ok(spec) => {
            let (step, point) = spec.split_once(':').expect("CRASH_AT=<step>:<point>");
            (step.parse().expect("a step"), point.to_owned())
        }
        Err(_) => (u64::MAX, String::new()),
    };
    let hooks = Crashing { step, point };
    let store: Arc<dyn Store> = match opened {
        SpecStore::Sled(inner) => Arc::new(Hooked { inner, hooks }),
        #[cfg(feature = "sqlite")]
        SpecStore::Sqlite(inner) => Arc::new(Hooked { inner, hooks }),
        #[cfg(feature = "postgres")]
        SpecStore::Postgres(inner) => Arc::new(Hooked { inner, hooks }),
    };
    let graph = match std::env::var("CRASH_GRAPH").as_deref() {
        Ok("join") => graph_tests::graphs::wait_for_join(iterations, false),
        _ => crash_graph(iterations),
    };
    let engine = Engine::builder(graph).shared_store(store.clone()).build();
    let out = if store.run_info(run).await.expect("store readable").is_some() {
        engine.resume(run).await
    } else {
        engine.run(run, Trace::default()).await
    }
    .expect("the run completes");
    println!("done {} {}", out.steps, state_hash(&out.state));
}
