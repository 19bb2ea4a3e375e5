//! The engine: runs, resumes and cancels runs of one graph, step by step.
//!
//! The loop of a run, for step `N` with committed state `S_N` and frontier `F_N`:
//!
//! 1. execute every item of `F_N` against `S_N` ([`step`]);
//! 2. at the barrier, merge their deltas into `S_N` in ascending order key, giving `S_{N+1}`;
//! 3. build `F_{N+1}` from their routes ([`frontier`]);
//! 4. commit checkpoint `N+1` (state, frontier, idempotency key, run row) to the store, and only then
//!    dispatch its items. An empty `F_{N+1}` means every path reached END: the run is complete.
//!
//! A crash anywhere loses at most the step in flight; `resume` re-executes it from checkpoint `N` and,
//! nodes being deterministic, commits the same checkpoint `N+1`.

mod frontier;
mod step;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;

use crate::error::{Error, Result, StoreError};
use crate::graph::Graph;
use crate::keys::{OrderKey, PathId, derive_run_seed, hex, idempotency_key_of_sorted, sha256_parts};
use crate::policy::EngineOptions;
use crate::state::{MergeFailure, Reducer, Writer, merge_step};
use crate::store::{
    Checkpoint, CommitOutcome, MemoryStore, PauseReason, RunStatus, SCHEMA_VERSION, StateRepr, Store,
    WorkItem,
};
use step::{StepInput, StepStop, execute_step};

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
    options: EngineOptions,
    admission: Arc<Semaphore>,
    active: Mutex<HashMap<String, CancellationToken>>,
}

/// Configures an [`Engine`].
pub struct EngineBuilder<S: Reducer> {
    graph: Graph<S>,
    store: Option<Arc<dyn Store>>,
    options: EngineOptions,
}

impl<S: Reducer> EngineBuilder<S> {
    /// The store (default: a fresh [`MemoryStore`]).
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// A store shared with other engines.
    pub fn shared_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The options (default: [`EngineOptions::default`]).
    pub fn options(mut self, options: EngineOptions) -> Self {
        self.options = options;
        self
    }

    /// Builds the engine. Limits of zero are raised to one.
    pub fn build(self) -> Engine<S> {
        let mut options = self.options;
        options.max_concurrent_nodes = options.max_concurrent_nodes.max(1);
        options.queue_depth = options.queue_depth.clamp(1, Semaphore::MAX_PERMITS);
        Engine {
            inner: Arc::new(Inner {
                graph: self.graph,
                store: self.store.unwrap_or_else(|| Arc::new(MemoryStore::new())),
                admission: Arc::new(Semaphore::new(options.queue_depth)),
                options,
                active: Mutex::new(HashMap::new()),
            }),
        }
    }
}

/// Per-run options.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RunOptions {
    /// The run seed (default: derived from the run id). Ignored by `resume`, which uses the stored one.
    pub seed: Option<u64>,
    /// A token that cancels the run.
    pub cancel: Option<CancellationToken>,
    /// A label stored with the run's first checkpoint.
    pub label: Option<String>,
}

impl RunOptions {
    /// Sets the seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Sets the cancellation token.
    pub fn cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Sets the label.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }
}

/// How a `run` or `resume` call ended without error.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunOutcome<S> {
    /// The run.
    pub run_id: String,
    /// The state at the latest committed step (the final state when completed).
    pub state: S,
    /// `Completed`, or `Paused` with a reason.
    pub status: RunStatus,
    /// The latest committed step.
    pub steps: u64,
}

impl<S> RunOutcome<S> {
    /// True when the run reached END.
    pub fn is_completed(&self) -> bool {
        self.status == RunStatus::Completed
    }
}

/// A run being driven.
struct Driven<S> {
    run_id: Arc<str>,
    step: u64,
    state: Arc<S>,
    frontier: Vec<WorkItem>,
    /// The graph index of each frontier item's node.
    nodes: Vec<usize>,
    seed: u64,
    version: u64,
    cancel: CancellationToken,
    deadline: Instant,
    chain: Chain,
    /// When checkpoint `step` was committed, ms since the Unix epoch: what [`Ctx::now`] reads.
    time_ms: u64,
}

/// Where the run's delta chain stands: the snapshot it starts from and what was written since.
#[derive(Debug, Clone, Copy, Default)]
struct Chain {
    base: u64,
    delta_bytes: usize,
}

