//! The engine on every durable store, through one generic harness ([`graph_tests::backends`]): runs
//! resumed across a reopen, delta storage, corruption and foreign formats as typed errors. Then what is
//! particular to the sled store: its lock, async durability, shared flushes.

use std::time::Duration;

use graph_runtime::store::conformance::Backend;
use graph_runtime::store::{Durability, SledOptions, SledStore, StateRepr};
use graph_runtime::{END, Engine, EngineOptions, Error, Graph, Route, Store, StoreError};
use graph_tests::backends::{RawAccess, Sled};
use graph_tests::{Trace, TraceDelta, state_hash};

graph_tests::for_backends! {
    super: [
        a_run_survives_reopening_the_store_and_equals_the_memory_run,
        steps_are_stored_as_deltas_with_periodic_snapshots,
        flipped_bytes_are_corrupted_and_a_newer_format_is_unsupported,
        a_lost_checkpoint_that_no_read_notices_fails_verification,
    ];
    sled => Sled::new(),
    #[cfg(feature = "postgres")]
    postgres => graph_tests::backends::Postgres::new(),
    #[cfg(feature = "mysql")]
    mysql => graph_tests::backends::MySql::new(),
}

#[cfg(feature = "sqlite")]
graph_tests::for_backends! {
    super: [
        a_run_survives_reopening_the_store_and_equals_the_memory_run,
        steps_are_stored_as_deltas_with_periodic_snapshots,
        flipped_bytes_are_corrupted_and_a_newer_format_is_unsupported,
        a_lost_checkpoint_that_no_read_notices_fails_verification,
    ];
    sqlite => graph_tests::backends::Sqlite::new(),
}

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

async fn a_run_survives_reopening_the_store_and_equals_the_memory_run<B: Backend>(b: &B) {
    let reference = Engine::builder(counter(40)).build().run("c", Trace::default()).await.unwrap();
    let store = b.open().await;
    {
        let short = Engine::builder(counter(40))
            .store(store.clone())
            .options(EngineOptions::default().max_steps(17))
            .build();
        assert!(matches!(short.run("c", Trace::default()).await, Err(Error::MaxStepsExceeded { .. })));
    }
    let store = b.reopen(store).await;
    let engine = Engine::builder(counter(40)).store(store.clone()).build();
    let out = engine.resume("c").await.unwrap();
    assert_eq!(state_hash(&out.state), state_hash(&reference.state));
    assert_eq!(out.steps, reference.steps);
    // Every step committed exactly once, 0..=40.
    let steps: Vec<u64> = store.history("c").await.unwrap().iter().map(|m| m.step).collect();
    assert_eq!(steps, (0..=40).collect::<Vec<_>>());
    // A completed run resumes to its final state without executing.
    assert_eq!(engine.resume("c").await.unwrap().state, out.state);
}

async fn steps_are_stored_as_deltas_with_periodic_snapshots<B: Backend>(b: &B) {
    let store = b.open().await;
    let engine = Engine::builder(counter(200)).store(store.clone()).build();
    let out = engine.run("d", Trace::default()).await.unwrap();
    let cps = store.checkpoints("d", 0, out.steps).await.unwrap();
    let snapshots: Vec<u64> =
        cps.iter().filter(|c| matches!(c.state, StateRepr::Full(_))).map(|c| c.step).collect();
    let deltas = cps.len() - snapshots.len();
    assert!(deltas > 150, "most steps store a delta ({deltas} of {})", cps.len());
    assert!(snapshots.len() >= 2 && snapshots[0] == 0, "{snapshots:?}");
    // Delta bytes per step stay small while the state grows.
    let last_delta = cps.iter().rev().find_map(|c| match &c.state {
        StateRepr::Delta { deltas, .. } => Some(deltas.len()),
        _ => None,
    });
    assert!(last_delta.unwrap() < 100, "{last_delta:?}");
    // Any step's state rebuilds exactly.
    for step in [0, 1, 57, 133, out.steps] {
        let s = engine.state_at("d", step).await.unwrap().unwrap();
        assert_eq!(s.count, step, "state at {step}");
    }
}

