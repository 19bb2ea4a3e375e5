//! More macro twins: the hand-built graphs of the engine's backpressure, cancellation, concurrency, error
//! and recorded-time tests (`tests/tests/engine/{backpressure,cancellation,concurrency,errors,recorded}.rs`)
//! written again with `#[graph]` and `#[node]` over [`MacroTrace`], run with the same run ids, seeds and
//! options as the hand-built graph, and compared by the harness of `twins/mod.rs` (shape, state bytes,
//! steps, status or error with its source chain, history hash, idempotency keys, run row). Each twin test
//! also checks, on both graphs, the property its original checks.
//!
//! The hand-built constructors are copied verbatim from the engine tests (their modules are private to
//! that binary), each under a comment naming its origin; graphs the originals build inline in a test are
//! copied into a function with the builder calls unchanged. Per-test side channels of the originals (an
//! `Arc` counter, gauge, witness or span list captured by a closure) become a `static` in the twin's
//! module; every such static belongs to one test (nextest runs each test in its own process), and
//! `macro_rules!` families give tests that share a hand constructor one twin module each.
//!
//! | original (engine/) | twin test |
//! |---|---|
//! | backpressure `queue_depth_one_blocks_a_second_run_until_the_first_item_finishes` | `recorder_twin_admits_a_second_run_only_when_the_queue_slot_frees` |
//! | backpressure `waiting_past_the_backpressure_timeout_pauses_durably_and_resume_finishes` | `recorder_twin_pauses_durably_past_the_backpressure_timeout_and_resume_finishes` |
//! | backpressure `one_run_wider_than_the_queue_still_completes` | `wide_twin_completes_a_step_wider_than_the_queue` |
//! | cancellation `cancel_100ms_into_five_long_nodes_returns_promptly_and_every_node_observes_it` | `long_twin_is_cancelled_promptly_and_every_node_observes_it` |
//! | cancellation `engine_cancel_by_run_id_reaches_a_node_in_retry_backoff` | `backoff_twin_is_cancelled_by_run_id_during_its_retry_backoff` |
//! | cancellation `a_cancelled_run_resumes_to_the_same_result_as_an_uninterrupted_one` | `steps_twin_cancelled_and_resumed_ends_like_an_uninterrupted_run` |
//! | concurrency `at_most_three_of_ten_slow_nodes_run_at_once_and_at_least_two_do` | `slow_fan_twin_runs_at_most_three_of_ten_at_once_and_at_least_two` |
//! | concurrency `the_run_limit_holds_on_real_threads` | `slow_fan_twin_holds_the_run_limit_on_real_threads` |
//! | concurrency `the_per_node_limit_holds_below_the_run_limit` | `slow_fan_twin_holds_the_per_node_limit_below_the_run_limit` |
//! | errors `an_empty_fork_is_no_progress` | `stuck_twin_makes_no_progress` |
//! | errors `an_endless_loop_hits_max_steps` | `endless_twin_hits_max_steps` |
//! | errors `ten_of_ten_failing_nodes_fail_the_run_promptly` | `all_fail_twin_fails_the_run_promptly` |
//! | errors `a_panicking_node_is_a_typed_error` | `panics_twin_is_a_typed_error` |
//! | errors `concurrent_overwrites_fail_by_default_naming_the_field_and_both_nodes` | `two_writers_twin_conflicts_by_default_naming_the_field_and_both_nodes` |
//! | errors `last_writer_wins_takes_the_highest_order_key` | `two_writers_twin_last_writer_wins_with_the_highest_order_key` |
//! | errors `crdt_allows_commutative_fields_only` | `crdt_twins_allow_commutative_fields_only` |
//! | errors `run_ids_are_not_reused_and_resume_needs_a_run` | `two_writers_twin_refuses_a_reused_run_id_and_resumes_only_a_stored_run` |
//! | errors `resuming_a_completed_run_returns_its_state_without_executing` | `once_twin_resumes_a_completed_run_without_executing` |
//! | errors `resuming_with_a_different_graph_is_graph_changed` | `resuming_a_twin_run_with_another_graph_is_graph_changed` |
//! | errors `fingerprints_follow_structure` (`g(END)`) | `g_end_twin_renders_and_fingerprints_like_its_structure` |
//! | errors `a_route_to_an_undeclared_edge_is_typed`, `graph_mistakes_are_typed_with_suggestions`, `fingerprints_follow_structure` (`g("b")`) | trybuild cases, checked by `graph_mistakes_have_trybuild_twins` |
//! | recorded `now_is_the_commit_time_of_the_steps_checkpoint_even_after_a_resume` | `clocked_twin_reads_its_steps_commit_time_even_after_a_resume` |
//! | recorded `every_item_and_attempt_of_a_step_sees_the_same_time` | `same_time_twin_gives_every_item_and_attempt_of_a_step_one_time` |
//! | recorded `uuids_are_v4_distinct_per_iteration_and_repeat_with_the_seed` | `clocked_twin_draws_v4_uuids_distinct_per_iteration_and_repeated_with_the_seed` |
//!
//! Node policies (`timeout`, `retry`, `max_concurrency`) are not part of the compared shape: `Graph` has
//! no public accessor for them. A twin's policy is checked through behaviour instead: the peak
//! concurrency, elapsed times on the paused clock, attempts (the backoff twin also runs uncancelled and
//! must wait out the same four hour-long backoffs). The same-time twin's retry backoff (zero in both) is
//! not observed: that test runs on the real clock. The recorder twin reads the tokio clock to record its
//! span, as the hand graph does, so it carries `#[node(impure = "...")]`.
//!
//! Compared with a relaxation, and why:
//!
//! * `ten_of_ten_failing_nodes_fail_the_run_promptly` (errors.rs): ten nodes fail at once on a
//!   multi-threaded runtime and the engine reports the first failure it joins, so *which* node the error
//!   names is a race in the hand graph too (the original only matches `NodeFailed { step: 1, .. }`). The
//!   twin must agree on everything else; the failing node's name is masked before comparing.
//! * The `clocked` graph (recorded.rs) logs `ctx.now()`, the wall-clock commit time of the step's
//!   checkpoint. Two runs commit at different times, so state bytes, state hashes and idempotency keys
//!   (which hash the state JSON) cannot be equal. Each side's times are checked against its *own*
//!   checkpoints (entry `i` reads checkpoint `i`'s `timestamp_ms`: the original's property), then taken
//!   out; the rest (iterations, UUIDs, steps, status, frontiers, run row, number of checkpoints) must be
//!   identical.
//! * `resuming_with_a_different_graph_is_graph_changed` (errors.rs): `Error::GraphChanged` carries the
//!   graph fingerprints, which differ between a hand graph and its twin by design (the macro's include
//!   the node signatures). Each side must report its own two fingerprints; the rest is compared.
//!
//! No runtime twin, because the macros reject the hand graph at compile time (each mistake is twinned by
//! a trybuild case instead; `graph_mistakes_have_trybuild_twins` checks those files and messages exist):
//!
//! * `a_route_to_an_undeclared_edge_is_typed` (errors.rs): `Route::Goto(3)` on a node declaring one edge.
//!   A `#[node]` routes only through its generated `Next`/`Fork`, which has no variant for an undeclared
//!   edge (`ui-tests/tests/fail/routing/undeclared-next-variant.rs`), and a raw `Route` return type is
//!   rejected (`ui-tests/tests/fail/signature/raw-route.rs`).
//! * `graph_mistakes_are_typed_with_suggestions` (errors.rs): every graph in it is invalid. Unknown edge
//!   target with a suggestion: `fail/graph/unknown-edge-target.rs`; no entry: `fail/graph/no-entry.rs`;
//!   two entries: `fail/graph/two-entries.rs`; unreachable node: `fail/graph/unreachable-node.rs`; a loop
//!   with no way to END: `fail/graph/loop-without-exit.rs`; duplicate node: `fail/graph/duplicate-node.rs`.
//! * `fingerprints_follow_structure` (errors.rs), the graph `g("b")`: it declares the edge `a -> b` twice,
//!   which the builder accepts and `#[node(to = [b, b])]` rejects (`fail/graph/duplicate-edge.rs`). Its
//!   `g(END)` is twinned.
//!
//! No twin, because no graph: `a_standalone_context_has_a_settable_time` (recorded.rs) tests
//! `Ctx::standalone(..).with_now(..)` alone.

pub mod twins;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use graph_runtime::node::BoxFuture;
use graph_runtime::prelude::*;
use graph_runtime::{Error, Store};
use graph_tests::{Trace, TraceDelta};
use sha2::{Digest, Sha256};
use twins::*;