/// At most this many deltas between snapshots, so loading a state applies a bounded number of them.
const MAX_CHAIN: u64 = 1024;

impl<S: Reducer> Engine<S> {
    /// Starts configuring an engine for `graph`.
    pub fn builder(graph: Graph<S>) -> EngineBuilder<S> {
        EngineBuilder { graph, store: None, options: EngineOptions::default() }
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
        let store = &self.inner.store;
        if store.run_info(run_id).await?.is_some() {
            return Err(Error::RunExists { run: run_id.to_owned() });
        }
        let seed = opts.seed.unwrap_or_else(|| derive_run_seed(run_id));
        let entry = self.inner.graph.entry();
        let run: Arc<str> = run_id.into();
        let entry_index = self.inner.graph.inner.entry;
        let frontier = vec![WorkItem {
            node: self.inner.graph.inner.nodes[entry_index].name.clone(),
            order_key: OrderKey::ENTRY,
            path: PathId::entry(entry),
            input: None,
        }];
        let mut cp = self.checkpoint(
            &run,
            0,
            &input,
            None,
            frontier,
            seed,
            opts.label.clone(),
            &mut Chain::default(),
        )?;
        let version = match store.save_checkpoint(&cp, &RunStatus::Running, 0).await? {
            CommitOutcome::Committed { version } => version,
            _ => {
                return Err(Error::RunExists { run: run_id.to_owned() });
            }
        };
        tracing::info!(run = run_id, graph = self.inner.graph.name(), "run started");
        let span = tracing::info_span!("run", run = run_id);
        self.drive(
            Driven {
                run_id: run,
                step: 0,
                state: Arc::new(input),
                frontier: std::mem::take(&mut cp.frontier),
                nodes: vec![entry_index],
                seed,
                version,
                cancel: opts.cancel.unwrap_or_default(),
                deadline: Instant::now() + self.inner.options.run_wall_clock_budget,
                chain: Chain::default(),
                time_ms: cp.timestamp_ms,
            },
            span,
        )
        .await
    }

    /// Continues a run from its latest checkpoint. A completed run returns its final state without
    /// executing anything.
    ///
    /// # Errors
    ///
    /// [`Error::RunNotFound`], [`Error::GraphChanged`], store errors for unreadable checkpoints, and
    /// whatever stops the run.
    pub async fn resume(&self, run_id: &str) -> Result<RunOutcome<S>> {
        self.resume_with(run_id, RunOptions::default()).await
    }

