//! Typed, matchable errors; resume edge cases; graph validation.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use graph_runtime::{
    ConflictPolicy, END, Engine, EngineOptions, Error, Graph, GraphError, NodeError, Route, RunStatus,
};
use graph_tests::graphs::{logs, two_edges, two_writers};
use graph_tests::{Trace, TraceDelta};

#[tokio::test]
async fn an_empty_fork_is_no_progress() {
    let g = Graph::<Trace>::builder("stuck")
        .node("a", |_s, _c| Box::pin(async { Ok((TraceDelta::default(), Route::Fork(vec![]))) }))
        .entry("a")
        .edge("a", END)
        .build()
        .unwrap();
    let err = Engine::builder(g).build().run("np", Trace::default()).await.unwrap_err();
    assert!(matches!(&err, Error::NoProgress { node, step: 0, .. } if node == "a"), "{err:?}");
}

#[tokio::test]
async fn an_endless_loop_hits_max_steps() {
    let g = Graph::<Trace>::builder("loop")
        .node("a", |_s, _c| Box::pin(async { Ok((TraceDelta::default().count(1), Route::Goto(0))) }))
        .entry("a")
        .edge("a", "a")
        .edge("a", END)
        .build()
        .unwrap();
    let engine = Engine::builder(g).options(EngineOptions::default().max_steps(25)).build();
    let err = engine.run("ms", Trace::default()).await.unwrap_err();
    assert!(matches!(err, Error::MaxStepsExceeded { max_steps: 25, .. }), "{err:?}");
    let info = engine.store().run_info("ms").await.unwrap().unwrap();
    assert_eq!(info.latest_step, 25);
    assert!(matches!(info.status, RunStatus::Failed(_)));
}

