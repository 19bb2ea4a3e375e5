//! Canonical state bytes: a state holding a `HashMap` gives the same checkpoint keys and state hashes in
//! every process (each has its own hash-map order), resumes across a kill, and a state whose bytes are not
//! a function of its value is refused with an error that says so.

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use graph_runtime::Error;
use graph_runtime::prelude::*;

const STEPS: u64 = 12;

/// `(lines "cp <step> <key> <state hash>", final state hash)` of a child run.
fn run_child(dir: &std::path::Path, abort_at: Option<u64>) -> (Vec<String>, Option<String>, bool) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tally_child"));
    c.arg(dir).arg(STEPS.to_string());
    match abort_at {
        Some(at) => c.env("ABORT_AT", at.to_string()),
        None => c.env_remove("ABORT_AT"),
    };
    let out = c.output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let cps = text.lines().filter(|l| l.starts_with("cp ")).map(str::to_owned).collect();
    let done = text.lines().find_map(|l| l.strip_prefix("done ")).map(str::to_owned);
    (cps, done, out.status.success())
}

#[test]
fn a_hash_map_state_commits_the_same_keys_and_hashes_in_every_process_and_resumes_after_a_kill() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (first, done_a, ok_a) = run_child(a.path(), None);
    let (second, done_b, ok_b) = run_child(b.path(), None);
    assert!(ok_a && ok_b);
    assert_eq!(first.len() as u64, STEPS + 1);
    assert_eq!(first, second, "two processes, two hash-map orders, one history");
    assert_eq!(done_a, done_b);
    // Killed while step 5 runs, resumed by another process: the same history and result.
    let c = tempfile::tempdir().unwrap();
    let (_, _, ok) = run_child(c.path(), Some(5));
    assert!(!ok, "the child aborted");
    let (resumed, done_c, ok) = run_child(c.path(), None);
    assert!(ok, "the resume completed");
    assert_eq!(resumed, first);
    assert_eq!(done_c, done_a);
}

/// A state whose `Serialize` writes a counter: the same value, other bytes each time.
#[derive(Clone, Debug, Default, Deserialize)]
struct Ticking {
    n: u64,
}

static TICKS: AtomicU64 = AtomicU64::new(0);

impl Serialize for Ticking {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Ticking", 1)?;
        st.serialize_field("n", &(self.n + TICKS.fetch_add(1, Ordering::Relaxed)))?;
        st.end()
    }
}

impl Reducer for Ticking {
    type Delta = ();
    fn apply(&mut self, _: ()) -> Result<(), graph_runtime::MergeError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_state_whose_bytes_change_between_serializations_is_refused_saying_so() {
    let g = Graph::<Ticking>::builder("ticking")
        .node("n", |_s, _c| Box::pin(async { Ok(((), Route::Declared)) }))
        .entry("n")
        .edge("n", END)
        .build()
        .unwrap();
    let engine = Engine::builder(g).build();
    let err = engine.run("t", Ticking::default()).await.unwrap_err();
    assert!(matches!(&err, Error::NondeterministicState { step: 0, .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("not serialized deterministically") && msg.contains("serializing it twice"),
        "{msg}"
    );
    assert!(!msg.contains("backup"), "not reported as damage: {msg}");
    assert!(engine.store().run_info("t").await.unwrap().is_none(), "nothing was committed");
}

/// A hand-written state holding a `HashSet` (the `#[reducer]` macro refuses one): a round trip through
/// its bytes gives another order.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Bag {
    items: std::collections::HashSet<u64>,
}

impl Reducer for Bag {
    type Delta = ();
    fn apply(&mut self, _: ()) -> Result<(), graph_runtime::MergeError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_hash_set_in_the_state_is_caught_when_its_snapshot_is_written() {
    let g = Graph::<Bag>::builder("bag")
        .node("n", |_s, _c| Box::pin(async { Ok(((), Route::Declared)) }))
        .entry("n")
        .edge("n", END)
        .build()
        .unwrap();
    // With 64 elements a fresh set iterates in the same order with negligible probability.
    let input = Bag { items: (0..64).collect() };
    let err = Engine::builder(g).build().run("b", input).await.unwrap_err();
    assert!(matches!(&err, Error::NondeterministicState { step: 0, .. }), "{err:?}");
    assert!(err.to_string().contains("read back"), "{err}");
}
