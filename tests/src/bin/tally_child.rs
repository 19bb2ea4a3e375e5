//! Runs (or resumes) [`graph_tests::graphs::tally_graph`], whose state holds a `HashMap`, on a sled store
//! and prints every committed checkpoint's step, idempotency key and state hash, then `done <final state
//! hash>`. With `ABORT_AT=<step>` the process aborts when the node starts after that step's commit.
//! A test runs it in several processes (each with its own hash-map order) and compares.
//!
//! `tally_child <store dir> <steps>`

use graph_runtime::store::SledStore;
use graph_runtime::{Engine, Store};
use graph_tests::graphs::{Tally, tally_graph_aborting};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, steps] = args.as_slice() else {
        eprintln!("usage: tally_child <store dir> <steps>");
        std::process::exit(2);
    };
    let steps: u64 = steps.parse().expect("a number of steps");
    let abort_at: Option<u64> = std::env::var("ABORT_AT").ok().map(|s| s.parse().expect("a step"));
    let store = SledStore::open(dir).expect("the store opens");
    let graph = tally_graph_aborting(steps, abort_at);
    let engine = Engine::builder(graph).store(store.clone()).build();
    let out = engine.run_or_resume("t", Tally::default()).await.expect("the run completes");
    for meta in store.history("t").await.unwrap() {
        let cp = store.load_checkpoint("t", meta.step).await.unwrap().unwrap();
        println!("cp {} {} {}", cp.step, cp.idempotency_key, cp.state_hash);
    }
    println!("done {}", graph_tests::state_hash_canonical(&out.state));
}
