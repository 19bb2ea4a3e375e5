//! The process of the device fault tests (`tests/tests/faults/faults_device.rs`) and of the damage tests'
//! templates: runs several runs of [`graph_tests::crash_graph`] at once on a store, until they complete
//! or the store fails; after a failure it drops everything, waits for the parent to repair the file
//! system, reopens the store in this same process and resumes every run.
//!
//! `fault_child <store> <runs> <iterations>`, where `<store>` is a sled store's folder (opened with
//! small log segments, [`small_options`]) or `sqlite:<database file>` (a SQLite store with its default
//! options). What it prints on stdout, one line each:
//!
//! - `ack <run> <step>` for every acknowledged commit, the moment it is acknowledged;
//!   `late-ack <run> <step>` for one submitted after the store had already returned an error (a
//!   fail-stop violation for sled; SQLite's store is not fail-stop);
//! - `no-fault` after the `done` lines when every run completed without a store error (then it exits);
//! - `fault <Display of the first store error>`; `open-failed` too when `open` was what failed;
//! - `refused` when, after the failure, `resume` on the same store handle was refused with
//!   `StoreError::FailStopped` (else `not-refused <what happened>`);
//! - `waiting`: engine and store are dropped; it reads one line from stdin before going on;
//! - `reopened`, then `latest <run> <step|none>` for each run as the reopened store has it;
//! - `done <run> <steps> <state hash>` for each run resumed to completion.
//!
//! Exit status 3: the reopen failed (`reopen-error <Display>`); 4: a resume failed
//! (`resume-error <run> <Display>`).

use std::sync::Arc;

use graph_runtime::store::SledStore;
use graph_runtime::{Engine, Error, Store, StoreError};
use graph_tests::faults::{acking, run_id, say, small_options};
use graph_tests::{Trace, crash_graph, state_hash};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, store, runs, iterations] = args.as_slice() else {
        eprintln!("usage: fault_child <store dir | sqlite:<file>> <runs> <iterations>");
        std::process::exit(2);
    };
    let runs: usize = runs.parse().expect("runs is a number");
    let iterations: u64 = iterations.parse().expect("iterations is a number");
    let ids: Vec<String> = (0..runs).map(run_id).collect();
    match store.strip_prefix("sqlite:") {
        #[cfg(feature = "sqlite")]
        Some(file) => lives(|| graph_runtime::store::SqliteStore::open(file), &ids, iterations).await,
        #[cfg(not(feature = "sqlite"))]
        Some(_) => {
            eprintln!("fault_child: graph-tests was built without `sqlite`");
            std::process::exit(2);
        }
        None => lives(|| SledStore::open_with(store, small_options()), &ids, iterations).await,
    }
}

/// The child's two lives: the runs until they complete or the store fails, then, after the parent's
/// repair, the store opened again and every run resumed.
async fn lives<St, F>(open: F, ids: &[String], iterations: u64)
where
    St: Store + Clone,
    F: Fn() -> Result<St, StoreError>,
{
    match open() {
        Ok(store) => {
            if !first_life(store, ids, iterations).await {
                say("no-fault");
                return;
            }
        }
        Err(e) => {
            say(format_args!("fault {e}"));
            say("open-failed");
        }
    }
    // Everything of the failed store is dropped: its writer (sled's commit thread, SQLite's writer
    // thread and connections) ended with its last group, and the engine's tasks have returned.
    say("waiting");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).expect("stdin");

    let store = match open() {
        Ok(s) => s,
        Err(e) => {
            say(format_args!("reopen-error {e}"));
            std::process::exit(3);
        }
    };
    say("reopened");
    let engine = Engine::builder(crash_graph(iterations)).store(store.clone()).build();
    let mut tasks = Vec::new();
    for id in ids {
        let info = store.run_info(id).await.unwrap_or_else(|e| {
            say(format_args!("resume-error {id} {e}"));
            std::process::exit(4);
        });
        match &info {
            Some(i) => say(format_args!("latest {id} {}", i.latest_step)),
            None => say(format_args!("latest {id} none")),
        }
        let (engine, id) = (engine.clone(), id.clone());
        tasks.push(tokio::spawn(async move {
            let out = match info {
                Some(_) => engine.resume(&id).await,
                None => engine.run(&id, Trace::default()).await,
            };
            (id, out)
        }));
    }
    let mut failed = false;
    for t in tasks {
        let (id, out) = t.await.expect("the run task does not panic");
        match out {
            Ok(o) if o.is_completed() => say(format_args!("done {id} {} {}", o.steps, state_hash(&o.state))),
            Ok(o) => {
                say(format_args!("resume-error {id} stopped with status {:?}", o.status));
                failed = true;
            }
            Err(e) => {
                say(format_args!("resume-error {id} {e}"));
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(4);
    }
}

/// Runs every run at once until all complete or fail. Returns whether the store failed; if it did, the
/// `fault` and `refused` lines are printed, else the `done` lines.
async fn first_life<St: Store>(store: St, ids: &[String], iterations: u64) -> bool {
    let store = acking(store);
    let log = store.hooks.log.clone();
    let engine = Engine::builder(crash_graph(iterations)).shared_store(Arc::new(store)).build();
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (engine, id) = (engine.clone(), id.clone());
            tokio::spawn(async move { (engine.run(&id, Trace::default()).await, id) })
        })
        .collect();
    let (mut run_errors, mut done) = (Vec::new(), Vec::new());
    for t in tasks {
        match t.await.expect("the run task does not panic") {
            (Ok(o), id) => done.push(format!("done {id} {} {}", o.steps, state_hash(&o.state))),
            (Err(e), _) => run_errors.push(e.to_string()),
        }
    }
    let first = log.first_error.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let Some(first) = first.or_else(|| run_errors.first().cloned()) else {
        done.iter().for_each(say);
        return false;
    };
    say(format_args!("fault {}", first.replace('\n', " ")));
    // A fail-stop store must refuse to go on, and run no node: a resume is refused at its first read.
    match engine.resume(&ids[0]).await {
        Err(Error::Store(StoreError::FailStopped { .. })) => say("refused"),
        Err(e) => say(format_args!("not-refused error {}", e.to_string().replace('\n', " "))),
        Ok(o) => say(format_args!("not-refused resumed to step {}", o.steps)),
    }
    true
}
