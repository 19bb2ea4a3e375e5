//! What is particular to the SQLite store (feature `sqlite`): group commit, a database locked by
//! another connection, schema versions, damaged files, its pragmas, concurrent opens.
#![cfg(feature = "sqlite")]

use std::sync::{Arc, Barrier};
use std::time::Duration;

use graph_runtime::store::conformance::{checkpoint, commit_steps};
use graph_runtime::store::{Durability, SQLITE_SCHEMA_VERSION, SqliteOptions, SqliteStore};
use graph_runtime::{CommitOutcome, PauseReason, RunStatus, Store, StoreError};

fn file(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("store.sqlite")
}

/// The size of the write-ahead log of the store in `dir` (0: none).
fn wal(dir: &tempfile::TempDir) -> u64 {
    std::fs::metadata(dir.path().join("store.sqlite-wal")).map_or(0, |m| m.len())
}

/// 64 runs committing concurrently share transactions; a sequential run pays one per commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_share_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(file(&dir)).unwrap();
    let (runs, steps) = (64u64, 10u64);
    let tasks: Vec<_> = (0..runs)
        .map(|r| {
            let store = store.clone();
            tokio::spawn(async move { commit_steps(&store, &format!("g{r}"), 0..steps).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let (commits, transactions) = (runs * steps, store.transactions());
    println!("{commits} concurrent commits in {transactions} transactions");
    assert!(transactions * 4 <= commits, "{commits} commits took {transactions} transactions");
    let before = store.transactions();
    commit_steps(&store, "seq", 0..5).await;
    assert_eq!(store.transactions() - before, 5);
    assert_eq!(store.history("g63").await.unwrap().len(), steps as usize);
}

/// The write-ahead log is grown to 4 MiB or more of written blocks at open, by a transaction that is
/// rolled back: the database holds nothing of it and is sound, commits go on as before, and the log
/// is not cut back; with `wal_preallocation(0)` the log is left as SQLite grows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_ahead_log_is_preallocated_and_the_database_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(file(&dir)).unwrap();
    assert!(wal(&dir) >= 4 << 20, "a {}-byte log after open", wal(&dir));
    commit_steps(&store, "p", 0..20).await;
    let conn = rusqlite::Connection::open(file(&dir)).unwrap();
    let scratch: i64 = conn
        .query_row("SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'graph_wal%'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(scratch, 0, "the preallocation's table was committed");
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    let steps: i64 =
        conn.query_row("SELECT COUNT(*) FROM checkpoints WHERE run_id = 'p'", [], |r| r.get(0)).unwrap();
    assert_eq!(steps, 20);
    assert!(wal(&dir) >= 4 << 20, "the log was cut back to {} bytes", wal(&dir));
    drop(conn);
    drop(store);
    let reopened = SqliteStore::open(file(&dir)).unwrap();
    assert_eq!(reopened.history("p").await.unwrap().len(), 20);

    let plain = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(file(&plain), SqliteOptions::default().wal_preallocation(0)).unwrap();
    store.save_checkpoint(&checkpoint("q", 0, 0), &[], &RunStatus::Running, 0).await.unwrap();
    assert!(wal(&plain) < 1 << 20, "a {}-byte log without preallocation", wal(&plain));
}

/// `SqliteOptions::page_size` is the page size of a database the store creates; a database that exists
/// keeps its own; a size SQLite cannot use is refused before any file is made. The automatic checkpoint
/// follows the page size: with 1 KiB pages the log still grows to about 4 MiB before SQLite starts it
/// over (with SQLite's 1,000 pages it would stop near 1 MiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_size_applies_to_a_new_database_and_the_checkpoint_follows_it() {
    let page_size = |dir: &tempfile::TempDir| -> i64 {
        let conn = rusqlite::Connection::open(file(dir)).unwrap();
        conn.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions::default().page_size(1024).wal_preallocation(0).durability(Durability::Async);
    let store = SqliteStore::open_with(file(&dir), options).unwrap();
    assert_eq!(page_size(&dir), 1024);
    let steps = 600;
    commit_steps(&store, "p", 0..steps).await;
    assert!(wal(&dir) > 2 << 20, "{steps} commits left a {}-byte log: checkpointed early", wal(&dir));
    assert!(wal(&dir) < 6 << 20, "{steps} commits left a {}-byte log: never checkpointed", wal(&dir));
    drop(store);
    let reopened = SqliteStore::open_with(file(&dir), SqliteOptions::default().page_size(8192)).unwrap();
    assert_eq!(page_size(&dir), 1024, "an existing database keeps its page size");
    assert_eq!(reopened.history("p").await.unwrap().len(), steps as usize);

    let other = tempfile::tempdir().unwrap();
    for bad in [0, 256, 1000, 131_072] {
        let refused = SqliteStore::open_with(file(&other), SqliteOptions::default().page_size(bad));
        let e = refused.err().unwrap_or_else(|| panic!("page size {bad} was taken"));
        assert!(e.to_string().contains(&format!("page size {bad}")), "{bad}: {e}");
        assert!(!file(&other).exists(), "page size {bad}: a file was made");
    }
}

/// The writer remembers which runs have no pending step, so that their commits skip deleting one. A
/// status change that sets a pending step, and a rolled-back commit that had deleted it, must each make
/// the next commit delete it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_step_is_cleared_by_the_next_commit_after_the_writer_remembered_none() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(file(&dir)).unwrap();
    let (running, paused) = (RunStatus::Running, RunStatus::Paused(PauseReason::Backpressure));
    // Step 0 deletes no pending step and leaves `p` remembered as having none.
    store.save_checkpoint(&checkpoint("p", 0, 0), &[], &running, 0).await.unwrap();
    store.set_status("p", &paused, &[], Some(b"one"), 1).await.unwrap();
    assert_eq!(store.pending("p").await.unwrap().as_deref(), Some(&b"one"[..]));
    store.save_checkpoint(&checkpoint("p", 1, 1), &[], &running, 2).await.unwrap();
    assert_eq!(store.pending("p").await.unwrap(), None, "the commit after a status change clears it");
    // A commit that deletes the pending step and then fails is rolled back: the step is back, and
    // the commit that follows deletes it again.
    store.set_status("p", &paused, &[], Some(b"two"), 3).await.unwrap();
    store.fail_point().fail_after(2);
    assert!(store.save_checkpoint(&checkpoint("p", 2, 2), &[], &running, 4).await.is_err());
    assert_eq!(store.pending("p").await.unwrap().as_deref(), Some(&b"two"[..]));
    let done = store.save_checkpoint(&checkpoint("p", 2, 2), &[], &running, 4).await.unwrap();
    assert_eq!(done, CommitOutcome::Committed { version: 5 });
    assert_eq!(store.pending("p").await.unwrap(), None, "the commit after a rollback clears it");
}

/// A failure inside one request of a group rolls back that request alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_request_rolls_back_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(file(&dir)).unwrap();
    store.fail_point().fail_after(2);
    let tasks: Vec<_> = (0..32)
        .map(|r| {
            let store = store.clone();
            tokio::spawn(async move {
                let run = format!("f{r}");
                (
                    run.clone(),
                    store.save_checkpoint(&checkpoint(&run, 0, r), &[], &RunStatus::Running, 0).await,
                )
            })
        })
        .collect();
    let mut failed = Vec::new();
    for t in tasks {
        let (run, outcome) = t.await.unwrap();
        match outcome {
            Ok(CommitOutcome::Committed { version: 1 }) => {
                assert!(store.load_checkpoint(&run, 0).await.unwrap().is_some())
            }
            Err(_) => failed.push(run),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(store.load_checkpoint(&failed[0], 0).await.unwrap().is_none());
    assert!(store.run_info(&failed[0]).await.unwrap().is_none());
}

/// Another connection holding the write lock past the busy timeout: `Unavailable` (retryable), nothing
/// written; reads go on; once the lock is gone the same commit succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_database_is_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions::default().busy_timeout(Duration::from_millis(200));
    let store = SqliteStore::open_with(file(&dir), options).unwrap();
    store.save_checkpoint(&checkpoint("l", 0, 0), &[], &RunStatus::Running, 0).await.unwrap();
    let other = rusqlite::Connection::open(file(&dir)).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let cp = checkpoint("l", 1, 1);
    let err = store.save_checkpoint(&cp, &[], &RunStatus::Running, 1).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable { .. }), "{err:?}");
    assert!(err.is_retryable());
    assert_eq!(store.history("l").await.unwrap().len(), 1, "reads go on, nothing was written");
    other.execute_batch("ROLLBACK").unwrap();
    assert_eq!(
        store.save_checkpoint(&cp, &[], &RunStatus::Running, 1).await.unwrap(),
        CommitOutcome::Committed { version: 2 }
    );
}

