//! The engine: runs, resumes and cancels runs of one graph, step by step.
//!
//! The loop of a run, for step `N` with committed state `S_N` and frontier `F_N`:
//!
//! 1. execute every item of `F_N` against `S_N` (`step.rs`);
//! 2. at the barrier, merge their deltas into `S_N` in ascending order key, giving `S_{N+1}`;
//! 3. build `F_{N+1}` from their routes (`frontier.rs`);
//! 4. commit checkpoint `N+1` (state, frontier, idempotency key, run row) to the store, and only then
//!    dispatch its items. An empty `F_{N+1}` means every path reached END: the run is complete.
//!
//! A crash anywhere loses at most the step in flight; `resume` re-executes it from checkpoint `N` and,
//! nodes being deterministic, commits the same checkpoint `N+1`.

mod advance;
mod audit;
mod builder;
mod frontier;
mod interrupt;
mod replay;
mod step;
mod streaming;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::effect::RunEnv;
use crate::error::{Error, Result};
use crate::events::{ChainKey, EventType, Payload, payload};
use crate::graph::Graph;
use crate::keys::{OrderKey, PathId, derive_run_seed};
use crate::persist::{self, Chain, Draft};
use crate::policy::EngineOptions;
use crate::state::Reducer;
use crate::store::{CommitOutcome, InterruptKind, MemoryStore, RunStatus, Store, WorkItem};
use crate::stream::{StreamEvent, StreamModes};
use advance::{Driven, Stop};
pub use audit::{ChainReport, HistoryEntry, run_history, verify_run};
pub use builder::{EngineBuilder, RunOptions, RunOutcome};
pub use replay::ReplayOutcome;

/// Runs one graph against one store. Cheap to clone; clones share the store, the admission queue and
/// the registry of active runs.
pub struct Engine<S: Reducer> {
    inner: Arc<Inner<S>>,
}

impl<S: Reducer> Clone for Engine<S> {
    fn clone(&self) -> Self {
        Engine { inner: self.inner.clone() }
    }
}

struct Inner<S: Reducer> {
    graph: Graph<S>,
    store: Arc<dyn Store>,
    /// What effect calls reach: the store's journal, or a replay's recording.
    env: Arc<RunEnv>,
    options: EngineOptions,
    admission: Arc<Semaphore>,
    active: Mutex<HashMap<String, CancellationToken>>,
    /// The key of the keyed event chain, when there is one.
    chain_key: Option<ChainKey>,
}

impl<S: Reducer> Engine<S> {
    /// Starts configuring an engine for `graph`.
    pub fn builder(graph: Graph<S>) -> EngineBuilder<S> {
        EngineBuilder::new(graph)
    }

