//! Shared pieces of the fault tests (`faults_device`, `faults_damage`, `faults_engine`) and their child
//! processes (`fault_child`, `damage_verify`): the store options that make the commit log rotate and
//! checkpoint often, a store wrapper that reports acknowledgements the moment they happen, the
//! reference histories an uninterrupted run commits, and a reader of commit-log segments that finds
//! the last commit group (to recognise damage a store cannot tell from a torn write).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use graph_runtime::node::BoxFuture;
use graph_runtime::store::{Checkpoint, SledOptions};
use graph_runtime::{CommitOutcome, Engine, MemoryStore, Store, StoreError};

use crate::hooked::{Hooked, Hooks};
use crate::{Trace, crash_graph, state_hash};

/// Bytes of a commit-log segment in the fault tests: small, so a few hundred commits rotate through
/// several segments and spares.
pub const SEGMENT_SIZE: u64 = 64 << 10;
/// Bytes of log between two checkpoints in the fault tests: small, so checkpoints (sled flushed, the
/// manifest rewritten, segments retired or recycled) happen many times per run.
pub const CHECKPOINT_BYTES: u64 = 32 << 10;

/// The sled options of every fault test: [`SEGMENT_SIZE`] and [`CHECKPOINT_BYTES`].
pub fn small_options() -> SledOptions {
    SledOptions::default().log_segment_size(SEGMENT_SIZE).checkpoint_bytes(CHECKPOINT_BYTES)
}

/// The id of the `i`-th of several concurrent runs.
pub fn run_id(i: usize) -> String {
    format!("r{i}")
}

/// What [`Acking`] saw, shared by its clones.
#[derive(Debug, Default)]
pub struct AckLog {
    /// The Display of the first store error any operation returned.
    pub first_error: Mutex<Option<String>>,
    /// Set once any operation returned an error.
    pub failed: AtomicBool,
}

/// Hooks that print `ack <run> <step>` on stdout for every commit the store acknowledged (`Committed`
/// or `AlreadyCommitted`), before returning it to the engine, so a parent process that kills this one
/// knows which commits it must find again.
///
/// They also check the fail-stop rule from outside: a commit *submitted* after the store returned its
/// first error must not be acknowledged; if one is, they print `late-ack <run> <step>` instead. (A
/// commit submitted before the error may still be acknowledged after it: it belonged to an earlier
/// group.) A store that is not fail-stop (SQLite's) may acknowledge such commits: for it, a `late-ack`
/// is an acknowledgement like any other, which must survive.
#[derive(Debug, Clone, Default)]
pub struct AckHooks {
    /// What they saw.
    pub log: Arc<AckLog>,
}

/// A store reporting its acknowledgements ([`AckHooks`]).
pub type Acking<St> = Hooked<St, AckHooks>;

/// Wraps `inner` in [`AckHooks`].
pub fn acking<St: Store>(inner: St) -> Acking<St> {
    Hooked { inner, hooks: AckHooks::default() }
}

/// Prints one line and flushes it at once (stdout may be a pipe, which Rust line-buffers anyway; the
/// flush makes the ordering explicit).
pub fn say(line: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

impl Hooks for AckHooks {
    fn save<'a>(
        &'a self,
        cp: &'a Checkpoint,
        call: BoxFuture<'a, Result<CommitOutcome, StoreError>>,
    ) -> BoxFuture<'a, Result<CommitOutcome, StoreError>> {
        Box::pin(async move {
            let after_failure = self.log.failed.load(Ordering::SeqCst);
            let out = call.await?;
            if matches!(out, CommitOutcome::Committed { .. } | CommitOutcome::AlreadyCommitted { .. }) {
                if after_failure {
                    say(format_args!("late-ack {} {}", cp.run_id, cp.step));
                } else {
                    say(format_args!("ack {} {}", cp.run_id, cp.step));
                }
            }
            Ok(out)
        })
    }

    fn on_error(&self, e: &StoreError) {
        let mut first = self.log.first_error.lock().unwrap_or_else(|e| e.into_inner());
        first.get_or_insert_with(|| e.to_string());
        self.log.failed.store(true, Ordering::SeqCst);
    }
}

/// The `ack <run> <step>` and `late-ack <run> <step>` lines of a child's stdout: the highest
/// acknowledged step of each run.
pub fn parse_acks(stdout: &str) -> BTreeMap<String, u64> {
    let mut acked = BTreeMap::new();
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("ack ").or_else(|| line.strip_prefix("late-ack ")) else {
            continue;
        };
        let Some((run, step)) = rest.split_once(' ') else { continue };
        let Ok(step) = step.parse::<u64>() else { continue };
        let e = acked.entry(run.to_owned()).or_insert(step);
        *e = (*e).max(step);
    }
    acked
}

