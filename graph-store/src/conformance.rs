//! The store conformance suite (feature `conformance`): written once, run unchanged against every
//! backend, the built-in ones and any written outside this crate.
//!
//! A backend is given as a [`Backend`]: a way to open it, to reopen it (a restart: drop every handle
//! and open the same data again), and its fail point (a [`FailPoint`] the backend consults after each
//! write of a commit). Each check is an `async fn` taking one; call them from `#[tokio::test]`s on a
//! multi-threaded runtime:
//!
//! ```ignore
//! #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//! async fn concurrent_same_key() {
//!     graph_store::conformance::concurrent_same_key(&MyBackend::new()).await;
//! }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::events::{ChainHead, Event, EventType};
use crate::keys::{KeyItem, OrderKey, PathId, hex, idempotency_key, sha256_parts};
use crate::{
    Checkpoint, CommitOutcome, EffectClass, EffectOutcome, EffectRecord, EffectState, FailPoint, Interrupt,
    InterruptKind, MemoryStore, OutboxRow, PauseReason, RunFilter, RunStatus, SCHEMA_VERSION, StateRepr,
    StatusKind, Store, WorkItem,
};

/// How the suite opens a backend.
pub trait Backend: Send + Sync {
    /// The store type.
    type Store: Store + Clone;
    /// Opens the store over this backend's data (fresh for a new backend).
    fn open(&self) -> impl std::future::Future<Output = Self::Store> + Send;
    /// Drops `store` (the only handle) and opens the same data again.
    fn reopen(&self, store: Self::Store) -> impl std::future::Future<Output = Self::Store> + Send;
    /// The store's fail point.
    fn fail_point(store: &Self::Store) -> FailPoint;
}

