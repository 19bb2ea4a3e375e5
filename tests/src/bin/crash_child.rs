//! The process the crash tests kill: starts or resumes one run of [`graph_tests::crash_graph`] on a sled
//! store and prints the final state's hash.
//!
//! `crash_child <store dir> <run id> <iterations>` (with `CRASH_GRAPH=join`, the rounds of
//! [`graph_tests::graphs::wait_for_join`] instead); with `CRASH_AT=<step>:<before|during|after>` the
//! process aborts just before, in the middle of, or just after the commit of that step. Every commit the
//! store acknowledged is printed as `ack <step>` the moment it is, so the test can check that no
//! acknowledged commit is lost by a kill.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use graph_runtime::events::Event;
use graph_runtime::store::{
    Checkpoint, CheckpointMeta, EffectOutcome, EffectRecord, EffectState, OutboxRow, RunFilter, RunInfo,
    SledStore,
};
use graph_runtime::{CommitOutcome, Engine, RunStatus, Store, StoreError};
use graph_tests::{Trace, crash_graph, random_delay, state_hash};

/// Delegates to sled, reporting acknowledged commits and aborting the process at one commit point.
struct Crashing {
    inner: SledStore,
    step: u64,
    point: String,
}

#[async_trait]
impl Store for Crashing {
    async fn save_checkpoint(
        &self,
        cp: &Checkpoint,
        events: &[Event],
        status: &RunStatus,
        v: u64,
    ) -> Result<CommitOutcome, StoreError> {
        let armed = cp.step == self.step;
        if armed && self.point == "before" {
            std::process::abort();
        }
        if armed && self.point == "during" {
            // Abort from another thread while this one is inside the transaction or its flush.
            let delay = random_delay(Duration::from_micros(3000), cp.step);
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                std::process::abort();
            });
        }
        let out = self.inner.save_checkpoint(cp, events, status, v).await?;
        if matches!(out, CommitOutcome::Committed { .. } | CommitOutcome::AlreadyCommitted { .. }) {
            println!("ack {}", cp.step); // stdout is line-buffered: this line is out before the next commit
        }
        if armed && self.point == "after" {
            std::process::abort();
        }
        Ok(out)
    }
    async fn set_status(
        &self,
        run: &str,
        s: &RunStatus,
        events: &[Event],
        pending: Option<&[u8]>,
        v: u64,
    ) -> Result<CommitOutcome, StoreError> {
        self.inner.set_status(run, s, events, pending, v).await
    }
    async fn events(&self, run: &str, from: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        self.inner.events(run, from, limit).await
    }
    async fn pending(&self, run: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.pending(run).await
    }
    async fn run_info(&self, run: &str) -> Result<Option<RunInfo>, StoreError> {
        self.inner.run_info(run).await
    }
    async fn load_checkpoint(&self, run: &str, step: u64) -> Result<Option<Checkpoint>, StoreError> {
        self.inner.load_checkpoint(run, step).await
    }
    async fn latest(&self, run: &str) -> Result<Option<Checkpoint>, StoreError> {
        self.inner.latest(run).await
    }
    async fn checkpoints(&self, run: &str, from: u64, to: u64) -> Result<Vec<Checkpoint>, StoreError> {
        self.inner.checkpoints(run, from, to).await
    }
    async fn history(&self, run: &str) -> Result<Vec<CheckpointMeta>, StoreError> {
        self.inner.history(run).await
    }
    async fn list_runs(&self, f: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        self.inner.list_runs(f).await
    }
    async fn prune(&self, run: &str, keep: usize) -> Result<usize, StoreError> {
        self.inner.prune(run, keep).await
    }
    async fn load_effect(&self, key: &str) -> Result<Option<EffectRecord>, StoreError> {
        self.inner.load_effect(key).await
    }
    async fn put_effect(
        &self,
        r: &EffectRecord,
        e: Option<&EffectState>,
    ) -> Result<EffectOutcome, StoreError> {
        self.inner.put_effect(r, e).await
    }
    async fn effects(&self, run: &str) -> Result<Vec<EffectRecord>, StoreError> {
        self.inner.effects(run).await
    }
    async fn outbox(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        self.inner.outbox(limit).await
    }
    async fn ack_outbox(&self, keys: &[String]) -> Result<usize, StoreError> {
        self.inner.ack_outbox(keys).await
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, run, iterations] = args.as_slice() else {
        eprintln!("usage: crash_child <store dir> <run id> <iterations>");
        std::process::exit(2);
    };
    let iterations: u64 = iterations.parse().expect("iterations is a number");
    let sled = SledStore::open(dir).expect("the store opens");
    let (step, point) = match std::env::var("CRASH_AT") {
        Ok(spec) => {
            let (step, point) = spec.split_once(':').expect("CRASH_AT=<step>:<point>");
            (step.parse().expect("a step"), point.to_owned())
        }
        Err(_) => (u64::MAX, String::new()),
    };
    let store: Arc<dyn Store> = Arc::new(Crashing { inner: sled, step, point });
    let graph = match std::env::var("CRASH_GRAPH").as_deref() {
        Ok("join") => graph_tests::graphs::wait_for_join(iterations, false),
        _ => crash_graph(iterations),
    };
    let engine = Engine::builder(graph).shared_store(store.clone()).build();
    let out = if store.run_info(run).await.expect("store readable").is_some() {
        engine.resume(run).await
    } else {
        engine.run(run, Trace::default()).await
    }
    .expect("the run completes");
    println!("done {} {}", out.steps, state_hash(&out.state));
}
