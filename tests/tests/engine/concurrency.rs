//! Bounded concurrency: per run and per node.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use graph_runtime::{Engine, EngineOptions, NodePolicy};
use graph_tests::Trace;
use graph_tests::graphs::{Gauge, slow_fan};

#[tokio::test(start_paused = true)]
async fn at_most_three_of_ten_slow_nodes_run_at_once_and_at_least_two_do() {
    let gauge = Arc::new(Gauge::default());
    let engine = Engine::builder(slow_fan(10, gauge.clone(), NodePolicy::default()))
        .options(EngineOptions::default().max_concurrent_nodes(3))
        .build();
    let started = tokio::time::Instant::now();
    let out = engine.run("bounded", Trace::default()).await.unwrap();
    assert_eq!(out.state.count, 10);
    let peak = gauge.peak.load(Ordering::SeqCst);
    assert!((2..=3).contains(&peak), "peak {peak}");
    // 10 items of 50 ms, 3 at a time: 4 waves.
    assert_eq!(started.elapsed(), Duration::from_millis(200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_run_limit_holds_on_real_threads() {
    let gauge = Arc::new(Gauge::default());
    let engine = Engine::builder(slow_fan(10, gauge.clone(), NodePolicy::default()))
        .options(EngineOptions::default().max_concurrent_nodes(3))
        .build();
    engine.run("bounded-mt", Trace::default()).await.unwrap();
    let peak = gauge.peak.load(Ordering::SeqCst);
    assert!((2..=3).contains(&peak), "peak {peak}");
}

#[tokio::test(start_paused = true)]
async fn the_per_node_limit_holds_below_the_run_limit() {
    let gauge = Arc::new(Gauge::default());
    let engine = Engine::builder(slow_fan(10, gauge.clone(), NodePolicy::default().max_concurrency(2)))
        .options(EngineOptions::default().max_concurrent_nodes(8))
        .build();
    engine.run("per-node", Trace::default()).await.unwrap();
    assert_eq!(gauge.peak.load(Ordering::SeqCst), 2);

    let gauge = Arc::new(Gauge::default());
    let engine = Engine::builder(slow_fan(10, gauge.clone(), NodePolicy::default()))
        .options(EngineOptions::default().max_concurrent_nodes(8).max_per_node_concurrency(4))
        .build();
    engine.run("engine-per-node", Trace::default()).await.unwrap();
    assert_eq!(gauge.peak.load(Ordering::SeqCst), 4);
}
