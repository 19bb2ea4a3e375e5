//! Map-reduce with forks: split → count ×N (one branch per document, each with its document as input,
//! each sleeping a random time) → reduce (the join of every branch's route) → END.
//!
//! The job runs twice. The map nodes finish in a different order each time, and the final state's hash
//! is the same: their partial counts merge in fork order at the step's barrier, never in completion
//! order. The graph and the driver are in `graph_examples::map_reduce`.
//!
//! ```text
//! cargo run -p graph-examples --example map_reduce
//! ```

use graph_examples::map_reduce::{self, sample_docs};
use graph_runtime::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let docs = sample_docs();
    let engine = Engine::builder(map_reduce::word_count::graph()).build();
    println!(
        "counting the words of {} documents: split -> count x{} (forked) -> reduce",
        docs.len(),
        docs.len()
    );
    let a = map_reduce::run(&engine, "word-count-a", docs.clone()).await?;
    let b = map_reduce::run(&engine, "word-count-b", docs).await?;
    let order = |o: &[usize]| o.iter().map(usize::to_string).collect::<Vec<_>>().join(" ");
    println!("run a: map nodes finished in the order {}", order(&a.finish_order));
    println!("run b: map nodes finished in the order {}", order(&b.finish_order));
    let merged: Vec<usize> = a.state.partials.iter().map(|p| p.doc).collect();
    println!("both: partial counts merged in the order {} (fork order)", order(&merged));
    println!();
    println!("{} words, {} distinct; the most frequent:", a.state.words, a.state.totals.len());
    for (word, n) in &a.state.top {
        println!("  {word:<10} {n}");
    }
    println!();
    println!("final state hash, run a: {}", a.state_hash);
    println!("final state hash, run b: {}", b.state_hash);
    if a.state_hash != b.state_hash || a.state != b.state {
        eprintln!("the two runs differ: timing reached the result");
        std::process::exit(1);
    }
    println!("equal: the branches' timing did not reach the result");
    Ok(())
}
