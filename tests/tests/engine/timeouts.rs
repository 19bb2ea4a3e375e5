//! Timeouts: per-node over default, and the run's wall-clock budget.

use std::time::Duration;

use graph_runtime::{END, Engine, EngineOptions, Error, Graph, NodePolicy, RetryPolicy, Route, RunStatus};
use graph_tests::graphs::sleeper;
use graph_tests::{Trace, TraceDelta};

#[tokio::test(start_paused = true)]
async fn a_node_timeout_overrides_the_default() {
    // Default 10 s would let a 100 ms node finish; its own 50 ms does not.
    let engine = Engine::builder(sleeper(
        Duration::from_millis(100),
        NodePolicy::default().timeout(Duration::from_millis(50)),
    ))
    .options(EngineOptions::default().default_node_timeout(Duration::from_secs(10)))
    .build();
    let t0 = tokio::time::Instant::now();
    let err = engine.run("t", Trace::default()).await.unwrap_err();
    assert!(
        matches!(&err, Error::NodeTimeout { node, timeout, attempts: 1, .. } if node == "sleepy" && *timeout == Duration::from_millis(50)),
        "{err:?}"
    );
    assert_eq!(t0.elapsed(), Duration::from_millis(50));

    // And the default applies when the node sets none.
    let engine = Engine::builder(sleeper(Duration::from_millis(100), NodePolicy::default()))
        .options(EngineOptions::default().default_node_timeout(Duration::from_millis(30)))
        .build();
    assert!(
        matches!(engine.run("t", Trace::default()).await, Err(Error::NodeTimeout { timeout, .. }) if timeout == Duration::from_millis(30))
    );

    // A generous timeout lets it finish.
    let engine = Engine::builder(sleeper(
        Duration::from_millis(100),
        NodePolicy::default().timeout(Duration::from_secs(1)),
    ))
    .build();
    assert_eq!(engine.run("t", Trace::default()).await.unwrap().state.count, 1);
}

#[tokio::test(start_paused = true)]
async fn timeouts_are_retried_like_errors() {
    let engine = Engine::builder(sleeper(
        Duration::from_millis(100),
        NodePolicy::default().timeout(Duration::from_millis(10)).retry(RetryPolicy::attempts(3)),
    ))
    .build();
    let t0 = tokio::time::Instant::now();
    assert!(matches!(engine.run("t", Trace::default()).await, Err(Error::NodeTimeout { attempts: 3, .. })));
    assert_eq!(t0.elapsed(), Duration::from_millis(30));
}

#[tokio::test(start_paused = true)]
async fn a_200ms_budget_stops_the_run_well_before_1s() {
    let g = Graph::<Trace>::builder("forever")
        .node("spin", |s, _c| {
            let n = s.count;
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(30)).await;
                Ok((TraceDelta::default().count(1), if n < 1_000 { Route::Goto(0) } else { Route::Goto(1) }))
            })
        })
        .entry("spin")
        .edge("spin", "spin")
        .edge("spin", END)
        .build()
        .unwrap();
    let engine = Engine::builder(g)
        .options(EngineOptions::default().run_wall_clock_budget(Duration::from_millis(200)))
        .build();
    let t0 = tokio::time::Instant::now();
    let err = engine.run("budget", Trace::default()).await.unwrap_err();
    assert!(matches!(err, Error::BudgetExceeded { step: 6, .. }), "{err:?}");
    assert_eq!(t0.elapsed(), Duration::from_millis(200));
    let info = engine.store().run_info("budget").await.unwrap().unwrap();
    assert!(matches!(info.status, RunStatus::Failed(_)));
    assert_eq!(info.latest_step, 6, "steps 0..=5 finished in 180 ms");
}
