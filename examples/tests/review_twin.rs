//! The review example and its hand-built twin give identical results: `examples/review_builder.rs`
//! (hand-written reducer, `Graph::builder`) and `examples/review.rs` (`#[reducer]`, `#[graph]`, `#[node]`) have the
//! same shape, and for every PR number they commit the same history (step, frontier, state hash of
//! every checkpoint; the same idempotency keys) and end in the same state bytes.

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/review_builder.rs"]
mod hand;

use graph_examples::review as macros;

use graph_runtime::{Engine, Graph, MemoryStore, Reducer, RunOptions, RunOutcome, Store};

/// What a run leaves behind: its outcome's state bytes, steps and status, and its committed history.
#[derive(Debug, PartialEq)]
struct Outcome {
    state: Vec<u8>,
    steps: u64,
    completed: bool,
    /// Every checkpoint's step, next nodes and state hash.
    history: Vec<(u64, Vec<String>, String)>,
    keys: Vec<String>,
}

async fn run<S>(graph: Graph<S>, run_id: &str, input: S, seed: Option<u64>) -> Outcome
where
    S: Reducer + serde::Serialize,
{
    let store = MemoryStore::new();
    let engine = Engine::builder(graph).store(store.clone()).build();
    let opts = match seed {
        Some(seed) => RunOptions::default().seed(seed),
        None => RunOptions::default(),
    };
    let out: RunOutcome<S> = engine.run_with(run_id, input, opts).await.expect("the review completes");
    let keys = store.history(run_id).await.unwrap().into_iter().map(|m| m.idempotency_key).collect();
    Outcome {
        state: serde_json::to_vec(&out.state).unwrap(),
        steps: out.steps,
        completed: out.is_completed(),
        history: engine
            .history(run_id)
            .await
            .unwrap()
            .into_iter()
            .map(|h| (h.step, h.next, h.state_hash))
            .collect(),
        keys,
    }
}

async fn both(pr: u32, seed: Option<u64>) -> (Outcome, Outcome) {
    let run_id = format!("review-pr-{pr}");
    let hand_in = hand::Review { pr: pr.to_string(), ..hand::Review::default() };
    let macro_in = macros::Review { pr: pr.to_string(), ..macros::Review::default() };
    // The two inputs are the same bytes, so the runs start from the same state.
    assert_eq!(serde_json::to_vec(&hand_in).unwrap(), serde_json::to_vec(&macro_in).unwrap());
    tokio::join!(
        run(hand::graph(), &run_id, hand_in, seed),
        run(macros::review::graph(), &run_id, macro_in, seed)
    )
}

#[test]
fn the_two_graphs_have_the_same_shape() {
    let (h, m) = (hand::graph(), macros::review::graph());
    assert_eq!(h.name(), m.name());
    assert_eq!(h.entry(), m.entry());
    let names: Vec<&str> = h.node_names().collect();
    assert_eq!(names, m.node_names().collect::<Vec<_>>());
    for n in names {
        assert_eq!(h.edges(n), m.edges(n), "edges of `{n}`");
    }
    assert_eq!(h.mermaid(), m.mermaid());
    assert_eq!(m.fingerprint(), macros::review::FINGERPRINT);
}

#[tokio::test(start_paused = true)]
async fn every_pr_gives_the_same_state_bytes_and_history() {
    let mut findings = std::collections::BTreeSet::new();
    let mut revisions = std::collections::BTreeSet::new();
    for pr in 1..=16 {
        let (h, m) = both(pr, None).await;
        assert!(h.completed, "PR {pr}");
        assert_eq!(h, m, "PR {pr}: the hand-built and the macro review differ");
        let state: serde_json::Value = serde_json::from_slice(&h.state).unwrap();
        assert_eq!(state["verdict"], "approved", "PR {pr}: the workflow converges by its third revision");
        findings.insert(state["findings"].as_array().unwrap().len());
        revisions.insert(state["revisions"].as_u64().unwrap());
    }
    // The PRs cover different paths: different numbers of findings and of revision rounds.
    assert!(findings.len() >= 2, "only {findings:?}");
    assert!(revisions.len() >= 2, "only {revisions:?}");
}

#[tokio::test(start_paused = true)]
async fn explicit_seeds_give_the_same_results_too() {
    for seed in [0, 1, 42, u64::MAX] {
        let (h, m) = both(7, Some(seed)).await;
        assert_eq!(h, m, "seed {seed}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_real_threads_and_real_time_too() {
    let (h, m) = both(3, None).await;
    assert!(h.completed);
    assert_eq!(h, m);
}
