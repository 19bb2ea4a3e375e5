//! A pull-request review workflow: plan → (style ∥ security) → summarize → revise ↺ | END, written with
//! the macros: `#[reducer]` derives the state's delta and merge, `#[graph]` + `#[node]` declare the nodes,
//! their edges and policies, checked at compile time (a typo in an edge or an undeclared route does not
//! build).
//!
//! The two reviewers run in parallel and their findings merge in edge order, whatever finishes first;
//! `summarize` loops back to `revise` until the review converges. Model calls are simulated with the
//! run's deterministic random draws (`ctx.random_range`), so every run of the same PR prints the same
//! result.
//!
//! The run is streamed (`engine.stream`): each step, what each node does and how long it took print as
//! they happen. `GRAPH_LOG=json` also writes the engine's `tracing` events as JSON lines on stderr.
//!
//! The run is durable: every step is committed to a sled store in `./data` (or `--data <dir>`) before
//! the next starts. Interrupt it (Ctrl-C, or kill it) and run the same command again: it resumes from
//! the last committed step instead of restarting. Once complete, running it again prints the stored
//! result without executing anything; `--fresh` starts over. `review_builder.rs` is the same graph
//! built by hand.
//!
//! ```text
//! cargo run -p graph-examples --example review [-- <pr-number>] [--data <dir>] [--fresh]
//! ```

use graph_examples::review::{Review, review};
use graph_runtime::prelude::*;
use graph_runtime::{StreamEvent, StreamModes, StreamOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut pr = "3".to_owned();
    let mut data = std::path::PathBuf::from("data");
    let mut fresh = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--data" => data = args.next().ok_or("--data needs a directory")?.into(),
            "--fresh" => fresh = true,
            other => pr = other.to_owned(),
        }
    }
    let run_id = format!("review-pr-{pr}");
    let dir = data.join("review");
    if fresh && dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    if std::env::var("GRAPH_LOG").as_deref() == Ok("json") {
        tracing_subscriber::fmt().json().with_writer(std::io::stderr).init();
    }
    let engine = Engine::builder(review::graph()).store(SledStore::open(&dir)?).build();

    // Ctrl-C cancels the run; its committed steps stay, and the next invocation resumes.
    let canceller = engine.clone();
    let cancel_id = run_id.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            canceller.cancel(&cancel_id);
        }
    });

    // Every step, node and model call, as it happens.
    let options = StreamOptions::default().modes(StreamModes::DEBUG | StreamModes::CUSTOM);
    let input = Review { pr: pr.clone(), ..Review::default() };
    let mut events = match engine.outcome(&run_id).await? {
        None => {
            println!("run {run_id}: reviewing PR #{pr} (store: {})", dir.display());
            engine.stream(&run_id, input, options)
        }
        Some(o) if o.is_completed() => {
            println!("run {run_id} already completed; its stored result (use --fresh to start over):");
            engine.stream_resume(&run_id, options)
        }
        Some(o) => {
            println!("run {run_id}: resuming step {} (status was {:?})", o.steps, o.status);
            engine.stream_resume(&run_id, options)
        }
    };
    let mut finished = None;
    while let Some(event) = events.next().await {
        match event {
            StreamEvent::StepStarted { step, nodes } => println!("step {step:>2}  {}", nodes.join(" + ")),
            StreamEvent::Custom { node, payload, .. } => {
                println!("         {node:<10} {}", payload.as_str().unwrap_or_default())
            }
            StreamEvent::NodeFinished { node, duration, outcome, attempt, .. } => {
                let retry = if attempt > 1 { format!(" (attempt {attempt})") } else { String::new() };
                println!("         {node:<10} {outcome:?} in {} ms{retry}", duration.as_millis())
            }
            StreamEvent::StepCommitted { step, .. } => println!("         committed checkpoint {step}"),
            StreamEvent::Finished(out) => finished = Some(out),
            _ => {}
        }
    }
    let out = match finished.expect("a stream ends with Finished") {
        Ok(out) => out,
        Err(graph_runtime::Error::Cancelled { step, .. }) => {
            println!("interrupted during step {step}; run the same command again to resume");
            std::process::exit(130);
        }
        Err(e) => return Err(e.into()),
    };
    println!("run {} {:?} after {} steps", out.run_id, out.status, out.steps);
    println!("verdict:   {}", out.state.verdict.as_deref().unwrap_or("-"));
    println!("findings:  {}", out.state.findings.len());
    for f in &out.state.findings {
        println!("  - {f}");
    }
    println!("labels:    {:?}", out.state.labels);
    println!("revisions: {}", out.state.revisions);
    println!("tokens:    {}", out.state.tokens);
    println!();
    println!("the run is stored in {} (sled); look at it with graphctl:", dir.display());
    let store = dir.display();
    for command in
        [format!("show {run_id}"), format!("history {run_id}"), format!("verify {run_id}"), "runs".to_owned()]
    {
        println!("  cargo run -p graphctl-examples -- --store {store} {command}");
    }
    println!("or in a browser, at http://127.0.0.1:7070/ (read-only; docs/inspector.md):");
    println!("  cargo run -p graphctl-examples -- --store {store} serve");
    Ok(())
}