    /// The graph.
    pub fn graph(&self) -> &Graph<S> {
        &self.inner.graph
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The options in force.
    pub fn options(&self) -> &EngineOptions {
        &self.inner.options
    }

    /// Starts a new run and drives it to completion, a pause, or an error.
    ///
    /// # Errors
    ///
    /// [`Error::RunExists`] for a used id; otherwise what stopped the run (see [`Error`]). After any
    /// error the last committed step is intact and [`Engine::resume`] continues from it.
    pub async fn run(&self, run_id: &str, input: S) -> Result<RunOutcome<S>> {
        self.run_with(run_id, input, RunOptions::default()).await
    }

    /// [`Engine::run`] with options.
    ///
    /// # Errors
    ///
    /// As [`Engine::run`].
    pub async fn run_with(&self, run_id: &str, input: S, opts: RunOptions) -> Result<RunOutcome<S>> {
        let (mut cp, chain, version, head) = self.start(run_id, &input, &opts).await?;
        let entry = self.inner.graph.entry_index();
        let mut run = self.driver(run_id.into(), &mut cp, input, chain, vec![entry], opts);
        (run.version, run.head, run.resumed) = (version, head, false);
        self.drive(run).await
    }

    /// Writes a new run and its step 0 (the first checkpoint [`Engine::run`] writes) without executing
    /// anything: the run is `Running`, and any engine's [`Engine::resume`] or a
    /// `graph_runtime::worker::Worker` (features `postgres` / `mysql`) on the same store picks it up.
    ///
    /// # Errors
    ///
    /// [`Error::RunExists`] for a used id; store errors.
    pub async fn submit(&self, run_id: &str, input: S) -> Result<()> {
        self.submit_with(run_id, input, RunOptions::default()).await
    }

    /// [`Engine::submit`] with options (seed and label are stored; the rest apply to whoever drives it).
    ///
    /// # Errors
    ///
    /// As [`Engine::submit`].
    pub async fn submit_with(&self, run_id: &str, input: S, opts: RunOptions) -> Result<()> {
        self.start(run_id, &input, &opts).await?;
        tracing::info!(run = run_id, graph = self.inner.graph.name(), "run submitted");
        Ok(())
    }

    /// Commits step 0 of a new run: its checkpoint, chain and version, and its event head.
    async fn start(
        &self,
        run_id: &str,
        input: &S,
        opts: &RunOptions,
    ) -> Result<(crate::store::Checkpoint, Chain, u64, Option<crate::events::ChainHead>)> {
        let store = &self.inner.store;
        if store.run_info(run_id).await?.is_some() {
            return Err(Error::RunExists { run: run_id.to_owned() });
        }
        let graph = &self.inner.graph;
        let seed = opts.seed.unwrap_or_else(|| derive_run_seed(run_id));
        let run: Arc<str> = run_id.into();
        let entry = graph.entry_index();
        let frontier = vec![WorkItem {
            node: graph.node(entry).name().clone(),
            order_key: OrderKey::ENTRY,
            path: PathId::entry(graph.entry()),
            input: None,
        }];
        let draft = Draft {
            run_id: &run,
            step: 0,
            state: input,
            deltas: None,
            frontier,
            waiting: Vec::new(),
            outbox: Vec::new(),
            seed,
            label: opts.label.clone(),
            fingerprint: graph.fingerprint_arc(),
            not_before_ms: 0,
            at_ms: self.recorded_time(0),
            event_head: None,
        };
        let mut chain = Chain::default();
        let cp = persist::draft(draft, &mut chain)?;
        let started = payload!({
            "step": 0,
            "graph": graph.name(),
            "fingerprint": graph.fingerprint(),
            "state_hash": cp.state_hash,
            "idempotency_key": cp.idempotency_key,
            "seed": seed,
            "label": cp.label,
            "shape": graph.shape(),
        });
        let (events, head) = self.chain(None, [(EventType::RunStarted, started)], cp.timestamp_ms);
        let committing = crate::telemetry::Stopwatch::now();
        let outcome = store.save_checkpoint(&cp, &events, &RunStatus::Running, 0).await;
        graph.meters().commit(crate::telemetry::Stopwatch::now().since(committing), outcome.as_ref().ok());
        let CommitOutcome::Committed { version } = outcome? else {
            return Err(Error::RunExists { run: run_id.to_owned() });
        };
        tracing::info!(run = run_id, graph = graph.name(), "run started");
        Ok((cp, chain, version, head))
    }

    /// Continues a run from its latest checkpoint, after verifying the event log from that checkpoint on
    /// (see [`crate::events`]). A completed run returns its final state without executing anything; a run
    /// that waits for input (`Ctx::interrupt`) returns its `Interrupted` status unchanged (answer it with
    /// [`Engine::resume_with_input`]); a run stopped at a breakpoint continues past it.
    ///
    /// # Errors
    ///
    /// [`Error::RunNotFound`], [`Error::GraphChanged`], [`Error::ExecutionCorrupted`] for a broken event
    /// log, store errors for unreadable checkpoints, and whatever stops the run.
    pub async fn resume(&self, run_id: &str) -> Result<RunOutcome<S>> {
        self.resume_with(run_id, RunOptions::default()).await
    }

    /// [`Engine::resume`] with options (the seed is the stored one).
    ///
    /// # Errors
    ///
    /// As [`Engine::resume`].
    pub async fn resume_with(&self, run_id: &str, opts: RunOptions) -> Result<RunOutcome<S>> {
        let (info, mut cp) = self.stored(run_id).await?;
        let (state, chain) = persist::load_state(&*self.inner.store, &cp).await?;
        let nodes = self.node_indices(&cp)?;
        // A completed run, or one that waits for input, stays as it is.
        let waits = |i: &crate::store::Interrupt| i.kind == InterruptKind::Input;
        let stays = match &info.status {
            _ if cp.frontier.is_empty() => Some(RunStatus::Completed),
            RunStatus::Interrupted(list) if list.iter().any(waits) => Some(info.status.clone()),
            _ => None,
        };
        if let Some(status) = stays {
            return Ok(RunOutcome { run_id: run_id.to_owned(), state, status, steps: cp.step });
        }
        let past_breakpoint = matches!(&info.status, RunStatus::Interrupted(list)
            if list.iter().any(|i| i.kind == InterruptKind::Before && i.step == cp.step));
        let resumption = self.load_pending(run_id, cp.step).await?;
        let mut run = self.driver(run_id.into(), &mut cp, state, chain, nodes, opts);
        (run.version, run.head) = (info.version, info.event_head.clone());
        (run.resumption, run.past_breakpoint) = (resumption, past_breakpoint);
        if info.status != RunStatus::Running {
            let resumed = payload!({ "step": cp.step, "from": info.status.as_str() });
            match self
                .write_status(&mut run, &RunStatus::Running, (EventType::Resumed, resumed), None)
                .await?
            {
                CommitOutcome::Committed { .. } => {}
                other => return Err(Error::version_conflict(run_id, info.version, &other)),
            }
        }
        tracing::info!(run = run_id, step = cp.step, "run resumed");
        self.drive(run).await
    }

    /// Starts the run if the store does not have it, or continues it if it does (LangGraph users continue
    /// a thread by its id). By the stored status:
    ///
    /// | stored | what happens | `input` |
    /// |---|---|---|
    /// | no run | [`Engine::run`]: starts it | the run's input |
    /// | `Completed` | returns the stored final state; nothing executes | unused |
    /// | `Running` (a crash or a kill), `Paused`, `Cancelled`, `Failed` | [`Engine::resume`]: continues from the last committed step | unused |
    ///
    /// # Examples
    ///
    /// ```
    /// # use graph_runtime::prelude::*;
    /// # use graph_runtime::node::BoxFuture;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), graph_runtime::Error> {
    /// # fn hop<'a>(_s: &'a (), _c: &'a mut Ctx) -> BoxFuture<'a, NodeResult<(), Route>> {
    /// #     Box::pin(async { Ok(((), Route::End)) })
    /// # }
    /// # let graph = Graph::<()>::builder("g").node("hop", hop).entry("hop").edge("hop", END).build()?;
    /// let engine = Engine::builder(graph).build();
    /// let first = engine.run_or_resume("thread-1", ()).await?; // starts it
    /// let again = engine.run_or_resume("thread-1", ()).await?; // the stored result
    /// assert!(first.is_completed() && again.is_completed());
    /// assert_eq!(first.steps, again.steps);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Engine::run`] and [`Engine::resume`].
    pub async fn run_or_resume(&self, run_id: &str, input: S) -> Result<RunOutcome<S>> {
        self.run_or_resume_with(run_id, input, RunOptions::default()).await
    }

    /// [`Engine::run_or_resume`] with options (a resumed run keeps its stored seed).
    ///
    /// # Errors
    ///
    /// As [`Engine::run_or_resume`].
    pub async fn run_or_resume_with(
        &self,
        run_id: &str,
        input: S,
        opts: RunOptions,
    ) -> Result<RunOutcome<S>> {
        if self.inner.store.run_info(run_id).await?.is_some() {
            return self.resume_with(run_id, opts).await;
        }
        match self.run_with(run_id, input, opts.clone()).await {
            // Another writer created it between the check and the first commit.
            Err(Error::RunExists { .. }) => self.resume_with(run_id, opts).await,
            other => other,
        }
    }

    /// The stored outcome of a run, without executing anything: its status and the state at its latest
    /// committed step (the final state once `Completed`; for a run that is `Running` here or elsewhere,
    /// the last committed step's). `None` when the store has no such run.
    ///
    /// # Errors
    ///
    /// Store errors for unreadable checkpoints; [`Error::GraphChanged`] when the run was started by
    /// another graph (its state may not be this graph's state type).
    pub async fn outcome(&self, run_id: &str) -> Result<Option<RunOutcome<S>>> {
        let store = &self.inner.store;
        let Some(info) = store.run_info(run_id).await? else { return Ok(None) };
        if info.graph_fingerprint != self.inner.graph.fingerprint() {
            return Err(Error::GraphChanged {
                run: run_id.to_owned(),
                stored: info.graph_fingerprint,
                current: self.inner.graph.fingerprint().to_owned(),
            });
        }
        let Some(cp) = store.latest(run_id).await? else { return Ok(None) };
        let (state, _) = persist::load_state(&**store, &cp).await?;
        Ok(Some(RunOutcome { run_id: run_id.to_owned(), state, status: info.status, steps: cp.step }))
    }

    /// Cancels a run this engine is driving; false if it is not active here.
    pub fn cancel(&self, run_id: &str) -> bool {
        let active = self.inner.active.lock().unwrap_or_else(|e| e.into_inner());
        active.get(run_id).map(|t| t.cancel()).is_some()
    }

    /// The state stored at `step` of a run.
    ///
    /// # Errors
    ///
    /// Store errors; [`Error::Serialization`] when the stored state does not decode as `S`.
    pub async fn state_at(&self, run_id: &str, step: u64) -> Result<Option<S>> {
        match self.inner.store.load_checkpoint(run_id, step).await? {
            Some(cp) => Ok(Some(persist::load_state(&*self.inner.store, &cp).await?.0)),
            None => Ok(None),
        }
    }

    /// Drives the run on a task of its own, inside a `run` span.
    ///
    /// A step's items are tasks; when the driver is a task too, spawning them and collecting their
    /// results stays on the runtime's worker threads instead of waking the caller's thread (`block_on`,
    /// `#[tokio::main]`) once per item (bench `fanout`; the A/B is in docs/BENCHMARKS.md). Dropping the
    /// returned future aborts the task, as dropping the driver itself would; a panic in it resumes in
    /// the caller.
    async fn drive(&self, run: Driven<S>) -> Result<RunOutcome<S>> {
        let (run_id, step) = (run.run_id.clone(), run.step);
        let span = tracing::info_span!(
            "run",
            run = &*run_id,
            graph = self.inner.graph.name(),
            otel.name = tracing::field::Empty,
        );
        #[cfg(feature = "otel")]
        span.record("otel.name", format!("run {}", self.inner.graph.name()));
        let engine = self.clone();
        let mut task =
            AbortOnDrop(tokio::spawn(async move { engine.drive_here(run).await }.instrument(span)));
        match (&mut task.0).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down.
            Err(_) => Err(Error::Cancelled { run: run_id.to_string(), step }),
        }
    }

