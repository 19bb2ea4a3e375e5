//! The run loop, in one room: a driver ([`Driven`]) holds a run at its last committed checkpoint and
//! advances it step by step. One step, in named stages: execute the items of step `N`
//! ([`super::step`]), merge their deltas at the barrier, build frontier `N+1` ([`super::frontier`]),
//! draft checkpoint `N+1` ([`crate::persist`]), commit it, and adopt what the store says was committed.
//! A step that stops (interrupts, a pause, a cancellation, a failure) ends the loop with a status
//! write; every write the loop makes (commits and status changes, with their events) is made here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::core::{Active, Engine};
use super::frontier;
use super::step::{ItemOutput, StepDone, StepInput, StepStop, execute_step};
use crate::error::{CtxStop, Error, NodeError, Result, StoreError};
use crate::events::{ChainHead, Event, EventType, Payload, chain_after, payload};
use crate::graph::Router;
use crate::keys::{OrderKey, PathId, derive_run_seed};
use crate::node::{Branch, Route};
use crate::persist::{self, Chain, DoneItem, Draft, PendingStep, StoredRoute};
use crate::run::{RunOptions, RunOutcome};
use crate::state::{Reducer, Writer, merge_step};
use crate::store::journal::outbox_key;
use crate::store::{
    Checkpoint, CommitOutcome, Interrupt, InterruptKind, OutboxRow, PauseReason, RunInfo, RunStatus,
    WaitingJoin, WorkItem,
};
use crate::stream::{Observer, StreamEvent, StreamModes, observer_of};
use crate::telemetry::Stopwatch;

/// A run being driven: checkpoint `step` as committed, and what driving it needs. Made only by
/// [`Engine::driver`] from a [`Start`]; its fields are this module's alone.
pub(super) struct Driven<S: Reducer> {
    run_id: Arc<str>,
    step: u64,
    state: Arc<S>,
    frontier: Vec<WorkItem>,
    /// The graph index of each frontier item's node.
    nodes: Vec<usize>,
    /// Wait-for-all joins waiting for predecessors.
    waiting: Vec<WaitingJoin>,
    seed: u64,
    version: u64,
    cancel: CancellationToken,
    deadline: Instant,
    chain: Chain,
    /// When checkpoint `step` was committed, ms since the Unix epoch: what `Ctx::now` reads.
    time_ms: u64,
    /// The last event of the run's log, as this driver wrote or read it.
    head: Option<ChainHead>,
    /// Events to write with the next commit or status change (a resumption's).
    queued: Vec<(EventType, Payload)>,
    /// What an interrupt left of step `step`: its finished items' outputs, the inputs given so far.
    resumption: Option<PendingStep>,
    /// Step `step`'s breakpoints were passed (the run was resumed from them).
    past_breakpoint: bool,
    /// Where the run's events go when it is streamed.
    observer: Option<Arc<Observer<S>>>,
    /// The driver continues a stored run.
    resumed: bool,
    /// Stops the driver at the next step boundary, the run left `Running` ([`RunOptions::stop`]).
    stop: Option<CancellationToken>,
    /// The run was registered as driven here before the driver wrote anything (see [`Engine::claim`]).
    claim: Option<Claim<S>>,
    /// Set when the driver stops if a continuation found the run busy meanwhile (see `Active`).
    rewake: Arc<AtomicBool>,
    /// The parked status a wake read, until the step it continues commits (see [`due_moved`]).
    parked: Option<Box<RunStatus>>,
}

/// A run registered as driven by an engine until this is dropped (with the driver that holds it).
pub(super) struct Claim<S: Reducer> {
    inner: Arc<super::core::Inner<S>>,
    run: Arc<str>,
    rewake: Arc<AtomicBool>,
}

impl<S: Reducer> Drop for Claim<S> {
    fn drop(&mut self) {
        release(&self.inner.active, &self.run, &self.rewake);
    }
}

/// Removes `run` from the engine's registry; sets `rewake` when a continuation found it busy meanwhile.
fn release(active: &Mutex<HashMap<String, Active>>, run: &str, rewake: &AtomicBool) {
    let entry = active.lock().unwrap_or_else(|e| e.into_inner()).remove(run);
    if entry.is_some_and(|a| a.rewake) {
        rewake.store(true, Ordering::SeqCst);
    }
}

/// Registers `run` in the engine's registry, or marks the registered driver to try a continuation
/// again when it stops and returns `AlreadyRunning`.
fn register(active: &Mutex<HashMap<String, Active>>, run: &str, token: &CancellationToken) -> Result<()> {
    let mut map = active.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(a) = map.get_mut(run) {
        a.rewake = true;
        return Err(Error::AlreadyRunning { run: run.to_owned() });
    }
    map.insert(run.to_owned(), Active { token: token.clone(), rewake: false });
    Ok(())
}

impl<S: Reducer> Driven<S> {
    /// The outcome of a run that stops here with `status`.
    fn outcome(self, status: RunStatus) -> RunOutcome<S> {
        let state = Arc::try_unwrap(self.state).unwrap_or_else(|s| (*s).clone());
        RunOutcome { run_id: self.run_id.to_string(), state, status, steps: self.step }
    }

    /// Moves the run to `cp`, which the store reports `Committed` at `version`.
    fn adopt_committed(&mut self, mut cp: Checkpoint, nodes: Vec<usize>, chain: Chain, version: u64) {
        self.version = version;
        self.time_ms = cp.timestamp_ms;
        self.frontier = std::mem::take(&mut cp.frontier);
        self.waiting = std::mem::take(&mut cp.waiting);
        self.nodes = nodes;
        self.chain = chain;
        self.step = cp.step;
    }
}

/// Where a driver picks a run up: a committed checkpoint (whose frontier and joins the driver takes),
/// its state and delta chain, the graph index of each frontier item's node, and the run row's version
/// and event head as read or written.
pub(super) struct Start<S> {
    cp: Checkpoint,
    state: S,
    chain: Chain,
    nodes: Vec<usize>,
    version: u64,
    head: Option<ChainHead>,
    resumed: bool,
    resumption: Option<PendingStep>,
    past_breakpoint: bool,
    queued: Vec<(EventType, Payload)>,
    parked: Option<Box<RunStatus>>,
}

impl<S> Start<S> {
    /// A new run at the first checkpoint it just committed (`version`, `head` after that commit).
    pub(super) fn first(
        cp: Checkpoint,
        state: S,
        chain: Chain,
        nodes: Vec<usize>,
        version: u64,
        head: Option<ChainHead>,
    ) -> Self {
        Start {
            cp,
            state,
            chain,
            nodes,
            version,
            head,
            resumed: false,
            resumption: None,
            past_breakpoint: false,
            queued: Vec::new(),
            parked: None,
        }
    }

    /// A stored run at its latest checkpoint `cp`, read with its run row `info`.
    pub(super) fn stored(cp: Checkpoint, state: S, chain: Chain, nodes: Vec<usize>, info: &RunInfo) -> Self {
        let head = info.event_head.clone();
        Start { resumed: true, ..Start::first(cp, state, chain, nodes, info.version, head) }
    }

    /// Continuing the step an interrupt left (`pending`: its finished items' outputs, the inputs given
    /// so far), past the step's breakpoints when `past_breakpoint`.
    pub(super) fn resuming(self, pending: Option<PendingStep>, past_breakpoint: bool) -> Self {
        Start { resumption: pending, past_breakpoint, ..self }
    }

