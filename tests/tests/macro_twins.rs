//! Macro twins of the hand-built test graphs: every representative graph the engine tests build with
//! `Graph::builder` over [`Trace`] is written again with `#[reducer]`, `#[graph]` and `#[node]` over
//! [`MacroTrace`] (the same fields and strategies), and both are run with the same run id, seed and engine
//! options. They must agree on everything observable:
//!
//! * the shape: graph name, entry, nodes in declaration order, edges by index;
//! * the outcome: final state bytes (`serde_json`), steps and status, or the error (variant and every
//!   field, its message and its source chain);
//! * the store: `history_hash` (step, frontier and state hash of every checkpoint), the idempotency keys
//!   and the run row's status.
//!
//! [`MacroTrace`] and the harness live in `twins/mod.rs`, shared with `macro_twins_more.rs` (the twins of
//! the backpressure, cancellation, concurrency, error and recorded-time tests).
//!
//! The hand-built constructors are copied verbatim from the engine tests (their modules are private to
//! that test binary), each under a comment naming its origin; `crash_graph` is shared through
//! `graph_tests`. Twins of parametrised constructors fix the parameters the hand tests use (a macro graph
//! is a static description); families of them (`k` join predecessors, retry and timeout policies, loop
//! lengths) come from small `macro_rules!` around `#[graph]`.

pub mod twins;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use graph_runtime::Error;
use graph_runtime::prelude::*;
use graph_runtime::store::SledStore;
use graph_tests::{Trace, TraceDelta, crash_graph, random_delay, state_hash};
use twins::*;

// ---------------------------------------------------------------------------------------------------
// The state twin
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
        logged("a").count(2).last(Some("x".into())).tags(tag("t1")).best(5),
        logged("b").count(3).tags(tag("t0")).best(4),
        MacroTraceDelta::default().last(Some("y".into())).best(9),
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

// ---------------------------------------------------------------------------------------------------
// Determinism: the fan-out loop (engine/determinism.rs)
// ---------------------------------------------------------------------------------------------------

// Copied verbatim from tests/tests/engine/determinism.rs.
/// plan → w0..w{n-1} (static fan-out) → join → plan (loop) | END, `iterations` times.
fn fanout_loop(workers: usize, iterations: usize, max_delay: Duration) -> Graph<Trace> {
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

// Copied verbatim from tests/tests/engine/determinism.rs.
fn runtime(workers: usize) -> tokio::runtime::Runtime {
    if workers == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().unwrap()
    }
}

#[test]
fn fanout_loop_twin_gives_one_state_and_one_history_across_worker_counts() {
    let mut state_hashes = BTreeSet::new();
    let mut history_hashes = BTreeSet::new();
    let mut runs = 0;
    for workers in [1usize, 2, 8] {
        runtime(workers).block_on(async {
            let (hand, mac) = engines(
                fanout_loop(5, 3, Duration::from_millis(2)),
                fanout_loop_5x3::graph(),
                EngineOptions::default().max_concurrent_nodes(workers),
            );
            let tasks: Vec<_> = (0..20)
                .map(|i| {
                    let (hand, mac) = (hand.clone(), mac.clone());
                    tokio::spawn(async move { twin(&hand, &mac, &format!("det-{i}"), Some(7)).await })
                })
                .collect();
            for t in tasks {
                let pair = t.await.unwrap();
                let out = pair.out();
                assert!(out.is_completed());
                assert_eq!(out.state.log.len(), 21);
                let ws: Vec<&str> =
                    out.state.log[1..6].iter().map(|l| l.split(':').next().unwrap()).collect();
                assert_eq!(ws, ["w0", "w1", "w2", "w3", "w4"]);
                assert_eq!(out.state.count, 18);
                state_hashes.insert(state_hash(&out.state));
                state_hashes.insert(state_hash(&pair.twin.as_ref().unwrap().state));
                history_hashes.insert(pair.observed.history);
                runs += 1;
            }
        });
    }
    assert_eq!(runs, 60);
    assert_eq!(state_hashes.len(), 1, "final states differ: {state_hashes:?}");
    assert_eq!(history_hashes.len(), 1, "histories differ: {history_hashes:?}");
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
        logs.insert(pair.out().state.log.clone());
    }
    // The default seed (derived from the run id) too.
    twin(&hand, &mac, "derived-seed", None).await;
    assert_eq!(logs.len(), 3, "seeds feed ctx.rng() in both graphs");
}

// ---------------------------------------------------------------------------------------------------
// Merge order: the 5-way fan-out and the chain (engine/merge_order.rs)
// ---------------------------------------------------------------------------------------------------

