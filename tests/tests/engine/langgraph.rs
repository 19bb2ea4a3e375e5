//! What LangGraph users expect: routers that read the updated state, and joins that wait for every
//! predecessor across steps.

use graph_runtime::prelude::*;
use graph_runtime::store::SledStore;
use graph_runtime::{Error, GraphError, Store};
use graph_tests::graphs::wait_for_join;
use graph_tests::{Trace, TraceDelta};

/// "Increment until 5", ported as written: the condition reads the counter.
fn count_to_five(with_router: bool) -> Graph<Trace> {
    let b = Graph::<Trace>::builder("count").node("inc", move |s, _c| {
        // In the node, the route is decided on the state the step read, before this increment.
        let route = if s.count < 5 { Route::Goto(0) } else { Route::Goto(1) };
        Box::pin(async move { Ok((TraceDelta::default().count(1), route)) })
    });
    let b = if with_router { b.router("inc", |s: &Trace| if s.count < 5 { 0 } else { 1 }) } else { b };
    b.entry("inc").edge("inc", "inc").edge("inc", END).build().unwrap()
}

#[tokio::test]
async fn a_router_reads_the_state_with_its_nodes_update_applied() {
    let routed = Engine::builder(count_to_five(true)).build().run("r", Trace::default()).await.unwrap();
    assert_eq!(routed.state.count, 5, "LangGraph's answer");
    // The route returned with the delta decides on the state before the update: one more round.
    let inline = Engine::builder(count_to_five(false)).build().run("r", Trace::default()).await.unwrap();
    assert_eq!(inline.state.count, 6);
}

#[tokio::test]
async fn in_a_wide_step_each_router_sees_its_own_update_not_its_siblings() {
    // `x` and `y` run in one step; each router checks the tags: only its own node's tag is visible.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (sx, sy) = (seen.clone(), seen.clone());
    let g = Graph::<Trace>::builder("wide")
        .node("start", |_s, _c| Box::pin(async { Ok((TraceDelta::default(), Route::Declared)) }))
        .node("x", |_s, _c| Box::pin(async { Ok((TraceDelta::default().tag("x"), Route::Declared)) }))
        .node("y", |_s, _c| Box::pin(async { Ok((TraceDelta::default().tag("y"), Route::Declared)) }))
        .router("x", move |s: &Trace| {
            sx.lock().unwrap().push(("x", s.tags.clone()));
            0
        })
        .router("y", move |s: &Trace| {
            sy.lock().unwrap().push(("y", s.tags.clone()));
            0
        })
        .entry("start")
        .edge("start", "x")
        .edge("start", "y")
        .edge("x", END)
        .edge("y", END)
        .build()
        .unwrap();
    let out = Engine::builder(g).build().run("w", Trace::default()).await.unwrap();
    assert_eq!(out.state.tags.len(), 2);
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, [("x", ["x".to_string()].into()), ("y", ["y".to_string()].into())]);
}

#[tokio::test]
async fn a_router_that_panics_is_its_nodes_panic() {
    let g = Graph::<Trace>::builder("p")
        .node("n", |_s, _c| Box::pin(async { Ok((TraceDelta::default(), Route::Declared)) }))
        .router("n", |_s: &Trace| panic!("no route"))
        .entry("n")
        .edge("n", END)
        .build()
        .unwrap();
    let err = Engine::builder(g).build().run("p", Trace::default()).await.unwrap_err();
    assert!(
        matches!(&err, Error::NodePanicked { node, message, .. } if node.contains('n') && message == "no route"),
        "{err:?}"
    );
}

/// The `d@step:count` entries of a run's log: one per run of `d`, with the count it saw.
fn d_runs(t: &Trace) -> Vec<String> {
    t.log.iter().filter(|l| l.starts_with("d@")).cloned().collect()
}

#[tokio::test]
async fn a_wait_for_all_join_runs_once_on_paths_of_lengths_one_and_two() {
    let out = Engine::builder(wait_for_join(3, false)).build().run("j", Trace::default()).await.unwrap();
    // Once per round, after both `b` (+1) and `c2` (+10) delivered.
    assert_eq!(d_runs(&out.state), ["d@3:11", "d@7:22", "d@11:33"]);
    assert_eq!(out.steps, 12);
}

#[tokio::test]
async fn without_wait_for_the_join_runs_at_each_arrival() {
    // The same graph without `wait_for`: routes in different steps are different activations.
    let g = Graph::<Trace>::builder("plain")
        .node("start", graph_tests::graphs::logs("start"))
        .node("b", |_s, _c| Box::pin(async { Ok((TraceDelta::default().count(1), Route::Declared)) }))
        .node("c1", graph_tests::graphs::logs("c1"))
        .node("c2", |_s, _c| Box::pin(async { Ok((TraceDelta::default().count(10), Route::Declared)) }))
        .node("d", |s, ctx| {
            let seen = format!("d@{}:{}", ctx.step(), s.count);
            Box::pin(async move { Ok((TraceDelta::default().log(seen), Route::Declared)) })
        })
        .entry("start")
        .edge("start", "b")
        .edge("start", "c1")
        .edge("c1", "c2")
        .edge("b", "d")
        .edge("c2", "d")
        .edge("d", END)
        .build()
        .unwrap();
    let out = Engine::builder(g).build().run("p", Trace::default()).await.unwrap();
    assert_eq!(d_runs(&out.state), ["d@2:1", "d@3:11"]);
}

