//! Damage in bytes recovery does not need, and salvage. A sled store whose commit log holds groups its
//! index already held durably (the manifest's checkpoint is past them) opens when one of those groups
//! is damaged and a valid group follows it (before, the open refused the whole store): the damage is a
//! warning and a typed finding (`Integrity::Findings` from `check_integrity`, naming the segment and
//! the byte), and every run reads back, verifies and holds an uninterrupted run's history.
//!
//! Salvage (`graph_runtime::engine::salvage`, what `graphctl salvage` runs): on a sled and a SQLite
//! store where one run's checkpoint record is damaged and another's checkpoint is gone from the index,
//! the new store holds exactly the other runs, every record of theirs as the original held it, and the
//! report names the two runs left out. Then the repository's damage harness
//! (`graph_tests::damage::pick_damage`: byte flips, a zeroed range or a truncation at a random place) on
//! sled's data file, trial after trial: the store refuses to open or to be read with a typed error
//! (`Corrupted`, or `FailStopped` where sled reports a damaged page as a read error it cannot tell from
//! a failing device's), or salvage copies runs each identical to the undamaged store's and names the
//! rest; never a panic, never a run copied that differs. The counts are printed (`GRAPH_FAULT_VERBOSE=1`
//! prints each trial's outcome): most damage to sled's data file makes sled's own recovery refuse the
//! files ("sled cannot read its files"), which leaves a backup as the way back.

use std::path::Path;

use graph_runtime::engine::{salvage, verify_run};
use graph_runtime::rand_chacha::ChaCha8Rng;
use graph_runtime::rand_core::SeedableRng;
use graph_runtime::store::{Integrity, SledStore, SqliteStore};
use graph_runtime::{Engine, Store, StoreError};
use graph_tests::damage::pick_damage;
use graph_tests::faults::{
    assert_reference_history, reference, run_id, small_options, spawn_runs, wal_groups, wal_segments,
};
use graph_tests::{Trace, crash_graph};

const RUNS: usize = 4;
const ITERATIONS: u64 = 20;

/// A store in `dir` where four runs of `crash_graph` completed, closed cleanly.
async fn completed_store(dir: &Path) {
    completed(std::sync::Arc::new(SledStore::open_with(dir, small_options()).unwrap())).await;
}

/// Four runs of `crash_graph` completed in `store`, which is closed on return.
async fn completed(store: std::sync::Arc<dyn Store>) {
    let engine = Engine::builder(crash_graph(ITERATIONS)).shared_store(store).build();
    let runs = spawn_runs(&engine, RUNS);
    for r in runs {
        assert!(r.await.unwrap().unwrap().is_completed());
    }
}

