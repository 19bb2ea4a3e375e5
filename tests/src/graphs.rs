//! Hand-built test graphs over [`Trace`], shared by the engine tests (`tests/tests/engine/`) and their
//! macro twins (`tests/tests/engine/macro_twins.rs`), which write the same graphs again with `#[graph]` and
//! `#[node]` and assert that both behave alike. Defined once here so that the twins compare against the
//! very graphs the engine tests run.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use graph_runtime::node::BoxFuture;
use graph_runtime::rand_core::Rng;
use graph_runtime::{
    Branch, Ctx, END, Graph, GraphBuilder, NodeError, NodePolicy, NodeResult, RetryPolicy, Route,
};

use crate::{Trace, TraceDelta, random_delay};

/// The boxed future type a hand-written node over [`Trace`] returns.
pub type Fut<'a> = BoxFuture<'a, NodeResult<Trace, Route>>;

/// A node that appends its own name and follows its declared edges.
pub fn logs(
    name: &'static str,
) -> impl for<'b> Fn(&'b Trace, &'b mut Ctx) -> Fut<'b> + Send + Sync + 'static {
    move |_s, _ctx| Box::pin(async move { Ok((TraceDelta::default().log(name), Route::Declared)) })
}

/// plan → w0..w{n-1} (static fan-out) → join → plan (loop) | END, `iterations` times.
///
/// Every worker sleeps a random time below `max_delay` (timing noise the engine must not let into the
/// result), draws from `ctx.rng()` and writes `log`, `tags`, `best` and `count`.
pub fn fanout_loop(workers: usize, iterations: usize, max_delay: Duration) -> Graph<Trace> {
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
    .edge("join", END)
    .entry("plan")
    .build()
    .expect("valid graph")
}

