//! The harness of the macro twins (`macro_twins.rs`): the `#[reducer]` twin of [`Trace`], and the code
//! that runs a hand-built graph and its macro twin and asserts they agree on everything observable:
//!
//! * the shape: graph name, entry, nodes in declaration order, edges by index (and the mermaid rendering);
//! * the outcome: final state bytes (`serde_json`), steps and status, or the error (variant and every
//!   field, its message and its source chain);
//! * the store: `history_hash` (step, frontier and state hash of every checkpoint), the idempotency keys
//!   and the run row's status.
//!
//! This file is a module of that binary (`mod twins;`), not a test target of its own: cargo builds
//! `tests/*.rs` and `tests/*/main.rs` only.

use std::collections::BTreeSet;
use std::time::Duration;

use graph_runtime::prelude::*;
use graph_runtime::{Error, Store};
use graph_tests::{Trace, history_hash};

// ---------------------------------------------------------------------------------------------------
// The state twin
// ---------------------------------------------------------------------------------------------------

/// The `#[reducer]` twin of [`Trace`]: same fields in the same order, same strategies, so the same JSON.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct MacroTrace {
    /// Append-merged log.
    #[reduce(append)]
    pub log: Vec<String>,
    /// Sum-merged counter.
    #[reduce(sum)]
    pub count: u64,
    /// Overwritten value.
    pub last: Option<String>,
    /// Union-merged set.
    #[reduce(union)]
    pub tags: BTreeSet<String>,
    /// Max-merged value.
    #[reduce(max)]
    pub best: u64,
}

/// A delta appending one log entry (the hand-written `TraceDelta::log`), through the generated one-item
/// setter.
pub(crate) fn logged(entry: impl Into<String>) -> MacroTraceDelta {
    MacroTraceDelta::default().push_log(entry)
}

/// A set of one tag (the hand-written `TraceDelta::tag`).
pub(crate) fn tag(t: impl Into<String>) -> BTreeSet<String> {
    BTreeSet::from([t.into()])
}

// ---------------------------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------------------------

/// An error as far as it can be compared: `Debug` (the variant and every field), `Display`, and the
/// messages of its source chain.
#[derive(Debug, PartialEq)]
pub(crate) struct ErrorView {
    /// `{:?}`: the variant and every field.
    pub debug: String,
    /// `{}`: the message.
    pub display: String,
    /// The messages of the source chain, outermost first.
    pub sources: Vec<String>,
}

impl ErrorView {
    /// The view of `e`.
    pub(crate) fn of(e: &Error) -> Self {
        let mut sources = Vec::new();
        let mut cur = std::error::Error::source(e);
        while let Some(s) = cur {
            sources.push(s.to_string());
            cur = s.source();
        }
        ErrorView { debug: format!("{e:?}"), display: e.to_string(), sources }
    }
}

/// Everything observable of one run, comparable across state types.
#[derive(Debug, PartialEq)]
pub(crate) struct Observed {
    /// `(state JSON, steps, status)` or the error.
    pub outcome: Result<(String, u64, RunStatus), ErrorView>,
    /// The run row: status, latest step, version (not the graph fingerprint, which differs by design:
    /// the macro graph's includes the node signatures).
    pub info: Option<(RunStatus, u64, u64)>,
    /// `graph_tests::history_hash`.
    pub history: String,
    /// The idempotency key of every checkpoint.
    pub keys: Vec<String>,
}

/// What `result`, a run or resume of `run_id` on `engine`, returned and left in the store.
pub(crate) async fn observe_result<S: Reducer>(
    engine: &Engine<S>,
    run_id: &str,
    result: &Result<RunOutcome<S>, Error>,
) -> Observed {
    let store: &dyn Store = &**engine.store();
    let outcome = match result {
        Ok(out) => Ok((serde_json::to_string(&out.state).unwrap(), out.steps, out.status.clone())),
        Err(e) => Err(ErrorView::of(e)),
    };
    let info = store.run_info(run_id).await.unwrap().map(|i| (i.status, i.latest_step, i.version));
    let keys = store.history(run_id).await.unwrap().into_iter().map(|m| m.idempotency_key).collect();
    Observed { outcome, info, history: history_hash(store, run_id).await, keys }
}

