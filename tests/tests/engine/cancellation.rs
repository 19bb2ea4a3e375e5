//! Cancellation reaches every running node promptly and leaves no task behind.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use graph_runtime::{
    Backoff, CancellationToken, END, Engine, Error, Graph, NodeError, NodePolicy, RetryPolicy, Route,
    RunOptions, RunStatus,
};
use graph_tests::graphs::logs;
use graph_tests::{Trace, TraceDelta};

/// Counts live node futures and how many saw the cancellation before they ended.
#[derive(Default)]
struct Witness {
    live: AtomicUsize,
    observed: AtomicUsize,
    started: AtomicUsize,
}

struct Alive {
    witness: Arc<Witness>,
    token: CancellationToken,
}

impl Drop for Alive {
    fn drop(&mut self) {
        if self.token.is_cancelled() {
            self.witness.observed.fetch_add(1, Ordering::SeqCst);
        }
        self.witness.live.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_100ms_into_five_long_nodes_returns_promptly_and_every_node_observes_it() {
    let witness = Arc::new(Witness::default());
    let mut b = Graph::<Trace>::builder("long").node("start", logs("start")).entry("start");
    for i in 0..5 {
        let w = witness.clone();
        let name = format!("long{i}");
        b = b
            .node(name.clone(), move |_s, ctx| {
                let w = w.clone();
                Box::pin(async move {
                    w.live.fetch_add(1, Ordering::SeqCst);
                    w.started.fetch_add(1, Ordering::SeqCst);
                    let _alive = Alive { witness: w.clone(), token: ctx.cancellation_token() };
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(60)) => {}
                        _ = ctx.cancelled() => {}
                    }
                    Ok((TraceDelta::default(), Route::Declared))
                })
            })
            .edge("start", name.clone())
            .edge(name, END);
    }
    let engine = Engine::builder(b.build().unwrap()).build();
    let token = CancellationToken::new();
    let canceller = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        canceller.cancel();
    });
    let t0 = Instant::now();
    let err = engine
        .run_with("cancel-me", Trace::default(), RunOptions::default().cancel(token))
        .await
        .unwrap_err();
    let elapsed = t0.elapsed();
    assert!(matches!(err, Error::Cancelled { step: 1, .. }), "{err:?}");
    assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
    assert_eq!(witness.started.load(Ordering::SeqCst), 5);
    assert_eq!(witness.observed.load(Ordering::SeqCst), 5, "every node saw the cancellation");
    assert_eq!(witness.live.load(Ordering::SeqCst), 0, "no node outlives the run call");
    let info = engine.store().run_info("cancel-me").await.unwrap().unwrap();
    assert_eq!(info.status, RunStatus::Cancelled);
    assert_eq!(info.latest_step, 1, "the step being executed stays committed, the next is not");
}

#[tokio::test(start_paused = true)]
async fn engine_cancel_by_run_id_reaches_a_node_in_retry_backoff() {
    let g = Graph::<Trace>::builder("backoff")
        .node_with(
            "flaky",
            |_s, _c| Box::pin(async { Err(NodeError::new("transient")) }),
            NodePolicy::default()
                .retry(RetryPolicy::attempts(5).backoff(Backoff::Fixed(Duration::from_secs(3600)))),
        )
        .entry("flaky")
        .edge("flaky", END)
        .build()
        .unwrap();
    let engine = Engine::builder(g).build();
    let e2 = engine.clone();
    let handle = tokio::spawn(async move { e2.run("in-backoff", Trace::default()).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = tokio::time::Instant::now();
    assert!(engine.cancel("in-backoff"));
    let err = handle.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Cancelled { .. }), "{err:?}");
    assert!(t0.elapsed() < Duration::from_secs(1), "the hour-long backoff was not waited out");
    assert!(!engine.cancel("in-backoff"), "the run is no longer active");
}

#[tokio::test]
async fn a_cancelled_run_resumes_to_the_same_result_as_an_uninterrupted_one() {
    // `park`: the first time step 3 runs, wait for cancellation.
    let g = |park: bool| {
        let park = Arc::new(AtomicBool::new(park));
        Graph::<Trace>::builder("steps")
            .node("tick", move |s, ctx| {
                let n = s.count;
                let park = park.clone();
                Box::pin(async move {
                    if n == 3 && park.swap(false, Ordering::SeqCst) {
                        ctx.cancelled().await;
                    }
                    let route = if n < 6 { Route::Goto(0) } else { Route::Goto(1) };
                    Ok((TraceDelta::default().count(1).log(format!("t{n}")), route))
                })
            })
            .entry("tick")
            .edge("tick", "tick")
            .edge("tick", END)
            .build()
            .unwrap()
    };
    let straight = Engine::builder(g(false)).build().run("straight", Trace::default()).await.unwrap();
    let engine = Engine::builder(g(true)).build();
    let e2 = engine.clone();
    let handle = tokio::spawn(async move { e2.run("interrupted", Trace::default()).await });
    while engine.store().run_info("interrupted").await.unwrap().is_none_or(|i| i.latest_step < 3) {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    engine.cancel("interrupted");
    assert!(matches!(handle.await.unwrap(), Err(Error::Cancelled { step: 3, .. })));
    let resumed = engine.resume("interrupted").await.unwrap();
    assert_eq!(resumed.state, straight.state);
    assert_eq!(resumed.steps, straight.steps);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_run_future_stops_the_run_and_resume_continues_it() {
    let witness = Arc::new(Witness::default());
    let w = witness.clone();
    let g = Graph::<Trace>::builder("dropped")
        .node("start", logs("start"))
        .node("long", move |_s, ctx| {
            let w = w.clone();
            Box::pin(async move {
                if w.started.fetch_add(1, Ordering::SeqCst) == 0 {
                    // The first attempt parks for a minute; the resumed one finishes at once.
                    w.live.fetch_add(1, Ordering::SeqCst);
                    let _alive = Alive { witness: w.clone(), token: ctx.cancellation_token() };
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                Ok((TraceDelta::default().log("long"), Route::Declared))
            })
        })
        .entry("start")
        .edge("start", "long")
        .edge("long", END)
        .build()
        .unwrap();
    let engine = Engine::builder(g).build();
    let run = engine.run("dropped", Trace::default());
    assert!(tokio::time::timeout(Duration::from_millis(100), run).await.is_err(), "the node parks");
    // The driver runs on a task of its own: dropping the future aborts it, and with it the node. Only
    // observe here (no `engine.cancel`, which would stop a run the drop had left running).
    let t0 = Instant::now();
    while witness.live.load(Ordering::SeqCst) != 0 {
        assert!(t0.elapsed() < Duration::from_secs(5), "the dropped run kept running");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(witness.started.load(Ordering::SeqCst), 1);
    // The abort drops the node and the run's registration in one drop, on a worker: until the latter is
    // gone, resume reports the run as still running.
    let out = loop {
        match engine.resume("dropped").await {
            Err(Error::AlreadyRunning { .. }) => {
                assert!(t0.elapsed() < Duration::from_secs(5), "the dropped run stayed registered");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            other => break other.unwrap(),
        }
    };
    assert!(out.is_completed());
    assert_eq!(out.state.log, ["start", "long"]);
    assert_eq!(witness.started.load(Ordering::SeqCst), 2);
}
