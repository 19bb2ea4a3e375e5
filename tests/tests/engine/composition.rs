//! Composition: subgraphs three levels deep (`graph_tests::graphs::nested_writer`) interrupting and
//! resuming in place across processes, and killed at every commit point.

use std::path::Path;
use std::process::Command;

use graph_runtime::Engine;
use graph_runtime::store::{RunFilter, SledStore};
use graph_tests::Trace;
use graph_tests::graphs::{ledger_count, nested_writer};

/// Runs `subgraph_child` and returns its stdout lines and whether it exited successfully.
fn child(store: &Path, ledger: &Path, args: &[&str], crash: Option<String>) -> (bool, Vec<String>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_subgraph_child"));
    cmd.arg(format!("sled:{}", store.display())).arg("w").arg(ledger).args(args);
    if let Some(at) = crash {
        cmd.env("CRASH_AT", at);
    }
    let out = cmd.output().expect("the child starts");
    if crash_free(&out) {
        assert!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let lines = String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect();
    (out.status.success(), lines)
}

fn crash_free(out: &std::process::Output) -> bool {
    // An abort is a signal, no exit code.
    out.status.code().is_some()
}

fn answers(lines: &[String]) -> Vec<&String> {
    lines.iter().filter(|l| !["ack ", "nack ", "kill "].iter().any(|p| l.starts_with(p))).collect()
}

/// What each ledgered node appended, by name.
fn counts(ledger: &Path) -> Vec<(&'static str, usize)> {
    ["outline", "draft", "prep", "notify", "asked", "polish", "publish"]
        .into_iter()
        .map(|n| (n, ledger_count(ledger, n)))
        .collect()
}

fn each(names: &[&'static str], n: usize) -> Vec<(&'static str, usize)> {
    ["outline", "draft", "prep", "notify", "asked", "polish", "publish"]
        .into_iter()
        .map(|name| (name, if names.contains(&name) { n } else { 0 }))
        .collect()
}

/// The `done` line of the run that had its answer from the start, in a store of its own.
fn upfront_done() -> String {
    let dir = tempfile::tempdir().unwrap();
    let (ok, lines) = child(&dir.path().join("s"), &dir.path().join("l"), &["upfront"], None);
    assert!(ok);
    let done = answers(&lines);
    assert_eq!(done.len(), 1, "{lines:?}");
    assert!(done[0].starts_with("done "), "{lines:?}");
    done[0].clone()
}

#[test]
fn a_subgraph_interrupting_three_levels_deep_resumes_in_place_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let (store, ledger) = (dir.path().join("store"), dir.path().join("ledger"));
    let (_, first) = child(&store, &ledger, &["start"], None);
    let first: Vec<String> = answers(&first).into_iter().cloned().collect();
    assert_eq!(first.len(), 1, "{first:?}");
    let (id, payload) = first[0].strip_prefix("interrupt ").unwrap().split_once(' ').unwrap();
    // The id names the nesting: the writer's item, the review's, the approve's own question.
    let levels: Vec<&str> = id.split('>').collect();
    assert_eq!(levels.len(), 3, "{id}");
    assert!(levels.iter().all(|l| l.ends_with("#0")), "{id}");
    let payload: serde_json::Value = serde_json::from_str(payload).unwrap();
    assert_eq!(payload["question"], "publish?");
    // Everything before the question ran once; nothing after it ran.
    let before = ["outline", "draft", "prep", "notify"];
    assert_eq!(counts(&ledger), each(&before, 1));
    // Starting again runs nothing: the run waits with the same question.
    let (_, again) = child(&store, &ledger, &["start"], None);
    assert_eq!(answers(&again), first.iter().collect::<Vec<_>>());
    assert_eq!(counts(&ledger), each(&before, 1));
    // Answering in a third process resumes the innermost run in place.
    let (_, done) = child(&store, &ledger, &["answer", "true"], None);
    assert_eq!(answers(&done), [&upfront_done()]);
    let all = ["outline", "draft", "prep", "notify", "asked", "polish", "publish"];
    assert_eq!(counts(&ledger), each(&all, 1));
}

#[tokio::test]
async fn subgraph_runs_are_stored_under_their_parent_item_and_visible() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path().join("s")).unwrap();
    let engine = Engine::builder(nested_writer(dir.path().join("l"), Some(true))).store(store).build();
    let out = engine.run("w", Trace::default()).await.unwrap();
    assert!(out.is_completed());
    assert_eq!(
        out.state.log,
        ["outline", "review[in:1,draft,approve[in:2,prep,ask:true],polish]", "sidebar", "publish"]
    );
    // Three runs: the writer, its review, and the review's approve, each id under its parent's.
    let mut runs: Vec<String> =
        engine.store().list_runs(&RunFilter::all()).await.unwrap().into_iter().map(|r| r.run_id).collect();
    runs.sort();
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert_eq!(runs[0], "w");
    assert!(runs[1].starts_with("w/review.1."), "{runs:?}");
    assert!(runs[2].starts_with(&format!("{}/approve.1.", runs[1])), "{runs:?}");
    // The child's steps are checkpoints like any.
    for (run, steps) in [(&runs[1], 3), (&runs[2], 2)] {
        let info = engine.store().run_info(run).await.unwrap().unwrap();
        assert_eq!((info.latest_step, info.status.as_str()), (steps, "completed"), "{run}");
    }
}

