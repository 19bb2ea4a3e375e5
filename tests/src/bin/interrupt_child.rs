//! The process the interrupt tests start and stop: runs [`graph_tests::graphs::approval`] on a sled store
//! until it waits for input, prints what it waits for, and exits; a later process answers.
//!
//! `interrupt_child <store dir> <run id> <ledger> <approvers> start` prints one `interrupt <id>
//! <payload JSON>` line per interrupt (or `done <state hash>`); `... answer <id|-> <input JSON>` answers
//! one interrupt (`-`: the only one) and prints the same, or `rejected <error>` for an input the node
//! cannot read.

use graph_runtime::store::SledStore;
use graph_runtime::{Engine, Error, RunOutcome};
use graph_tests::{Trace, graphs, state_hash};

fn report(out: Result<RunOutcome<Trace>, Error>) {
    match out {
        Ok(o) if o.is_completed() => println!("done {}", state_hash(&o.state)),
        Ok(o) => {
            for i in o.interrupts() {
                println!("interrupt {} {}", i.id, i.payload);
            }
        }
        Err(e @ Error::ResumeInput { .. }) => println!("rejected {e}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(3);
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, run, ledger, approvers, command) = match args.as_slice() {
        [_, dir, run, ledger, approvers, command, ..] => (dir, run, ledger, approvers, command),
        _ => {
            eprintln!(
                "usage: interrupt_child <store dir> <run id> <ledger> <approvers> start|answer <id|-> <json>"
            );
            std::process::exit(2);
        }
    };
    let approvers: usize = approvers.parse().expect("approvers is a number");
    let store = SledStore::open(dir).expect("the store opens");
    let engine = Engine::builder(graphs::approval(approvers, ledger.into(), None)).store(store).build();
    match (command.as_str(), &args[6..]) {
        ("start", []) => report(engine.run_or_resume(run, Trace::default()).await),
        ("answer", [id, input]) => {
            let input: serde_json::Value = serde_json::from_str(input).expect("the input is JSON");
            let out = if id == "-" {
                engine.resume_with_input(run, &input).await
            } else {
                engine.resume_with_inputs(run, [(id.clone(), input)]).await
            };
            report(out)
        }
        _ => {
            eprintln!("unknown command");
            std::process::exit(2);
        }
    }
}