    /// The step loop: advance until the frontier is empty (completed), a limit, an interrupt, a pause or
    /// an error.
    ///
    /// An `async move` block rather than an `async fn`, which would hold `run` twice (rustc keeps a moved-in
    /// argument beside its local copy): the run's task is what a run parked in a node costs.
    #[allow(clippy::manual_async_fn, reason = "an async fn would hold its moved-in argument twice")]
    fn drive_here(&self, mut run: Driven<S>) -> impl Future<Output = Result<RunOutcome<S>>> + Send + '_ {
        async move {
            let _registration = Registration::new(&self.inner.active, &run)?;
            emit_started(&run).await;
            loop {
                if run.frontier.is_empty() {
                    tracing::info!(run = %run.run_id, steps = run.step, "run completed");
                    return Ok(run.outcome(RunStatus::Completed));
                }
                if self.replay_done(run.step) {
                    return Ok(run.outcome(RunStatus::Running));
                }
                if run.stop.as_ref().is_some_and(CancellationToken::is_cancelled) {
                    tracing::info!(run = %run.run_id, step = run.step, "run stopped at a step boundary; left running");
                    return Ok(run.outcome(RunStatus::Running));
                }
                let max_steps = self.inner.options.max_steps;
                if run.step >= max_steps {
                    let err = Error::MaxStepsExceeded { run: run.run_id.to_string(), max_steps };
                    return Err(self.fail(&mut run, err).await);
                }
                let before = self.breakpoints(&run, InterruptKind::Before);
                if !before.is_empty() && !run.past_breakpoint {
                    return self.stop_at_breakpoint(run, before).await;
                }
                let after = self.breakpoints(&run, InterruptKind::After);
                let span = step_span(&run.run_id, run.step);
                match self.advance(&mut run).instrument(span).await {
                    Ok(()) if !after.is_empty() && !run.frontier.is_empty() => {
                        let step = run.step;
                        let after =
                            after.into_iter().map(|i| crate::store::Interrupt { step, ..i }).collect();
                        return self.stop_at_breakpoint(run, after).await;
                    }
                    Ok(()) => {}
                    Err(Stop::Interrupted(list)) => {
                        tracing::info!(run = %run.run_id, step = run.step, interrupts = list.len(), "run interrupted");
                        if let Some(o) = &run.observer {
                            o.emit(StreamModes::DEBUG, StreamEvent::Interrupted { interrupts: list.clone() })
                                .await;
                        }
                        return Ok(run.outcome(RunStatus::Interrupted(list)));
                    }
                    Err(Stop::Rejected(err)) => return Err(err),
                    Err(Stop::Paused(reason)) => {
                        tracing::info!(run = %run.run_id, step = run.step, ?reason, "run paused");
                        let status = RunStatus::Paused(reason);
                        let paused = payload!({ "step": run.step, "reason": status });
                        self.set_final_status(&mut run, &status, (EventType::RunPaused, paused)).await;
                        return Ok(run.outcome(status));
                    }
                    Err(Stop::Cancelled) => {
                        let cancelled = payload!({ "step": run.step });
                        let event = (EventType::RunCancelled, cancelled);
                        self.set_final_status(&mut run, &RunStatus::Cancelled, event).await;
                        return Err(Error::Cancelled { run: run.run_id.to_string(), step: run.step });
                    }
                    Err(Stop::Error(err)) => return Err(self.fail(&mut run, err).await),
                }
            }
        }
    }

    /// Records a failure in the run row and returns the error.
    async fn fail(&self, run: &mut Driven<S>, err: Error) -> Error {
        tracing::warn!(run = %run.run_id, step = run.step, error = %err, "run failed");
        let failed = payload!({ "step": run.step, "error": err.to_string() });
        self.set_final_status(run, &RunStatus::Failed(err.to_string()), (EventType::RunFailed, failed)).await;
        err
    }

    /// Best effort: the checkpoint is what matters; a status that fails to persist is logged. What a
    /// resumption brought (inputs given to interrupted items) is kept with it.
    async fn set_final_status(&self, run: &mut Driven<S>, status: &RunStatus, event: (EventType, Payload)) {
        let pending = run.resumption.as_ref().map(persist::PendingStep::encode);
        match self.write_status(run, status, event, pending.as_deref()).await {
            Ok(CommitOutcome::Committed { .. }) => {}
            Ok(other) => tracing::warn!(run = %run.run_id, ?other, "run status not updated"),
            Err(e) => tracing::warn!(run = %run.run_id, error = %e, "run status not updated"),
        }
    }
}