/// Two stores on one file (two processes would do the same) commit one run in turn. A store's writer
/// keeps the run rows it committed so that its next commit need not read them, and the runs it knows to
/// have no pending step: each must still see the other's commits, status changes and pending steps.
/// With a kept row one version behind, the stale commit below would be taken and the fresh one refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_file_see_each_others_writes() {
    let dir = tempfile::tempdir().unwrap();
    let a = SqliteStore::open(file(&dir)).unwrap();
    let b = SqliteStore::open(file(&dir)).unwrap();
    let running = RunStatus::Running;
    for step in 0..6u64 {
        let (me, other) = if step % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let cp = checkpoint("t", step, step);
        let done = me.save_checkpoint(&cp, &[], &running, step).await.unwrap();
        assert_eq!(done, CommitOutcome::Committed { version: step + 1 }, "step {step}");
        // The other store last committed this run at version `step` (or never): a commit expecting
        // that version is stale now.
        let stale = checkpoint("t", step + 1, 100 + step);
        let refused = other.save_checkpoint(&stale, &[], &running, step).await.unwrap();
        assert_eq!(refused, CommitOutcome::VersionConflict { current: step + 1 }, "step {step}");
    }
    let paused = RunStatus::Paused(PauseReason::Backpressure);
    assert_eq!(
        a.set_status("t", &paused, &[], None, 6).await.unwrap(),
        CommitOutcome::Committed { version: 7 }
    );
    let stale = b.set_status("t", &running, &[], None, 6).await.unwrap();
    assert_eq!(stale, CommitOutcome::VersionConflict { current: 7 });
    let cp = checkpoint("t", 6, 6);
    assert_eq!(
        b.save_checkpoint(&cp, &[], &running, 7).await.unwrap(),
        CommitOutcome::Committed { version: 8 }
    );
    let info = a.run_info("t").await.unwrap().unwrap();
    assert_eq!((info.version, info.latest_step, info.status), (8, 6, running.clone()));
    assert_eq!(a.history("t").await.unwrap().len(), 7);
    // A pending step the other store sets is cleared by this store's next commit, though this store's
    // writer has deleted `t`'s (there was none) at its commit just before.
    let committed = |version| CommitOutcome::Committed { version };
    assert_eq!(a.save_checkpoint(&checkpoint("t", 7, 7), &[], &running, 8).await.unwrap(), committed(9));
    assert_eq!(b.set_status("t", &paused, &[], Some(b"b's"), 9).await.unwrap(), committed(10));
    assert_eq!(a.save_checkpoint(&checkpoint("t", 8, 8), &[], &running, 10).await.unwrap(), committed(11));
    assert_eq!(a.pending("t").await.unwrap(), None);
}