/// A checkpoint of `run` at `step` whose state is `{"v": value}`.
pub fn checkpoint(run: &str, step: u64, value: u64) -> Checkpoint {
    let state = format!(r#"{{"v":{value}}}"#).into_bytes();
    let frontier = vec![WorkItem {
        node: "n".into(),
        order_key: OrderKey::new(0, 0),
        path: PathId::entry("n"),
        input: None,
        origin_step: None,
    }];
    let key = idempotency_key(run, step, &[KeyItem { node_id: "n", order_key: 0 }], &state);
    let state_hash = hex(&sha256_parts(&[&state]));
    Checkpoint {
        run_id: run.into(),
        step,
        timestamp_ms: 1_700_000_000_000 + step,
        label: None,
        state: StateRepr::Full(state),
        state_hash,
        rng_seed: 7,
        frontier,
        waiting: Vec::new(),
        outbox: Vec::new(),
        idempotency_key: key,
        graph_fingerprint: "fp".into(),
        event_head: None,
        schema_version: SCHEMA_VERSION,
    }
}

/// Commits `checkpoint(run, step, step)` for each step of `steps` in turn, each at expected version
/// `step` (a run committed from its first step, one commit a step), and asserts each is
/// `Committed { version: step + 1 }`.
pub async fn commit_steps(store: &impl Store, run: &str, steps: std::ops::Range<u64>) {
    for step in steps {
        let o = store
            .save_checkpoint(&checkpoint(run, step, step), &[], &RunStatus::Running, step)
            .await
            .unwrap();
        assert_eq!(o, CommitOutcome::Committed { version: step + 1 }, "{run} at step {step}");
    }
}

fn version(o: &CommitOutcome) -> u64 {
    match o {
        CommitOutcome::Committed { version } | CommitOutcome::AlreadyCommitted { version } => *version,
        other => panic!("expected a commit, got {other:?}"),
    }
}

/// The run row's graph fingerprint is its latest checkpoint's: a commit of another fingerprint (a
/// migration's) moves the run to that graph, and a store reopened reads the moved row.
pub async fn commits_move_the_runs_graph<B: Backend>(b: &B) {
    let store = b.open().await;
    commit_steps(&store, "moved", 0..2).await;
    let mut cp = checkpoint("moved", 2, 2);
    cp.graph_fingerprint = "v2:fp".into();
    let o = store.save_checkpoint(&cp, &[], &RunStatus::Running, 2).await.unwrap();
    assert_eq!(o, CommitOutcome::Committed { version: 3 });
    let info = store.run_info("moved").await.unwrap().expect("the run");
    assert_eq!((info.graph_fingerprint.as_str(), info.latest_step), ("v2:fp", 2));
    // The next commit of the new graph keeps it; the one before is unchanged.
    let mut next = checkpoint("moved", 3, 3);
    next.graph_fingerprint = "v2:fp".into();
    store.save_checkpoint(&next, &[], &RunStatus::Running, 3).await.unwrap();
    assert_eq!(store.load_checkpoint("moved", 1).await.unwrap().unwrap().graph_fingerprint.as_ref(), "fp");
    drop(store);
    let store = b.open().await;
    let info = store.run_info("moved").await.unwrap().expect("the run, reopened");
    assert_eq!((info.graph_fingerprint.as_str(), info.version), ("v2:fp", 4));
}

/// 100 concurrent commits of one step with one key: exactly one `Committed`, 99 `AlreadyCommitted`.
pub async fn concurrent_same_key<B: Backend>(b: &B) {
    let store = b.open().await;
    let cp = Arc::new(checkpoint("race", 0, 1));
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let (store, cp) = (store.clone(), cp.clone());
            tokio::spawn(
                async move { store.save_checkpoint(&cp, &[], &RunStatus::Running, 0).await.unwrap() },
            )
        })
        .collect();
    let mut committed = 0;
    let mut already = 0;
    for t in tasks {
        match t.await.unwrap() {
            CommitOutcome::Committed { version: 1 } => committed += 1,
            CommitOutcome::AlreadyCommitted { version: 1 } => already += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((committed, already), (1, 99));
    assert_eq!(store.history("race").await.unwrap().len(), 1);
    assert_eq!(store.run_info("race").await.unwrap().unwrap().version, 1);
}

/// A different result for a committed step is `StepTaken`, and the stored row is unchanged.
pub async fn step_taken_keeps_the_stored_row<B: Backend>(b: &B) {
    let store = b.open().await;
    let first = checkpoint("taken", 0, 1);
    assert_eq!(
        store.save_checkpoint(&first, &[], &RunStatus::Running, 0).await.unwrap(),
        CommitOutcome::Committed { version: 1 }
    );
    let other = checkpoint("taken", 0, 2);
    let outcome = store.save_checkpoint(&other, &[], &RunStatus::Completed, 1).await.unwrap();
    assert_eq!(outcome, CommitOutcome::StepTaken { existing_key: first.idempotency_key.clone(), version: 1 });
    assert_eq!(store.load_checkpoint("taken", 0).await.unwrap().unwrap(), first);
    let info = store.run_info("taken").await.unwrap().unwrap();
    assert_eq!((info.version, info.status), (1, RunStatus::Running));
}

/// Stale versions are refused, for commits and status updates alike.
pub async fn version_conflicts<B: Backend>(b: &B) {
    let store = b.open().await;
    store.save_checkpoint(&checkpoint("v", 0, 0), &[], &RunStatus::Running, 0).await.unwrap();
    assert_eq!(
        store.save_checkpoint(&checkpoint("v", 1, 1), &[], &RunStatus::Running, 0).await.unwrap(),
        CommitOutcome::VersionConflict { current: 1 }
    );
    assert_eq!(
        store.set_status("v", &RunStatus::Cancelled, &[], None, 7).await.unwrap(),
        CommitOutcome::VersionConflict { current: 1 }
    );
    assert_eq!(
        store.set_status("nope", &RunStatus::Cancelled, &[], None, 0).await.unwrap(),
        CommitOutcome::VersionConflict { current: 0 }
    );
    assert_eq!(
        store.set_status("v", &RunStatus::Cancelled, &[], None, 1).await.unwrap(),
        CommitOutcome::Committed { version: 2 }
    );
    assert_eq!(store.run_info("v").await.unwrap().unwrap().status, RunStatus::Cancelled);
}

/// 100 runs × 10 steps × 3 attempts each (concurrently per run): exactly 1,000 commits, all loadable.
pub async fn thousand_commits<B: Backend>(b: &B) {
    let store = b.open().await;
    let tasks: Vec<_> = (0..100)
        .map(|r| {
            let store = store.clone();
            tokio::spawn(async move {
                let run = format!("run-{r:03}");
                let mut committed = 0;
                let mut v = 0;
                for step in 0..10 {
                    let cp = checkpoint(&run, step, step * 10 + r);
                    let (a, b, c) = tokio::join!(
                        store.save_checkpoint(&cp, &[], &RunStatus::Running, v),
                        store.save_checkpoint(&cp, &[], &RunStatus::Running, v),
                        store.save_checkpoint(&cp, &[], &RunStatus::Running, v),
                    );
                    let outcomes = [a.unwrap(), b.unwrap(), c.unwrap()];
                    for o in &outcomes {
                        if matches!(o, CommitOutcome::Committed { .. }) {
                            committed += 1;
                        }
                    }
                    v = outcomes.iter().map(version).max().unwrap();
                }
                committed
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 1000);
    let store = b.reopen(store).await;
    assert_eq!(store.list_runs(&RunFilter::all()).await.unwrap().len(), 100);
    for r in 0..100u64 {
        let run = format!("run-{r:03}");
        for step in 0..10 {
            assert_eq!(
                store.load_checkpoint(&run, step).await.unwrap().unwrap(),
                checkpoint(&run, step, step * 10 + r)
            );
        }
        let info = store.run_info(&run).await.unwrap().unwrap();
        assert_eq!((info.latest_step, info.version), (9, 10));
    }
}

/// `list_runs` pages in run-id order (bytes): a cursor (`after`) starts past the id it names (stored
/// or not), a prefix takes exactly the ids that start with it (ids that sort right around it, `a-`
/// against `a-0`, `a.` and `a`, stay out), a status and a limit combine with both, and paging a
/// listing with a cursor returns every run once.
pub async fn list_runs_pages<B: Backend>(b: &B) {
    let store = b.open().await;
    let ids = ["a", "a-", "a-0", "a-1", "a-10", "a-2", "a.", "aa", "b-0", "b-1", "é-0"];
    for id in ids {
        commit_steps(&store, id, 0..1).await;
    }
    for id in ["a-1", "b-0"] {
        let done = store.set_status(id, &RunStatus::Completed, &[], None, 1).await.unwrap();
        assert_eq!(done, CommitOutcome::Committed { version: 2 }, "{id}");
    }
    let listed = |f: RunFilter| {
        let store = store.clone();
        async move { store.list_runs(&f).await.unwrap().into_iter().map(|r| r.run_id).collect::<Vec<String>>() }
    };
    assert_eq!(listed(RunFilter::all()).await, ids, "every run, in byte order");
    assert_eq!(listed(RunFilter::all().prefix("a-")).await, ["a-", "a-0", "a-1", "a-10", "a-2"]);
    assert_eq!(listed(RunFilter::all().prefix("a-1")).await, ["a-1", "a-10"]);
    assert_eq!(listed(RunFilter::all().prefix("é")).await, ["é-0"]);
    assert!(listed(RunFilter::all().prefix("c")).await.is_empty());
    assert_eq!(listed(RunFilter::all().after("a-1").limit(3)).await, ["a-10", "a-2", "a."]);
    // A cursor that names no stored run: the listing starts at the next id.
    assert_eq!(listed(RunFilter::all().after("a-05").limit(2)).await, ["a-1", "a-10"]);
    assert_eq!(listed(RunFilter::all().prefix("a-").after("a-1")).await, ["a-10", "a-2"]);
    // A cursor before the prefix's ids is no bound; one past them leaves nothing.
    assert_eq!(listed(RunFilter::all().prefix("b-").after("a")).await, ["b-0", "b-1"]);
    assert!(listed(RunFilter::all().prefix("a-").after("a-2")).await.is_empty());
    assert_eq!(listed(RunFilter::all().status(StatusKind::Completed)).await, ["a-1", "b-0"]);
    assert_eq!(listed(RunFilter::all().status(StatusKind::Completed).after("a-1")).await, ["b-0"]);
    assert_eq!(
        listed(RunFilter::all().status(StatusKind::Running).prefix("a-").limit(2)).await,
        ["a-", "a-0"]
    );
    assert!(listed(RunFilter::all().limit(0)).await.is_empty());
    // Pages of two, each from the last id of the one before: every run once, in order.
    let mut paged = Vec::new();
    let mut filter = RunFilter::all().limit(2);
    loop {
        let page = listed(filter.clone()).await;
        assert!(page.len() <= 2, "{page:?}");
        let Some(last) = page.last().cloned() else { break };
        paged.extend(page);
        filter = filter.after(last);
    }
    assert_eq!(paged, ids);
    // A status filter with a limit reads on past the rows a page would take until it has its runs.
    for n in 0..40 {
        commit_steps(&store, &format!("z-{n:02}"), 0..1).await;
    }
    store.set_status("z-39", &RunStatus::Completed, &[], None, 1).await.unwrap();
    let done = RunFilter::all().status(StatusKind::Completed).after("b-0").limit(1);
    assert_eq!(listed(done).await, ["z-39"]);
    assert_eq!(listed(RunFilter::all().prefix("z-").after("z-30")).await.len(), 9);
}

/// Run ids and labels a user may hand the store: empty, with a NUL, SQL and path syntax, control and
/// non-ASCII characters, 1,000 and 100,000 bytes long. Each run's first commit either round-trips
/// exactly (its row, its checkpoint, the listing of its id as a prefix) or is refused with a typed error
/// that leaves nothing of the run behind and the store working; nothing panics, and nothing it stores
/// reads back damaged. Returns, per id (by index), whether the store took it.
pub async fn hostile_run_ids_round_trip_or_are_refused<B: Backend>(b: &B) -> Vec<bool> {
    let store = b.open().await;
    let long = "x".repeat(1_000);
    // Not compressible (a database may compress a repeated letter to fit an index).
    let huge: String =
        (0..100_000u64).map(|i| char::from(b'a' + ((i * 7_919 + i / 26) % 26) as u8)).collect();
    let ids: Vec<&str> = vec![
        "",
        "a\0b",
        "'; DROP TABLE graph_runs; --",
        "../../etc/passwd",
        "%_*?[]",
        "line\nfeed\ttab\r",
        "\u{7f}\u{1}",
        "ünï©ødé ✓ 𝄞",
        &long,
        &huge,
    ];
    let mut took = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let mut cp = checkpoint(id, 0, i as u64);
        cp.label = Some(format!("label of {id}"));
        match store.save_checkpoint(&cp, &[], &RunStatus::Running, 0).await {
            Ok(CommitOutcome::Committed { version: 1 }) => {
                let info = store.run_info(id).await.unwrap().unwrap_or_else(|| panic!("id {i}: no row"));
                assert_eq!((info.run_id.as_str(), info.latest_step, info.version), (*id, 0, 1), "id {i}");
                assert_eq!(store.load_checkpoint(id, 0).await.unwrap().as_ref(), Some(&cp), "id {i}");
                let listed = store.list_runs(&RunFilter::all().prefix(*id).limit(1)).await.unwrap();
                assert_eq!(listed.first().map(|r| r.run_id.as_str()), Some(*id), "id {i}");
                took.push(true);
            }
            Ok(other) => panic!("id {i}: a first commit answered {other:?}"),
            Err(e) => {
                assert!(
                    !matches!(
                        e,
                        crate::StoreError::Corrupted { .. } | crate::StoreError::CorruptedEvent { .. }
                    ),
                    "id {i}: a refused id is not damage: {e}"
                );
                eprintln!("id {i} refused: {e}");
                // Nothing of it stands: a read of the id finds nothing (or is refused in turn).
                if let Ok(info) = store.run_info(id).await {
                    assert!(info.is_none(), "id {i}: refused but stored: {info:?}");
                }
                took.push(false);
            }
        }
    }
    // The store still works, and everything it took reads back as written.
    commit_steps(&store, "after-hostile-ids", 0..2).await;
    let store = b.reopen(store).await;
    for (i, id) in ids.iter().enumerate().filter(|(i, _)| took[*i]) {
        let cp = store.load_checkpoint(id, 0).await.unwrap().unwrap_or_else(|| panic!("id {i} after reopen"));
        assert_eq!(cp.label.as_deref(), Some(format!("label of {id}").as_str()), "id {i}");
    }
    took
}

/// A failure injected after each write of a commit leaves nothing of it visible, also after a restart.
pub async fn injected_failures_leave_nothing<B: Backend>(b: &B) {
    let mut store = b.open().await;
    store.save_checkpoint(&checkpoint("f", 0, 0), &[], &RunStatus::Running, 0).await.unwrap();
    for n in 1..=3 {
        B::fail_point(&store).fail_after(n);
        let cp = checkpoint("f", 1, n as u64);
        assert!(store.save_checkpoint(&cp, &[], &RunStatus::Completed, 1).await.is_err(), "write {n} fails");
        nothing_of_step_1(&store, n).await;
        store = b.reopen(store).await;
        nothing_of_step_1(&store, n).await;
    }
    let cp = checkpoint("f", 1, 9);
    assert_eq!(
        store.save_checkpoint(&cp, &[], &RunStatus::Completed, 1).await.unwrap(),
        CommitOutcome::Committed { version: 2 }
    );
}

async fn nothing_of_step_1(s: &impl Store, n: usize) {
    assert_eq!(s.load_checkpoint("f", 1).await.unwrap(), None, "after write {n}");
    assert_eq!(s.latest("f").await.unwrap().unwrap().step, 0);
    let info = s.run_info("f").await.unwrap().unwrap();
    assert_eq!((info.version, info.latest_step, info.status), (1, 0, RunStatus::Running));
}

/// Reads and prune, with a restart between every two operations.
pub async fn restarts_between_operations<B: Backend>(b: &B) {
    let mut store = b.open().await;
    for step in 0..6 {
        let v = step;
        let mut cp = checkpoint("p", step, step);
        if step % 3 != 0 {
            // steps 1, 2 and 4, 5 are deltas over the snapshots at 0 and 3
            cp.state = StateRepr::Delta { base: step - step % 3, deltas: b"[]".to_vec() };
        }
        assert_eq!(
            store.save_checkpoint(&cp, &[], &RunStatus::Running, v).await.unwrap(),
            CommitOutcome::Committed { version: v + 1 }
        );
        store = b.reopen(store).await;
        assert_eq!(store.load_checkpoint("p", step).await.unwrap().unwrap(), cp);
        store = b.reopen(store).await;
    }
    assert_eq!(store.latest("p").await.unwrap().unwrap().step, 5);
    store = b.reopen(store).await;
    let range: Vec<u64> = store.checkpoints("p", 2, 4).await.unwrap().iter().map(|c| c.step).collect();
    assert_eq!(range, [2, 3, 4]);
    store = b.reopen(store).await;
    let steps: Vec<u64> = store.history("p").await.unwrap().iter().map(|m| m.step).collect();
    assert_eq!(steps, [0, 1, 2, 3, 4, 5]);
    // keep 2 → steps 4 and 5, whose chain starts at the snapshot 3: 0, 1, 2 go.
    assert_eq!(store.prune("p", 2).await.unwrap(), 3);
    store = b.reopen(store).await;
    let steps: Vec<u64> = store.history("p").await.unwrap().iter().map(|m| m.step).collect();
    assert_eq!(steps, [3, 4, 5]);
    // A pruned step's key still refuses a second commit.
    let old = checkpoint("p", 0, 0);
    assert!(matches!(
        store.save_checkpoint(&old, &[], &RunStatus::Running, 6).await.unwrap(),
        CommitOutcome::AlreadyCommitted { .. }
    ));
    store = b.reopen(store).await;
    let running = store.list_runs(&RunFilter::all().status(RunStatus::Running)).await.unwrap();
    assert_eq!(running.len(), 1);
    assert!(store.list_runs(&RunFilter::all().status(RunStatus::Completed)).await.unwrap().is_empty());
}

/// An effect journal entry of `run` at `step`, call `call`, in `state`.
pub fn effect(run: &str, step: u64, call: u32, state: EffectState) -> EffectRecord {
    let path = PathId::entry("n").to_string();
    EffectRecord {
        key: crate::journal::effect_key(run, step, &path, call),
        run_id: run.to_owned(),
        step,
        node: "n".into(),
        path,
        call_index: call,
        name: "charge".into(),
        class: EffectClass::NonIdempotent,
        request_hash: "0".repeat(64),
        state,
    }
}

/// The journal is compare-and-set: a second first write of a key, or a write from the wrong state, is a
/// typed outcome and changes nothing; entries survive a restart and list in (step, path, call) order.
pub async fn effect_journal_is_compare_and_set<B: Backend>(b: &B) {
    let mut store = b.open().await;
    let started = effect("j", 2, 0, EffectState::Started);
    assert_eq!(store.load_effect(&started.key).await.unwrap(), None);
    assert_eq!(
        store.put_effect(&started, Some(&EffectState::Started)).await.unwrap(),
        EffectOutcome::Missing
    );
    assert_eq!(store.put_effect(&started, None).await.unwrap(), EffectOutcome::Written);
    // A second first write is not an overwrite.
    let mut other = started.clone();
    other.state = EffectState::Failed { message: "x".into() };
    assert_eq!(store.put_effect(&other, None).await.unwrap(), EffectOutcome::Exists(started.clone()));
    let done = EffectRecord {
        state: EffectState::Completed { response: serde_json::json!({"receipt": 7}) },
        ..started.clone()
    };
    // From the wrong state: nothing.
    let wrong = EffectState::Failed { message: "no".into() };
    assert_eq!(store.put_effect(&done, Some(&wrong)).await.unwrap(), EffectOutcome::Exists(started.clone()));
    assert_eq!(store.put_effect(&done, Some(&EffectState::Started)).await.unwrap(), EffectOutcome::Written);
    store = b.reopen(store).await;
    assert_eq!(store.load_effect(&done.key).await.unwrap(), Some(done.clone()));
    let earlier = effect("j", 1, 3, EffectState::Started);
    let later = effect("j", 2, 1, EffectState::Started);
    let elsewhere = effect("j2", 0, 0, EffectState::Started);
    for e in [&later, &elsewhere, &earlier] {
        assert_eq!(store.put_effect(e, None).await.unwrap(), EffectOutcome::Written);
    }
    store = b.reopen(store).await;
    let keys: Vec<String> = store.effects("j").await.unwrap().into_iter().map(|e| e.key).collect();
    assert_eq!(keys, [earlier.key, done.key, later.key]);
}

/// Outbox rows are written with their step's commit, never without it (an injected failure, a step
/// taken, a version conflict), stay until acknowledged (also across a restart), and drain in commit
/// order.
pub async fn outbox_rows_come_with_their_commit<B: Backend>(b: &B) {
    let row = |run: &str, step: u64, i: u32| OutboxRow {
        key: crate::journal::outbox_key(run, step - 1, PathId::entry("n").as_str(), i),
        run_id: run.to_owned(),
        step,
        topic: "mail".into(),
        payload: serde_json::json!({"to": i}),
    };
    let mut store = b.open().await;
    store.save_checkpoint(&checkpoint("o", 0, 0), &[], &RunStatus::Running, 0).await.unwrap();
    let mut cp = checkpoint("o", 1, 1);
    cp.outbox = vec![row("o", 1, 0), row("o", 1, 1)];
    // Not committed: no rows.
    B::fail_point(&store).fail_after(2);
    assert!(store.save_checkpoint(&cp, &[], &RunStatus::Running, 1).await.is_err());
    assert_eq!(store.outbox(10).await.unwrap(), []);
    assert!(matches!(
        store.save_checkpoint(&cp, &[], &RunStatus::Running, 9).await.unwrap(),
        CommitOutcome::VersionConflict { .. }
    ));
    assert_eq!(store.outbox(10).await.unwrap(), []);
    assert!(matches!(
        store.save_checkpoint(&cp, &[], &RunStatus::Running, 1).await.unwrap(),
        CommitOutcome::Committed { .. }
    ));
    let mut taken = checkpoint("o", 1, 99);
    taken.outbox = vec![row("o", 1, 5)];
    assert!(matches!(
        store.save_checkpoint(&taken, &[], &RunStatus::Running, 2).await.unwrap(),
        CommitOutcome::StepTaken { .. }
    ));
    let mut next = checkpoint("o", 2, 2);
    next.outbox = vec![row("o", 2, 0)];
    store.save_checkpoint(&next, &[], &RunStatus::Running, 2).await.unwrap();
    store = b.reopen(store).await;
    let pending = store.outbox(10).await.unwrap();
    assert_eq!(pending, [row("o", 1, 0), row("o", 1, 1), row("o", 2, 0)]);
    assert_eq!(store.outbox(2).await.unwrap().len(), 2);
    assert_eq!(store.ack_outbox(&[pending[1].key.clone(), "unknown".into()]).await.unwrap(), 1);
    store = b.reopen(store).await;
    assert_eq!(store.outbox(10).await.unwrap(), [row("o", 1, 0), row("o", 2, 0)]);
    assert_eq!(store.ack_outbox(&[pending[1].key.clone()]).await.unwrap(), 0, "acknowledged once");
}

/// Events chained after `head`, one per payload (`{"n": i}`), stamped `seq`.
pub fn events(head: Option<&ChainHead>, n: usize, first: u64) -> Vec<Event> {
    let mut a = crate::events::Appender::new(head.cloned(), None);
    (0..n)
        .map(|i| {
            a.next(
                EventType::StepCommitted,
                first + i as u64,
                serde_json::json!({ "n": first + i as u64 }).into(),
            )
        })
        .collect()
}

fn head_of(events: &[Event]) -> Option<ChainHead> {
    crate::events::head_after(None, events)
}

/// Events are appended with the write they come with and never without it (an injected failure, a
/// step taken, a version conflict, an `AlreadyCommitted`); the run row's head follows the last one
/// written; `events` pages in `seq` order; the pending step is set by a status change that gives one,
/// kept by one that does not, cleared by the next commit; all of it survives a restart.
pub async fn events_and_pending_steps_go_with_their_writes<B: Backend>(b: &B) {
    let mut store = b.open().await;
    let first = events(None, 2, 0);
    store.save_checkpoint(&checkpoint("e", 0, 0), &first, &RunStatus::Running, 0).await.unwrap();
    assert_eq!(store.run_info("e").await.unwrap().unwrap().event_head, head_of(&first));
    // Not committed: no events, the head unchanged.
    let lost = events(head_of(&first).as_ref(), 1, 2);
    B::fail_point(&store).fail_after(2);
    assert!(store.save_checkpoint(&checkpoint("e", 1, 1), &lost, &RunStatus::Running, 1).await.is_err());
    for (cp, version) in [(checkpoint("e", 1, 1), 7), (checkpoint("e", 0, 5), 1), (checkpoint("e", 0, 0), 1)]
    {
        let outcome = store.save_checkpoint(&cp, &lost, &RunStatus::Running, version).await.unwrap();
        assert!(!matches!(outcome, CommitOutcome::Committed { .. }), "{outcome:?}");
    }
    assert!(matches!(
        store.set_status("e", &RunStatus::Cancelled, &lost, Some(b"p"), 9).await.unwrap(),
        CommitOutcome::VersionConflict { .. }
    ));
    store = b.reopen(store).await;
    assert_eq!(store.events("e", 0, 100).await.unwrap(), first);
    assert_eq!(store.run_info("e").await.unwrap().unwrap().event_head, head_of(&first));
    assert_eq!(store.pending("e").await.unwrap(), None);
    // A status change appends, sets the pending step; another keeps it.
    let paused = events(head_of(&first).as_ref(), 1, 2);
    let status = RunStatus::Paused(PauseReason::Backpressure);
    store.set_status("e", &status, &paused, Some(b"pending-1"), 1).await.unwrap();
    let resumed = events(head_of(&paused).as_ref(), 1, 3);
    store.set_status("e", &RunStatus::Running, &resumed, None, 2).await.unwrap();
    store = b.reopen(store).await;
    assert_eq!(store.pending("e").await.unwrap().as_deref(), Some(&b"pending-1"[..]));
    assert_eq!(store.run_info("e").await.unwrap().unwrap().event_head, head_of(&resumed));
    // The next commit clears it; a commit without events keeps the head.
    let committed = events(head_of(&resumed).as_ref(), 3, 4);
    store.save_checkpoint(&checkpoint("e", 1, 1), &committed, &RunStatus::Running, 3).await.unwrap();
    store.save_checkpoint(&checkpoint("e", 2, 2), &[], &RunStatus::Running, 4).await.unwrap();
    // Another run's log is its own.
    let theirs = events(None, 2, 0);
    store.save_checkpoint(&checkpoint("e2", 0, 0), &theirs, &RunStatus::Running, 0).await.unwrap();
    store = b.reopen(store).await;
    assert_eq!(store.pending("e").await.unwrap(), None);
    let info = store.run_info("e").await.unwrap().unwrap();
    assert_eq!(info.event_head, head_of(&committed));
    let all: Vec<Event> = [first, paused, resumed, committed].concat();
    assert_eq!(store.events("e", 0, 100).await.unwrap(), all);
    assert_eq!(store.events("e", 2, 3).await.unwrap(), all[2..5]);
    assert_eq!(store.events("e", 6, 100).await.unwrap(), all[6..]);
    assert_eq!(store.events("e", 7, 100).await.unwrap(), []);
    assert_eq!(store.events("e2", 0, 100).await.unwrap(), theirs);
    assert_eq!(store.events("none", 0, 100).await.unwrap(), []);
    crate::events::verify("e", None, &all, info.event_head.as_ref(), None)
        .expect("the stored chain verifies");
}

/// A wait of `kind` due at `wake_at_ms`, as a parked run's status lists it.
pub fn wait(kind: InterruptKind, wake_at_ms: Option<u64>) -> Interrupt {
    Interrupt {
        id: "p#0".into(),
        kind,
        node: "n".into(),
        path: "p".into(),
        step: 0,
        index: 0,
        payload: serde_json::Value::Null,
        wake_at_ms,
        topic: None,
    }
}

/// Parked runs keep their waits and due times through a restart: `Waiting` (a sleep) and `Interrupted`
/// (a question with a deadline, one without) are listed under their own status names, and a run that
/// is answered and commits is no longer parked.
pub async fn parked_runs_keep_their_due_times<B: Backend>(b: &B) {
    let mut store = b.open().await;
    let sleeping = RunStatus::Waiting(vec![wait(InterruptKind::Sleep, Some(5_000))]);
    let deadline = RunStatus::Interrupted(vec![wait(InterruptKind::Input, Some(9_000))]);
    let open = RunStatus::Interrupted(vec![wait(InterruptKind::Input, None)]);
    for (run, status) in [("w1", &sleeping), ("w2", &deadline), ("w3", &open)] {
        store.save_checkpoint(&checkpoint(run, 0, 0), &[], &RunStatus::Running, 0).await.unwrap();
        assert_eq!(
            store.set_status(run, status, &[], Some(b"pending"), 1).await.unwrap(),
            CommitOutcome::Committed { version: 2 }
        );
    }
    store = b.reopen(store).await;
    let listed = |kind| {
        let store = store.clone();
        async move {
            let runs = store.list_runs(&RunFilter::all().status(kind)).await.unwrap();
            runs.into_iter().map(|i| (i.run_id, i.status)).collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(StatusKind::Waiting).await, [("w1".to_owned(), sleeping.clone())]);
    assert_eq!(
        listed(StatusKind::Interrupted).await,
        [("w2".to_owned(), deadline.clone()), ("w3".to_owned(), open.clone())]
    );
    let w1 = store.run_info("w1").await.unwrap().unwrap();
    assert_eq!((w1.status.wake_at_ms(), w1.version), (Some(5_000), 2));
    assert_eq!(store.run_info("w3").await.unwrap().unwrap().status.wake_at_ms(), None);
    // Woken: the next commit makes it a running run again.
    store.save_checkpoint(&checkpoint("w1", 1, 1), &[], &RunStatus::Running, 2).await.unwrap();
    store = b.reopen(store).await;
    assert!(store.list_runs(&RunFilter::all().status(StatusKind::Waiting)).await.unwrap().is_empty());
    assert_eq!(store.pending("w1").await.unwrap(), None);
}

/// A run's mailbox: a send to a run the store does not have is refused; sends get their run's
/// sequence numbers in order (20 at once get 20 distinct ones), a dedupe key sent twice is one message;
/// claims take the oldest unclaimed message of their topic, the same claimer is given its message again
/// (after a restart too), a rejected message is never given again; all of it survives a restart.
pub async fn mailboxes_deliver_each_message_once<B: Backend>(b: &B) {
    use crate::mailbox::{MailboxOp, MailboxReply, MessageState};
    let send = |topic: &str, key: Option<&str>, n: i64| MailboxOp::Send {
        topic: topic.into(),
        dedupe_key: key.map(str::to_owned),
        payload: n.into(),
        sent_at_ms: 7,
    };
    let claim = |topic: &str, by: &str| MailboxOp::Claim { topic: topic.into(), claimer: by.into() };
    let mut store = b.open().await;
    assert_eq!(store.mailbox_op("m", send("paid", None, 0)).await.unwrap(), MailboxReply::NoSuchRun);
    assert!(store.mailbox("m").await.unwrap().messages.is_empty());
    store.save_checkpoint(&checkpoint("m", 0, 0), &[], &RunStatus::Running, 0).await.unwrap();
    let sends = (0..20).map(|i| {
        let store = store.clone();
        let topic = if i % 2 == 0 { "paid" } else { "shipped" };
        let op = send(topic, Some(&format!("k{i}")), i);
        async move { store.mailbox_op("m", op).await.unwrap() }
    });
    let mut seqs: Vec<u64> = futures_join(sends)
        .await
        .into_iter()
        .map(|r| match r {
            MailboxReply::Sent { seq } => seq,
            other => panic!("{other:?}"),
        })
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..20).collect::<Vec<_>>());
    let again = store.mailbox_op("m", send("paid", Some("k4"), 99)).await.unwrap();
    let first_k4 = store
        .mailbox("m")
        .await
        .unwrap()
        .messages
        .iter()
        .find(|m| m.dedupe_key.as_deref() == Some("k4"))
        .unwrap()
        .seq;
    assert_eq!(again, MailboxReply::Duplicate { seq: first_k4 });
    store = b.reopen(store).await;
    let paid: Vec<u64> = store
        .mailbox("m")
        .await
        .unwrap()
        .messages
        .iter()
        .filter(|m| m.topic == "paid")
        .map(|m| m.seq)
        .collect();
    assert_eq!(paid.len(), 10);
    let claimed = |r: MailboxReply| match r {
        MailboxReply::Claimed(m) => m.map(|m| m.seq),
        other => panic!("{other:?}"),
    };
    assert_eq!(claimed(store.mailbox_op("m", claim("paid", "1:p#0")).await.unwrap()), Some(paid[0]));
    store = b.reopen(store).await;
    assert_eq!(
        claimed(store.mailbox_op("m", claim("paid", "1:p#0")).await.unwrap()),
        Some(paid[0]),
        "given again"
    );
    assert_eq!(claimed(store.mailbox_op("m", claim("paid", "1:q#0")).await.unwrap()), Some(paid[1]));
    let reject = MailboxOp::Reject { seq: paid[1], claimer: "1:q#0".into(), detail: "not a receipt".into() };
    assert_eq!(store.mailbox_op("m", reject).await.unwrap(), MailboxReply::Rejected(true));
    store = b.reopen(store).await;
    assert_eq!(
        claimed(store.mailbox_op("m", claim("paid", "1:q#0")).await.unwrap()),
        Some(paid[2]),
        "the next one"
    );
    assert_eq!(claimed(store.mailbox_op("m", claim("none", "1:q#1")).await.unwrap()), None);
    let kept = store.mailbox("m").await.unwrap();
    assert_eq!(kept.messages.len(), 20, "nothing lost");
    assert!(matches!(&kept.messages.iter().find(|m| m.seq == paid[1]).unwrap().state,
        MessageState::Rejected { detail, .. } if detail == "not a receipt"));
}

/// Schedules: a put is checked against the version its writer read (of 10 writers reading one
/// version, one wins), a delete removes the row, and the rows survive a restart, listed in name order.
pub async fn schedules_are_written_under_a_version_check<B: Backend>(b: &B) {
    use crate::schedule::{Missed, Schedule, ScheduleOp, ScheduleReply};
    let schedule = |name: &str, next: u64| Schedule {
        name: name.into(),
        graph_fingerprint: "fp".into(),
        spec: "@every 1h".into(),
        input: serde_json::json!({"n": 1}),
        missed: Missed::CatchUpOne,
        paused: false,
        next_fire_ms: next,
        updated_ms: 5,
        version: 0,
    };
    let put = |s: Schedule, expected| ScheduleOp::Put { schedule: Box::new(s), expected_version: expected };
    let mut store = b.open().await;
    assert!(store.schedules().await.unwrap().is_empty());
    for name in ["nightly", "hourly"] {
        assert_eq!(
            store.schedule_op(name, put(schedule(name, 100), Some(0))).await.unwrap(),
            ScheduleReply::Written { version: 1 }
        );
    }
    assert!(matches!(
        store.schedule_op("hourly", put(schedule("hourly", 1), Some(0))).await.unwrap(),
        ScheduleReply::Conflict(Some(s)) if s.version == 1 && s.next_fire_ms == 100
    ));
    let racers = (0..10u64).map(|i| {
        let store = store.clone();
        let op = put(schedule("nightly", 200 + i), Some(1));
        async move { store.schedule_op("nightly", op).await.unwrap() }
    });
    let won =
        futures_join(racers).await.into_iter().filter(|r| matches!(r, ScheduleReply::Written { .. })).count();
    assert_eq!(won, 1, "one of the writers that read version 1");
    store = b.reopen(store).await;
    let all = store.schedules().await.unwrap();
    assert_eq!(
        all.iter().map(|s| (s.name.as_str(), s.version)).collect::<Vec<_>>(),
        [("hourly", 1), ("nightly", 2)]
    );
    assert!(all[1].next_fire_ms >= 200);
    assert_eq!(all[0], Schedule { version: 1, ..schedule("hourly", 100) });
    assert_eq!(store.schedule_op("hourly", ScheduleOp::Delete).await.unwrap(), ScheduleReply::Deleted(true));
    assert_eq!(store.schedule_op("hourly", ScheduleOp::Delete).await.unwrap(), ScheduleReply::Deleted(false));
    store = b.reopen(store).await;
    assert_eq!(store.schedules().await.unwrap().len(), 1);
}

/// Awaits every future (the suite does not depend on a futures crate).
async fn futures_join<F: std::future::Future + Send + 'static>(
    fs: impl IntoIterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = fs.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("a task of the suite panicked"));
    }
    out
}

