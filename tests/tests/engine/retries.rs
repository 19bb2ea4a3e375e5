//! Retries: attempts, exhaustion, non-retryable errors, zero delay, deterministic backoff.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use graph_runtime::{Backoff, END, Engine, EngineOptions, Error, Graph, NodeError, RetryPolicy, Route};
use graph_tests::graphs::flaky;
use graph_tests::{Trace, TraceDelta};

#[tokio::test(start_paused = true)]
async fn success_after_two_failures_takes_three_attempts() {
    let attempts = Arc::new(AtomicU32::new(0));
    let retry = RetryPolicy::attempts(5)
        .backoff(Backoff::exponential(Duration::from_millis(10), Duration::from_secs(1)));
    let engine = Engine::builder(flaky(2, false, retry, attempts.clone())).build();
    let t0 = tokio::time::Instant::now();
    let out = engine.run("r", Trace::default()).await.unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    assert_eq!(out.state.count, 3);
    assert_eq!(t0.elapsed(), Duration::from_millis(10 + 20), "backoff 10 ms then 20 ms");
}

#[tokio::test(start_paused = true)]
async fn exhausted_retries_report_attempts_and_the_cause() {
    let attempts = Arc::new(AtomicU32::new(0));
    let engine = Engine::builder(flaky(10, false, RetryPolicy::attempts(3), attempts.clone())).build();
    let err = engine.run("r", Trace::default()).await.unwrap_err();
    match &err {
        Error::NodeFailed { node, attempts: 3, source, step: 0, .. } => {
            assert_eq!(node, "flaky");
            assert_eq!(source.to_string(), "boom #3");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(std::error::Error::source(&err).is_some(), "the cause is chained");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_non_retryable_error_is_attempted_once() {
    let attempts = Arc::new(AtomicU32::new(0));
    let engine = Engine::builder(flaky(10, true, RetryPolicy::attempts(5), attempts.clone())).build();
    let err = engine.run("r", Trace::default()).await.unwrap_err();
    assert!(matches!(err, Error::NodeFailed { attempts: 1, .. }), "{err:?}");
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_predicate_can_refuse() {
    let attempts = Arc::new(AtomicU32::new(0));
    let retry = RetryPolicy::attempts(5).retry_if(|e| !e.to_string().contains("#1"));
    let engine = Engine::builder(flaky(10, false, retry, attempts.clone())).build();
    assert!(matches!(engine.run("r", Trace::default()).await, Err(Error::NodeFailed { attempts: 1, .. })));
}

#[tokio::test(start_paused = true)]
async fn zero_delay_retries_do_not_panic_and_take_no_time() {
    let attempts = Arc::new(AtomicU32::new(0));
    let retry = RetryPolicy::attempts(4).backoff(Backoff::Fixed(Duration::ZERO)).jitter(1.0);
    let engine = Engine::builder(flaky(3, false, retry, attempts.clone())).build();
    let t0 = tokio::time::Instant::now();
    engine.run("r", Trace::default()).await.unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 4);
    assert_eq!(t0.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn the_engine_default_retry_applies_to_nodes_without_one() {
    let attempts = Arc::new(AtomicU32::new(0));
    let a = attempts.clone();
    let g = Graph::<Trace>::builder("default-retry")
        .node("n", move |_s, _c| {
            let a = a.clone();
            Box::pin(async move {
                if a.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Err(NodeError::new("once"));
                }
                Ok((TraceDelta::default(), Route::Declared))
            })
        })
        .entry("n")
        .edge("n", END)
        .build()
        .unwrap();
    let engine =
        Engine::builder(g).options(EngineOptions::default().default_retry(RetryPolicy::attempts(2))).build();
    engine.run("r", Trace::default()).await.unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}