/// Every run of the store holds the reference history and final state, and verifies.
async fn every_run_intact(store: &SledStore) {
    let engine = Engine::builder(crash_graph(ITERATIONS)).store(store.clone()).build();
    for i in 0..RUNS {
        let run = run_id(i);
        assert_reference_history(&engine, store, &run, &reference(&run, ITERATIONS).await).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_commit_group_the_index_already_holds_is_reported_not_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    completed_store(&path).await;
    // The clean close checkpointed: every group of the current segment is in the index durably. Damage
    // one byte in the body of a group that other groups follow.
    let segment = wal_segments(&path).pop().expect("a segment");
    let mut bytes = std::fs::read(&segment).unwrap();
    let groups = wal_groups(&bytes);
    assert!(groups.len() >= 3, "{} groups", groups.len());
    let (start, end, first_seq, _) = groups[groups.len() / 2];
    bytes[(start + 24 + end) / 2] ^= 0x40;
    std::fs::write(&segment, &bytes).unwrap();

    let store = SledStore::open_with(&path, small_options()).expect("the damage is in bytes not needed");
    let finding = the_finding(&store).await;
    let name = segment.file_name().unwrap().to_str().unwrap();
    assert!(finding.contains(name) && finding.contains(&format!("groups {first_seq}..")), "{finding}");
    every_run_intact(&store).await;
}

/// Everything `store` holds of `run`, as its reads return it: the row, each checkpoint, the events, the
/// effects. Equal for two stores exactly when they hold the same records (each decodes from the bytes
/// the other encodes, field for field).
async fn records_of(store: &dyn Store, run: &str) -> String {
    try_records_of(store, run).await.unwrap()
}

/// [`records_of`], or the first read's error.
async fn try_records_of(store: &dyn Store, run: &str) -> Result<String, StoreError> {
    let info = store.run_info(run).await?;
    let latest = info.as_ref().map_or(0, |i| i.latest_step);
    let checkpoints = store.checkpoints(run, 0, latest).await?;
    let events = store.events(run, 0, usize::MAX).await?;
    let effects = store.effects(run).await?;
    Ok(format!("{info:?}\n{checkpoints:?}\n{events:?}\n{effects:?}"))
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Sled,
    Sqlite,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn salvage_copies_the_intact_runs_byte_for_byte_and_names_the_others() {
    for kind in [Kind::Sled, Kind::Sqlite] {
        let dir = tempfile::tempdir().unwrap();
        let (path, dest) = match kind {
            Kind::Sled => (dir.path().join("store"), dir.path().join("salvaged")),
            Kind::Sqlite => (dir.path().join("store.sqlite"), dir.path().join("salvaged.sqlite")),
        };
        let store: std::sync::Arc<dyn Store> = match kind {
            Kind::Sled => std::sync::Arc::new(SledStore::open(&path).unwrap()),
            Kind::Sqlite => std::sync::Arc::new(SqliteStore::open(&path).unwrap()),
        };
        completed(store.clone()).await;
        // r1: a checkpoint record with a changed byte; r2: a checkpoint gone from the index (in the
        // open store: a sled store's next open would repair both from its commit log).
        drop(store);
        let original: std::sync::Arc<dyn Store> = match kind {
            Kind::Sled => {
                let sled = SledStore::open(&path).unwrap();
                let mut bytes = sled.raw_checkpoint("r1", 5).unwrap().unwrap();
                bytes[50] ^= 1;
                sled.put_raw_checkpoint("r1", 5, &bytes).unwrap();
                sled.remove_from_index("r2", 7).unwrap();
                std::sync::Arc::new(sled)
            }
            Kind::Sqlite => {
                let sqlite = SqliteStore::open(&path).unwrap();
                let mut bytes = sqlite.raw_checkpoint("r1", 5).await.unwrap().unwrap();
                bytes[50] ^= 1;
                sqlite.put_raw_checkpoint("r1", 5, &bytes).await.unwrap();
                sqlite.remove_raw_checkpoint("r2", 7).await.unwrap();
                std::sync::Arc::new(sqlite)
            }
        };
        let report = salvage(&*original, &dest, None).await.unwrap();
        assert_eq!(report.salvaged, ["r0", "r3"], "{kind:?}");
        let lost: Vec<&str> = report.lost.iter().map(|(run, _)| run.as_str()).collect();
        assert_eq!(lost, ["r1", "r2"], "{kind:?}: {:?}", report.lost);
        let copy: std::sync::Arc<dyn Store> = match kind {
            Kind::Sled => std::sync::Arc::new(SledStore::open(&dest).unwrap()),
            Kind::Sqlite => std::sync::Arc::new(SqliteStore::open(&dest).unwrap()),
        };
        for run in ["r0", "r3"] {
            assert_eq!(records_of(&*copy, run).await, records_of(&*original, run).await, "{kind:?} {run}");
            verify_run(&*copy, run, None).await.unwrap();
        }
        for run in ["r1", "r2"] {
            assert!(copy.run_info(run).await.unwrap().is_none(), "{kind:?} {run}");
            assert!(copy.events(run, 0, 10).await.unwrap().is_empty(), "{kind:?} {run}");
        }
        // A salvage goes to a new path only.
        let again = salvage(&*original, &dest, None).await.unwrap_err();
        assert!(again.to_string().contains("exists already"), "{again}");
    }
}

/// Trials of the damage harness on sled's data file of a completed store (each a copy of one
/// template): refused at open with a typed error, or salvaged with every copied run identical to the
/// template's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn salvage_after_the_damage_harness_copies_only_runs_identical_to_the_undamaged_store() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("template");
    // Without the log's history, which would rebuild the index at open (the next test).
    let options = small_options().history_bytes(0);
    completed(std::sync::Arc::new(SledStore::open_with(&template, options.clone()).unwrap())).await;
    let expected = records_of_every_run(&template, options.clone()).await;
    let seed = graph_tests::damage::seed();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut refused, mut salvaged_all, mut salvaged_some) = (0, 0, 0);
    for trial in 0..24 {
        let copy = dir.path().join(format!("trial-{trial}"));
        let what = format!("seed {seed}, trial {trial}: {}", damaged_copy(&template, &copy, trial, &mut rng));
        let store = match SledStore::open_with(&copy, options.clone()) {
            Ok(s) => s,
            Err(e) => {
                assert!(
                    matches!(e, StoreError::Corrupted { .. } | StoreError::FailStopped { .. }),
                    "{what}: {e:?}"
                );
                if std::env::var_os("GRAPH_FAULT_VERBOSE").is_some() {
                    println!("{what}: refused at open: {e}");
                }
                refused += 1;
                continue;
            }
        };
        let dest = dir.path().join(format!("salvaged-{trial}"));
        let report = match salvage(&store, &dest, None).await {
            Ok(r) => r,
            // sled reports a read of a damaged page as an error it cannot tell from a failing device's
            // (`Read corrupted data`), and the store stops (`FailStopped`): such a store is not salvaged.
            Err(e) => {
                let typed = matches!(
                    e,
                    graph_runtime::Error::Store(
                        StoreError::Corrupted { .. } | StoreError::FailStopped { .. }
                    )
                );
                assert!(typed, "{what}: {e:?}");
                if std::env::var_os("GRAPH_FAULT_VERBOSE").is_some() {
                    println!("{what}: refused at salvage: {e}");
                }
                refused += 1;
                continue;
            }
        };
        drop(store);
        let salvaged = SledStore::open(&dest).unwrap();
        for run in &report.salvaged {
            let i: usize = run[1..].parse().unwrap();
            assert_eq!(records_of(&salvaged, run).await, expected[i], "{what}: {run} differs");
        }
        if report.lost.is_empty() && report.salvaged.len() == RUNS {
            salvaged_all += 1
        } else {
            salvaged_some += 1
        }
    }
    println!(
        "seed {seed}: {refused} refused, {salvaged_all} salvaged whole, {salvaged_some} salvaged in part"
    );
}