// Copied verbatim from tests/tests/engine/main.rs.
/// The boxed future type a hand-written node over [`Trace`] returns.
pub(crate) type Fut<'a> = BoxFuture<'a, NodeResult<Trace, Route>>;

// Copied verbatim from tests/tests/engine/main.rs.
/// A node that appends its own name and follows its declared edges.
pub(crate) fn logs(
    name: &'static str,
) -> impl for<'b> Fn(&'b Trace, &'b mut Ctx) -> Fut<'b> + Send + Sync + 'static {
    move |_s, _ctx| Box::pin(async move { Ok((TraceDelta::default().log(name), Route::Declared)) })
}

// ---------------------------------------------------------------------------------------------------
// Backpressure (engine/backpressure.rs)
// ---------------------------------------------------------------------------------------------------

// Copied from tests/tests/engine/backpressure.rs, with its imported `Instant` (tokio's) spelled out.
type Spans = Arc<Mutex<Vec<(String, tokio::time::Instant, tokio::time::Instant)>>>;

// Copied from tests/tests/engine/backpressure.rs, builder verbatim (`Instant` is tokio's there).
/// One node that sleeps `ms` (its run id's number of milliseconds, read from the state) and records when
/// it ran.
fn recorder(spans: Spans) -> Graph<Trace> {
    use tokio::time::Instant;
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

// Copied verbatim from tests/tests/engine/backpressure.rs.
fn input(ms: u64) -> Trace {
    Trace { best: ms, ..Trace::default() }
}

/// [`input`] as a [`MacroTrace`].
fn macro_input(ms: u64) -> MacroTrace {
    MacroTrace { best: ms, ..MacroTrace::default() }
}

/// Twin of `recorder(spans)`: the spans go to the module's `SPANS`.
macro_rules! recorder_twin {
    ($(#[$doc:meta])* $module:ident) => {
        $(#[$doc])*
        #[graph(state = MacroTrace, name = "recorder")]
        pub mod $module {
            use super::*;
            use tokio::time::Instant;

            /// When each run's `work` ran: (run id, start, end).
            pub static SPANS: Mutex<Vec<(String, Instant, Instant)>> = Mutex::new(Vec::new());

            #[node(entry, to = END, impure = "records its span on the paused tokio clock for the test; the state does not depend on it")]
            async fn work(s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
                let ms = s.best;
                let start = Instant::now();
                tokio::time::sleep(Duration::from_millis(ms)).await;
                SPANS.lock().unwrap().push((ctx.run_id().to_owned(), start, Instant::now()));
                Ok(MacroTraceDelta::default().count(1))
            }
        }
    };
}

recorder_twin!(
    /// Twin of `recorder` for the queue-depth test.
    recorder_queued
);
recorder_twin!(
    /// Twin of `recorder` for the backpressure-timeout test.
    recorder_paused
);

/// The span of `run` in `spans`.
fn span_of(
    spans: &[(String, tokio::time::Instant, tokio::time::Instant)],
    run: &str,
) -> (tokio::time::Instant, tokio::time::Instant) {
    let (_, start, end) = spans.iter().find(|s| s.0 == run).unwrap();
    (*start, *end)
}

/// The scenario of `queue_depth_one_blocks_a_second_run_until_the_first_item_finishes`: run `a` (300 ms)
/// and, 50 ms later, `b` (10 ms) on one engine.
async fn queued<S: Reducer>(engine: &Engine<S>, input: fn(u64) -> S) -> [Result<RunOutcome<S>, Error>; 2] {
    let a = tokio::spawn({
        let e = engine.clone();
        async move { e.run("a", input(300)).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let b = tokio::spawn({
        let e = engine.clone();
        async move { e.run("b", input(10)).await }
    });
    [a.await.unwrap(), b.await.unwrap()]
}

#[tokio::test(start_paused = true)]
async fn recorder_twin_admits_a_second_run_only_when_the_queue_slot_frees() {
    let spans = Spans::default();
    let (hand, mac) = engines(
        recorder(spans.clone()),
        recorder_queued::graph(),
        EngineOptions::default().queue_depth(1).backpressure_timeout(Duration::from_secs(5)),
    );
    assert_same_shape(hand.graph(), mac.graph());
    let t0 = tokio::time::Instant::now();
    let [ha, hb] = queued(&hand, input).await;
    let t1 = tokio::time::Instant::now();
    let [ma, mb] = queued(&mac, macro_input).await;
    assert_eq!(t1 - t0, t1.elapsed(), "both scenarios take as long on the paused clock");
    for (run, h, m) in [("a", ha, ma), ("b", hb, mb)] {
        assert_twins(&hand, &mac, run, &h, &m).await;
        assert!(h.unwrap().is_completed(), "{run}");
    }
    let spans = [(t0, spans.lock().unwrap().clone()), (t1, recorder_queued::SPANS.lock().unwrap().clone())];
    for (_, spans) in &spans {
        let (_, a_end) = span_of(spans, "a");
        let (b_start, _) = span_of(spans, "b");
        assert!(b_start >= a_end, "b was admitted only once a's item released the queue slot");
    }
    let relative = |(t, spans): &(tokio::time::Instant, Vec<_>)| {
        ["a", "b"].map(|run| {
            let (start, end) = span_of(spans, run);
            (start - *t, end - *t)
        })
    };
    assert_eq!(relative(&spans[0]), relative(&spans[1]), "the same spans, from each scenario's start");
}

/// What the scenario of `waiting_past_the_backpressure_timeout_pauses_durably_and_resume_finishes` saw.
struct PausedByBackpressure<S> {
    /// How long `b` waited for admission.
    waited: Duration,
    /// `b`'s run result (a pause).
    paused: Result<RunOutcome<S>, Error>,
    /// What `b`'s pause left in the store.
    paused_observed: Observed,
    /// Whether step 0 of `b` is stored.
    checkpoint_0: bool,
    /// `a`'s run result.
    a: Result<RunOutcome<S>, Error>,
    /// `b`'s resume result.
    resumed: Result<RunOutcome<S>, Error>,
}

/// Run `a` (1 s) and, 10 ms later, `b` (10 ms), whose admission times out; then resume `b`.
async fn paused_by_backpressure<S: Reducer>(
    engine: &Engine<S>,
    input: fn(u64) -> S,
) -> PausedByBackpressure<S> {
    let a = tokio::spawn({
        let e = engine.clone();
        async move { e.run("a", input(1_000)).await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let t0 = tokio::time::Instant::now();
    let paused = engine.run("b", input(10)).await;
    let waited = t0.elapsed();
    let paused_observed = observe_result(engine, "b", &paused).await;
    let checkpoint_0 = engine.store().load_checkpoint("b", 0).await.unwrap().is_some();
    let a = a.await.unwrap();
    let resumed = engine.resume("b").await;
    PausedByBackpressure { waited, paused, paused_observed, checkpoint_0, a, resumed }
}

#[tokio::test(start_paused = true)]
async fn recorder_twin_pauses_durably_past_the_backpressure_timeout_and_resume_finishes() {
    let (hand, mac) = engines(
        recorder(Spans::default()),
        recorder_paused::graph(),
        EngineOptions::default().queue_depth(1).backpressure_timeout(Duration::from_millis(100)),
    );
    assert_same_shape(hand.graph(), mac.graph());
    let h = paused_by_backpressure(&hand, input).await;
    let m = paused_by_backpressure(&mac, macro_input).await;
    assert_eq!(h.paused_observed, m.paused_observed, "the pause left the same run behind");
    assert_twins(&hand, &mac, "a", &h.a, &m.a).await;
    let resumed = assert_twins(&hand, &mac, "b", &h.resumed, &m.resumed).await;
    assert_eq!([h.waited, m.waited], [Duration::from_millis(100); 2]);
    assert!(h.checkpoint_0 && m.checkpoint_0);
    let paused = h.paused.unwrap();
    assert_eq!(paused.status, RunStatus::Paused(PauseReason::Backpressure));
    assert_eq!(paused.steps, 0);
    assert_eq!(paused.state, input(10), "the committed state comes back with the pause");
    assert!(
        matches!(h.paused_observed.info, Some((RunStatus::Paused(PauseReason::Backpressure), 0, _))),
        "{:?}",
        h.paused_observed.info
    );
    assert!(h.a.unwrap().is_completed());
    let out = h.resumed.unwrap();
    assert!(out.is_completed());
    assert_eq!(out.state.count, 1);
    assert!(matches!(resumed.info, Some((RunStatus::Completed, 1, _))), "{:?}", resumed.info);
}

// Copied from tests/tests/engine/backpressure.rs (`one_run_wider_than_the_queue_still_completes`), builder
// verbatim.
fn wide() -> Graph<Trace> {
    Graph::<Trace>::builder("wide")
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
        .unwrap()
}

/// Twin of the wide graph: `fan` → `a`, `b`, `c`, each adding one.
#[graph(state = MacroTrace, name = "wide")]
pub mod wide {
    use super::*;

    #[node(entry, to = [a, b, c])]
    async fn fan(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(MacroTraceDelta::default())
    }

    #[node(to = END)]
    async fn a(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(MacroTraceDelta::default().count(1))
    }

    #[node(to = END)]
    async fn b(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(MacroTraceDelta::default().count(1))
    }

    #[node(to = END)]
    async fn c(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(MacroTraceDelta::default().count(1))
    }
}

#[tokio::test(start_paused = true)]
async fn wide_twin_completes_a_step_wider_than_the_queue() {
    let (hand, mac) = engines(wide(), wide::graph(), EngineOptions::default().queue_depth(1));
    let pair = twin(&hand, &mac, "w", None).await;
    assert_eq!(pair.out().state.count, 3);
    assert_eq!(pair.elapsed[0], pair.elapsed[1]);
}

// ---------------------------------------------------------------------------------------------------
// Cancellation (engine/cancellation.rs)
// ---------------------------------------------------------------------------------------------------

// Copied verbatim from tests/tests/engine/cancellation.rs.
/// Counts live node futures and how many saw the cancellation before they ended.
#[derive(Default)]
struct Witness {
    live: AtomicUsize,
    observed: AtomicUsize,
    started: AtomicUsize,
}

// Copied verbatim from tests/tests/engine/cancellation.rs.
struct Alive {
    witness: Arc<Witness>,
    token: CancellationToken,
}

// Copied verbatim from tests/tests/engine/cancellation.rs.
impl Drop for Alive {
    fn drop(&mut self) {
        if self.token.is_cancelled() {
            self.witness.observed.fetch_add(1, Ordering::SeqCst);
        }
        self.witness.live.fetch_sub(1, Ordering::SeqCst);
    }
}

// Copied from tests/tests/engine/cancellation.rs (`cancel_100ms_into_five_long_nodes_...`), builder
// verbatim.
/// start → long0..long4, each waiting a minute or for the cancellation.
fn long(witness: Arc<Witness>) -> Graph<Trace> {
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
    b.build().unwrap()
}

/// Twin of `long(witness)`: the witness is the module's `WITNESS`.
#[graph(state = MacroTrace, name = "long")]
pub mod long {
    use super::*;

    /// Live, started and cancelled nodes.
    pub(crate) static WITNESS: LazyLock<Arc<Witness>> = LazyLock::new(Arc::default);

    async fn wait(ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        let w = WITNESS.clone();
        w.live.fetch_add(1, Ordering::SeqCst);
        w.started.fetch_add(1, Ordering::SeqCst);
        let _alive = Alive { witness: w.clone(), token: ctx.cancellation_token() };
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = ctx.cancelled() => {}
        }
        Ok(MacroTraceDelta::default())
    }

    #[node(entry, to = [long0, long1, long2, long3, long4])]
    async fn start(_s: &MacroTrace, _ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(logged("start"))
    }

    #[node(to = END)]
    async fn long0(_s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        wait(ctx).await
    }

    #[node(to = END)]
    async fn long1(_s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        wait(ctx).await
    }

    #[node(to = END)]
    async fn long2(_s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        wait(ctx).await
    }

    #[node(to = END)]
    async fn long3(_s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        wait(ctx).await
    }

    #[node(to = END)]
    async fn long4(_s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        wait(ctx).await
    }
}

/// Runs `cancel-me` with a token cancelled 100 ms (real time) later; returns its result and how long it
/// took.
async fn cancelled_after_100ms<S: Reducer + Default>(
    engine: &Engine<S>,
) -> (Result<RunOutcome<S>, Error>, Duration) {
    let token = CancellationToken::new();
    let canceller = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        canceller.cancel();
    });
    let t0 = std::time::Instant::now();
    let result = engine.run_with("cancel-me", S::default(), RunOptions::default().cancel(token)).await;
    (result, t0.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_twin_is_cancelled_promptly_and_every_node_observes_it() {
    let witness = Arc::new(Witness::default());
    let (hand, mac) = engines(long(witness.clone()), long::graph(), EngineOptions::default());
    assert_same_shape(hand.graph(), mac.graph());
    let (h, h_elapsed) = cancelled_after_100ms(&hand).await;
    let (m, m_elapsed) = cancelled_after_100ms(&mac).await;
    let observed = assert_twins(&hand, &mac, "cancel-me", &h, &m).await;
    for err in [h.unwrap_err(), m.unwrap_err()] {
        assert!(matches!(err, Error::Cancelled { step: 1, .. }), "{err:?}");
    }
    for elapsed in [h_elapsed, m_elapsed] {
        assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
    }
    for w in [&witness, &*long::WITNESS] {
        assert_eq!(w.started.load(Ordering::SeqCst), 5);
        assert_eq!(w.observed.load(Ordering::SeqCst), 5, "every node saw the cancellation");
        assert_eq!(w.live.load(Ordering::SeqCst), 0, "no node outlives the run call");
    }
    assert!(
        matches!(observed.info, Some((RunStatus::Cancelled, 1, _))),
        "the step being executed stays committed, the next is not: {:?}",
        observed.info
    );
}

// Copied from tests/tests/engine/cancellation.rs (`engine_cancel_by_run_id_reaches_a_node_in_retry_backoff`),
// builder verbatim.
fn backoff() -> Graph<Trace> {
    Graph::<Trace>::builder("backoff")
        .node_with(
            "flaky",
            |_s, _c| Box::pin(async { Err(NodeError::new("transient")) }),
            NodePolicy::default()
                .retry(RetryPolicy::attempts(5).backoff(Backoff::Fixed(Duration::from_secs(3600)))),
        )
        .entry("flaky")
        .edge("flaky", END)
        .build()
        .unwrap()
}

/// Twin of the backoff graph: a node that always fails, retried after an hour.
#[graph(state = MacroTrace, name = "backoff")]
pub mod backoff {
    use super::*;

    #[node(entry, to = END, retry(attempts = 5, backoff = fixed("1h")))]
    async fn flaky(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Err(NodeError::new("transient"))
    }
}

/// Starts `in-backoff`, cancels it by run id 100 ms later; returns its result, how long it took to stop
/// after the cancel, and whether a second cancel still found it.
async fn cancelled_in_backoff<S: Reducer + Default>(
    engine: &Engine<S>,
) -> (Result<RunOutcome<S>, Error>, Duration, bool) {
    let e2 = engine.clone();
    let handle = tokio::spawn(async move { e2.run("in-backoff", S::default()).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = tokio::time::Instant::now();
    assert!(engine.cancel("in-backoff"));
    let result = handle.await.unwrap();
    (result, t0.elapsed(), engine.cancel("in-backoff"))
}

#[tokio::test(start_paused = true)]
async fn backoff_twin_is_cancelled_by_run_id_during_its_retry_backoff() {
    let (hand, mac) = engines(backoff(), backoff::graph(), EngineOptions::default());
    assert_same_shape(hand.graph(), mac.graph());
    let (h, h_elapsed, h_again) = cancelled_in_backoff(&hand).await;
    let (m, m_elapsed, m_again) = cancelled_in_backoff(&mac).await;
    assert_twins(&hand, &mac, "in-backoff", &h, &m).await;
    for err in [h.unwrap_err(), m.unwrap_err()] {
        assert!(matches!(err, Error::Cancelled { .. }), "{err:?}");
    }
    assert_eq!(h_elapsed, m_elapsed);
    assert!(h_elapsed < Duration::from_secs(1), "the hour-long backoff was not waited out");
    assert!(!h_again && !m_again, "the run is no longer active");
    // Not cancelled (and with a budget above the default 10 minutes), both wait out the same four
    // hour-long backoffs: the twin's retry policy is the hand one.
    let budget = EngineOptions::default().run_wall_clock_budget(Duration::from_secs(5 * 3600));
    let (hand, mac) = engines(backoff(), backoff::graph(), budget);
    let exhausted = twin(&hand, &mac, "exhausted", None).await;
    for err in exhausted.errors() {
        assert!(matches!(err, Error::NodeFailed { attempts: 5, .. }), "{err:?}");
    }
    assert_eq!(exhausted.elapsed, [Duration::from_secs(4 * 3600); 2]);
}

// Copied from tests/tests/engine/cancellation.rs (`a_cancelled_run_resumes_to_the_same_result_...`), the
// closure `g` as a function, builder verbatim.
/// `park`: the first time step 3 runs, wait for cancellation.
fn steps(park: bool) -> Graph<Trace> {
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
}

/// Twin of `steps(park)`: `PARK` is the flag.
macro_rules! steps_twin {
    ($(#[$doc:meta])* $module:ident: park = $park:literal) => {
        $(#[$doc])*
        #[graph(state = MacroTrace, name = "steps")]
        pub mod $module {
            use super::*;

            /// Whether the next run of step 3 waits for cancellation.
            pub static PARK: AtomicBool = AtomicBool::new($park);

            #[node(entry, to = [tick, END], impure = "test instrumentation: a flag in the static `PARK` parks one run")]
            async fn tick(s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace, tick::Next> {
                let n = s.count;
                if n == 3 && PARK.swap(false, Ordering::SeqCst) {
                    ctx.cancelled().await;
                }
                let next = if n < 6 { tick::Next::Tick } else { tick::Next::End };
                Ok((MacroTraceDelta::default().count(1).log(vec![format!("t{n}")]), next))
            }
        }
    };
}

steps_twin!(
    /// Twin of `steps(false)`.
    steps_straight: park = false
);
steps_twin!(
    /// Twin of `steps(true)`.
    steps_parked: park = true
);

/// Runs `interrupted` until it parks in step 3, cancels it by run id, observes the cancelled run, then
/// resumes it.
async fn interrupted<S: Reducer + Default>(engine: &Engine<S>) -> (Observed, Result<RunOutcome<S>, Error>) {
    let e2 = engine.clone();
    let handle = tokio::spawn(async move { e2.run("interrupted", S::default()).await });
    while engine.store().run_info("interrupted").await.unwrap().is_none_or(|i| i.latest_step < 3) {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    engine.cancel("interrupted");
    let cancelled = handle.await.unwrap();
    assert!(matches!(cancelled, Err(Error::Cancelled { step: 3, .. })), "{cancelled:?}");
    let observed = observe_result(engine, "interrupted", &cancelled).await;
    (observed, engine.resume("interrupted").await)
}

#[tokio::test]
async fn steps_twin_cancelled_and_resumed_ends_like_an_uninterrupted_run() {
    let (hand, mac) = engines(steps(false), steps_straight::graph(), EngineOptions::default());
    let straight = twin(&hand, &mac, "straight", None).await;
    let (hand, mac) = engines(steps(true), steps_parked::graph(), EngineOptions::default());
    assert_same_shape(hand.graph(), mac.graph());
    let (h_cancelled, h) = interrupted(&hand).await;
    let (m_cancelled, m) = interrupted(&mac).await;
    assert_eq!(h_cancelled, m_cancelled, "the cancelled runs left the same history behind");
    assert!(matches!(h_cancelled.info, Some((RunStatus::Cancelled, 3, _))), "{:?}", h_cancelled.info);
    let resumed = assert_twins(&hand, &mac, "interrupted", &h, &m).await;
    let out = h.unwrap();
    assert_eq!(out.state, straight.out().state);
    assert_eq!(out.steps, straight.out().steps);
    assert_eq!(resumed.history, straight.observed.history, "the resumed run committed the straight history");
}

// ---------------------------------------------------------------------------------------------------
// Concurrency limits (engine/concurrency.rs)
// ---------------------------------------------------------------------------------------------------

// Copied verbatim from tests/tests/engine/concurrency.rs.
/// Counts running nodes and remembers the peak.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    peak: AtomicUsize,
}

// Copied verbatim from tests/tests/engine/concurrency.rs.
impl Gauge {
    fn enter(self: &Arc<Self>) -> GaugeGuard {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(n, Ordering::SeqCst);
        GaugeGuard(self.clone())
    }
}

// Copied verbatim from tests/tests/engine/concurrency.rs.
struct GaugeGuard(Arc<Gauge>);

// Copied verbatim from tests/tests/engine/concurrency.rs.
impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

// Copied verbatim from tests/tests/engine/concurrency.rs.
/// fan → `n` slow branches of node `slow` (forked with inputs so they do not join) → END.
fn slow_fan(n: usize, gauge: Arc<Gauge>, policy: NodePolicy) -> Graph<Trace> {
    Graph::<Trace>::builder("slow-fan")
        .node("fan", move |_s, _c| {
            Box::pin(async move {
                let branches = (0..n).map(|i| Branch::with_input(0, &i)).collect::<Result<Vec<_>, _>>()?;
                Ok((TraceDelta::default(), Route::Fork(branches)))
            })
        })
        .node_with(
            "slow",
            move |_s, _c| {
                let gauge = gauge.clone();
                Box::pin(async move {
                    let _g = gauge.enter();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok((TraceDelta::default().count(1), Route::Declared))
                })
            },
            policy,
        )
        .entry("fan")
        .edge("fan", "slow")
        .edge("slow", END)
        .build()
        .unwrap()
}

/// Twin of `slow_fan(10, gauge, policy)`: the policy becomes options of `#[node]` on `slow`, the gauge is
/// the module's `GAUGE`.
macro_rules! slow_fan_twin {
    ($(#[$doc:meta])* $module:ident $(: $($policy:tt)+)?) => {
        $(#[$doc])*
        #[graph(state = MacroTrace, name = "slow-fan")]
        pub mod $module {
            use super::*;

            const N: usize = 10;

            /// Running `slow` items and their peak.
            pub(crate) static GAUGE: LazyLock<Arc<Gauge>> = LazyLock::new(Arc::default);

            #[node(entry, to = slow)]
            async fn fan(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace, fan::Fork> {
                let mut fork = fan::Fork::new();
                for i in 0..N {
                    fork = fork.slow_with(&i)?;
                }
                Ok((MacroTraceDelta::default(), fork))
            }

            #[node(to = END $(, $($policy)+)?)]
            async fn slow(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
                let _g = GAUGE.enter();
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(MacroTraceDelta::default().count(1))
            }
        }
    };
}

slow_fan_twin!(
    /// Twin of `slow_fan(10, _, default)` under a run limit of 3.
    slow_fan_bounded
);
slow_fan_twin!(
    /// Twin of `slow_fan(10, _, default)` under a run limit of 3 on real threads.
    slow_fan_bounded_mt
);
slow_fan_twin!(
    /// Twin of `slow_fan(10, _, max_concurrency(2))`.
    slow_fan_per_node: max_concurrency = 2
);
slow_fan_twin!(
    /// Twin of `slow_fan(10, _, default)` under an engine-wide per-node limit of 4.
    slow_fan_engine_per_node
);

#[tokio::test(start_paused = true)]
async fn slow_fan_twin_runs_at_most_three_of_ten_at_once_and_at_least_two() {
    let gauge = Arc::new(Gauge::default());
    let (hand, mac) = engines(
        slow_fan(10, gauge.clone(), NodePolicy::default()),
        slow_fan_bounded::graph(),
        EngineOptions::default().max_concurrent_nodes(3),
    );
    let pair = twin(&hand, &mac, "bounded", None).await;
    assert_eq!(pair.out().state.count, 10);
    for peak in [gauge.peak.load(Ordering::SeqCst), slow_fan_bounded::GAUGE.peak.load(Ordering::SeqCst)] {
        assert!((2..=3).contains(&peak), "peak {peak}");
    }
    // 10 items of 50 ms, 3 at a time: 4 waves.
    assert_eq!(pair.elapsed, [Duration::from_millis(200); 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_fan_twin_holds_the_run_limit_on_real_threads() {
    let gauge = Arc::new(Gauge::default());
    let (hand, mac) = engines(
        slow_fan(10, gauge.clone(), NodePolicy::default()),
        slow_fan_bounded_mt::graph(),
        EngineOptions::default().max_concurrent_nodes(3),
    );
    let pair = twin(&hand, &mac, "bounded-mt", None).await;
    assert_eq!(pair.out().state.count, 10);
    for peak in [gauge.peak.load(Ordering::SeqCst), slow_fan_bounded_mt::GAUGE.peak.load(Ordering::SeqCst)] {
        assert!((2..=3).contains(&peak), "peak {peak}");
    }
}

#[tokio::test(start_paused = true)]
async fn slow_fan_twin_holds_the_per_node_limit_below_the_run_limit() {
    let gauge = Arc::new(Gauge::default());
    let (hand, mac) = engines(
        slow_fan(10, gauge.clone(), NodePolicy::default().max_concurrency(2)),
        slow_fan_per_node::graph(),
        EngineOptions::default().max_concurrent_nodes(8),
    );
    let pair = twin(&hand, &mac, "per-node", None).await;
    assert_eq!(gauge.peak.load(Ordering::SeqCst), 2);
    assert_eq!(slow_fan_per_node::GAUGE.peak.load(Ordering::SeqCst), 2);
    assert_eq!(pair.elapsed, [Duration::from_millis(250); 2], "10 items, 2 at a time");

    let gauge = Arc::new(Gauge::default());
    let (hand, mac) = engines(
        slow_fan(10, gauge.clone(), NodePolicy::default()),
        slow_fan_engine_per_node::graph(),
        EngineOptions::default().max_concurrent_nodes(8).max_per_node_concurrency(4),
    );
    let pair = twin(&hand, &mac, "engine-per-node", None).await;
    assert_eq!(gauge.peak.load(Ordering::SeqCst), 4);
    assert_eq!(slow_fan_engine_per_node::GAUGE.peak.load(Ordering::SeqCst), 4);
    assert_eq!(pair.elapsed, [Duration::from_millis(150); 2], "10 items, 4 at a time");
}

// ---------------------------------------------------------------------------------------------------
// Errors (engine/errors.rs)
// ---------------------------------------------------------------------------------------------------

// Copied from tests/tests/engine/errors.rs (`an_empty_fork_is_no_progress`), builder verbatim.
fn stuck() -> Graph<Trace> {
    Graph::<Trace>::builder("stuck")
        .node("a", |_s, _c| Box::pin(async { Ok((TraceDelta::default(), Route::Fork(vec![]))) }))
        .entry("a")
        .edge("a", END)
        .build()
        .unwrap()
}

/// Twin of the stuck graph: `a` forks into no branch.
#[graph(state = MacroTrace, name = "stuck")]
pub mod stuck {
    use super::*;

    #[node(entry, to = END)]
    async fn a(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace, a::Fork> {
        Ok((MacroTraceDelta::default(), a::Fork::new()))
    }
}

#[tokio::test]
async fn stuck_twin_makes_no_progress() {
    let pair = twin_once(stuck(), stuck::graph(), "np").await;
    for err in pair.errors() {
        assert!(matches!(err, Error::NoProgress { node, step: 0, .. } if node == "a"), "{err:?}");
    }
}

// Copied from tests/tests/engine/errors.rs (`an_endless_loop_hits_max_steps`), builder verbatim.
fn endless() -> Graph<Trace> {
    Graph::<Trace>::builder("loop")
        .node("a", |_s, _c| Box::pin(async { Ok((TraceDelta::default().count(1), Route::Goto(0))) }))
        .entry("a")
        .edge("a", "a")
        .edge("a", END)
        .build()
        .unwrap()
}

/// Twin of the endless loop: `a` always routes back to itself.
#[graph(state = MacroTrace, name = "loop")]
pub mod endless {
    use super::*;

    #[node(entry, to = [a, END])]
    async fn a(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace, a::Next> {
        Ok((MacroTraceDelta::default().count(1), a::Next::A))
    }
}

#[tokio::test]
async fn endless_twin_hits_max_steps() {
    let (hand, mac) = engines(endless(), endless::graph(), EngineOptions::default().max_steps(25));
    let pair = twin(&hand, &mac, "ms", None).await;
    for err in pair.errors() {
        assert!(matches!(err, Error::MaxStepsExceeded { max_steps: 25, .. }), "{err:?}");
    }
    assert!(matches!(pair.observed.info, Some((RunStatus::Failed(_), 25, _))), "{:?}", pair.observed.info);
}

// Copied from tests/tests/engine/errors.rs (`ten_of_ten_failing_nodes_fail_the_run_promptly`), builder
// verbatim.
fn all_fail(started: Arc<AtomicUsize>) -> Graph<Trace> {
    let mut b = Graph::<Trace>::builder("all-fail").node("start", logs("start")).entry("start");
    for i in 0..10 {
        let s = started.clone();
        let name = format!("f{i}");
        b = b
            .node(name.clone(), move |_st, _c| {
                s.fetch_add(1, Ordering::SeqCst);
                Box::pin(async move { Err(NodeError::new(format!("f{i} failed"))) })
            })
            .edge("start", name.clone())
            .edge(name, END);
    }
    b.build().unwrap()
}

/// Twin of `all_fail`: `start` → the failing nodes named (each fails with "<name> failed") → END.
macro_rules! all_fail_twin {
    ($(#[$doc:meta])* $module:ident: $($f:ident),+) => {
        $(#[$doc])*
        #[graph(state = MacroTrace, name = "all-fail")]
        pub mod $module {
            use super::*;

            /// Failing nodes started so far.
            pub static STARTED: AtomicUsize = AtomicUsize::new(0);

            #[node(entry, to = [$($f),+])]
            async fn start(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
                Ok(logged("start"))
            }

            $(
                #[node(to = END, impure = "test instrumentation: counts in the static `STARTED`")]
                async fn $f(_st: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
                    STARTED.fetch_add(1, Ordering::SeqCst);
                    Err(NodeError::new(format!("{} failed", stringify!($f))))
                }
            )+
        }
    };
}

all_fail_twin!(
    /// Twin of the ten failing nodes.
    all_fail_10: f0, f1, f2, f3, f4, f5, f6, f7, f8, f9
);

/// The node a `NodeFailed` error names.
fn failed_node(result: &Result<RunOutcome<impl Reducer>, Error>) -> String {
    match result {
        Err(Error::NodeFailed { node, .. }) => node.clone(),
        other => panic!("expected NodeFailed, got {other:?}"),
    }
}

/// `o` with every mention of the failed node `node` (in the error and the run row's status) replaced.
fn masking_failed_node(mut o: Observed, node: &str) -> Observed {
    let mask = |s: &mut String| *s = s.replace(node, "<failed node>");
    if let Err(view) = &mut o.outcome {
        mask(&mut view.debug);
        mask(&mut view.display);
        view.sources.iter_mut().for_each(mask);
    }
    if let Some((RunStatus::Failed(msg), _, _)) = &mut o.info {
        mask(msg);
    }
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_fail_twin_fails_the_run_promptly() {
    let started = Arc::new(AtomicUsize::new(0));
    let (hand, mac) = engines(
        all_fail(started.clone()),
        all_fail_10::graph(),
        EngineOptions::default().max_concurrent_nodes(10),
    );
    assert_same_shape(hand.graph(), mac.graph());
    let t0 = std::time::Instant::now();
    let h = tokio::time::timeout(Duration::from_secs(5), hand.run("ff", Trace::default()))
        .await
        .expect("no deadlock");
    assert!(t0.elapsed() < Duration::from_secs(1));
    let t0 = std::time::Instant::now();
    let m = tokio::time::timeout(Duration::from_secs(5), mac.run("ff", MacroTrace::default()))
        .await
        .expect("no deadlock");
    assert!(t0.elapsed() < Duration::from_secs(1));
    let (h_node, m_node) = (failed_node(&h), failed_node(&m));
    // Which of the ten failures is joined first is a race in both graphs: compare all the rest.
    assert_eq!(
        masking_failed_node(observe_result(&hand, "ff", &h).await, &h_node),
        masking_failed_node(observe_result(&mac, "ff", &m).await, &m_node),
    );
    for (err, node) in [(h.unwrap_err(), h_node), (m.unwrap_err(), m_node)] {
        assert!(matches!(&err, Error::NodeFailed { step: 1, attempts: 1, .. }), "{err:?}");
        assert!((0..10).any(|i| node == format!("f{i}")), "{node}");
        assert_eq!(std::error::Error::source(&err).unwrap().to_string(), format!("{node} failed"));
    }
    assert!(started.load(Ordering::SeqCst) >= 1);
    assert!(all_fail_10::STARTED.load(Ordering::SeqCst) >= 1);
}

// Copied from tests/tests/engine/errors.rs (`a_panicking_node_is_a_typed_error`), builder verbatim.
fn panics() -> Graph<Trace> {
    Graph::<Trace>::builder("panics")
        .node("p", |_s, _c| Box::pin(async { panic!("kaboom") }))
        .entry("p")
        .edge("p", END)
        .build()
        .unwrap()
}

/// Twin of the panicking graph.
#[graph(state = MacroTrace, name = "panics")]
pub mod panics {
    use super::*;

    #[node(entry, to = END)]
    async fn p(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        panic!("kaboom")
    }
}

#[tokio::test]
async fn panics_twin_is_a_typed_error() {
    let pair = twin_once(panics(), panics::graph(), "p").await;
    for err in pair.errors() {
        assert!(matches!(err, Error::NodePanicked { message, .. } if message == "kaboom"), "{err:?}");
    }
}

// Copied verbatim from tests/tests/engine/errors.rs.
/// start → x, y (both write `last`, an overwrite field) → END.
fn two_writers() -> Graph<Trace> {
    Graph::<Trace>::builder("conflict")
        .node("start", logs("start"))
        .node("x", |_s, _c| {
            Box::pin(async { Ok((TraceDelta::default().last("x").count(1), Route::Declared)) })
        })
        .node("y", |_s, _c| {
            Box::pin(async { Ok((TraceDelta::default().last("y").count(1), Route::Declared)) })
        })
        .entry("start")
        .edge("start", "x")
        .edge("start", "y")
        .edge("x", END)
        .edge("y", END)
        .build()
        .unwrap()
}

/// Twin of `two_writers()`: `x` and `y` both overwrite `last` in one step.
#[graph(state = MacroTrace, name = "conflict")]
pub mod two_writers {
    use super::*;

    #[node(entry, to = [x, y])]
    async fn start(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(logged("start"))
    }

    #[node(to = END)]
    async fn x(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(MacroTraceDelta::default().last(Some("x".into())).count(1))
    }

    #[node(to = END)]
    async fn y(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(MacroTraceDelta::default().last(Some("y".into())).count(1))
    }
}

/// Engines for `two_writers` and its twin under `policy`.
fn two_writer_engines(policy: ConflictPolicy) -> (Engine<Trace>, Engine<MacroTrace>) {
    engines(two_writers(), two_writers::graph(), EngineOptions::default().conflict_policy(policy))
}

#[tokio::test]
async fn two_writers_twin_conflicts_by_default_naming_the_field_and_both_nodes() {
    let pair = twin_once(two_writers(), two_writers::graph(), "c").await;
    for err in pair.errors() {
        let Error::Conflict { source, .. } = err else { panic!("{err:?}") };
        assert_eq!(
            (source.field, source.first_node.as_str(), source.second_node.as_str()),
            ("last", "x", "y")
        );
        assert_eq!(source.step, 1);
        let msg = err.to_string();
        assert!(msg.contains("`last`") && msg.contains("`x`") && msg.contains("`y`"), "{msg}");
    }
}

#[tokio::test]
async fn two_writers_twin_last_writer_wins_with_the_highest_order_key() {
    let (hand, mac) = two_writer_engines(ConflictPolicy::LastWriterWins);
    let pair = twin(&hand, &mac, "c", None).await;
    assert_eq!(pair.out().state.last.as_deref(), Some("y"));
    assert_eq!(pair.out().state.count, 2);
}

// Copied from tests/tests/engine/errors.rs (`crdt_allows_commutative_fields_only`), builder verbatim.
fn sums() -> Graph<Trace> {
    Graph::<Trace>::builder("sums")
        .node("start", |_s, _c| Box::pin(async { Ok((TraceDelta::default(), Route::Declared)) }))
        .node("x", |_s, _c| {
            Box::pin(async { Ok((TraceDelta::default().count(2).tag("x"), Route::Declared)) })
        })
        .node("y", |_s, _c| {
            Box::pin(async { Ok((TraceDelta::default().count(3).tag("y"), Route::Declared)) })
        })
        .entry("start")
        .edge("start", "x")
        .edge("start", "y")
        .edge("x", END)
        .edge("y", END)
        .build()
        .unwrap()
}

/// Twin of the sums graph: `x` and `y` write only commutative fields.
#[graph(state = MacroTrace, name = "sums")]
pub mod sums {
    use super::*;

    #[node(entry, to = [x, y])]
    async fn start(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(MacroTraceDelta::default())
    }

    #[node(to = END)]
    async fn x(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(MacroTraceDelta::default().count(2).tags(tag("x")))
    }

    #[node(to = END)]
    async fn y(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(MacroTraceDelta::default().count(3).tags(tag("y")))
    }
}

#[tokio::test]
async fn crdt_twins_allow_commutative_fields_only() {
    let (hand, mac) = two_writer_engines(ConflictPolicy::Crdt);
    let pair = twin(&hand, &mac, "c", None).await;
    for err in pair.errors() {
        assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    }
    let (hand, mac) =
        engines(sums(), sums::graph(), EngineOptions::default().conflict_policy(ConflictPolicy::Crdt));
    let pair = twin(&hand, &mac, "c", None).await;
    assert_eq!(pair.out().state.count, 5);
    assert_eq!(pair.out().state.tags.len(), 2);
}

#[tokio::test]
async fn two_writers_twin_refuses_a_reused_run_id_and_resumes_only_a_stored_run() {
    let (hand, mac) = two_writer_engines(ConflictPolicy::LastWriterWins);
    twin(&hand, &mac, "once", None).await;
    let again = twin(&hand, &mac, "once", None).await;
    for err in again.errors() {
        assert!(matches!(err, Error::RunExists { .. }), "{err:?}");
    }
    let (h, m) = (hand.resume("never").await, mac.resume("never").await);
    let [h, m] = [h.unwrap_err(), m.unwrap_err()];
    assert!(matches!(h, Error::RunNotFound { .. }), "{h:?}");
    assert_eq!(ErrorView::of(&h), ErrorView::of(&m));
}

// Copied from tests/tests/engine/errors.rs (`resuming_a_completed_run_returns_its_state_without_executing`),
// builder verbatim.
fn once(calls: Arc<AtomicUsize>) -> Graph<Trace> {
    let c = calls;
    Graph::<Trace>::builder("once")
        .node("a", move |_s, _c| {
            c.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok((TraceDelta::default().count(7), Route::Declared)) })
        })
        .entry("a")
        .edge("a", END)
        .build()
        .unwrap()
}

/// Twin of the once graph: `a` counts its calls in `CALLS`.
#[graph(state = MacroTrace, name = "once")]
pub mod once {
    use super::*;

    /// Calls of `a` so far.
    pub static CALLS: AtomicUsize = AtomicUsize::new(0);

    #[node(entry, to = END, impure = "test instrumentation: counts in the static `CALLS`")]
    async fn a(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        CALLS.fetch_add(1, Ordering::SeqCst);
        Ok(MacroTraceDelta::default().count(7))
    }
}

#[tokio::test]
async fn once_twin_resumes_a_completed_run_without_executing() {
    let calls = Arc::new(AtomicUsize::new(0));
    let (hand, mac) = engines(once(calls.clone()), once::graph(), EngineOptions::default());
    let first = twin(&hand, &mac, "done", None).await;
    let (h, m) = (hand.resume("done").await, mac.resume("done").await);
    let again = assert_twins(&hand, &mac, "done", &h, &m).await;
    assert_eq!(again, first.observed, "resuming a completed run changes nothing");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(once::CALLS.load(Ordering::SeqCst), 1);
    let again = h.unwrap();
    assert_eq!(again.state, first.out().state);
    assert!(again.is_completed());
}

// Copied from tests/tests/engine/errors.rs (`resuming_with_a_different_graph_is_graph_changed`), builder
// verbatim.
fn other() -> Graph<Trace> {
    Graph::<Trace>::builder("other").node("z", logs("z")).entry("z").edge("z", END).build().unwrap()
}

/// Twin of the other graph: one node `z`.
#[graph(state = MacroTrace, name = "other")]
pub mod other {
    use super::*;

    #[node(entry, to = END)]
    async fn z(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(logged("z"))
    }
}

#[tokio::test]
async fn resuming_a_twin_run_with_another_graph_is_graph_changed() {
    let (hand, mac) = two_writer_engines(ConflictPolicy::LastWriterWins);
    twin(&hand, &mac, "g", None).await;
    let hand2 = Engine::builder(other()).shared_store(hand.store().clone()).build();
    let mac2 = Engine::builder(other::graph()).shared_store(mac.store().clone()).build();
    assert_same_shape(hand2.graph(), mac2.graph());
    let (h, m) = (hand2.resume("g").await.unwrap_err(), mac2.resume("g").await.unwrap_err());
    // Each reports its own fingerprints (they differ between twins by design: the macro's include the
    // node signatures); with those named alike, the errors are the same.
    let fingerprints = [
        (&h, hand.graph().fingerprint(), hand2.graph().fingerprint()),
        (&m, two_writers::FINGERPRINT, other::FINGERPRINT),
    ];
    let mut views = Vec::new();
    for (err, stored_fp, current_fp) in fingerprints {
        let Error::GraphChanged { run, stored, current } = err else { panic!("{err:?}") };
        assert_eq!((run.as_str(), stored.as_str(), current.as_str()), ("g", stored_fp, current_fp));
        let mut view = ErrorView::of(err);
        for s in [&mut view.debug, &mut view.display] {
            *s = s.replace(stored_fp, "<stored>").replace(current_fp, "<current>");
        }
        views.push(view);
    }
    assert_eq!(views[0], views[1]);
    // Which is why a run started by a hand-built graph cannot be resumed by its twin.
    let crossed = Engine::builder(two_writers::graph()).shared_store(hand.store().clone()).build();
    assert!(matches!(crossed.resume("g").await, Err(Error::GraphChanged { .. })));
}

// Copied from tests/tests/engine/errors.rs (`fingerprints_follow_structure`), the closure `g` as a
// function, builder verbatim.
fn g(to: &str) -> Graph<Trace> {
    Graph::<Trace>::builder("g")
        .node("a", logs("a"))
        .node("b", logs("b"))
        .entry("a")
        .edge("a", to)
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap()
}

/// Twin of `g(END)`: `a` → END and `b`, `b` → END. (`g("b")` declares `a -> b` twice: no twin.)
#[graph(state = MacroTrace, name = "g")]
pub mod g_end {
    use super::*;

    #[node(entry, to = [END, b])]
    async fn a(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(logged("a"))
    }

    #[node(to = END)]
    async fn b(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(logged("b"))
    }
}

#[tokio::test]
async fn g_end_twin_renders_and_fingerprints_like_its_structure() {
    let pair = twin_once(g(END), g_end::graph(), "g").await;
    assert_eq!(pair.out().state.log, ["a", "b"]);
    let (hand, mac) = (g(END), g_end::graph());
    assert_eq!(hand.dot(), mac.dot());
    assert!(mac.mermaid().contains("a -->|1| b"));
    assert!(mac.dot().contains("\"b\" -> \"__end__\" [label=\"0\"]"));
    assert_eq!(mac.fingerprint(), g_end::FINGERPRINT);
    assert_eq!(g_end::graph().fingerprint(), mac.fingerprint(), "a function of the description");
    assert_ne!(mac.fingerprint(), hand.fingerprint(), "the macro's fingerprint includes the signatures");
}

/// The trybuild cases that twin the invalid hand graphs of errors.rs: (case, a line of its `.stderr`).
const TRYBUILD_TWINS: [(&str, &str); 9] = [
    // a_route_to_an_undeclared_edge_is_typed: `Route::Goto(3)` with one declared edge.
    (
        "routing/undeclared-next-variant",
        "error[E0599]: no variant or associated item named `Publish` found for enum `Next`",
    ),
    ("signature/raw-route", "not a raw `Route`, whose edge index could name an edge that is not declared"),
    // graph_mistakes_are_typed_with_suggestions: GraphError::UnknownNode with a suggestion.
    (
        "graph/unknown-edge-target",
        "unknown node `sumarize` in the edges of `plan`; did you mean `summarize`?",
    ),
    // GraphError::NoEntry.
    ("graph/no-entry", "graph `flow` has no entry node"),
    // GraphError::TwoEntries.
    ("graph/two-entries", "two entry nodes, `plan` and `done`: a graph has exactly one entry"),
    // GraphError::Unreachable.
    ("graph/unreachable-node", "node `orphan` is unreachable"),
    // GraphError::NoWayToEnd.
    ("graph/loop-without-exit", "no path from node `work` reaches `END`"),
    // GraphError::DuplicateNode.
    ("graph/duplicate-node", "duplicate node `plan`"),
    // fingerprints_follow_structure, `g("b")`: the edge `a -> b` declared twice.
    ("graph/duplicate-edge", "duplicate edge `plan` -> `done`"),
];

#[test]
fn graph_mistakes_have_trybuild_twins() {
    let fail = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui-tests/tests/fail");
    for (case, message) in TRYBUILD_TWINS {
        let source = fail.join(format!("{case}.rs"));
        assert!(source.is_file(), "{} is missing", source.display());
        let stderr = std::fs::read_to_string(fail.join(format!("{case}.stderr"))).unwrap();
        assert!(stderr.contains(message), "{case}.stderr does not say {message:?}:\n{stderr}");
    }
    // The one mistake the builder does not reject.
    let dup = Graph::<Trace>::builder("g")
        .node("a", logs("a"))
        .node("b", logs("b"))
        .entry("a")
        .edge("a", "b")
        .edge("a", "b")
        .edge("b", END)
        .build();
    assert!(dup.is_ok(), "the builder accepts a duplicate edge; the macro does not");
}

// ---------------------------------------------------------------------------------------------------
// Recorded time and UUIDs (engine/recorded.rs)
// ---------------------------------------------------------------------------------------------------

// Copied verbatim from tests/tests/engine/recorded.rs.
fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

// Copied verbatim from tests/tests/engine/recorded.rs.
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

// Copied verbatim from tests/tests/engine/recorded.rs.
fn field(entry: &str, i: usize) -> &str {
    entry.split(':').nth(i).unwrap()
}

/// Twin of `clocked(n)`: `tick` loops `n` times, logging `i:now_ms:uuid` from `ctx.now()` and
/// `ctx.uuid()`.
macro_rules! clocked_twin {
    ($(#[$doc:meta])* $module:ident: $n:literal) => {
        $(#[$doc])*
        #[graph(state = MacroTrace, name = "clocked")]
        pub mod $module {
            use super::*;

            const N: u64 = $n;

            #[node(entry, to = [tick, END])]
            async fn tick(s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace, tick::Next> {
                let i = s.count;
                let entry = format!("{i}:{}:{}", ms(ctx.now()), ctx.uuid());
                let next = if i + 1 >= N { tick::Next::End } else { tick::Next::Tick };
                Ok((MacroTraceDelta::default().count(1).log(vec![entry]), next))
            }
        }
    };
}

clocked_twin!(
    /// Twin of `clocked(6)`.
    clocked_6: 6
);
clocked_twin!(
    /// Twin of `clocked(20)`.
    clocked_20: 20
);

/// [`Observed`] of a run of a `clocked` graph, with the recorded times taken out.
#[derive(Debug, PartialEq)]
struct Timeless {
    /// `(state JSON, steps, status)` or the error; times taken out.
    outcome: Result<(String, u64, RunStatus), ErrorView>,
    /// The run row: status, latest step, version.
    info: Option<(RunStatus, u64, u64)>,
    /// SHA-256 over every checkpoint's step, frontier and state JSON (times taken out).
    history: String,
    /// How many checkpoints the run committed (their idempotency keys hash the times).
    checkpoints: usize,
}

/// The state's JSON with the time of every log entry `i:now_ms:uuid` replaced by `<t i>`, after checking
/// that it is the commit time of checkpoint `i` (`times[i]`), the one the step reading it ran from.
fn without_times<S: Reducer>(state: &S, times: &[u64]) -> String {
    let mut json = serde_json::to_value(state).unwrap();
    for (i, entry) in json["log"].as_array_mut().unwrap().iter_mut().enumerate() {
        let text = entry.as_str().unwrap().to_owned();
        let now: u64 = field(&text, 1).parse().unwrap();
        assert_eq!(now, times[i], "step {i} reads its checkpoint's time");
        *entry = format!("{}:<t{i}>:{}", field(&text, 0), field(&text, 2)).into();
    }
    json.to_string()
}

/// [`observe_result`] for a `clocked` run, with its recorded times checked and taken out.
async fn observe_timeless<S: Reducer>(
    engine: &Engine<S>,
    run_id: &str,
    result: &Result<RunOutcome<S>, Error>,
) -> Timeless {
    let store: &dyn Store = &**engine.store();
    let history = store.history(run_id).await.unwrap();
    let times: Vec<u64> = history.iter().map(|m| m.timestamp_ms).collect();
    assert!(times.is_sorted(), "recorded time never goes backwards: {times:?}");
    let mut h = Sha256::new();
    for (i, meta) in history.iter().enumerate() {
        assert_eq!(meta.step, i as u64);
        let cp = store.load_checkpoint(run_id, meta.step).await.unwrap().unwrap();
        let state = engine.state_at(run_id, meta.step).await.unwrap().unwrap();
        h.update(cp.step.to_be_bytes());
        h.update(serde_json::to_vec(&cp.frontier).unwrap());
        h.update(without_times(&state, &times));
    }
    let outcome = match result {
        Ok(out) => Ok((without_times(&out.state, &times), out.steps, out.status.clone())),
        Err(e) => Err(ErrorView::of(e)),
    };
    let info = store.run_info(run_id).await.unwrap().map(|i| (i.status, i.latest_step, i.version));
    let history = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Timeless { outcome, info, history, checkpoints: times.len() }
}

/// Asserts the two `clocked` runs agree but for their recorded times.
async fn assert_timeless_twins(
    hand: &Engine<Trace>,
    twin: &Engine<MacroTrace>,
    run_id: &str,
    h: &Result<RunOutcome<Trace>, Error>,
    m: &Result<RunOutcome<MacroTrace>, Error>,
) -> Timeless {
    let observed = observe_timeless(hand, run_id, h).await;
    assert_eq!(
        observed,
        observe_timeless(twin, run_id, m).await,
        "`clocked` run `{run_id}`: the twins differ"
    );
    observed
}

/// Stops `r` after 3 steps on `short`, waits 30 ms, resumes it on `engine`: what the stop left, the
/// resumed result and the wall clock at the resume.
async fn stopped_and_resumed<S: Reducer + Default>(
    engine: &Engine<S>,
    short: &Engine<S>,
) -> (Timeless, Result<RunOutcome<S>, Error>, u64) {
    let stopped = short.run("r", S::default()).await;
    assert!(matches!(stopped, Err(Error::MaxStepsExceeded { .. })), "{stopped:?}");
    let stopped = observe_timeless(short, "r", &stopped).await;
    // Step 3 was scheduled before this pause and runs after it: it must see the recorded time, not the
    // clock at resume.
    tokio::time::sleep(Duration::from_millis(30)).await;
    let resumed_at = ms(SystemTime::now());
    (stopped, engine.resume("r").await, resumed_at)
}

#[tokio::test]
async fn clocked_twin_reads_its_steps_commit_time_even_after_a_resume() {
    let (hand, mac) = engines(clocked(6), clocked_6::graph(), EngineOptions::default());
    assert_same_shape(hand.graph(), mac.graph());
    let short = EngineOptions::default().max_steps(3);
    let short_hand =
        Engine::builder(clocked(6)).shared_store(hand.store().clone()).options(short.clone()).build();
    let short_mac =
        Engine::builder(clocked_6::graph()).shared_store(mac.store().clone()).options(short).build();
    let (h_stopped, h, h_resumed_at) = stopped_and_resumed(&hand, &short_hand).await;
    let (m_stopped, m, m_resumed_at) = stopped_and_resumed(&mac, &short_mac).await;
    assert_eq!(h_stopped, m_stopped, "the stopped runs agree but for their times");
    let resumed = assert_timeless_twins(&hand, &mac, "r", &h, &m).await;
    assert_eq!(resumed.checkpoints, 7);
    let log = |out: &[String]| out.iter().map(|e| field(e, 1).parse::<u64>().unwrap()).collect::<Vec<_>>();
    let (h, m) = (h.unwrap(), m.unwrap());
    for (times, resumed_at) in [(log(&h.state.log), h_resumed_at), (log(&m.state.log), m_resumed_at)] {
        assert_eq!(times.len(), 6);
        assert!(
            times[3] < resumed_at,
            "the resumed step read the recorded time ({}), not the clock ({resumed_at})",
            times[3]
        );
    }
}

// Copied from tests/tests/engine/recorded.rs (`every_item_and_attempt_of_a_step_sees_the_same_time`),
// builder verbatim.
fn same_time(seen: Arc<Mutex<Vec<u64>>>, failures: Arc<Mutex<u32>>) -> Graph<Trace> {
    let (s1, s2, f) = (seen.clone(), seen.clone(), failures.clone());
    Graph::<Trace>::builder("same-time")
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
        .unwrap()
}

/// Twin of the same-time graph: three `work` branches whose first two attempts fail, then `done`; every
/// attempt records `ctx.now()` in `SEEN`.
#[graph(state = MacroTrace, name = "same-time")]
pub mod same_time {
    use super::*;

    /// `ctx.now()` of every attempt, in ms.
    pub static SEEN: Mutex<Vec<u64>> = Mutex::new(Vec::new());
    /// Failed attempts of `work` so far.
    pub static FAILURES: Mutex<u32> = Mutex::new(0);

    #[node(entry, to = work)]
    async fn split(_s: &MacroTrace, _ctx: &mut Ctx) -> NodeResult<MacroTrace, split::Fork> {
        let mut fork = split::Fork::new();
        for i in 0..3 {
            fork = fork.work_with(&i)?;
        }
        Ok((MacroTraceDelta::default(), fork))
    }

    #[node(to = done, retry(attempts = 3), impure = "test instrumentation: records into the statics `SEEN` and `FAILURES`")]
    async fn work(_s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        SEEN.lock().unwrap().push(ms(ctx.now()));
        // Spread the attempts over real time: the first two attempts of the step fail.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let mut n = FAILURES.lock().unwrap();
        if *n < 2 {
            *n += 1;
            return Err(NodeError::new("flaky"));
        }
        Ok(MacroTraceDelta::default())
    }

    #[node(to = END, impure = "test instrumentation: records into the static `SEEN`")]
    async fn done(_s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        SEEN.lock().unwrap().push(ms(ctx.now()));
        Ok(MacroTraceDelta::default())
    }
}

#[tokio::test]
async fn same_time_twin_gives_every_item_and_attempt_of_a_step_one_time() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (hand, mac) = engines(
        same_time(seen.clone(), Arc::new(Mutex::new(0u32))),
        same_time::graph(),
        EngineOptions::default(),
    );
    let pair = twin(&hand, &mac, "t", None).await;
    assert!(pair.out().is_completed());
    let hand_seen = seen.lock().unwrap().clone();
    let twin_seen = same_time::SEEN.lock().unwrap().clone();
    for (engine, seen) in [(hand.store(), hand_seen), (mac.store(), twin_seen)] {
        let step1 = engine.load_checkpoint("t", 1).await.unwrap().unwrap().timestamp_ms;
        let step2 = engine.load_checkpoint("t", 2).await.unwrap().unwrap().timestamp_ms;
        assert_eq!(seen.len(), 3 + 2 + 1, "three branches, two retries, one join");
        assert!(seen[..5].iter().all(|&t| t == step1), "{seen:?} vs {step1}");
        assert_eq!(seen[5], step2);
    }
}

/// Runs `run_id` with `seed` on both `clocked` engines and asserts they agree but for the times; returns
/// the hand run's log.
async fn twin_clocked(
    hand: &Engine<Trace>,
    mac: &Engine<MacroTrace>,
    run_id: &str,
    seed: u64,
) -> Vec<String> {
    let h = hand.run_with(run_id, Trace::default(), RunOptions::default().seed(seed)).await;
    let m = mac.run_with(run_id, MacroTrace::default(), RunOptions::default().seed(seed)).await;
    assert_timeless_twins(hand, mac, run_id, &h, &m).await;
    h.unwrap().state.log
}

#[tokio::test]
async fn clocked_twin_draws_v4_uuids_distinct_per_iteration_and_repeated_with_the_seed() {
    let (hand, mac) = engines(clocked(20), clocked_20::graph(), EngineOptions::default());
    assert_same_shape(hand.graph(), mac.graph());
    let a = twin_clocked(&hand, &mac, "a", 7).await;
    let b = twin_clocked(&hand, &mac, "b", 7).await;
    let c = twin_clocked(&hand, &mac, "c", 8).await;
    let uuids = |log: &[String]| log.iter().map(|e| field(e, 2).to_owned()).collect::<Vec<_>>();
    let (ua, ub, uc) = (uuids(&a), uuids(&b), uuids(&c));
    assert_eq!(ua, ub, "same seed, same UUIDs");
    assert_eq!(ua.iter().collect::<BTreeSet<_>>().len(), 20, "one UUID per iteration");
    assert!(ua.iter().all(|u| !uc.contains(u)), "another seed, other UUIDs");
    for u in &ua {
        let parsed = graph_runtime::Uuid::parse_str(u).unwrap();
        assert_eq!(parsed.get_version_num(), 4, "{u}");
    }
}
