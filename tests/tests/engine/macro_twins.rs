//! Macro twins: hand-built test graphs over [`Trace`] written again with `#[reducer]`, `#[graph]` and
//! `#[node]` over [`MacroTrace`] (the same fields and strategies), run with the same run id, seed and
//! engine options. They must agree on everything observable (the harness of `twins/mod.rs`): the shape
//! (name, entry, nodes, edges by index, mermaid), the outcome (state bytes, steps and status, or the
//! error with every field and its source chain) and the store (history hash, idempotency keys, run row).
//!
//! A twin tests what the macros generate, one twin per feature; how the engine runs a graph is the engine
//! tests' job (`tests/tests/engine/`), and the hand-built graphs are theirs, shared through
//! `graph_tests::graphs`.
//!
//! | macro feature | twin test |
//! |---|---|
//! | `#[reducer]`: append, sum, overwrite, union, max | `the_state_twin_serializes_and_merges_like_trace` |
//! | `#[reducer]`: min, custom `with` (and its error) | `min_and_custom_merges_twin_a_hand_written_reducer` |
//! | static fan-out, a join, conditional `Next` | `fanout_loop_twin_follows_the_seed_like_the_hand_graph` |
//! | `Fork` with inputs, plain fork branches that join | `fork_twin_makes_one_activation_per_input_and_joins_plain_branches` |
//! | `retry(attempts, backoff = exponential)` | `flaky_twin_succeeds_after_two_failures_with_the_same_backoff` |
//! | `retry(backoff = fixed, jitter)` | `flaky_twin_jitters_its_backoff_like_the_hand_graph` |
//! | a node error (`NodeFailed` after the retries) | `flaky_twin_exhausts_its_retries_with_the_same_error` |
//! | `timeout`, none (the engine default), the timeout error | `sleeper_twin_times_out_like_the_hand_graph` |
//! | `max_concurrency`, none (the engine default) | `slow_fan_twin_holds_the_per_node_limit_below_the_run_limit` |
//! | a conflict (two writers of an overwrite field) | `two_writers_twin_conflicts_by_default_naming_the_field_and_both_nodes` |
//! | `FINGERPRINT`, `mermaid()`, `dot()` | `g_end_twin_renders_and_fingerprints_like_its_structure` |
//!
//! Twins of parametrised hand graphs fix the parameters (a macro graph is a static description); a family
//! of them (retry and timeout policies) comes from a small `macro_rules!` around `#[graph]`. A side channel
//! of a hand graph (an `Arc` counter or gauge captured by a closure) is a `static` in the twin's module,
//! one module per test.

mod twins;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use graph_runtime::prelude::*;
use graph_runtime::state::{FieldWrite, Strategy, merge};
use graph_runtime::{Error, MergeError};
use graph_tests::graphs::{
    Gauge, fanout_loop, flaky, fork, sleeper, slow_fan, two_edges, two_edges_builder, two_writers,
};
use graph_tests::{Trace, TraceDelta, random_delay};
use twins::*;

// ---------------------------------------------------------------------------------------------------
// Reducers
// ---------------------------------------------------------------------------------------------------

#[test]
fn the_state_twin_serializes_and_merges_like_trace() {
    let mut hand = Trace::default();
    let mut twin = MacroTrace::default();
    assert_eq!(serde_json::to_vec(&hand).unwrap(), serde_json::to_vec(&twin).unwrap());
    let hand_deltas = [
        TraceDelta::default().log("a").count(2).last("x").tag("t1").best(5),
        TraceDelta::default().log("b").count(3).tag("t0").best(4),
        TraceDelta::default().last("y").best(9),
    ];
    let twin_deltas = [
        logged("a").count(2).last("x".to_owned()).tags(tag("t1")).best(5),
        logged("b").count(3).tags(tag("t0")).best(4),
        MacroTraceDelta::default().last("y".to_owned()).best(9),
    ];
    for (h, t) in hand_deltas.into_iter().zip(twin_deltas) {
        let (mut hw, mut tw) = (Vec::new(), Vec::new());
        h.writes(&mut |w| hw.push(format!("{w:?}")));
        t.writes(&mut |w| tw.push(format!("{w:?}")));
        assert_eq!(hw, tw, "the deltas report the same field writes");
        hand.apply(h).unwrap();
        twin.apply(t).unwrap();
        assert_eq!(serde_json::to_vec(&hand).unwrap(), serde_json::to_vec(&twin).unwrap());
    }
}