/// Asserts that the results of `run_id` on a hand-built engine and on its twin (however they were
/// driven: run, resume, concurrently with other runs) agree on everything observable; returns what they
/// agree on.
pub(crate) async fn assert_twins(
    hand: &Engine<Trace>,
    twin: &Engine<MacroTrace>,
    run_id: &str,
    h: &Result<RunOutcome<Trace>, Error>,
    m: &Result<RunOutcome<MacroTrace>, Error>,
) -> Observed {
    let observed = observe_result(hand, run_id, h).await;
    assert_eq!(
        observed,
        observe_result(twin, run_id, m).await,
        "`{}` run `{run_id}`: the hand-built graph and its macro twin differ",
        hand.graph().name()
    );
    observed
}

/// One run of a graph and its twin, one after the other: their results, what they left behind (already
/// asserted equal) and how long each took on the tokio clock.
pub(crate) struct Pair {
    /// The hand-built graph's result.
    pub hand: Result<RunOutcome<Trace>, Error>,
    /// The macro twin's result.
    pub twin: Result<RunOutcome<MacroTrace>, Error>,
    /// What both left behind.
    pub observed: Observed,
    /// How long the hand run and the twin run took, on the tokio clock.
    pub elapsed: [Duration; 2],
}

impl Pair {
    /// Both errors (panics if either run succeeded).
    pub(crate) fn errors(&self) -> [&Error; 2] {
        [self.hand.as_ref().unwrap_err(), self.twin.as_ref().unwrap_err()]
    }

    /// The hand-built run's outcome (the twin's has the same state bytes).
    pub(crate) fn out(&self) -> &RunOutcome<Trace> {
        self.hand.as_ref().expect("the run completes")
    }
}

/// Run options with `seed`, if any.
pub(crate) fn run_options(seed: Option<u64>) -> RunOptions {
    seed.map_or_else(RunOptions::default, |s| RunOptions::default().seed(s))
}

/// The two graphs have the same name, entry, nodes (in declaration order) and edges (by index).
pub(crate) fn assert_same_shape(hand: &Graph<Trace>, twin: &Graph<MacroTrace>) {
    assert_eq!(hand.name(), twin.name());
    assert_eq!(hand.entry(), twin.entry(), "entry of `{}`", hand.name());
    let nodes: Vec<&str> = hand.node_names().collect();
    assert_eq!(nodes, twin.node_names().collect::<Vec<_>>(), "nodes of `{}`", hand.name());
    for n in nodes {
        assert_eq!(hand.edges(n), twin.edges(n), "edges of `{n}` in `{}`", hand.name());
    }
    assert_eq!(hand.mermaid(), twin.mermaid());
}

/// Runs `run_id` on both engines (hand first) from the default state and asserts they agree on
/// everything observable.
pub(crate) async fn twin(
    hand: &Engine<Trace>,
    twin: &Engine<MacroTrace>,
    run_id: &str,
    seed: Option<u64>,
) -> Pair {
    twin_from(hand, twin, run_id, seed, Trace::default(), MacroTrace::default()).await
}

/// [`twin`] from given inputs (the same state, once as [`Trace`] and once as [`MacroTrace`]).
pub(crate) async fn twin_from(
    hand: &Engine<Trace>,
    twin: &Engine<MacroTrace>,
    run_id: &str,
    seed: Option<u64>,
    hand_input: Trace,
    twin_input: MacroTrace,
) -> Pair {
    assert_same_shape(hand.graph(), twin.graph());
    assert_eq!(
        serde_json::to_string(&hand_input).unwrap(),
        serde_json::to_string(&twin_input).unwrap(),
        "the twins start from the same state"
    );
    let t0 = tokio::time::Instant::now();
    let h = hand.run_with(run_id, hand_input, run_options(seed)).await;
    let t1 = tokio::time::Instant::now();
    let m = twin.run_with(run_id, twin_input, run_options(seed)).await;
    let elapsed = [t1 - t0, t1.elapsed()];
    let observed = assert_twins(hand, twin, run_id, &h, &m).await;
    Pair { hand: h, twin: m, observed, elapsed }
}

/// Engines over fresh memory stores for a graph and its twin, with the same options.
pub(crate) fn engines(
    hand: Graph<Trace>,
    twin: Graph<MacroTrace>,
    options: EngineOptions,
) -> (Engine<Trace>, Engine<MacroTrace>) {
    (Engine::builder(hand).options(options.clone()).build(), Engine::builder(twin).options(options).build())
}

/// Runs a graph and its twin once with default options.
pub(crate) async fn twin_once(hand: Graph<Trace>, mac: Graph<MacroTrace>, run_id: &str) -> Pair {
    let (h, m) = engines(hand, mac, EngineOptions::default());
    twin(&h, &m, run_id, None).await
}
