//! What the damage tests (`faults_damage` on sled, `sqlite_damage` on SQLite) share: the damages a
//! file meets (byte flips, a zeroed range, a truncation), where they land, a scratch folder, and the
//! verifier child (`damage_verify`) run with a timeout, the templates' making, the outcomes' counts.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use graph_runtime::rand_chacha::ChaCha8Rng;
use graph_runtime::rand_core::Rng;

use crate::faults::{Reference, parse_acks, reference, run_id};

/// A verification that takes longer is a hang.
pub const VERIFY_TIMEOUT: Duration = Duration::from_secs(30);

/// One damage to one file.
#[derive(Debug, Clone)]
pub enum Damage {
    /// XOR the bytes at these offsets with non-zero values.
    Flip(Vec<u64>),
    /// Zero `len` bytes from `at`.
    Zero {
        /// The first byte zeroed.
        at: u64,
        /// How many.
        len: u64,
    },
    /// Cut the file at `at`.
    Truncate(u64),
    /// Write garbage into an empty file.
    Garbage(u64),
}

impl Damage {
    /// Damages the file `path`.
    pub fn apply(&self, path: &Path, rng: &mut ChaCha8Rng) {
        let mut bytes = std::fs::read(path).unwrap();
        match self {
            Damage::Flip(at) => {
                for &i in at {
                    bytes[i as usize] ^= (rng.next_u32() % 255 + 1) as u8;
                }
            }
            Damage::Zero { at, len } => bytes[*at as usize..(*at + *len) as usize].fill(0),
            Damage::Truncate(at) => bytes.truncate(*at as usize),
            Damage::Garbage(n) => bytes.extend((0..*n).map(|_| rng.next_u32() as u8)),
        }
        std::fs::write(path, bytes).unwrap();
    }

    /// The damage for a message (flip offsets, not the random values).
    pub fn short(&self) -> String {
        match self {
            Damage::Flip(at) => format!("flip {} byte(s) at {at:?}", at.len()),
            Damage::Zero { at, len } => format!("zero {len} byte(s) at {at}"),
            Damage::Truncate(at) => format!("truncate at {at}"),
            Damage::Garbage(n) => format!("{n} bytes of garbage"),
        }
    }
}

/// An offset in `bytes`: half the time one of its non-zero bytes (preallocated files are mostly zeros,
/// where damage changes little), else anywhere.
fn offset(bytes: &[u8], rng: &mut ChaCha8Rng) -> u64 {
    let nonzero = bytes.iter().filter(|&&b| b != 0).count();
    if nonzero > 0 && rng.next_u32().is_multiple_of(2) {
        let nth = rng.next_u64() as usize % nonzero;
        bytes.iter().enumerate().filter(|(_, b)| **b != 0).nth(nth).unwrap().0 as u64
    } else {
        rng.next_u64() % bytes.len() as u64
    }
}

/// A damage for a file holding `bytes`: `which` picks its sort (flips, a zeroed range, a truncation, in
/// turn), the place is random.
pub fn pick_damage(bytes: &[u8], which: usize, rng: &mut ChaCha8Rng) -> Damage {
    let len = bytes.len() as u64;
    if len == 0 {
        return Damage::Garbage(1 + rng.next_u64() % 64);
    }
    let at = offset(bytes, rng);
    match which % 3 {
        0 => {
            // 1 to 8 bytes within 64 of each other.
            let n = 1 + rng.next_u64() % 8;
            let mut flips: Vec<u64> = (0..n).map(|_| (at + rng.next_u64() % 64).min(len - 1)).collect();
            flips.sort_unstable();
            flips.dedup();
            Damage::Flip(flips)
        }
        1 => Damage::Zero { at, len: (1 + rng.next_u64() % 4096).min(len - at) },
        _ => Damage::Truncate(at),
    }
}

/// A temporary folder, on `/dev/shm` when there is one: the trials' stores sync every commit, which
/// costs milliseconds on a disk and nothing on a tmpfs (what is tested is what the files hold, not the
/// device).
pub fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(d) = tempfile::Builder::new().prefix("graph-damage").tempdir_in(shm)
    {
        return d;
    }
    tempfile::tempdir().unwrap()
}