/// plan → `research` three times, forked with the inputs "c", "a", "b", and → `audit` twice, plain
/// (the two plain branches join into one activation) → END.
pub fn fork() -> Graph<Trace> {
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

/// A single node failing `failures` times (with `fatal` errors if asked), then succeeding.
///
/// Attempt `n` fails with "boom #n" and, once it succeeds, adds `n` to `count`; `attempts` counts the
/// attempts (and checks `ctx.attempt()` against it).
pub fn flaky(failures: u32, fatal: bool, retry: RetryPolicy, attempts: Arc<AtomicU32>) -> Graph<Trace> {
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

/// One node, `sleepy`, under `policy`: it checks that it has a deadline, sleeps `sleep` and adds one.
pub fn sleeper(sleep: Duration, policy: NodePolicy) -> Graph<Trace> {
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

/// Counts running nodes and remembers the peak.
#[derive(Default)]
pub struct Gauge {
    /// Nodes running now.
    pub now: AtomicUsize,
    /// The most nodes that ran at once.
    pub peak: AtomicUsize,
}

impl Gauge {
    /// Counts one more running node until the guard drops.
    pub fn enter(self: &Arc<Self>) -> GaugeGuard {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(n, Ordering::SeqCst);
        GaugeGuard(self.clone())
    }
}

/// One running node of a [`Gauge`]; dropping it ends the count.
pub struct GaugeGuard(Arc<Gauge>);

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// fan → `n` slow branches of node `slow` (forked with inputs so they do not join) → END.
///
/// Each `slow` item runs 50 ms under `policy`, counted by `gauge`, and adds one.
pub fn slow_fan(n: usize, gauge: Arc<Gauge>, policy: NodePolicy) -> Graph<Trace> {
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

/// start → x, y (both write `last`, an overwrite field) → END.
pub fn two_writers() -> Graph<Trace> {
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

/// Graph `g`: `a` → `to` (edge 0) and `b` (edge 1), `b` → END; both nodes log their names. `to` is a
/// node name or [`END`] (`two_edges("b")` declares `a -> b` twice, which the builder accepts).
pub fn two_edges(to: &str) -> Graph<Trace> {
    two_edges_builder(to).build().unwrap()
}

/// The description of [`two_edges`], not yet built: to add to it (node signatures) first.
pub fn two_edges_builder(to: &str) -> GraphBuilder<Trace> {
    Graph::<Trace>::builder("g")
        .node("a", logs("a"))
        .node("b", logs("b"))
        .entry("a")
        .edge("a", to)
        .edge("a", "b")
        .edge("b", END)
}

/// A wait-for-all join over paths of different lengths, `rounds` times: `start` → (`b` ∥ `c1`), `c1` →
/// `c2`, and `d` waits for both `b` (one step away) and `c2` (two steps away), then loops to `start` or
/// ends. Four steps per round; `d` runs once per round and logs what it saw. With `c1_routes_away`, `c1`
/// goes to END instead of `c2` in every round: `d` must still run, once, on `b` alone.
pub fn wait_for_join(rounds: u64, c1_routes_away: bool) -> Graph<Trace> {
    Graph::<Trace>::builder("wait-for-join")
        .node("start", logs("start"))
        .node("b", |_s, _c| {
            Box::pin(async { Ok((TraceDelta::default().log("b").count(1), Route::Declared)) })
        })
        .node("c1", move |_s, _c| {
            let route = if c1_routes_away { Route::Goto(1) } else { Route::Goto(0) };
            Box::pin(async move { Ok((TraceDelta::default().log("c1"), route)) })
        })
        .node("c2", |_s, _c| {
            Box::pin(async { Ok((TraceDelta::default().log("c2").count(10), Route::Declared)) })
        })
        .node("d", move |s, ctx| {
            let seen = format!("d@{}:{}", ctx.step(), s.count);
            let done = s.log.iter().filter(|l| l.starts_with("d@")).count() as u64 + 1 >= rounds;
            Box::pin(async move { Ok((TraceDelta::default().log(seen), Route::Goto(u32::from(done)))) })
        })
        .entry("start")
        .edge("start", "b")
        .edge("start", "c1")
        .edge("c1", "c2")
        .edge("c1", END)
        .edge("b", "d")
        .edge("c2", "d")
        .edge("d", "start")
        .edge("d", END)
        .wait_for("d", ["b", "c2"])
        .build()
        .expect("valid graph")
}

/// A state with a `HashMap`, whose iteration order differs between processes (`RandomState`): what the
/// canonical bytes must make irrelevant.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tally {
    /// Counts per word, merged by union (each step writes new words).
    pub counts: std::collections::HashMap<String, u64>,
    /// Steps taken.
    pub steps: u64,
}

/// The delta of [`Tally`].
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct TallyDelta {
    /// New words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<std::collections::HashMap<String, u64>>,
    /// Steps to add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
}

impl graph_runtime::Delta for TallyDelta {
    fn writes(&self, visit: &mut dyn FnMut(graph_runtime::state::FieldWrite)) {
        use graph_runtime::state::{FieldWrite, Strategy};
        if self.counts.is_some() {
            visit(FieldWrite::new("counts", Strategy::Union));
        }
        if self.steps.is_some() {
            visit(FieldWrite::new("steps", Strategy::Sum));
        }
    }
}

impl graph_runtime::Reducer for Tally {
    type Delta = TallyDelta;
    fn apply(&mut self, d: TallyDelta) -> Result<(), graph_runtime::MergeError> {
        use graph_runtime::state::merge;
        if let Some(v) = d.counts {
            merge::union(&mut self.counts, v, "counts")?;
        }
        if let Some(v) = d.steps {
            merge::sum(&mut self.steps, v, "steps")?;
        }
        Ok(())
    }
}

/// One node looping `steps` times, adding eight words per step to a [`Tally`]: after a few steps the map
/// holds dozens of entries, whose `HashMap` order is different in every process.
pub fn tally_graph(steps: u64) -> Graph<Tally> {
    tally_graph_aborting(steps, None)
}

/// [`tally_graph`], whose process aborts when the node starts with `abort_at` steps committed (after
/// that step's commit, before the next one's): a kill at a known point, whatever the machine's load.
pub fn tally_graph_aborting(steps: u64, abort_at: Option<u64>) -> Graph<Tally> {
    Graph::<Tally>::builder("tally")
        .node("add", move |s: &Tally, _c| {
            let n = s.steps;
            if abort_at == Some(n) {
                std::process::abort();
            }
            let words = (0..8).map(|i| (format!("w{n}-{i}"), n * 8 + i)).collect();
            let route = Route::Goto(u32::from(n + 1 >= steps));
            Box::pin(async move { Ok((TallyDelta { counts: Some(words), steps: Some(1) }, route)) })
        })
        .entry("add")
        .edge("add", "add")
        .edge("add", END)
        .build()
        .expect("valid graph")
}

/// Where [`ledger_graph`]'s process aborts, to test effects across crashes: at `iteration`, at `point`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerCrash {
    /// Inside the charge closure, before the world sees the call.
    BeforeCall(u64),
    /// Inside the charge closure, after the world saw the call, before it returns (nothing journaled).
    AfterCall(u64),
    /// In the node, after the charge's response was journaled, before the step commits.
    AfterJournal(u64),
    /// At the start of the next iteration: after the step with this iteration's charge committed.
    AfterCommit(u64),
}

/// A loop of `iterations` steps; each charges a card (a non-idempotent effect) and sends a mail (an
/// idempotent one). Every real call appends `charge <key>` or `mail <key>` to the file `ledger` (one
/// `write` per line, so a kill cannot tear it): the world, as the tests see it. The charge's response is
/// `rcpt-<first 8 characters of its key>`, so a person (the test) can confirm it by reading the ledger.
pub fn ledger_graph(iterations: u64, ledger: std::path::PathBuf, crash: Option<LedgerCrash>) -> Graph<Trace> {
    use std::io::Write;
    let ledger = Arc::new(ledger);
    let append = move |ledger: &std::path::Path, line: String| {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(ledger).expect("ledger opens");
        f.write_all(line.as_bytes()).expect("ledger write");
    };
    Graph::<Trace>::builder("ledger")
        .node("step", move |s, ctx| {
            let (ledger, i) = (ledger.clone(), s.count);
            Box::pin(async move {
                if crash == Some(LedgerCrash::AfterCommit(i.wrapping_sub(1))) {
                    std::process::abort();
                }
                let receipt: String = ctx
                    .effect("card.charge", &("alice", i))
                    .run(|key| {
                        let ledger = ledger.clone();
                        async move {
                            if crash == Some(LedgerCrash::BeforeCall(i)) {
                                std::process::abort();
                            }
                            append(&ledger, format!("charge {key}\n"));
                            if crash == Some(LedgerCrash::AfterCall(i)) {
                                std::process::abort();
                            }
                            Ok::<_, graph_runtime::NodeError>(ledger_receipt(&key))
                        }
                    })
                    .await?;
                if crash == Some(LedgerCrash::AfterJournal(i)) {
                    std::process::abort();
                }
                let sent: String = ctx
                    .effect("mail.send", &receipt)
                    .idempotent()
                    .run(|key| {
                        let (ledger, sent) = (ledger.clone(), format!("sent {receipt}"));
                        async move {
                            append(&ledger, format!("mail {key}\n"));
                            Ok::<_, graph_runtime::NodeError>(sent)
                        }
                    })
                    .await?;
                let route = Route::Goto(u32::from(i + 1 >= iterations));
                Ok((TraceDelta::default().count(1).log(sent), route))
            })
        })
        .entry("step")
        .edge("step", "step")
        .edge("step", END)
        .build()
        .expect("valid graph")
}

/// The response [`ledger_graph`]'s charge returns for an effect key.
pub fn ledger_receipt(key: &str) -> String {
    format!("rcpt-{}", &key[..8])
}

/// Appends `line` to the file `ledger` (one `write`: a kill cannot tear it).
pub fn ledger_line(ledger: &std::path::Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(ledger).expect("ledger opens");
    f.write_all(format!("{line}\n").as_bytes()).expect("ledger write");
}

/// How many lines of the file `ledger` are `line`.
pub fn ledger_count(ledger: &std::path::Path, line: &str) -> usize {
    std::fs::read_to_string(ledger).unwrap_or_default().lines().filter(|l| *l == line).count()
}

/// plan → `check` and `approver0`..`approver{n-1}` (one step, a static fan-out) → `join` → END.
///
/// Each approver first notifies its reviewer (a journaled effect), then asks for a decision with
/// `ctx.interrupt` (a `bool`), unless `upfront` gives the decisions (the run that had its input from the
/// start, to compare with). `check` does plain work. Every execution of `check` and of an approver past
/// its interrupt, and every real notification, appends a line to the file `ledger` (`check`,
/// `approver<i>`, `notify<i>`): what ran, as the tests count it, across processes.
pub fn approval(approvers: usize, ledger: std::path::PathBuf, upfront: Option<Vec<bool>>) -> Graph<Trace> {
    let ledger = Arc::new(ledger);
    let check_ledger = ledger.clone();
    let mut b = Graph::<Trace>::builder("approval")
        .node("plan", |_s, _c| Box::pin(async { Ok((TraceDelta::default().log("plan"), Route::Declared)) }))
        .node("check", move |_s, _c| {
            let ledger = check_ledger.clone();
            Box::pin(async move {
                ledger_line(&ledger, "check");
                Ok((TraceDelta::default().log("checked").count(1), Route::Declared))
            })
        })
        .edge("plan", "check")
        .edge("check", "join");
    for i in 0..approvers {
        let name = format!("approver{i}");
        let (ledger, upfront) = (ledger.clone(), upfront.clone());
        b = b
            .node(name.clone(), move |_s, ctx| {
                let (ledger, upfront) = (ledger.clone(), upfront.clone());
                Box::pin(async move {
                    let sent: String = ctx
                        .effect("notify", &i)
                        .run(|key| {
                            let ledger = ledger.clone();
                            async move {
                                ledger_line(&ledger, &format!("notify{i}"));
                                Ok::<_, NodeError>(format!("notified {}", &key[..6]))
                            }
                        })
                        .await?;
                    let approved: bool = match &upfront {
                        Some(answers) => answers[i],
                        None => ctx.interrupt(
                            &serde_json::json!({ "approver": i, "question": "ship it?", "sent": sent }),
                        )?,
                    };
                    ledger_line(&ledger, &format!("approver{i}"));
                    Ok((
                        TraceDelta::default().log(format!("approver{i}:{approved}")).count(1),
                        Route::Declared,
                    ))
                })
            })
            .edge("plan", name.clone())
            .edge(name, "join");
    }
    b.node("join", |s, _c| {
        Box::pin(async move { Ok((TraceDelta::default().log(format!("join:{}", s.count)), Route::Declared)) })
    })
    .edge("join", END)
    .entry("plan")
    .build()
    .expect("valid graph")
}

/// What a node of [`worker_fanout`] calls on every execution: (run, step, node). The worker tests count
/// executions in a table of the database (re-executions after a kill are expected; commits are not
/// repeated).
pub type ExecutionLog = Arc<dyn Fn(String, u64, String) -> BoxFuture<'static, ()> + Send + Sync>;

/// The worker tests' workflow: plan → w0..w{width-1} (fan-out) → join → plan … `iterations` times, then
/// END (three steps per iteration). Every node sleeps `delay`; each `w` draws from `ctx.rng()`, reports its
/// execution to `log`, and appends `"{label}{name}:{roll}:{step}"`: with an empty label the final state
/// depends only on the run's seed; a label tells which worker committed a step.
pub fn worker_fanout(
    width: usize,
    iterations: usize,
    delay: Duration,
    label: String,
    log: ExecutionLog,
) -> Graph<Trace> {
    worker_fanout_version(1, width, iterations, delay, label, log)
}

/// [`worker_fanout`] as graph version `version`: from 2 on, its `w` nodes prefix their entries with
/// `v{version}/` (so a final state tells which version ran the run).
pub fn worker_fanout_version(
    version: u32,
    width: usize,
    iterations: usize,
    delay: Duration,
    label: String,
    log: ExecutionLog,
) -> Graph<Trace> {
    let label = if version > 1 { format!("v{version}/{label}") } else { label };
    let mut b = Graph::<Trace>::builder("worker-fanout").version(version).node("plan", move |s, ctx| {
        let n = s.log.iter().filter(|l| l.starts_with("join")).count();
        let step = ctx.step();
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            Ok((TraceDelta::default().log(format!("plan{n}@{step}")), Route::Declared))
        })
    });
    for i in 0..width {
        let name = format!("w{i}");
        let (label, log, me) = (label.clone(), log.clone(), name.clone());
        b = b.node(name.clone(), move |_s, ctx| {
            let (label, log, me) = (label.clone(), log.clone(), me.clone());
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                let roll = ctx.rng().next_u64() % 1000;
                let step = ctx.step();
                log(ctx.run_id().to_owned(), step, me.clone()).await;
                Ok((
                    TraceDelta::default().log(format!("{label}{me}:{roll}:{step}")).best(roll).count(1),
                    Route::Declared,
                ))
            })
        });
        b = b.edge("plan", name.clone()).edge(name, "join");
    }
    b.node("join", move |s, _ctx| {
        let n = s.log.iter().filter(|l| l.starts_with("join")).count();
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            let route = if n + 1 < iterations { Route::Goto(0) } else { Route::Goto(1) };
            Ok((TraceDelta::default().log(format!("join{n}")), route))
        })
    })
    .edge("join", "plan")
    .edge("join", END)
    .entry("plan")
    .build()
    .expect("valid graph")
}

