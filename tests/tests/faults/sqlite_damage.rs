//! Damaged files of a SQLite store (feature `sqlite`), as `faults_damage.rs` damages a sled store's.
//! Template stores are made by a child process (`fault_child sqlite:<file>`) running four concurrent
//! runs: SIGKILLed at a random moment (the database file, its write-ahead log and the log's index, as a
//! crash leaves them), or left to finish and close cleanly (the database file alone: the close
//! checkpoints the log into it and removes it). Each trial copies a template, damages ONE file (byte
//! flips, a zeroed range or a truncation, at a random offset: half of them inside the file's non-zero
//! bytes) and opens and checks the copy in a child process (`damage_verify`) with a timeout. Outcomes:
//!
//! - (a) every acknowledged commit is there, its state rebuilt through the engine with the reference's
//!   hash, and the runs resume to exactly the reference history;
//! - (b) a typed `Corrupted` (at open or at a read) whose message names the database (its file or its
//!   log) or the run and step of a damaged record, or the engine's `ExecutionCorrupted` naming the run
//!   whose event log no longer verifies (rows a damaged leaf lost without SQLite noticing); or, when
//!   the reads missed the damage (a loss or a wrong answer, below), what an operator's `graphctl verify
//!   --all` finds run after them, each counted apart: the engine's `verify` of each run (its event log
//!   against its stored checkpoints) reporting `Corrupted` or `ExecutionCorrupted`, else `Corrupted`
//!   from the store's whole-store check (`Store::check_integrity`, `PRAGMA integrity_check`);
//! - (c) anything else — another error, a wrong state, a hang, a panic — is a failure;
//! - (d) silent loss: an acknowledged step is missing, a run is behind it, or a run is not listed by
//!   `list_runs` (all runs, or those of its status). Damage confined to the
//!   log's last commit group reads as a torn write, the end of the log ("torn-tail-like"), and damage
//!   over the last few groups with nothing intact after them as the same, widened ("tail-suffix"):
//!   counted apart. Any other loss fails the test.
//!
//! Which groups a damage to the log changed is found by comparing the damaged log with the template's,
//! group by group, over the groups SQLite reads from the template's (`sqlite_log_groups`).
//!
//! The random seed is printed; `GRAPH_FAULT_SEED=<n>` replays the damage of a run of the test, and
//! `GRAPH_FAULT_VERBOSE=1` prints every trial.
#![cfg(feature = "sqlite")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use graph_runtime::rand_chacha::ChaCha8Rng;
use graph_runtime::rand_core::SeedableRng;
use graph_runtime::store::conformance::sqlite_log_groups;
use graph_tests::damage::{
    Counts, Tail, make_template, pick_damage, references, scratch, seed, tail, templates, verify,
};
use graph_tests::faults::Reference;

const RUNS: usize = 4;
const ITERATIONS: u64 = 30;
const TRIALS: usize = 180;
const VERIFIER: &str = env!("CARGO_BIN_EXE_damage_verify");
/// The database file's name in a template's folder.
const FILE: &str = "store.sqlite";

/// What a file of a SQLite store is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// The database file.
    Database,
    /// `<file>-wal`, the write-ahead log.
    Log,
    /// `<file>-shm`, the log's index.
    Index,
}

/// The files of the store in `dir` that exist, with their kinds.
fn files(dir: &Path) -> Vec<(Kind, PathBuf)> {
    [(Kind::Database, ""), (Kind::Log, "-wal"), (Kind::Index, "-shm")]
        .into_iter()
        .map(|(k, suffix)| (k, PathBuf::from(format!("{FILE}{suffix}"))))
        .filter(|(_, rel)| dir.join(rel).exists())
        .collect()
}

/// A store to damage copies of, with what its child saw acknowledged.
struct Template {
    name: String,
    /// The folder holding the store's files.
    dir: tempfile::TempDir,
    spec: PathBuf,
    acked: BTreeMap<String, u64>,
    files: Vec<(Kind, PathBuf)>,
}

