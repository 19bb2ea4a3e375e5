//! `Store::backup_to` on the embedded stores (sled, SQLite): a backup taken while four runs commit is
//! a store that opens, verifies (every run's event log and checkpoints, `verify_run`) and holds each
//! run at a step it had committed; after the original store is destroyed, the backup copied back to
//! the original's path resumes every run to exactly the history (idempotency key per step) and final
//! state of an uninterrupted run. A backup to a path that exists is refused, and the store that
//! refused it goes on.

#![cfg(feature = "sqlite")]

use std::path::Path;
use std::sync::Arc;

use graph_runtime::engine::verify_run;
use graph_runtime::store::{SledStore, SqliteStore};
use graph_runtime::{Engine, Store, StoreError};
use graph_tests::crash_graph;
use graph_tests::faults::{assert_reference_history, reference, run_id, spawn_runs};

const RUNS: usize = 4;
const ITERATIONS: u64 = 40;

#[derive(Clone, Copy)]
enum Kind {
    Sled,
    Sqlite,
}

fn open(kind: Kind, path: &Path) -> Arc<dyn Store> {
    match kind {
        Kind::Sled => Arc::new(SledStore::open(path).unwrap()),
        Kind::Sqlite => Arc::new(SqliteStore::open(path).unwrap()),
    }
}

async fn backup_while_runs_commit_then_restore(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let (original, backup) = match kind {
        Kind::Sled => (dir.path().join("store"), dir.path().join("backup")),
        Kind::Sqlite => (dir.path().join("store.sqlite"), dir.path().join("backup.sqlite")),
    };
    let store = open(kind, &original);
    let engine = Engine::builder(crash_graph(ITERATIONS)).shared_store(store.clone()).build();
    let runs = spawn_runs(&engine, RUNS);
    // Mid-way: every run has committed some steps and none has finished.
    loop {
        let infos = store.list_runs(&Default::default()).await.unwrap();
        if infos.len() == RUNS && infos.iter().all(|i| i.latest_step >= 10) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let before: Vec<u64> = latest_steps(&*store).await;
    store.backup_to(&backup).await.unwrap();
    let after: Vec<u64> = latest_steps(&*store).await;
    // A path that exists is refused; the store goes on.
    let again = store.backup_to(&backup).await.unwrap_err();
    assert!(matches!(again, StoreError::Backend { .. }) && again.to_string().contains("exists"), "{again}");
    for r in runs {
        assert!(r.await.unwrap().unwrap().is_completed(), "the runs finish on the original");
    }
    drop(engine);
    drop(store);

    // The backup: a store of its own, each run at a step between what was committed just before and
    // just after the backup, and every run verifies.
    let copy = open(kind, &backup);
    let mut at_backup = Vec::new();
    for i in 0..RUNS {
        let info = copy.run_info(&run_id(i)).await.unwrap().expect("every run is in the backup");
        assert!((before[i]..=after[i]).contains(&info.latest_step), "{i}: {before:?} {info:?} {after:?}");
        verify_run(&*copy, &run_id(i), None).await.unwrap();
        at_backup.push(info.latest_step);
    }
    drop(copy);

    // The original is damaged (bytes of its index or database file zeroed) and moved aside, as an
    // operator would; the backup is copied to its path, and every run resumes from its last backed-up
    // step to exactly an uninterrupted run's history.
    let file = match kind {
        Kind::Sled => original.join("db").join("db"),
        Kind::Sqlite => original.clone(),
    };
    let mut bytes = std::fs::read(&file).unwrap();
    let (mid, len) = (bytes.len() / 2, bytes.len());
    bytes[mid..len.min(mid + 4096)].fill(0);
    std::fs::write(&file, bytes).unwrap();
    std::fs::rename(&original, dir.path().join("damaged")).unwrap();
    open(kind, &backup).backup_to(&original).await.unwrap();
    let restored = open(kind, &original);
    let engine = Engine::builder(crash_graph(ITERATIONS)).shared_store(restored.clone()).build();
    for (i, &step) in at_backup.iter().enumerate() {
        let run = run_id(i);
        assert_eq!(restored.run_info(&run).await.unwrap().unwrap().latest_step, step);
        let expected = reference(&run, ITERATIONS).await;
        assert!(step < expected.last_step(), "{run} was backed up before it finished");
        let out = engine.resume(&run).await.unwrap();
        assert!(out.is_completed(), "{run}: {out:?}");
        assert_reference_history(&engine, &*restored, &run, &expected).await;
    }
}

/// Each run's latest step, in run order (0 for a run not there yet).
async fn latest_steps(store: &dyn Store) -> Vec<u64> {
    let mut steps = Vec::new();
    for i in 0..RUNS {
        steps.push(store.run_info(&run_id(i)).await.unwrap().map_or(0, |info| info.latest_step));
    }
    steps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sled_backup_taken_while_runs_commit_restores_and_resumes_every_run() {
    backup_while_runs_commit_then_restore(Kind::Sled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_backup_taken_while_runs_commit_restores_and_resumes_every_run() {
    backup_while_runs_commit_then_restore(Kind::Sqlite).await;
}

#[tokio::test]
async fn the_memory_store_has_no_backup_and_says_what_to_use() {
    let e =
        graph_runtime::store::MemoryStore::new().backup_to(Path::new("/nonexistent/x")).await.unwrap_err();
    assert!(matches!(e, StoreError::Unsupported { operation: "backup", .. }), "{e}");
}