/// The damage harness on sled's data file again, now of a store whose commit log holds its whole
/// history (the default, up to `SledOptions::history_bytes`): every trial opens. Where sled refuses its
/// files the index is rebuilt from the log at open (a finding says so and names where the damaged files
/// are kept); where a damaged page shows only when read (`FailStopped`, or `Corrupted` from the
/// checks of a run's reads), an open with `rebuild_index` rebuilds it; where sled comes back without its
/// last writes, the open replays them from the history. Every run then reads back
/// identical to the undamaged store's and verifies: one damaged byte in sled's files costs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damage_to_sleds_files_is_rebuilt_from_the_logs_history_with_every_run_identical() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("template");
    completed_store(&template).await;
    let expected = records_of_every_run(&template, small_options()).await;
    let seed = graph_tests::damage::seed();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut at_open, mut from_history, mut on_request, mut untouched) = (0, 0, 0, 0);
    for trial in 0..24 {
        let copy = dir.path().join(format!("trial-{trial}"));
        let what = format!("seed {seed}, trial {trial}: {}", damaged_copy(&template, &copy, trial, &mut rng));
        let store = SledStore::open_with(&copy, small_options())
            .unwrap_or_else(|e| panic!("{what}: the store did not open: {e}"));
        // What the open says it did: rebuilt the index (sled refused its files), replayed into it groups
        // it came back without (sled's recovery dropped its last writes), or nothing.
        let (rebuilt, replayed) = match store.check_integrity().await.unwrap() {
            Integrity::Findings { findings, .. } if findings.len() == 1 => {
                let rebuilt = findings[0].contains("rebuilt from the commit log");
                let replayed = findings[0].contains("were replayed from the log's history");
                assert!(rebuilt || replayed, "{what}: {findings:?}");
                if rebuilt {
                    assert!(
                        copy.join("db.damaged-1").join("db").exists(),
                        "{what}: the damaged files are kept"
                    );
                }
                (rebuilt, replayed)
            }
            Integrity::Sound { .. } => (false, false),
            other => panic!("{what}: {other:?}"),
        };
        let mut read = Vec::new();
        for i in 0..RUNS {
            match try_records_of(&store, &run_id(i)).await {
                Ok(r) => read.push(r),
                Err(e) => {
                    assert!(!rebuilt, "{what}: a rebuilt index does not read: {e}");
                    assert!(
                        matches!(e, StoreError::Corrupted { .. } | StoreError::FailStopped { .. }),
                        "{what}: {e:?}"
                    );
                    break;
                }
            }
        }
        let outcome = match (rebuilt, replayed) {
            (true, _) => "rebuilt at open",
            (_, true) => "groups replayed from the history at open",
            _ => "opened",
        };
        let store = if read.len() == RUNS {
            match (rebuilt, replayed) {
                (true, _) => at_open += 1,
                (_, true) => from_history += 1,
                _ => untouched += 1,
            }
            store
        } else {
            drop(store);
            on_request += 1;
            SledStore::open_with(&copy, small_options().rebuild_index(true))
                .unwrap_or_else(|e| panic!("{what}: the rebuild asked for failed: {e}"))
        };
        for (i, expected) in expected.iter().enumerate() {
            let run = run_id(i);
            assert_eq!(&records_of(&store, &run).await, expected, "{what} ({outcome}): {run} differs");
            verify_run(&store, &run, None).await.unwrap_or_else(|e| panic!("{what}: {run}: {e}"));
        }
        if std::env::var_os("GRAPH_FAULT_VERBOSE").is_some() {
            println!("{what}: {outcome}, {} runs read back", read.len());
        }
    }
    println!(
        "seed {seed}: {at_open} rebuilt at open, {from_history} repaired from the history at open, {on_request} \
         rebuilt on request, {untouched} read back as they were"
    );
    // Most damage to sled's data file makes sled refuse it (the previous test counts it).
    assert!(at_open > 0, "seed {seed}: no trial was rebuilt at open");
}

