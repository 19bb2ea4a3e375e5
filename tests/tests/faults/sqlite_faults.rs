//! A full file system under the SQLite store (feature `sqlite`). Eight runs of `crash_graph` commit
//! at once (so commits share groups) on a store in a small tmpfs that a filler file has nearly filled:
//! SQLite's writes fail with `SQLITE_FULL` at a different point each trial (a WAL append inside a
//! group, the WAL checkpoint, the database file's growth). Checked each trial:
//!
//! - at least one run stops with the store's error, and its Display says the disk is full;
//! - the same store handle, once the filler is deleted, resumes every run to completion (a full disk
//!   does not stop the SQLite store, an I/O error would: the write that found no room failed as a
//!   whole and the transaction is rolled back; a run whose first commit failed does not exist and is
//!   started again), and every run's history (the idempotency
//!   key of each step) and final state equal an uninterrupted run's: nothing half-written, lost or
//!   doubled;
//! - a store reopened on the file reads the same histories.
//!
//! Trials alternate `Durability::Sync` and `Async` stores (an `Async` store writes a commit's log
//! frames at its sync point without syncing: the write that fails is the same one).
//!
//! Needs root (mount, fallocate). Without it prints `NOT RUN: ...` and passes, unless `GRAPH_FAULT_TESTS=require`,
//! where it fails.
#![cfg(feature = "sqlite")]

use std::collections::BTreeMap;

use graph_runtime::store::{Durability, SqliteOptions, SqliteStore};
use graph_runtime::{Engine, Error, Store};
use graph_tests::faults::{Reference, reference, run_id, spawn_runs};
use graph_tests::mounts::{Mounted, cannot_fill_a_tmpfs, fill};
use graph_tests::{Trace, crash_graph, random_delay, state_hash};

const RUNS: usize = 8;
const ITERATIONS: u64 = 40;
const TRIALS: u64 = 8;
/// The tmpfs: room for the database, its WAL and the filler.
const TMPFS_BYTES: u64 = 8 << 20;

/// True when this machine cannot mount and fill a tmpfs: prints `NOT RUN` with the reason, or fails
/// under `GRAPH_FAULT_TESTS=require`.
fn cannot_run() -> bool {
    let Some(why) = cannot_fill_a_tmpfs() else { return false };
    assert!(std::env::var("GRAPH_FAULT_TESTS").as_deref() != Ok("require"), "cannot run: {why}");
    println!("NOT RUN: {why}");
    true
}

#[test]
fn a_full_file_system_fails_commits_whole_and_the_runs_complete_once_there_is_room() {
    if cannot_run() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let references: BTreeMap<String, Reference> = rt.block_on(async {
        let mut refs = BTreeMap::new();
        for i in 0..RUNS {
            refs.insert(run_id(i), reference(&run_id(i), ITERATIONS).await);
        }
        refs
    });
    for durability in [Durability::Sync, Durability::Async] {
        let mut faulted = 0;
        for trial in 0..TRIALS / 2 {
            // 16 KiB to ~1 MiB left: the fault lands early or late in the runs.
            let seed = trial * 2 + u64::from(durability == Durability::Async);
            let leave =
                16 * 1024 + random_delay(std::time::Duration::from_nanos(1 << 20), seed).as_nanos() as u64;
            faulted += usize::from(rt.block_on(one_trial(leave, durability, &references)));
        }
        let trials = TRIALS as usize / 2;
        println!("{durability:?}: {faulted} of {trials} trials met a full file system");
        assert!(
            faulted * 2 >= trials,
            "{durability:?}: only {faulted} of {trials} trials met a full file system"
        );
    }
}

/// A store opens on a file system with too little room left for its preallocated write-ahead log
/// (1 MiB of the 4 MiB): the preallocation fails and is rolled back, the store opens all the same, a run
/// completes in the room there is, equal to an uninterrupted run, and a store reopened once there is
/// room reads the same history.
#[test]
fn a_store_opens_where_its_log_cannot_be_preallocated() {
    if cannot_run() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let r = reference(&run_id(0), 5).await;
        let dir = tempfile::tempdir().unwrap();
        let tmpfs = Mounted::tmpfs(dir.path(), TMPFS_BYTES).expect("tmpfs");
        let filler = fill(dir.path(), 1 << 20);
        let file = dir.path().join("store.sqlite");
        let store = SqliteStore::open(&file).expect("opens without room for its log");
        let wal = std::fs::metadata(dir.path().join("store.sqlite-wal")).map_or(0, |m| m.len());
        println!("write-ahead log at open: {wal} bytes");
        assert!(wal < 2 << 20, "a {wal}-byte log in 1 MiB of room");
        let engine = Engine::builder(crash_graph(5)).store(store.clone()).build();
        let out = engine.run(&run_id(0), Trace::default()).await.expect("a run in the room there is");
        assert_eq!(out.steps, r.last_step());
        assert_eq!(state_hash(&out.state), r.states[r.states.len() - 1]);
        assert_history(&store, 0, &r).await;
        drop(engine);
        drop(store);
        std::fs::remove_file(&filler).unwrap();
        let reopened = SqliteStore::open(&file).expect("reopen");
        assert_history(&reopened, 0, &r).await;
        drop(reopened);
        tmpfs.unmount().expect("unmount");
    });
}