    /// Writing `event` with the driver's next commit or status change.
    pub(super) fn announcing(mut self, event: (EventType, Payload)) -> Self {
        self.queued.push(event);
        self
    }

    /// The driver continues a run parked with `status` (a wake): a commit refused because a message's
    /// arrival moved a due time meanwhile is made again (see [`due_moved`]).
    pub(super) fn parked(mut self, status: &RunStatus) -> Self {
        self.parked = Some(Box::new(status.clone()));
        self
    }
}

/// The events a step commits, in their order: those queued before it and its effects' (`before`), its
/// `STEP_COMMITTED`, and `RUN_COMPLETED` when it ends the run. Kept apart so the chained events are
/// one vector, not two.
struct StepEvents {
    before: Vec<(EventType, Payload)>,
    committed: Payload,
    completed: Option<Payload>,
}

impl StepEvents {
    fn in_order(self) -> impl Iterator<Item = (EventType, Payload)> {
        let committed = std::iter::once((EventType::StepCommitted, self.committed));
        let completed = self.completed.map(|p| (EventType::RunCompleted, p));
        self.before.into_iter().chain(committed).chain(completed)
    }
}

/// A `STEP_COMMITTED` event's payload: `{"idempotency_key", "next" (the nodes of the next frontier),
/// "ran" (the nodes that ran), "state_hash", "step"}`, written in canonical form (fields in name order)
/// without building a JSON value: it is on every step's path.
fn step_committed<'a>(cp: &'a Checkpoint, ran: impl Iterator<Item = &'a str>) -> Payload {
    use std::fmt::Write as _;
    fn names<'a>(out: &mut String, names: impl Iterator<Item = &'a str>) {
        out.push('[');
        for (i, name) in names.enumerate() {
            if i > 0 {
                out.push(',');
            }
            json_str(out, name);
        }
        out.push(']');
    }
    Payload::write_canonical(|out| {
        out.push_str("{\"idempotency_key\":");
        json_str(out, &cp.idempotency_key);
        out.push_str(",\"next\":");
        names(out, cp.frontier.iter().map(|w| &*w.node));
        out.push_str(",\"ran\":");
        names(out, ran);
        out.push_str(",\"state_hash\":");
        json_str(out, &cp.state_hash);
        write!(out, ",\"step\":{}}}", cp.step).expect("writes to a String");
    })
}

/// Writes `s` as a JSON string: as it is when nothing in it needs an escape (hashes, node names), else
/// through serde_json. (The check folds over every byte without an early exit, which the compiler
/// vectorizes: it was 1.6k instructions a step as a short-circuiting `all`.)
fn json_str(out: &mut String, s: &str) {
    let needs_escape = s.bytes().fold(false, |found, b| found | (b < 0x20) | (b == b'"') | (b == b'\\'));
    if !needs_escape {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(s).expect("a string is JSON"));
    }
}

/// What a DEBUG stream shows of a commit: the effects it records, its idempotency key and state hash.
type Observed<S> = Option<(Vec<StreamEvent<S>>, String, String)>;

/// Why a step did not advance the run.
pub(super) enum Stop {
    Paused(PauseReason),
    /// Items asked for input or sleep; the `Interrupted` or `Waiting` status (this one) is written.
    Interrupted(RunStatus),
    Cancelled,
    Error(Error),
    /// A resumption was refused: the run is left as it was, nothing is written.
    Rejected(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Error(e)
    }
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Stop::Error(e.into())
    }
}

impl<S: Reducer> Engine<S> {
    /// A stored run's row and latest checkpoint, checked against this engine's graph (`GraphChanged`)
    /// and against the tail of the run's event log.
    pub(super) async fn stored(&self, run_id: &str) -> Result<(crate::store::RunInfo, Checkpoint), Error> {
        let store = &self.inner.store;
        let not_found = || Error::RunNotFound { run: run_id.to_owned() };
        let info = store.run_info(run_id).await?.ok_or_else(not_found)?;
        let graph = &self.inner.graph;
        if info.graph_fingerprint != graph.fingerprint() {
            return Err(Error::GraphChanged {
                run: run_id.to_owned(),
                stored: info.graph_fingerprint,
                current: graph.fingerprint().to_owned(),
            });
        }
        let cp = store.latest(run_id).await?.ok_or_else(not_found)?;
        match self.verify_tail(&info, &cp).await {
            Ok(()) => Ok((info, cp)),
            // The row, the checkpoint and the events are separate reads: a writer between them (another
            // continuation of the run) makes them disagree without anything being damaged. Read again
            // when the run moved; a log that does not verify against a row that did not move is damaged.
            Err(e @ Error::ExecutionCorrupted { .. }) => {
                let now = store.run_info(run_id).await?.ok_or_else(not_found)?;
                if now.version == info.version {
                    return Err(e);
                }
                tracing::debug!(run = run_id, "the run moved while it was read; reading it again");
                Box::pin(self.stored(run_id)).await
            }
            Err(e) => Err(e),
        }
    }

    /// The driver of the run `start` picks up, with the caller's options.
    pub(super) fn driver(&self, start: Start<S>, opts: RunOptions) -> Driven<S> {
        let Start {
            cp,
            state,
            chain,
            nodes,
            version,
            head,
            resumed,
            resumption,
            past_breakpoint,
            queued,
            parked,
        } = start;
        Driven {
            run_id: cp.run_id,
            step: cp.step,
            state: Arc::new(state),
            frontier: cp.frontier,
            nodes,
            waiting: cp.waiting,
            seed: cp.rng_seed,
            version,
            cancel: opts.cancel.unwrap_or_default(),
            stop: opts.stop,
            deadline: Instant::now() + self.inner.options.run_wall_clock_budget,
            chain,
            time_ms: cp.timestamp_ms,
            head,
            queued,
            resumption,
            past_breakpoint,
            observer: observer_of(&opts.observer),
            resumed,
            claim: None,
            rewake: Arc::default(),
            parked,
        }
    }

    /// Registers `run` as driven here before its driver writes anything (a status change ahead of the
    /// drive): another continuation of the run in this engine then gets `AlreadyRunning` instead of
    /// racing it, and no write is left without its driver.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyRunning`] when this engine drives the run already.
    pub(super) fn claim(&self, run: &mut Driven<S>) -> Result<()> {
        register(&self.inner.active, &run.run_id, &run.cancel)?;
        run.claim =
            Some(Claim { inner: self.inner.clone(), run: run.run_id.clone(), rewake: run.rewake.clone() });
        Ok(())
    }

    /// Executes step `run.step`, merges, and commits step `run.step + 1`; on success `run` is at the
    /// new step, as committed.
    async fn advance(&self, run: &mut Driven<S>) -> std::result::Result<(), Stop> {
        let started = Stopwatch::now();
        if let Some(o) = &run.observer {
            let graph = &self.inner.graph;
            let nodes = run.nodes.iter().map(|n| graph.node(*n).name().to_string()).collect();
            o.emit(StreamModes::DEBUG, StreamEvent::StepStarted { step: run.step, nodes }).await;
        }
        let mut done = self.execute(run).await?;
        if let Some((rank, attempts, error)) = done.failed.take() {
            // The finished items' outputs are kept with the failure: resuming runs the others alone.
            self.keep_finished(run, &done)?;
            return Err(self.step_stop(run, StepStop::Failed { rank, attempts, error }));
        }
        if !done.interrupts.is_empty() {
            return Err(self.interrupted(run, done).await);
        }
        let outputs: Vec<ItemOutput<S>> = done
            .outputs
            .into_iter()
            .map(|o| o.expect("a step without interrupts finished every item"))
            .collect();
        self.commit_step(run, outputs, started).await
    }