/// The index's folder (`db/`) gone altogether: the open replays the log's history into a new one (a
/// finding says from which group) and every run is intact. A store whose log is not its whole
/// history (segments retired with `history_bytes(0)`; a store used with `Durability::Async`) is not
/// rebuilt: `rebuild_index` fails with `Unsupported` and moves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_comes_back_from_the_history_only_when_the_log_holds_all_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    completed_store(&path).await;
    std::fs::remove_dir_all(path.join("db")).unwrap();
    let store = SledStore::open_with(&path, small_options()).unwrap();
    let finding = the_finding(&store).await;
    assert!(finding.contains("the index came back holding commit group 0"), "{finding}");
    every_run_intact(&store).await;
    drop(store);
    // The repaired index was checkpointed: the next open finds nothing to say.
    let store = SledStore::open_with(&path, small_options()).unwrap();
    assert!(matches!(store.check_integrity().await.unwrap(), Integrity::Sound { .. }));
    drop(store);

    let retired = dir.path().join("retired");
    let options = small_options().history_bytes(0);
    completed(std::sync::Arc::new(SledStore::open_with(&retired, options.clone()).unwrap())).await;
    let asynchronous = dir.path().join("async");
    let options_async = small_options().durability(graph_runtime::store::Durability::Async);
    completed(std::sync::Arc::new(SledStore::open_with(&asynchronous, options_async).unwrap())).await;
    for (path, options) in [(&retired, options), (&asynchronous, small_options())] {
        let e = SledStore::open_with(path, options.rebuild_index(true)).unwrap_err();
        assert!(
            matches!(&e, StoreError::Unsupported { detail, .. } if detail.contains("whole history")),
            "{}: {e:?}",
            path.display()
        );
        assert!(!path.join("db.damaged-1").exists() && path.join("db").is_dir());
        let store = SledStore::open_with(path, small_options()).unwrap();
        match store.check_integrity().await.unwrap() {
            Integrity::Sound { check } => {
                assert!(check.contains("does not hold the store's whole history"), "{check}")
            }
            other => panic!("{other:?}"),
        }
        every_run_intact(&store).await;
    }
}