/// An [`ExecutionLog`] that records nothing.
pub fn no_log() -> ExecutionLog {
    Arc::new(|_, _, _| Box::pin(async {}))
}

/// The graph the schedule crash test fires (`src/bin/schedule_child.rs`): one node that sleeps `delay`
/// (so a kill may land mid-run) and logs the run it belongs to.
pub fn schedule_tick(delay: Duration) -> Graph<Trace> {
    Graph::<Trace>::builder("schedule-tick")
        .node("tick", move |_s, ctx| {
            let run = ctx.run_id().to_owned();
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok((TraceDelta::default().log(format!("ticked {run}")), Route::Declared))
            })
        })
        .entry("tick")
        .edge("tick", END)
        .build()
        .expect("the schedule graph is valid")
}

/// Adds a node of [`nested_writer`] that appends `name` to the ledger through a journaled effect (once
/// per committed execution, across kills) and logs `name`.
fn ledgered(
    b: GraphBuilder<Trace>,
    ledger: &Arc<std::path::PathBuf>,
    name: &'static str,
) -> GraphBuilder<Trace> {
    let ledger = ledger.clone();
    b.node(name, move |_s, ctx| {
        let ledger = ledger.clone();
        Box::pin(async move {
            ctx.effect("ledger", &name)
                .run(|_key| {
                    let ledger = ledger.clone();
                    async move {
                        ledger_line(&ledger, name);
                        Ok::<_, NodeError>(())
                    }
                })
                .await?;
            Ok((TraceDelta::default().log(name).count(1), Route::Declared))
        })
    })
}

