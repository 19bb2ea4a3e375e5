//! The examples' stories, run end to end through the library functions the example binaries call:
//! the research agent's loop and stream, map-reduce's independence from timing, payments charged once
//! across real process crashes, and approval across engines on one store.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use graph_examples::payments::{self, CRASH_ENV, Crash};
use graph_examples::{approval, map_reduce, research};
use graph_runtime::prelude::*;

/// A fresh directory for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("graph-examples-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_research_agent_loops_until_good_enough_and_streams_its_summary() {
    let mut printed = Vec::new();
    let engine = Engine::builder(research::agent::graph()).build();
    let streamed =
        research::run_streamed(&engine, "r", "durable agent workflows", &mut printed).await.unwrap();
    let out = &streamed.outcome;
    assert!(out.is_completed(), "{:?}", out.status);
    let s = &out.state;
    assert!(s.rounds >= 2, "the judge sends the agent back at least once: {} round(s)", s.rounds);
    assert!(s.rounds <= research::MAX_ROUNDS);
    assert!(s.score >= research::GOOD_ENOUGH || s.rounds == research::MAX_ROUNDS, "{s:?}");
    assert!(s.verdict.is_some());
    // One summary per round, each streamed token by token; the last one is the state's.
    assert_eq!(streamed.summaries.len() as u64, s.rounds);
    assert_eq!(streamed.summaries.last(), Some(&s.summary));
    // Four steps per round, and the text printed live.
    assert_eq!(streamed.steps, 4 * s.rounds);
    let printed = String::from_utf8(printed).unwrap();
    assert!(printed.contains("step  0  plan"), "{printed}");
    assert!(printed.contains("search ×"), "{printed}");
    let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words(&printed).contains(&words(&s.summary)), "{printed}");

    // The same run id and topic on a fresh engine: the same path, the same summary.
    let again = Engine::builder(research::agent::graph()).build();
    let twin =
        research::run_streamed(&again, "r", "durable agent workflows", &mut std::io::sink()).await.unwrap();
    assert_eq!(twin.outcome.state, *s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_reduce_gives_the_same_state_hash_whatever_the_timing() {
    let engine = Engine::builder(map_reduce::word_count::graph()).build();
    let docs = map_reduce::sample_docs();
    let mut hashes = std::collections::BTreeSet::new();
    let mut orders = std::collections::BTreeSet::new();
    for i in 0..4 {
        let run = map_reduce::run(&engine, &format!("wc-{i}"), docs.clone()).await.unwrap();
        let merged: Vec<usize> = run.state.partials.iter().map(|p| p.doc).collect();
        assert_eq!(merged, (0..docs.len()).collect::<Vec<_>>(), "partials merge in fork order");
        let mut finished = run.finish_order.clone();
        finished.sort_unstable();
        assert_eq!(finished, merged, "every branch ran once");
        assert_eq!(run.state.totals.values().sum::<u64>(), run.state.words);
        assert_eq!(run.state.totals["the"], 10);
        assert_eq!(run.state.top[0], ("the".to_owned(), 10));
        hashes.insert(run.state_hash);
        orders.insert(run.finish_order);
    }
    assert_eq!(hashes.len(), 1, "one final state, whatever the timing: {hashes:?}");
    // Not guaranteed, but with six branches sleeping 0-60 ms four runs all finishing in one order is
    // vanishingly unlikely; if it happens, the timing did not vary and the test proves less.
    assert!(orders.len() > 1, "the branches finished in the same order every time: {orders:?}");
}

/// Where the payments test's child process finds its directory.
const PAYMENTS_CHILD_DIR: &str = "GRAPH_EXAMPLES_PAYMENTS_CHILD_DIR";

/// The payments test's child process: this test binary, re-run with only this test selected and
/// [`PAYMENTS_CHILD_DIR`] set. Without it (an ordinary test run) it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payments_child_process() {
    let Ok(dir) = std::env::var(PAYMENTS_CHILD_DIR) else { return };
    payments::process(Path::new(&dir), &mut std::io::stdout()).await.unwrap();
}

/// Runs [`payments_child_process`] in a new process on `dir`.
fn spawn_child(dir: &Path, crash: Option<String>) -> std::io::Result<ExitStatus> {
    let mut child = Command::new(std::env::current_exe()?);
    child
        .args(["payments_child_process", "--exact", "--nocapture", "--test-threads=1"])
        .env(PAYMENTS_CHILD_DIR, dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match crash {
        Some(value) => child.env(CRASH_ENV, value),
        None => child.env_remove(CRASH_ENV),
    };
    child.status()
}

async fn payments_story(crash: Crash) -> payments::Report {
    let scratch = Scratch::new(&crash.env_value().replace(':', "-"));
    let dir = scratch.0.join("demo");
    let mut narration = Vec::new();
    let report = payments::demo(&dir, &crash, &mut |c| spawn_child(&dir, c), &mut narration)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&narration)));
    assert!(!report.crashed.success());
    let orders: Vec<&str> = report.charges.keys().map(String::as_str).collect();
    assert_eq!(orders, ["order-1", "order-2", "order-3"]);
    assert!(report.charges.values().all(|n| *n == 1), "{:?}", report.charges);
    let topics: Vec<&str> = report.outbox.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(topics.iter().filter(|t| **t == "receipts").count(), 3, "{topics:?}");
    assert_eq!(topics.iter().filter(|t| **t == "shipments").count(), 3, "{topics:?}");
    for order in &report.orders {
        assert!(order.receipt.is_some(), "{order:?}");
        assert_eq!(order.log.len(), 3, "{order:?}");
    }
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_the_charge_returned_does_not_charge_again() {
    let report = payments_story(Crash::AfterCharge("order-2".into())).await;
    assert_eq!(report.confirmations, 0, "the response was journaled: nobody is asked");
    assert_eq!(report.resumes, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_inside_the_charge_asks_a_person_and_still_charges_once() {
    let report = payments_story(Crash::InsideCharge("order-2".into())).await;
    assert_eq!(report.confirmations, 1, "the outcome was unknown: a person is asked once");
    assert_eq!(report.resumes, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_waits_across_engines_and_goes_on_with_the_answer() {
    let scratch = Scratch::new("approval");
    let engine = approval::open(&scratch.0).unwrap();
    let yes = approval::start(&engine, approval::sample_request()).await.unwrap();
    let no = approval::start(&engine, approval::sample_request()).await.unwrap();
    assert_eq!((yes.run_id.as_str(), no.run_id.as_str()), ("expense-1", "expense-2"));
    assert_eq!(yes.question, "approve 1250.00 EUR for \"team offsite in Lisbon\", requested by dana?");
    assert_eq!(yes.node, "approve");
    drop(engine); // as if the process exited

    let engine = approval::open(&scratch.0).unwrap();
    let done = approval::decide(&engine, &yes.run_id, true).await.unwrap();
    assert!(done.is_completed());
    assert_eq!(done.state.approved, Some(true));
    assert!(done.state.booking.is_some());
    assert_eq!(done.state.log.len(), 3, "{:?}", done.state.log);
    let declined = approval::decide(&engine, &no.run_id, false).await.unwrap();
    assert!(declined.is_completed());
    assert_eq!((declined.state.approved, declined.state.booking.as_ref()), (Some(false), None));
    // A decided run waits for no answer.
    let again = approval::decide(&engine, &yes.run_id, false).await;
    assert!(matches!(again, Err(graph_runtime::Error::ResumeInput { .. })), "{again:?}");
}
