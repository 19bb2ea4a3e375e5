//! Human approval across processes: a run stops at `ctx.interrupt(&question)?`, the process exits, and
//! a later process answers with `engine.resume_with_input(run, &bool)`.
//!
//! ```text
//! cargo run -p graph-examples --example approval                         # the whole story, one process
//! cargo run -p graph-examples --example approval -- start                # file a request; stops at the question
//! cargo run -p graph-examples --example approval -- approve <run> yes|no # answer it, in a new process
//! ```
//!
//! Runs are stored in `<temp dir>/graph-runtime-approval`, shared by every invocation. The graph is in
//! `graph_examples::approval`.

use std::path::Path;

use graph_examples::approval::{self, Expense, Waiting};
use graph_runtime::prelude::*;

const USAGE: &str = "usage: approval [start | approve <run> yes|no]";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let store = approval::default_store();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => story(&store).await,
        ["start"] => {
            let waiting = approval::start(&approval::open(&store)?, approval::sample_request()).await?;
            print_waiting(&waiting, &store);
            Ok(())
        }
        ["approve", run, answer] => {
            let yes = match *answer {
                "yes" => true,
                "no" => false,
                other => {
                    eprintln!("the answer is `yes` or `no`, not `{other}`\n{USAGE}");
                    std::process::exit(2);
                }
            };
            let engine = approval::open(&store)?;
            match approval::decide(&engine, run, yes).await {
                Ok(out) => print_outcome(&out),
                Err(
                    e @ (graph_runtime::Error::ResumeInput { .. } | graph_runtime::Error::RunNotFound { .. }),
                ) => {
                    eprintln!("{e}");
                    std::process::exit(1);
                }
                Err(e) => return Err(e.into()),
            }
            Ok(())
        }
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    }
}

/// Both halves in one process, with the engine dropped in between as if the process had exited.
async fn story(store: &Path) -> Result<(), Box<dyn std::error::Error>> {
    println!("1. start: file an expense request; the run stops at the approver's question");
    let waiting = approval::start(&approval::open(store)?, approval::sample_request()).await?;
    print_waiting(&waiting, store);
    // The engine is gone: everything the answer needs is in the store.
    println!();
    println!("(the engine is dropped here, as if the process had exited: the answer needs only the store)");
    println!("2. approve {} yes (as the command above would, from a new process):", waiting.run_id);
    let out = approval::decide(&approval::open(store)?, &waiting.run_id, true).await?;
    print_outcome(&out);
    Ok(())
}

fn print_waiting(w: &Waiting, store: &Path) {
    println!("run {} waits for input", w.run_id);
    println!("  question:     {}", w.question);
    println!("  asked by:     node `{}`, interrupt id {}", w.node, w.interrupt_id);
    println!("  store:        {}", store.display());
    println!("next, from any process:");
    println!("  cargo run -p graph-examples --example approval -- approve {} yes", w.run_id);
    println!("  cargo run -p graph-examples --example approval -- approve {} no", w.run_id);
    println!("  cargo run -p graphctl-examples -- show {} --store {}", w.run_id, store.display());
}

fn print_outcome(out: &RunOutcome<Expense>) {
    println!("run {} {:?} after {} steps", out.run_id, out.status, out.steps);
    let decision = match out.state.approved {
        Some(true) => "approved",
        Some(false) => "declined",
        None => "undecided",
    };
    println!("  decision: {decision}");
    if let Some(booking) = &out.state.booking {
        println!("  booking:  {booking}");
    }
    for line in &out.state.log {
        println!("  - {line}");
    }
}
