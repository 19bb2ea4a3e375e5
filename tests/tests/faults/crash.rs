//! Crash tests with real processes, on the sled store, (feature `sqlite`) the SQLite store and (feature
//! `postgres`) the PostgreSQL store, each trial on a database of its own: a child
//! runs a workflow on the store and dies — aborted at a
//! chosen commit point (before, during, after the commit of a step) or SIGKILLed at a random moment —
//! then is resumed to completion by a new process. Every time, the committed history must equal an
//! uninterrupted run's checkpoint for checkpoint (same idempotency keys: nothing lost, nothing doubled)
//! and the final state must be byte-identical.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::Arc;

use graph_runtime::store::SledStore;
use graph_runtime::{Engine, MemoryStore, Store};
use graph_tests::{Trace, crash_graph, random_delay, state_hash};

/// The durable stores the crash families run on.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Sled,
    #[cfg(feature = "sqlite")]
    Sqlite,
    /// SQLite with `Durability::Async`: a process crash loses no acknowledged commit either.
    #[cfg(feature = "sqlite")]
    SqliteAsync,
    #[cfg(feature = "postgres")]
    Postgres,
}

/// Where one trial's store lives: a temporary folder, or (PostgreSQL) a database of its own, removed when
/// dropped.
enum Place {
    Dir(tempfile::TempDir),
    #[cfg(feature = "postgres")]
    Database(graph_tests::backends::Postgres),
}

impl Place {
    /// A fresh, empty place for a store of `kind`.
    async fn new(kind: Kind) -> Place {
        match kind {
            #[cfg(feature = "postgres")]
            Kind::Postgres => {
                let db = graph_tests::backends::Postgres::new();
                db.create().await;
                Place::Database(db)
            }
            _ => Place::Dir(tempfile::tempdir().unwrap()),
        }
    }

    /// The child's store spec (`graph_tests::backends::open_spec`) for a store of `kind` kept here.
    fn spec(&self, kind: Kind) -> String {
        match (kind, self) {
            (Kind::Sled, Place::Dir(dir)) => format!("sled:{}", dir.path().display()),
            #[cfg(feature = "sqlite")]
            (Kind::Sqlite, Place::Dir(dir)) => {
                format!("sqlite:{}", dir.path().join("store.sqlite").display())
            }
            #[cfg(feature = "sqlite")]
            (Kind::SqliteAsync, Place::Dir(dir)) => {
                format!("sqlite-async:{}", dir.path().join("store.sqlite").display())
            }
            #[cfg(feature = "postgres")]
            (Kind::Postgres, Place::Database(db)) => format!("postgres:{}", db.url()),
            #[allow(unreachable_patterns)]
            _ => unreachable!("a place is made for its kind"),
        }
    }
}

async fn open(spec: &str) -> Arc<dyn Store> {
    graph_tests::backends::open_spec(spec).await.expect("the store opens").shared()
}

const RUN: &str = "crash";
const ITERATIONS: u64 = 20;
const STEPS: u64 = 3 * ITERATIONS;

struct Reference {
    keys: Vec<String>,
    state_hash: String,
}

async fn reference() -> Reference {
    let store = MemoryStore::new();
    let out = Engine::builder(crash_graph(ITERATIONS))
        .store(store.clone())
        .build()
        .run(RUN, Trace::default())
        .await
        .unwrap();
    assert_eq!(out.steps, STEPS);
    let keys = store.history(RUN).await.unwrap().into_iter().map(|m| m.idempotency_key).collect();
    Reference { keys, state_hash: graph_tests::state_hash(&out.state) }
}

fn child(spec: &str, crash_at: Option<String>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_crash_child"));
    c.arg(spec).arg(RUN).arg(ITERATIONS.to_string()).stdout(Stdio::piped()).stderr(Stdio::null());
    c.env_remove("CRASH_GRAPH");
    match crash_at {
        Some(at) => c.env("CRASH_AT", at),
        None => c.env_remove("CRASH_AT"),
    };
    c
}