    /// The barrier and commit of a step whose items all finished, and the move of `run` to the
    /// committed checkpoint.
    ///
    /// A function of its own, its rare paths boxed, because a future is as large as its largest
    /// suspension point and rustc gives every local that lives across two of them a slot of its own:
    /// written inline in [`Engine::advance`], the checkpoint and the rest of the commit's locals took
    /// room beside the step's items in the driver's task for as long as a run waits in a node
    /// (`bench/analysis.md`, "A parked run").
    async fn commit_step(
        &self,
        run: &mut Driven<S>,
        outputs: Vec<ItemOutput<S>>,
        started: Stopwatch,
    ) -> std::result::Result<(), Stop> {
        let mut chain = run.chain;
        let (cp, next_nodes, events) = self.barrier(run, outputs, &mut chain)?;
        let status = if cp.frontier.is_empty() { RunStatus::Completed } else { RunStatus::Running };
        let events =
            chain_after(run.head.as_ref(), self.inner.chain_key.as_ref(), cp.timestamp_ms, events.in_order());
        let observed = self.observe_commit(run, &cp, &events);
        let meters = self.inner.graph.meters();
        let committing = Stopwatch::now();
        let outcome = self.inner.store.save_checkpoint(&cp, &events, &status, run.version).await;
        // The step's latency ends at its commit, whose end is read once for both.
        let committed = Stopwatch::now();
        meters.commit(committed.since(committing), outcome.as_ref().ok());
        let outcome = outcome?;
        run.resumption = None;
        run.past_breakpoint = false;
        if let CommitOutcome::Committed { version } = outcome
            && run.parked.is_none()
        {
            ChainHead::advance(&mut run.head, &events);
            run.adopt_committed(cp, next_nodes, chain, version);
        } else {
            Box::pin(self.adopt_outcome(run, cp, &events, &status, next_nodes, chain, outcome)).await?;
        }
        meters.step_latency(committed.since(started));
        if run.observer.is_some() {
            Box::pin(self.emit_committed(run, observed)).await;
        }
        tracing::debug!(run = %run.run_id, step = run.step, items = run.frontier.len(), "step committed");
        Ok(())
    }

    /// A commit's outcome other than a plain `Committed` of a run that was not parked: a commit again
    /// when a due time moved while the step ran, then the outcome adopted as [`Engine::adopt`] says.
    #[allow(clippy::too_many_arguments)]
    async fn adopt_outcome(
        &self,
        run: &mut Driven<S>,
        cp: Checkpoint,
        events: &[crate::events::Event],
        status: &RunStatus,
        next_nodes: Vec<usize>,
        chain: Chain,
        mut outcome: CommitOutcome,
    ) -> std::result::Result<(), Stop> {
        // The parked status serves the step's first commit alone: taken whatever its outcome.
        if let (CommitOutcome::VersionConflict { .. }, Some(parked)) = (&outcome, run.parked.take())
            && let Some(info) = self.inner.store.run_info(&run.run_id).await?
            && due_moved(run, &parked, &info)
        {
            tracing::debug!(run = %run.run_id, step = run.step, "a due time moved during the step; committing again");
            outcome = self.inner.store.save_checkpoint(&cp, events, status, info.version).await?;
        }
        if matches!(outcome, CommitOutcome::Committed { .. }) {
            ChainHead::advance(&mut run.head, events);
        } else {
            // Another writer's commit stands, with its own events.
            run.head = self.inner.store.run_info(&run.run_id).await?.and_then(|i| i.event_head);
        }
        self.adopt(run, cp, next_nodes, chain, outcome).await
    }

    /// The barrier of step `run.step`: merges the items' deltas in order-key order (routing before or
    /// after the merge, as each router asks), builds frontier `N+1` and drafts checkpoint `N+1` with the
    /// events to commit with it. Returns the checkpoint, its nodes' graph indices and the events.
    #[allow(clippy::type_complexity)]
    fn barrier(
        &self,
        run: &mut Driven<S>,
        mut outputs: Vec<ItemOutput<S>>,
        chain: &mut Chain,
    ) -> Result<(Checkpoint, Vec<usize>, StepEvents), Stop> {
        let outbox = self.outbox_rows(run, &outputs);
        let mut before = std::mem::take(&mut run.queued);
        before.extend(self.effect_events(run, &outputs));
        let mut routes: Vec<Route> =
            outputs.iter_mut().map(|o| std::mem::replace(&mut o.route, Route::End)).collect();
        let delta_json = persist::delta_bytes(&run.run_id, outputs.iter().map(|o| &o.delta))?;
        self.route_before_merge(run, &outputs, &mut routes)?;
        self.merge(run, outputs.into_iter().map(|o| o.delta))?;
        self.route_after_merge(run, &mut routes)?;
        let step = run.step;
        let next = frontier::next_frontier(
            &self.inner.graph,
            &run.run_id,
            step,
            &run.frontier,
            &run.nodes,
            &routes,
            &run.waiting,
        )?;
        let draft = Draft {
            run_id: &run.run_id,
            step: step + 1,
            state: &*run.state,
            deltas: Some(delta_json),
            frontier: next.items,
            waiting: next.waiting,
            outbox,
            seed: run.seed,
            label: None,
            fingerprint: self.inner.graph.fingerprint_arc(),
            at_ms: self.step_time(step + 1, run.time_ms),
            event_head: run.head.clone(),
        };
        let cp = persist::draft(draft, chain)?;
        self.compare_with_recording(&cp)?;
        let graph = &self.inner.graph;
        let ran = run.nodes.iter().map(|n| &**graph.node(*n).name());
        let committed = step_committed(&cp, ran);
        let completed =
            cp.frontier.is_empty().then(|| payload!({ "step": cp.step, "state_hash": cp.state_hash }));
        Ok((cp, next.nodes, StepEvents { before, committed, completed }))
    }

    /// What a DEBUG stream shows of a commit, taken before the commit consumes the checkpoint: the
    /// effects it records, its idempotency key and state hash. `None` when nobody streams DEBUG.
    fn observe_commit(
        &self,
        run: &Driven<S>,
        cp: &Checkpoint,
        events: &[crate::events::Event],
    ) -> Observed<S> {
        run.observer.as_ref().filter(|o| o.wants(StreamModes::DEBUG)).map(|_| {
            let effects: Vec<StreamEvent<S>> = events
                .iter()
                .filter(|e| e.event_type == EventType::EffectRecorded)
                .map(|e| {
                    let p = e.payload.value();
                    let field = |name: &str| p[name].as_str().unwrap_or_default().to_owned();
                    StreamEvent::Effect {
                        step: run.step,
                        node: field("node"),
                        key: field("key"),
                        name: field("name"),
                    }
                })
                .collect();
            (effects, cp.idempotency_key.clone(), cp.state_hash.clone())
        })
    }