/// A file system that turned read-only (mounted again read-only, as ext4 does after an error with
/// `errors=remount-ro`): `SqliteStore::open` fails and says why, `SqliteStore::open_read_only` reads
/// every run there, whether the store was closed (no log: the file is read as it is) or not (its log and
/// the log's index copied while it was open, as a crash leaves them: the commits only the log holds are
/// read too). The copy of that database file alone, without its log, holds no store yet.
#[test]
fn a_store_on_a_read_only_file_system_opens_read_only() {
    if cannot_run() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let r = reference(&run_id(0), 6).await;
        let dir = tempfile::tempdir().unwrap();
        let tmpfs = Mounted::tmpfs(dir.path(), 32 << 20).expect("tmpfs");
        let (closed, open) = (dir.path().join("closed.sqlite"), dir.path().join("open.sqlite"));
        for file in [&closed, &open] {
            let store = SqliteStore::open(file).expect("open");
            let engine = Engine::builder(crash_graph(6)).store(store.clone()).build();
            engine.run(&run_id(0), Trace::default()).await.expect("run");
            if file == &open {
                // A crash image: the three files as the open store leaves them (its writer idle).
                for (from, to) in [("open", "crashed"), ("open", "bare")] {
                    let suffixes: &[&str] = if to == "bare" { &[""] } else { &["", "-wal", "-shm"] };
                    for suffix in suffixes {
                        std::fs::copy(
                            dir.path().join(format!("{from}.sqlite{suffix}")),
                            dir.path().join(format!("{to}.sqlite{suffix}")),
                        )
                        .expect("copy");
                    }
                }
            }
        }
        let crashed = dir.path().join("crashed.sqlite");
        assert!(std::fs::metadata(dir.path().join("crashed.sqlite-wal")).unwrap().len() > 0);
        assert!(!dir.path().join("closed.sqlite-wal").exists(), "a closed store leaves no log");
        tmpfs.remount_read_only().expect("remount read-only");

        let refused = SqliteStore::open(&closed).expect_err("a writable open on a read-only file system");
        assert!(refused.to_string().contains("Read-only file system"), "{refused}");
        for file in [&closed, &crashed] {
            let store = SqliteStore::open_read_only(file).expect("read-only open");
            assert_history(&store, 0, &r).await;
            let write = store.prune(&run_id(0), 1).await;
            assert!(matches!(write, Err(graph_runtime::StoreError::ReadOnly { .. })), "{write:?}");
        }
        // Everything the open store wrote was still in its log (no checkpoint yet, the schema
        // included): the database file alone holds no store, and is refused as such.
        let bare = SqliteStore::open_read_only(dir.path().join("bare.sqlite")).map(drop).unwrap_err();
        assert!(bare.to_string().contains("holds no graph-runtime store"), "{bare}");
        tmpfs.unmount().expect("unmount");
    });
}

/// One trial; true when the file system filled up under the runs.
async fn one_trial(leave: u64, durability: Durability, references: &BTreeMap<String, Reference>) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let tmpfs = Mounted::tmpfs(dir.path(), TMPFS_BYTES).expect("tmpfs");
    let file = dir.path().join("store.sqlite");
    let options = SqliteOptions::default().durability(durability);
    let store = SqliteStore::open_with(&file, options.clone()).expect("open");
    let filler = fill(dir.path(), leave);
    let engine = Engine::builder(crash_graph(ITERATIONS)).store(store.clone()).build();
    let tasks = spawn_runs(&engine, RUNS);
    let mut failures = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => {}
            Err(Error::Store(e)) => failures.push(e.to_string()),
            Err(other) => panic!("a run stopped with an error other than the store's: {other}"),
        }
    }
    println!(
        "{durability:?}, {leave} bytes left: {} runs failed, e.g. {:?}",
        failures.len(),
        failures.first()
    );
    for message in &failures {
        assert!(message.contains("full"), "the error does not say the disk is full: {message}");
    }
    std::fs::remove_file(&filler).unwrap();
    // The same handle goes on: a run whose first commit failed does not exist and starts again; the
    // others resume.
    for i in 0..RUNS {
        let out = match store.run_info(&run_id(i)).await.unwrap() {
            Some(_) => engine.resume(&run_id(i)).await,
            None => engine.run(&run_id(i), Trace::default()).await,
        };
        let out = out.expect("completes once there is room");
        let r = &references[&run_id(i)];
        assert_eq!(out.steps, r.last_step(), "run {i}");
        assert_eq!(state_hash(&out.state), r.states[r.states.len() - 1], "run {i}");
        assert_history(&store, i, r).await;
    }
    drop(engine);
    drop(store);
    let reopened = SqliteStore::open_with(&file, options).expect("reopen");
    for i in 0..RUNS {
        assert_history(&reopened, i, &references[&run_id(i)]).await;
    }
    drop(reopened);
    tmpfs.unmount().expect("unmount");
    !failures.is_empty()
}

async fn assert_history(store: &SqliteStore, i: usize, r: &Reference) {
    let keys: Vec<String> =
        store.history(&run_id(i)).await.unwrap().into_iter().map(|m| m.idempotency_key).collect();
    assert_eq!(keys, r.keys, "run {i}: the history differs from an uninterrupted run's");
}