// Copied verbatim from tests/tests/engine/main.rs.
/// A node that appends its own name and follows its declared edges.
fn logs(
    name: &'static str,
) -> impl for<'b> Fn(&'b Trace, &'b mut Ctx) -> graph_runtime::node::BoxFuture<'b, NodeResult<Trace, Route>>
+ Send
+ Sync
+ 'static {
    move |_s, _ctx| Box::pin(async move { Ok((TraceDelta::default().log(name), Route::Declared)) })
}

// Copied verbatim from tests/tests/engine/merge_order.rs.
/// start → b0..b4; branch i sleeps (5 - i) ms so completion order is the reverse of edge order.
fn five_way() -> Graph<Trace> {
    let mut b = Graph::<Trace>::builder("five").node("start", logs("start")).entry("start");
    for i in 0..5u64 {
        let name = format!("b{i}");
        b = b
            .node(name.clone(), move |_s, _ctx| {
                Box::pin(async move {
                    tokio::time::sleep(Duration::from_millis(5 - i)).await;
                    Ok((TraceDelta::default().log(format!("b{i}")), Route::Declared))
                })
            })
            .edge("start", name.clone())
            .edge(name, END);
    }
    b.build().unwrap()
}

/// Twin of `five_way()`: branch `bi` sleeps (5 - i) ms, so completion order reverses edge order.
#[graph(state = MacroTrace, name = "five")]
pub mod five_way {
    use super::*;

    async fn branch(i: u64) -> NodeResult<MacroTrace> {
        tokio::time::sleep(Duration::from_millis(5 - i)).await;
        Ok(logged(format!("b{i}")))
    }

    #[node(entry, to = [b0, b1, b2, b3, b4])]
    async fn start(_s: &MacroTrace, _ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(logged("start"))
    }

    #[node(to = END)]
    async fn b0(_s: &MacroTrace, _ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        branch(0).await
    }

    #[node(to = END)]
    async fn b1(_s: &MacroTrace, _ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        branch(1).await
    }

    #[node(to = END)]
    async fn b2(_s: &MacroTrace, _ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        branch(2).await
    }

    #[node(to = END)]
    async fn b3(_s: &MacroTrace, _ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        branch(3).await
    }

    #[node(to = END)]
    async fn b4(_s: &MacroTrace, _ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        branch(4).await
    }
}

