//! `Engine::submit` (a run written, not executed) and `RunOptions::stop` (a run stopped at a step
//! boundary and left `Running`, nothing written): what workers build on, on the memory store.

use std::time::Duration;

use graph_runtime::{CancellationToken, Engine, Error, RunOptions, RunStatus};
use graph_tests::graphs::{no_log, worker_fanout};
use graph_tests::{Trace, history_hash, state_hash};

fn engine() -> Engine<Trace> {
    Engine::builder(worker_fanout(3, 3, Duration::from_millis(20), String::new(), no_log())).build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submitted_run_is_step_0_and_resumes_to_the_run_it_would_have_been() {
    let reference = engine();
    let whole = reference.run("r", Trace::default()).await.expect("run");
    let e = engine();
    e.submit("r", Trace::default()).await.expect("submit");
    let info = e.store().run_info("r").await.unwrap().expect("written");
    assert_eq!((info.status, info.latest_step, info.version), (RunStatus::Running, 0, 1));
    assert_eq!(e.store().history("r").await.unwrap().len(), 1, "only step 0");
    assert!(matches!(e.submit("r", Trace::default()).await, Err(Error::RunExists { .. })));
    let resumed = e.resume("r").await.expect("resume");
    assert!(resumed.is_completed());
    assert_eq!(state_hash(&resumed.state), state_hash(&whole.state));
    assert_eq!(history_hash(&**e.store(), "r").await, history_hash(&**reference.store(), "r").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_run_ends_at_a_step_boundary_left_running() {
    let e = engine();
    let stop = CancellationToken::new();
    let stopper = stop.clone();
    let store = e.store().clone();
    let watch = tokio::spawn(async move {
        loop {
            if store.run_info("s").await.unwrap().is_some_and(|i| i.latest_step >= 2) {
                stopper.cancel();
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    let out = e
        .run_with("s", Trace::default(), RunOptions::default().stop(stop))
        .await
        .expect("stopped, not failed");
    watch.await.unwrap();
    assert_eq!(out.status, RunStatus::Running);
    let info = e.store().run_info("s").await.unwrap().unwrap();
    assert_eq!(info.status, RunStatus::Running, "nothing written: still running");
    assert_eq!(info.latest_step, out.steps, "stopped right after a committed step");
    assert!(out.steps >= 2 && out.steps < 9, "stopped mid-run at step {}", out.steps);
    let rest = e.resume("s").await.expect("resume");
    assert!(rest.is_completed());
    let whole = engine().run("s", Trace::default()).await.unwrap();
    assert_eq!(state_hash(&rest.state), state_hash(&whole.state));
}
