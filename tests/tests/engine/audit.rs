//! The audit trail: the hash-chained event log (every kind of damage detected, at the right event; the
//! keyed mode; verification on resume reading only the log's tail), a run's history, and forks.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use graph_runtime::events::{self, Event, chain_hash};
use graph_runtime::prelude::*;
use graph_runtime::store::record::encode;
use graph_runtime::{ChainKey, Error, EventType, Store, StoreError};
use graph_tests::graphs::approval;
use graph_tests::hooked::{Hooked, Hooks};
use graph_tests::{Trace, TraceDelta, state_hash};

/// A counter that loops `n` times: count += 1 per step, then END.
fn counter(n: u64) -> Graph<Trace> {
    Graph::<Trace>::builder("counter")
        .node("tick", move |s, _c| {
            let done = s.count + 1 >= n;
            Box::pin(async move {
                Ok((TraceDelta::default().count(1).log(format!("t{}", 0)), Route::Goto(u32::from(done))))
            })
        })
        .entry("tick")
        .edge("tick", "tick")
        .edge("tick", END)
        .build()
        .unwrap()
}

/// A run with every common kind of event: started, effects, an interrupt and its resumption, steps,
/// completion. Returns the store.
async fn varied_run(store: MemoryStore) -> MemoryStore {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::builder(approval(1, dir.path().join("ledger"), None)).store(store.clone()).build();
    let out = engine.run("r", Trace::default()).await.unwrap();
    assert_eq!(out.interrupts().len(), 1);
    assert!(engine.resume_with_input("r", &true).await.unwrap().is_completed());
    store
}

/// An edit of a whole log.
type Edit = Box<dyn Fn(Vec<Event>) -> Vec<Event> + Send + Sync>;

/// Damages what `events` returns: the stored bytes of one event ([`events::encode`]) with one byte
/// changed, read back as a store reads them ([`events::decode`]); or a whole-log edit.
#[derive(Default)]
struct Tamper {
    /// `(seq, byte, xor)`.
    flip: Mutex<Option<(u64, usize, u8)>>,
    edit: Mutex<Option<Edit>>,
    /// Events the store returned (to see what a resume reads).
    read: AtomicUsize,
}

impl Hooks for Tamper {
    fn events(&self, run_id: &str, events: Vec<Event>) -> Result<Vec<Event>, StoreError> {
        self.read.fetch_add(events.len(), Ordering::SeqCst);
        let events = match &*self.edit.lock().unwrap() {
            Some(edit) => edit(events),
            None => events,
        };
        let flip = *self.flip.lock().unwrap();
        events
            .into_iter()
            .map(|e| match flip {
                Some((seq, at, xor)) if e.seq == seq => {
                    let mut bytes = events::encode(&e);
                    bytes[at] ^= xor;
                    events::decode(run_id, seq, &bytes)
                }
                _ => Ok(e),
            })
            .collect()
    }
}

fn engine_over(store: &Hooked<MemoryStore, std::sync::Arc<Tamper>>) -> Engine<Trace> {
    let dir = std::env::temp_dir().join("audit-ledger-unused");
    Engine::builder(approval(1, dir, None)).store(store.clone()).build()
}

/// Where in an event's stored bytes its `schema_version` value is (a change there reads as a newer
/// format, which is refused as such, never read).
fn version_bytes(bytes: &[u8]) -> std::ops::Range<usize> {
    let text = std::str::from_utf8(bytes).unwrap();
    let key = "\"schema_version\":";
    let start = text.find(key).unwrap() + key.len();
    let len = text[start..].find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len() - start);
    start..start + len
}

#[tokio::test]
async fn every_flipped_byte_of_every_stored_event_is_detected_at_its_seq() {
    let memory = varied_run(MemoryStore::new()).await;
    let log = memory.events("r", 0, 1000).await.unwrap();
    let kinds: std::collections::BTreeSet<String> =
        log.iter().map(|e| format!("{:?}", e.event_type)).collect();
    assert!(kinds.len() >= 6, "a varied log: {kinds:?}");
    let tamper = std::sync::Arc::new(Tamper::default());
    let store = Hooked { inner: memory, hooks: tamper.clone() };
    let engine = engine_over(&store);
    engine.verify("r").await.unwrap();
    let (mut trials, mut as_version) = (0, 0);
    for e in &log {
        let bytes = events::encode(e);
        let version = version_bytes(&bytes);
        for at in 0..bytes.len() {
            for xor in [0x01, 0x80] {
                *tamper.flip.lock().unwrap() = Some((e.seq, at, xor));
                trials += 1;
                match engine.verify("r").await {
                    Err(Error::ExecutionCorrupted { seq, .. }) => {
                        assert_eq!(seq, e.seq, "byte {at} ^ {xor:#x}")
                    }
                    Err(Error::Store(StoreError::UnsupportedSchemaVersion { .. }))
                        if version.contains(&at) =>
                    {
                        as_version += 1
                    }
                    other => panic!("event {} byte {at} ^ {xor:#x}: {other:?}", e.seq),
                }
            }
        }
    }
    *tamper.flip.lock().unwrap() = None;
    engine.verify("r").await.unwrap();
    println!(
        "{trials} flipped bytes over {} events: all detected ({as_version} read as an unknown version)",
        log.len()
    );
    assert!(trials > 2000);
}

