//! The process the composition tests start, stop and kill: drives one run of
//! [`graph_tests::graphs::nested_writer`] (three levels of subgraphs) on a store.
//!
//! `subgraph_child <store> <run id> <ledger> start` starts or continues the run and prints one
//! `interrupt <id> <payload JSON>` line per question it waits for, or `done <steps> <state hash>`;
//! `... answer <input JSON>` answers the one question and prints the same; `... upfront` runs the graph
//! whose question has its answer (`true`) from the start; `... batch` runs (or continues)
//! [`graph_tests::graphs::batch`] with three child runs instead, serving the store's timers (the parked
//! parent looks at its children every 100 ms) until it completes, and prints its state's log
//! (`log ...`) and `done`. The store is read as [`graph_tests::backends::open_spec`] reads it. With `CRASH_AT=<n>:<before|after>` the process aborts
//! just before or just after the `n`th commit it makes (counted from 1 over the parent's and the
//! subgraphs' runs alike); every acknowledged commit is printed as `ack <run> <step>`, a refused one
//! as `nack <run> <step>`, and the commit a kill comes before as `kill <run> <step>`.

use graph_runtime::{Engine, Error, RunOutcome};
use graph_tests::backends::open_spec;
use graph_tests::faults::{CrashAt, hooked};
use graph_tests::{Trace, graphs, state_hash};

fn report(out: Result<RunOutcome<Trace>, Error>) {
    match out {
        Ok(o) if o.is_completed() => println!("done {} {}", o.steps, state_hash(&o.state)),
        Ok(o) if o.interrupts().is_empty() => println!("status {:?}", o.status),
        Ok(o) => {
            for i in o.interrupts() {
                println!("interrupt {} {}", i.id, i.payload);
            }
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(3);
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (spec, run, ledger, command) = match args.as_slice() {
        [_, spec, run, ledger, command, ..] => (spec, run, ledger, command),
        _ => {
            eprintln!("usage: subgraph_child <store> <run id> <ledger> start|upfront|answer <json>");
            std::process::exit(2);
        }
    };
    let hooks = CrashAt::from_env(true).unwrap_or_else(|| CrashAt::never(true));
    let store = hooked(open_spec(spec).await.expect("the store opens"), hooks);
    if command == "batch" {
        use graph_runtime::child::ChildOptions;
        let docs =
            Engine::builder(graphs::doc(ledger.into(), std::time::Duration::from_millis(20), Vec::new()))
                .shared_store(store.clone())
                .build();
        let opts = ChildOptions::default().poll(std::time::Duration::from_millis(100));
        let engine = Engine::builder(graphs::batch(docs, 3, opts, ledger.into())).shared_store(store).build();
        let shutdown = graph_runtime::CancellationToken::new();
        tokio::spawn({
            let (engine, shutdown) = (engine.clone(), shutdown.clone());
            async move { engine.run_timers(shutdown).await }
        });
        // The timer service may have woken the parked parent first: then it drives it.
        match engine.run_or_resume(run, Trace::default()).await {
            Ok(_) | Err(Error::AlreadyRunning { .. }) => {}
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(3);
            }
        }
        // Generous: the batch takes a few hundred milliseconds; a run nobody drives fails the test.
        for _ in 0..6000 {
            let out = engine.outcome(run).await.expect("readable").expect("the run exists");
            if out.is_completed() {
                println!("log {}", out.state.log.join(" "));
                return report(Ok(out));
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let info = engine.store().run_info(run).await.expect("readable");
        eprintln!("the batch did not complete within 60 s: {info:?}");
        std::process::exit(4);
    }
    let upfront = (command == "upfront").then_some(true);
    let graph = graphs::nested_writer(ledger.into(), upfront);
    let engine = Engine::builder(graph).shared_store(store).build();
    match (command.as_str(), &args[5..]) {
        ("start" | "upfront", []) => report(engine.run_or_resume(run, Trace::default()).await),
        ("answer", [input]) => {
            let input: serde_json::Value = serde_json::from_str(input).expect("the input is JSON");
            report(engine.resume_with_input(run, &input).await)
        }
        _ => {
            eprintln!("unknown command");
            std::process::exit(2);
        }
    }
}