    /// Streams a committed step: its effects and commit (DEBUG), then the new state (VALUES).
    async fn emit_committed(&self, run: &Driven<S>, observed: Observed<S>) {
        let Some(o) = &run.observer else { return };
        if let Some((effects, idempotency_key, state_hash)) = observed {
            for e in effects {
                o.emit(StreamModes::DEBUG, e).await;
            }
            let committed = StreamEvent::StepCommitted { step: run.step, idempotency_key, state_hash };
            o.emit(StreamModes::DEBUG, committed).await;
        }
        if o.wants(StreamModes::VALUES) {
            o.emit(StreamModes::VALUES, StreamEvent::Values { step: run.step, state: (*run.state).clone() })
                .await;
        }
    }

    /// Runs every item of the current step (see [`execute_step`]) that a resumption has no output for.
    async fn execute(&self, run: &Driven<S>) -> Result<StepDone<S>, Stop> {
        let (done, resume_inputs) = self.resumed_items(run)?;
        let input = StepInput {
            graph: &self.inner.graph,
            options: &self.inner.options,
            admission: &self.inner.admission,
            run_id: &run.run_id,
            run_seed: run.seed,
            time_ms: run.time_ms,
            step: run.step,
            items: &run.frontier,
            nodes: &run.nodes,
            state: &run.state,
            cancel: &run.cancel,
            run_deadline: run.deadline,
            env: &self.inner.env,
            resume_inputs: &resume_inputs,
            observer: run.observer.as_ref(),
        };
        execute_step(input, done).await.map_err(|stop| self.step_stop(run, stop))
    }

    /// The `EFFECT_RECORDED` events of a step: each item's effects in call order, the items in order-key
    /// order.
    fn effect_events(&self, run: &Driven<S>, outputs: &[ItemOutput<S>]) -> Vec<(EventType, Payload)> {
        let graph = &self.inner.graph;
        let mut events = Vec::new();
        for ((item, node), out) in run.frontier.iter().zip(&run.nodes).zip(outputs) {
            for e in &out.effects {
                let payload = payload!({
                    "step": run.step,
                    "node": &**graph.node(*node).name(),
                    "path": item.path.as_str(),
                    "key": e.key,
                    "name": e.name,
                    "class": e.class,
                    "request_hash": e.request_hash,
                });
                events.push((EventType::EffectRecorded, payload));
            }
        }
        events
    }

    /// The outbox rows of a step: each item's emits in order, the items in order-key order.
    fn outbox_rows(&self, run: &Driven<S>, outputs: &[ItemOutput<S>]) -> Vec<OutboxRow> {
        let mut rows = Vec::new();
        for (item, out) in run.frontier.iter().zip(outputs) {
            for (i, (topic, payload)) in out.emits.iter().enumerate() {
                rows.push(OutboxRow {
                    key: outbox_key(&run.run_id, run.step, item.path.as_str(), i as u32),
                    run_id: run.run_id.to_string(),
                    step: run.step + 1,
                    topic: topic.clone(),
                    payload: payload.clone(),
                });
            }
        }
        rows
    }

    /// The barrier is passed: merges the deltas into the state in ascending order key (the frontier is
    /// sorted). Every item has finished and dropped its handle on the state, so this merges in place; on
    /// error the half-merged state is dropped with the run and checkpoint `step` is untouched.
    fn merge(
        &self,
        run: &mut Driven<S>,
        deltas: impl ExactSizeIterator<Item = S::Delta>,
    ) -> Result<(), Stop> {
        let graph = &self.inner.graph;
        let writers = run
            .frontier
            .iter()
            .zip(&run.nodes)
            .map(|(item, node)| Writer { node: graph.node(*node).name(), order_key: item.order_key });
        let state = Arc::make_mut(&mut run.state);
        merge_step(state, run.step, writers.zip(deltas), self.inner.options.conflict_policy).map_err(
            |f| {
                let err = Error::from_merge(&run.run_id, run.step, f);
                if matches!(err, Error::Conflict { .. }) {
                    tracing::warn!(run = %run.run_id, step = run.step, error = %err, "merge conflict");
                    graph.meters().merge_conflict();
                }
                err
            },
        )?;
        Ok(())
    }

    /// The routes of router nodes in a step of several items: each router reads the state the step read
    /// with its own item's delta applied (as a LangGraph conditional edge does), not its siblings'.
    fn route_before_merge(
        &self,
        run: &Driven<S>,
        outputs: &[ItemOutput<S>],
        routes: &mut [Route],
    ) -> Result<(), Stop> {
        if run.frontier.len() < 2 {
            return Ok(()); // one item: the merged state is that state; routed after the merge
        }
        for (rank, &node) in run.nodes.iter().enumerate() {
            let Some(router) = self.inner.graph.node(node).router() else { continue };
            let mut state = (*run.state).clone();
            state.apply(outputs[rank].delta.clone()).map_err(|source| Error::Merge {
                run: run.run_id.to_string(),
                step: run.step,
                node: self.inner.graph.node(node).name().to_string(),
                source,
            })?;
            routes[rank] = self.call_router(run, node, router, &state)?;
        }
        Ok(())
    }

    /// The route of a router node that is its step's only item, on the merged state.
    fn route_after_merge(&self, run: &Driven<S>, routes: &mut [Route]) -> Result<(), Stop> {
        if let [node] = run.nodes[..]
            && let Some(router) = self.inner.graph.node(node).router()
        {
            routes[0] = self.call_router(run, node, router, &run.state)?;
        }
        Ok(())
    }

