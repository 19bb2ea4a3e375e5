//! A migration killed at its commit point leaves the run fully old or fully new, never between, and
//! either way the run finishes on version 2 with the state an uninterrupted migration gives
//! (`src/bin/version_child.rs`, a sled store, the process aborted just before and just after the
//! migration's commit; the parked question and the sleeping run each).

use std::process::Command;

use graph_runtime::Store;
use graph_runtime::store::SledStore;
use graph_tests::versions::{v1, v2};

fn child(store: &std::path::Path, args: &[&str], crash: Option<&str>) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_version_child"));
    cmd.arg(format!("sled:{}", store.display())).args(args);
    if let Some(at) = crash {
        cmd.env("CRASH_AT", at);
    }
    let out = cmd.output().expect("the child runs");
    (out.status.success(), String::from_utf8(out.stdout).unwrap())
}

/// The final states `finish` prints, by run.
fn states(out: &str) -> Vec<(String, serde_json::Value)> {
    out.lines()
        .filter_map(|l| l.strip_prefix("state "))
        .map(|l| {
            let (run, json) = l.split_once(' ').unwrap();
            (run.to_owned(), serde_json::from_str(json).unwrap())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_killed_at_its_commit_leaves_the_run_fully_old_or_fully_new() {
    // The reference: both runs migrated without a kill, then finished.
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference");
    assert_eq!(child(&reference, &["setup", "x-"], None), (true, "ready\n".to_owned()));
    for run in ["x-asks", "x-sleeps"] {
        let (ok, out) = child(&reference, &["migrate", run], None);
        assert!(ok && out.starts_with("migrated "), "{out}");
    }
    let (ok, out) = child(&reference, &["finish", "x-asks", "x-sleeps"], None);
    assert!(ok, "{out}");
    let expected = states(&out);
    assert_eq!(expected.len(), 2, "{out}");
    for (run, kind) in [("x-asks", "asks"), ("x-sleeps", "sleeps")] {
        for when in ["before", "after"] {
            let store = dir.path().join(format!("{kind}-{when}"));
            assert!(child(&store, &["setup", "x-"], None).0);
            let before = {
                let s = SledStore::open(&store).unwrap();
                (s.run_info(run).await.unwrap().unwrap(), s.latest(run).await.unwrap().unwrap())
            };
            let (ok, out) = child(&store, &["migrate", run], Some(&format!("1:{when}")));
            assert!(!ok, "{run} {when}: the child was to abort, printed {out:?}");
            {
                let s = SledStore::open(&store).unwrap();
                let info = s.run_info(run).await.unwrap().unwrap();
                let cp = s.latest(run).await.unwrap().unwrap();
                if info.graph_fingerprint == v1::FINGERPRINT {
                    assert_eq!((&info, &cp), (&before.0, &before.1), "{run} {when}: fully old");
                } else {
                    assert_eq!(info.graph_fingerprint, v2::FINGERPRINT, "{run} {when}");
                    assert_eq!((cp.step, &*cp.graph_fingerprint), (before.1.step + 1, v2::FINGERPRINT));
                    assert_eq!(info.status.waits().len(), 1, "{run} {when}: still parked");
                    assert_eq!(info.status.waits()[0].id, before.0.status.waits()[0].id);
                    assert_eq!(info.status.wake_at_ms(), before.0.status.wake_at_ms());
                }
                // Killed before the commit, nothing was written; after it, everything was.
                assert_eq!(info.graph_fingerprint == v2::FINGERPRINT, when == "after", "{run} {when}");
            }
            let (ok, out) = child(&store, &["finish", "x-asks", "x-sleeps"], None);
            assert!(ok, "{run} {when}: {out}");
            assert_eq!(states(&out), expected, "{run} {when}");
        }
    }
}