/// sled's `conf` damaged (sled refuses it at every open): the index is rebuilt from the log at open,
/// the damaged files kept in `db.damaged-1`, every run intact. With a closed segment of the log's
/// history damaged as well, the rebuild stops there: the open fails with sled's `Corrupted`, the
/// index's files are left as they were found, and `check_integrity` of a store opened before the
/// damage to sled finds the history's damage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_that_meets_damage_in_the_history_leaves_the_files_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("template");
    completed_store(&template).await;
    let damage_conf = |store: &Path| {
        let conf = store.join("db").join("conf");
        let mut bytes = std::fs::read(&conf).unwrap();
        bytes[3] ^= 0x20;
        std::fs::write(&conf, bytes).unwrap();
    };
    let path = dir.path().join("conf");
    copy_dir(&template, &path);
    damage_conf(&path);
    let store = SledStore::open_with(&path, small_options()).unwrap();
    assert!(path.join("db.damaged-1").join("conf").is_file());
    let finding = the_finding(&store).await;
    assert!(finding.contains("rebuilt from the commit log"), "{finding}");
    every_run_intact(&store).await;
    drop(store);

    let path = dir.path().join("both");
    copy_dir(&template, &path);
    let segments = wal_segments(&path);
    assert!(segments.len() >= 3, "{segments:?}");
    let mut bytes = std::fs::read(&segments[0]).unwrap();
    let (start, end, _, _) = wal_groups(&bytes)[0];
    bytes[(start + 24 + end) / 2] ^= 0x40;
    std::fs::write(&segments[0], &bytes).unwrap();
    let store = SledStore::open_with(&path, small_options()).unwrap();
    let finding = the_finding(&store).await;
    assert!(
        finding.contains("history does not read") && finding.contains("could no longer be rebuilt"),
        "{finding}"
    );
    every_run_intact(&store).await;
    drop(store);
    damage_conf(&path);
    let conf = std::fs::read(path.join("db").join("conf")).unwrap();
    let e = SledStore::open_with(&path, small_options()).unwrap_err();
    assert!(
        matches!(&e, StoreError::Corrupted { file: Some(f), .. } if f.starts_with(path.join("db"))),
        "{e:?}"
    );
    assert!(!path.join("db.damaged-1").exists());
    assert_eq!(std::fs::read(path.join("db").join("conf")).unwrap(), conf, "the files are as they were");
}