    /// Calls a router; a panic in it is the node's panic.
    fn call_router(
        &self,
        run: &Driven<S>,
        node: usize,
        router: &Router<S>,
        state: &S,
    ) -> Result<Route, Stop> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| router(state))).map(Route::Goto).map_err(
            |p| {
                let message = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "non-string panic payload".into());
                Stop::Error(Error::NodePanicked {
                    run: run.run_id.to_string(),
                    step: run.step,
                    node: format!("{} (its router)", self.inner.graph.node(node).name()),
                    message,
                })
            },
        )
    }

    /// Moves `run` to checkpoint `cp.step` as the store reports it committed.
    async fn adopt(
        &self,
        run: &mut Driven<S>,
        mut cp: Checkpoint,
        next_nodes: Vec<usize>,
        chain: Chain,
        outcome: CommitOutcome,
    ) -> Result<(), Stop> {
        match outcome {
            CommitOutcome::Committed { version } => {
                run.adopt_committed(cp, next_nodes, chain, version);
                return Ok(());
            }
            CommitOutcome::AlreadyCommitted { version } => {
                // This exact checkpoint is stored (same key: same state and frontier), but perhaps as a
                // snapshot where ours is a delta, and with its own time: continue from what is stored.
                run.version = version;
                let stored = self.inner.store.load_checkpoint(&run.run_id, cp.step).await?;
                (run.chain, run.time_ms) = match &stored {
                    Some(stored) => (Chain::after(&*self.inner.store, stored).await?, stored.timestamp_ms),
                    None => (chain, cp.timestamp_ms),
                };
                run.frontier = std::mem::take(&mut cp.frontier);
                run.waiting = std::mem::take(&mut cp.waiting);
                run.nodes = next_nodes;
            }
            CommitOutcome::StepTaken { version, existing_key } => {
                // Another writer committed a different result for this step: theirs is the truth.
                tracing::warn!(run = %run.run_id, step = cp.step, existing_key, "step taken by another writer; adopting it");
                self.adopt_stored(run, cp.step).await?;
                run.version = version;
            }
            // The lease is lost: stop at once, write nothing more (no failure status).
            CommitOutcome::Fenced => {
                return Err(Stop::Rejected(Error::Fenced { run: run.run_id.to_string(), step: run.step }));
            }
            // Another writer moved the run row: nothing more is written (no failure status either).
            other => return Err(Stop::Rejected(version_conflict(&run.run_id, run.version, &other))),
        }
        run.step = cp.step;
        Ok(())
    }

    /// Replaces the run's state, frontier and chain with the stored checkpoint `step`.
    async fn adopt_stored(&self, run: &mut Driven<S>, step: u64) -> Result<(), Stop> {
        let store = &*self.inner.store;
        let stored = store.load_checkpoint(&run.run_id, step).await?.ok_or_else(|| {
            StoreError::corrupted_record(
                &*run.run_id,
                step,
                "reported as taken by another writer but not stored",
            )
        })?;
        let (state, chain) = persist::load_state(store, &stored).await?;
        run.nodes = self.node_indices(&stored)?;
        run.state = Arc::new(state);
        run.chain = chain;
        run.time_ms = stored.timestamp_ms;
        run.frontier = stored.frontier;
        run.waiting = stored.waiting;
        Ok(())
    }

    /// The graph index of every node `cp`'s frontier names.
    pub(super) fn node_indices(&self, cp: &Checkpoint) -> Result<Vec<usize>, Error> {
        let graph = &self.inner.graph;
        cp.frontier
            .iter()
            .map(|w| {
                graph.node_index(&w.node).ok_or_else(|| {
                    Error::Store(StoreError::corrupted_record(
                        &*cp.run_id,
                        cp.step,
                        format!("its frontier names node `{}`, which the graph does not have", w.node),
                    ))
                })
            })
            .collect()
    }

    /// Why a step stopped, as the run reports it.
    fn step_stop(&self, run: &Driven<S>, stop: StepStop) -> Stop {
        let (graph, step) = (&self.inner.graph, run.step);
        let run_id = run.run_id.to_string();
        let node = |rank: usize| graph.node(run.nodes[rank]).name().to_string();
        match stop {
            StepStop::Cancelled => Stop::Cancelled,
            StepStop::Backpressure => {
                tracing::info!(run = %run_id, step, "admission timed out: the run pauses (backpressure)");
                graph.meters().backpressure();
                Stop::Paused(PauseReason::Backpressure)
            }
            StepStop::Budget => {
                let budget = self.inner.options.run_wall_clock_budget;
                Stop::Error(Error::BudgetExceeded { run: run_id, step, budget })
            }
            StepStop::Panicked { rank, message } => {
                Stop::Error(Error::NodePanicked { run: run_id, step, node: node(rank), message })
            }
            StepStop::Failed { rank, error: NodeError { stop: Some(stop), .. }, .. } => match *stop {
                CtxStop::NeedsConfirmation { key, name } => {
                    Stop::Paused(PauseReason::NeedsConfirmation { key, name })
                }
                CtxStop::InputRejected { index, detail } => Stop::Rejected(Error::ResumeInput {
                    run: run_id,
                    interrupt: Some(interrupt_id(run.frontier[rank].path.as_str(), index)),
                    detail,
                }),
                CtxStop::Superseded => Stop::Rejected(Error::Superseded { run: run_id, step }),
                // Interrupts are collected by the step, never a failure.
                CtxStop::Interrupt(_) => Stop::Error(Error::NodeFailed {
                    run: run_id,
                    step,
                    node: node(rank),
                    attempts: 1,
                    source: "an interrupt reached the step as a failure".into(),
                }),
                CtxStop::Fenced => Stop::Rejected(Error::Fenced { run: run_id, step }),
                CtxStop::ReplayMismatch(d) => Stop::Error(Error::ReplayMismatch {
                    run: run_id,
                    step: d.step,
                    node: d.node,
                    call: d.call,
                    expected: d.expected,
                    found: d.found,
                }),
            },
            StepStop::Failed { rank, attempts, error } => Stop::Error(match error.timeout() {
                Some(timeout) => {
                    Error::NodeTimeout { run: run_id, step, node: node(rank), timeout, attempts }
                }
                None => {
                    let source = error.into_inner();
                    Error::NodeFailed { run: run_id, step, node: node(rank), attempts, source }
                }
            }),
        }
    }
}

impl<S: Reducer> Driven<S> {
    /// What a resumption brought (the pending step), if anything.
    pub(super) fn resumption(&self) -> Option<&PendingStep> {
        self.resumption.as_ref()
    }
}