#[test]
fn killed_at_every_commit_point_inside_subgraphs_loses_nothing_and_doubles_nothing() {
    let reference = upfront_done();
    // How many commits an uninterrupted run makes.
    let dir = tempfile::tempdir().unwrap();
    let (_, lines) = child(&dir.path().join("s"), &dir.path().join("l"), &["upfront"], None);
    let commits = lines.iter().filter(|l| l.starts_with("ack ")).count() as u64;
    assert!(commits >= 10, "{lines:?}");
    let all = ["outline", "draft", "prep", "notify", "asked", "polish", "publish"];
    for n in 1..=commits {
        for point in ["before", "after"] {
            let dir = tempfile::tempdir().unwrap();
            let (store, ledger) = (dir.path().join("s"), dir.path().join("l"));
            let (ok, _) = child(&store, &ledger, &["upfront"], Some(format!("{n}:{point}")));
            assert!(!ok, "commit {n} {point}: the process was not killed");
            let (ok, lines) = child(&store, &ledger, &["upfront"], None);
            assert!(ok);
            assert_eq!(answers(&lines), [&reference], "commit {n} {point}");
            // Journaled effects ran once; `asked` is plain code past the (answered) question, so a kill
            // after it and before its step's commit runs it again.
            let mut got = counts(&ledger);
            let asked = got.iter_mut().find(|(name, _)| *name == "asked").unwrap();
            assert!((1..=2).contains(&asked.1), "commit {n} {point}: {got:?}");
            asked.1 = 1;
            assert_eq!(got, each(&all, 1), "commit {n} {point}");
        }
    }
}

mod failures {
    //! A failed branch keeps its siblings' work; error handlers (`on_error`).

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::time::Duration;

    use graph_runtime::node::NodeFailure;
    use graph_runtime::prelude::*;
    use graph_runtime::{Error, GraphError};
    use graph_tests::{Trace, TraceDelta};

