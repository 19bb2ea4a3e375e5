//! Durable timers and events across processes: a run asleep on sled when its process is SIGKILLed wakes
//! once, on time, in the next process to serve the store's timers; an event sent by a process of its own
//! while no process serves the store is delivered, once, by the next one (`src/bin/timer_child.rs`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_run_sleeping_through_a_sigkill_wakes_once_on_time_in_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let (store, ledger) = (dir.path().join("store"), dir.path().join("ledger"));
    let child = |command: &str| {
        Command::new(env!("CARGO_BIN_EXE_timer_child"))
            .arg(&store)
            .arg(&ledger)
            .arg("1500")
            .arg("0")
            .arg(command)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the child starts")
    };
    let mut first = child("start");
    let mut line = String::new();
    BufReader::new(first.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let wake_at: u64 =
        line.trim().strip_prefix("parked ").unwrap_or_else(|| panic!("{line:?}")).parse().unwrap();
    // Killed while the run sleeps (its timer service holds it in memory: nothing of it survives).
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(!ledger.exists(), "killed before the wake");

    let started = Instant::now();
    let second = child("serve").wait_with_output().unwrap();
    assert!(second.status.success());
    let out = String::from_utf8(second.stdout).unwrap();
    let woke: u64 = out.trim().strip_prefix("done ").unwrap_or_else(|| panic!("{out:?}")).parse().unwrap();
    assert!(woke >= wake_at, "woke at {woke}, before its time {wake_at}");
    // Generous: the second process started after the kill and may start slowly on a loaded machine.
    assert!(woke - wake_at < 30_000, "woke {} ms late", woke - wake_at);
    assert!(started.elapsed() < Duration::from_secs(60));
    let lines: Vec<String> = std::fs::read_to_string(&ledger).unwrap().lines().map(str::to_owned).collect();
    assert_eq!(lines, [format!("woke {woke}")], "the node ran past its sleep once");
}

#[test]
fn an_event_sent_while_no_process_serves_the_store_is_delivered_once_by_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let (store, ledger) = (dir.path().join("store"), dir.path().join("ledger"));
    let child = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_timer_child"));
        c.arg(&store).arg(&ledger).arg("200").arg("1").args(args).stdout(Stdio::piped());
        c
    };
    let mut first = child(&["start"]).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(first.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.starts_with("parked "), "{line:?}");
    // Let its timer service wake the sleep, so the run waits for the event; then kill it.
    std::thread::sleep(Duration::from_millis(800));
    first.kill().unwrap();
    first.wait().unwrap();
    // A sender of its own, twice with no dedupe key: two messages; the first is delivered.
    for expected in ["sent 0", "sent 1"] {
        let sent = child(&["send", "first"]).output().unwrap();
        assert!(sent.status.success());
        assert_eq!(String::from_utf8(sent.stdout).unwrap().trim(), expected);
    }
    assert!(!ledger.exists(), "nothing delivered while no process serves the store");
    let served = child(&["serve"]).output().unwrap();
    assert!(served.status.success());
    let lines: Vec<String> = std::fs::read_to_string(&ledger).unwrap().lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].ends_with(" got first"), "{lines:?}");
}