/// Resumes to completion in a fresh process and returns its `done` line.
fn finish(spec: &str) -> String {
    let out = child(spec, None).stderr(Stdio::piped()).output().unwrap();
    assert!(
        out.status.success(),
        "the resuming process failed: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines().find_map(|l| l.strip_prefix("done ")).expect("a done line").to_owned()
}

/// The highest step a (killed) child reported as acknowledged by the store.
fn last_ack(stdout: &[u8]) -> Option<u64> {
    String::from_utf8_lossy(stdout).lines().filter_map(|l| l.strip_prefix("ack ")?.parse().ok()).max()
}

/// No commit the store acknowledged before the crash is missing after it.
async fn acknowledged_commits_survive(spec: &str, stdout: &[u8], what: &str) {
    let Some(acked) = last_ack(stdout) else { return };
    let store = open(spec).await;
    let latest = store.run_info(RUN).await.unwrap().map(|i| i.latest_step);
    assert!(latest >= Some(acked), "{what}: step {acked} was acknowledged, the store has {latest:?}");
}

/// The store holds exactly the reference history and the final state.
async fn verify(spec: &str, reference: &Reference, line: &str, what: &str) {
    assert_eq!(line, format!("{STEPS} {}", reference.state_hash), "{what}: final state");
    let store = open(spec).await;
    let history = store.history(RUN).await.unwrap();
    let steps: Vec<u64> = history.iter().map(|m| m.step).collect();
    assert_eq!(steps, (0..=STEPS).collect::<Vec<_>>(), "{what}: one checkpoint per step");
    let keys: Vec<String> = history.into_iter().map(|m| m.idempotency_key).collect();
    assert_eq!(keys, reference.keys, "{what}: the same commits as an uninterrupted run");
    let engine = Engine::builder(crash_graph(ITERATIONS)).shared_store(store).build();
    let done = engine.resume(RUN).await.unwrap();
    assert!(done.is_completed());
    assert_eq!(state_hash(&done.state), reference.state_hash, "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_at_every_commit_point_and_random_kills_resume_to_the_same_history() {
    crashes_resume_to_the_same_history(Kind::Sled).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_crashes_at_every_commit_point_and_random_kills_resume_to_the_same_history() {
    crashes_resume_to_the_same_history(Kind::Sqlite).await;
}

/// An `Async` SQLite store syncs its log only at checkpoints, but a commit is in the log's file before
/// it is acknowledged (the store's VFS writes the frames at the commit's sync point): a killed process
/// loses none.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_async_crashes_at_every_commit_point_and_random_kills_resume_to_the_same_history() {
    crashes_resume_to_the_same_history(Kind::SqliteAsync).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_crashes_at_every_commit_point_and_random_kills_resume_to_the_same_history() {
    crashes_resume_to_the_same_history(Kind::Postgres).await;
}

async fn crashes_resume_to_the_same_history(kind: Kind) {
    let reference = reference().await;
    let mut crashes = 0;

    // Aborts at chosen commit points: before the commit, in the middle of it (transaction or flush), and
    // after it but before the engine could act on it.
    for point in ["before", "during", "after"] {
        for step in [0, 1, 2, 3, 4, 14, 29, 45, 59, STEPS] {
            let place = Place::new(kind).await;
            let spec = place.spec(kind);
            let out = child(&spec, Some(format!("{step}:{point}"))).output().unwrap();
            if !out.status.success() {
                crashes += 1;
            }
            acknowledged_commits_survive(&spec, &out.stdout, &format!("abort {point} step {step}")).await;
            let line = finish(&spec);
            verify(&spec, &reference, &line, &format!("abort {point} step {step}")).await;
        }
    }
    let aborts = crashes;

    // SIGKILL at random moments (a whole run takes ~100 ms here), up to five times in a row before the
    // run may finish.
    for trial in 0..25u64 {
        let place = Place::new(kind).await;
        let spec = place.spec(kind);
        for attempt in 0..5u64 {
            let mut proc = child(&spec, None).spawn().unwrap();
            let started = Instant::now();
            std::thread::sleep(
                Duration::from_millis(5) + random_delay(Duration::from_millis(55), trial * 10 + attempt),
            );
            if proc.try_wait().unwrap().is_none() {
                proc.kill().unwrap(); // SIGKILL
                crashes += 1;
            }
            let out = proc.wait_with_output().unwrap();
            assert!(out.status.success() || started.elapsed() < Duration::from_secs(30));
            acknowledged_commits_survive(&spec, &out.stdout, &format!("kill trial {trial}")).await;
        }
        let line = finish(&spec);
        verify(&spec, &reference, &line, &format!("kill trial {trial}")).await;
    }
    println!("{kind:?}: {aborts} aborts at commit points, {} random SIGKILLs", crashes - aborts);
    assert!(crashes - aborts >= 25, "only {} random kills landed", crashes - aborts);
    assert!(crashes >= 50, "only {crashes} crashes happened");
}

#[test]
fn a_store_held_by_another_process_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    // A child that parks inside its run: a huge iteration count keeps it busy while the test probes.
    let mut proc = Command::new(env!("CARGO_BIN_EXE_crash_child"))
        .arg(dir.path())
        .arg("held")
        .arg("1000000")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let result = loop {
        // Wait until the child has the store (its first commit exists), then try to open it.
        if dir.path().join("db").exists() {
            std::thread::sleep(Duration::from_millis(200));
            break SledStore::open(dir.path());
        }
        assert!(Instant::now() < deadline, "the child never opened the store");
        std::thread::sleep(Duration::from_millis(10));
    };
    proc.kill().unwrap();
    proc.wait().unwrap();
    assert!(matches!(result, Err(graph_runtime::StoreError::Locked { .. })), "{result:?}");
    // Once the holder is gone, the store opens.
    assert!(SledStore::open(dir.path()).is_ok());
}

/// A wait-for-all join killed at every commit point of two rounds (including the steps where it waits
/// for its slower predecessor, durably) resumes to the uninterrupted history, running once per round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_join_killed_at_any_commit_point_runs_once_per_round() {
    a_waiting_join_runs_once_per_round(Kind::Sled).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_waiting_join_killed_at_any_commit_point_runs_once_per_round() {
    a_waiting_join_runs_once_per_round(Kind::Sqlite).await;
}

async fn a_waiting_join_runs_once_per_round(kind: Kind) {
    const ROUNDS: u64 = 2;
    let graph = || graph_tests::graphs::wait_for_join(ROUNDS, false);
    let store = MemoryStore::new();
    let out = Engine::builder(graph()).store(store.clone()).build().run(RUN, Trace::default()).await.unwrap();
    let keys: Vec<String> =
        store.history(RUN).await.unwrap().into_iter().map(|m| m.idempotency_key).collect();
    let d_runs = out.state.log.iter().filter(|l| l.starts_with("d@")).count() as u64;
    assert_eq!(d_runs, ROUNDS);
    let join_child = |spec: &str, crash_at: Option<String>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_crash_child"));
        c.arg(spec).arg(RUN).arg(ROUNDS.to_string()).env("CRASH_GRAPH", "join");
        c.stdout(Stdio::piped()).stderr(Stdio::null());
        if let Some(at) = crash_at {
            c.env("CRASH_AT", at);
        }
        c
    };
    for step in 0..=out.steps {
        for point in ["before", "during", "after"] {
            let place = Place::new(kind).await;
            let spec = place.spec(kind);
            let crashed = join_child(&spec, Some(format!("{step}:{point}"))).output().unwrap();
            let done = join_child(&spec, None).output().unwrap();
            assert!(done.status.success(), "resume after {point} {step}");
            let line = String::from_utf8(done.stdout).unwrap();
            let line = line.lines().find_map(|l| l.strip_prefix("done ")).unwrap().to_owned();
            assert_eq!(line, format!("{} {}", out.steps, state_hash(&out.state)), "{point} {step}");
            let store = open(&spec).await;
            let stored: Vec<String> =
                store.history(RUN).await.unwrap().into_iter().map(|m| m.idempotency_key).collect();
            assert_eq!(stored, keys, "{point} {step}: the same commits as an uninterrupted run");
            if let Some(acked) = last_ack(&crashed.stdout) {
                assert!(acked <= out.steps);
            }
        }
    }
}
