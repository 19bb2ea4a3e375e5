//! The process of the damage tests (`tests/tests/faults/faults_damage.rs`): opens a store one of whose files
//! was damaged and checks every acknowledged commit, in a process of its own so that a hang or a panic
//! is seen as such.
//!
//! `damage_verify <store dir | sqlite:<database file>> <spec file>`. The spec has one line per run, `run <id> <last acknowledged
//! step | none>`, and one per step of the reference history, `ref <id> <step> <idempotency key> <state
//! hash>` (see [`graph_tests::faults::Reference`]). The first line of stdout that starts with one of
//! these words is the verdict (exit status 0 for all of them):
//!
//! - `open-corrupted <Display>`: `open` returned `StoreError::Corrupted`;
//! - `open-error <Display>`: `open` failed otherwise;
//! - `read-corrupted <run> <step> <Display>`: a read (or, later, the resume) returned `Corrupted` or
//!   `CorruptedEvent`, or the engine found the run's event log broken (`ExecutionCorrupted`);
//! - `read-error <run> <step> <Display>`: a read failed otherwise;
//! - `lost <run> <what>`: an acknowledged step is missing, the run is behind it or is not listed (silent
//!   loss);
//! - `mismatch <run> <what>`: the store returned something other than what was committed;
//! - `resume-error <run> <Display>`: the checks passed but resuming failed otherwise;
//! - `verify-corrupted <Display> (the reads: <lost or mismatch line>)`: the reads ended with `lost` or
//!   `mismatch`, and the engine's `verify` of a run (`verify_run`: its event log against its stored
//!   checkpoints) then returned `Corrupted` or `ExecutionCorrupted`: damage the reads missed and an
//!   operator's `graphctl verify` finds;
//! - `integrity-corrupted <Display> (the reads: <lost or mismatch line>)`: as `verify-corrupted`, but
//!   every run verified and the store's whole-store check (`Store::check_integrity`) returned
//!   `Corrupted`;
//! - `ok`: every acknowledged step (and every later one present) rebuilt through the engine with the
//!   reference's state hash, then every run resumed to completion with exactly the reference history,
//!   which a reopened store still holds.

use std::collections::BTreeMap;
use std::sync::Arc;

use graph_runtime::engine::verify_run;
use graph_runtime::store::{RunFilter, SledStore};
use graph_runtime::{Engine, Error, RunStatus, Store, StoreError};
use graph_tests::faults::{Reference, say, small_options};
use graph_tests::{Trace, crash_graph, state_hash};

struct Spec {
    acked: BTreeMap<String, Option<u64>>,
    refs: BTreeMap<String, Reference>,
}

fn read_spec(path: &str) -> Spec {
    let text = std::fs::read_to_string(path).expect("the spec file");
    let mut spec = Spec { acked: BTreeMap::new(), refs: BTreeMap::new() };
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        match f.as_slice() {
            ["run", id, acked] => {
                spec.acked.insert(id.to_string(), acked.parse().ok());
            }
            ["ref", id, step, key, hash] => {
                let r = spec
                    .refs
                    .entry(id.to_string())
                    .or_insert_with(|| Reference { keys: Vec::new(), states: Vec::new() });
                assert_eq!(r.keys.len().to_string(), *step, "ref lines are in step order");
                r.keys.push(key.to_string());
                r.states.push(hash.to_string());
            }
            _ => panic!("bad spec line {line:?}"),
        }
    }
    spec
}

/// How a check ended, when not with success: the verdict line (printed by `main`).
struct Verdict(String);

fn verdict(line: impl std::fmt::Display) -> Verdict {
    Verdict(line.to_string())
}

fn store_error(run: &str, step: impl std::fmt::Display, e: &StoreError) -> Verdict {
    let text = e.to_string().replace('\n', " ");
    match e {
        StoreError::Corrupted { .. } | StoreError::CorruptedEvent { .. } => {
            verdict(format_args!("read-corrupted {run} {step} {text}"))
        }
        _ => verdict(format_args!("read-error {run} {step} {text}")),
    }
}