/// The store's tables without a schema version (its table's rows gone, as damage leaves it): `Corrupted`,
/// not a migration that fails on the tables it finds.
#[tokio::test]
async fn tables_without_a_schema_version_are_corrupted() {
    let dir = tempfile::tempdir().unwrap();
    drop(SqliteStore::open(file(&dir)).unwrap());
    let raw = rusqlite::Connection::open(file(&dir)).unwrap();
    raw.execute("DELETE FROM graph_schema_version", []).unwrap();
    drop(raw);
    match SqliteStore::open(file(&dir)) {
        Err(e @ StoreError::Corrupted { .. }) => {
            assert!(e.to_string().contains("schema version is not"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_newer_schema_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(SqliteStore::open(file(&dir)).unwrap());
    let raw = rusqlite::Connection::open(file(&dir)).unwrap();
    raw.execute("INSERT INTO graph_schema_version (version, applied_ms) VALUES (99, 0)", []).unwrap();
    drop(raw);
    match SqliteStore::open(file(&dir)) {
        Err(StoreError::UnsupportedSchemaVersion { found: 99, supported }) => {
            assert_eq!(supported, SQLITE_SCHEMA_VERSION)
        }
        other => panic!("{other:?}"),
    }
}

/// A file that is not a database, and a database whose pages are damaged: `Corrupted` naming the file,
/// at open or at the first read that meets the damage; never a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_file_is_corrupted() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir);
    std::fs::write(&path, b"this is not a database, just some text. ".repeat(200)).unwrap();
    match SqliteStore::open(&path) {
        Err(StoreError::Corrupted { file: Some(f), .. }) => assert_eq!(f, path),
        other => panic!("{other:?}"),
    }

    std::fs::remove_file(&path).unwrap();
    {
        let store = SqliteStore::open(&path).unwrap();
        commit_steps(&store, "d", 0..200).await;
    }
    let good = std::fs::read(&path).unwrap();
    assert!(good.len() > 4 * 4096, "the WAL was checkpointed into the file: {}", good.len());
    // Damage every page after the first (the schema stays readable).
    let mut bad = good.clone();
    for (i, b) in bad.iter_mut().enumerate().skip(4096) {
        *b = (i as u8).wrapping_mul(31) ^ 0x5a;
    }
    std::fs::write(&path, &bad).unwrap();
    let outcome = match SqliteStore::open(&path) {
        Err(e) => Err(e),
        Ok(store) => store.history("d").await.map(drop),
    };
    match outcome {
        Err(StoreError::Corrupted { file: Some(f), .. }) => assert_eq!(f, path),
        other => panic!("{other:?}"),
    }
}

/// `Sync`: `synchronous = FULL`. `Async`: `FULL` too through the store's `Async` VFS (which makes each
/// commit's sync a write of its frames: next test), `NORMAL` on SQLite's own VFS.
#[tokio::test]
async fn durability_sets_wal_and_synchronous() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(file(&dir)).unwrap();
    assert_eq!(store.writer_pragmas().await.unwrap(), ("wal".to_owned(), 2), "Sync: synchronous = FULL");
    drop(store);
    let options = SqliteOptions::default().durability(Durability::Async);
    let store = SqliteStore::open_with(file(&dir), options.clone()).unwrap();
    assert_eq!(store.writer_pragmas().await.unwrap(), ("wal".to_owned(), 2), "Async: FULL, through the VFS");
    drop(store);
    let store = SqliteStore::open_with(file(&dir), options.coalesce_log_writes(false)).unwrap();
    assert_eq!(store.writer_pragmas().await.unwrap(), ("wal".to_owned(), 1), "Async: synchronous = NORMAL");
}

/// The syncs of the writer's log: one a sequential commit for a `Sync` store; none for an `Async`
/// one, whose commit syncs only write the frames to the file (syncs at checkpoints only, as
/// `synchronous = NORMAL`); without the coalescing VFS there is nothing to count.
#[tokio::test]
async fn async_commits_do_not_sync_the_log_and_sync_ones_do() {
    for durability in [Durability::Sync, Durability::Async] {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteOptions::default().durability(durability);
        let store = SqliteStore::open_with(file(&dir), options).unwrap();
        let (device, written) = store.log_syncs().await.unwrap().expect("the log is open through the VFS");
        commit_steps(&store, "r", 0..30).await;
        let (device_after, written_after) = store.log_syncs().await.unwrap().unwrap();
        let (synced, only_written) = (device_after - device, written_after - written);
        let expected = if durability == Durability::Sync {
            synced >= 30 && only_written == 0
        } else {
            synced == 0 && only_written >= 30
        };
        assert!(expected, "{durability:?}: {synced} syncs, {only_written} commit syncs only written");
    }
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions::default().durability(Durability::Async).coalesce_log_writes(false);
    let store = SqliteStore::open_with(file(&dir), options).unwrap();
    assert_eq!(store.log_syncs().await.unwrap(), None);
}

/// Eight opens of a new file at once: each succeeds, the schema is applied once, and every store
/// commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_opens_migrate_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir);
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (path, barrier) = (path.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                SqliteStore::open(&path)
            })
        })
        .collect();
    let stores: Vec<SqliteStore> = threads.into_iter().map(|t| t.join().unwrap().unwrap()).collect();
    for (i, store) in stores.iter().enumerate() {
        let cp = checkpoint(&format!("o{i}"), 0, 0);
        assert!(matches!(
            store.save_checkpoint(&cp, &[], &RunStatus::Running, 0).await.unwrap(),
            CommitOutcome::Committed { .. }
        ));
    }
    assert_eq!(stores[0].list_runs(&graph_runtime::store::RunFilter::all()).await.unwrap().len(), 8);
    let raw = rusqlite::Connection::open(&path).unwrap();
    let versions: i64 = raw.query_row("SELECT COUNT(*) FROM graph_schema_version", [], |r| r.get(0)).unwrap();
    assert_eq!(versions, i64::from(SQLITE_SCHEMA_VERSION), "each version applied once");
}