    /// plan → a, b, c (one step) → join → END. `b` fails while `broken` is set; `c` fails (at once)
    /// while `c_broken` is; every execution is counted.
    fn fanout(broken: Arc<AtomicBool>, c_broken: Arc<AtomicBool>, runs: Arc<[AtomicU32; 3]>) -> Graph<Trace> {
        let mut b = Graph::<Trace>::builder("fanout").node("plan", |_s, _c| {
            Box::pin(async { Ok((TraceDelta::default().log("plan"), Route::Declared)) })
        });
        for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
            let (broken, c_broken, runs) = (broken.clone(), c_broken.clone(), runs.clone());
            b = b
                .node(name, move |_s, _c| {
                    let (broken, c_broken, runs) = (broken.clone(), c_broken.clone(), runs.clone());
                    Box::pin(async move {
                        runs[i].fetch_add(1, Ordering::SeqCst);
                        if i == 1 {
                            // Slower than its siblings: they finish (or fail) first.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            if broken.load(Ordering::SeqCst) {
                                return Err(NodeError::fatal("b is broken"));
                            }
                        }
                        if i == 2 && c_broken.load(Ordering::SeqCst) {
                            return Err(NodeError::fatal("c is broken"));
                        }
                        Ok((TraceDelta::default().log(name).count(1), Route::Declared))
                    })
                })
                .edge("plan", name)
                .edge(name, "join");
        }
        b.node("join", |s, _c| {
            Box::pin(
                async move { Ok((TraceDelta::default().log(format!("join:{}", s.count)), Route::Declared)) },
            )
        })
        .edge("join", END)
        .entry("plan")
        .build()
        .unwrap()
    }

    fn counts(runs: &[AtomicU32; 3]) -> [u32; 3] {
        [0, 1, 2].map(|i| runs[i].load(Ordering::SeqCst))
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_branch_re_runs_alone_after_a_fix_and_keeps_its_siblings_work() {
        let reference = {
            let g = fanout(Arc::default(), Arc::default(), Arc::default());
            Engine::builder(g).build().run("r", Trace::default()).await.unwrap().state
        };
        let (broken, runs) = (Arc::new(AtomicBool::new(true)), Arc::new([0, 0, 0].map(AtomicU32::new)));
        let engine = Engine::builder(fanout(broken.clone(), Arc::default(), runs.clone())).build();
        let err = engine.run("r", Trace::default()).await.unwrap_err();
        assert!(matches!(&err, Error::NodeFailed { node, .. } if node == "b"), "{err}");
        // The siblings ran to the barrier.
        assert_eq!(counts(&runs), [1, 1, 1]);
        broken.store(false, Ordering::SeqCst);
        let out = engine.resume("r").await.unwrap();
        assert!(out.is_completed());
        // Only the failed item ran again; the merge is the one of a run that never failed.
        assert_eq!(counts(&runs), [1, 2, 1]);
        assert_eq!(out.state, reference);
    }

    #[tokio::test(start_paused = true)]
    async fn of_two_failures_in_one_step_the_lowest_ranked_is_reported() {
        // `c` fails at once, `b` later: the step reports `b`, whatever the timing.
        let runs = Arc::new([0, 0, 0].map(AtomicU32::new));
        let g = fanout(Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(true)), runs.clone());
        let err = Engine::builder(g).build().run("r", Trace::default()).await.unwrap_err();
        assert!(matches!(&err, Error::NodeFailed { node, .. } if node == "b"), "{err}");
        assert_eq!(counts(&runs), [1, 1, 1]);
    }

    /// charge (fails `failures` times, retried up to 3 attempts) → END, with `refund` as its handler.
    fn charge(failures: u32, tries: Arc<AtomicU32>) -> Graph<Trace> {
        Graph::<Trace>::builder("charge")
            .node_with(
                "charge",
                move |_s, _c| {
                    let tries = tries.clone();
                    Box::pin(async move {
                        if tries.fetch_add(1, Ordering::SeqCst) < failures {
                            return Err(NodeError::new("card declined"));
                        }
                        Ok((TraceDelta::default().log("charged"), Route::Declared))
                    })
                },
                NodePolicy::default().retry(RetryPolicy::attempts(3)),
            )
            .node("refund", |_s, ctx| {
                Box::pin(async move {
                    let f: NodeFailure = ctx.input()?.expect("the failure is the handler's input");
                    let line = format!("refund:{}:{}:{}:{}", f.node, f.step, f.attempts, f.error);
                    Ok((TraceDelta::default().log(line), Route::Declared))
                })
            })
            .on_error("charge", "refund")
            .entry("charge")
            .edge("charge", END)
            .edge("refund", END)
            .build()
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_handler_runs_after_the_retries_with_the_failure_as_input() {
        let tries = Arc::new(AtomicU32::new(0));
        let out = Engine::builder(charge(5, tries.clone())).build().run("r", Trace::default()).await.unwrap();
        assert!(out.is_completed());
        assert_eq!(out.state.log, ["refund:charge:0:3:card declined"]);
        assert_eq!(tries.load(Ordering::SeqCst), 3);
        assert_eq!(out.steps, 2);
        // A node that succeeds within its retries never reaches its handler.
        let out =
            Engine::builder(charge(2, Arc::default())).build().run("r", Trace::default()).await.unwrap();
        assert_eq!(out.state.log, ["charged"]);
    }

    #[test]
    fn error_handlers_are_checked_when_the_graph_is_built() {
        fn node<'a>(
            _s: &'a (),
            _c: &'a mut Ctx,
        ) -> graph_runtime::node::BoxFuture<'a, NodeResult<(), Route>> {
            Box::pin(async { Ok(((), Route::Declared)) })
        }
        let base = || Graph::<()>::builder("g").node("a", node).node("h", node).entry("a").edge("a", END);
        // A handler reachable only through `on_error` is reachable; without it, `h` is not.
        assert!(base().edge("h", END).on_error("a", "h").build().is_ok());
        assert!(
            matches!(base().edge("h", END).build(), Err(GraphError::Unreachable { node, .. }) if node == "h")
        );
        // A handler with no way to END is a trap.
        assert!(
            matches!(base().on_error("a", "h").build(), Err(GraphError::NoWayToEnd { node }) if node == "h")
        );
        let unknown = base().edge("h", END).on_error("a", "hh").build();
        assert!(
            matches!(&unknown, Err(GraphError::UnknownNode { name, suggestion: Some(s), .. }) if name == "hh" && s == "h"),
            "{unknown:?}"
        );
        let two = base().edge("h", END).on_error("a", "h").on_error("a", "h").build();
        assert!(matches!(two, Err(GraphError::TwoHandlers { node }) if node == "a"));
        // The handler is part of the fingerprint.
        let with = base().edge("h", END).on_error("a", "h").build().unwrap();
        let without = base().edge("h", END).edge("a", "h").build().unwrap();
        assert_ne!(with.fingerprint(), without.fingerprint());
    }
}