/// What an uninterrupted run of [`crash_graph`] commits, step by step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The idempotency key of each step, from 0.
    pub keys: Vec<String>,
    /// [`state_hash`] of the state at each step, from 0.
    pub states: Vec<String>,
}

impl Reference {
    /// The last step (the run completes there).
    pub fn last_step(&self) -> u64 {
        self.keys.len() as u64 - 1
    }
}

/// The reference history of run `run` of `crash_graph(iterations)`, on a [`MemoryStore`].
pub async fn reference(run: &str, iterations: u64) -> Reference {
    let store = MemoryStore::new();
    let engine = Engine::builder(crash_graph(iterations)).store(store.clone()).build();
    let out = engine.run(run, Trace::default()).await.expect("the reference run completes");
    let keys: Vec<String> =
        store.history(run).await.expect("history").into_iter().map(|m| m.idempotency_key).collect();
    assert_eq!(keys.len() as u64, out.steps + 1);
    let mut states = Vec::with_capacity(keys.len());
    for step in 0..=out.steps {
        let s = engine.state_at(run, step).await.expect("state").expect("every step is stored");
        states.push(state_hash(&s));
    }
    Reference { keys, states }
}

/// Starts runs `run_id(0)..run_id(n)` of `engine` at once, each on a task of its own.
pub fn spawn_runs(
    engine: &Engine<Trace>,
    n: usize,
) -> Vec<tokio::task::JoinHandle<graph_runtime::Result<graph_runtime::RunOutcome<Trace>>>> {
    (0..n)
        .map(|i| {
            let engine = engine.clone();
            tokio::spawn(async move { engine.run(&run_id(i), Trace::default()).await })
        })
        .collect()
}

/// `run` in `store` (through `engine`, of `crash_graph`) committed exactly `reference`'s history (the
/// idempotency key of each step), ended in its final state, and its event log verifies.
pub async fn assert_reference_history(
    engine: &Engine<Trace>,
    store: &dyn Store,
    run: &str,
    reference: &Reference,
) {
    let keys: Vec<String> =
        store.history(run).await.expect("history").into_iter().map(|m| m.idempotency_key).collect();
    assert_eq!(keys, reference.keys, "{run}: the history differs from an uninterrupted run's");
    let last = engine.state_at(run, reference.last_step()).await.expect("state").expect("the last step");
    assert_eq!(state_hash(&last), *reference.states.last().expect("a step"), "{run}: the final state");
    graph_runtime::engine::verify_run(store, run, None).await.unwrap_or_else(|e| panic!("{run}: {e}"));
}