#[tokio::test]
async fn a_route_to_an_undeclared_edge_is_typed() {
    let g = Graph::<Trace>::builder("bad-route")
        .node("a", |_s, _c| Box::pin(async { Ok((TraceDelta::default(), Route::Goto(3))) }))
        .entry("a")
        .edge("a", END)
        .build()
        .unwrap();
    let err = Engine::builder(g).build().run("x", Trace::default()).await.unwrap_err();
    assert!(matches!(err, Error::UndeclaredEdge { edge: 3, declared: 1, .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_of_ten_failing_nodes_fail_the_run_promptly() {
    let started = Arc::new(AtomicUsize::new(0));
    let mut b = Graph::<Trace>::builder("all-fail").node("start", logs("start")).entry("start");
    for i in 0..10 {
        let s = started.clone();
        let name = format!("f{i}");
        b = b
            .node(name.clone(), move |_st, _c| {
                s.fetch_add(1, Ordering::SeqCst);
                Box::pin(async move { Err(NodeError::new(format!("f{i} failed"))) })
            })
            .edge("start", name.clone())
            .edge(name, END);
    }
    let engine = Engine::builder(b.build().unwrap())
        .options(EngineOptions::default().max_concurrent_nodes(10))
        .build();
    let t0 = std::time::Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(5), engine.run("ff", Trace::default()))
        .await
        .expect("no deadlock")
        .unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(1));
    assert!(matches!(err, Error::NodeFailed { step: 1, .. }), "{err:?}");
}

#[tokio::test]
async fn a_panicking_node_is_a_typed_error() {
    let g = Graph::<Trace>::builder("panics")
        .node("p", |_s, _c| Box::pin(async { panic!("kaboom") }))
        .entry("p")
        .edge("p", END)
        .build()
        .unwrap();
    let err = Engine::builder(g).build().run("p", Trace::default()).await.unwrap_err();
    assert!(matches!(&err, Error::NodePanicked { message, .. } if message == "kaboom"), "{err:?}");
}

#[tokio::test]
async fn concurrent_overwrites_fail_by_default_naming_the_field_and_both_nodes() {
    let err = Engine::builder(two_writers()).build().run("c", Trace::default()).await.unwrap_err();
    let Error::Conflict { source, .. } = &err else { panic!("{err:?}") };
    assert_eq!((source.field, source.first_node.as_str(), source.second_node.as_str()), ("last", "x", "y"));
    assert_eq!(source.step, 1);
    let msg = err.to_string();
    assert!(msg.contains("`last`") && msg.contains("`x`") && msg.contains("`y`"), "{msg}");
}

#[tokio::test]
async fn last_writer_wins_takes_the_highest_order_key() {
    let engine = Engine::builder(two_writers())
        .options(EngineOptions::default().conflict_policy(ConflictPolicy::LastWriterWins))
        .build();
    let out = engine.run("c", Trace::default()).await.unwrap();
    assert_eq!(out.state.last.as_deref(), Some("y"));
    assert_eq!(out.state.count, 2);
}

#[tokio::test]
async fn crdt_allows_commutative_fields_only() {
    let engine = Engine::builder(two_writers())
        .options(EngineOptions::default().conflict_policy(ConflictPolicy::Crdt))
        .build();
    assert!(matches!(engine.run("c", Trace::default()).await, Err(Error::Conflict { .. })));
    // Two writers of `count` (sum) alone are fine under Crdt.
    let g = Graph::<Trace>::builder("sums")
        .node("start", |_s, _c| Box::pin(async { Ok((TraceDelta::default(), Route::Declared)) }))
        .node("x", |_s, _c| {
            Box::pin(async { Ok((TraceDelta::default().count(2).tag("x"), Route::Declared)) })
        })
        .node("y", |_s, _c| {
            Box::pin(async { Ok((TraceDelta::default().count(3).tag("y"), Route::Declared)) })
        })
        .entry("start")
        .edge("start", "x")
        .edge("start", "y")
        .edge("x", END)
        .edge("y", END)
        .build()
        .unwrap();
    let engine =
        Engine::builder(g).options(EngineOptions::default().conflict_policy(ConflictPolicy::Crdt)).build();
    let out = engine.run("c", Trace::default()).await.unwrap();
    assert_eq!(out.state.count, 5);
    assert_eq!(out.state.tags.len(), 2);
}

#[tokio::test]
async fn run_ids_are_not_reused_and_resume_needs_a_run() {
    let engine = Engine::builder(two_writers())
        .options(EngineOptions::default().conflict_policy(ConflictPolicy::LastWriterWins))
        .build();
    engine.run("once", Trace::default()).await.unwrap();
    assert!(matches!(engine.run("once", Trace::default()).await, Err(Error::RunExists { .. })));
    assert!(matches!(engine.resume("never").await, Err(Error::RunNotFound { .. })));
}

#[tokio::test]
async fn resuming_a_completed_run_returns_its_state_without_executing() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let g = Graph::<Trace>::builder("once")
        .node("a", move |_s, _c| {
            c.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok((TraceDelta::default().count(7), Route::Declared)) })
        })
        .entry("a")
        .edge("a", END)
        .build()
        .unwrap();
    let engine = Engine::builder(g).build();
    let first = engine.run("done", Trace::default()).await.unwrap();
    let again = engine.resume("done").await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(again.state, first.state);
    assert!(again.is_completed());
}

#[tokio::test]
async fn resuming_with_a_different_graph_is_graph_changed() {
    let engine = Engine::builder(two_writers())
        .options(EngineOptions::default().conflict_policy(ConflictPolicy::LastWriterWins))
        .build();
    engine.run("g", Trace::default()).await.unwrap();
    let other =
        Graph::<Trace>::builder("other").node("z", logs("z")).entry("z").edge("z", END).build().unwrap();
    let engine2 = Engine::builder(other).shared_store(engine.store().clone()).build();
    assert!(matches!(engine2.resume("g").await, Err(Error::GraphChanged { .. })));
}