fn engine_error(run: &str, step: impl std::fmt::Display, e: &Error) -> Verdict {
    match e {
        Error::Store(e) => store_error(run, step, e),
        // The run's event log does not verify (an event changed, removed or cut off): damage, typed.
        Error::ExecutionCorrupted { .. } => verdict(format_args!("read-corrupted {run} {step} {e}")),
        other => verdict(format_args!("read-error {run} {step} {other}")),
    }
}

async fn check_run(
    store: &dyn Store,
    engine: &Engine<Trace>,
    run: &str,
    acked: Option<u64>,
    reference: &Reference,
) -> Result<(), Verdict> {
    let info = store.run_info(run).await.map_err(|e| store_error(run, "row", &e))?;
    let Some(info) = info else {
        return match acked {
            Some(a) => Err(verdict(format_args!("lost {run} the run is gone, step {a} was acknowledged"))),
            None => Ok(()),
        };
    };
    // Listed, by status too (a damaged index can hide a run from either list).
    for filter in [RunFilter::all(), RunFilter::all().status(info.status.clone())] {
        let listed = store.list_runs(&filter).await.map_err(|e| store_error(run, "list", &e))?;
        if !listed.iter().any(|r| r.run_id == run) {
            let word = if acked.is_some() { "lost" } else { "mismatch" };
            return Err(verdict(format_args!("{word} {run} is not listed by {filter:?}")));
        }
    }
    let latest = info.latest_step;
    if let Some(a) = acked
        && latest < a
    {
        return Err(verdict(format_args!(
            "lost {run} the run is at step {latest}, step {a} was acknowledged"
        )));
    }
    let last = reference.last_step();
    if latest > last {
        return Err(verdict(format_args!("mismatch {run} latest step {latest} is past the end {last}")));
    }
    if (latest == last) != (info.status == RunStatus::Completed) {
        return Err(verdict(format_args!("mismatch {run} status {:?} at step {latest}", info.status)));
    }
    let history = store.history(run).await.map_err(|e| store_error(run, "history", &e))?;
    let steps: Vec<u64> = history.iter().map(|m| m.step).collect();
    if steps != (0..=latest).collect::<Vec<_>>() {
        let missing: Vec<u64> = (0..=latest).filter(|s| !steps.contains(s)).collect();
        let acked_missing = missing.iter().any(|&s| acked.is_some_and(|a| s <= a));
        let word = if acked_missing { "lost" } else { "mismatch" };
        return Err(verdict(format_args!("{word} {run} steps {missing:?} are missing (history {steps:?})")));
    }
    for m in &history {
        if m.idempotency_key != reference.keys[m.step as usize] {
            return Err(verdict(format_args!("mismatch {run} step {} has another idempotency key", m.step)));
        }
    }
    for step in 0..=latest {
        match engine.state_at(run, step).await {
            Ok(Some(s)) if state_hash(&s) == reference.states[step as usize] => {}
            Ok(Some(_)) => {
                return Err(verdict(format_args!("mismatch {run} the state at step {step} differs")));
            }
            Ok(None) if acked.is_some_and(|a| step <= a) => {
                return Err(verdict(format_args!("lost {run} acknowledged step {step} does not load")));
            }
            Ok(None) => return Err(verdict(format_args!("mismatch {run} listed step {step} does not load"))),
            Err(e) => return Err(engine_error(run, step, &e)),
        }
    }
    Ok(())
}

/// The store `dir` names: a sled folder (with the small log segments of the templates), or
/// `sqlite:<file>`.
fn open(dir: &str) -> Result<Arc<dyn Store>, StoreError> {
    match dir.strip_prefix("sqlite:") {
        #[cfg(feature = "sqlite")]
        Some(file) => Ok(Arc::new(graph_runtime::store::SqliteStore::open(file)?)),
        #[cfg(not(feature = "sqlite"))]
        Some(_) => panic!("damage_verify: graph-tests was built without `sqlite`"),
        None => Ok(Arc::new(SledStore::open_with(dir, small_options())?)),
    }
}

