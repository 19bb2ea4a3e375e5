//! The composition example: the writer's nested question answered by a second engine on the same sled
//! store, and the batch of child runs with one failing child.

use std::sync::Arc;
use std::time::Duration;

use graph_examples::composition::{Article, Batch, translate, translations, writer};
use graph_runtime::prelude::*;
use graph_runtime::store::Store;

#[tokio::test]
async fn the_writer_resumes_its_research_subgraph_in_place_from_another_engine() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SledStore::open(dir.path()).unwrap());
    let first = Engine::builder(writer::graph()).shared_store(store.clone()).build();
    let out = first.run("a", Article { subject: "sagas".into(), ..Article::default() }).await.unwrap();
    let asked = out.interrupts();
    assert_eq!(asked.len(), 1);
    assert_eq!((asked[0].node.as_str(), asked[0].id.matches('>').count()), ("research", 1));
    assert_eq!(asked[0].payload["candidates"][1], "paper on sagas");
    drop(first);
    let second = Engine::builder(writer::graph()).shared_store(store.clone()).build();
    // An index the subgraph cannot use fails its node, not the answer's type: a string is refused first.
    let refused = second.resume_with_input("a", &"the paper").await.unwrap_err();
    assert!(matches!(refused, graph_runtime::Error::ResumeInput { .. }), "{refused}");
    let out = second.resume_with_input("a", &1).await.unwrap();
    assert!(out.is_completed());
    assert_eq!(out.state.text, "sagas: an article citing the paper on sagas.");
    assert_eq!(out.state.log, ["outline of sagas", "researched 3 sources", "drafted"]);
}

#[tokio::test]
async fn the_batch_collects_its_children_and_reports_the_one_that_failed() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SledStore::open(dir.path()).unwrap());
    let jobs = Engine::builder(translate::graph()).shared_store(store.clone()).build();
    let batch = Engine::builder(translations(jobs)).shared_store(store.clone()).build();
    let input = Batch { text: "hi".into(), languages: vec!["fr".into(), "it".into()], ..Batch::default() };
    batch.run("b", input).await.unwrap();
    let done = loop {
        match batch.outcome("b").await.unwrap() {
            Some(out) if out.is_completed() => break out,
            _ => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    };
    assert_eq!(done.state.results[0], "fr: bonjour: hi");
    assert!(done.state.results[1].starts_with("it: failed ("), "{:?}", done.state.results);
    assert!(done.state.results[1].contains("no translator for `it`"), "{:?}", done.state.results);
    // The failed child keeps its status: the parent's close does not cancel a child that ended.
    let path = graph_runtime::keys::PathId::entry("fan");
    let it = graph_runtime::child::spawned_run_id("b", "fan", 0, path.as_str(), "it");
    let it = store.run_info(&it).await.unwrap().unwrap();
    assert_eq!(it.status.as_str(), "failed");
}
