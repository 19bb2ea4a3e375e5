//! Effects across real crashes: a child process runs a loop that charges a card (non-idempotent) and
//! sends a mail (idempotent) at every step, recording every real call in a ledger file (the world), and
//! is aborted at each point of an effect's life — before the call, after the call but before its
//! journal entry, after the journal entry but before the step commit, after the step commit — and
//! SIGKILLed at random moments. A new process resumes; a run that waits for confirmation is answered the
//! way a person would, by looking at the world (the ledger). Every time:
//!
//! - each charge happened exactly once (never twice; the one a crash left unknown was confirmed or
//!   retried, never guessed);
//! - every mail was sent with the key of its call site (retries of an idempotent effect reuse the key);
//! - the run completes with the state of an uninterrupted run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use graph_runtime::store::SledStore;
use graph_runtime::{Engine, MemoryStore, Resolution, Store};
use graph_tests::graphs::{ledger_graph, ledger_receipt};
use graph_tests::{Trace, random_delay, state_hash};

const ITERATIONS: u64 = 6;

/// The uninterrupted run: its final state's hash and the key of every effect call, by name.
async fn reference(dir: &Path) -> (String, BTreeMap<String, BTreeSet<String>>) {
    let store = MemoryStore::new();
    let engine = Engine::builder(ledger_graph(ITERATIONS, dir.join("reference-ledger"), None))
        .store(store.clone())
        .build();
    let out = engine.run("l", Trace::default()).await.unwrap();
    let mut keys: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in store.effects("l").await.unwrap() {
        keys.entry(e.name).or_default().insert(e.key);
    }
    (state_hash(&out.state), keys)
}

fn child(store: &Path, ledger: &Path, crash: Option<String>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_effects_child"));
    c.arg(store).arg(ledger).arg(ITERATIONS.to_string()).stdout(Stdio::piped()).stderr(Stdio::piped());
    match crash {
        Some(spec) => c.env("EFFECT_CRASH", spec),
        None => c.env_remove("EFFECT_CRASH"),
    };
    c
}

/// The ledger's lines, as (effect, key).
fn ledger_lines(ledger: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(ledger).unwrap_or_default();
    text.lines()
        .map(|l| l.split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())).expect("a ledger line"))
        .collect()
}

/// Resumes until the run completes, answering confirmations from the ledger; returns the done line and
/// how many confirmations were asked.
async fn finish(store_dir: &Path, ledger: &Path) -> (String, usize) {
    for asked in 0..20 {
        let out = child(store_dir, ledger, None).output().unwrap();
        assert!(
            out.status.success(),
            "a resuming process failed: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        if let Some(done) = text.lines().find_map(|l| l.strip_prefix("done ")) {
            return (done.to_owned(), asked);
        }
        let key = text.lines().find_map(|l| l.strip_prefix("paused ")).expect("done or paused").to_owned();
        // A person looks at the world: did the charge happen?
        let happened = ledger_lines(ledger).iter().any(|(e, k)| e == "charge" && *k == key);
        let answer = if happened {
            Resolution::Completed(serde_json::json!(ledger_receipt(&key)))
        } else {
            Resolution::Retry
        };
        let store = SledStore::open(store_dir).unwrap();
        let engine =
            Engine::builder(ledger_graph(ITERATIONS, ledger.to_path_buf(), None)).store(store).build();
        engine.resolve_effect("l", &key, answer).await.unwrap();
    }
    panic!("the run did not complete after 20 resumes");
}

/// The ledger shows each charge exactly once and only known keys.
fn check_world(ledger: &Path, keys: &BTreeMap<String, BTreeSet<String>>, what: &str) {
    let lines = ledger_lines(ledger);
    let charges: Vec<&String> = lines.iter().filter(|(e, _)| e == "charge").map(|(_, k)| k).collect();
    let distinct: BTreeSet<&String> = charges.iter().copied().collect();
    assert_eq!(charges.len(), distinct.len(), "{what}: a card was charged twice: {charges:?}");
    assert_eq!(distinct.len() as u64, ITERATIONS, "{what}: every charge happened once");
    assert!(distinct.iter().all(|k| keys["card.charge"].contains(*k)), "{what}: an unknown charge key");
    for (e, k) in &lines {
        if e == "mail" {
            assert!(keys["mail.send"].contains(k), "{what}: a mail sent with a key of no call site: {k}");
        }
    }
    let mails: BTreeSet<&String> = lines.iter().filter(|(e, _)| e == "mail").map(|(_, k)| k).collect();
    assert_eq!(mails.len() as u64, ITERATIONS, "{what}: every mail was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effects_survive_crashes_at_every_point_and_random_kills() {
    let scratch = tempfile::tempdir().unwrap();
    let (reference_hash, keys) = reference(scratch.path()).await;
    let expected_done = format!("{ITERATIONS} {reference_hash}");
    let mut confirmations = 0;
    for point in ["before_call", "after_call", "after_journal", "after_commit"] {
        for i in [0, 2, ITERATIONS - 1] {
            let dir = tempfile::tempdir().unwrap();
            let (store, ledger) = (dir.path().join("store"), dir.path().join("ledger"));
            let crashed = child(&store, &ledger, Some(format!("{point}:{i}"))).output().unwrap();
            assert!(
                !crashed.status.success() || point == "after_commit" && i == ITERATIONS - 1,
                "{point}:{i} crashed"
            );
            let (done, asked) = finish(&store, &ledger).await;
            confirmations += asked;
            assert_eq!(done, expected_done, "{point}:{i}: the final state");
            check_world(&ledger, &keys, &format!("{point}:{i}"));
            // Only a crash between a charge's start and its journaled outcome asks a person.
            let expect_ask = matches!(point, "before_call" | "after_call");
            assert_eq!(asked > 0, expect_ask, "{point}:{i}: confirmations asked: {asked}");
        }
    }
    let mut kills = 0;
    // Twelve trials, and up to twelve more while fewer than 30 kills have landed: on a fast machine a
    // child can finish before its random delay ends, and the kill then lands on nothing.
    for trial in 0..24u64 {
        if trial >= 12 && kills >= 30 {
            break;
        }
        let dir = tempfile::tempdir().unwrap();
        let (store, ledger) = (dir.path().join("store"), dir.path().join("ledger"));
        for attempt in 0..3u64 {
            let mut proc = child(&store, &ledger, None).spawn().unwrap();
            std::thread::sleep(
                Duration::from_millis(2) + random_delay(Duration::from_millis(60), trial * 7 + attempt),
            );
            if proc.try_wait().unwrap().is_none() {
                proc.kill().unwrap(); // SIGKILL
                kills += 1;
            }
            proc.wait().unwrap();
            // A kill can land while a charge is started: answer as a person would before going on.
            let (done, asked) = finish(&store, &ledger).await;
            confirmations += asked;
            assert_eq!(done, expected_done, "kill trial {trial}");
            if attempt < 2 {
                // Start over in a fresh store to get more kills mid-run.
                std::fs::remove_dir_all(&store).unwrap();
                std::fs::remove_file(&ledger).ok();
            }
        }
        check_world(&ledger, &keys, &format!("kill trial {trial}"));
    }
    println!("{kills} random kills, {confirmations} confirmations asked");
    assert!(kills >= 30, "only {kills} random kills landed");
}