/// Runs the verifier `exe` (`damage_verify`) on `store` with the spec file `spec`: its verdict line and
/// how long it took, or why there is none (a hang past [`VERIFY_TIMEOUT`], a crash).
pub fn verify(exe: &str, store: &OsStr, spec: &Path) -> Result<(String, Duration), String> {
    let started = Instant::now();
    let mut child = Command::new(exe)
        .arg(store)
        .arg(spec)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > VERIFY_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("hang: no verdict after {VERIFY_TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("the verifier exited with {}: {}{}", out.status, stdout, stderr.trim()));
    }
    let line = stdout.lines().next().unwrap_or_default().to_owned();
    Ok((line, started.elapsed()))
}

/// How a silent loss after damage to a log relates to the log's tail.
#[derive(Debug, PartialEq, Eq)]
pub enum Tail {
    /// Only the last group changed: a torn write of the last commit reads the same, so every reader of
    /// a log must take it for the end (PostgreSQL's and SQLite's WALs do).
    LastGroup,
    /// The last group and the ones just before it changed, and nothing after them is intact: the log
    /// reads as ending, torn, at the first changed group. No checksum can tell that the groups after
    /// it ever existed. Reported apart, not counted as a store bug.
    Suffix,
    /// Anything else: an intact group follows the damage, or the damage is elsewhere.
    Other,
}

/// How damage that turned a log's `original` bytes into `damaged` relates to its tail, given the byte
/// ranges of the original's commit groups. A group counts as changed when any of its bytes did (a group
/// cut off by a truncation too), so zeroing bytes that were zero, or flipping only bytes outside every
/// group, changes none.
pub fn tail(groups: &[(usize, usize)], original: &[u8], damaged: &[u8]) -> Tail {
    let n = groups.len();
    let changed: Vec<usize> = groups
        .iter()
        .enumerate()
        .filter(|(_, g)| damaged.get(g.0..g.1) != Some(&original[g.0..g.1]))
        .map(|(i, _)| i)
        .collect();
    let suffix = !changed.is_empty() && changed.iter().copied().eq(n - changed.len()..n);
    match (suffix, changed.len()) {
        (true, 1) => Tail::LastGroup,
        (true, _) => Tail::Suffix,
        _ => Tail::Other,
    }
}

/// The trials' outcomes: (a) every acknowledged commit verified, (b) a typed `Corrupted` naming the
/// damage, (c) anything else (a failure), (d) an acknowledged commit silently missing; by kind of file
/// `K` too, and the slowest verification.
#[derive(Debug)]
pub struct Counts<K> {
    /// (a)
    pub intact: u64,
    /// (b), reported by the open.
    pub corrupted_at_open: u64,
    /// (b), reported by a read.
    pub corrupted_at_read: u64,
    /// (b), missed by the reads (a silent loss or a wrong answer) and reported by the engine's `verify`
    /// of a run (its event log against its checkpoints).
    pub corrupted_by_verify: u64,
    /// (b), missed by the reads and by `verify`, and reported by the store's whole-store check
    /// (`Store::check_integrity`).
    pub corrupted_by_integrity_check: u64,
    /// (d) confined to the last group of a log.
    pub torn_tail_like: u64,
    /// (d) confined to a suffix of several groups at the end of a log ([`Tail::Suffix`]).
    pub tail_erased: Vec<String>,
    /// (d) otherwise: store bugs.
    pub lost: Vec<String>,
    /// (c)
    pub failures: Vec<String>,
    /// Each outcome's count, by kind of file damaged.
    pub by_kind: BTreeMap<K, BTreeMap<&'static str, u64>>,
    /// The longest a verification took.
    pub slowest: Duration,
    /// `GRAPH_FAULT_VERBOSE` is set: every trial is printed.
    verbose: bool,
}

impl<K: Ord + std::fmt::Debug> Default for Counts<K> {
    fn default() -> Self {
        Counts {
            intact: 0,
            corrupted_at_open: 0,
            corrupted_at_read: 0,
            corrupted_by_verify: 0,
            corrupted_by_integrity_check: 0,
            torn_tail_like: 0,
            tail_erased: Vec::new(),
            lost: Vec::new(),
            failures: Vec::new(),
            by_kind: BTreeMap::new(),
            slowest: Duration::ZERO,
            verbose: std::env::var_os("GRAPH_FAULT_VERBOSE").is_some(),
        }
    }
}

