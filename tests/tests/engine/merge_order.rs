//! Merge order is edge order, never completion order.

use std::time::Duration;

use graph_runtime::{END, Engine, EngineOptions, Graph, Route};
use graph_tests::graphs::logs;
use graph_tests::{Trace, TraceDelta};

/// start → b0..b4; branch i sleeps (5 - i) ms so completion order is the reverse of edge order.
fn five_way() -> Graph<Trace> {
    let mut b = Graph::<Trace>::builder("five").node("start", logs("start")).entry("start");
    for i in 0..5u64 {
        let name = format!("b{i}");
        b = b
            .node(name.clone(), move |_s, _ctx| {
                Box::pin(async move {
                    tokio::time::sleep(Duration::from_millis(5 - i)).await;
                    Ok((TraceDelta::default().log(format!("b{i}")), Route::Declared))
                })
            })
            .edge("start", name.clone())
            .edge(name, END);
    }
    b.build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn five_way_fan_out_merges_in_edge_order_for_any_concurrency() {
    for workers in [1, 2, 3, 5, 8] {
        let engine = Engine::builder(five_way())
            .options(EngineOptions::default().max_concurrent_nodes(workers))
            .build();
        let out = engine.run("five", Trace::default()).await.unwrap();
        assert_eq!(out.state.log, ["start", "b0", "b1", "b2", "b3", "b4"], "workers = {workers}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_way_fan_out_merges_in_edge_order_on_real_threads() {
    for _ in 0..20 {
        let engine = Engine::builder(five_way()).build();
        let out = engine.run("five", Trace::default()).await.unwrap();
        assert_eq!(out.state.log, ["start", "b0", "b1", "b2", "b3", "b4"]);
    }
}

#[tokio::test]
async fn a_chain_applies_in_causal_order_and_downstream_sees_upstream() {
    let g = Graph::<Trace>::builder("chain")
        .node("a", |_s, _c| {
            Box::pin(async { Ok((TraceDelta::default().log("a").last("from-a"), Route::Declared)) })
        })
        .node("b", |s, _c| {
            Box::pin(async move {
                // B reads what A wrote: the step's state includes every earlier step's deltas.
                let seen = s.last.clone().unwrap_or_default();
                Ok((TraceDelta::default().log(format!("b saw {seen}")).last("from-b"), Route::Declared))
            })
        })
        .node("c", |s, _c| {
            Box::pin(async move {
                let seen = s.log.join(",");
                Ok((TraceDelta::default().log(format!("c saw {seen}")), Route::Declared))
            })
        })
        .entry("a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
        .build()
        .unwrap();
    let out = Engine::builder(g).build().run("chain", Trace::default()).await.unwrap();
    assert_eq!(out.state.log, ["a", "b saw from-a", "c saw a,b saw from-a"]);
    assert_eq!(out.state.last.as_deref(), Some("from-b"));
    assert_eq!(out.steps, 3);
}