/// A database created at schema version 1 (`checkpoints` and `events` were `WITHOUT ROWID` tables),
/// with data in it, opens at the current version: the migration converts it in place, every row reads
/// back unchanged, and the store's checks hold on the converted tables. Opened read-only before, it
/// reads the same rows from the version-1 tables and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_database_is_upgraded_in_place() {
    use graph_runtime::store::conformance::events;
    use graph_runtime::store::record::{encode, encode_run};
    use graph_runtime::store::{RunFilter, RunInfo};

    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir);
    let log = events(None, 4, 0);
    let head = log.last().map(|e| graph_runtime::events::ChainHead { seq: e.seq, hash: e.hash.clone() });
    let cps: Vec<_> = (0..3).map(|s| checkpoint("old", s, s)).collect();
    let mut info = RunInfo::new("old", RunStatus::Running, 2, 3, "fp");
    info.event_head = head.clone();
    {
        let raw = rusqlite::Connection::open(&path).unwrap();
        raw.execute_batch(
            "CREATE TABLE graph_schema_version (version INTEGER NOT NULL PRIMARY KEY, applied_ms INTEGER NOT NULL);
             INSERT INTO graph_schema_version (version, applied_ms) VALUES (1, 0);",
        )
        .unwrap();
        raw.execute_batch(include_str!("../../../graph-store-sqlite/migrations/sqlite/0001_init.sql"))
            .unwrap();
        for cp in &cps {
            let step = cp.step as i64;
            raw.execute(
                "INSERT INTO idempotency_keys (key, run_id, step) VALUES (?1, 'old', ?2)",
                rusqlite::params![cp.idempotency_key, step],
            )
            .unwrap();
            raw.execute(
                "INSERT INTO checkpoints (run_id, step, idempotency_key, record) VALUES ('old', ?1, ?2, ?3)",
                rusqlite::params![step, cp.idempotency_key, encode(cp)],
            )
            .unwrap();
        }
        for e in &log {
            raw.execute(
                "INSERT INTO events (run_id, seq, event) VALUES ('old', ?1, ?2)",
                rusqlite::params![e.seq as i64, graph_runtime::events::encode(e)],
            )
            .unwrap();
        }
        raw.execute(
            "INSERT INTO runs (run_id, status, latest_step, version, row) VALUES ('old', 'running', 2, 3, ?1)",
            rusqlite::params![encode_run(&info)],
        )
        .unwrap();
    }
    // Opened read-only first, it reads the version-1 tables as they are and leaves the file at version 1
    // (a writable open would migrate it).
    let before = std::fs::read(&path).unwrap();
    let ro = SqliteStore::open_read_only(&path).unwrap();
    for cp in &cps {
        assert_eq!(ro.load_checkpoint("old", cp.step).await.unwrap().as_ref(), Some(cp));
    }
    assert_eq!(ro.latest("old").await.unwrap().as_ref(), cps.last());
    assert_eq!(ro.history("old").await.unwrap().len(), 3);
    assert_eq!(ro.events("old", 1, 2).await.unwrap(), log[1..3]);
    assert_eq!(ro.list_runs(&RunFilter::all().status(RunStatus::Running)).await.unwrap(), [info.clone()]);
    drop(ro);
    assert!(std::fs::read(&path).unwrap() == before, "a read-only open changed the version-1 file");
    let store = SqliteStore::open(&path).unwrap();
    for cp in &cps {
        assert_eq!(store.load_checkpoint("old", cp.step).await.unwrap().as_ref(), Some(cp));
    }
    assert_eq!(store.latest("old").await.unwrap().as_ref(), cps.last());
    assert_eq!(store.history("old").await.unwrap().len(), 3);
    assert_eq!(store.events("old", 0, 100).await.unwrap(), log);
    assert_eq!(store.events("old", 1, 2).await.unwrap(), log[1..3]);
    assert_eq!(store.run_info("old").await.unwrap(), Some(info.clone()));
    assert_eq!(store.list_runs(&RunFilter::all().status(RunStatus::Running)).await.unwrap(), [info]);
    // The checks on the converted tables: a stored key, a taken step, then a new commit.
    assert_eq!(
        store.save_checkpoint(&cps[1], &[], &RunStatus::Running, 3).await.unwrap(),
        CommitOutcome::AlreadyCommitted { version: 3 }
    );
    assert_eq!(
        store.save_checkpoint(&checkpoint("old", 1, 9), &[], &RunStatus::Running, 3).await.unwrap(),
        CommitOutcome::StepTaken { existing_key: cps[1].idempotency_key.clone(), version: 3 }
    );
    let more = events(head.as_ref(), 2, 4);
    let next = checkpoint("old", 3, 3);
    assert_eq!(
        store.save_checkpoint(&next, &more, &RunStatus::Running, 3).await.unwrap(),
        CommitOutcome::Committed { version: 4 }
    );
    assert_eq!(store.events("old", 0, 100).await.unwrap(), [log, more].concat());
    assert_eq!(store.history("old").await.unwrap().len(), 4);
    drop(store);
    let raw = rusqlite::Connection::open(&path).unwrap();
    let versions: Vec<i64> = raw
        .prepare("SELECT version FROM graph_schema_version ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, (1..=i64::from(SQLITE_SCHEMA_VERSION)).collect::<Vec<_>>());
}

/// SQLite says only "unable to open database file" when it cannot open one: the store says why.
#[test]
fn a_path_that_cannot_be_opened_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let text = |path: &std::path::Path| match SqliteStore::open(path) {
        Err(e @ StoreError::Backend { .. }) => e.to_string(),
        other => panic!("expected a backend error opening {}, got {other:?}", path.display()),
    };
    let folder = text(dir.path());
    assert!(folder.contains("it is a folder"), "{folder}");
    let missing = dir.path().join("no-such-folder").join("store.sqlite");
    let said = text(&missing);
    assert!(
        said.contains("the folder") && said.contains("no-such-folder") && said.contains("does not exist"),
        "{said}"
    );
    assert!(!dir.path().join("no-such-folder").exists(), "the folder was created");
    // An empty path and `:memory:` are databases that SQLite drops at close.
    for fleeting in ["", ":memory:"] {
        let said = text(std::path::Path::new(fleeting));
        assert!(said.contains("only while it is open"), "{said}");
    }
}

/// A new database file in a folder this process may not write: the OS's error. The folder is made
/// read-only with its mode and, for a process its mode does not stop (root), with `chattr +i` (removed
/// again at the end). (A database file this process may only read opens read-only, as SQLite opens
/// it: graphctl reads such a store; the first write fails with SQLite's "attempt to write a readonly
/// database".)
#[test]
fn a_folder_this_process_may_not_write_gives_the_os_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("ro");
    std::fs::create_dir(&folder).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o555)).unwrap();
    let probe = folder.join("probe");
    let writable = std::fs::File::create(&probe).is_ok();
    let _ = std::fs::remove_file(&probe);
    let chattr = |flag: &str| {
        let done = std::process::Command::new("chattr").arg(flag).arg(&folder).status();
        assert!(done.is_ok_and(|s| s.success()), "chattr {flag} {} failed", folder.display());
    };
    struct Unlock<F: Fn()>(F);
    impl<F: Fn()> Drop for Unlock<F> {
        fn drop(&mut self) {
            (self.0)()
        }
    }
    let _unlock = writable.then(|| {
        chattr("+i");
        Unlock(|| chattr("-i"))
    });
    let path = folder.join("store.sqlite");
    match SqliteStore::open(&path) {
        Err(e @ StoreError::Backend { .. }) => {
            let text = e.to_string();
            assert!(text.contains("cannot open the database file") && text.contains("os error"), "{text}");
        }
        other => panic!("expected a backend error opening {}, got {other:?}", path.display()),
    }
    assert!(!path.exists());
}