impl<K: Ord + std::fmt::Debug> Counts<K> {
    /// Counts one trial on a file of `kind` (`what` describes it) by the verifier's `verdict`;
    /// `names_damage` tells whether a `Corrupted` message names what was damaged, `tail` how the damage
    /// relates to a log's end. Prints the trial under `GRAPH_FAULT_VERBOSE`.
    pub fn record(
        &mut self,
        kind: K,
        what: &str,
        verdict: &Result<(String, Duration), String>,
        names_damage: impl Fn(&str) -> bool,
        tail: Tail,
    ) {
        if let Ok((_, took)) = verdict {
            self.slowest = self.slowest.max(*took);
        }
        let outcome = self.outcome(what, verdict, names_damage, tail);
        *self.by_kind.entry(kind).or_default().entry(outcome).or_default() += 1;
        if self.verbose {
            let line = match verdict {
                Ok((line, _)) => line,
                Err(e) => e,
            };
            // A long verdict keeps its start (the error) and its end (what the reads found).
            let chars: Vec<char> = line.chars().collect();
            let shown = if chars.len() > 600 {
                let (head, tail) = (&chars[..300], &chars[chars.len() - 300..]);
                format!("{} … {}", head.iter().collect::<String>(), tail.iter().collect::<String>())
            } else {
                line.clone()
            };
            println!("{what} → {outcome}: {shown}");
        }
    }

    fn outcome(
        &mut self,
        what: &str,
        verdict: &Result<(String, Duration), String>,
        names_damage: impl Fn(&str) -> bool,
        tail: Tail,
    ) -> &'static str {
        let line = match verdict {
            Err(e) => {
                self.failures.push(format!("{what}: {e}"));
                return "failure";
            }
            Ok((line, _)) => line,
        };
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "ok" => {
                self.intact += 1;
                "intact"
            }
            "open-corrupted" | "read-corrupted" if names_damage(rest) => {
                if word == "open-corrupted" {
                    self.corrupted_at_open += 1;
                } else {
                    self.corrupted_at_read += 1;
                }
                "corrupted"
            }
            "verify-corrupted" if names_damage(rest) => {
                self.corrupted_by_verify += 1;
                "verify"
            }
            "integrity-corrupted" if names_damage(rest) => {
                self.corrupted_by_integrity_check += 1;
                "integrity-check"
            }
            // An operator's check that does not name the damage leaves the reads' own verdict to be
            // counted as it was: the check may only add a finding, never turn a torn tail into a failure.
            "verify-corrupted" | "integrity-corrupted"
                if rest.ends_with(')') && rest.contains("(the reads: ") =>
            {
                let (_, reads) = rest.rsplit_once("(the reads: ").expect("checked");
                let reads = Ok((reads[..reads.len() - 1].to_owned(), Duration::ZERO));
                self.outcome(what, &reads, names_damage, tail)
            }
            "lost" if tail == Tail::LastGroup => {
                self.torn_tail_like += 1;
                "torn-tail-like"
            }
            "lost" if tail == Tail::Suffix => {
                self.tail_erased.push(format!("{what}: {line}"));
                "tail-suffix"
            }
            "lost" => {
                self.lost.push(format!("{what}: {line}"));
                "LOST"
            }
            _ => {
                self.failures.push(format!("{what}: {line}"));
                "failure"
            }
        }
    }

    /// Prints the counts of `trials` over `templates` since `started`, the outcomes by kind of file and
    /// every loss and failure; panics when there was a silent loss that is not at a log's end, or a
    /// failure.
    pub fn report(&self, trials: usize, templates: usize, started: Instant) {
        println!(
            "{trials} trials over {templates} templates ({:.1?}, slowest verification {:.1?}):",
            started.elapsed(),
            self.slowest
        );
        println!("  (a) intact, every acknowledged commit verified: {}", self.intact);
        println!("  (b) Corrupted at open: {}", self.corrupted_at_open);
        println!("  (b) Corrupted at a read: {}", self.corrupted_at_read);
        println!("  (b) Corrupted by the engine's verify, the reads missed it: {}", self.corrupted_by_verify);
        println!(
            "  (b) Corrupted by the integrity check, the reads and verify missed it: {}",
            self.corrupted_by_integrity_check
        );
        println!(
            "  (d) torn-tail-like loss (damage confined to the log's last group): {}",
            self.torn_tail_like
        );
        println!(
            "  (d) tail-suffix loss (damage over the last few groups, nothing intact after it): {}",
            self.tail_erased.len()
        );
        println!("  (d) other silent loss (store bugs): {}", self.lost.len());
        println!("  (c) failures: {}", self.failures.len());
        for (k, m) in &self.by_kind {
            println!("  {k:?}: {m:?}");
        }
        for l in &self.tail_erased {
            println!("  tail-suffix: {l}");
        }
        for l in self.lost.iter().chain(&self.failures) {
            println!("  !! {l}");
        }
        assert!(self.lost.is_empty() && self.failures.is_empty(), "silent losses or failures: see above");
    }
}

