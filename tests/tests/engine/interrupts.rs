//! Human in the loop: `ctx.interrupt` and resuming with input (across processes, in several branches of
//! one step, several times in one node), input of the wrong type, and breakpoints before and after nodes.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use graph_runtime::prelude::*;
use graph_runtime::{Error, EventType, Store};
use graph_tests::graphs::{approval, ledger_count};
use graph_tests::{Trace, TraceDelta, state_hash};

/// Runs the child process and returns its stdout lines.
fn child(dir: &Path, run: &str, ledger: &Path, approvers: usize, args: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_interrupt_child"))
        .arg(dir)
        .arg(run)
        .arg(ledger)
        .arg(approvers.to_string())
        .args(args)
        .output()
        .expect("the child starts");
    assert!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
}

/// The final state hash of the run that had its decisions from the start.
async fn upfront(approvers: usize, decisions: Vec<bool>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::builder(approval(approvers, dir.path().join("ledger"), Some(decisions))).build();
    let out = engine.run("run", Trace::default()).await.unwrap();
    assert!(out.is_completed());
    state_hash(&out.state)
}

#[tokio::test]
async fn an_interrupt_survives_the_process_and_resumes_with_input_in_another() {
    let dir = tempfile::tempdir().unwrap();
    let (store, ledger) = (dir.path().join("store"), dir.path().join("ledger"));
    let first = child(&store, "r1", &ledger, 1, &["start"]);
    assert_eq!(first.len(), 1, "{first:?}");
    let (id, payload) = first[0].strip_prefix("interrupt ").unwrap().split_once(' ').unwrap();
    let payload: serde_json::Value = serde_json::from_str(payload).unwrap();
    assert_eq!(payload["question"], "ship it?");
    assert!(id.ends_with("#0"), "{id}");
    // The sibling ran, the approver stopped at its interrupt.
    assert_eq!(ledger_count(&ledger, "check"), 1);
    assert_eq!(ledger_count(&ledger, "approver0"), 0);
    // Starting again does not run anything: the run waits.
    assert_eq!(child(&store, "r1", &ledger, 1, &["start"]), first);
    // Input of the wrong type: rejected, nothing changes.
    let rejected = child(&store, "r1", &ledger, 1, &["answer", "-", "\"yes\""]);
    assert!(rejected[0].starts_with("rejected "), "{rejected:?}");
    assert_eq!(child(&store, "r1", &ledger, 1, &["start"]), first);
    let done = child(&store, "r1", &ledger, 1, &["answer", "-", "true"]);
    assert_eq!(done, [format!("done {}", upfront(1, vec![true]).await)]);
    // Each node counted once: the sibling was not run again, nor the notification.
    for line in ["check", "notify0", "approver0"] {
        assert_eq!(ledger_count(&ledger, line), 1, "{line}");
    }
}

#[tokio::test]
async fn interrupts_in_several_branches_of_one_step_take_their_own_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let (store, ledger) = (dir.path().join("store"), dir.path().join("ledger"));
    let first = child(&store, "r2", &ledger, 3, &["start"]);
    assert_eq!(first.len(), 3, "{first:?}");
    let ids: Vec<&str> = first.iter().map(|l| l.split(' ').nth(1).unwrap()).collect();
    // Answered one at a time, each in its own process; the others ask again.
    let second = child(&store, "r2", &ledger, 3, &["answer", ids[1], "false"]);
    assert_eq!(second, [first[0].clone(), first[2].clone()]);
    let third = child(&store, "r2", &ledger, 3, &["answer", ids[2], "true"]);
    assert_eq!(third, [first[0].clone()]);
    let done = child(&store, "r2", &ledger, 3, &["answer", ids[0], "true"]);
    assert_eq!(done, [format!("done {}", upfront(3, vec![true, false, true]).await)]);
    assert_eq!(ledger_count(&ledger, "check"), 1);
    for i in 0..3 {
        assert_eq!(ledger_count(&ledger, &format!("notify{i}")), 1);
        assert_eq!(ledger_count(&ledger, &format!("approver{i}")), 1);
    }
}

#[tokio::test]
async fn several_inputs_at_once_and_typed_errors_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::new();
    let engine = Engine::builder(approval(2, dir.path().join("ledger"), None)).store(store.clone()).build();
    let out = engine.run("r", Trace::default()).await.unwrap();
    let ids: Vec<String> = out.interrupts().iter().map(|i| i.id.clone()).collect();
    assert_eq!(ids.len(), 2);
    assert!(out.interrupts().iter().all(|i| i.kind == InterruptKind::Input && i.step == 1));
    let before = (store.run_info("r").await.unwrap(), store.events("r", 0, 100).await.unwrap());
    let unchanged =
        || async { (store.run_info("r").await.unwrap(), store.events("r", 0, 100).await.unwrap()) };
    // Two wait: the single-input call does not guess.
    assert!(matches!(engine.resume_with_input("r", &true).await, Err(Error::ResumeInput { .. })));
    // An unknown id, no input, a type the node cannot read.
    for inputs in [
        vec![("nope#0".to_owned(), serde_json::json!(true))],
        vec![],
        vec![(ids[0].clone(), serde_json::json!(true)), (ids[1].clone(), serde_json::json!({"no": 1}))],
    ] {
        let err = engine.resume_with_inputs("r", inputs).await.unwrap_err();
        assert!(matches!(err, Error::ResumeInput { .. }), "{err}");
        assert_eq!(unchanged().await, before);
    }
    let answers = ids.iter().map(|id| (id.clone(), serde_json::json!(true))).collect::<Vec<_>>();
    let done = engine.resume_with_inputs("r", answers).await.unwrap();
    assert!(done.is_completed());
    assert_eq!(state_hash(&done.state), upfront(2, vec![true, true]).await);
    // A completed run waits for nothing.
    assert!(matches!(engine.resume_with_input("r", &true).await, Err(Error::ResumeInput { .. })));
}