#[tokio::test(start_paused = true)]
async fn five_way_twin_merges_in_edge_order_for_any_concurrency() {
    for workers in [1, 2, 3, 5, 8] {
        let (hand, mac) =
            engines(five_way(), five_way::graph(), EngineOptions::default().max_concurrent_nodes(workers));
        let pair = twin(&hand, &mac, "five", None).await;
        assert_eq!(pair.out().state.log, ["start", "b0", "b1", "b2", "b3", "b4"], "workers = {workers}");
        assert_eq!(pair.elapsed[0], pair.elapsed[1], "workers = {workers}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_way_twin_merges_in_edge_order_on_real_threads() {
    for i in 0..10 {
        let pair = twin_once(five_way(), five_way::graph(), &format!("five-{i}")).await;
        assert_eq!(pair.out().state.log, ["start", "b0", "b1", "b2", "b3", "b4"]);
    }
}

// Copied from tests/tests/engine/merge_order.rs (`a_chain_applies_in_causal_order_...`), builder verbatim.
fn chain() -> Graph<Trace> {
    Graph::<Trace>::builder("chain")
        .node("a", |_s, _c| {
            Box::pin(async { Ok((TraceDelta::default().log("a").last("from-a"), Route::Declared)) })
        })
        .node("b", |s, _c| {
            Box::pin(async move {
                // B reads what A wrote: the step's state includes every earlier step's deltas.
                let seen = s.last.clone().unwrap_or_default();
                Ok((TraceDelta::default().log(format!("b saw {seen}")).last("from-b"), Route::Declared))
            })
        })
        .node("c", |s, _c| {
            Box::pin(async move {
                let seen = s.log.join(",");
                Ok((TraceDelta::default().log(format!("c saw {seen}")), Route::Declared))
            })
        })
        .entry("a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
        .build()
        .unwrap()
}

/// Twin of the A → B → C chain: each node reads what the previous ones wrote.
#[graph(state = MacroTrace, name = "chain")]
pub mod chain {
    use super::*;

    #[node(entry, to = b)]
    async fn a(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(logged("a").last(Some("from-a".into())))
    }

    #[node(to = c)]
    async fn b(s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        let seen = s.last.clone().unwrap_or_default();
        Ok(logged(format!("b saw {seen}")).last(Some("from-b".into())))
    }

    #[node(to = END)]
    async fn c(s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        let seen = s.log.join(",");
        Ok(logged(format!("c saw {seen}")))
    }
}

#[tokio::test]
async fn chain_twin_applies_in_causal_order() {
    let pair = twin_once(chain(), chain::graph(), "chain").await;
    let out = pair.out();
    assert_eq!(out.state.log, ["a", "b saw from-a", "c saw a,b saw from-a"]);
    assert_eq!(out.state.last.as_deref(), Some("from-b"));
    assert_eq!(out.steps, 3);
}

// ---------------------------------------------------------------------------------------------------
// Joins and forks (engine/joins.rs)
// ---------------------------------------------------------------------------------------------------

// Copied from tests/tests/engine/joins.rs (`a_join_with_k_predecessors_...`), builder verbatim.
fn join_k(k: usize, counted: Arc<AtomicUsize>) -> Graph<Trace> {
    let mut b = Graph::<Trace>::builder("join").node("split", logs("split")).entry("split");
    for i in 0..k {
        let name = format!("p{i}");
        b = b
            .node(name.clone(), move |_s, _c| {
                Box::pin(
                    async move { Ok((TraceDelta::default().log(format!("p{i}")).count(1), Route::Declared)) },
                )
            })
            .edge("split", name.clone())
            .edge(name, "join");
    }
    b.node("join", move |s, _c| {
        counted.fetch_add(1, Ordering::SeqCst);
        let seen = s.count;
        Box::pin(async move { Ok((TraceDelta::default().log(format!("join saw {seen}")), Route::Declared)) })
    })
    .edge("join", END)
    .build()
    .unwrap()
}

/// Twin of `join_k(k)`: `split` → the `k` parents named → `join` → END. The parents' names come from
/// the invocation (node names passed into a `macro_rules!` that expands to `#[graph]`; see
/// `ui-tests/tests/pass/macro_rules_nodes.rs`), and each parent logs its own name.
macro_rules! join_twin {
    ($(#[$doc:meta])* $module:ident: $($p:ident),+) => {
        $(#[$doc])*
        #[graph(state = MacroTrace, name = "join")]
        pub mod $module {
            use super::*;

            /// Activations of `join` so far.
            pub static RUNS: AtomicUsize = AtomicUsize::new(0);

            #[node(entry, to = [$($p),+])]
            async fn split(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
                Ok(logged("split"))
            }

            $(
                #[node(to = join)]
                async fn $p(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
                    Ok(logged(stringify!($p)).count(1))
                }
            )+

            #[node(to = END, impure = "test instrumentation: counts in the static `RUNS`")]
            async fn join(s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
                RUNS.fetch_add(1, Ordering::SeqCst);
                Ok(logged(format!("join saw {}", s.count)))
            }
        }
    };
}

join_twin!(
    /// Twin of `join_k(2)`.
    join_2: p0, p1
);
join_twin!(
    /// Twin of `join_k(4)`.
    join_4: p0, p1, p2, p3
);
join_twin!(
    /// Twin of `join_k(7)`.
    join_7: p0, p1, p2, p3, p4, p5, p6
);

#[tokio::test]
async fn join_twins_run_once_and_see_all_k_deltas() {
    type Twin = (usize, fn() -> Graph<MacroTrace>, &'static AtomicUsize);
    let twins: [Twin; 3] = [
        (2, join_2::graph, &join_2::RUNS),
        (4, join_4::graph, &join_4::RUNS),
        (7, join_7::graph, &join_7::RUNS),
    ];
    for (k, graph, twin_runs) in twins {
        let runs = Arc::new(AtomicUsize::new(0));
        let pair = twin_once(join_k(k, runs.clone()), graph(), "j").await;
        assert_eq!(runs.load(Ordering::SeqCst), 1, "k = {k}");
        assert_eq!(twin_runs.load(Ordering::SeqCst), 1, "k = {k}");
        let out = pair.out();
        assert_eq!(out.state.log.last().unwrap(), &format!("join saw {k}"));
        assert_eq!(out.state.log.len(), k + 2);
        assert_eq!(out.steps, 3, "split, parents, join");
    }
}

// Copied from tests/tests/engine/joins.rs (`forks_with_inputs_...`), builder verbatim.
fn fork() -> Graph<Trace> {
    Graph::<Trace>::builder("fork")
        .node("plan", |_s, _c| {
            Box::pin(async {
                let mut branches = Vec::new();
                for topic in ["c", "a", "b"] {
                    branches.push(Branch::with_input(0, &topic)?);
                }
                branches.push(Branch::to(1));
                branches.push(Branch::to(1));
                Ok((TraceDelta::default(), Route::Fork(branches)))
            })
        })
        .node("research", |_s, ctx| {
            Box::pin(async move {
                let topic: String = ctx.input()?.expect("forked with an input");
                Ok((TraceDelta::default().log(format!("research {topic}")), Route::Declared))
            })
        })
        .node("audit", |_s, ctx| {
            Box::pin(async move {
                assert!(ctx.raw_input().is_none());
                Ok((TraceDelta::default().log("audit").count(1), Route::Declared))
            })
        })
        .entry("plan")
        .edge("plan", "research")
        .edge("plan", "audit")
        .edge("research", END)
        .edge("audit", END)
        .build()
        .unwrap()
}

/// Twin of the fork graph: three `research` branches with inputs, then two plain `audit` branches that
/// join into one activation.
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
// Retries (engine/retries.rs)
// ---------------------------------------------------------------------------------------------------

// Copied verbatim from tests/tests/engine/retries.rs.
/// A single node failing `failures` times (with `fatal` errors if asked), then succeeding.
fn flaky(failures: u32, fatal: bool, retry: RetryPolicy, attempts: Arc<AtomicU32>) -> Graph<Trace> {
    Graph::<Trace>::builder("flaky")
        .node_with(
            "flaky",
            move |_s, ctx| {
                let attempts = attempts.clone();
                Box::pin(async move {
                    let n = attempts.fetch_add(1, Ordering::SeqCst) + 1;
                    assert_eq!(ctx.attempt(), n, "ctx.attempt() counts attempts");
                    if n <= failures {
                        let msg = format!("boom #{n}");
                        return Err(if fatal { NodeError::fatal(msg) } else { NodeError::new(msg) });
                    }
                    Ok((TraceDelta::default().count(n as u64), Route::Declared))
                })
            },
            NodePolicy::default().retry(retry),
        )
        .entry("flaky")
        .edge("flaky", END)
        .build()
        .unwrap()
}

/// Twin of `flaky(failures, fatal, retry)`: the retry policy becomes `#[node(retry(...))]`.
macro_rules! flaky_twin {
    ($(#[$doc:meta])* $module:ident: failures = $failures:literal, fatal = $fatal:literal, $($policy:tt)+) => {
        $(#[$doc])*
        #[graph(state = MacroTrace, name = "flaky")]
        pub mod $module {
            use super::*;

            const FAILURES: u32 = $failures;
            const FATAL: bool = $fatal;

            /// Attempts so far.
            pub static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

            #[node(entry, to = END, $($policy)+, impure = "test instrumentation: counts in the static `ATTEMPTS`")]
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
    /// Twin of `flaky(10, false, attempts(3))`.
    flaky_exhausted: failures = 10, fatal = false, retry(attempts = 3)
);
flaky_twin!(
    /// Twin of `flaky(10, true, attempts(5))`.
    flaky_fatal: failures = 10, fatal = true, retry(attempts = 5)
);
flaky_twin!(
    /// Twin of `flaky(3, false, attempts(4), fixed(0), jitter 1.0)`.
    flaky_zero_delay: failures = 3, fatal = false, retry(attempts = 4, backoff = fixed("0ms"), jitter = 1.0)
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

#[tokio::test(start_paused = true)]
async fn flaky_twin_attempts_a_fatal_error_once() {
    let attempts = Arc::new(AtomicU32::new(0));
    let pair =
        twin_once(flaky(10, true, RetryPolicy::attempts(5), attempts.clone()), flaky_fatal::graph(), "r")
            .await;
    for err in pair.errors() {
        assert!(matches!(err, Error::NodeFailed { attempts: 1, .. }), "{err:?}");
    }
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert_eq!(flaky_fatal::ATTEMPTS.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn flaky_twin_retries_without_delay() {
    let attempts = Arc::new(AtomicU32::new(0));
    let retry = RetryPolicy::attempts(4).backoff(Backoff::Fixed(Duration::ZERO)).jitter(1.0);
    let pair = twin_once(flaky(3, false, retry, attempts.clone()), flaky_zero_delay::graph(), "r").await;
    assert_eq!(attempts.load(Ordering::SeqCst), 4);
    assert_eq!(flaky_zero_delay::ATTEMPTS.load(Ordering::SeqCst), 4);
    assert_eq!(pair.out().state.count, 4);
    assert_eq!(pair.elapsed, [Duration::ZERO; 2]);
}

// Copied from tests/tests/engine/retries.rs (`the_engine_default_retry_...`), builder verbatim.
fn default_retry(attempts: Arc<AtomicU32>) -> Graph<Trace> {
    let a = attempts;
    Graph::<Trace>::builder("default-retry")
        .node("n", move |_s, _c| {
            let a = a.clone();
            Box::pin(async move {
                if a.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Err(NodeError::new("once"));
                }
                Ok((TraceDelta::default(), Route::Declared))
            })
        })
        .entry("n")
        .edge("n", END)
        .build()
        .unwrap()
}

/// Twin of the default-retry graph: a node without a retry policy that fails its first attempt.
#[graph(state = MacroTrace, name = "default-retry")]
pub mod default_retry {
    use super::*;

    /// Attempts so far.
    pub static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

    #[node(entry, to = END, impure = "test instrumentation: counts in the static `ATTEMPTS`")]
    async fn n(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        if ATTEMPTS.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(NodeError::new("once"));
        }
        Ok(MacroTraceDelta::default())
    }
}

#[tokio::test(start_paused = true)]
async fn default_retry_twin_takes_the_engine_default() {
    let attempts = Arc::new(AtomicU32::new(0));
    let (hand, mac) = engines(
        default_retry(attempts.clone()),
        default_retry::graph(),
        EngineOptions::default().default_retry(RetryPolicy::attempts(2)),
    );
    let pair = twin(&hand, &mac, "r", None).await;
    assert!(pair.out().is_completed());
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(default_retry::ATTEMPTS.load(Ordering::SeqCst), 2);
}

// ---------------------------------------------------------------------------------------------------
// Timeouts (engine/timeouts.rs)
// ---------------------------------------------------------------------------------------------------

// Copied verbatim from tests/tests/engine/timeouts.rs.
fn sleeper(sleep: Duration, policy: NodePolicy) -> Graph<Trace> {
    Graph::<Trace>::builder("sleeper")
        .node_with(
            "sleepy",
            move |_s, ctx| {
                Box::pin(async move {
                    assert!(ctx.deadline().is_some());
                    tokio::time::sleep(sleep).await;
                    Ok((TraceDelta::default().count(1), Route::Declared))
                })
            },
            policy,
        )
        .entry("sleepy")
        .edge("sleepy", END)
        .build()
        .unwrap()
}

/// Twin of `sleeper(100 ms, policy)`: the policy becomes `#[node(timeout = ..., retry(...))]`.
macro_rules! sleeper_twin {
    ($(#[$doc:meta])* $module:ident $(: $($policy:tt)+)?) => {
        $(#[$doc])*
        #[graph(state = MacroTrace, name = "sleeper")]
        pub mod $module {
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
sleeper_twin!(
    /// Twin of `sleeper(100 ms, timeout 10 ms, 3 attempts)`.
    sleeper_retried: timeout = "10ms", retry(attempts = 3)
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

#[tokio::test(start_paused = true)]
async fn sleeper_twin_retries_timeouts_like_errors() {
    let pair = twin_once(
        sleeper(
            Duration::from_millis(100),
            NodePolicy::default().timeout(Duration::from_millis(10)).retry(RetryPolicy::attempts(3)),
        ),
        sleeper_retried::graph(),
        "t",
    )
    .await;
    for err in pair.errors() {
        assert!(matches!(err, Error::NodeTimeout { attempts: 3, .. }), "{err:?}");
    }
    assert_eq!(pair.elapsed, [Duration::from_millis(30); 2]);
}

// Copied from tests/tests/engine/timeouts.rs (`a_200ms_budget_...`), builder verbatim.
fn forever() -> Graph<Trace> {
    Graph::<Trace>::builder("forever")
        .node("spin", |s, _c| {
            let n = s.count;
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(30)).await;
                Ok((TraceDelta::default().count(1), if n < 1_000 { Route::Goto(0) } else { Route::Goto(1) }))
            })
        })
        .entry("spin")
        .edge("spin", "spin")
        .edge("spin", END)
        .build()
        .unwrap()
}

/// Twin of the `forever` graph: a 30 ms node looping a thousand times.
#[graph(state = MacroTrace, name = "forever")]
pub mod forever {
    use super::*;

    #[node(entry, to = [spin, END])]
    async fn spin(s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace, spin::Next> {
        let n = s.count;
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok((MacroTraceDelta::default().count(1), if n < 1_000 { spin::Next::Spin } else { spin::Next::End }))
    }
}

#[tokio::test(start_paused = true)]
async fn forever_twin_stops_at_the_same_step_on_a_budget() {
    let (hand, mac) = engines(
        forever(),
        forever::graph(),
        EngineOptions::default().run_wall_clock_budget(Duration::from_millis(200)),
    );
    let pair = twin(&hand, &mac, "budget", None).await;
    for err in pair.errors() {
        assert!(matches!(err, Error::BudgetExceeded { step: 6, .. }), "{err:?}");
    }
    assert_eq!(pair.elapsed, [Duration::from_millis(200); 2]);
    assert!(matches!(pair.observed.info, Some((RunStatus::Failed(_), 6, _))), "{:?}", pair.observed.info);
}

// ---------------------------------------------------------------------------------------------------
// RNG (engine/rng.rs)
// ---------------------------------------------------------------------------------------------------

// Copied verbatim from tests/tests/engine/rng.rs.
/// A loop of `n` iterations; every iteration logs two draws.
fn dice(n: u64) -> Graph<Trace> {
    Graph::<Trace>::builder("dice")
        .node("roll", move |s, ctx| {
            let i = s.count;
            Box::pin(async move {
                let (a, b) = (ctx.rng().next_u64(), ctx.rng().next_u64());
                Ok((
                    TraceDelta::default().count(1).log(format!("{a:016x}{b:016x}")),
                    Route::Goto(u32::from(i + 1 >= n)),
                ))
            })
        })
        .entry("roll")
        .edge("roll", "roll")
        .edge("roll", END)
        .build()
        .unwrap()
}

/// Twin of `dice(n)`: `roll` loops `n` times, logging two draws of `ctx.rng()` each time.
macro_rules! dice_twin {
    ($(#[$doc:meta])* $module:ident: $n:literal) => {
        $(#[$doc])*
        #[graph(state = MacroTrace, name = "dice")]
        pub mod $module {
            use super::*;

            const N: u64 = $n;

            #[node(entry, to = [roll, END])]
            async fn roll(s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace, roll::Next> {
                let i = s.count;
                let (a, b) = (ctx.rng().next_u64(), ctx.rng().next_u64());
                let next = if i + 1 >= N { roll::Next::End } else { roll::Next::Roll };
                Ok((MacroTraceDelta::default().count(1).log(vec![format!("{a:016x}{b:016x}")]), next))
            }
        }
    };
}

dice_twin!(
    /// Twin of `dice(5)`.
    dice_5: 5
);
dice_twin!(
    /// Twin of `dice(8)`.
    dice_8: 8
);
dice_twin!(
    /// Twin of `dice(50)`.
    dice_50: 50
);

#[tokio::test]
async fn dice_twin_draws_the_same_numbers_for_every_seed_and_run_id() {
    let (hand, mac) = engines(dice(5), dice_5::graph(), EngineOptions::default());
    let mut logs = BTreeSet::new();
    for i in 0..20 {
        let pair = twin(&hand, &mac, &format!("r{i}"), Some(99)).await;
        logs.insert(pair.out().state.log.clone());
    }
    assert_eq!(logs.len(), 1);
    for (id, seed) in [("other", Some(100)), ("derived-a", None), ("derived-b", None)] {
        let pair = twin(&hand, &mac, id, seed).await;
        assert!(!logs.contains(&pair.out().state.log), "{id}: another seed, another sequence");
    }
    let pair = twin_once(dice(50), dice_50::graph(), "loop").await;
    assert_eq!(pair.out().state.log.iter().collect::<BTreeSet<_>>().len(), 50);
}

#[tokio::test]
async fn dice_twin_resumes_into_the_same_streams() {
    // As in `a_resumed_run_continues_the_streams_exactly`: stop "split" after 3 steps on a short engine
    // sharing the store, resume it on the full one; both graphs must stop and resume identically.
    let (hand, mac) = engines(dice(8), dice_8::graph(), EngineOptions::default());
    let straight = twin(&hand, &mac, "straight", Some(5)).await;
    let short_hand = Engine::builder(dice(8))
        .shared_store(hand.store().clone())
        .options(EngineOptions::default().max_steps(3))
        .build();
    let short_mac = Engine::builder(dice_8::graph())
        .shared_store(mac.store().clone())
        .options(EngineOptions::default().max_steps(3))
        .build();
    let stopped = twin(&short_hand, &short_mac, "split", Some(5)).await;
    for err in stopped.errors() {
        assert!(matches!(err, Error::MaxStepsExceeded { max_steps: 3, .. }), "{err:?}");
    }
    let (h, m) = (hand.resume("split").await, mac.resume("split").await);
    let resumed = observe_result(&hand, "split", &h).await;
    assert_eq!(resumed, observe_result(&mac, "split", &m).await);
    assert_eq!(h.unwrap().state, straight.out().state);
    assert_eq!(resumed.history, straight.observed.history, "a resumed run commits the straight history");
}

// Copied from tests/tests/engine/rng.rs (`retries_draw_distinct_streams`), builder verbatim.
fn retry_rng(attempts: Arc<AtomicU32>, seen: Arc<Mutex<Vec<u64>>>) -> Graph<Trace> {
    let (a, s) = (attempts, seen);
    Graph::<Trace>::builder("retry-rng")
        .node_with(
            "n",
            move |_st, ctx| {
                let (a, s) = (a.clone(), s.clone());
                Box::pin(async move {
                    s.lock().unwrap().push(ctx.rng().next_u64());
                    if a.fetch_add(1, Ordering::SeqCst) < 2 {
                        return Err(NodeError::new("again"));
                    }
                    Ok((TraceDelta::default(), Route::Declared))
                })
            },
            NodePolicy::default().retry(RetryPolicy::attempts(3)),
        )
        .entry("n")
        .edge("n", END)
        .build()
        .unwrap()
}

/// Twin of the retry-rng graph: every attempt records its first draw, the first two fail.
#[graph(state = MacroTrace, name = "retry-rng")]
pub mod retry_rng {
    use super::*;

    /// The first draw of every attempt.
    pub static SEEN: Mutex<Vec<u64>> = Mutex::new(Vec::new());

    #[node(entry, to = END, retry(attempts = 3), impure = "test instrumentation: records into the static `SEEN`")]
    async fn n(_st: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        let attempts = {
            let mut seen = SEEN.lock().unwrap();
            seen.push(ctx.rng().next_u64());
            seen.len()
        };
        if attempts <= 2 {
            return Err(NodeError::new("again"));
        }
        Ok(MacroTraceDelta::default())
    }
}

#[tokio::test]
async fn retry_rng_twin_draws_the_same_stream_per_attempt() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    twin_once(retry_rng(Arc::new(AtomicU32::new(0)), seen.clone()), retry_rng::graph(), "x").await;
    let hand = seen.lock().unwrap().clone();
    assert_eq!(hand.len(), 3);
    assert_eq!(hand.iter().collect::<BTreeSet<_>>().len(), 3, "each attempt has its own stream");
    assert_eq!(*retry_rng::SEEN.lock().unwrap(), hand, "the twin's attempts draw the same numbers");
}

// ---------------------------------------------------------------------------------------------------
// Durable runs: the crash graph (graph_tests::crash_graph) and the sled counter (sled_engine.rs)
// ---------------------------------------------------------------------------------------------------

/// Twin of `graph_tests::crash_graph(20)`: `tick` → (`a` ∥ `b`) → `tock` (a join) → `tick` …, twenty
/// times; `a` and `b` sleep a random time and draw from `ctx.rng()`.
#[graph(state = MacroTrace, name = "crash")]
pub mod crash {
    use super::*;

    /// The iterations of the hand-built graph the crash tests run.
    pub const ITERATIONS: u64 = 20;

    async fn branch(name: &str, s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        let seen = s.count;
        tokio::time::sleep(random_delay(Duration::from_micros(400), seen)).await;
        let roll = ctx.rng().next_u64() % 1_000_000;
        Ok(logged(format!("{name}{seen}:{roll}")).count(1).best(roll))
    }

    #[node(entry, to = [a, b])]
    async fn tick(_s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace> {
        Ok(MacroTraceDelta::default())
    }

    #[node(to = tock)]
    async fn a(s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        branch("a", s, ctx).await
    }

    #[node(to = tock)]
    async fn b(s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace> {
        branch("b", s, ctx).await
    }

    #[node(to = [tick, END])]
    async fn tock(s: &MacroTrace, _c: &mut Ctx) -> NodeResult<MacroTrace, tock::Next> {
        let done = s.count >= 2 * ITERATIONS;
        let next = if done { tock::Next::End } else { tock::Next::Tick };
        Ok((MacroTraceDelta::default().tags(tag(format!("i{}", s.count / 2))), next))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_twin_commits_the_same_history() {
    for i in 0..3 {
        let pair = twin_once(crash_graph(crash::ITERATIONS), crash::graph(), "crash").await;
        assert_eq!(pair.out().steps, 3 * crash::ITERATIONS, "round {i}");
        assert_eq!(pair.observed.keys.len() as u64, 3 * crash::ITERATIONS + 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_twin_stopped_anywhere_resumes_to_the_uninterrupted_hand_history() {
    let reference = twin_once(crash_graph(crash::ITERATIONS), crash::graph(), "crash").await;
    let reference = reference.observed.ignoring_row_version();
    for stop in [1, 2, 3, 16, 31, 59] {
        // The twin alone, interrupted by max_steps and resumed on a full engine over the same store.
        let full = Engine::builder(crash::graph()).build();
        let short = Engine::builder(crash::graph())
            .shared_store(full.store().clone())
            .options(EngineOptions::default().max_steps(stop))
            .build();
        let err = short.run("crash", MacroTrace::default()).await.unwrap_err();
        assert!(matches!(err, Error::MaxStepsExceeded { .. }), "stop {stop}: {err:?}");
        let resumed = full.resume("crash").await;
        assert_eq!(
            observe_result(&full, "crash", &resumed).await.ignoring_row_version(),
            reference,
            "stop {stop}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_twin_on_sled_survives_reopening_like_the_hand_graph() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let reference = twin_once(crash_graph(crash::ITERATIONS), crash::graph(), "crash").await;
    // Stop both after 17 steps on sled, drop the stores, reopen, resume.
    {
        let short =
            |dir: &std::path::Path| (SledStore::open(dir).unwrap(), EngineOptions::default().max_steps(17));
        let (hs, ho) = short(dirs[0].path());
        let (ms, mo) = short(dirs[1].path());
        let hand = Engine::builder(crash_graph(crash::ITERATIONS)).store(hs).options(ho).build();
        let mac = Engine::builder(crash::graph()).store(ms).options(mo).build();
        let stopped = twin(&hand, &mac, "crash", None).await;
        for err in stopped.errors() {
            assert!(matches!(err, Error::MaxStepsExceeded { max_steps: 17, .. }), "{err:?}");
        }
    }
    let hand = Engine::builder(crash_graph(crash::ITERATIONS))
        .store(SledStore::open(dirs[0].path()).unwrap())
        .build();
    let mac = Engine::builder(crash::graph()).store(SledStore::open(dirs[1].path()).unwrap()).build();
    let (h, m) = (hand.resume("crash").await, mac.resume("crash").await);
    let resumed = observe_result(&hand, "crash", &h).await;
    assert_eq!(resumed, observe_result(&mac, "crash", &m).await);
    assert_eq!(
        resumed.ignoring_row_version(),
        reference.observed.ignoring_row_version(),
        "sled, reopened and resumed = memory, uninterrupted"
    );
}

// Copied verbatim from tests/tests/sled_engine.rs.
/// A loop of `n` steps, each appending one entry and adding one.
fn counter(n: u64) -> Graph<Trace> {
    Graph::<Trace>::builder("counter")
        .node("tick", move |s, ctx| {
            let i = s.count;
            Box::pin(async move {
                let route = if i + 1 < n { Route::Goto(0) } else { Route::Goto(1) };
                Ok((TraceDelta::default().count(1).log(format!("tick {i} at step {}", ctx.step())), route))
            })
        })
        .entry("tick")
        .edge("tick", "tick")
        .edge("tick", END)
        .build()
        .unwrap()
}

/// Twin of `counter(40)`: `tick` loops forty times.
#[graph(state = MacroTrace, name = "counter")]
pub mod counter_40 {
    use super::*;

    const N: u64 = 40;

    #[node(entry, to = [tick, END])]
    async fn tick(s: &MacroTrace, ctx: &mut Ctx) -> NodeResult<MacroTrace, tick::Next> {
        let i = s.count;
        let next = if i + 1 < N { tick::Next::Tick } else { tick::Next::End };
        Ok((MacroTraceDelta::default().count(1).log(vec![format!("tick {i} at step {}", ctx.step())]), next))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_twin_on_sled_equals_the_hand_graph_on_sled() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let hand = Engine::builder(counter(40)).store(SledStore::open(dirs[0].path()).unwrap()).build();
    let mac = Engine::builder(counter_40::graph()).store(SledStore::open(dirs[1].path()).unwrap()).build();
    let pair = twin(&hand, &mac, "c", None).await;
    assert_eq!(pair.out().steps, 40);
    assert_eq!(pair.observed.keys.len(), 41);
    // A completed run resumes to its stored state on both.
    assert_eq!(mac.resume("c").await.unwrap().state.log, pair.out().state.log);
}
