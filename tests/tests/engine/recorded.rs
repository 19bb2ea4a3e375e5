//! `ctx.now()` and `ctx.uuid()`: time read from the step's checkpoint, UUIDs drawn from the item's
//! stream, so a resumed or retried step sees what the first execution saw.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use graph_runtime::{
    Branch, END, Engine, EngineOptions, Error, Graph, NodeError, NodePolicy, RetryPolicy, Route, RunOptions,
};
use graph_tests::{Trace, TraceDelta};

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// A loop of `n` iterations; iteration `i` logs `i:now_ms:uuid`.
fn clocked(n: u64) -> Graph<Trace> {
    Graph::<Trace>::builder("clocked")
        .node("tick", move |s, ctx| {
            let i = s.count;
            Box::pin(async move {
                let entry = format!("{i}:{}:{}", ms(ctx.now()), ctx.uuid());
                Ok((TraceDelta::default().count(1).log(entry), Route::Goto(u32::from(i + 1 >= n))))
            })
        })
        .entry("tick")
        .edge("tick", "tick")
        .edge("tick", END)
        .build()
        .unwrap()
}

fn field(entry: &str, i: usize) -> &str {
    entry.split(':').nth(i).unwrap()
}

#[tokio::test]
async fn now_is_the_commit_time_of_the_steps_checkpoint_even_after_a_resume() {
    let engine = Engine::builder(clocked(6)).build();
    let short = Engine::builder(clocked(6))
        .shared_store(engine.store().clone())
        .options(EngineOptions::default().max_steps(3))
        .build();
    let err = short.run("r", Trace::default()).await.unwrap_err();
    assert!(matches!(err, Error::MaxStepsExceeded { .. }), "{err:?}");
    // Step 3 was scheduled before this pause and runs after it: it must see the recorded time, not the
    // clock at resume.
    tokio::time::sleep(Duration::from_millis(30)).await;
    let resumed_at = ms(SystemTime::now());
    let out = engine.resume("r").await.unwrap();
    assert_eq!(out.state.log.len(), 6);
    let mut previous = 0;
    for (step, entry) in out.state.log.iter().enumerate() {
        let cp = engine.store().load_checkpoint("r", step as u64).await.unwrap().unwrap();
        let now: u64 = field(entry, 1).parse().unwrap();
        assert_eq!(now, cp.timestamp_ms, "step {step} reads its checkpoint's time");
        assert!(now >= previous, "recorded time never goes backwards");
        previous = now;
    }
    let step3: u64 = field(&out.state.log[3], 1).parse().unwrap();
    assert!(
        step3 < resumed_at,
        "the resumed step read the recorded time ({step3}), not the clock ({resumed_at})"
    );
}

#[tokio::test]
async fn every_item_and_attempt_of_a_step_sees_the_same_time() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let failures = Arc::new(Mutex::new(0u32));
    let (s1, s2, f) = (seen.clone(), seen.clone(), failures.clone());
    let g = Graph::<Trace>::builder("same-time")
        .node("split", |_s, _ctx| {
            Box::pin(async {
                let branches = (0..3).map(|i| Branch::with_input(0, &i).unwrap()).collect();
                Ok((TraceDelta::default(), Route::Fork(branches)))
            })
        })
        .node_with(
            "work",
            move |_s, ctx| {
                let (seen, failures) = (s1.clone(), f.clone());
                Box::pin(async move {
                    seen.lock().unwrap().push(ms(ctx.now()));
                    // Spread the attempts over real time: the first two attempts of the step fail.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    let mut n = failures.lock().unwrap();
                    if *n < 2 {
                        *n += 1;
                        return Err(NodeError::new("flaky"));
                    }
                    Ok((TraceDelta::default(), Route::Declared))
                })
            },
            NodePolicy::default().retry(RetryPolicy::attempts(3)),
        )
        .node("done", move |_s, ctx| {
            let seen = s2.clone();
            Box::pin(async move {
                seen.lock().unwrap().push(ms(ctx.now()));
                Ok((TraceDelta::default(), Route::Declared))
            })
        })
        .entry("split")
        .edge("split", "work")
        .edge("work", "done")
        .edge("done", END)
        .build()
        .unwrap();
    let engine = Engine::builder(g).build();
    engine.run("t", Trace::default()).await.unwrap();
    let step1 = engine.store().load_checkpoint("t", 1).await.unwrap().unwrap().timestamp_ms;
    let step2 = engine.store().load_checkpoint("t", 2).await.unwrap().unwrap().timestamp_ms;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3 + 2 + 1, "three branches, two retries, one join");
    assert!(seen[..5].iter().all(|&t| t == step1), "{seen:?} vs {step1}");
    assert_eq!(seen[5], step2);
}

#[tokio::test]
async fn uuids_are_v4_distinct_per_iteration_and_repeat_with_the_seed() {
    let engine = Engine::builder(clocked(20)).build();
    let a = engine.run_with("a", Trace::default(), RunOptions::default().seed(7)).await.unwrap();
    let b = engine.run_with("b", Trace::default(), RunOptions::default().seed(7)).await.unwrap();
    let c = engine.run_with("c", Trace::default(), RunOptions::default().seed(8)).await.unwrap();
    let uuids = |log: &[String]| log.iter().map(|e| field(e, 2).to_owned()).collect::<Vec<_>>();
    let (ua, ub, uc) = (uuids(&a.state.log), uuids(&b.state.log), uuids(&c.state.log));
    assert_eq!(ua, ub, "same seed, same UUIDs");
    assert_eq!(ua.iter().collect::<BTreeSet<_>>().len(), 20, "one UUID per iteration");
    assert!(ua.iter().all(|u| !uc.contains(u)), "another seed, other UUIDs");
    for u in &ua {
        let parsed = graph_runtime::Uuid::parse_str(u).unwrap();
        assert_eq!(parsed.get_version_num(), 4, "{u}");
    }
}

#[test]
fn a_standalone_context_has_a_settable_time() {
    let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let ctx = graph_runtime::Ctx::standalone("unit", "n").with_now(t);
    assert_eq!(ctx.now(), t);
    assert_eq!(graph_runtime::Ctx::standalone("unit", "n").now(), UNIX_EPOCH);
}