    /// [`Engine::resume`] with options (the seed is the stored one).
    ///
    /// # Errors
    ///
    /// As [`Engine::resume`].
    pub async fn resume_with(&self, run_id: &str, opts: RunOptions) -> Result<RunOutcome<S>> {
        let store = &self.inner.store;
        let not_found = || Error::RunNotFound { run: run_id.to_owned() };
        let info = store.run_info(run_id).await?.ok_or_else(not_found)?;
        if info.graph_fingerprint != self.inner.graph.fingerprint() {
            return Err(Error::GraphChanged {
                run: run_id.to_owned(),
                stored: info.graph_fingerprint,
                current: self.inner.graph.fingerprint().to_owned(),
            });
        }
        let cp = store.latest(run_id).await?.ok_or_else(not_found)?;
        let (state, chain) = self.load_state(&cp).await?;
        let nodes = self.node_indices(&cp)?;
        if cp.frontier.is_empty() {
            return Ok(RunOutcome {
                run_id: run_id.to_owned(),
                state,
                status: RunStatus::Completed,
                steps: cp.step,
            });
        }
        let mut version = info.version;
        if info.status != RunStatus::Running {
            version = match store.set_status(run_id, &RunStatus::Running, version).await? {
                CommitOutcome::Committed { version } => version,
                other => return Err(self.version_conflict(run_id, version, &other)),
            };
        }
        tracing::info!(run = run_id, step = cp.step, "run resumed");
        let span = tracing::info_span!("run", run = run_id);
        self.drive(
            Driven {
                run_id: run_id.into(),
                step: cp.step,
                state: Arc::new(state),
                frontier: cp.frontier,
                nodes,
                seed: cp.rng_seed,
                version,
                cancel: opts.cancel.unwrap_or_default(),
                deadline: Instant::now() + self.inner.options.run_wall_clock_budget,
                chain,
                time_ms: cp.timestamp_ms,
            },
            span,
        )
        .await
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
            Some(cp) => Ok(Some(self.load_state(&cp).await?.0)),
            None => Ok(None),
        }
    }

    /// Drives the run on a task of its own, inside `span`.
    ///
    /// A step's items are tasks; when the driver is a task too, spawning them and collecting their
    /// results stays on the runtime's worker threads instead of waking the caller's thread (`block_on`,
    /// `#[tokio::main]`) once per item (bench `fanout`; the A/B is in docs/BENCHMARKS.md). Dropping the
    /// returned future aborts the task, as dropping the driver itself would; a panic in it resumes in
    /// the caller.
    async fn drive(&self, run: Driven<S>, span: tracing::Span) -> Result<RunOutcome<S>> {
        let (run_id, step) = (run.run_id.clone(), run.step);
        let engine = self.clone();
        let task = AbortOnDropHandle::new(tokio::spawn(
            async move { engine.drive_here(run).await }.instrument(span),
        ));
        match task.await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down.
            Err(_) => Err(Error::Cancelled { run: run_id.to_string(), step }),
        }
    }

    async fn drive_here(&self, mut run: Driven<S>) -> Result<RunOutcome<S>> {
        let _registration = {
            let mut active = self.inner.active.lock().unwrap_or_else(|e| e.into_inner());
            if active.contains_key(&*run.run_id) {
                return Err(Error::AlreadyRunning { run: run.run_id.to_string() });
            }
            active.insert(run.run_id.to_string(), run.cancel.clone());
            Registration { engine: &self.inner.active, run: run.run_id.clone() }
        };
        loop {
            if run.frontier.is_empty() {
                tracing::info!(run = %run.run_id, steps = run.step, "run completed");
                let state = Arc::try_unwrap(run.state).unwrap_or_else(|s| (*s).clone());
                return Ok(RunOutcome {
                    run_id: run.run_id.to_string(),
                    state,
                    status: RunStatus::Completed,
                    steps: run.step,
                });
            }
            if run.step >= self.inner.options.max_steps {
                let err = Error::MaxStepsExceeded {
                    run: run.run_id.to_string(),
                    max_steps: self.inner.options.max_steps,
                };
                return Err(self.fail(&run, err).await);
            }
            match self.advance(&mut run).await {
                Ok(()) => {}
                Err(Stop::Paused(reason)) => {
                    let status = RunStatus::Paused(reason);
                    self.set_final_status(&run, &status).await;
                    tracing::info!(run = %run.run_id, step = run.step, ?reason, "run paused");
                    let state = Arc::try_unwrap(run.state).unwrap_or_else(|s| (*s).clone());
                    return Ok(RunOutcome { run_id: run.run_id.to_string(), state, status, steps: run.step });
                }
                Err(Stop::Cancelled) => {
                    self.set_final_status(&run, &RunStatus::Cancelled).await;
                    return Err(Error::Cancelled { run: run.run_id.to_string(), step: run.step });
                }
                Err(Stop::Error(err)) => return Err(self.fail(&run, err).await),
            }
        }
    }

    /// Executes step `run.step`, merges, and commits step `run.step + 1`.
    async fn advance(&self, run: &mut Driven<S>) -> Result<(), Stop> {
        let g = &self.inner.graph;
        let opts = &self.inner.options;
        let step = run.step;
        let nodes = &run.nodes;
        let outputs = execute_step(StepInput {
            graph: g,
            options: opts,
            admission: &self.inner.admission,
            run_id: &run.run_id,
            run_seed: run.seed,
            time_ms: run.time_ms,
            step,
            items: &run.frontier,
            nodes,
            state: &run.state,
            cancel: &run.cancel,
            run_deadline: run.deadline,
        })
        .await
        .map_err(|stop| self.step_stop(run, nodes, stop))?;

        // Barrier passed: merge in ascending order key (the frontier is sorted).
        let mut deltas = Vec::with_capacity(outputs.len());
        let mut routes = Vec::with_capacity(outputs.len());
        for ((item, node), (delta, route)) in run.frontier.iter().zip(nodes).zip(outputs) {
            deltas.push((Writer { node: &g.inner.nodes[*node].name, order_key: item.order_key }, delta));
            routes.push((*node, route));
        }
        let run_arc = run.run_id.clone();
        let run_name = move || run_arc.to_string();
        let mut delta_json = Vec::with_capacity(256);
        serde::Serializer::collect_seq(
            &mut serde_json::Serializer::new(&mut delta_json),
            deltas.iter().map(|(_, d)| d),
        )
        .map_err(|source| Stop::Error(Error::Serialization { run: run_name(), what: "a delta", source }))?;
        // Every item has finished and dropped its handle on the state, so this merges in place. On error
        // the half-merged state is dropped with the run; checkpoint `step` is untouched.
        let state = Arc::make_mut(&mut run.state);
        merge_step(state, step, deltas, opts.conflict_policy).map_err(|f| {
            Stop::Error(match f {
                MergeFailure::Conflict(source) => Error::Conflict { run: run_name(), source },
                MergeFailure::Merge { node, error } => {
                    Error::Merge { run: run_name(), step, node, source: error }
                }
            })
        })?;
        let (frontier, next_nodes) =
            frontier::next_frontier(g, &run.run_id, step, &run.frontier, &routes).map_err(Stop::Error)?;

        let mut chain = run.chain;
        let mut cp = self
            .checkpoint(&run.run_id, step + 1, state, Some(delta_json), frontier, run.seed, None, &mut chain)
            .map_err(Stop::Error)?;
        // Recorded time never goes backwards along a run, whatever the wall clock does.
        cp.timestamp_ms = cp.timestamp_ms.max(run.time_ms);
        let status = if cp.frontier.is_empty() { RunStatus::Completed } else { RunStatus::Running };
        let outcome = self
            .inner
            .store
            .save_checkpoint(&cp, &status, run.version)
            .await
            .map_err(|e| Stop::Error(e.into()))?;
        match outcome {
            CommitOutcome::Committed { version } => {
                run.time_ms = cp.timestamp_ms;
                run.version = version;
                run.frontier = std::mem::take(&mut cp.frontier);
                run.nodes = next_nodes;
                run.chain = chain;
            }
            CommitOutcome::AlreadyCommitted { version } => {
                // The stored checkpoint is this exact one, but it may have been written as a snapshot
                // where ours would be a delta: continue from what is stored.
                run.version = version;
                run.frontier = std::mem::take(&mut cp.frontier);
                run.nodes = next_nodes;
                run.chain = match self.inner.store.load_checkpoint(&run.run_id, step + 1).await {
                    Ok(Some(stored)) => {
                        run.time_ms = stored.timestamp_ms;
                        self.chain_after(&stored).await.map_err(Stop::Error)?
                    }
                    _ => {
                        run.time_ms = cp.timestamp_ms;
                        chain
                    }
                };
            }
            CommitOutcome::StepTaken { version, existing_key } => {
                // Another writer committed a different result for this step: theirs is the truth.
                tracing::warn!(run = %run.run_id, step = step + 1, existing_key, "step taken by another writer; adopting it");
                let stored = self
                    .inner
                    .store
                    .load_checkpoint(&run.run_id, step + 1)
                    .await
                    .map_err(|e| Stop::Error(e.into()))?
                    .ok_or_else(|| {
                        Stop::Error(Error::Store(StoreError::Corrupted {
                            run: run_name(),
                            step: step + 1,
                            detail: "reported as taken but not loadable".into(),
                        }))
                    })?;
                let (state, chain) = self.load_state(&stored).await.map_err(Stop::Error)?;
                run.nodes = self.node_indices(&stored).map_err(Stop::Error)?;
                run.state = Arc::new(state);
                run.chain = chain;
                run.frontier = stored.frontier;
                run.time_ms = stored.timestamp_ms;
                run.version = version;
            }
            other => {
                return Err(Stop::Error(self.version_conflict(&run.run_id, run.version, &other)));
            }
        }
        run.step = step + 1;
        tracing::debug!(run = %run.run_id, step = run.step, items = run.frontier.len(), "step committed");
        Ok(())
    }

    fn step_stop(&self, run: &Driven<S>, nodes: &[usize], stop: StepStop) -> Stop {
        let g = &self.inner.graph.inner;
        let run_id = run.run_id.to_string();
        let node_name = |rank: usize| g.nodes[nodes[rank]].name.to_string();
        match stop {
            StepStop::Cancelled => Stop::Cancelled,
            StepStop::Backpressure => Stop::Paused(PauseReason::Backpressure),
            StepStop::Budget => Stop::Error(Error::BudgetExceeded {
                run: run_id,
                step: run.step,
                budget: self.inner.options.run_wall_clock_budget,
            }),
            StepStop::Panicked { rank, message } => Stop::Error(Error::NodePanicked {
                run: run_id,
                step: run.step,
                node: node_name(rank),
                message,
            }),
            StepStop::Failed { rank, attempts, error } => Stop::Error(match error.timeout() {
                Some(timeout) => Error::NodeTimeout {
                    run: run_id,
                    step: run.step,
                    node: node_name(rank),
                    timeout,
                    attempts,
                },
                None => Error::NodeFailed {
                    run: run_id,
                    step: run.step,
                    node: node_name(rank),
                    attempts,
                    source: error.into_inner(),
                },
            }),
        }
    }

    /// Records a failure in the run row and returns the error.
    async fn fail(&self, run: &Driven<S>, err: Error) -> Error {
        tracing::warn!(run = %run.run_id, step = run.step, error = %err, "run failed");
        self.set_final_status(run, &RunStatus::Failed(err.to_string())).await;
        err
    }

    /// Best effort: the checkpoint is what matters; a status that fails to persist is logged.
    async fn set_final_status(&self, run: &Driven<S>, status: &RunStatus) {
        match self.inner.store.set_status(&run.run_id, status, run.version).await {
            Ok(CommitOutcome::Committed { .. }) => {}
            Ok(other) => tracing::warn!(run = %run.run_id, ?other, "run status not updated"),
            Err(e) => tracing::warn!(run = %run.run_id, error = %e, "run status not updated"),
        }
    }

    fn version_conflict(&self, run_id: &str, expected: u64, outcome: &CommitOutcome) -> Error {
        let found = match outcome {
            CommitOutcome::VersionConflict { current }
            | CommitOutcome::Committed { version: current }
            | CommitOutcome::AlreadyCommitted { version: current }
            | CommitOutcome::StepTaken { version: current, .. } => *current,
        };
        Error::VersionConflict { run: run_id.to_owned(), expected, found }
    }

    /// Builds checkpoint `step`: the full state's JSON feeds the idempotency key and the state hash; what
    /// is stored is the step's deltas, unless a snapshot is due (see [`Chain`]).
    #[allow(clippy::too_many_arguments)]
    fn checkpoint(
        &self,
        run_id: &Arc<str>,
        step: u64,
        state: &S,
        delta_json: Option<Vec<u8>>,
        frontier: Vec<WorkItem>,
        seed: u64,
        label: Option<String>,
        chain: &mut Chain,
    ) -> Result<Checkpoint> {
        let state_json = serde_json::to_vec(state).map_err(|source| Error::Serialization {
            run: run_id.to_string(),
            what: "the state",
            source,
        })?;
        // The frontier is sorted by order key, and order keys are unique within a step.
        let key = idempotency_key_of_sorted(
            run_id,
            step,
            frontier.iter().map(|w| (&*w.node, w.order_key.0)),
            &state_json,
        );
        let state_hash = hex(&sha256_parts(&[&state_json]));
        let repr = match delta_json {
            Some(deltas)
                if step - chain.base < MAX_CHAIN && chain.delta_bytes + deltas.len() <= state_json.len() =>
            {
                chain.delta_bytes += deltas.len();
                StateRepr::Delta { base: chain.base, deltas }
            }
            _ => {
                *chain = Chain { base: step, delta_bytes: 0 };
                StateRepr::Full(state_json)
            }
        };
        Ok(Checkpoint {
            run_id: run_id.clone(),
            step,
            timestamp_ms: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
            label,
            state: repr,
            state_hash,
            rng_seed: seed,
            frontier,
            recorded_ios: Vec::new(),
            idempotency_key: key,
            graph_fingerprint: self.inner.graph.inner.fingerprint.clone(),
            schema_version: SCHEMA_VERSION,
        })
    }

    /// The graph index of every node `cp`'s frontier names.
    fn node_indices(&self, cp: &Checkpoint) -> Result<Vec<usize>> {
        let g = &self.inner.graph;
        cp.frontier
            .iter()
            .map(|w| {
                g.node_index(&w.node).ok_or_else(|| {
                    Error::Store(StoreError::Corrupted {
                        run: cp.run_id.to_string(),
                        step: cp.step,
                        detail: format!("frontier names node `{}`, which the graph does not have", w.node),
                    })
                })
            })
            .collect()
    }

    /// The full state of checkpoint `cp`: its snapshot plus the deltas after it, verified against the
    /// stored state hash; and the chain it ends.
    async fn load_state(&self, cp: &Checkpoint) -> Result<(S, Chain)> {
        let corrupted = |step: u64, detail: String| {
            Error::Store(StoreError::Corrupted { run: cp.run_id.to_string(), step, detail })
        };
        let check_version = |c: &Checkpoint| {
            if c.schema_version == SCHEMA_VERSION {
                Ok(())
            } else {
                Err(Error::Store(StoreError::UnsupportedSchemaVersion {
                    found: c.schema_version,
                    supported: SCHEMA_VERSION,
                }))
            }
        };
        check_version(cp)?;
        let (state, chain) = match &cp.state {
            StateRepr::Full(bytes) => {
                let hash = hex(&sha256_parts(&[bytes]));
                if hash != cp.state_hash {
                    return Err(corrupted(cp.step, "the state does not match its hash".into()));
                }
                let state = serde_json::from_slice(bytes)
                    .map_err(|e| corrupted(cp.step, format!("the state does not decode: {e}")))?;
                return Ok((state, Chain { base: cp.step, delta_bytes: 0 }));
            }
            StateRepr::Delta { base, .. } => {
                let links = self.inner.store.checkpoints(&cp.run_id, *base, cp.step).await?;
                let mut links = links.into_iter();
                let mut state: S = match links.next() {
                    Some(Checkpoint { step, state: StateRepr::Full(bytes), .. }) if step == *base => {
                        serde_json::from_slice(&bytes)
                            .map_err(|e| corrupted(*base, format!("the snapshot does not decode: {e}")))?
                    }
                    _ => return Err(corrupted(cp.step, format!("its snapshot at step {base} is missing"))),
                };
                let mut delta_bytes = 0;
                let mut expected = *base + 1;
                for link in links {
                    check_version(&link)?;
                    let StateRepr::Delta { deltas, .. } = &link.state else {
                        return Err(corrupted(link.step, "a snapshot inside a delta chain".into()));
                    };
                    if link.step != expected {
                        return Err(corrupted(expected, "missing from a delta chain".into()));
                    }
                    let items: Vec<S::Delta> = serde_json::from_slice(deltas)
                        .map_err(|e| corrupted(link.step, format!("the deltas do not decode: {e}")))?;
                    for d in items {
                        state.apply(d).map_err(|e| {
                            corrupted(link.step, format!("a stored delta does not apply: {e}"))
                        })?;
                    }
                    delta_bytes += deltas.len();
                    expected += 1;
                }
                if expected != cp.step + 1 {
                    return Err(corrupted(expected, "missing from a delta chain".into()));
                }
                (state, Chain { base: *base, delta_bytes })
            }
        };
        let json = serde_json::to_vec(&state).map_err(|source| Error::Serialization {
            run: cp.run_id.to_string(),
            what: "the state",
            source,
        })?;
        if hex(&sha256_parts(&[&json])) != cp.state_hash {
            return Err(corrupted(cp.step, "the rebuilt state does not match its hash".into()));
        }
        Ok((state, chain))
    }

    /// The chain as it stands after a stored checkpoint.
    async fn chain_after(&self, cp: &Checkpoint) -> Result<Chain> {
        Ok(match &cp.state {
            StateRepr::Full(_) => Chain { base: cp.step, delta_bytes: 0 },
            StateRepr::Delta { base, .. } => {
                let links = self.inner.store.checkpoints(&cp.run_id, *base + 1, cp.step).await?;
                Chain { base: *base, delta_bytes: links.iter().map(|c| c.state.len()).sum() }
            }
        })
    }
}

enum Stop {
    Paused(PauseReason),
    Cancelled,
    Error(Error),
}

/// Removes a run from the active registry when its driver ends, however it ends.
struct Registration<'a> {
    engine: &'a Mutex<HashMap<String, CancellationToken>>,
    run: Arc<str>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.engine.lock().unwrap_or_else(|e| e.into_inner()).remove(&*self.run);
    }
}
