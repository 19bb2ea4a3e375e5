//! Streaming a run: the events and their order, the modes, backpressure and dropping, a dropped stream,
//! interrupts and retries in the stream.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use graph_runtime::prelude::*;
use graph_runtime::{NodeOutcome, Overflow, RunStream, StreamEvent, StreamModes, StreamOptions};
use graph_tests::graphs::{approval, flaky};
use graph_tests::{Trace, TraceDelta};

/// plan → w0, w1, w2 (each streams three tokens, after a random pause) → join → END.
fn talkers() -> Graph<Trace> {
    let mut b = Graph::<Trace>::builder("talkers")
        .node("plan", |_s, _c| Box::pin(async { Ok((TraceDelta::default().log("plan"), Route::Declared)) }));
    for i in 0..3u64 {
        let name = format!("w{i}");
        b = b
            .node(name.clone(), move |_s, ctx| {
                Box::pin(async move {
                    for t in 0..3u64 {
                        tokio::time::sleep(graph_tests::random_delay(Duration::from_millis(3), i * 10 + t))
                            .await;
                        ctx.stream(&format!("w{i}:t{t}")).await?;
                    }
                    Ok((TraceDelta::default().log(format!("w{i}")).count(1), Route::Declared))
                })
            })
            .edge("plan", name.clone())
            .edge(name, "join");
    }
    b.node("join", |_s, _c| Box::pin(async { Ok((TraceDelta::default().log("join"), Route::Declared)) }))
        .edge("join", END)
        .entry("plan")
        .build()
        .unwrap()
}

async fn collect(mut s: RunStream<Trace>) -> Vec<StreamEvent<Trace>> {
    let mut all = Vec::new();
    while let Some(e) = s.next().await {
        all.push(e);
    }
    all
}