impl Template {
    /// Copies the store's files into `to`.
    fn copy_to(&self, to: &Path) {
        for (_, rel) in &self.files {
            std::fs::copy(self.dir.path().join(rel), to.join(rel)).unwrap();
        }
    }
}

/// The argument that names the store in `dir` to the children.
fn store_arg(dir: &Path) -> String {
    format!("sqlite:{}", dir.join(FILE).display())
}

/// A template: the child killed after `kill_after` (None: it runs to the end and closes the store).
fn template(
    name: String,
    kill_after: Option<Duration>,
    refs: &BTreeMap<String, Reference>,
) -> Option<Template> {
    let dir = scratch();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fault_child"));
    child.arg(store_arg(dir.path())).arg(RUNS.to_string()).arg(ITERATIONS.to_string());
    child.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
    let made = make_template(child, &name, kill_after, refs, dir.path())?;
    let files = files(dir.path());
    if !files.iter().any(|(k, _)| *k == Kind::Database) {
        return None; // killed before the store created its file
    }
    Some(Template { name, dir, spec: made.spec, acked: made.acked, files })
}

#[test]
fn damaged_sqlite_files_are_reported_or_harmless_never_silently_lost() {
    let started = Instant::now();
    let mut rng = ChaCha8Rng::seed_from_u64(seed());
    let refs = references(RUNS, ITERATIONS);
    // How long an undisturbed child takes, to kill the others at moments spread over their runs.
    let templates = templates(|name, kill_after| template(name, kill_after, &refs), &mut rng);
    for t in &templates {
        let kinds: Vec<Kind> = t.files.iter().map(|(k, _)| *k).collect();
        let acks: u64 = t.acked.values().map(|s| s + 1).sum();
        let groups = std::fs::read(t.dir.path().join(format!("{FILE}-wal")))
            .map_or(0, |log| sqlite_log_groups(&log).len());
        println!(
            "template `{}`: {acks} acknowledged steps, files {kinds:?}, {groups} groups in the log",
            t.name
        );
        // The undamaged template must verify: else the harness, not the store, is wrong.
        let copy = scratch();
        t.copy_to(copy.path());
        let (line, _) = verify(VERIFIER, store_arg(copy.path()).as_ref(), &t.spec).unwrap();
        assert_eq!(line, "ok", "template `{}` does not verify undamaged", t.name);
    }

    let mut counts = Counts::default();
    for trial in 0..TRIALS {
        let t = &templates[trial % templates.len()];
        // Every kind of file in turn.
        let round = trial / templates.len();
        let (kind, rel) = t.files[round % t.files.len()].clone();
        let original = std::fs::read(t.dir.path().join(&rel)).unwrap();
        // Each kind meets each sort of damage in turn (shifted each time all kinds had one).
        let damage = pick_damage(&original, round + round / t.files.len(), &mut rng);

        let dir = scratch();
        t.copy_to(dir.path());
        damage.apply(&dir.path().join(&rel), &mut rng);
        let damaged = std::fs::read(dir.path().join(&rel)).unwrap();
        let what = format!("trial {trial}: {} of `{}`, {:?}", rel.display(), t.name, damage.short());
        let tail = match kind {
            Kind::Log => tail(&sqlite_log_groups(&original), &original, &damaged),
            _ => Tail::Other,
        };
        let verdict = verify(VERIFIER, store_arg(dir.path()).as_ref(), &t.spec);
        // The database file's path names the log's too (`<file>-wal`).
        let database = dir.path().join(FILE).display().to_string();
        let names = |m: &str| {
            m.contains(&database)
                || (m.contains("checkpoint ") && m.contains(" of run `"))
                || m.contains("the event log of run `")
        };
        counts.record(kind, &what, &verdict, names, tail);
    }
    counts.report(TRIALS, templates.len(), started);
}