mod children {
    //! Child runs: a batch that fans out child runs and joins them; failures; parent-close policies.

    use std::sync::Arc;
    use std::time::Duration;

    use graph_runtime::child::{ChildOptions, ParentClose};
    use graph_runtime::prelude::*;
    use graph_runtime::store::RunFilter;
    use graph_runtime::{EventType, Store};
    use graph_tests::Trace;
    use graph_tests::graphs::{batch, doc, ledger_count};

    struct Batch {
        parent: Engine<Trace>,
        store: Arc<dyn Store>,
        _dir: tempfile::TempDir,
        ledger: std::path::PathBuf,
    }

    fn setup(n: usize, delay: Duration, fail: &[&str], opts: ChildOptions) -> Batch {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger");
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let fail = fail.iter().map(|s| (*s).to_owned()).collect();
        let docs = Engine::builder(doc(ledger.clone(), delay, fail)).shared_store(store.clone()).build();
        let parent =
            Engine::builder(batch(docs, n, opts, ledger.clone())).shared_store(store.clone()).build();
        Batch { parent, store, _dir: dir, ledger }
    }

    async fn completed(engine: &Engine<Trace>, run: &str) -> RunOutcome<Trace> {
        for _ in 0..10_000 {
            if let Some(out) = engine.outcome(run).await.unwrap()
                && out.is_completed()
            {
                return out;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("run `{run}` did not complete");
    }

    async fn status(store: &dyn Store, run: &str) -> String {
        store.run_info(run).await.unwrap().unwrap().status.as_str().to_owned()
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_fans_out_child_runs_parks_and_completes_once_they_end() {
        let b = setup(3, Duration::from_millis(50), &[], ChildOptions::default());
        let first = b.parent.run("b", Trace::default()).await.unwrap();
        // The parent parked while its children run: no task held.
        assert_eq!(first.status.as_str(), "waiting", "{:?}", first.status);
        let out = completed(&b.parent, "b").await;
        assert_eq!(out.state.log, ["doc-0:done:doc-0", "doc-1:done:doc-1", "doc-2:done:doc-2"]);
        // Each child started and ran once; the parent's node got past its joins once and completed once.
        for i in 0..3 {
            assert_eq!(ledger_count(&b.ledger, &format!("doc doc-{i}")), 1);
        }
        assert_eq!(ledger_count(&b.ledger, "fan"), 1);
        let runs = b.store.list_runs(&RunFilter::all()).await.unwrap();
        assert_eq!(runs.len(), 4);
        for r in runs.iter().filter(|r| r.run_id != "b") {
            assert!(r.run_id.starts_with("b/fan.0.") && r.run_id.contains("~doc-"), "{}", r.run_id);
        }
        let events = b.parent.events("b", 0, 1000).await.unwrap();
        let done = events.iter().filter(|e| e.event_type == EventType::RunCompleted).count();
        assert_eq!(done, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_childs_failure_reaches_the_parent_as_a_typed_error_it_handles() {
        let b = setup(3, Duration::from_millis(5), &["doc-1"], ChildOptions::default());
        b.parent.run("b", Trace::default()).await.unwrap();
        let out = completed(&b.parent, "b").await;
        assert_eq!(out.state.log, ["doc-0:done:doc-0", "doc-1:failed", "doc-2:done:doc-2"]);
        // The failed child was not driven again by the parent's looks.
        assert_eq!(ledger_count(&b.ledger, "doc doc-1"), 1);
    }

    async fn close_with(policy: ParentClose) -> Vec<String> {
        let b = setup(2, Duration::from_secs(3600), &[], ChildOptions::default().parent_close(policy));
        let first = b.parent.run("b", Trace::default()).await.unwrap();
        assert_eq!(first.status.as_str(), "waiting");
        // Let the children start their long work.
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(b.parent.cancel_run("b").await.unwrap(), RunStatus::Cancelled);
        tokio::time::sleep(Duration::from_millis(10)).await;
        let mut out = Vec::new();
        for r in b.store.list_runs(&RunFilter::all()).await.unwrap() {
            out.push(format!(
                "{}={}",
                r.run_id.rsplit('~').next().unwrap(),
                status(&*b.store, &r.run_id).await
            ));
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn cancelling_a_parked_parent_cancels_its_children_or_abandons_them() {
        assert_eq!(
            close_with(ParentClose::Cancel).await,
            ["b=cancelled", "doc-0=cancelled", "doc-1=cancelled"]
        );
        assert_eq!(close_with(ParentClose::Abandon).await, ["b=cancelled", "doc-0=running", "doc-1=running"]);
    }
}

#[test]
fn child_runs_killed_at_every_commit_point_start_each_child_once_and_the_parent_completes_once() {
    use graph_runtime::EventType;
    let saves =
        |lines: &[String]| lines.iter().filter(|l| l.starts_with("ack ") || l.starts_with("nack ")).count();
    let reference = {
        let dir = tempfile::tempdir().unwrap();
        let (ok, lines) = child(&dir.path().join("s"), &dir.path().join("l"), &["batch"], None);
        assert!(ok);
        (answers(&lines).into_iter().cloned().collect::<Vec<_>>(), saves(&lines) as u64)
    };
    let (done, commits) = reference;
    assert_eq!(done.len(), 2, "{done:?}");
    // Eight commits; the process may exit (its run read back completed) before the last one's `ack`.
    assert!(commits >= 7, "{commits}");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut killed = 0;
    // How many commits a run makes depends on timing (a parent that looks before its children end parks
    // and commits once more): every point up to the reference's and two past it, each either killing
    // the process or lying past the commits that process made.
    for n in 1..=commits + 2 {
        for point in ["before", "after"] {
            let dir = tempfile::tempdir().unwrap();
            let (store, ledger) = (dir.path().join("s"), dir.path().join("l"));
            let (ok, first) = child(&store, &ledger, &["batch"], Some(format!("{n}:{point}")));
            let lines = if ok {
                assert!(saves(&first) < n as usize, "commit {n} {point}: the process was not killed");
                first
            } else {
                killed += 1;
                let (ok, lines) = child(&store, &ledger, &["batch"], None);
                assert!(ok);
                lines
            };
            assert_eq!(answers(&lines), done.iter().collect::<Vec<_>>(), "commit {n} {point}");
            // One run per child, each started once; the parent completed once.
            rt.block_on(async {
                let store = SledStore::open(&store).unwrap();
                let runs = graph_runtime::Store::list_runs(&store, &RunFilter::all()).await.unwrap();
                assert_eq!(runs.len(), 4, "commit {n} {point}");
                for r in &runs {
                    let events = graph_runtime::Store::events(&store, &r.run_id, 0, 10_000).await.unwrap();
                    let count = |t: EventType| events.iter().filter(|e| e.event_type == t).count();
                    assert_eq!(count(EventType::RunStarted), 1, "commit {n} {point}: {}", r.run_id);
                    assert_eq!(count(EventType::RunCompleted), 1, "commit {n} {point}: {}", r.run_id);
                }
            });
            // `fan` is plain code past the joins: it runs again where its step's commit did not happen,
            // at most once in each process that drives the parent (a continuation that read the parked
            // parent before another driver of this process moved it looks again instead of running it).
            let processes = if ok { 1 } else { 2 };
            let fan = ledger_count(&ledger, "fan");
            assert!((1..=processes).contains(&fan), "commit {n} {point}: fan ran {fan} times");
        }
    }
    assert!(killed >= 2 * 7, "{killed} of the trials were killed");
}

#[tokio::test]
async fn a_streamed_run_shows_its_subgraphs_events_under_their_namespace() {
    use graph_runtime::{StreamEvent, StreamOptions, SubgraphEvent};
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::builder(nested_writer(dir.path().join("l"), Some(true))).build();
    let mut stream = engine.stream("w", Trace::default(), StreamOptions::default());
    let mut seen = Vec::new();
    let mut finished = None;
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::Subgraph { namespace, event: SubgraphEvent::Updated { node, delta, .. } } => {
                seen.push(format!("{}:{node}:{}", namespace.join("/"), delta["log"][0].as_str().unwrap()));
            }
            StreamEvent::Updated { node, .. } => seen.push(format!(":{node}")),
            StreamEvent::Finished(out) => finished = Some(out),
            _ => {}
        }
    }
    assert!(finished.unwrap().unwrap().is_completed());
    // The child's updates come before their subgraph node's own, each under its nesting.
    let review = seen.iter().position(|s| s == ":review").unwrap();
    let inner: Vec<&String> = seen[..review].iter().filter(|s| s.starts_with("review@1")).collect();
    assert_eq!(
        inner,
        [
            "review@1:draft:draft",
            "review@1/approve@1:prep:prep",
            "review@1/approve@1:ask:ask:true",
            "review@1:approve:approve[in:2,prep,ask:true]",
            "review@1:polish:polish",
        ]
    );
}

mod sends {
    //! `Send` to a subgraph: each branch of a fork runs a child of its own from its own input; forks of a
    //! run with a subgraph.

    use graph_runtime::prelude::*;
    use graph_runtime::store::RunFilter;
    use graph_runtime::{Branch, NodeError};
    use graph_tests::graphs::nested_writer;
    use graph_tests::{Trace, TraceDelta};

    /// square: a child that squares `count` into `best`.
    fn square() -> Graph<Trace> {
        Graph::<Trace>::builder("square")
            .node("sq", |s, _c| {
                let n = s.count;
                Box::pin(async move { Ok((TraceDelta::default().best(n * n), Route::Declared)) })
            })
            .entry("sq")
            .edge("sq", END)
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn each_branch_of_a_fork_runs_a_child_of_its_own_from_its_input() {
        let g = Graph::<Trace>::builder("sends")
            .node("plan", |_s, _c| {
                Box::pin(async move {
                    let branches = (1..=3u64).map(|n| Branch::with_input(0, &n)).collect::<Result<_, _>>()?;
                    Ok((TraceDelta::default(), Route::Fork(branches)))
                })
            })
            .subgraph_from_input(
                "each",
                square(),
                |_p: &Trace, input: Option<&serde_json::Value>| {
                    let n = input
                        .and_then(serde_json::Value::as_u64)
                        .ok_or_else(|| NodeError::fatal("no input"))?;
                    Ok(Trace { count: n, ..Trace::default() })
                },
                |_p, c: Trace| TraceDelta::default().log(format!("sq={}", c.best)).count(c.best),
                NodePolicy::default(),
            )
            .entry("plan")
            .edge("plan", "each")
            .edge("each", END)
            .build()
            .unwrap();
        let engine = Engine::builder(g).build();
        let out = engine.run("s", Trace::default()).await.unwrap();
        // The branches merge in order, each from its own child.
        assert_eq!(out.state.log, ["sq=1", "sq=4", "sq=9"]);
        assert_eq!(out.state.count, 14);
        let runs = engine.store().list_runs(&RunFilter::all()).await.unwrap();
        assert_eq!(runs.len(), 4);
    }

    #[tokio::test]
    async fn a_fork_before_the_subgraph_runs_it_again_as_a_child_of_the_fork_and_one_after_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("l");
        let engine = Engine::builder(nested_writer(ledger.clone(), Some(true))).build();
        let first = engine.run("w", Trace::default()).await.unwrap();
        assert!(first.is_completed());
        // After the step that ran the review (committed as step 2): nothing of it runs again.
        engine.fork("w", 2, "after").await.unwrap();
        let after = engine.resume("after").await.unwrap();
        assert_eq!(after.state, first.state);
        assert_eq!(graph_tests::graphs::ledger_count(&ledger, "draft"), 1);
        // From step 1: the review runs again, as a run under the fork's id.
        engine.fork("w", 1, "before").await.unwrap();
        let before = engine.resume("before").await.unwrap();
        assert_eq!(before.state, first.state);
        assert_eq!(graph_tests::graphs::ledger_count(&ledger, "draft"), 2);
        let mut ids: Vec<String> = engine
            .store()
            .list_runs(&RunFilter::all())
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.run_id)
            .collect();
        ids.retain(|id| id.starts_with("before/"));
        assert_eq!(ids.len(), 2, "the fork's review and its approve");
    }
}

#[tokio::test]
async fn a_child_left_to_a_pool_is_seen_at_the_parents_next_look() {
    use std::sync::Arc;
    use std::time::Duration;

    use graph_runtime::child::{ChildOptions, Drive};
    use graph_runtime::store::RunFilter;
    use graph_runtime::{CancellationToken, MemoryStore, RunStatus, Store, TestClock};
    use graph_tests::graphs::{batch, doc};

    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("l");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clock = TestClock::at(std::time::SystemTime::now());
    let docs = Engine::builder(doc(ledger.clone(), Duration::ZERO, Vec::new()))
        .shared_store(store.clone())
        .clock(clock.clone())
        .build();
    let opts = ChildOptions::default().drive(Drive::Pool).poll(Duration::from_secs(60));
    let parent = Engine::builder(batch(docs.clone(), 1, opts, ledger))
        .shared_store(store.clone())
        .clock(clock.clone())
        .build();
    let first = parent.run("b", Trace::default()).await.unwrap();
    assert_eq!(first.status.as_str(), "waiting");
    let runs = store.list_runs(&RunFilter::all()).await.unwrap();
    let child = runs.iter().find(|r| r.run_id != "b").unwrap();
    // Nothing here drives the child: it waits, runnable, for a pool.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(store.run_info(&child.run_id).await.unwrap().unwrap().status, RunStatus::Running);
    // A worker of the pool (here: another engine of the child's graph) completes it.
    assert!(docs.resume(&child.run_id).await.unwrap().is_completed());
    // The parent looks at its next poll, when the timer service wakes it.
    let shutdown = CancellationToken::new();
    let service = tokio::spawn({
        let (parent, shutdown) = (parent.clone(), shutdown.clone());
        async move { parent.run_timers(shutdown).await }
    });
    clock.advance(Duration::from_secs(61));
    let mut done = None;
    for _ in 0..2000 {
        if let Some(out) = parent.outcome("b").await.unwrap().filter(|o| o.is_completed()) {
            done = Some(out);
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    shutdown.cancel();
    service.await.unwrap().unwrap();
    assert_eq!(done.expect("the parent completes").state.log, ["doc-0:done:doc-0"]);
}

#[tokio::test]
async fn a_replay_of_a_run_with_subgraphs_reads_their_results_and_matches() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("l");
    let engine = Engine::builder(nested_writer(ledger.clone(), None)).build();
    engine.run("w", Trace::default()).await.unwrap();
    let done = engine.resume_with_input("w", &true).await.unwrap();
    let before = graph_tests::graphs::ledger_count(&ledger, "notify");
    let replayed = engine.replay("w", graph_runtime::ReplayMode::Strict).await.unwrap();
    assert_eq!(replayed.state, done.state);
    assert!(replayed.divergences.is_empty(), "{:?}", replayed.divergences);
    // Nothing inside the subgraphs ran again.
    assert_eq!(graph_tests::graphs::ledger_count(&ledger, "notify"), before);
}
