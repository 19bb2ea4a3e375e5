//! Composition, told in one process on a sled store: a writer whose research subgraph asks a person
//! (the question deep in the subgraph stops the writer; a second engine, as another process would,
//! answers it and the subgraph resumes in place), then a batch that fans out child runs.
//!
//! ```text
//! cargo run -p graph-examples --example composition
//! ```
//!
//! The graphs are in `graph_examples::composition`.

use std::sync::Arc;
use std::time::Duration;

use graph_examples::composition::{Article, Batch, scout, translate, translations, writer};
use graph_runtime::prelude::*;
use graph_runtime::store::Store;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("graph-runtime-composition-{}", std::process::id()));
    let store: Arc<dyn Store> = Arc::new(SledStore::open(&dir)?);

    let engine = Engine::builder(writer::graph()).shared_store(store.clone()).build();
    let input = Article { subject: "durable workflows".into(), ..Article::default() };
    let out = engine.run("article-1", input).await?;
    let asked = &out.interrupts()[0];
    println!("the writer waits inside its `{}` subgraph:", asked.node);
    println!("  question {}", asked.id);
    println!("  {}", asked.payload);
    drop(engine);

    // Another engine on the same store (another process would do the same) answers.
    let engine = Engine::builder(writer::graph()).shared_store(store.clone()).build();
    let out = engine.resume_with_input("article-1", &1).await?;
    println!("answered 1: {}", out.state.text);
    for line in &out.state.log {
        println!("  {line}");
    }

    let jobs = Engine::builder(translate::graph()).shared_store(store.clone()).build();
    let batch = Engine::builder(translations(jobs)).shared_store(store.clone()).build();
    let input = Batch {
        text: "the run resumed".into(),
        languages: ["fr", "de", "it", "es"].map(String::from).to_vec(),
        ..Batch::default()
    };
    let first = batch.run("batch-1", input).await?;
    println!("the batch fanned out {} child runs; its first call returned {}", 4, first.status.as_str());
    let done = loop {
        match batch.outcome("batch-1").await? {
            Some(out) if out.is_completed() => break out,
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    };
    for line in &done.state.results {
        println!("  {line}");
    }

    let _ = scout::graph(); // the subgraph, registered in graphctl-examples beside the writer
    let store = dir.display();
    println!("\nsee the nested steps and the child runs:");
    println!("  cargo run -p graphctl-examples -- --store {store} history article-1");
    println!("  cargo run -p graphctl-examples -- --store {store} history batch-1");
    println!("  cargo run -p graphctl-examples -- --store {store} runs");
    Ok(())
}
