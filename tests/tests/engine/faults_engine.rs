//! The engine on a store whose commit fails: it never executes a step that was not durably committed,
//! the failed store handle refuses to go on, and reopening the store in the same process resumes the
//! run to exactly the history and state of an uninterrupted run.
//!
//! A node at step `k` arms `SledStore::fail_next_log_write()`, so the commit of checkpoint `k + 1`
//! fails as an I/O error of the commit log would (after sled applied it in memory: the case where the
//! index holds a commit the log does not). Every node execution is counted per (node, step).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use graph_runtime::rand_core::Rng;
use graph_runtime::store::SledStore;
use graph_runtime::{Ctx, END, Engine, Error, Graph, Route, Store, StoreError};
use graph_tests::faults::small_options;
use graph_tests::graphs::Fut;
use graph_tests::{Trace, TraceDelta};

const RUN: &str = "faulty";
const ITERATIONS: u64 = 15;
/// `tick`, then `a` ∥ `b`, then `tock`: three steps an iteration, and END after the last `tock`.
const STEPS: u64 = 3 * ITERATIONS;

/// Counts executions and arms the fault.
#[derive(Default)]
struct Probe {
    /// Executions per (node, step).
    runs: Mutex<BTreeMap<(&'static str, u64), u32>>,
    /// The step whose nodes arm the fault, and the store to arm it on (taken by the first node that
    /// runs at that step).
    arm: Mutex<Option<(u64, SledStore)>>,
}

impl Probe {
    fn saw(&self, node: &'static str, step: u64) {
        *self.runs.lock().unwrap().entry((node, step)).or_default() += 1;
        let mut arm = self.arm.lock().unwrap();
        if arm.as_ref().is_some_and(|(k, _)| *k == step) {
            let (_, store) = arm.take().unwrap();
            store.fail_next_log_write();
        }
    }

    fn snapshot(&self) -> BTreeMap<(&'static str, u64), u32> {
        self.runs.lock().unwrap().clone()
    }
}

fn counted(
    probe: &Arc<Probe>,
    name: &'static str,
    f: fn(&Trace, &mut Ctx) -> (TraceDelta, Route),
) -> impl for<'b> Fn(&'b Trace, &'b mut Ctx) -> Fut<'b> + Send + Sync + 'static {
    let probe = probe.clone();
    move |s, ctx| {
        probe.saw(name, ctx.step());
        let out = f(s, ctx);
        Box::pin(async move {
            // Let the other branch of the step run meanwhile.
            tokio::task::yield_now().await;
            Ok(out)
        })
    }
}

fn branch(name: &'static str) -> fn(&Trace, &mut Ctx) -> (TraceDelta, Route) {
    fn a(s: &Trace, ctx: &mut Ctx) -> (TraceDelta, Route) {
        let roll = ctx.rng().next_u64() % 1000;
        (TraceDelta::default().log(format!("a{}:{roll}", s.count)).count(1).best(roll), Route::Declared)
    }
    fn b(s: &Trace, ctx: &mut Ctx) -> (TraceDelta, Route) {
        let roll = ctx.rng().next_u64() % 1000;
        (
            TraceDelta::default().log(format!("b{}:{roll}", s.count)).count(1).tag(format!("b{roll}")),
            Route::Declared,
        )
    }
    if name == "a" { a } else { b }
}

/// `tick` → (`a` ∥ `b`) → `tock` → `tick` …, `ITERATIONS` times, every node counted by `probe`.
fn graph(probe: &Arc<Probe>) -> Graph<Trace> {
    Graph::<Trace>::builder("faults-engine")
        .node("tick", counted(probe, "tick", |_s, _c| (TraceDelta::default(), Route::Declared)))
        .node("a", counted(probe, "a", branch("a")))
        .node("b", counted(probe, "b", branch("b")))
        .node(
            "tock",
            counted(probe, "tock", |s, _c| {
                let done = s.count >= 2 * ITERATIONS;
                (TraceDelta::default().last(format!("tock{}", s.count)), Route::Goto(u32::from(done)))
            }),
        )
        .entry("tick")
        .edge("tick", "a")
        .edge("tick", "b")
        .edge("a", "tock")
        .edge("b", "tock")
        .edge("tock", "tick")
        .edge("tock", END)
        .build()
        .unwrap()
}

/// The final state's bytes and the idempotency key of every step of an uninterrupted run.
async fn reference() -> (Vec<u8>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open_with(dir.path(), small_options()).unwrap();
    let engine = Engine::builder(graph(&Arc::default())).store(store.clone()).build();
    let out = engine.run(RUN, Trace::default()).await.unwrap();
    assert!(out.is_completed());
    assert_eq!(out.steps, STEPS);
    let keys = store.history(RUN).await.unwrap().into_iter().map(|m| m.idempotency_key).collect();
    (serde_json::to_vec(&out.state).unwrap(), keys)
}