#[tokio::test]
async fn a_join_whose_branch_routes_away_runs_once_on_what_arrived() {
    let out = Engine::builder(wait_for_join(2, true)).build().run("a", Trace::default()).await.unwrap();
    // `c1` went to END: nothing left can reach `c2`, so `d` runs in the next step with `b`'s update.
    assert_eq!(d_runs(&out.state), ["d@2:1", "d@5:2"]);
    assert!(out.is_completed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_join_survives_a_stop_and_a_reopen_and_runs_once() {
    let reference =
        Engine::builder(wait_for_join(2, false)).build().run("k", Trace::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    {
        // Stop after step 2 is committed: `b` arrived, `c2` is about to run, `d` is waiting.
        let store = SledStore::open(dir.path()).unwrap();
        let engine = Engine::builder(wait_for_join(2, false))
            .store(store.clone())
            .options(EngineOptions::default().max_steps(2))
            .build();
        assert!(matches!(engine.run("k", Trace::default()).await, Err(Error::MaxStepsExceeded { .. })));
        let cp = store.latest("k").await.unwrap().unwrap();
        assert_eq!(cp.step, 2);
        assert_eq!(cp.waiting.len(), 1, "the join waits, durably");
        assert_eq!((&*cp.waiting[0].node, cp.waiting[0].arrived.len()), ("d", 1));
    }
    let store = SledStore::open(dir.path()).unwrap();
    let out = Engine::builder(wait_for_join(2, false)).store(store).build().resume("k").await.unwrap();
    assert_eq!(d_runs(&out.state), d_runs(&reference.state));
    assert_eq!(serde_json::to_vec(&out.state).unwrap(), serde_json::to_vec(&reference.state).unwrap());
}

#[test]
fn wait_for_names_predecessors_with_an_edge() {
    let base = || {
        Graph::<Trace>::builder("w")
            .node("a", graph_tests::graphs::logs("a"))
            .node("b", graph_tests::graphs::logs("b"))
            .entry("a")
            .edge("a", "b")
            .edge("b", END)
    };
    assert!(base().wait_for("b", ["a"]).build().is_ok());
    assert_eq!(
        base().wait_for("a", ["b"]).build().unwrap_err(),
        GraphError::WaitWithoutEdge { node: "a".into(), predecessor: "b".into() }
    );
    assert!(matches!(
        base().wait_for("b", ["aa"]).build(),
        Err(GraphError::UnknownNode { suggestion: Some(s), .. }) if s == "a"
    ));
}

/// The differential with LangGraph for a subgraph that interrupts (`bench/langgraph/subgraph_interrupt.py`
/// is the same workflow in LangGraph; docs/composition.md sets the two side by side): the question
/// stops the parent, the answer resumes the subgraph in place, and each node runs as often as in
/// LangGraph (the interrupting node twice, every other node once).
#[tokio::test]
async fn a_subgraph_interrupt_resumes_in_place_as_in_langgraph() {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    type Runs = Arc<Mutex<BTreeMap<&'static str, u32>>>;
    let runs: Runs = Arc::default();
    let count = |runs: &Runs, node: &'static str| *runs.lock().unwrap().entry(node).or_default() += 1;
    let (r1, r2, r3, r4) = (runs.clone(), runs.clone(), runs.clone(), runs.clone());
    let research = Graph::<Trace>::builder("research")
        .node("search", move |s, _c| {
            count(&r1, "search");
            let topic = s.last.clone().unwrap_or_default();
            Box::pin(
                async move { Ok((TraceDelta::default().log(format!("search:{topic}")), Route::Declared)) },
            )
        })
        .node("confirm", move |_s, ctx| {
            count(&r2, "confirm");
            Box::pin(async move {
                let source: String = ctx.interrupt(&"which source should we trust?")?;
                Ok((TraceDelta::default().log(source), Route::Declared))
            })
        })
        .entry("search")
        .edge("search", "confirm")
        .edge("confirm", END)
        .build()
        .unwrap();
    let writer = Graph::<Trace>::builder("writer")
        .node("outline", move |s, _c| {
            count(&r3, "outline");
            let topic = s.last.clone().unwrap_or_default();
            Box::pin(
                async move { Ok((TraceDelta::default().log(format!("outline:{topic}")), Route::Declared)) },
            )
        })
        // The child gets the topic; its notes come back appended to the parent's.
        .subgraph(
            "research",
            research,
            |p: &Trace| Trace { last: p.last.clone(), ..Trace::default() },
            |_p, c: Trace| {
                let mut d = TraceDelta::default();
                for line in c.log {
                    d = d.log(line);
                }
                d
            },
        )
        .node("draft", move |_s, _c| {
            count(&r4, "draft");
            Box::pin(async { Ok((TraceDelta::default().log("drafted"), Route::Declared)) })
        })
        .entry("outline")
        .edge("outline", "research")
        .edge("research", "draft")
        .edge("draft", END)
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::builder(writer).store(SledStore::open(dir.path()).unwrap()).build();
    let first = engine.run("w", Trace { last: Some("rust".into()), ..Trace::default() }).await.unwrap();
    assert_eq!(first.interrupts()[0].payload, serde_json::json!("which source should we trust?"));
    let done = engine.resume_with_input("w", &"the book").await.unwrap();
    assert_eq!(done.state.log, ["outline:rust", "search:rust", "the book", "drafted"]);
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs, BTreeMap::from([("confirm", 2), ("draft", 1), ("outline", 1), ("search", 1)]));
    // Checkpoints: the parent's steps 0..=3, the subgraph's 0..=2.
    let store = engine.store();
    let child = store.list_runs(&graph_runtime::store::RunFilter::all()).await.unwrap();
    let child = child.iter().find(|r| r.run_id != "w").unwrap();
    assert_eq!(store.checkpoints("w", 0, u64::MAX).await.unwrap().len(), 4);
    assert_eq!(store.checkpoints(&child.run_id, 0, u64::MAX).await.unwrap().len(), 3);
}