/// A store opened read-only beside one opened for writing reads what the other wrote, commits made
/// after it opened included; every write is refused with `ReadOnly` and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_store_reads_beside_a_writer_and_refuses_writes() {
    use graph_runtime::store::RunFilter;
    use graph_runtime::store::conformance::{effect, events};
    let dir = tempfile::tempdir().unwrap();
    let writer = SqliteStore::open(file(&dir)).unwrap();
    let logged = events(None, 3, 0);
    let first = writer.save_checkpoint(&checkpoint("r", 0, 0), &logged, &RunStatus::Running, 0).await;
    assert_eq!(first.unwrap(), CommitOutcome::Committed { version: 1 });
    commit_steps(&writer, "r", 1..3).await;
    let ro = SqliteStore::open_read_only(file(&dir)).unwrap();
    assert!(ro.is_read_only() && !writer.is_read_only());
    assert_eq!(ro.run_info("r").await.unwrap(), writer.run_info("r").await.unwrap());
    assert_eq!(ro.latest("r").await.unwrap().unwrap(), checkpoint("r", 2, 2));
    assert_eq!(ro.load_checkpoint("r", 1).await.unwrap().unwrap(), checkpoint("r", 1, 1));
    assert_eq!(ro.history("r").await.unwrap(), writer.history("r").await.unwrap());
    assert_eq!(ro.events("r", 0, 10).await.unwrap(), logged);
    assert_eq!(ro.list_runs(&RunFilter::all()).await.unwrap().len(), 1);
    // A commit made after the read-only open.
    commit_steps(&writer, "r", 3..4).await;
    assert_eq!(ro.latest("r").await.unwrap().unwrap().step, 3);
    // Every write refused, naming the file; nothing written.
    let refused = |r: Result<(), StoreError>| match r {
        Err(StoreError::ReadOnly { path }) => assert_eq!(path, file(&dir)),
        other => panic!("{other:?}"),
    };
    refused(ro.save_checkpoint(&checkpoint("r", 4, 4), &[], &RunStatus::Running, 4).await.map(drop));
    refused(ro.save_checkpoint(&checkpoint("new", 0, 0), &[], &RunStatus::Running, 0).await.map(drop));
    refused(ro.set_status("r", &RunStatus::Completed, &[], None, 4).await.map(drop));
    refused(ro.prune("r", 1).await.map(drop));
    refused(ro.ack_outbox(&["k".to_owned()]).await.map(drop));
    let journal = effect("r", 4, 0, graph_runtime::store::EffectState::Started);
    refused(ro.put_effect(&journal, None).await.map(drop));
    let message = ro.prune("r", 1).await.unwrap_err().to_string();
    assert!(message.contains("opened read-only"), "{message}");
    let row = writer.run_info("r").await.unwrap().unwrap();
    assert_eq!((row.version, row.status), (4, RunStatus::Running));
    assert!(writer.run_info("new").await.unwrap().is_none());
    assert_eq!(writer.history("r").await.unwrap().len(), 4);
    assert!(writer.effects("r").await.unwrap().is_empty());
}

/// A read-only open writes nothing to the database file, never creates one, and refuses a file that
/// holds no store (a missing file, a folder, another program's SQLite database, a newer schema, damaged
/// bytes) with a typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_open_changes_nothing_and_refuses_what_is_not_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir);
    let no_file = SqliteStore::open_read_only(&path).unwrap_err().to_string();
    assert!(no_file.contains("no such file") && no_file.contains("never creates"), "{no_file}");
    assert!(!path.exists());
    let folder = SqliteStore::open_read_only(dir.path()).unwrap_err().to_string();
    assert!(folder.contains("it is a folder"), "{folder}");

    let store = SqliteStore::open(&path).unwrap();
    commit_steps(&store, "r", 0..3).await;
    drop(store);
    let before = (std::fs::read(&path).unwrap(), std::fs::metadata(&path).unwrap().modified().unwrap());
    let ro = SqliteStore::open_read_only(&path).unwrap();
    assert_eq!(ro.history("r").await.unwrap().len(), 3);
    assert_eq!(ro.latest("r").await.unwrap().unwrap(), checkpoint("r", 2, 2));
    drop(ro);
    let after = (std::fs::read(&path).unwrap(), std::fs::metadata(&path).unwrap().modified().unwrap());
    assert!(after == before, "a read-only open wrote to the database file");
    // Opened for writing afterwards, as before.
    let store = SqliteStore::open(&path).unwrap();
    commit_steps(&store, "r", 3..4).await;
    drop(store);

    let other = dir.path().join("other.sqlite");
    let raw = rusqlite::Connection::open(&other).unwrap();
    raw.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('hello')").unwrap();
    drop(raw);
    let not_ours = SqliteStore::open_read_only(&other).unwrap_err().to_string();
    assert!(not_ours.contains("holds no graph-runtime store"), "{not_ours}");

    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute("INSERT INTO graph_schema_version (version, applied_ms) VALUES (99, 0)", []).unwrap();
    drop(raw);
    match SqliteStore::open_read_only(&path) {
        Err(StoreError::UnsupportedSchemaVersion { found: 99, supported }) => {
            assert_eq!(supported, SQLITE_SCHEMA_VERSION)
        }
        other => panic!("{other:?}"),
    }

    let damaged = dir.path().join("damaged.sqlite");
    std::fs::write(&damaged, b"this is not a database, just some text. ".repeat(200)).unwrap();
    match SqliteStore::open_read_only(&damaged) {
        Err(StoreError::Corrupted { file: Some(f), .. }) => assert_eq!(f, damaged),
        other => panic!("{other:?}"),
    }
}