/// Appends, but refuses to grow past four entries: an order-sensitive merge that can fail.
#[reducer]
fn capped(current: &mut Vec<u32>, written: Vec<u32>) -> Result<(), String> {
    if current.len() + written.len() > 4 {
        return Err(format!("at most 4 entries, got {}", current.len() + written.len()));
    }
    current.extend(written);
    Ok(())
}

/// A hand-written state with the strategies [`Trace`] lacks: `low` keeps the minimum, `items` merges
/// with [`capped`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Bounds {
    low: u64,
    items: Vec<u32>,
}

/// The delta of [`Bounds`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct BoundsDelta {
    low: Option<u64>,
    items: Option<Vec<u32>>,
}

impl Delta for BoundsDelta {
    fn writes(&self, visit: &mut dyn FnMut(FieldWrite)) {
        if self.low.is_some() {
            visit(FieldWrite::new("low", Strategy::Min));
        }
        if self.items.is_some() {
            visit(FieldWrite::new("items", Strategy::Custom));
        }
    }
}

impl Reducer for Bounds {
    type Delta = BoundsDelta;

    fn apply(&mut self, d: BoundsDelta) -> Result<(), MergeError> {
        if let Some(v) = d.low {
            merge::min(&mut self.low, v, "low")?;
        }
        if let Some(v) = d.items {
            capped(&mut self.items, v).map_err(|message| MergeError::Custom { field: "items", message })?;
        }
        Ok(())
    }
}

/// The `#[reducer]` twin of [`Bounds`].
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct MacroBounds {
    #[reduce(min)]
    low: u64,
    #[reduce(with = capped)]
    items: Vec<u32>,
}

#[test]
fn min_and_custom_merges_twin_a_hand_written_reducer() {
    let mut hand = Bounds { low: u64::MAX, ..Bounds::default() };
    let mut twin = MacroBounds { low: u64::MAX, ..MacroBounds::default() };
    let deltas =
        [(Some(5), Some(vec![1, 2])), (Some(3), None), (Some(9), Some(vec![3])), (None, Some(vec![4, 5]))];
    let mut results = Vec::new();
    for (low, items) in deltas {
        let mut t = MacroBoundsDelta::default();
        if let Some(v) = low {
            t = t.low(v);
        }
        if let Some(v) = items.clone() {
            t = t.items(v);
        }
        let h = BoundsDelta { low, items };
        let (mut hw, mut tw) = (Vec::new(), Vec::new());
        h.writes(&mut |w| hw.push(w));
        t.writes(&mut |w| tw.push(w));
        assert_eq!(hw, tw, "the deltas report the same field writes");
        let result = hand.apply(h);
        assert_eq!(result, twin.apply(t));
        results.push(result);
        assert_eq!(serde_json::to_vec(&hand).unwrap(), serde_json::to_vec(&twin).unwrap());
    }
    assert_eq!(hand, Bounds { low: 3, items: vec![1, 2, 3] });
    let custom = MergeError::Custom { field: "items", message: "at most 4 entries, got 5".into() };
    assert_eq!(results, [Ok(()), Ok(()), Ok(()), Err(custom)]);
}

// ---------------------------------------------------------------------------------------------------
// Routing: static fan-out, joins, `Next`, `Fork`
// ---------------------------------------------------------------------------------------------------

/// Twin of `fanout_loop(5, 3, 2 ms)`: five workers with random delays and `ctx.rng()` draws, three
/// iterations.
#[graph(state = MacroTrace, name = "fanout-loop")]
pub mod fanout_loop_5x3 {
    use super::*;

    const ITERATIONS: usize = 3;
    const MAX_DELAY: Duration = Duration::from_millis(2);

    async fn work(i: usize, s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        let label = format!("w{i}");
        tokio::time::sleep(random_delay(MAX_DELAY, i as u64)).await;
        let roll = ctx.rng().next_u64() % 1000;
        let seen = s.count;
        Ok(logged(format!("{label}:{roll}:{seen}")).tags(tag(label)).best(roll).count(1))
    }

    #[node(entry, to = [w0, w1, w2, w3, w4])]
    async fn plan(s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        let n = s.log.iter().filter(|l| l.starts_with("join")).count();
        Ok(logged(format!("plan{n}@{}", ctx.step())).count(1))
    }

    #[node(to = join)]
    async fn w0(s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        work(0, s, ctx).await
    }

    #[node(to = join)]
    async fn w1(s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        work(1, s, ctx).await
    }

