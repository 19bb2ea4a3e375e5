//! Joins: several plain routes into one node in a step make one activation that sees every delta.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use graph_runtime::{END, Engine, Graph, Route};
use graph_tests::graphs::{fork, logs};
use graph_tests::{Trace, TraceDelta};

#[tokio::test]
async fn a_join_with_k_predecessors_runs_once_and_sees_all_k_deltas() {
    for k in [2usize, 4, 7] {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let mut b = Graph::<Trace>::builder("join").node("split", logs("split")).entry("split");
        for i in 0..k {
            let name = format!("p{i}");
            b = b
                .node(name.clone(), move |_s, _c| {
                    Box::pin(async move {
                        Ok((TraceDelta::default().log(format!("p{i}")).count(1), Route::Declared))
                    })
                })
                .edge("split", name.clone())
                .edge(name, "join");
        }
        let g = b
            .node("join", move |s, _c| {
                counted.fetch_add(1, Ordering::SeqCst);
                let seen = s.count;
                Box::pin(async move {
                    Ok((TraceDelta::default().log(format!("join saw {seen}")), Route::Declared))
                })
            })
            .edge("join", END)
            .build()
            .unwrap();
        let out = Engine::builder(g).build().run("j", Trace::default()).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 1, "k = {k}");
        assert_eq!(out.state.log.last().unwrap(), &format!("join saw {k}"));
        assert_eq!(out.state.log.len(), k + 2);
        assert_eq!(out.steps, 3, "split, parents, join");
    }
}

#[tokio::test]
async fn twenty_way_fan_out_fifty_iterations_never_ends_early() {
    let joins = Arc::new(AtomicUsize::new(0));
    let counted = joins.clone();
    let mut b = Graph::<Trace>::builder("wide-loop").node("hub", logs("hub")).entry("hub");
    for i in 0..20 {
        let name = format!("w{i}");
        b = b
            .node(name.clone(), |_s, _c| {
                Box::pin(async { Ok((TraceDelta::default().count(1), Route::Declared)) })
            })
            .edge("hub", name.clone())
            .edge(name, "join");
    }
    let g = b
        .node("join", move |s, _c| {
            counted.fetch_add(1, Ordering::SeqCst);
            let done = s.count;
            Box::pin(async move {
                let route = if done < 20 * 50 { Route::Goto(0) } else { Route::Goto(1) };
                Ok((TraceDelta::default(), route))
            })
        })
        .edge("join", "hub")
        .edge("join", END)
        .build()
        .unwrap();
    let out = Engine::builder(g).build().run("wide", Trace::default()).await.unwrap();
    assert_eq!(out.state.count, 1000);
    assert_eq!(joins.load(Ordering::SeqCst), 50);
    assert_eq!(out.state.log.len(), 50, "hub ran once per iteration");
    assert_eq!(out.steps, 150);
}

#[tokio::test]
async fn forks_with_inputs_make_one_activation_each_and_plain_forks_join() {
    let g = fork();
    let out = Engine::builder(g).build().run("f", Trace::default()).await.unwrap();
    // Branch order is list order; the two plain branches into `audit` joined into one activation.
    assert_eq!(out.state.log, ["research c", "research a", "research b", "audit"]);
    assert_eq!(out.state.count, 1);
}