/// One node asking twice; the effect before the first question runs once.
fn two_questions(calls: Arc<AtomicU32>) -> Graph<Trace> {
    Graph::<Trace>::builder("two-questions")
        .node("ask", move |_s, ctx| {
            let calls = calls.clone();
            Box::pin(async move {
                let ticket: u32 = ctx
                    .effect("ticket.open", &"t")
                    .run(|_| async move { Ok::<_, NodeError>(calls.fetch_add(1, Ordering::SeqCst) + 100) })
                    .await?;
                let name: String = ctx.interrupt(&"name?")?;
                let peek: Option<u32> = ctx.resume_input()?;
                let age: u32 = ctx.interrupt(&format!("age of {name}?"))?;
                assert_eq!(peek, Some(age));
                Ok((TraceDelta::default().log(format!("{ticket}:{name}:{age}")), Route::Declared))
            })
        })
        .entry("ask")
        .edge("ask", END)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_node_asks_twice_and_hears_both_answers() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let engine =
        Engine::builder(two_questions(calls.clone())).store(SledStore::open(dir.path()).unwrap()).build();
    let out = engine.run("q", Trace::default()).await.unwrap();
    assert_eq!(out.interrupts()[0].payload, "name?");
    let out = engine.resume_with_input("q", &"ada").await.unwrap();
    assert_eq!(out.interrupts()[0].payload, "age of ada?");
    assert_eq!(out.interrupts()[0].index, 1);
    drop(engine);
    // A new engine (as a new process would) over the reopened store.
    let engine =
        Engine::builder(two_questions(calls.clone())).store(SledStore::open(dir.path()).unwrap()).build();
    let done = engine.resume_with_input("q", &36).await.unwrap();
    assert_eq!(done.state.log, ["100:ada:36"]);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the effect before the questions ran once");
    // The log records both answers; a strict replay feeds them back and matches byte for byte.
    let types: Vec<EventType> =
        engine.events("q", 0, 100).await.unwrap().iter().map(|e| e.event_type).collect();
    assert_eq!(
        types,
        [
            EventType::RunStarted,
            EventType::Interrupted,
            EventType::Resumed,
            EventType::Interrupted,
            EventType::Resumed,
            EventType::EffectRecorded,
            EventType::StepCommitted,
            EventType::RunCompleted
        ]
    );
    let replayed = engine.replay("q", ReplayMode::Strict).await.unwrap();
    assert_eq!(replayed.state, done.state);
    assert!(replayed.divergences.is_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 1, "replay calls nothing");
    engine.verify("q").await.unwrap();
}

/// a → b → c → END, with breakpoints as given.
fn abc(
    builder: impl FnOnce(graph_runtime::GraphBuilder<Trace>) -> graph_runtime::GraphBuilder<Trace>,
) -> Graph<Trace> {
    let b = Graph::<Trace>::builder("abc")
        .node("a", graph_tests::graphs::logs("a"))
        .node("b", graph_tests::graphs::logs("b"))
        .node("c", graph_tests::graphs::logs("c"))
        .entry("a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END);
    builder(b).build().unwrap()
}

#[tokio::test]
async fn breakpoints_stop_before_and_after_nodes_and_resume_continues() {
    let engine = Engine::builder(abc(|b| b.interrupt_before("b").interrupt_after("b"))).build();
    let out = engine.run("bp", Trace::default()).await.unwrap();
    assert_eq!(out.state.log, ["a"], "nothing of b's step ran");
    let [i] = out.interrupts() else { panic!("{:?}", out.status) };
    assert_eq!((i.kind, i.node.as_str(), i.step), (InterruptKind::Before, "b", 1));
    // `resume` passes a breakpoint; input is for interrupts that ask.
    assert!(matches!(engine.resume_with_input("bp", &1).await, Err(Error::ResumeInput { .. })));
    let out = engine.resume("bp").await.unwrap();
    assert_eq!(out.state.log, ["a", "b"]);
    let [i] = out.interrupts() else { panic!("{:?}", out.status) };
    assert_eq!((i.kind, i.node.as_str(), i.step), (InterruptKind::After, "b", 2));
    let done = engine.resume("bp").await.unwrap();
    assert!(done.is_completed());
    assert_eq!(done.state.log, ["a", "b", "c"]);
    engine.verify("bp").await.unwrap();
}