/// The frames of the write-ahead log `wal` that end a commit (a non-zero second word), as byte offsets
/// of their pages: a 32-byte header, then frames of a 24-byte header and a page.
fn commit_pages(wal: &[u8]) -> Vec<usize> {
    let be = |at: usize| u32::from_be_bytes(wal[at..at + 4].try_into().unwrap());
    let frame = 24 + be(8) as usize;
    (0..(wal.len() - 32) / frame)
        .map(|j| 32 + j * frame)
        .filter(|&f| be(f + 4) != 0 && wal[f + 8..f + 16] == wal[16..24])
        .map(|f| f + 24)
        .collect()
}

/// Ten commits in the log of a store, copied while it is open (a crash image: database file, log, the
/// log's index), then damaged:
/// - a byte flipped in the third commit's frame: SQLite would read the log only up to it and drop the
///   seven commits after it without an error, so a `Sync` open (and a read-only one) is `Corrupted`,
///   naming the log and the byte; an `Async` open, whose contract allows losing unsynced commits, reads
///   it as SQLite does (two commits);
/// - a byte flipped in the last commit, or the log cut in the middle of the seventh: the index (`-shm`)
///   records all ten as committed, so `Corrupted` too. Without the index (removed), the same files read
///   as a log whose end was torn: nine commits, and six;
/// - the database file cut to nothing, the log whole: `Corrupted` (SQLite would delete the log);
/// - untouched: all ten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_log_is_corrupted_not_read_as_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(file(&dir)).unwrap();
    commit_steps(&store, "r", 0..10).await;
    let image = |name: &str, damage: &dyn Fn(&mut Vec<u8>, &[usize]), index: bool| {
        for suffix in ["", "-wal", "-shm"] {
            let to = dir.path().join(format!("{name}{suffix}"));
            std::fs::copy(dir.path().join(format!("store.sqlite{suffix}")), &to).unwrap();
        }
        if !index {
            std::fs::remove_file(dir.path().join(format!("{name}-shm"))).unwrap();
        }
        let wal = dir.path().join(format!("{name}-wal"));
        let mut bytes = std::fs::read(&wal).unwrap();
        let commits = commit_pages(&bytes);
        assert!(commits.len() >= 10, "{} commit frames", commits.len());
        damage(&mut bytes, &commits[commits.len() - 10..]);
        std::fs::write(&wal, bytes).unwrap();
        (dir.path().join(name), wal)
    };
    let none = |_: &mut Vec<u8>, _: &[usize]| {};
    let flip = |k: usize| move |b: &mut Vec<u8>, c: &[usize]| b[c[k] + 100] ^= 0x08;
    let cut = |b: &mut Vec<u8>, c: &[usize]| b.truncate(c[6] + 100);
    let (sound, _) = image("sound.sqlite", &none, true);
    let (inside, inside_wal) = image("inside.sqlite", &flip(2), true);
    let (relaxed, _) = image("relaxed.sqlite", &flip(2), true);
    let (last, last_wal) = image("last.sqlite", &flip(9), true);
    let (short, short_wal) = image("short.sqlite", &cut, true);
    let (torn, _) = image("torn.sqlite", &flip(9), false);
    let (cut_torn, _) = image("cut-torn.sqlite", &cut, false);
    let (emptied, _) = image("emptied.sqlite", &none, true);
    drop(store);

    let corrupted = |open: Result<(), StoreError>, wal: &std::path::Path, says: &[&str]| match open {
        Err(e @ StoreError::Corrupted { .. }) => {
            let StoreError::Corrupted { file: Some(f), .. } = &e else { unreachable!() };
            assert_eq!(f, wal);
            let m = e.to_string();
            println!("{m}");
            assert!(says.iter().all(|s| m.contains(s)), "{m}");
        }
        other => panic!("{other:?}"),
    };
    let inside_says = ["damaged at byte", "7 whole commit groups"];
    corrupted(SqliteStore::open(&inside).map(drop), &inside_wal, &inside_says);
    corrupted(SqliteStore::open_read_only(&inside).map(drop), &inside_wal, &inside_says);
    let end_says = ["records", "as committed: the log was cut short or damaged"];
    corrupted(SqliteStore::open(&last).map(drop), &last_wal, &end_says);
    corrupted(SqliteStore::open(&short).map(drop), &short_wal, &end_says);
    // The database file cut to nothing: SQLite would delete the log as a leftover of an empty database.
    std::fs::write(&emptied, b"").unwrap();
    match SqliteStore::open(&emptied) {
        Err(e @ StoreError::Corrupted { .. }) => {
            assert!(e.to_string().contains("too few for its header"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let steps = |store: SqliteStore| async move { store.history("r").await.unwrap().len() };
    let async_open = SqliteOptions::default().durability(Durability::Async);
    assert_eq!(steps(SqliteStore::open_with(&relaxed, async_open).unwrap()).await, 2);
    assert_eq!(steps(SqliteStore::open(&torn).unwrap()).await, 9);
    assert_eq!(steps(SqliteStore::open(&cut_torn).unwrap()).await, 6);
    assert_eq!(steps(SqliteStore::open(&sound).unwrap()).await, 10);
}

/// How a store with a damaged database file answered: every run's history, latest checkpoint and a
/// second commit of a committed step (the truth, a typed `Corrupted`, or something else).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Answer {
    Truth,
    Corrupted,
    Wrong(String),
}

async fn answer(path: &std::path::Path, runs: &[&str], steps: u64) -> Answer {
    let corrupted = |e: &StoreError| matches!(e, StoreError::Corrupted { .. });
    let store = match SqliteStore::open(path) {
        Ok(s) => s,
        Err(e) if corrupted(&e) => return Answer::Corrupted,
        Err(e) => return Answer::Wrong(format!("open: {e}")),
    };
    for run in runs {
        match store.history(run).await {
            Ok(h) if h.iter().map(|m| m.step).eq(0..steps) => {}
            Ok(h) => {
                return Answer::Wrong(format!(
                    "{run}: history {:?}",
                    h.iter().map(|m| m.step).collect::<Vec<_>>()
                ));
            }
            Err(e) if corrupted(&e) => return Answer::Corrupted,
            Err(e) => return Answer::Wrong(format!("{run}: history: {e}")),
        }
        match store.latest(run).await {
            Ok(Some(c)) if c == checkpoint(run, steps - 1, steps - 1) => {}
            Err(e) if corrupted(&e) => return Answer::Corrupted,
            other => return Answer::Wrong(format!("{run}: latest {:?}", other.map(|c| c.map(|c| c.step)))),
        }
        let again = store.save_checkpoint(&checkpoint(run, 5, 5), &[], &RunStatus::Running, steps).await;
        match again {
            Ok(CommitOutcome::AlreadyCommitted { .. }) => {}
            Err(e) if corrupted(&e) => return Answer::Corrupted,
            other => return Answer::Wrong(format!("{run}: a second commit of step 5: {other:?}")),
        }
    }
    Answer::Truth
}

/// Bits flipped in the leaf of each index of a closed store's database file (40 flips each, spread
/// over the leaf's cells): every answer is the truth or `Corrupted`, never a shorter history, an older
/// latest checkpoint or a second commit taken for a new one. (SQLite does not notice every damaged
/// index entry: a flip in the index of checkpoints made runs read as behind their last step until the
/// run row was checked against it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damage_in_an_index_is_corrupted_or_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir);
    let store = SqliteStore::open(&path).unwrap();
    let runs = ["ra", "rb", "rc"];
    for run in runs {
        commit_steps(&store, run, 0..20).await;
    }
    drop(store);
    let pristine = std::fs::read(&path).unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    let page: usize = raw.query_row("PRAGMA page_size", [], |r| r.get::<_, i64>(0)).unwrap() as usize;
    let mut tally = std::collections::BTreeMap::new();
    for index in ["checkpoints_by_step", "idempotency_keys", "runs_by_status"] {
        let root: i64 = raw
            .query_row("SELECT rootpage FROM sqlite_master WHERE name = ?1", [index], |r| r.get(0))
            .unwrap();
        let mut start = (root as usize - 1) * page;
        // An interior page (`0x02`): its right-most child, a leaf.
        if pristine[start] == 0x02 {
            let child = u32::from_be_bytes(pristine[start + 8..start + 12].try_into().unwrap());
            start = (child as usize - 1) * page;
        }
        // A leaf (`0x0a`, an index b-tree's): its cells lie from the offset its header gives to the end.
        assert_eq!(pristine[start], 0x0a, "{index}: a leaf");
        let cells = usize::from(u16::from_be_bytes([pristine[start + 5], pristine[start + 6]]));
        for t in 0..40 {
            let mut bytes = pristine.clone();
            bytes[start + cells + (t * 97) % (page - cells)] ^= 1 << (t % 8);
            let copy = dir.path().join(format!("{index}-{t}.sqlite"));
            std::fs::write(&copy, &bytes).unwrap();
            let a = answer(&copy, &runs, 20).await;
            *tally.entry((index, a)).or_insert(0) += 1;
        }
    }
    println!("{tally:#?}");
    let wrong: Vec<_> = tally.keys().filter(|(_, a)| matches!(a, Answer::Wrong(_))).collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Removes from the index b-tree leaf that is the root of `index` in the database file `bytes` the
/// entry whose cell holds `pattern`, as damage that drops an entry cleanly would: its cell pointer
/// gone, the cell count one less, its bytes counted as fragments (so the page stays consistent in
/// itself). Returns the leaf's page number.
fn drop_index_entry(bytes: &mut [u8], raw: &rusqlite::Connection, index: &str, pattern: &[u8]) -> u32 {
    let page: usize = raw.query_row("PRAGMA page_size", [], |r| r.get::<_, i64>(0)).unwrap() as usize;
    let root: u32 =
        raw.query_row("SELECT rootpage FROM sqlite_master WHERE name = ?1", [index], |r| r.get(0)).unwrap();
    let start = (root as usize - 1) * page;
    assert_eq!(bytes[start], 0x0a, "{index}: its root is a leaf of an index b-tree");
    let be16 = |b: &[u8], at: usize| usize::from(u16::from_be_bytes([b[at], b[at + 1]]));
    let cells = be16(bytes, start + 3);
    let holds = |b: &[u8], i: usize| {
        let cell = start + be16(b, start + 8 + 2 * i);
        let size = 1 + usize::from(b[cell]); // a one-byte payload size: a small entry
        b[cell..cell + size].windows(pattern.len()).any(|w| w == pattern)
    };
    let found: Vec<usize> = (0..cells).filter(|&i| holds(bytes, i)).collect();
    assert_eq!(found.len(), 1, "{index}: one entry holds {pattern:?}");
    let i = found[0];
    let size = 1 + usize::from(bytes[start + be16(bytes, start + 8 + 2 * i)]);
    let pointers = start + 8;
    bytes.copy_within(pointers + 2 * (i + 1)..pointers + 2 * cells, pointers + 2 * i);
    bytes[pointers + 2 * (cells - 1)..pointers + 2 * cells].fill(0);
    bytes[start + 3..start + 5].copy_from_slice(&u16::try_from(cells - 1).unwrap().to_be_bytes());
    bytes[start + 7] += u8::try_from(size).unwrap();
    root
}

/// An index entry that damage removed cleanly hides a middle checkpoint from `history` (a gap) or a
/// run from `list_runs` by status, and no read notices: the run row and the last checkpoint agree.
/// `check_integrity` (`PRAGMA integrity_check`) reads every index against its table and reports it as
/// `Corrupted` naming the file; on the undamaged file it is `Sound`.
#[tokio::test]
async fn an_index_entry_removed_is_found_by_the_integrity_check() {
    use graph_runtime::store::{Integrity, RunFilter};
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir);
    let store = SqliteStore::open(&path).unwrap();
    for run in ["ra", "rb", "rc"] {
        commit_steps(&store, run, 0..20).await;
    }
    assert_eq!(
        store.check_integrity().await.unwrap(),
        Integrity::Sound { check: "PRAGMA integrity_check".into() }
    );
    drop(store);
    let pristine = std::fs::read(&path).unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    let damaged = |index: &str, pattern: &[u8]| {
        let mut bytes = pristine.clone();
        drop_index_entry(&mut bytes, &raw, index, pattern);
        let copy = dir.path().join(format!("{index}.sqlite"));
        std::fs::write(&copy, &bytes).unwrap();
        copy
    };
    let corrupted = |r: Result<Integrity, StoreError>, copy: &std::path::Path, index: &str| match r {
        Err(StoreError::Corrupted { file: Some(f), detail, .. }) => {
            assert_eq!(f, copy);
            assert!(detail.contains("PRAGMA integrity_check") && detail.contains(index), "{detail}");
            println!("{index}: {detail}");
        }
        other => panic!("{index}: {other:?}"),
    };

    // Step 7 of run `rb` (its index cell's body: "rb", then the step as one byte).
    let copy = damaged("checkpoints_by_step", b"rb\x07");
    let store = SqliteStore::open_read_only(&copy).unwrap();
    let steps: Vec<u64> = store.history("rb").await.unwrap().iter().map(|m| m.step).collect();
    assert_eq!(steps, (0..20).filter(|&s| s != 7).collect::<Vec<_>>(), "history misses step 7, no error");
    assert_eq!(store.latest("rb").await.unwrap().map(|c| c.step), Some(19));
    corrupted(store.check_integrity().await, &copy, "checkpoints_by_step");

    // Run `rb` under its status (the cell's body: "running", then "rb").
    let copy = damaged("runs_by_status", b"runningrb");
    let store = SqliteStore::open(&copy).unwrap();
    let running = store.list_runs(&RunFilter::all().status(RunStatus::Running)).await.unwrap();
    let names: Vec<_> = running.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(names, ["ra", "rc"], "list_runs by status misses rb, no error");
    assert_eq!(store.list_runs(&RunFilter::all()).await.unwrap().len(), 3);
    corrupted(store.check_integrity().await, &copy, "runs_by_status");
}

/// A run row whose bytes no longer match their checksum, met by a list of runs (which reads rows nobody
/// asked for by name): `Corrupted` naming the run and the file, whichever read meets it. Found by the
/// damage harness, whose verifier lists runs: the error said only "a run row".
#[tokio::test]
async fn a_damaged_run_row_is_named_by_every_read_that_meets_it() {
    use graph_runtime::store::RunFilter;
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir);
    let store = SqliteStore::open(&path).unwrap();
    for run in ["ra", "rb", "rc"] {
        commit_steps(&store, run, 0..3).await;
    }
    drop(store);
    let raw = rusqlite::Connection::open(&path).unwrap();
    let mut row: Vec<u8> =
        raw.query_row("SELECT row FROM runs WHERE run_id = 'rb'", [], |r| r.get(0)).unwrap();
    let last = row.len() - 2;
    row[last] ^= 0x20;
    raw.execute("UPDATE runs SET row = ?1 WHERE run_id = 'rb'", [&row]).unwrap();
    drop(raw);
    let store = SqliteStore::open(&path).unwrap();
    let named = |what: &str, r: Result<usize, StoreError>| match r {
        Err(StoreError::Corrupted { run: Some(run), file: Some(f), .. }) => {
            assert_eq!((run.as_str(), f.as_path()), ("rb", path.as_path()), "{what}");
        }
        other => panic!("{what}: {other:?}"),
    };
    named("list_runs", store.list_runs(&RunFilter::all()).await.map(|l| l.len()));
    named("run_info", store.run_info("rb").await.map(|i| usize::from(i.is_some())));
    named("history", store.history("rb").await.map(|h| h.len()));
    assert_eq!(store.run_info("ra").await.unwrap().unwrap().latest_step, 2);
}