async fn verify(dir: &str, spec: &Spec) -> Result<(), Verdict> {
    let store = match open(dir) {
        Ok(s) => s,
        Err(e @ StoreError::Corrupted { .. }) => return Err(verdict(format_args!("open-corrupted {e}"))),
        Err(e) => return Err(verdict(format_args!("open-error {e}"))),
    };
    let iterations = spec.refs.values().next().expect("a run").last_step() / 3;
    let engine = Engine::builder(crash_graph(iterations)).shared_store(store.clone()).build();
    for (run, acked) in &spec.acked {
        check_run(&*store, &engine, run, *acked, &spec.refs[run]).await?;
    }
    // The store must also go on working: resume every run, then compare whole histories.
    for (run, reference) in &spec.refs {
        let out = match store.run_info(run).await.map_err(|e| store_error(run, "row", &e))? {
            Some(_) => engine.resume(run).await,
            None => engine.run(run, Trace::default()).await,
        };
        match out {
            Ok(o) if o.is_completed() && state_hash(&o.state) == *reference.states.last().unwrap() => {}
            Ok(o) => {
                return Err(verdict(format_args!(
                    "mismatch {run} resumed to step {} with another state",
                    o.steps
                )));
            }
            Err(e @ (Error::Store(StoreError::Corrupted { .. }) | Error::ExecutionCorrupted { .. })) => {
                return Err(engine_error(run, "resume", &e));
            }
            Err(e) => return Err(verdict(format_args!("resume-error {run} {e}"))),
        }
        let keys: Vec<String> = store
            .history(run)
            .await
            .map_err(|e| store_error(run, "history", &e))?
            .into_iter()
            .map(|m| m.idempotency_key)
            .collect();
        if keys != reference.keys {
            return Err(verdict(format_args!(
                "mismatch {run} the resumed history differs from the reference"
            )));
        }
    }
    // And what the resume wrote (into spares, recycled or not) reads back after a reopen.
    drop(engine);
    drop(store);
    let store = match open(dir) {
        Ok(s) => s,
        Err(e) => return Err(verdict(format_args!("resume-error reopen {e}"))),
    };
    for (run, reference) in &spec.refs {
        let history =
            store.history(run).await.map_err(|e| verdict(format_args!("resume-error {run} {e}")))?;
        if history.into_iter().map(|m| m.idempotency_key).collect::<Vec<_>>() != reference.keys {
            return Err(verdict(format_args!("mismatch {run} the history differs after a reopen")));
        }
    }
    Ok(())
}

/// Two of `graphctl verify --all`'s checks on the store `dir` (its third, each run against its status's
/// list, is one of the reads above): the first run whose `verify_run` reports damage
/// (`verify-corrupted`), else the whole-store check's `Corrupted` (`integrity-corrupted`), else `None`.
async fn operators_check(dir: &str, spec: &Spec) -> Option<(&'static str, String)> {
    let store = open(dir).ok()?;
    for run in spec.acked.keys() {
        if let Err(e @ (Error::Store(StoreError::Corrupted { .. }) | Error::ExecutionCorrupted { .. })) =
            verify_run(&*store, run, None).await
        {
            return Some(("verify-corrupted", e.to_string()));
        }
    }
    match store.check_integrity().await {
        Err(e @ StoreError::Corrupted { .. }) => Some(("integrity-corrupted", e.to_string())),
        _ => None,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, spec] = args.as_slice() else {
        eprintln!("usage: damage_verify <store dir> <spec file>");
        std::process::exit(2);
    };
    let spec = read_spec(spec);
    match verify(dir, &spec).await {
        Ok(()) => say("ok"),
        // What the reads missed, an operator's `graphctl verify --all` may find: each run's event log
        // against its checkpoints, then the store's whole-store check (SQLite's `PRAGMA
        // integrity_check`; the sled store has none).
        Err(Verdict(line)) if line.starts_with("lost ") || line.starts_with("mismatch ") => {
            match operators_check(dir, &spec).await {
                Some((word, e)) => {
                    let text = e.replace('\n', " ");
                    say(format_args!("{word} {text} (the reads: {line})"));
                }
                None => say(line),
            }
        }
        Err(Verdict(line)) => say(line),
    }
}
