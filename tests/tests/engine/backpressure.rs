//! Backpressure: an engine-wide admission queue of `queue_depth` work items.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use graph_runtime::{END, Engine, EngineOptions, Graph, PauseReason, Route, RunStatus};
use graph_tests::{Trace, TraceDelta};
use tokio::time::Instant;

type Spans = Arc<Mutex<Vec<(String, Instant, Instant)>>>;

/// One node that sleeps `ms` (its run id's number of milliseconds, read from the state) and records when
/// it ran.
fn recorder(spans: Spans) -> Graph<Trace> {
    Graph::<Trace>::builder("recorder")
        .node("work", move |s, ctx| {
            let spans = spans.clone();
            let ms = s.best;
            Box::pin(async move {
                let start = Instant::now();
                tokio::time::sleep(Duration::from_millis(ms)).await;
                spans.lock().unwrap().push((ctx.run_id().to_owned(), start, Instant::now()));
                Ok((TraceDelta::default().count(1), Route::Declared))
            })
        })
        .entry("work")
        .edge("work", END)
        .build()
        .unwrap()
}

fn input(ms: u64) -> Trace {
    Trace { best: ms, ..Trace::default() }
}

#[tokio::test(start_paused = true)]
async fn queue_depth_one_blocks_a_second_run_until_the_first_item_finishes() {
    let spans = Spans::default();
    let engine = Engine::builder(recorder(spans.clone()))
        .options(EngineOptions::default().queue_depth(1).backpressure_timeout(Duration::from_secs(5)))
        .build();
    let a = tokio::spawn({
        let e = engine.clone();
        async move { e.run("a", input(300)).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let b = tokio::spawn({
        let e = engine.clone();
        async move { e.run("b", input(10)).await }
    });
    assert!(a.await.unwrap().unwrap().is_completed());
    assert!(b.await.unwrap().unwrap().is_completed());
    let spans = spans.lock().unwrap();
    let (_, _, a_end) = spans.iter().find(|s| s.0 == "a").unwrap();
    let (_, b_start, _) = spans.iter().find(|s| s.0 == "b").unwrap();
    assert!(b_start >= a_end, "b was admitted only once a's item released the queue slot");
}

#[tokio::test(start_paused = true)]
async fn waiting_past_the_backpressure_timeout_pauses_durably_and_resume_finishes() {
    let spans = Spans::default();
    let engine = Engine::builder(recorder(spans.clone()))
        .options(EngineOptions::default().queue_depth(1).backpressure_timeout(Duration::from_millis(100)))
        .build();
    let a = tokio::spawn({
        let e = engine.clone();
        async move { e.run("a", input(1_000)).await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let t0 = Instant::now();
    let b = engine.run("b", input(10)).await.unwrap();
    assert_eq!(t0.elapsed(), Duration::from_millis(100));
    assert_eq!(b.status, RunStatus::Paused(PauseReason::Backpressure));
    assert_eq!(b.steps, 0);
    assert_eq!(b.state, input(10), "the committed state comes back with the pause");
    let info = engine.store().run_info("b").await.unwrap().unwrap();
    assert_eq!(info.status, RunStatus::Paused(PauseReason::Backpressure));
    assert!(engine.store().load_checkpoint("b", 0).await.unwrap().is_some());

    assert!(a.await.unwrap().unwrap().is_completed());
    let resumed = engine.resume("b").await.unwrap();
    assert!(resumed.is_completed());
    assert_eq!(resumed.state.count, 1);
    assert_eq!(engine.store().run_info("b").await.unwrap().unwrap().status, RunStatus::Completed);
}

#[tokio::test(start_paused = true)]
async fn one_run_wider_than_the_queue_still_completes() {
    // 1 slot, a step of 5 items: admission is per item and released as each finishes.
    let g = Graph::<Trace>::builder("wide")
        .node("fan", |_s, _c| Box::pin(async { Ok((TraceDelta::default(), Route::Declared)) }))
        .node("a", |_s, _c| Box::pin(async { Ok((TraceDelta::default().count(1), Route::Declared)) }))
        .node("b", |_s, _c| Box::pin(async { Ok((TraceDelta::default().count(1), Route::Declared)) }))
        .node("c", |_s, _c| Box::pin(async { Ok((TraceDelta::default().count(1), Route::Declared)) }))
        .entry("fan")
        .edge("fan", "a")
        .edge("fan", "b")
        .edge("fan", "c")
        .edge("a", END)
        .edge("b", END)
        .edge("c", END)
        .build()
        .unwrap();
    let engine = Engine::builder(g).options(EngineOptions::default().queue_depth(1)).build();
    assert_eq!(engine.run("w", Trace::default()).await.unwrap().state.count, 3);
}