    #[node(to = join)]
    async fn w2(s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        work(2, s, ctx).await
    }

    #[node(to = join)]
    async fn w3(s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        work(3, s, ctx).await
    }

    #[node(to = join)]
    async fn w4(s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        work(4, s, ctx).await
    }

    #[node(to = [plan, END])]
    async fn join(s: &MacroTrace, _ctx: &mut Ctx) -> NodeResult<MacroTrace, join::Next> {
        let n = s.log.iter().filter(|l| l.starts_with("join")).count();
        let next = if n + 1 < ITERATIONS { join::Next::Plan } else { join::Next::End };
        Ok((logged(format!("join{n}")), next))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_loop_twin_follows_the_seed_like_the_hand_graph() {
    let (hand, mac) = engines(
        fanout_loop(5, 3, Duration::from_millis(2)),
        fanout_loop_5x3::graph(),
        EngineOptions::default(),
    );
    let mut logs = BTreeSet::new();
    for seed in [1, 2, 3] {
        let pair = twin(&hand, &mac, &format!("seed-{seed}"), Some(seed)).await;
        let out = pair.out();
        // 3 iterations × (plan + 5 workers + one join activation), workers merged in edge order.
        assert_eq!(out.state.log.len(), 21);
        let ws: Vec<&str> = out.state.log[1..6].iter().map(|l| l.split(':').next().unwrap()).collect();
        assert_eq!(ws, ["w0", "w1", "w2", "w3", "w4"]);
        assert_eq!(out.state.count, 18);
        logs.insert(out.state.log.clone());
    }
    // The default seed (derived from the run id) too.
    twin(&hand, &mac, "derived-seed", None).await;
    assert_eq!(logs.len(), 3, "seeds feed ctx.rng() in both graphs");
}

/// Twin of `fork()`: three `research` branches with inputs, then two plain `audit` branches that join
/// into one activation.
#[graph(state = MacroTrace, name = "fork")]
pub mod fork {
    use super::*;

    #[node(entry, to = [research, audit])]
    async fn plan(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace, plan::Fork> {
        let mut fork = plan::Fork::new();
        for topic in ["c", "a", "b"] {
            fork = fork.research_with(&topic)?;
        }
        Ok((MacroTraceDelta::default(), fork.audit().audit()))
    }

    #[node(to = END)]
    async fn research(_s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        let topic: String = ctx.input()?.expect("forked with an input");
        Ok(logged(format!("research {topic}")))
    }

    #[node(to = END)]
    async fn audit(_s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        assert!(ctx.raw_input().is_none());
        Ok(logged("audit").count(1))
    }
}

#[tokio::test]
async fn fork_twin_makes_one_activation_per_input_and_joins_plain_branches() {
    let pair = twin_once(fork(), fork::graph(), "f").await;
    assert_eq!(pair.out().state.log, ["research c", "research a", "research b", "audit"]);
    assert_eq!(pair.out().state.count, 1);
}

// ---------------------------------------------------------------------------------------------------
// Node policies: retry, backoff and jitter; the node error
// ---------------------------------------------------------------------------------------------------

/// Twin of `flaky(failures, fatal, retry)`: the retry policy becomes `#[node(retry(...))]`.
macro_rules! flaky_twin {
    ($(#[$doc:meta])* $module:ident: failures = $failures:literal, fatal = $fatal:literal, $($policy:tt)+) => {
        $(#[$doc])*
        #[graph(state = MacroTrace, name = "flaky")]
        pub(crate) mod $module {
            use super::*;

            const FAILURES: u32 = $failures;
            const FATAL: bool = $fatal;

            /// Attempts so far.
            pub(crate) static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

            #[node(entry, to = END, impure = "test instrumentation: counts attempts in a static", $($policy)+)]
            async fn flaky(_s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
                let n = ATTEMPTS.fetch_add(1, Ordering::SeqCst) + 1;
                assert_eq!(ctx.attempt(), n, "ctx.attempt() counts attempts");
                if n <= FAILURES {
                    let msg = format!("boom #{n}");
                    return Err(if FATAL { NodeError::fatal(msg) } else { NodeError::new(msg) });
                }
                Ok(MacroTraceDelta::default().count(n as u64))
            }
        }
    };
}

flaky_twin!(
    /// Twin of `flaky(2, false, attempts(5), exponential(10 ms, 1 s))`.
    flaky_recovers: failures = 2, fatal = false, retry(attempts = 5, backoff = exponential("10ms", "1s"))
);
flaky_twin!(
    /// Twin of `flaky(2, false, attempts(5), fixed(100 ms), jitter 0.5)`.
    flaky_jittered: failures = 2, fatal = false, retry(attempts = 5, backoff = fixed("100ms"), jitter = 0.5)
);
flaky_twin!(
    /// Twin of `flaky(10, false, attempts(3))`.
    flaky_exhausted: failures = 10, fatal = false, retry(attempts = 3)
);

#[tokio::test(start_paused = true)]
async fn flaky_twin_succeeds_after_two_failures_with_the_same_backoff() {
    let attempts = Arc::new(AtomicU32::new(0));
    let retry = RetryPolicy::attempts(5)
        .backoff(Backoff::exponential(Duration::from_millis(10), Duration::from_secs(1)));
    let pair = twin_once(flaky(2, false, retry, attempts.clone()), flaky_recovers::graph(), "r").await;
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    assert_eq!(flaky_recovers::ATTEMPTS.load(Ordering::SeqCst), 3);
    assert_eq!(pair.out().state.count, 3);
    assert_eq!(pair.elapsed, [Duration::from_millis(10 + 20); 2], "backoff 10 ms then 20 ms");
}

#[tokio::test(start_paused = true)]
async fn flaky_twin_jitters_its_backoff_like_the_hand_graph() {
    let attempts = Arc::new(AtomicU32::new(0));
    let retry = RetryPolicy::attempts(5).backoff(Backoff::Fixed(Duration::from_millis(100))).jitter(0.5);
    let pair = twin_once(flaky(2, false, retry, attempts.clone()), flaky_jittered::graph(), "r").await;
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    assert_eq!(flaky_jittered::ATTEMPTS.load(Ordering::SeqCst), 3);
    assert_eq!(pair.out().state.count, 3);
    // The jitter is drawn from the item's path and attempt, the same in both graphs: the same waits,
    // shorter than the two unjittered 100 ms and at least half of them.
    let [hand, twin] = pair.elapsed;
    assert_eq!(hand, twin);
    assert!(hand < Duration::from_millis(200) && hand >= Duration::from_millis(100), "{hand:?}");
}

#[tokio::test(start_paused = true)]
async fn flaky_twin_exhausts_its_retries_with_the_same_error() {
    let attempts = Arc::new(AtomicU32::new(0));
    let pair = twin_once(
        flaky(10, false, RetryPolicy::attempts(3), attempts.clone()),
        flaky_exhausted::graph(),
        "r",
    )
    .await;
    for err in pair.errors() {
        match err {
            Error::NodeFailed { node, attempts: 3, source, step: 0, .. } => {
                assert_eq!(node, "flaky");
                assert_eq!(source.to_string(), "boom #3");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    assert_eq!(flaky_exhausted::ATTEMPTS.load(Ordering::SeqCst), 3);
    assert!(matches!(pair.observed.info, Some((RunStatus::Failed(_), 0, _))), "{:?}", pair.observed.info);
}

// ---------------------------------------------------------------------------------------------------
// Node policies: timeout; the timeout error
// ---------------------------------------------------------------------------------------------------

/// Twin of `sleeper(100 ms, policy)`: the policy becomes `#[node(timeout = ...)]`.
macro_rules! sleeper_twin {
    ($(#[$doc:meta])* $module:ident $(: $($policy:tt)+)?) => {
        $(#[$doc])*
        #[graph(state = MacroTrace, name = "sleeper")]
        pub(crate) mod $module {
            use super::*;

            #[node(entry, to = END $(, $($policy)+)?)]
            async fn sleepy(_s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
                assert!(ctx.deadline().is_some());
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok(MacroTraceDelta::default().count(1))
            }
        }
    };
}

sleeper_twin!(
    /// Twin of `sleeper(100 ms, timeout 50 ms)`.
    sleeper_50ms: timeout = "50ms"
);
sleeper_twin!(
    /// Twin of `sleeper(100 ms, no policy)`.
    sleeper_default
);
sleeper_twin!(
    /// Twin of `sleeper(100 ms, timeout 1 s)`.
    sleeper_1s: timeout = "1s"
);

#[tokio::test(start_paused = true)]
async fn sleeper_twin_times_out_like_the_hand_graph() {
    let ms = Duration::from_millis;
    // The node's own 50 ms over a 10 s default.
    let (hand, mac) = engines(
        sleeper(ms(100), NodePolicy::default().timeout(ms(50))),
        sleeper_50ms::graph(),
        EngineOptions::default().default_node_timeout(Duration::from_secs(10)),
    );
    let pair = twin(&hand, &mac, "t", None).await;
    for err in pair.errors() {
        assert!(
            matches!(err, Error::NodeTimeout { node, timeout, attempts: 1, .. } if node == "sleepy" && *timeout == ms(50)),
            "{err:?}"
        );
    }
    assert_eq!(pair.elapsed, [ms(50); 2]);

    // The engine default when the node sets none.
    let (hand, mac) = engines(
        sleeper(ms(100), NodePolicy::default()),
        sleeper_default::graph(),
        EngineOptions::default().default_node_timeout(ms(30)),
    );
    let pair = twin(&hand, &mac, "t", None).await;
    for err in pair.errors() {
        assert!(matches!(err, Error::NodeTimeout { timeout, .. } if *timeout == ms(30)), "{err:?}");
    }

    // A generous timeout lets it finish.
    let (hand, mac) = engines(
        sleeper(ms(100), NodePolicy::default().timeout(Duration::from_secs(1))),
        sleeper_1s::graph(),
        EngineOptions::default(),
    );
    let pair = twin(&hand, &mac, "t", None).await;
    assert_eq!(pair.out().state.count, 1);
    assert_eq!(pair.elapsed, [ms(100); 2]);
}

// ---------------------------------------------------------------------------------------------------
// Node policies: max_concurrency
// ---------------------------------------------------------------------------------------------------

/// Twin of `slow_fan(10, gauge, policy)`: the policy becomes options of `#[node]` on `slow`, the gauge is
/// the module's `GAUGE`.
macro_rules! slow_fan_twin {
    ($(#[$doc:meta])* $module:ident $(: $($policy:tt)+)?) => {
        $(#[$doc])*
        #[graph(state = MacroTrace, name = "slow-fan")]
        pub(crate) mod $module {
            use super::*;

            const N: usize = 10;

            /// Running `slow` items and their peak.
            pub(crate) static GAUGE: std::sync::LazyLock<Arc<Gauge>> = std::sync::LazyLock::new(Arc::default);

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
    /// Twin of `slow_fan(10, _, max_concurrency(2))`.
    slow_fan_per_node: max_concurrency = 2
);
slow_fan_twin!(
    /// Twin of `slow_fan(10, _, default)` under an engine-wide per-node limit of 4.
    slow_fan_engine_per_node
);

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
// A conflict
// ---------------------------------------------------------------------------------------------------

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
        Ok(MacroTraceDelta::default().last("x".to_owned()).count(1))
    }

    #[node(to = END)]
    async fn y(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(MacroTraceDelta::default().last("y".to_owned()).count(1))
    }
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

// ---------------------------------------------------------------------------------------------------
// The fingerprint and the renderings
// ---------------------------------------------------------------------------------------------------

/// Twin of `two_edges(END)`: `a` → END and `b`, `b` → END. (`two_edges("b")` declares `a -> b` twice,
/// which `#[node(to = [b, b])]` rejects: no twin.)
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
    let pair = twin_once(two_edges(END), g_end::graph(), "g").await;
    assert_eq!(pair.out().state.log, ["a", "b"]);
    let (hand, mac) = (two_edges(END), g_end::graph());
    assert_eq!(hand.dot(), mac.dot());
    assert!(mac.mermaid().contains("a -->|1| b"));
    assert!(mac.dot().contains("\"b\" -> \"__end__\" [label=\"0\"]"));
    assert_eq!(mac.fingerprint(), g_end::FINGERPRINT);
    assert_eq!(g_end::graph().fingerprint(), mac.fingerprint(), "a function of the description");
    assert_ne!(mac.fingerprint(), hand.fingerprint(), "the macro's fingerprint includes the signatures");
    // The same shape with the same node signatures recorded (as the macro records them: rustc's rendering
    // of the signature's tokens): the compile-time fingerprint is the one the runtime computes for a
    // hand-built graph.
    let signed = two_edges_builder(END)
        .signature("a", "async fn a(_s : & MacroTrace, _c : & mut Ctx) -> NodeResult < MacroTrace >")
        .signature("b", "async fn b(_s : & MacroTrace, _c : & mut Ctx) -> NodeResult < MacroTrace >")
        .build()
        .unwrap();
    assert_eq!(signed.fingerprint(), g_end::FINGERPRINT);
}
