//! Same graph, same input, same seed → one final-state hash and one history hash, whatever the node
//! timing and the number of worker threads.

use std::collections::BTreeSet;
use std::time::Duration;

use graph_runtime::{Engine, EngineOptions, MemoryStore, RunOptions};
use graph_tests::graphs::fanout_loop;
use graph_tests::{Trace, history_hash, state_hash};

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