/// Two engines, each on its own store over one SQLite file (two processes would do the same), drive
/// the same four runs at once to completion. Losing a race is a typed, retryable outcome
/// (`VersionConflict`, `Superseded`, `AlreadyRunning`); never `ExecutionCorrupted` or a damaged-record
/// error about a sound store (a reader that meets the other's write reads again), and both see the
/// same final states.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_on_one_file_driving_the_same_runs_never_report_damage() {
    use graph_runtime::Engine;
    use graph_tests::faults::drive_the_same_runs;
    use graph_tests::{Trace, crash_graph};
    const RUNS: usize = 4;
    const STEPS: u64 = 100;
    for trial in 0..6 {
        let dir = tempfile::tempdir().unwrap();
        let engines: Vec<Engine<Trace>> = (0..2)
            .map(|_| {
                Engine::builder(crash_graph(STEPS)).store(SqliteStore::open(file(&dir)).unwrap()).build()
            })
            .collect();
        drive_the_same_runs(&engines, RUNS, &format!("trial {trial}")).await;
    }
}

/// Two processes on one SQLite file (`race_child`, each driving the same four runs of 300 steps at
/// once, started together), three times: each process completes every run, both report the same final
/// states, and neither meets an error that is not a lost race (a false `ExecutionCorrupted`, which
/// would tell an operator to restore a sound store, is such an error); the log verifies afterwards.
#[test]
fn two_processes_on_one_file_driving_the_same_runs_never_report_damage() {
    use std::process::Command;
    for trial in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let spec = format!("sqlite:{}", file(&dir).display());
        let children: Vec<_> = (0..2)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_race_child"))
                    .args([&spec, "4", "300"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outs: Vec<_> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
        let mut finals = Vec::new();
        for (p, out) in outs.iter().enumerate() {
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "trial {trial}, process {p}: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let mut done: Vec<&str> = stdout.lines().filter(|l| l.starts_with("done ")).collect();
            done.sort_unstable();
            assert_eq!(done.len(), 4, "trial {trial}, process {p}: {stdout}");
            finals.push(done.join("\n"));
        }
        assert_eq!(finals[0], finals[1], "trial {trial}: both processes see the same final states");
        let engine = graph_runtime::Engine::builder(graph_tests::crash_graph(300))
            .store(SqliteStore::open(file(&dir)).unwrap())
            .build();
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
            for r in 0..4 {
                engine.verify(&format!("r{r}")).await.unwrap();
            }
        });
    }
}
