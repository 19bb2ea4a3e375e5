//! `ctx.rng()`: seeded per run, path and attempt.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use graph_runtime::rand_core::Rng;
use graph_runtime::{END, Engine, Graph, NodeError, NodePolicy, RetryPolicy, Route, RunOptions};
use graph_tests::{Trace, TraceDelta};

/// A loop of `n` iterations; every iteration logs two draws.
fn dice(n: u64) -> Graph<Trace> {
    Graph::<Trace>::builder("dice")
        .node("roll", move |s, ctx| {
            let i = s.count;
            Box::pin(async move {
                let (a, b) = (ctx.rng().next_u64(), ctx.rng().next_u64());
                Ok((
                    TraceDelta::default().count(1).log(format!("{a:016x}{b:016x}")),
                    Route::Goto(u32::from(i + 1 >= n)),
                ))
            })
        })
        .entry("roll")
        .edge("roll", "roll")
        .edge("roll", END)
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_same_seed_gives_the_same_sequence_in_100_runs() {
    let engine = Engine::builder(dice(5)).build();
    let mut logs = BTreeSet::new();
    for i in 0..100 {
        let out = engine
            .run_with(&format!("r{i}"), Trace::default(), RunOptions::default().seed(99))
            .await
            .unwrap();
        logs.insert(out.state.log);
    }
    assert_eq!(logs.len(), 1);
    let other = engine.run_with("other", Trace::default(), RunOptions::default().seed(100)).await.unwrap();
    assert!(!logs.contains(&other.state.log), "another seed, another sequence");
}

#[tokio::test]
async fn loop_iterations_draw_distinct_streams() {
    let out = Engine::builder(dice(50)).build().run("loop", Trace::default()).await.unwrap();
    let distinct: BTreeSet<_> = out.state.log.iter().collect();
    assert_eq!(distinct.len(), 50, "every iteration has its own stream");
}

#[tokio::test]
async fn retries_draw_distinct_streams() {
    let attempts = Arc::new(AtomicU32::new(0));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (a, s) = (attempts.clone(), seen.clone());
    let g = Graph::<Trace>::builder("retry-rng")
        .node_with(
            "n",
            move |_st, ctx| {
                let (a, s) = (a.clone(), s.clone());
                Box::pin(async move {
                    s.lock().unwrap().push(ctx.rng().next_u64());
                    if a.fetch_add(1, Ordering::SeqCst) < 2 {
                        return Err(NodeError::new("again"));
                    }
                    Ok((TraceDelta::default(), Route::Declared))
                })
            },
            NodePolicy::default().retry(RetryPolicy::attempts(3)),
        )
        .entry("n")
        .edge("n", END)
        .build()
        .unwrap();
    Engine::builder(g).build().run("x", Trace::default()).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen.iter().collect::<BTreeSet<_>>().len(), 3, "each attempt has its own stream");
}

#[tokio::test]
async fn a_resumed_run_continues_the_streams_exactly() {
    let engine = Engine::builder(dice(8)).build();
    let straight =
        engine.run_with("straight", Trace::default(), RunOptions::default().seed(5)).await.unwrap();
    // Stop the second run after step 3 by pruning its future: run with max_steps 3 on another engine over
    // the same store, then resume it on the full engine.
    let short = Engine::builder(dice(8))
        .shared_store(engine.store().clone())
        .options(graph_runtime::EngineOptions::default().max_steps(3))
        .build();
    let err = short.run_with("split", Trace::default(), RunOptions::default().seed(5)).await.unwrap_err();
    assert!(matches!(err, graph_runtime::Error::MaxStepsExceeded { max_steps: 3, .. }), "{err:?}");
    let resumed = engine.resume("split").await.unwrap();
    assert_eq!(resumed.state, straight.state);
}