/// Streams the start of a driver: `RunStarted` (DEBUG) and the state it starts from (VALUES).
async fn emit_started<S: Reducer>(run: &Driven<S>) {
    let Some(o) = &run.observer else { return };
    let started =
        StreamEvent::RunStarted { run_id: run.run_id.to_string(), step: run.step, resumed: run.resumed };
    o.emit(StreamModes::DEBUG, started).await;
    if o.wants(StreamModes::VALUES) {
        o.emit(StreamModes::VALUES, StreamEvent::Values { step: run.step, state: (*run.state).clone() })
            .await;
    }
}

/// The span of one step of a run.
fn step_span(run: &str, step: u64) -> tracing::Span {
    let span = tracing::debug_span!("step", run, step, otel.name = tracing::field::Empty);
    #[cfg(feature = "otel")]
    span.record("otel.name", format!("step {step}"));
    span
}

/// A run's task, aborted when dropped: dropping `Engine::drive`'s future before the run ends stops the
/// run as dropping the driver itself would (aborting a finished task does nothing).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Registers a run as driven by this engine, and removes it when its driver ends, however it ends.
struct Registration<'a> {
    active: &'a Mutex<HashMap<String, CancellationToken>>,
    run: Arc<str>,
}

impl<'a> Registration<'a> {
    fn new<S: Reducer>(
        active: &'a Mutex<HashMap<String, CancellationToken>>,
        run: &Driven<S>,
    ) -> Result<Self> {
        let mut map = active.lock().unwrap_or_else(|e| e.into_inner());
        if map.contains_key(&*run.run_id) {
            return Err(Error::AlreadyRunning { run: run.run_id.to_string() });
        }
        map.insert(run.run_id.to_string(), run.cancel.clone());
        Ok(Registration { active, run: run.run_id.clone() })
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.active.lock().unwrap_or_else(|e| e.into_inner()).remove(&*self.run);
    }
}