/// One operation of the model test (`run`, `step`, `value` pick small ids so operations collide).
#[derive(Debug, Clone)]
#[allow(missing_docs)] // the fields are named by what they are
pub enum Op {
    /// Commit `(run, step, value)` expecting `version` (`None`: the run's current version, so most
    /// commits are valid ones); stored as deltas over `base` when given.
    Save { run: u8, step: u8, value: u8, version: Option<u8>, base: Option<u8> },
    /// Set a status.
    Status { run: u8, cancelled: bool, version: u8 },
    /// Load one checkpoint.
    Load { run: u8, step: u8 },
    /// Load the latest.
    Latest { run: u8 },
    /// Prune.
    Prune { run: u8, keep: u8 },
    /// Restart.
    Reopen,
}

/// Applies `ops` to the backend and to a [`MemoryStore`] (the model) and asserts every
/// observable result agrees.
pub async fn matches_the_model<B: Backend>(b: &B, ops: &[Op]) {
    let model = MemoryStore::new();
    let mut store = b.open().await;
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    for op in ops {
        match *op {
            Op::Save { run, step, value, version, base } => {
                let mut cp = checkpoint(&format!("r{run}"), step as u64, value as u64);
                if let Some(base) = base.filter(|b| *b < step) {
                    cp.state = StateRepr::Delta { base: base as u64, deltas: vec![b'['; value as usize + 1] };
                }
                let version = match version {
                    Some(v) => v as u64,
                    None => model.run_info(&cp.run_id).await.unwrap().map_or(0, |i| i.version),
                };
                let a = store.save_checkpoint(&cp, &[], &RunStatus::Running, version).await.unwrap();
                let m = model.save_checkpoint(&cp, &[], &RunStatus::Running, version).await.unwrap();
                assert_eq!(a, m, "{op:?}");
                *seen.entry(cp.run_id.to_string()).or_default() += 1;
            }
            Op::Status { run, cancelled, version } => {
                let status = if cancelled { RunStatus::Cancelled } else { RunStatus::Running };
                let run = format!("r{run}");
                let a = store.set_status(&run, &status, &[], None, version as u64).await.unwrap();
                let m = model.set_status(&run, &status, &[], None, version as u64).await.unwrap();
                assert_eq!(a, m, "{op:?}");
            }
            Op::Load { run, step } => {
                let run = format!("r{run}");
                assert_eq!(
                    store.load_checkpoint(&run, step as u64).await.unwrap(),
                    model.load_checkpoint(&run, step as u64).await.unwrap(),
                    "{op:?}"
                );
            }
            Op::Latest { run } => {
                let run = format!("r{run}");
                assert_eq!(store.latest(&run).await.unwrap(), model.latest(&run).await.unwrap(), "{op:?}");
            }
            Op::Prune { run, keep } => {
                let run = format!("r{run}");
                assert_eq!(
                    store.prune(&run, keep as usize).await.unwrap(),
                    model.prune(&run, keep as usize).await.unwrap(),
                    "{op:?}"
                );
            }
            Op::Reopen => store = b.reopen(store).await,
        }
    }
    for run in seen.keys() {
        assert_eq!(store.run_info(run).await.unwrap(), model.run_info(run).await.unwrap());
        assert_eq!(store.history(run).await.unwrap(), model.history(run).await.unwrap());
    }
    assert_eq!(
        store.list_runs(&RunFilter::all()).await.unwrap(),
        model.list_runs(&RunFilter::all()).await.unwrap()
    );
}

