//! Runs (or resumes) one run of [`graph_tests::graphs::ledger_graph`] on a sled store: the process the
//! effect crash tests kill. Prints `done <steps> <state hash>`, or `paused <effect key>` when the run
//! waits for a person to confirm an effect.
//!
//! `effects_child <store dir> <ledger file> <iterations>`; `EFFECT_CRASH=<point>:<iteration>` (point:
//! `before_call`, `after_call`, `after_journal`, `after_commit`) aborts the process there.

use graph_runtime::store::SledStore;
use graph_runtime::{Engine, PauseReason, RunStatus};
use graph_tests::graphs::{LedgerCrash, ledger_graph};
use graph_tests::{Trace, state_hash};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, ledger, iterations] = args.as_slice() else {
        eprintln!("usage: effects_child <store dir> <ledger file> <iterations>");
        std::process::exit(2);
    };
    let crash = std::env::var("EFFECT_CRASH").ok().map(|spec| {
        let (point, i) = spec.split_once(':').expect("EFFECT_CRASH=<point>:<iteration>");
        let i: u64 = i.parse().expect("an iteration");
        match point {
            "before_call" => LedgerCrash::BeforeCall(i),
            "after_call" => LedgerCrash::AfterCall(i),
            "after_journal" => LedgerCrash::AfterJournal(i),
            "after_commit" => LedgerCrash::AfterCommit(i),
            other => panic!("unknown crash point {other}"),
        }
    });
    let graph = ledger_graph(iterations.parse().expect("iterations"), ledger.into(), crash);
    let engine = Engine::builder(graph).store(SledStore::open(dir).expect("the store opens")).build();
    let out = engine.run_or_resume("l", Trace::default()).await.expect("the run does not fail");
    match out.status {
        RunStatus::Completed => println!("done {} {}", out.steps, state_hash(&out.state)),
        RunStatus::Paused(PauseReason::NeedsConfirmation { key, .. }) => println!("paused {key}"),
        other => panic!("unexpected status {other:?}"),
    }
}