/// A short name of an event, for order checks.
fn tag(e: &StreamEvent<Trace>) -> String {
    match e {
        StreamEvent::RunStarted { .. } => "run".into(),
        StreamEvent::StepStarted { step, .. } => format!("step{step}"),
        StreamEvent::NodeStarted { node, .. } => format!("{node}:start"),
        StreamEvent::Custom { payload, .. } => payload.as_str().unwrap().to_owned(),
        StreamEvent::NodeFinished { node, .. } => format!("{node}:end"),
        StreamEvent::Updated { node, .. } => format!("{node}:update"),
        StreamEvent::StepCommitted { step, .. } => format!("commit{step}"),
        StreamEvent::Values { step, .. } => format!("values{step}"),
        StreamEvent::Finished(_) => "finished".into(),
        other => format!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_arrive_in_order_per_item_and_per_step() {
    let engine = Engine::builder(talkers()).build();
    let events =
        collect(engine.stream("t", Trace::default(), StreamOptions::default().modes(StreamModes::ALL))).await;
    let tags: Vec<String> = events.iter().map(tag).collect();
    assert_eq!(tags.first().map(String::as_str), Some("run"));
    assert_eq!(tags.last().map(String::as_str), Some("finished"));
    let at =
        |t: &str| tags.iter().position(|x| x == t).unwrap_or_else(|| panic!("{t} missing from {tags:?}"));
    for i in 0..3 {
        // One item's own events, in the order it produced them.
        let mine: Vec<&String> = tags.iter().filter(|t| t.starts_with(&format!("w{i}"))).collect();
        assert_eq!(
            mine,
            [
                &format!("w{i}:start"),
                &format!("w{i}:t0"),
                &format!("w{i}:t1"),
                &format!("w{i}:t2"),
                &format!("w{i}:end"),
                &format!("w{i}:update")
            ]
        );
        // Inside its step: after the step started, before the step's commit.
        assert!(at("step1") < at(&format!("w{i}:start")) && at(&format!("w{i}:update")) < at("commit2"));
    }
    assert!(at("values0") < at("step0") && at("commit1") < at("values1") && at("commit3") < at("values3"));
    let StreamEvent::Finished(Ok(out)) = events.last().unwrap() else { panic!() };
    assert!(out.is_completed());
    // Values are the stored states.
    for e in &events {
        if let StreamEvent::Values { step, state } = e {
            assert_eq!(engine.state_at("t", *step).await.unwrap().as_ref(), Some(state));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_select_what_is_sent() {
    let engine = Engine::builder(talkers()).build();
    let custom =
        collect(engine.stream("c", Trace::default(), StreamOptions::default().modes(StreamModes::CUSTOM)))
            .await;
    assert_eq!(custom.len(), 9 + 1, "nine tokens and Finished");
    assert!(custom[..9].iter().all(|e| matches!(e, StreamEvent::Custom { .. })));
    let updates =
        collect(engine.stream("u", Trace::default(), StreamOptions::default().modes(StreamModes::UPDATES)))
            .await;
    let nodes: Vec<String> = updates
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Updated { node, delta, .. } => {
                assert!(delta.log.is_some());
                Some(node.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(nodes.len(), 5);
    assert_eq!((nodes[0].as_str(), nodes[4].as_str()), ("plan", "join"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_slows_the_run_or_loses_counted_events() {
    let engine = Engine::builder(talkers()).build();
    let all =
        collect(engine.stream("all", Trace::default(), StreamOptions::default().modes(StreamModes::ALL)))
            .await;
    let sent = all.len() - 1; // without Finished
    // Wait: a buffer of one and a consumer that sleeps: nothing lost.
    let mut s =
        engine.stream("wait", Trace::default(), StreamOptions::default().modes(StreamModes::ALL).buffer(1));
    let mut got = 0;
    while let Some(e) = s.next().await {
        tokio::time::sleep(Duration::from_millis(1)).await;
        if !matches!(e, StreamEvent::Finished(_)) {
            got += 1;
        }
    }
    assert_eq!(got, sent);
    // Drop: a buffer of one read only at the end: events are dropped and counted, Finished arrives.
    let s = engine.stream(
        "drop",
        Trace::default(),
        StreamOptions::default().modes(StreamModes::ALL).buffer(1).overflow(Overflow::Drop),
    );
    let engine2 = engine.clone();
    // Let the run finish before reading anything.
    tokio::time::timeout(Duration::from_secs(60), async {
        while engine2.outcome("drop").await.unwrap().is_none_or(|o| !o.is_completed()) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    let events = collect(s).await;
    let dropped: u64 =
        events.iter().map(|e| if let StreamEvent::Dropped { count } = e { *count } else { 0 }).sum();
    let received = events
        .iter()
        .filter(|e| !matches!(e, StreamEvent::Dropped { .. } | StreamEvent::Finished(_)))
        .count();
    assert!(dropped > 0, "{events:?}");
    assert_eq!(received as u64 + dropped, sent as u64);
    assert!(matches!(events.last(), Some(StreamEvent::Finished(Ok(_)))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_cancels_the_run_only_when_asked() {
    let slow = || graph_tests::graphs::sleeper(Duration::from_millis(300), NodePolicy::default());
    let engine = Engine::builder(slow()).build();
    for (cancel, want) in [(false, RunStatus::Completed), (true, RunStatus::Cancelled)] {
        let run = format!("d{cancel}");
        let mut s = engine.stream(&run, Trace::default(), StreamOptions::default().cancel_on_drop(cancel));
        assert!(matches!(s.next().await, Some(StreamEvent::RunStarted { .. })));
        drop(s);
        let status = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let info = engine.store().run_info(&run).await.unwrap().unwrap();
                if info.status != RunStatus::Running {
                    return info.status;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .unwrap();
        assert_eq!(status, want);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupts_and_retries_are_in_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::builder(approval(1, dir.path().join("ledger"), None)).build();
    let events = collect(engine.stream("i", Trace::default(), StreamOptions::default())).await;
    let stopped = events.iter().any(|e| {
        matches!(e, StreamEvent::NodeFinished { node, outcome: NodeOutcome::Stopped, .. } if node == "approver0")
    });
    assert!(stopped);
    let Some(StreamEvent::Interrupted { interrupts }) = events.iter().rev().nth(1) else {
        panic!("{events:?}")
    };
    let id = interrupts[0].id.clone();
    let StreamEvent::Finished(Ok(out)) = events.last().unwrap() else { panic!() };
    assert_eq!(out.interrupts().len(), 1);
    let events = collect(engine.stream_resume_with_inputs(
        "i",
        vec![(id, serde_json::json!(true))],
        StreamOptions::default(),
    ))
    .await;
    let effects: Vec<&StreamEvent<Trace>> =
        events.iter().filter(|e| matches!(e, StreamEvent::Effect { .. })).collect();
    assert_eq!(effects.len(), 1, "the approver's notification, recorded with the step");
    let StreamEvent::Finished(Ok(out)) = events.last().unwrap() else { panic!() };
    assert!(out.is_completed());

    let retry = RetryPolicy::attempts(3).backoff(Backoff::Fixed(Duration::from_millis(1)));
    let engine = Engine::builder(flaky(2, false, retry, Arc::new(AtomicU32::new(0)))).build();
    let events = collect(engine.stream("f", Trace::default(), StreamOptions::default())).await;
    let mut per_attempt = BTreeMap::new();
    for e in &events {
        match e {
            StreamEvent::Retrying { attempt, error, .. } => {
                per_attempt.insert(*attempt, error.clone());
            }
            StreamEvent::NodeFinished { attempt: 3, outcome, .. } => {
                assert_eq!(outcome, &NodeOutcome::Finished)
            }
            _ => {}
        }
    }
    assert_eq!(per_attempt.keys().copied().collect::<Vec<_>>(), [1, 2]);
    assert!(per_attempt[&1].contains("boom #1"));
}