impl<S: Reducer> Engine<S> {
    /// Drives the run on a task of its own, inside a `run` span.
    ///
    /// A step's items are tasks; when the driver is a task too, spawning them and collecting their
    /// results stays on the runtime's worker threads instead of waking the caller's thread (`block_on`,
    /// `#[tokio::main]`) once per item (bench `fanout`; the A/B is in docs/BENCHMARKS.md). Dropping the
    /// returned future aborts the task, as dropping the driver itself would; a panic in it resumes in
    /// the caller.
    ///
    /// The driver task is spawned when this is called, not when the future is first polled: the future
    /// returned holds the task's handle, not the run (an `async fn` would keep a slot for the moved-in
    /// run, 328 bytes, in every caller's future for as long as the run is driven).
    pub(super) fn drive(&self, run: Driven<S>) -> impl Future<Output = Result<RunOutcome<S>>> + Send + '_ {
        let (run_id, step) = (run.run_id.clone(), run.step);
        let span = tracing::info_span!(
            "run",
            run = &*run_id,
            graph = self.inner.graph.name(),
            otel.name = tracing::field::Empty,
        );
        #[cfg(feature = "otel")]
        span.record("otel.name", format!("run {}", self.inner.graph.name()));
        let rewake = run.rewake.clone();
        let mut task = AbortOnDrop(tokio::spawn(self.clone().drive_here(run).instrument(span)));
        async move {
            let result = match (&mut task.0).await {
                Ok(result) => result,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // The runtime is shutting down.
                Err(_) => return Err(Error::Cancelled { run: run_id.to_string(), step }),
            };
            let rewake = rewake.load(Ordering::SeqCst);
            match result {
                Ok(out) => self.mail_waiting(out, rewake).await,
                Err(e) => {
                    if rewake && !matches!(e, Error::AlreadyRunning { .. }) {
                        // What came while this driver ran may still be due.
                        let _ = Box::pin(self.wake_now(&run_id)).await;
                    }
                    Err(e)
                }
            }
        }
    }

    /// A run that just parked waiting for a topic whose message is already in its mailbox (sent before
    /// the wait, or while it parked: a sender that found it not yet waiting made nothing due) is woken
    /// at once: both sides look after their own write, so one of them sees the other's.
    ///
    /// Boxed as a `dyn Future`: waking drives the run again, through this function.
    ///
    /// `rewake`: a continuation (a wake, a resume) came while the run was driven here and found it busy;
    /// whatever it brought may be due now, so a parked run is woken if it is.
    fn mail_waiting(
        &self,
        out: RunOutcome<S>,
        rewake: bool,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<RunOutcome<S>>> + Send + '_>> {
        Box::pin(async move {
            if rewake && !out.status.waits().is_empty() && self.inner.env.replay.is_none() {
                return self.follow_up(out).await;
            }
            let topics: Vec<String> = out
                .status
                .waits()
                .iter()
                .filter(|i| i.kind == InterruptKind::Event)
                .filter_map(|i| i.topic.clone())
                .collect();
            if topics.is_empty() || self.inner.env.replay.is_some() {
                return Ok(out);
            }
            let mailbox = self.inner.store.mailbox(&out.run_id).await?;
            if !topics.iter().any(|t| mailbox.has_unclaimed(t)) {
                return Ok(out);
            }
            self.follow_up(out).await
        })
    }

    /// Wakes a run that just parked here, for what may be due already. The parked outcome stands when
    /// another continuation took the run meanwhile (it is driven, or moved on): that is not this
    /// call's failure.
    async fn follow_up(&self, out: RunOutcome<S>) -> Result<RunOutcome<S>> {
        match self.wake_now(&out.run_id).await {
            Ok(woken) => Ok(woken.unwrap_or(out)),
            Err(Error::AlreadyRunning { .. } | Error::VersionConflict { .. } | Error::Superseded { .. }) => {
                Ok(out)
            }
            Err(e) => Err(e),
        }
    }

    /// The step loop: advance until the frontier is empty (completed), a limit, an interrupt, a pause or
    /// an error.
    ///
    /// An `async move` block rather than an `async fn`, which would hold `run` twice (rustc keeps a moved-in
    /// argument beside its local copy): the run's task is what a run parked in a node costs. It owns its
    /// engine (a handle) so the task is spawned with this future alone: a block around it would hold the
    /// run once more.
    #[allow(clippy::manual_async_fn, reason = "an async fn would hold its moved-in argument twice")]
    fn drive_here(self, mut run: Driven<S>) -> impl Future<Output = Result<RunOutcome<S>>> + Send + 'static {
        async move {
            let _registration = match run.claim {
                Some(_) => None, // registered when claimed, released with the driver
                None => {
                    let registration = Registration::new(&self.inner.active, &run)?;
                    if run.resumed {
                        self.still_current(&mut run).await?;
                    }
                    Some(registration)
                }
            };
            emit_started(&run).await;
            loop {
                if run.frontier.is_empty() {
                    tracing::info!(run = %run.run_id, steps = run.step, "run completed");
                    self.inner.env.children.parent_closed(&run.run_id).await;
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
                    Ok(()) if after.is_empty() || run.frontier.is_empty() => {}
                    // Moved whole into a future of its own, boxed (once a run): the step's result and
                    // the ways a run stops keep no room in this one for as long as a step runs.
                    result => return Box::pin(self.end_at(run, result, after)).await,
                }
            }
        }
    }

    /// Where the run stops after a step that stopped it (`result`) or whose after-breakpoints apply.
    #[allow(clippy::manual_async_fn, reason = "an async fn would hold its moved-in argument twice")]
    fn end_at(
        &self,
        mut run: Driven<S>,
        result: std::result::Result<(), Stop>,
        after: Vec<Interrupt>,
    ) -> impl Future<Output = Result<RunOutcome<S>>> + Send + '_ {
        async move {
            match result {
                Ok(()) => {
                    let step = run.step;
                    let after = after.into_iter().map(|i| Interrupt { step, ..i }).collect();
                    self.stop_at_breakpoint(run, after).await
                }
                Err(Stop::Interrupted(status)) => {
                    let list = status.waits().to_vec();
                    tracing::info!(run = %run.run_id, step = run.step, interrupts = list.len(), status = status.as_str(), "run interrupted");
                    if let Some(o) = &run.observer {
                        o.emit(StreamModes::DEBUG, StreamEvent::Interrupted { interrupts: list }).await;
                    }
                    Ok(run.outcome(status))
                }
                Err(Stop::Rejected(err)) => Err(err),
                Err(Stop::Paused(reason)) => {
                    tracing::info!(run = %run.run_id, step = run.step, ?reason, "run paused");
                    let status = RunStatus::Paused(reason);
                    let paused = payload!({ "step": run.step, "reason": status });
                    self.set_final_status(&mut run, &status, (EventType::RunPaused, paused)).await;
                    Ok(run.outcome(status))
                }
                Err(Stop::Cancelled) => {
                    let cancelled = payload!({ "step": run.step });
                    let event = (EventType::RunCancelled, cancelled);
                    if self.set_final_status(&mut run, &RunStatus::Cancelled, event).await {
                        self.inner.env.children.parent_closed(&run.run_id).await;
                    }
                    Err(Error::Cancelled { run: run.run_id.to_string(), step: run.step })
                }
                Err(Stop::Error(err)) => Err(self.fail(&mut run, err).await),
            }
        }
    }

    /// A continuation read the run before it registered as its driver: another driver in this engine
    /// may have moved the run meanwhile and left. Driving from the old read would run a committed step
    /// again; the run as stored is the one to continue (callers that look again do). A due time a
    /// message moved meanwhile is no move (see [`due_moved`]).
    ///
    /// # Errors
    ///
    /// [`Error::VersionConflict`] when the stored run's version is not the one read.
    async fn still_current(&self, run: &mut Driven<S>) -> Result<()> {
        let Some(info) = self.inner.store.run_info(&run.run_id).await? else { return Ok(()) };
        if info.version == run.version {
            return Ok(());
        }
        if run.parked.as_deref().is_some_and(|parked| due_moved(run, parked, &info)) {
            run.version = info.version;
            return Ok(());
        }
        let found = info.version;
        tracing::debug!(run = %run.run_id, expected = run.version, found, "run moved before its driver registered");
        Err(Error::VersionConflict { run: run.run_id.to_string(), expected: run.version, found })
    }

    /// Records a failure in the run row and returns the error.
    async fn fail(&self, run: &mut Driven<S>, err: Error) -> Error {
        tracing::warn!(run = %run.run_id, step = run.step, error = %err, "run failed");
        let failed = payload!({ "step": run.step, "error": err.to_string() });
        // A driver whose status write is refused (another driver moved the run) or lost (the store is
        // down) has not ended the run: its children go on, for the run's driver to wait for.
        if self
            .set_final_status(run, &RunStatus::Failed(err.to_string()), (EventType::RunFailed, failed))
            .await
        {
            self.inner.env.children.parent_closed(&run.run_id).await;
        }
        err
    }

    /// Best effort: the checkpoint is what matters; a status that fails to persist is logged. What a
    /// resumption brought (inputs given to interrupted items) is kept with it. True when the status
    /// was committed.
    async fn set_final_status(
        &self,
        run: &mut Driven<S>,
        status: &RunStatus,
        event: (EventType, Payload),
    ) -> bool {
        let pending = run.resumption.as_ref().map(persist::PendingStep::encode);
        match self.write_status(run, status, event, pending.as_deref()).await {
            Ok(CommitOutcome::Committed { .. }) => return true,
            Ok(other) => tracing::warn!(run = %run.run_id, ?other, "run status not updated"),
            Err(e) => tracing::warn!(run = %run.run_id, error = %e, "run status not updated"),
        }
        false
    }

    /// Commits step 0 of a new run: its checkpoint, chain and version, and its event head.
    pub(super) async fn start(
        &self,
        run_id: &str,
        input: &S,
        opts: &RunOptions,
    ) -> Result<(Checkpoint, Chain, u64, Option<ChainHead>)> {
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
            origin_step: None,
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
            at_ms: self.step_time(0, 0),
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

    /// Chains `events` after `head`, all stamped `time_ms`; returns them and the head after them.
    pub(super) fn chain(
        &self,
        head: Option<&ChainHead>,
        events: impl IntoIterator<Item = (EventType, Payload)>,
        time_ms: u64,
    ) -> (Vec<Event>, Option<ChainHead>) {
        let events = chain_after(head, self.inner.chain_key.as_ref(), time_ms, events);
        let head = events.last().map(Event::head).or_else(|| head.cloned());
        (events, head)
    }

    /// Writes `status` with the run's queued events and `event`, and `pending` when given; on success
    /// the driver's version and head follow.
    pub(super) async fn write_status(
        &self,
        run: &mut Driven<S>,
        status: &RunStatus,
        event: (EventType, Payload),
        pending: Option<&[u8]>,
    ) -> std::result::Result<CommitOutcome, StoreError> {
        let mut queued = run.queued.clone();
        queued.push(event);
        let (events, head) =
            self.chain(run.head.as_ref(), queued, self.inner.env.clock.now_ms().max(run.time_ms));
        let outcome = self.inner.store.set_status(&run.run_id, status, &events, pending, run.version).await?;
        if let CommitOutcome::Committed { version } = outcome {
            run.version = version;
            run.head = head;
            run.queued.clear();
        }
        Ok(outcome)
    }

    /// For each item of the current step: its output when a resumption holds one, and the inputs given
    /// to its interrupts (by a resumption, or in a replay by the recorded run).
    fn resumed_items(&self, run: &Driven<S>) -> std::result::Result<Resumed<S>, Stop> {
        let replay = self.inner.env.replay.as_ref();
        let pending = run.resumption.as_ref().filter(|p| p.step == run.step);
        if pending.is_none() && replay.is_none_or(|r| r.inputs.is_empty()) {
            return Ok((Vec::new(), Vec::new()));
        }
        let mut done = Vec::with_capacity(run.frontier.len());
        let mut inputs = Vec::with_capacity(run.frontier.len());
        for item in &run.frontier {
            let path = item.path.as_str();
            let stored = pending.and_then(|p| p.items.iter().find(|i| i.path == path));
            done.push(match stored.and_then(|i| i.done.as_ref()) {
                Some(d) => Some(output_of::<S>(&run.run_id, run.step, d)?),
                None => None,
            });
            let given = match stored.filter(|i| !i.inputs.is_empty()) {
                Some(i) => Some(Arc::new(i.inputs.clone())),
                None => replay
                    .and_then(|r| r.inputs.get(&(run.step, path.to_owned())))
                    .map(|v| Arc::new(v.clone())),
            };
            inputs.push(given);
        }
        Ok((done, inputs))
    }

    /// Adds the outputs of the step's finished items to the run's resumption (its pending step), which
    /// the next status write stores (a failure's, an interrupt's).
    fn keep_finished(&self, run: &mut Driven<S>, done: &StepDone<S>) -> Result<(), Stop> {
        let mut pending = run
            .resumption
            .take()
            .filter(|p| p.step == run.step)
            .unwrap_or(PendingStep { step: run.step, items: Vec::new() });
        for (item, out) in run.frontier.iter().zip(&done.outputs) {
            if let Some(out) = out {
                pending.item_mut(item.path.as_str()).done =
                    Some(done_of::<S>(&run.run_id, out).map_err(Stop::Error)?);
            }
        }
        run.resumption = Some(pending);
        Ok(())
    }

    /// Items of the step asked for input: records the finished items' outputs and the interrupts, and
    /// writes the `Interrupted` status with them.
    async fn interrupted(&self, run: &mut Driven<S>, done: StepDone<S>) -> Stop {
        if let Err(stop) = self.keep_finished(run, &done) {
            return stop;
        }
        let mut pending = run.resumption.take().expect("keep_finished leaves the pending step");
        let graph = &self.inner.graph;
        let mut asked = done.interrupts;
        asked.sort_by_key(|(rank, a)| (*rank, a.index));
        let interrupts: Vec<Interrupt> = asked
            .into_iter()
            .map(|(rank, a)| {
                let path = run.frontier[rank].path.as_str().to_owned();
                // Asked again when the step runs again: a sleep or a deadline keeps its first time.
                let wake_at_ms = a.wake_at_ms.map(|at| {
                    let wakes = &mut pending.item_mut(&path).wakes;
                    match wakes.iter().find(|(index, _)| *index == a.index) {
                        Some((_, kept)) => *kept,
                        None => {
                            wakes.push((a.index, at));
                            at
                        }
                    }
                });
                let id = match &a.nested {
                    Some(nested) => nested_interrupt_id(&path, a.index, nested),
                    None => interrupt_id(&path, a.index),
                };
                Interrupt {
                    id,
                    kind: a.kind,
                    node: graph.node(run.nodes[rank]).name().to_string(),
                    path,
                    step: run.step,
                    index: a.index,
                    payload: a.payload,
                    wake_at_ms,
                    topic: a.topic,
                }
            })
            .collect();
        let event = payload!({ "step": run.step, "interrupts": interrupts });
        let status =
            if interrupts.iter().all(|i| matches!(i.kind, InterruptKind::Sleep | InterruptKind::Event)) {
                RunStatus::Waiting(interrupts)
            } else {
                RunStatus::Interrupted(interrupts)
            };
        let bytes = pending.encode();
        run.resumption = Some(pending);
        match self.write_status(run, &status, (EventType::Interrupted, event), Some(&bytes)).await {
            Ok(CommitOutcome::Committed { .. }) => {
                if let Some(at) = status.wake_at_ms() {
                    self.inner.timers.note(at, &run.run_id);
                }
                Stop::Interrupted(status)
            }
            Ok(other) => Stop::Error(version_conflict(&run.run_id, run.version, &other)),
            Err(e) => Stop::Error(e.into()),
        }
    }

    /// Hands the run back to whoever claims runnable runs (a worker pool): writes the `Running` status
    /// with the driver's queued events and what its resumption brought (the pending step), and drives
    /// nothing. The outcome's status is `Running`.
    pub(super) async fn hand_back(&self, run: &mut Driven<S>) -> Result<RunOutcome<S>> {
        let pending = run.resumption.as_ref().map(PendingStep::encode);
        let handed = payload!({ "step": run.step });
        let event = (EventType::HandedBack, handed);
        match self.write_status(run, &RunStatus::Running, event, pending.as_deref()).await? {
            CommitOutcome::Committed { .. } => {
                tracing::info!(run = %run.run_id, step = run.step, "run handed back to the pool");
                let state = (*run.state).clone();
                Ok(RunOutcome {
                    run_id: run.run_id.to_string(),
                    state,
                    status: RunStatus::Running,
                    steps: run.step,
                })
            }
            other => Err(version_conflict(&run.run_id, run.version, &other)),
        }
    }

    /// The breakpoints of `kind` on the current step's nodes (none in a replay).
    fn breakpoints(&self, run: &Driven<S>, kind: InterruptKind) -> Vec<Interrupt> {
        if self.inner.env.replay.is_some() {
            return Vec::new();
        }
        let graph = &self.inner.graph;
        run.frontier
            .iter()
            .zip(&run.nodes)
            .filter(|(_, n)| match kind {
                InterruptKind::Before => graph.node(**n).interrupt_before(),
                InterruptKind::After => graph.node(**n).interrupt_after(),
                _ => false,
            })
            .map(|(item, n)| Interrupt {
                id: interrupt_id(item.path.as_str(), 0),
                kind,
                node: graph.node(*n).name().to_string(),
                path: item.path.as_str().to_owned(),
                step: run.step,
                index: 0,
                payload: serde_json::Value::Null,
                wake_at_ms: None,
                topic: None,
            })
            .collect()
    }

    /// Stops the run at breakpoints: writes the `Interrupted` status.
    async fn stop_at_breakpoint(&self, mut run: Driven<S>, list: Vec<Interrupt>) -> Result<RunOutcome<S>> {
        let event = payload!({ "step": run.step, "interrupts": list });
        let status = RunStatus::Interrupted(list);
        match self.write_status(&mut run, &status, (EventType::Interrupted, event), None).await? {
            CommitOutcome::Committed { .. } => {
                tracing::info!(run = %run.run_id, step = run.step, "run stopped at a breakpoint");
                Ok(run.outcome(status))
            }
            other => Err(version_conflict(&run.run_id, run.version, &other)),
        }
    }
}