/// Three levels of graphs, the composition tests' workflow:
///
/// - `writer`: `outline` → `review` (a subgraph) and `sidebar` (one step) → `publish` → END;
/// - `review`: `draft` → `approve` (a subgraph) → `polish` → END;
/// - `approve`: `prep` → `ask` → END, where `ask` notifies (a journaled effect, ledger line `notify`),
///   then asks `ctx.interrupt::<bool>` unless `upfront` gives the answer, then appends `asked` (plain
///   code, so a line per execution past the question).
///
/// Every other node but `sidebar` (plain code) appends its name through a journaled effect. Each subgraph's input carries the
/// parent's log length, and its output folds the child's log into one parent entry, so the final state
/// shows the mapping at every level.
pub fn nested_writer(ledger: std::path::PathBuf, upfront: Option<bool>) -> Graph<Trace> {
    let ledger = Arc::new(ledger);
    let ask_ledger = ledger.clone();
    let approve = ledgered(Graph::<Trace>::builder("approve"), &ledger, "prep")
        .node("ask", move |s, ctx| {
            let ledger = ask_ledger.clone();
            let seen = s.log.len();
            Box::pin(async move {
                ctx.effect("notify", &seen)
                    .run(|_key| {
                        let ledger = ledger.clone();
                        async move {
                            ledger_line(&ledger, "notify");
                            Ok::<_, NodeError>(())
                        }
                    })
                    .await?;
                let yes: bool = match upfront {
                    Some(answer) => answer,
                    None => ctx.interrupt(&serde_json::json!({ "question": "publish?", "seen": seen }))?,
                };
                ledger_line(&ledger, "asked");
                Ok((TraceDelta::default().log(format!("ask:{yes}")).count(1), Route::Declared))
            })
        })
        .entry("prep")
        .edge("prep", "ask")
        .edge("ask", END)
        .build()
        .expect("valid graph");
    let fold = |name: &'static str| {
        move |_p: &Trace, c: Trace| {
            TraceDelta::default().log(format!("{name}[{}]", c.log.join(","))).count(c.count)
        }
    };
    let open = |p: &Trace| Trace { log: vec![format!("in:{}", p.log.len())], ..Trace::default() };
    let review = ledgered(Graph::<Trace>::builder("review"), &ledger, "draft").subgraph(
        "approve",
        approve,
        open,
        fold("approve"),
    );
    let review = ledgered(review, &ledger, "polish")
        .entry("draft")
        .edge("draft", "approve")
        .edge("approve", "polish")
        .edge("polish", END)
        .build()
        .expect("valid graph");
    let writer = ledgered(Graph::<Trace>::builder("writer"), &ledger, "outline").subgraph(
        "review",
        review,
        open,
        fold("review"),
    );
    // `sidebar` is plain code: it runs beside the review's commits, and a kill there must not find an
    // effect of its own in flight (that would pause the run for confirmation, as it should).
    ledgered(writer, &ledger, "publish")
        .node("sidebar", |_s, _c| {
            Box::pin(async { Ok((TraceDelta::default().log("sidebar").count(1), Route::Declared)) })
        })
        .entry("outline")
        .edge("outline", "review")
        .edge("outline", "sidebar")
        .edge("review", "publish")
        .edge("sidebar", "publish")
        .edge("publish", END)
        .build()
        .expect("valid graph")
}

