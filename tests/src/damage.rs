//! What the damage tests (`faults_damage` on sled, `sqlite_damage` on SQLite) share: the damages a
//! file meets (byte flips, a zeroed range, a truncation), where they land, a scratch folder, and the
//! verifier child (`damage_verify`) run with a timeout.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use graph_runtime::rand_chacha::ChaCha8Rng;
use graph_runtime::rand_core::Rng;

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
/// damage, (c) anything else (a failure), (d) an acknowledged commit silently missing.
#[derive(Debug, Default)]
pub struct Counts {
    /// (a)
    pub intact: u64,
    /// (b), reported by the open.
    pub corrupted_at_open: u64,
    /// (b), reported by a read.
    pub corrupted_at_read: u64,
    /// (d) confined to the last group of a log.
    pub torn_tail_like: u64,
    /// (d) confined to a suffix of several groups at the end of a log ([`Tail::Suffix`]).
    pub tail_erased: Vec<String>,
    /// (d) otherwise: store bugs.
    pub lost: Vec<String>,
    /// (c)
    pub failures: Vec<String>,
}

impl Counts {
    /// Counts one trial (`what` describes it) by the verifier's `verdict`; `names_damage` tells whether
    /// a `Corrupted` message names what was damaged, `tail` how the damage relates to a log's end.
    /// Returns the outcome's name.
    pub fn record(
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

    /// Prints the counts, the outcomes by kind of file and every loss and failure; panics when there
    /// was a silent loss that is not at a log's end, or a failure.
    pub fn report<K: std::fmt::Debug>(
        &self,
        by_kind: &std::collections::BTreeMap<K, std::collections::BTreeMap<&str, u64>>,
    ) {
        println!("  (a) intact, every acknowledged commit verified: {}", self.intact);
        println!("  (b) Corrupted at open: {}", self.corrupted_at_open);
        println!("  (b) Corrupted at a read: {}", self.corrupted_at_read);
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
        for (k, m) in by_kind {
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