#[test]
fn graph_mistakes_are_typed_with_suggestions() {
    let base =
        || Graph::<Trace>::builder("g").node("plan", logs("plan")).node("summarize", logs("summarize"));
    let err = base().entry("plan").edge("plan", "sumarize").build().unwrap_err();
    assert!(
        matches!(&err, GraphError::UnknownNode { suggestion: Some(s), .. } if s == "summarize"),
        "{err:?}"
    );
    assert!(err.to_string().contains("did you mean `summarize`?"));
    assert_eq!(base().edge("plan", END).build().unwrap_err(), GraphError::NoEntry);
    assert!(matches!(base().entry("plan").entry("summarize").build(), Err(GraphError::TwoEntries { .. })));
    assert!(matches!(
        base().entry("plan").edge("plan", END).edge("summarize", END).build(),
        Err(GraphError::Unreachable { node, .. }) if node == "summarize"
    ));
    assert!(matches!(
        base().entry("plan").edge("plan", "summarize").edge("plan", END).edge("summarize", "summarize").build(),
        Err(GraphError::NoWayToEnd { node }) if node == "summarize"
    ));
    assert!(matches!(
        base().node("plan", logs("plan")).entry("plan").build(),
        Err(GraphError::DuplicateNode { name }) if name == "plan"
    ));
}

#[test]
fn fingerprints_follow_structure() {
    let g = two_edges;
    assert_eq!(g("b").fingerprint(), g("b").fingerprint());
    assert_ne!(g("b").fingerprint(), g(END).fingerprint());
    assert!(g("b").mermaid().contains("a -->|1| b"));
    assert!(g("b").dot().contains("\"b\" -> \"__end__\" [label=\"0\"]"));
}

/// What a user hands the engine, hostile: run ids (empty, NUL, SQL and path syntax, control and
/// non-ASCII characters, 10,000 bytes), event topics and payloads (NUL, markup, a 256 KiB string), on the
/// memory store and on sled. Each run completes, its log verifies, its events come back as sent, and the
/// state holds the strings exactly.
#[tokio::test]
async fn hostile_ids_topics_and_payloads_round_trip() {
    use graph_runtime::prelude::*;
    let long = "r".repeat(10_000);
    let ids = ["", "a\0b", "'; DROP TABLE runs; --", "../../x", "\n\t\r\u{7f}", "ünï©ødé 𝄞", long.as_str()];
    let topics = ["", "t\0p", "<script>x</script>", "主题"];
    let big = "\0<b>".repeat(1 << 16);
    // `take` waits for one event on each topic and logs every payload.
    let graph = Graph::<Trace>::builder("hostile")
        .node("take", move |_s, ctx| {
            Box::pin(async move {
                let mut delta = TraceDelta::default();
                for t in topics {
                    let got: String = ctx.wait_event(t)?;
                    delta = delta.log(got);
                }
                Ok((delta, Route::Declared))
            })
        })
        .entry("take")
        .edge("take", END)
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let engines = [
        Engine::builder(graph.clone()).build(),
        Engine::builder(graph).store(graph_runtime::store::SledStore::open(dir.path()).unwrap()).build(),
    ];
    for engine in &engines {
        for id in ids {
            let parked = engine.run(id, Trace::default()).await.unwrap();
            assert!(matches!(parked.status, RunStatus::Waiting(_)), "{id:?}: {:?}", parked.status);
            for (i, t) in topics.iter().enumerate() {
                let payload = if i == 3 { big.clone() } else { format!("{t}|{id}") };
                engine.send_event(id, t, &payload).await.unwrap();
            }
            let mut out = engine.wake(id).await.unwrap();
            for _ in 0..topics.len() {
                if out.is_completed() {
                    break;
                }
                out = engine.wake(id).await.unwrap();
            }
            assert!(out.is_completed(), "{id:?}: {:?}", out.status);
            let expected: Vec<String> = topics
                .iter()
                .enumerate()
                .map(|(i, t)| if i == 3 { big.clone() } else { format!("{t}|{id}") })
                .collect();
            assert_eq!(out.state.log, expected, "{id:?}");
            engine.verify(id).await.unwrap();
            let stored = engine.outcome(id).await.unwrap().unwrap();
            assert_eq!(stored.state, out.state, "{id:?}");
        }
    }
}