#[tokio::test]
async fn deleted_swapped_and_truncated_events_are_detected() {
    let memory = varied_run(MemoryStore::new()).await;
    let n = memory.events("r", 0, 1000).await.unwrap().len() as u64;
    let tamper = std::sync::Arc::new(Tamper::default());
    let store = Hooked { inner: memory, hooks: tamper.clone() };
    let engine = engine_over(&store);
    let cases: Vec<(&str, Edit, u64)> = vec![
        (
            "deleted",
            Box::new(|mut v: Vec<Event>| {
                v.remove(2);
                v
            }),
            2,
        ),
        (
            "swapped",
            Box::new(|mut v: Vec<Event>| {
                v.swap(3, 4);
                v
            }),
            3,
        ),
        (
            "truncated",
            Box::new(move |mut v: Vec<Event>| {
                v.truncate(v.len() - 1);
                v
            }),
            n - 1,
        ),
        (
            "edited and rehashed",
            Box::new(|mut v: Vec<Event>| {
                let mut p = v[1].payload.value();
                p["step"] = serde_json::json!(99);
                v[1].payload = p.into();
                v[1].hash = chain_hash(Some(&v[0].hash), &v[1], None);
                v
            }),
            2,
        ),
    ];
    for (what, edit, seq) in cases {
        *tamper.edit.lock().unwrap() = Some(edit);
        match engine.verify("r").await {
            Err(Error::ExecutionCorrupted { seq: found, .. }) => assert_eq!(found, seq, "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn resume_verifies_the_tail_and_reads_only_it() {
    for steps in [10u64, 300] {
        let memory = MemoryStore::new();
        let tamper = std::sync::Arc::new(Tamper::default());
        let store = Hooked { inner: memory.clone(), hooks: tamper.clone() };
        let engine = Engine::builder(counter(steps)).store(store.clone()).build();
        let cancel = CancellationToken::new();
        // Cancelled at the start (a status change after checkpoint 0), then resumed to the end.
        cancel.cancel();
        let run = format!("c{steps}");
        assert!(engine.run_with(&run, Trace::default(), RunOptions::default().cancel(cancel)).await.is_err());
        let out = engine.resume(&run).await.unwrap();
        assert!(out.is_completed());
        let total = memory.events(&run, 0, 100_000).await.unwrap().len();
        assert!(total as u64 > steps);
        // Resuming a completed run: reads only what its last checkpoint was committed with.
        tamper.read.store(0, Ordering::SeqCst);
        engine.resume(&run).await.unwrap();
        assert!(
            tamper.read.load(Ordering::SeqCst) <= 3,
            "read {} of {total}",
            tamper.read.load(Ordering::SeqCst)
        );
        // Damage in the tail is found by the resume; damage before it only by `verify`.
        let last = total as u64 - 1;
        *tamper.flip.lock().unwrap() = Some((last, 10, 1));
        assert!(
            matches!(engine.resume(&run).await, Err(Error::ExecutionCorrupted { seq, .. }) if seq == last)
        );
        *tamper.flip.lock().unwrap() = Some((1, 10, 1));
        assert!(engine.resume(&run).await.is_ok());
        assert!(matches!(engine.verify(&run).await, Err(Error::ExecutionCorrupted { seq: 1, .. })));
    }
}

#[tokio::test]
async fn a_keyed_log_rejects_a_chain_recomputed_without_the_key() {
    let key = ChainKey::new(*b"0123456789abcdef0123456789abcdef");
    let memory = MemoryStore::new();
    let keyed = Engine::builder(counter(5)).store(memory.clone()).chain_key(key.clone()).build();
    keyed.run("k", Trace::default()).await.unwrap();
    assert_eq!(keyed.verify("k").await.unwrap().events, 7);
    // Without the key the log does not verify...
    let unkeyed = Engine::builder(counter(5)).store(memory.clone()).build();
    assert!(matches!(unkeyed.verify("k").await, Err(Error::ExecutionCorrupted { seq: 0, .. })));
    // ...and a log edited and recomputed without the key verifies unkeyed, but not with the key.
    let tamper = std::sync::Arc::new(Tamper::default());
    *tamper.edit.lock().unwrap() = Some(Box::new(|mut v: Vec<Event>| {
        let mut p = v[2].payload.value();
        p["state_hash"] = serde_json::json!("0".repeat(64));
        v[2].payload = p.into();
        let mut prev: Option<String> = None;
        for e in &mut v {
            e.hash = chain_hash(prev.as_deref(), e, None);
            prev = Some(e.hash.clone());
        }
        v
    }));
    let forged = Hooked { inner: memory.clone(), hooks: tamper };
    // The run row's head is the forger's too (a store they can write).
    let head = forged
        .events("k", 0, 100)
        .await
        .unwrap()
        .last()
        .map(|e| events::ChainHead { seq: e.seq, hash: e.hash.clone() });
    let forged_events = forged.events("k", 0, 100).await.unwrap();
    events::verify("k", None, &forged_events, head.as_ref(), None)
        .expect("the forgery verifies without the key");
    assert!(matches!(
        events::verify("k", None, &forged_events, head.as_ref(), Some(&key)),
        Err(Error::ExecutionCorrupted { seq: 0, .. })
    ));
    let keyed_forged = Engine::builder(counter(5)).store(forged).chain_key(key).build();
    assert!(matches!(keyed_forged.verify("k").await, Err(Error::ExecutionCorrupted { seq: 0, .. })));
}

/// Each `STEP_COMMITTED` payload names what the checkpoints say: the nodes that ran (the previous
/// checkpoint's frontier), the next frontier's nodes, the step's key and state hash.
#[tokio::test]
async fn step_committed_payloads_match_the_checkpoints() {
    let store = MemoryStore::new();
    let engine = Engine::builder(graph_tests::graphs::fork()).store(store.clone()).build();
    engine.run("f", Trace::default()).await.unwrap();
    let nodes =
        |cp: &graph_runtime::Checkpoint| cp.frontier.iter().map(|w| w.node.to_string()).collect::<Vec<_>>();
    let mut seen = 0;
    for e in engine.events("f", 0, 100).await.unwrap() {
        if e.event_type != EventType::StepCommitted {
            continue;
        }
        let step = e.payload.get("step").and_then(|s| s.as_u64()).unwrap();
        let cp = store.load_checkpoint("f", step).await.unwrap().unwrap();
        let before = store.load_checkpoint("f", step - 1).await.unwrap().unwrap();
        let expected = serde_json::json!({
            "step": step,
            "state_hash": cp.state_hash,
            "idempotency_key": cp.idempotency_key,
            "ran": nodes(&before),
            "next": nodes(&cp),
        });
        assert_eq!(e.payload.value(), expected);
        assert_eq!(e.payload.as_str(), serde_json::to_string(&expected).unwrap(), "canonical text");
        seen += 1;
    }
    // plan, then five branches (three research, two audit) at once.
    assert_eq!(seen, 2);
}

#[tokio::test]
async fn history_lists_steps_nodes_and_state_hashes() {
    let engine = Engine::builder(counter(3)).build();
    let out = engine.run("h", Trace::default()).await.unwrap();
    let history = engine.history("h").await.unwrap();
    assert_eq!(history.iter().map(|h| h.step).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert_eq!(history[0].ran, None);
    assert_eq!(history[1].ran.as_deref(), Some(&["tick".to_owned()][..]));
    assert_eq!(history[3].next, Vec::<String>::new());
    for h in &history {
        let state = engine.state_at("h", h.step).await.unwrap().unwrap();
        assert_eq!(h.state_hash, graph_tests::state_hash_canonical(&state));
    }
    assert_eq!(engine.state_at("h", 3).await.unwrap().unwrap(), out.state);
    assert!(history.windows(2).all(|w| w[0].timestamp_ms <= w[1].timestamp_ms));
}

#[tokio::test]
async fn a_fork_starts_with_the_parents_states_and_never_changes_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    let engine = Engine::builder(counter(8)).store(store.clone()).build();
    let parent = engine.run("parent", Trace::default()).await.unwrap();
    let snapshot = |store: SledStore| async move {
        let cps: Vec<Vec<u8>> =
            store.checkpoints("parent", 0, 100).await.unwrap().iter().map(encode).collect();
        (cps, store.events("parent", 0, 1000).await.unwrap(), store.run_info("parent").await.unwrap())
    };
    let before = snapshot(store.clone()).await;
    // An unedited fork at step 3 goes the way its parent went.
    let fork = engine.fork("parent", 3, "fork").await.unwrap();
    assert_eq!(fork.steps, 3);
    for step in 0..=3 {
        assert_eq!(
            engine.state_at("fork", step).await.unwrap(),
            engine.state_at("parent", step).await.unwrap()
        );
    }
    let parent_history = engine.history("parent").await.unwrap();
    let fork_history = engine.history("fork").await.unwrap();
    assert_eq!(
        fork_history.iter().map(|h| &h.state_hash).collect::<Vec<_>>(),
        parent_history[..=3].iter().map(|h| &h.state_hash).collect::<Vec<_>>()
    );
    let done = engine.resume("fork").await.unwrap();
    assert_eq!(state_hash(&done.state), state_hash(&parent.state));
    // An edited fork: the edit goes through the reducer; the next steps read it.
    let edited =
        engine.fork_with("parent", 3, "edited", TraceDelta::default().count(100).log("edit")).await.unwrap();
    assert_eq!(edited.state.count, 3 + 100);
    let done = engine.resume("edited").await.unwrap();
    assert_eq!(done.steps, 4, "count 103 ≥ 8: the next tick ends it");
    assert_eq!(done.state.count, 104);
    // The parent is byte for byte as it was.
    assert_eq!(snapshot(store.clone()).await, before);
    engine.verify("parent").await.unwrap();
    // The forks' logs start with FORKED naming the parent and verify.
    for run in ["fork", "edited"] {
        let first = &engine.events(run, 0, 1).await.unwrap()[0];
        assert_eq!(first.event_type, EventType::Forked);
        assert_eq!(
            (first.payload.get("parent"), first.payload.get("parent_step")),
            (Some(serde_json::json!("parent")), Some(serde_json::json!(3)))
        );
        engine.verify(run).await.unwrap();
    }
    // Bad forks are typed errors.
    assert!(matches!(engine.fork("parent", 3, "fork").await, Err(Error::RunExists { .. })));
    assert!(matches!(engine.fork("parent", 99, "f2").await, Err(Error::StepNotFound { step: 99, .. })));
    assert!(matches!(engine.fork("nobody", 0, "f3").await, Err(Error::RunNotFound { .. })));
}

#[tokio::test]
async fn status_changes_are_in_the_log() {
    let engine = Engine::builder(counter(3)).build();
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert!(engine.run_with("s", Trace::default(), RunOptions::default().cancel(cancel)).await.is_err());
    engine.resume("s").await.unwrap();
    let types: Vec<EventType> =
        engine.events("s", 0, 100).await.unwrap().iter().map(|e| e.event_type).collect();
    assert_eq!(
        types,
        [
            EventType::RunStarted,
            EventType::RunCancelled,
            EventType::Resumed,
            EventType::StepCommitted,
            EventType::StepCommitted,
            EventType::StepCommitted,
            EventType::RunCompleted
        ]
    );
}

/// `verify_run` (what `graphctl verify` runs) while the run goes on committing: its reads of the run
/// row, the events and the checkpoints see different commits, which is never reported as damage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verifying_a_run_while_it_commits_never_reports_damage() {
    let store = MemoryStore::new();
    let engine = Engine::builder(counter(10_000)).store(store.clone()).build();
    let running = tokio::spawn(async move { engine.run("r", Trace::default()).await.unwrap() });
    let (mut verified, mut last_events) = (0, 0);
    while !running.is_finished() {
        if let Some(report) = match graph_runtime::engine::verify_run(&store, "r", None).await {
            Ok(r) => Some(r),
            Err(Error::RunNotFound { .. }) => None,
            Err(e) => panic!("a verify while the run commits reported {e}"),
        } {
            assert!(report.events >= last_events, "the log went back");
            last_events = report.events;
            verified += 1;
        }
        tokio::task::yield_now().await;
    }
    assert!(running.await.unwrap().is_completed());
    let end = graph_runtime::engine::verify_run(&store, "r", None).await.unwrap();
    assert!(end.events > last_events && verified > 10, "{verified} verifies, {} events", end.events);
}