async fn flipped_bytes_are_corrupted_and_a_newer_format_is_unsupported<B: RawAccess>(b: &B) {
    let store = b.open().await;
    let engine = Engine::builder(counter(5)).store(store.clone()).build();
    engine.run("x", Trace::default()).await.unwrap();
    let good = B::raw_checkpoint(&store, "x", 5).await.unwrap().unwrap();

    // Flip one byte at a few positions: header, checksum, metadata, payload.
    for pos in [1, 6, 20, 50, good.len() - 2] {
        let mut bad = good.clone();
        bad[pos] ^= 0x40;
        B::put_raw_checkpoint(&store, "x", 5, &bad).await.unwrap();
        let err = store.load_checkpoint("x", 5).await.unwrap_err();
        assert!(
            matches!(&err, StoreError::Corrupted { run: Some(run), step: Some(5), .. } if run == "x")
                || (pos < 8 && matches!(err, StoreError::UnsupportedSchemaVersion { .. })),
            "byte {pos}: {err:?}"
        );
        // The engine reports it typed, and the other steps are untouched.
        assert!(matches!(
            engine.resume("x").await,
            Err(Error::Store(StoreError::Corrupted { step: Some(5), .. }))
        ));
        assert!(store.load_checkpoint("x", 4).await.unwrap().is_some());
    }

    // A record from a newer version of the library: valid checksum, unknown schema version.
    let mut future = good.clone();
    future[4..8].copy_from_slice(&99u32.to_be_bytes());
    let sum = sha2_of(&future[4..8], &future[40..]);
    future[8..40].copy_from_slice(&sum);
    B::put_raw_checkpoint(&store, "x", 5, &future).await.unwrap();
    assert!(matches!(
        store.load_checkpoint("x", 5).await,
        Err(StoreError::UnsupportedSchemaVersion { found: 99, supported: 1 })
    ));

    B::put_raw_checkpoint(&store, "x", 5, &good).await.unwrap();
    assert!(engine.resume("x").await.unwrap().is_completed());
}

/// A checkpoint lost from the middle of a run's history (its row, or the index entry that finds it)
/// reads as a shorter history: the run row and the last checkpoint still agree, so no read notices.
/// `verify` does: the event log records the step's commit, and pruning never removes a checkpoint after
/// the oldest one stored. Pruned steps, whose commits the log also records, verify as before.
async fn a_lost_checkpoint_that_no_read_notices_fails_verification<B: RawAccess>(b: &B) {
    let store = b.open().await;
    let engine = Engine::builder(counter(60)).store(store.clone()).build();
    for run in ["lost", "kept"] {
        engine.run(run, Trace::default()).await.unwrap();
    }
    assert_eq!(engine.verify("lost").await.unwrap().checkpoints_matched, 61);
    let pruned = store.prune("lost", 20).await.unwrap();
    assert!(pruned > 0, "the prune removed the oldest checkpoints");
    let oldest = store.history("lost").await.unwrap()[0].step;
    assert_eq!(engine.verify("lost").await.unwrap().checkpoints_matched, 61 - pruned as u64);

    for step in [oldest + 1, 59] {
        B::remove_checkpoint(&store, "lost", step).await.unwrap();
        let steps: Vec<u64> = store.history("lost").await.unwrap().iter().map(|m| m.step).collect();
        assert!(!steps.contains(&step) && steps.contains(&60), "{steps:?}: no read error, step {step} gone");
        match engine.verify("lost").await {
            Err(Error::Store(StoreError::Corrupted { run: Some(run), step: Some(s), detail, .. })) => {
                assert_eq!((run.as_str(), s), ("lost", oldest + 1), "the first lost step is named");
                assert!(detail.contains(&format!("records the commit of step {s}")), "{detail}");
            }
            other => panic!("step {step} lost: {other:?}"),
        }
    }
    engine.verify("kept").await.unwrap();
}

fn sha2_of(a: &[u8], b: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(a);
    h.update(b);
    h.finalize().into()
}

#[tokio::test]
async fn a_second_open_of_a_held_store_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let _held = SledStore::open(dir.path()).unwrap();
    assert!(matches!(SledStore::open(dir.path()), Err(StoreError::Locked { .. })));
}

