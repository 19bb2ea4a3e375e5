//! Same graph, same input, same seed → one final-state hash and one history hash, whatever the node
//! timing and the number of worker threads.

use std::collections::BTreeSet;
use std::time::Duration;

use graph_runtime::rand_core::Rng;
use graph_runtime::{Engine, EngineOptions, Graph, MemoryStore, Route, RunOptions};
use graph_tests::{Trace, TraceDelta, history_hash, random_delay, state_hash};

/// plan → w0..w{n-1} (static fan-out) → join → plan (loop) | END, `iterations` times.
pub(crate) fn fanout_loop(workers: usize, iterations: usize, max_delay: Duration) -> Graph<Trace> {
    let mut b = Graph::<Trace>::builder("fanout-loop").node("plan", |s, ctx| {
        Box::pin(async move {
            let n = s.log.iter().filter(|l| l.starts_with("join")).count();
            Ok((TraceDelta::default().log(format!("plan{n}@{}", ctx.step())).count(1), Route::Declared))
        })
    });
    for i in 0..workers {
        let name = format!("w{i}");
        let label = name.clone();
        b = b.node(name.clone(), move |s, ctx| {
            let label = label.clone();
            Box::pin(async move {
                tokio::time::sleep(random_delay(max_delay, i as u64)).await;
                let roll = ctx.rng().next_u64() % 1000;
                let seen = s.count;
                Ok((
                    TraceDelta::default()
                        .log(format!("{label}:{roll}:{seen}"))
                        .tag(label.clone())
                        .best(roll)
                        .count(1),
                    Route::Declared,
                ))
            })
        });
        b = b.edge("plan", name.clone()).edge(name, "join");
    }
    b.node("join", move |s, _ctx| {
        Box::pin(async move {
            let n = s.log.iter().filter(|l| l.starts_with("join")).count();
            let route = if n + 1 < iterations { Route::Goto(0) } else { Route::Goto(1) };
            Ok((TraceDelta::default().log(format!("join{n}")), route))
        })
    })
    .edge("join", "plan")
    .edge("join", graph_runtime::END)
    .entry("plan")
    .build()
    .expect("valid graph")
}

fn runtime(workers: usize) -> tokio::runtime::Runtime {
    if workers == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().unwrap()
    }
}

#[test]
fn hundred_runs_one_state_hash_one_history_hash_across_worker_counts() {
    let mut state_hashes = BTreeSet::new();
    let mut history_hashes = BTreeSet::new();
    let mut finals = Vec::new();
    for workers in [1usize, 2, 8] {
        let rt = runtime(workers);
        rt.block_on(async {
            let store = MemoryStore::new();
            let engine = Engine::builder(fanout_loop(5, 3, Duration::from_millis(2)))
                .store(store.clone())
                .options(EngineOptions::default().max_concurrent_nodes(workers))
                .build();
            let runs: Vec<_> = (0..100)
                .map(|i| {
                    let engine = engine.clone();
                    tokio::spawn(async move {
                        let id = format!("det-{i}");
                        let out = engine
                            .run_with(&id, Trace::default(), RunOptions::default().seed(7))
                            .await
                            .unwrap();
                        (id, out)
                    })
                })
                .collect();
            for r in runs {
                let (id, out) = r.await.unwrap();
                assert!(out.is_completed());
                state_hashes.insert(state_hash(&out.state));
                history_hashes.insert(history_hash(&store, &id).await);
                finals.push(out.state);
            }
        });
    }
    assert_eq!(finals.len(), 300);
    assert_eq!(state_hashes.len(), 1, "final states differ: {state_hashes:?}");
    assert_eq!(history_hashes.len(), 1, "histories differ: {history_hashes:?}");
    let f = &finals[0];
    // 3 iterations × (plan + 5 workers + join) entries, workers merged in edge order every time.
    assert_eq!(f.log.len(), 21);
    let workers: Vec<String> = f.log[1..6].iter().map(|l| l.split(':').next().unwrap().to_owned()).collect();
    assert_eq!(workers, ["w0", "w1", "w2", "w3", "w4"]);
    assert_eq!(f.count, 18);
}

#[test]
fn a_different_seed_changes_the_rolls_and_only_them() {
    let rt = runtime(2);
    rt.block_on(async {
        let engine = Engine::builder(fanout_loop(5, 2, Duration::ZERO)).build();
        let a = engine.run_with("a", Trace::default(), RunOptions::default().seed(1)).await.unwrap();
        let b = engine.run_with("b", Trace::default(), RunOptions::default().seed(2)).await.unwrap();
        assert_ne!(a.state.log, b.state.log, "seeds feed ctx.rng()");
        let shape =
            |t: &Trace| t.log.iter().map(|l| l.split(':').next().unwrap().to_owned()).collect::<Vec<_>>();
        assert_eq!(shape(&a.state), shape(&b.state));
    });
}