type Inputs = Vec<Option<Arc<Vec<serde_json::Value>>>>;
/// Each item's stored output, and the inputs given to each.
type Resumed<S> = (Vec<Option<ItemOutput<S>>>, Inputs);

/// The id an interrupt is answered by: its item's path and the call's index.
pub(super) fn interrupt_id(path: &str, index: u32) -> String {
    format!("{path}#{index}")
}

/// The id of an interrupt that stands for interrupt `nested` of a subgraph's run:
/// `"{path}#{index}>{nested}"`, so the id names the nesting, outermost first.
pub(super) fn nested_interrupt_id(path: &str, index: u32, nested: &str) -> String {
    format!("{path}#{index}>{nested}")
}

/// The error of a store outcome that found the run row at another version than `expected`.
/// Whether all that moved in the run since its driver read it parked as `parked` (the row now `info`)
/// is a message's arrival making an event wait due now (or that due time put back), which the step
/// supersedes: the same latest step and event head, the status the same but for event waits' due times.
/// Otherwise another writer committed a step, wrote events or changed the status, and a refusal stands.
fn due_moved<S: Reducer>(run: &Driven<S>, parked: &RunStatus, info: &RunInfo) -> bool {
    let events_only =
        |s: &RunStatus| s.with_due_times(|i| i.wake_at_ms.filter(|_| i.kind != InterruptKind::Event));
    info.latest_step == run.step
        && info.event_head == run.head
        && events_only(&info.status) == events_only(parked)
}