/// A lock held for a moment by another open file description of the lock file (what a child process
/// holds between its fork and its `exec`) is waited for, not reported as `Locked`: the store opens
/// once it is let go, 100 ms later.
#[test]
fn a_store_lock_held_for_a_moment_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    drop(SledStore::open(dir.path()).unwrap());
    let holder = std::fs::OpenOptions::new().write(true).open(dir.path().join("graph-runtime.lock")).unwrap();
    holder.try_lock().unwrap();
    let letting_go = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        drop(holder);
    });
    let opened = SledStore::open(dir.path());
    letting_go.join().unwrap();
    assert!(opened.is_ok(), "{:?}", opened.err());
}

/// Found by `faults_damage.rs` (one trial in a CI run): flipped bytes in sled's `db/db` made sled come
/// back without a run's last 37 checkpoints, its row intact, and `history` returned the shorter list
/// without an error. Reads now check the last checkpoint against the row, and `open` replays the whole
/// retained log, which writes the lost entries again.
#[tokio::test]
async fn checkpoints_the_index_lost_are_corrupted_on_read_and_restored_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    graph_runtime::store::conformance::commit_steps(&store, "r", 0..6).await;
    store.remove_from_index("r", 5).unwrap();
    store.remove_from_index("r", 4).unwrap();
    let db = dir.path().join("db");
    for (what, result) in
        [("history", store.history("r").await.map(drop)), ("latest", store.latest("r").await.map(drop))]
    {
        match result {
            Err(StoreError::Corrupted {
                run: Some(run), step: Some(5), file: Some(file), detail, ..
            }) => {
                assert_eq!((run.as_str(), &file), ("r", &db), "{what}");
                assert!(
                    detail.contains("reached step 5") && detail.contains("is step 3"),
                    "{what}: {detail}"
                );
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    drop(store);
    let store = SledStore::open(dir.path()).unwrap();
    let steps: Vec<u64> = store.history("r").await.unwrap().iter().map(|m| m.step).collect();
    assert_eq!(steps, (0..6).collect::<Vec<_>>());
    assert_eq!(store.latest("r").await.unwrap().unwrap().step, 5);
}

/// The check above reads the run's row before its checkpoints: reads racing a run's commits never see a
/// false `Corrupted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_during_commits_are_never_reported_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        SledStore::open_with(dir.path(), SledOptions::default().durability(Durability::Async)).unwrap();
    let engine = Engine::builder(counter(300)).store(store.clone()).build();
    let run = tokio::spawn(async move { engine.run("busy", Trace::default()).await });
    let mut reads = 0;
    while !run.is_finished() {
        store.history("busy").await.unwrap();
        store.latest("busy").await.unwrap();
        reads += 1;
    }
    run.await.unwrap().unwrap();
    assert!(reads > 0);
    assert_eq!(store.history("busy").await.unwrap().len(), 301);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_durability_commits_the_same_history() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        SledStore::open_with(dir.path(), SledOptions::default().durability(Durability::Async)).unwrap();
    let engine = Engine::builder(counter(30)).store(store.clone()).build();
    let out = engine.run("a", Trace::default()).await.unwrap();
    store.flush().await.unwrap();
    assert_eq!(out.state.count, 30);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(store.history("a").await.unwrap().len(), 31);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commits_share_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let cp = graph_runtime::store::conformance::checkpoint(&format!("g{i}"), 0, i);
                store.save_checkpoint(&cp, &[], &graph_runtime::RunStatus::Running, 0).await.unwrap()
            })
        })
        .collect();
    for t in tasks {
        assert!(matches!(t.await.unwrap(), graph_runtime::CommitOutcome::Committed { .. }));
    }
    let flushes = store.log_syncs();
    assert!((1..=16).contains(&flushes), "64 durable commits took {flushes} log syncs");
    // Sequential commits each need their own flush.
    let before = store.log_syncs();
    graph_runtime::store::conformance::commit_steps(&store, "seq", 0..5).await;
    assert_eq!(store.log_syncs() - before, 5);
}