/// The child graph of [`batch`]: `work` appends `doc <key>` to the ledger (plain code: a line per
/// execution), waits `delay`, and fails while its key is in `fail`; it logs `done:<key>`.
pub fn doc(ledger: std::path::PathBuf, delay: Duration, fail: Vec<String>) -> Graph<Trace> {
    let (ledger, fail) = (Arc::new(ledger), Arc::new(fail));
    Graph::<Trace>::builder("doc")
        .node("work", move |s, _c| {
            let (ledger, fail) = (ledger.clone(), fail.clone());
            let key = s.last.clone().unwrap_or_default();
            Box::pin(async move {
                ledger_line(&ledger, &format!("doc {key}"));
                tokio::time::sleep(delay).await;
                if fail.contains(&key) {
                    return Err(NodeError::fatal(format!("{key} cannot be processed")));
                }
                Ok((TraceDelta::default().log(format!("done:{key}")).count(1), Route::Declared))
            })
        })
        .entry("work")
        .edge("work", END)
        .build()
        .expect("valid graph")
}

/// A batch that fans out child runs: `fan` starts `n` runs of `docs`'s graph (keys `doc-0`…), joins
/// each (the run parks until they end), with `opts` (where they run, the parent-close policy, how often
/// a parked parent looks), and logs each child's result
/// (`doc-i:<log>` or `doc-i:failed`), then appends `fan` to the ledger (plain code) → END.
pub fn batch(
    docs: graph_runtime::Engine<Trace>,
    n: usize,
    opts: graph_runtime::child::ChildOptions,
    ledger: std::path::PathBuf,
) -> Graph<Trace> {
    let (docs, ledger, opts) = (Arc::new(docs), Arc::new(ledger), Arc::new(opts));
    Graph::<Trace>::builder("batch")
        .node("fan", move |_s, ctx| {
            let (docs, ledger, opts) = (docs.clone(), ledger.clone(), opts.clone());
            Box::pin(async move {
                let mut children = Vec::new();
                for i in 0..n {
                    let key = format!("doc-{i}");
                    let input = Trace { last: Some(key.clone()), ..Trace::default() };
                    children
                        .push((key.clone(), ctx.spawn_run_with(&docs, &key, input, (*opts).clone()).await?));
                }
                let mut delta = TraceDelta::default();
                for (key, child) in &children {
                    let line = match ctx.join_run_with(&docs, child, (*opts).clone()).await? {
                        Ok(state) => format!("{key}:{}", state.log.join(",")),
                        Err(_) => format!("{key}:failed"),
                    };
                    delta = delta.log(line);
                }
                ledger_line(&ledger, "fan");
                Ok((delta.count(1), Route::Declared))
            })
        })
        .entry("fan")
        .edge("fan", END)
        .build()
        .expect("valid graph")
}