pub(super) fn version_conflict(run: &str, expected: u64, outcome: &CommitOutcome) -> Error {
    let found = match outcome {
        CommitOutcome::Fenced => return Error::Fenced { run: run.to_owned(), step: 0 },
        CommitOutcome::VersionConflict { current }
        | CommitOutcome::Committed { version: current }
        | CommitOutcome::AlreadyCommitted { version: current }
        | CommitOutcome::StepTaken { version: current, .. } => *current,
        // An outcome this build does not know: no version to name.
        _ => 0,
    };
    Error::VersionConflict { run: run.to_owned(), expected, found }
}

/// A finished item's output, as a pending step stores it.
fn done_of<S: Reducer>(run: &str, out: &ItemOutput<S>) -> Result<DoneItem> {
    let delta = serde_json::to_value(&out.delta).map_err(|source| Error::Serialization {
        run: run.to_owned(),
        what: "a delta",
        source,
    })?;
    let route = match &out.route {
        Route::Declared => StoredRoute::Declared,
        Route::Goto(e) => StoredRoute::Goto(*e),
        Route::Fork(branches) => {
            StoredRoute::Fork(branches.iter().map(|b| (b.edge, b.input.clone())).collect())
        }
        Route::End => StoredRoute::End,
    };
    Ok(DoneItem { delta, route, emits: out.emits.clone(), effects: out.effects.clone() })
}

/// The output a pending step stored for an item.
fn output_of<S: Reducer>(run: &str, step: u64, d: &DoneItem) -> std::result::Result<ItemOutput<S>, Stop> {
    let delta = serde_json::from_value(d.delta.clone()).map_err(|e| {
        Stop::Error(Error::Store(StoreError::corrupted_record(
            run,
            step,
            format!("a finished item's delta in the pending step does not decode: {e}"),
        )))
    })?;
    let route = match &d.route {
        StoredRoute::Declared => Route::Declared,
        StoredRoute::Goto(e) => Route::Goto(*e),
        StoredRoute::Fork(b) => {
            Route::Fork(b.iter().map(|(edge, input)| Branch { edge: *edge, input: input.clone() }).collect())
        }
        StoredRoute::End => Route::End,
    };
    Ok(ItemOutput { delta, route, emits: d.emits.clone(), effects: d.effects.clone() })
}

/// Streams the start of a driver: `RunStarted` (DEBUG) and the state it starts from (VALUES).
async fn emit_started<S: Reducer>(run: &Driven<S>) {
    let Some(o) = &run.observer else { return };
    let started =
        StreamEvent::RunStarted { run_id: run.run_id.to_string(), step: run.step, resumed: run.resumed };
    o.emit(StreamModes::DEBUG, started).await;
    // A wake's `RESUMED` event, queued for the first write, says what woke the run.
    for (t, p) in &run.queued {
        let p = p.value();
        if let (EventType::Resumed, Some(by)) = (t, p.get("by").and_then(|b| b.as_str())) {
            let inputs = p.get("inputs").and_then(|i| i.as_array()).cloned().unwrap_or_default();
            o.emit(StreamModes::DEBUG, StreamEvent::Woken { step: run.step, by: by.to_owned(), inputs })
                .await;
        }
    }
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
    active: &'a Mutex<HashMap<String, Active>>,
    run: Arc<str>,
    rewake: Arc<AtomicBool>,
}

impl<'a> Registration<'a> {
    fn new<S: Reducer>(active: &'a Mutex<HashMap<String, Active>>, run: &Driven<S>) -> Result<Self> {
        register(active, &run.run_id, &run.cancel)?;
        Ok(Registration { active, run: run.run_id.clone(), rewake: run.rewake.clone() })
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        release(self.active, &self.run, &self.rewake);
    }
}

#[cfg(test)]
mod tests {
    use super::json_str;

    #[test]
    fn json_str_writes_what_serde_json_writes() {
        for s in ["", "plan", "0123abcdef", "a\"b", "back\\slash", "line\nfeed", "\u{1}", "é ✓", "\u{7f}"]
        {
            let mut out = String::new();
            json_str(&mut out, s);
            assert_eq!(out, serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }
}
