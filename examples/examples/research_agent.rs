//! A research agent that streams: plan → search ×N (forked, one branch per query) → summarize → judge,
//! looping back to `plan` until the notes cover enough of the topic or the rounds run out.
//!
//! The model and the search engine are deterministic stand-ins (no network): the same topic and run id
//! give the same path and the same summary every time. The run is streamed with `engine.stream`: one
//! line per step as it starts and commits, the searches' results, and the model's tokens as it writes
//! them. The graph and the stream's printer are in `graph_examples::research`.
//!
//! ```text
//! cargo run -p graph-examples --example research_agent [-- "<topic>"]
//! ```

use graph_examples::research::{self, GOOD_ENOUGH, MAX_ROUNDS};
use graph_runtime::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let topic = std::env::args().nth(1).unwrap_or_else(|| "durable agent workflows".to_owned());
    let engine = Engine::builder(research::agent::graph()).store(MemoryStore::new()).build();
    println!("researching \"{topic}\" until {GOOD_ENOUGH}% of it is covered, at most {MAX_ROUNDS} rounds");
    println!();
    let streamed = research::run_streamed(&engine, "research-1", &topic, &mut std::io::stdout()).await?;
    let state = &streamed.outcome.state;
    println!();
    println!("run {} {:?} after {} steps", streamed.outcome.run_id, streamed.outcome.status, streamed.steps);
    println!("verdict: {}", state.verdict.as_deref().unwrap_or("-"));
    println!("covered: {}", state.covered.iter().cloned().collect::<Vec<_>>().join(", "));
    println!("final summary:");
    for line in research::wrap(&state.summary, 100) {
        println!("  {line}");
    }
    Ok(())
}