/// Lease and fencing cases, for stores that lease runs to workers ([`crate::lease::LeaseStore`]: the
/// server stores).
pub mod leases {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use super::{
        Backend, CommitOutcome, EffectOutcome, EffectState, InterruptKind, RunStatus, Store, checkpoint,
        effect, wait,
    };
    use crate::lease::{Lease, LeaseStore};

    /// Commits step 0 of each run (status `Running`: runnable).
    async fn submitted<S: Store>(store: &S, runs: &[String]) {
        for run in runs {
            let cp = checkpoint(run, 0, 0);
            assert_eq!(
                store.save_checkpoint(&cp, &[], &RunStatus::Running, 0).await.unwrap(),
                CommitOutcome::Committed { version: 1 }
            );
        }
    }

    /// Eight claimers race for 20 runs, each asking for all of them: no run is taken twice, and with at
    /// most three claims after them (a run every claimer skipped is the next claim's) every run is taken
    /// exactly once, with token 1; while the leases live, nobody claims anything more. Runs that are not runnable
    /// (completed, cancelled) are never claimed.
    pub async fn concurrent_claimers_one_winner<B: Backend>(b: &B)
    where
        B::Store: LeaseStore,
    {
        let store = b.open().await;
        let runs: Vec<String> = (0..20).map(|i| format!("c{i:02}")).collect();
        submitted(&store, &runs).await;
        submitted(&store, &["done".to_owned(), "off".to_owned()]).await;
        store.set_status("done", &RunStatus::Completed, &[], None, 1).await.unwrap();
        store.set_status("off", &RunStatus::Cancelled, &[], None, 1).await.unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|w| {
                let store = store.clone();
                tokio::spawn(
                    async move { store.claim(&format!("w{w}"), "fp", 20, Duration::from_secs(60)).await },
                )
            })
            .collect();
        let mut taken = Vec::new();
        for t in tasks {
            taken.extend(t.await.unwrap().expect("claim"));
        }
        // A claim skips the rows it finds locked (SKIP LOCKED), and MariaDB's scan can pass over a row
        // another claimer's scan held for a moment and let go: a run no one took then is the next
        // claim's (workers claim again and again). Never is a run taken twice.
        for _ in 0..3 {
            if taken.len() >= runs.len() {
                break;
            }
            taken.extend(store.claim("again", "fp", 20, Duration::from_secs(60)).await.unwrap());
        }
        let ids: BTreeSet<&str> = taken.iter().map(|l| l.run_id.as_str()).collect();
        assert_eq!(taken.len(), 20, "every run claimed once: {taken:?}");
        assert_eq!(ids, runs.iter().map(String::as_str).collect(), "exactly the runnable runs");
        assert!(taken.iter().all(|l| l.token == 1), "first claims have token 1: {taken:?}");
        for l in &taken {
            let (held, live) = store.lease_of(&l.run_id).await.unwrap().expect("a lease row");
            assert!(live && held == *l, "the database has {held:?} (live {live}) for {l:?}");
        }
        assert!(
            store.claim("late", "fp", 100, Duration::from_secs(60)).await.unwrap().is_empty(),
            "all leased"
        );
    }

    /// A claim takes the runs of the claimer's graph only: runs of another graph ahead of them in run-id
    /// order take none of its `n` places and are never leased to it (released runs included); each
    /// graph's claimer gets its own runs.
    pub async fn claims_take_their_graphs_runs<B: Backend>(b: &B)
    where
        B::Store: LeaseStore,
    {
        let store = b.open().await;
        let other: Vec<String> = (0..5).map(|i| format!("a{i}")).collect();
        for run in &other {
            let mut cp = checkpoint(run, 0, 0);
            cp.graph_fingerprint = "other".into();
            assert_eq!(
                store.save_checkpoint(&cp, &[], &RunStatus::Running, 0).await.unwrap(),
                CommitOutcome::Committed { version: 1 }
            );
        }
        let ours: Vec<String> = (0..3).map(|i| format!("b{i}")).collect();
        submitted(&store, &ours).await;
        let long = Duration::from_secs(60);
        let ids = |leases: &[Lease]| leases.iter().map(|l| l.run_id.clone()).collect::<Vec<_>>();
        let taken = store.claim("w", "fp", 3, long).await.unwrap();
        assert_eq!(ids(&taken), ours, "this graph's runs, all in one claim");
        assert!(store.claim("w", "fp", 10, long).await.unwrap().is_empty(), "no other graph's run");
        let theirs = store.claim("v", "other", 10, long).await.unwrap();
        assert_eq!(ids(&theirs), other);
        // A released run goes back to its own graph's claimers only.
        assert!(store.release(&taken[1]).await.unwrap());
        assert!(store.claim("v", "other", 10, long).await.unwrap().is_empty(), "not to another graph");
        let again = store.claim("x", "fp", 10, long).await.unwrap();
        assert_eq!((ids(&again), again[0].token), (vec!["b1".to_owned()], 2));
    }

    /// A run moved to another graph by a commit (a migration's) is claimed by that graph's claimers
    /// only, from the moment the commit is written.
    pub async fn claims_follow_a_moved_run<B: Backend>(b: &B)
    where
        B::Store: LeaseStore,
    {
        let store = b.open().await;
        let long = Duration::from_secs(60);
        submitted(&store, &["m0".to_owned(), "m1".to_owned()]).await;
        let mut cp = checkpoint("m1", 1, 1);
        cp.graph_fingerprint = "v2:fp".into();
        let o = store.save_checkpoint(&cp, &[], &RunStatus::Running, 1).await.unwrap();
        assert_eq!(o, CommitOutcome::Committed { version: 2 });
        let ids = |leases: &[Lease]| leases.iter().map(|l| l.run_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&store.claim("w", "fp", 10, long).await.unwrap()), vec!["m0".to_owned()]);
        assert_eq!(ids(&store.claim("w", "v2:fp", 10, long).await.unwrap()), vec!["m1".to_owned()]);
    }

    /// A claim takes parked runs of its graph once they are due, and not before: a sleep's end or a
    /// question's deadline at or before the claim's time (`claim_due_by`; `claim`: the database's
    /// clock); a question without a deadline never. A run answered meanwhile is a running run.
    pub async fn claims_take_due_parked_runs<B: Backend>(b: &B)
    where
        B::Store: LeaseStore,
    {
        let store = b.open().await;
        let long = Duration::from_secs(60);
        let statuses = [
            ("p1", RunStatus::Waiting(vec![wait(InterruptKind::Sleep, Some(1_000))])),
            ("p2", RunStatus::Interrupted(vec![wait(InterruptKind::Input, Some(2_000))])),
            ("p3", RunStatus::Interrupted(vec![wait(InterruptKind::Input, None)])),
            // Due in a year of the database's clock.
            ("p4", RunStatus::Waiting(vec![wait(InterruptKind::Sleep, Some(4_000_000_000_000))])),
        ];
        for (run, status) in &statuses {
            store.save_checkpoint(&checkpoint(run, 0, 0), &[], &RunStatus::Running, 0).await.unwrap();
            store.set_status(run, status, &[], None, 1).await.unwrap();
        }
        let ids = |leases: &[Lease]| leases.iter().map(|l| l.run_id.clone()).collect::<Vec<_>>();
        assert!(store.claim_due_by("w", "fp", 10, long, Some(999)).await.unwrap().is_empty(), "none due");
        let first = store.claim_due_by("w", "fp", 10, long, Some(1_500)).await.unwrap();
        assert_eq!(ids(&first), ["p1"]);
        // By the database's clock (today): the two early ones are due, the far one is not; p1 is held.
        let second = store.claim("v", "fp", 10, long).await.unwrap();
        assert_eq!(ids(&second), ["p2"]);
        assert!(
            store
                .claim_due_by("x", "fp", 10, long, Some(u64::MAX / 2))
                .await
                .unwrap()
                .iter()
                .all(|l| l.run_id == "p4")
        );
        assert!(store.claim_due_by("y", "other", 10, long, Some(u64::MAX / 2)).await.unwrap().is_empty());
    }

    /// A commit under a lease that was taken over is `Fenced` and writes nothing (checkpoint, run row);
    /// so is a status update, and a commit under an expired lease nobody took over, under a lease of
    /// another run, or under a lease the run never had. The new holder commits; unleased commits are not
    /// checked.
    pub async fn stale_token_is_fenced<B: Backend>(b: &B)
    where
        B::Store: LeaseStore,
    {
        let store = b.open().await;
        submitted(&store, &["f".to_owned(), "g".to_owned()]).await;
        let short = Duration::from_millis(600);
        let a = store.claim("a", "fp", 1, short).await.unwrap();
        assert_eq!(a.len(), 1);
        let a = a.into_iter().next().unwrap();
        assert_eq!(a.run_id, "f");
        let by_a = store.leased(a.clone());
        assert_eq!(
            by_a.save_checkpoint(&checkpoint("f", 1, 1), &[], &RunStatus::Running, 1).await.unwrap(),
            CommitOutcome::Committed { version: 2 },
            "the holder commits"
        );
        // A's lease of `f` does not cover `g`.
        assert_eq!(
            by_a.save_checkpoint(&checkpoint("g", 1, 1), &[], &RunStatus::Running, 1).await.unwrap(),
            CommitOutcome::Fenced
        );
        // Expired, not yet taken over: fenced already.
        tokio::time::sleep(short + Duration::from_millis(300)).await;
        assert_eq!(
            by_a.save_checkpoint(&checkpoint("f", 2, 2), &[], &RunStatus::Running, 2).await.unwrap(),
            CommitOutcome::Fenced,
            "an expired lease commits nothing"
        );
        assert!(!store.heartbeat(&a, short).await.unwrap(), "an expired lease is not extended");
        // B takes it over.
        let b_leases = store.claim("b", "fp", 10, Duration::from_secs(60)).await.unwrap();
        let b_lease = b_leases.iter().find(|l| l.run_id == "f").expect("f taken over").clone();
        assert_eq!(b_lease.token, 2, "the token grows with the claim");
        let by_b = store.leased(b_lease.clone());
        for (step, value) in [(2, 9), (2, 2)] {
            assert_eq!(
                by_a.save_checkpoint(&checkpoint("f", step, value), &[], &RunStatus::Running, 2)
                    .await
                    .unwrap(),
                CommitOutcome::Fenced,
                "the old holder is fenced"
            );
        }
        assert_eq!(
            by_a.set_status("f", &RunStatus::Cancelled, &[], None, 2).await.unwrap(),
            CommitOutcome::Fenced
        );
        // A lease with the right owner and a stale token is fenced too.
        let forged = store.leased(Lease::new("f", "b", 1));
        assert_eq!(
            forged.save_checkpoint(&checkpoint("f", 2, 2), &[], &RunStatus::Running, 2).await.unwrap(),
            CommitOutcome::Fenced
        );
        // Nothing of the fenced writes is visible.
        assert_eq!(store.history("f").await.unwrap().len(), 2);
        assert!(store.load_checkpoint("f", 2).await.unwrap().is_none());
        let info = store.run_info("f").await.unwrap().unwrap();
        assert_eq!((info.version, info.status), (2, RunStatus::Running));
        assert!(!store.release(&a).await.unwrap(), "the old holder cannot release the new lease");
        assert_eq!(store.lease_of("f").await.unwrap().unwrap(), (b_lease.clone(), true));
        // The new holder commits.
        assert_eq!(
            by_b.save_checkpoint(&checkpoint("f", 2, 2), &[], &RunStatus::Running, 2).await.unwrap(),
            CommitOutcome::Committed { version: 3 }
        );
        // A run never claimed: a leased commit is fenced, an unleased one commits as always.
        submitted(&store, &["h".to_owned()]).await;
        assert_eq!(
            store
                .leased(Lease::new("h", "a", 1))
                .save_checkpoint(&checkpoint("h", 1, 1), &[], &RunStatus::Running, 1)
                .await
                .unwrap(),
            CommitOutcome::Fenced
        );
        assert_eq!(
            store.save_checkpoint(&checkpoint("h", 1, 1), &[], &RunStatus::Running, 1).await.unwrap(),
            CommitOutcome::Committed { version: 2 }
        );
    }

    /// Effect journal writes under a lease are fenced as commits are: once the lease is taken over, the
    /// old holder's first write (`Started`, before a non-idempotent call) and its completion are
    /// `Fenced` and write nothing; the new holder writes; unleased writes are not checked.
    pub async fn effect_writes_under_a_lost_lease_are_fenced<B: Backend>(b: &B)
    where
        B::Store: LeaseStore,
    {
        let store = b.open().await;
        submitted(&store, &["e".to_owned()]).await;
        let a = store.claim("a", "fp", 1, Duration::from_secs(60)).await.unwrap().pop().expect("claimed");
        let by_a = store.leased(a.clone());
        let first = effect("e", 1, 0, EffectState::Started);
        assert_eq!(by_a.put_effect(&first, None).await.unwrap(), EffectOutcome::Written, "the holder writes");
        // Released and claimed by B: A's lease is gone.
        assert!(store.release(&a).await.unwrap());
        let b_lease = store.claim("b", "fp", 1, Duration::from_secs(60)).await.unwrap().pop().expect("taken");
        let second = effect("e", 1, 1, EffectState::Started);
        assert_eq!(by_a.put_effect(&second, None).await.unwrap(), EffectOutcome::Fenced);
        let done = super::EffectRecord {
            state: EffectState::Completed { response: serde_json::json!("ok") },
            ..first.clone()
        };
        assert_eq!(by_a.put_effect(&done, Some(&EffectState::Started)).await.unwrap(), EffectOutcome::Fenced);
        // Nothing of the fenced writes is there.
        assert_eq!(store.load_effect(&second.key).await.unwrap(), None);
        assert_eq!(store.load_effect(&first.key).await.unwrap(), Some(first.clone()));
        // A lease of another run fences too.
        let elsewhere = effect("other", 0, 0, EffectState::Started);
        assert_eq!(
            store.leased(b_lease.clone()).put_effect(&elsewhere, None).await.unwrap(),
            EffectOutcome::Fenced
        );
        // The new holder writes; so does an unleased writer.
        let by_b = store.leased(b_lease);
        assert_eq!(
            by_b.put_effect(&done, Some(&EffectState::Started)).await.unwrap(),
            EffectOutcome::Written
        );
        assert_eq!(store.put_effect(&second, None).await.unwrap(), EffectOutcome::Written);
        assert_eq!(store.load_effect(&done.key).await.unwrap(), Some(done));
    }

    /// A lease is taken over only after it expires (database time) unless it is released: the
    /// heartbeat keeps it past its first length; a released lease is claimed at once; the token grows
    /// by one per claim.
    pub async fn takeover_after_expiry<B: Backend>(b: &B)
    where
        B::Store: LeaseStore,
    {
        let store = b.open().await;
        submitted(&store, &["t".to_owned()]).await;
        let length = Duration::from_millis(800);
        let a = store.claim("a", "fp", 1, length).await.unwrap().pop().expect("claimed");
        assert!(store.claim("b", "fp", 1, length).await.unwrap().is_empty(), "a live lease is not taken");
        // Heartbeats carry it past its first expiry.
        let mut last_beat = std::time::Instant::now();
        for _ in 0..4 {
            tokio::time::sleep(length / 3).await;
            last_beat = std::time::Instant::now();
            assert!(store.heartbeat(&a, length).await.unwrap(), "the holder extends its lease");
        }
        assert!(
            store.claim("b", "fp", 1, length).await.unwrap().is_empty(),
            "an extended lease is not taken"
        );
        // No more heartbeats: it expires and B takes it over.
        let started = std::time::Instant::now();
        let b_lease = loop {
            if let Some(l) = store.claim("b", "fp", 1, Duration::from_secs(60)).await.unwrap().pop() {
                break l;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "never taken over");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // The last heartbeat set the expiry to `length` after the moment the database ran it, which came
        // after `last_beat`: no claim can succeed sooner (a tenth spared for the database's wall clock).
        // (Measured from `started` instead, after one more claim, the bound would depend on how long
        // that claim took on a loaded machine.)
        let since_beat = last_beat.elapsed();
        assert!(
            since_beat >= length * 9 / 10,
            "taken over before expiry: {since_beat:?} after the last heartbeat"
        );
        assert_eq!((b_lease.owner.as_str(), b_lease.token), ("b", 2));
        assert!(!store.heartbeat(&a, length).await.unwrap(), "the old holder's heartbeat fails");
        // A release hands it over at once.
        assert!(store.release(&b_lease).await.unwrap());
        let c =
            store.claim("c", "fp", 1, Duration::from_secs(60)).await.unwrap().pop().expect("claimed at once");
        assert_eq!((c.owner.as_str(), c.token), ("c", 3));
        // A completed run is not claimed again, even with its lease released.
        let by_c = store.leased(c.clone());
        assert_eq!(
            by_c.save_checkpoint(&checkpoint("t", 1, 1), &[], &RunStatus::Completed, 1).await.unwrap(),
            CommitOutcome::Committed { version: 2 }
        );
        assert!(store.release(&c).await.unwrap());
        assert!(store.claim("d", "fp", 1, Duration::from_secs(60)).await.unwrap().is_empty());
    }
}
