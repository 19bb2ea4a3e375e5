//! Composition: subgraphs three levels deep (`graph_tests::graphs::nested_writer`) interrupting and
//! resuming in place across processes, and killed at every commit point.

use std::path::Path;
use std::process::Command;

use graph_runtime::store::{RunFilter, SledStore};
use graph_runtime::Engine;
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
    lines.iter().filter(|l| !l.starts_with("ack ")).collect()
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