/// The fault at the commit of step `k + 1`; returns the step the reopened store resumed from.
async fn fault_after_step(k: u64, reference: &(Vec<u8>, Vec<String>)) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let probe = Arc::new(Probe::default());
    let store = SledStore::open_with(dir.path(), small_options()).unwrap();
    *probe.arm.lock().unwrap() = Some((k, store.clone()));
    let engine = Engine::builder(graph(&probe)).store(store.clone()).build();

    let err = engine.run(RUN, Trace::default()).await.expect_err("the commit of step k + 1 fails");
    let shown = err.to_string();
    assert!(
        matches!(err, Error::Store(StoreError::FailStopped { .. }))
            && shown.contains("injected log write failure"),
        "k = {k}: the error must be the fail-stop with its cause: {shown}"
    );
    assert!(probe.arm.lock().unwrap().is_none(), "k = {k}: the fault was never armed");
    let before = probe.snapshot();
    let last_executed = before.keys().map(|&(_, s)| s).max();
    assert_eq!(last_executed, Some(k), "k = {k}: nodes ran at a step whose commit failed: {before:?}");

    // The same handle refuses to go on, and runs nothing.
    let again = engine.resume(RUN).await;
    assert!(
        matches!(again, Err(Error::Store(StoreError::FailStopped { .. }))),
        "k = {k}: resume on the failed handle: {again:?}"
    );
    assert!(matches!(store.run_info(RUN).await, Err(StoreError::FailStopped { .. })));
    assert_eq!(probe.snapshot(), before, "k = {k}: a node ran on the failed handle");
    drop(engine);
    drop(store);

    // Reopened in this same process: the run continues from a durable step.
    let store = SledStore::open_with(dir.path(), small_options()).unwrap();
    let from = store.run_info(RUN).await.unwrap().expect("the run exists").latest_step;
    // Step k was acknowledged; step k + 1 was not, and may or may not be there (sled applied it in
    // memory before the log write failed, and flushed it when it was dropped).
    assert!(from == k || from == k + 1, "k = {k}: the reopened store is at step {from}");
    let engine = Engine::builder(graph(&probe)).store(store.clone()).build();
    let out = engine.resume(RUN).await.unwrap();
    assert!(out.is_completed());
    assert_eq!(serde_json::to_vec(&out.state).unwrap(), reference.0, "k = {k}: final state");
    let keys: Vec<String> =
        store.history(RUN).await.unwrap().into_iter().map(|m| m.idempotency_key).collect();
    assert_eq!(keys, reference.1, "k = {k}: the history differs from an uninterrupted run's");

    // After the reopen, nodes ran only from the step the store durably held, once per node and step.
    let after = probe.snapshot();
    for (&(node, step), &n) in &after {
        let n_before = before.get(&(node, step)).copied().unwrap_or(0);
        let again = n - n_before;
        assert!(again <= 1, "k = {k}: `{node}` ran {again} times at step {step} after the reopen");
        assert!(
            again == 0 || step >= from,
            "k = {k}: `{node}` ran at step {step} before the resumed step {from}"
        );
    }
    let executed_after: Vec<u64> = after
        .iter()
        .filter(|(key, n)| **n > before.get(key).copied().unwrap_or(0))
        .map(|(&(_, s), _)| s)
        .collect();
    if from == STEPS {
        // The final commit was kept: the run was complete, and its resume executed nothing.
        assert!(executed_after.is_empty(), "k = {k}: a completed run executed {executed_after:?}");
    } else {
        assert_eq!(
            executed_after.iter().min(),
            Some(&from),
            "k = {k}: the resume did not start at step {from}"
        );
        assert_eq!(executed_after.iter().max(), Some(&(STEPS - 1)));
    }
    from
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_runs_no_uncommitted_step_and_recovers_in_process_after_a_failed_commit() {
    let started = Instant::now();
    let reference = reference().await;
    let mut resumed_at = BTreeMap::<&str, u32>::new();
    // Step 0 (the first node), single- and two-node steps, and the step before the last.
    for k in [0, 1, 2, 3, 10, 22, 31, STEPS - 2, STEPS - 1] {
        let from = fault_after_step(k, &reference).await;
        *resumed_at
            .entry(if from == k { "k (the failed commit was gone)" } else { "k + 1 (sled had kept it)" })
            .or_default() += 1;
    }
    println!("resumed at: {resumed_at:?} ({:.1?})", started.elapsed());
}