/// A damaged manifest (`wal/manifest`: a byte of its checkpoint changed, or the file cut short) is not
/// needed: the store opens reading and replaying every segment, says so in a finding, writes the
/// manifest again (the next open has nothing to say), and every run is intact; the log is then no
/// longer taken as the whole history, so a rebuild is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_manifest_is_written_again_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("template");
    completed_store(&template).await;
    for (name, damage) in [("flip", 0usize), ("cut", 1)] {
        let path = dir.path().join(name);
        copy_dir(&template, &path);
        let manifest = path.join("wal").join("manifest");
        let mut bytes = std::fs::read(&manifest).unwrap();
        if damage == 0 {
            bytes[17] ^= 0x01;
        } else {
            bytes.truncate(10);
        }
        std::fs::write(&manifest, &bytes).unwrap();
        let store = SledStore::open_with(&path, small_options()).unwrap();
        let finding = the_finding(&store).await;
        assert!(finding.contains("manifest") && finding.contains("wrote it again"), "{name}: {finding}");
        every_run_intact(&store).await;
        drop(store);
        let store = SledStore::open_with(&path, small_options()).unwrap();
        assert!(matches!(store.check_integrity().await.unwrap(), Integrity::Sound { .. }), "{name}");
        every_run_intact(&store).await;
        drop(store);
        let e = SledStore::open_with(&path, small_options().rebuild_index(true)).unwrap_err();
        assert!(matches!(e, StoreError::Unsupported { .. }), "{name}: {e:?}");
    }
}

/// [`records_of`] every run of the store at `path`, opened with `options`, in run order.
async fn records_of_every_run(path: &Path, options: graph_runtime::store::SledOptions) -> Vec<String> {
    let store = SledStore::open_with(path, options).unwrap();
    let mut records = Vec::new();
    for i in 0..RUNS {
        records.push(records_of(&store, &run_id(i)).await);
    }
    records
}

/// A copy of the store `template` at `copy` with the damage harness's `trial`-th damage applied to
/// sled's data file; what was done, in short.
fn damaged_copy(template: &Path, copy: &Path, trial: usize, rng: &mut ChaCha8Rng) -> String {
    copy_dir(template, copy);
    let file = copy.join("db").join("db");
    let damage = pick_damage(&std::fs::read(&file).unwrap(), trial, rng);
    damage.apply(&file, rng);
    damage.short()
}

/// The one finding of `store`'s integrity check (anything else fails the test).
async fn the_finding(store: &SledStore) -> String {
    match store.check_integrity().await.unwrap() {
        Integrity::Findings { mut findings, .. } if findings.len() == 1 => findings.remove(0),
        other => panic!("not one finding: {other:?}"),
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target)
        } else {
            std::fs::copy(e.path(), target).map(drop).unwrap()
        }
    }
}

/// A spare segment (a retired segment kept for reuse, `wal/spare-*.wal`) filled with garbage: nothing
/// reads it as a log, so the store opens with no finding, every run is intact, and runs committed after
/// (rotating into the spares) complete and read back after a reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_spare_segment_is_not_needed_and_is_written_over() {
    use graph_runtime::rand_core::Rng;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    completed_store(&path).await;
    let spares: Vec<_> = std::fs::read_dir(path.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("spare-"))
        .collect();
    assert!(!spares.is_empty(), "the runs rotated through segments and left spares");
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for spare in &spares {
        let mut bytes = std::fs::read(spare).unwrap();
        rng.fill_bytes(&mut bytes);
        std::fs::write(spare, bytes).unwrap();
    }
    let store = SledStore::open_with(&path, small_options()).unwrap();
    assert!(matches!(store.check_integrity().await.unwrap(), Integrity::Sound { .. }));
    every_run_intact(&store).await;
    let engine = Engine::builder(crash_graph(ITERATIONS)).store(store.clone()).build();
    for i in RUNS..RUNS + 2 {
        assert!(engine.run(&run_id(i), Trace::default()).await.unwrap().is_completed());
    }
    drop(engine);
    drop(store);
    assert!(spares.iter().any(|s| !s.exists()), "a damaged spare was taken into use as a segment");
    let store = SledStore::open_with(&path, small_options()).unwrap();
    every_run_intact(&store).await;
    for i in RUNS..RUNS + 2 {
        verify_run(&store, &run_id(i), None).await.unwrap();
    }
}