/// Each of `engines` (of `crash_graph`, over stores of one database) drives runs `run_id(0..runs)` to
/// completion at once, starting or resuming them again whenever it loses a race. Losing a race must be
/// a typed, retryable outcome (`VersionConflict`, `Superseded`, `AlreadyRunning`), never another error
/// (a false `ExecutionCorrupted` about a sound store would be one); every engine must see each run end
/// in the same state, and every run's log must verify. `what` names the case in failures.
pub async fn drive_the_same_runs(engines: &[Engine<Trace>], runs: usize, what: &str) {
    use graph_runtime::Error;
    let mut drivers = Vec::new();
    for (e, engine) in engines.iter().enumerate() {
        for r in 0..runs {
            let (engine, what) = (engine.clone(), what.to_owned());
            drivers.push(tokio::spawn(async move {
                let run = run_id(r);
                loop {
                    match engine.run_or_resume(&run, Trace::default()).await {
                        Ok(out) if out.is_completed() => return out.state,
                        Ok(_) => {}
                        Err(
                            Error::VersionConflict { .. }
                            | Error::Superseded { .. }
                            | Error::AlreadyRunning { .. },
                        ) => {}
                        Err(other) => panic!("{what}, engine {e}, run {run}: {other}"),
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }));
        }
    }
    let mut states = Vec::new();
    for d in drivers {
        states.push(d.await.expect("a driver"));
    }
    for r in 0..runs {
        for e in 1..engines.len() {
            assert_eq!(
                states[r],
                states[e * runs + r],
                "{what}: every engine sees run {} end the same",
                run_id(r)
            );
        }
        engines[0].verify(&run_id(r)).await.unwrap_or_else(|err| panic!("{what}: {}: {err}", run_id(r)));
    }
}

/// Bytes of a commit-log segment header.
pub const WAL_SEGMENT_HEADER: usize = 32;
/// Bytes of a commit-group header.
pub const WAL_GROUP_HEADER: usize = 24;

/// The commit groups of a segment file's bytes, as `(start, end, first_seq, count)` with `end` past the
/// group's padding, in file order: the groups a reader of the log takes as written. It follows the
/// layout (32-byte header whose bytes 16..24 are the segment's salt; 8-aligned groups whose 24-byte
/// header is `u32` body length, `u32` count, `u64` first seq, `u32` crc32c of the body and `u32` crc32c
/// of header bytes 0..20, both seeded with crc32c of the salt) and stops at the first group that is not
/// whole: all-zero, running past the file, failing either checksum (a group a SIGKILL cut short in
/// the middle of its `pwrite`: its header can be whole while its body is not), or with a seq that does
/// not follow the previous one (a recycled segment keeps groups of its previous life after its
/// current end; their seqs are older).
pub fn wal_groups(bytes: &[u8]) -> Vec<(usize, usize, u64, u32)> {
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    let mut groups = Vec::new();
    let Some(salt) = bytes.get(16..24) else { return groups };
    let seed = crc32c::crc32c(salt);
    let mut at = WAL_SEGMENT_HEADER;
    let mut expected: Option<u64> = None;
    while let Some(h) = bytes.get(at..at + WAL_GROUP_HEADER) {
        if h.iter().all(|&b| b == 0) || crc32c::crc32c_append(seed, &h[0..20]) != u32_at(h, 20) {
            break;
        }
        let body_len = u32_at(h, 0) as usize;
        let count = u32_at(h, 4);
        let first_seq = u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
        let body = at + WAL_GROUP_HEADER..at + WAL_GROUP_HEADER + body_len;
        let end = body.end.div_ceil(8) * 8;
        if count == 0
            || end > bytes.len()
            || expected.is_some_and(|e| e != first_seq)
            || crc32c::crc32c_append(seed, &bytes[body]) != u32_at(h, 16)
        {
            break;
        }
        groups.push((at, end, first_seq, count));
        expected = Some(first_seq + u64::from(count));
        at = end;
    }
    groups
}

/// The segment files of a store's commit log (`<store>/wal/wal-*.log`), in seq order.
pub fn wal_segments(store: &Path) -> Vec<std::path::PathBuf> {
    let mut segs: Vec<_> = std::fs::read_dir(store.join("wal"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    segs.retain(|p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("wal-") && n.ends_with(".log"))
    });
    segs.sort();
    segs
}

/// Aborts the process just before or just after the `n`th commit it makes (`CRASH_AT=<n>:<before|after>`,
/// counted from 1 over every run), and, when told to, prints `ack <run> <step>` for each acknowledged
/// commit, `nack <run> <step>` for each refused one (another driver's step or version came first) and
/// `kill <run> <step>` before aborting ahead of a commit. The test children that kill themselves at a
/// commit point (`subgraph_child`, `version_child`).
pub struct CrashAt {
    at: u64,
    before: bool,
    acks: bool,
    seen: AtomicU64,
}

impl CrashAt {
    /// The point `CRASH_AT` names, if it is set; `acks`: print the acknowledgements.
    ///
    /// # Panics
    ///
    /// When `CRASH_AT` is set but is not `<n>:<before|after>`.
    pub fn from_env(acks: bool) -> Option<Self> {
        let spec = std::env::var("CRASH_AT").ok()?;
        let (n, point) = spec.split_once(':').expect("CRASH_AT=<n>:<before|after>");
        let at = n.parse().expect("CRASH_AT's n is a commit number");
        Some(CrashAt { at, before: point == "before", acks, seen: AtomicU64::new(0) })
    }

    /// Never aborts; prints the acknowledgements when `acks`.
    pub fn never(acks: bool) -> Self {
        CrashAt { at: u64::MAX, before: false, acks, seen: AtomicU64::new(0) }
    }
}

impl Hooks for CrashAt {
    fn save<'a>(
        &'a self,
        cp: &'a Checkpoint,
        call: BoxFuture<'a, Result<CommitOutcome, StoreError>>,
    ) -> BoxFuture<'a, Result<CommitOutcome, StoreError>> {
        Box::pin(async move {
            let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
            if n == self.at && self.before {
                if self.acks {
                    println!("kill {} {}", cp.run_id, cp.step);
                }
                std::process::abort();
            }
            let out = call.await?;
            if self.acks {
                let acked =
                    matches!(out, CommitOutcome::Committed { .. } | CommitOutcome::AlreadyCommitted { .. });
                println!("{} {} {}", if acked { "ack" } else { "nack" }, cp.run_id, cp.step);
            }
            if n == self.at {
                std::process::abort();
            }
            Ok(out)
        })
    }
}

/// `store` with `hooks` stepping in, as a shared store.
pub fn hooked(store: crate::backends::SpecStore, hooks: impl Hooks) -> Arc<dyn Store> {
    use crate::backends::SpecStore;
    match store {
        SpecStore::Sled(inner) => Arc::new(Hooked { inner, hooks }),
        #[cfg(feature = "sqlite")]
        SpecStore::Sqlite(inner) => Arc::new(Hooked { inner, hooks }),
        #[cfg(feature = "postgres")]
        SpecStore::Postgres(inner) => Arc::new(Hooked { inner, hooks }),
    }
}