/// The seed of a damage test's randomness: `GRAPH_FAULT_SEED`, or the clock's; printed, so that a run's
/// damage can be replayed.
pub fn seed() -> u64 {
    let seed: u64 = match std::env::var("GRAPH_FAULT_SEED") {
        Ok(s) => s.parse().expect("GRAPH_FAULT_SEED is a number"),
        Err(_) => {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        }
    };
    println!("seed {seed} (GRAPH_FAULT_SEED={seed} replays the damage; the templates' kill moments vary)");
    seed
}

/// The reference histories of `runs` concurrent runs of `crash_graph(iterations)`, by run id.
pub fn references(runs: usize, iterations: u64) -> BTreeMap<String, Reference> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut m = BTreeMap::new();
        for id in (0..runs).map(run_id) {
            let r = reference(&id, iterations).await;
            m.insert(id, r);
        }
        m
    })
}

/// What a template's child acknowledged, and the verifier's spec file for it.
pub struct Made {
    /// The highest acknowledged step of each run.
    pub acked: BTreeMap<String, u64>,
    /// The spec file (`damage_verify`'s second argument), in the template's folder.
    pub spec: PathBuf,
}

/// Runs the child `child` (`fault_child`, its stdout piped) to make a template in `dir`: killed after
/// `kill_after`, or (None) left to finish and close its store, which it must do without a fault. `None`
/// when it finished before the kill. Writes the verifier's spec (the acknowledged step of each run of
/// `refs`, then their reference histories) into `dir`.
pub fn make_template(
    mut child: Command,
    name: &str,
    kill_after: Option<Duration>,
    refs: &BTreeMap<String, Reference>,
    dir: &Path,
) -> Option<Made> {
    let mut child = child.spawn().unwrap();
    let killed = match kill_after {
        Some(d) => {
            std::thread::sleep(d);
            let running = child.try_wait().unwrap().is_none();
            if running {
                child.kill().unwrap(); // SIGKILL
            }
            running
        }
        None => false,
    };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if kill_after.is_some() && !killed {
        return None; // it finished before the kill: try another moment
    }
    if kill_after.is_none() {
        assert!(
            out.status.success() && stdout.contains("no-fault"),
            "{name}: the clean run failed:\n{stdout}"
        );
    }
    let acked = parse_acks(&stdout);
    let mut spec = String::new();
    for (run, r) in refs {
        let a = acked.get(run).map_or("none".to_owned(), |s| s.to_string());
        spec.push_str(&format!("run {run} {a}\n"));
        for (step, (key, hash)) in r.keys.iter().zip(&r.states).enumerate() {
            spec.push_str(&format!("ref {run} {step} {key} {hash}\n"));
        }
    }
    let spec_path = dir.join("spec");
    std::fs::write(&spec_path, spec).unwrap();
    Some(Made { acked, spec: spec_path })
}

/// Six templates made by `make(name, kill_after)`: one left to close cleanly (timed), then five killed
/// at moments spread over the time that one took (`make` answers `None` to a kill that missed the runs).
pub fn templates<T>(
    mut make: impl FnMut(String, Option<Duration>) -> Option<T>,
    rng: &mut ChaCha8Rng,
) -> Vec<T> {
    let t = Instant::now();
    let clean = make("clean close".into(), None).expect("the clean template");
    let whole = t.elapsed();
    let mut templates = vec![clean];
    let mut attempts = 0;
    while templates.len() < 6 {
        attempts += 1;
        assert!(attempts < 50, "the kills keep missing the runs");
        let at = whole.mul_f64(0.1 + 0.8 * (rng.next_u32() % 1000) as f64 / 1000.0);
        if let Some(t) = make(format!("killed after {at:.0?}"), Some(at)) {
            templates.push(t);
        }
    }
    templates
}
