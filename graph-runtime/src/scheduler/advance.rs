//! One step of a run, in named stages: execute the items of step `N` ([`super::step`]), merge their deltas
//! at the barrier, build frontier `N+1` ([`super::frontier`]), draft checkpoint `N+1` (the store's record
//! format, [`crate::store::record`]), commit it, and adopt what the store says was committed.

use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::step::{ItemOutput, StepDone, StepInput, StepStop, execute_step};
use super::{Engine, RunOptions, RunOutcome, frontier, interrupt};
use crate::ctx::CtxStop;
use crate::error::{Error, NodeError, StoreError};
use crate::events::{ChainHead, EventType, Payload, payload};
use crate::graph::Router;
use crate::node::Route;
use crate::persist::PendingStep;
use crate::persist::{self, Chain, Draft};
use crate::state::{Reducer, Writer, merge_step};
use crate::store::Interrupt;
use crate::store::OutboxRow;
use crate::store::journal::outbox_key;
use crate::store::{Checkpoint, CommitOutcome, PauseReason, RunStatus, WaitingJoin, WorkItem};
use crate::stream::{Observer, StreamEvent, StreamModes};
use crate::telemetry::Stopwatch;

/// A run being driven: checkpoint `step` as committed, and what driving it needs.
pub(super) struct Driven<S: Reducer> {
    pub(super) run_id: Arc<str>,
    pub(super) step: u64,
    pub(super) state: Arc<S>,
    pub(super) frontier: Vec<WorkItem>,
    /// The graph index of each frontier item's node.
    pub(super) nodes: Vec<usize>,
    /// Wait-for-all joins waiting for predecessors.
    pub(super) waiting: Vec<WaitingJoin>,
    pub(super) seed: u64,
    pub(super) version: u64,
    pub(super) cancel: CancellationToken,
    pub(super) deadline: Instant,
    pub(super) chain: Chain,
    /// When checkpoint `step` was committed, ms since the Unix epoch: what `Ctx::now` reads.
    pub(super) time_ms: u64,
    /// The last event of the run's log, as this driver wrote or read it.
    pub(super) head: Option<ChainHead>,
    /// Events to write with the next commit or status change (a resumption's).
    pub(super) queued: Vec<(EventType, Payload)>,
    /// What an interrupt left of step `step`: its finished items' outputs, the inputs given so far.
    pub(super) resumption: Option<PendingStep>,
    /// Step `step`'s breakpoints were passed (the run was resumed from them).
    pub(super) past_breakpoint: bool,
    /// Where the run's events go when it is streamed.
    pub(super) observer: Option<Arc<Observer<S>>>,
    /// The driver continues a stored run.
    pub(super) resumed: bool,
    /// Stops the driver at the next step boundary, the run left `Running` ([`RunOptions::stop`]).
    pub(super) stop: Option<CancellationToken>,
}

impl<S: Reducer> Driven<S> {
    /// The outcome of a run that stops here with `status`.
    pub(super) fn outcome(self, status: RunStatus) -> RunOutcome<S> {
        let state = Arc::try_unwrap(self.state).unwrap_or_else(|s| (*s).clone());
        RunOutcome { run_id: self.run_id.to_string(), state, status, steps: self.step }
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
    /// Items asked for input; the `Interrupted` status is written.
    Interrupted(Vec<Interrupt>),
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
        self.verify_tail(&info, &cp).await?;
        Ok((info, cp))
    }

    /// A driver of run `run_id` at checkpoint `cp` (whose frontier and joins it takes) with `state`: a
    /// resumed one at version 0 with no event head, nothing queued and no resumption, which the callers
    /// then set.
    pub(super) fn driver(
        &self,
        run_id: Arc<str>,
        cp: &mut Checkpoint,
        state: S,
        chain: Chain,
        nodes: Vec<usize>,
        opts: RunOptions,
    ) -> Driven<S> {
        Driven {
            run_id,
            step: cp.step,
            state: Arc::new(state),
            frontier: std::mem::take(&mut cp.frontier),
            nodes,
            waiting: std::mem::take(&mut cp.waiting),
            seed: cp.rng_seed,
            version: 0,
            cancel: opts.cancel.unwrap_or_default(),
            stop: opts.stop,
            deadline: Instant::now() + self.inner.options.run_wall_clock_budget,
            chain,
            time_ms: cp.timestamp_ms,
            head: None,
            queued: Vec::new(),
            resumption: None,
            past_breakpoint: false,
            observer: opts.observer.get(),
            resumed: true,
        }
    }

    /// Executes step `run.step`, merges, and commits step `run.step + 1`; on success `run` is at the
    /// new step, as committed.
    pub(super) async fn advance(&self, run: &mut Driven<S>) -> Result<(), Stop> {
        let started = Stopwatch::now();
        if let Some(o) = &run.observer {
            let graph = &self.inner.graph;
            let nodes = run.nodes.iter().map(|n| graph.node(*n).name().to_string()).collect();
            o.emit(StreamModes::DEBUG, StreamEvent::StepStarted { step: run.step, nodes }).await;
        }
        let done = self.execute(run).await?;
        if !done.interrupts.is_empty() {
            return Err(self.interrupted(run, done).await);
        }
        let outputs: Vec<ItemOutput<S>> = done
            .outputs
            .into_iter()
            .map(|o| o.expect("a step without interrupts finished every item"))
            .collect();
        let mut chain = run.chain;
        let (cp, next_nodes, events) = self.barrier(run, outputs, &mut chain)?;
        let status = if cp.frontier.is_empty() { RunStatus::Completed } else { RunStatus::Running };
        let (events, head) = self.chain(run.head.as_ref(), events, cp.timestamp_ms);
        let observed = self.observe_commit(run, &cp, &events);
        let meters = self.inner.graph.meters();
        let committing = Stopwatch::now();
        let outcome = self.inner.store.save_checkpoint(&cp, &events, &status, run.version).await;
        // The step's latency ends at its commit, whose end is read once for both.
        let committed = Stopwatch::now();
        meters.commit(committed.since(committing), outcome.as_ref().ok());
        let outcome = outcome?;
        if matches!(outcome, CommitOutcome::Committed { .. }) {
            run.head = head;
        } else {
            // Another writer's commit stands, with its own events.
            run.head = self.inner.store.run_info(&run.run_id).await?.and_then(|i| i.event_head);
        }
        run.resumption = None;
        run.past_breakpoint = false;
        self.adopt(run, cp, next_nodes, chain, outcome).await?;
        meters.step_latency(committed.since(started));
        self.emit_committed(run, observed).await;
        tracing::debug!(run = %run.run_id, step = run.step, items = run.frontier.len(), "step committed");
        Ok(())
    }

    /// The barrier of step `run.step`: merges the items' deltas in order-key order (routing before or
    /// after the merge, as each router asks), builds frontier `N+1` and drafts checkpoint `N+1` with the
    /// events to commit with it. Returns the checkpoint, its nodes' graph indices and the events.
    #[allow(clippy::type_complexity)]
    fn barrier(
        &self,
        run: &mut Driven<S>,
        outputs: Vec<ItemOutput<S>>,
        chain: &mut Chain,
    ) -> Result<(Checkpoint, Vec<usize>, Vec<(EventType, Payload)>), Stop> {
        let outbox = self.outbox_rows(run, &outputs);
        let mut events = std::mem::take(&mut run.queued);
        events.extend(self.effect_events(run, &outputs));
        let (deltas, mut routes): (Vec<_>, Vec<_>) = outputs.into_iter().map(|o| (o.delta, o.route)).unzip();
        let delta_json = persist::delta_bytes(&run.run_id, &deltas)?;
        self.route_before_merge(run, &deltas, &mut routes)?;
        self.merge(run, deltas)?;
        self.route_after_merge(run, &mut routes)?;
        let step = run.step;
        let routes: Vec<(usize, Route)> = run.nodes.iter().copied().zip(routes).collect();
        let next = frontier::next_frontier(
            &self.inner.graph,
            &run.run_id,
            step,
            &run.frontier,
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
            not_before_ms: run.time_ms,
            at_ms: self.recorded_time(step + 1),
            event_head: run.head.clone(),
        };
        let cp = persist::draft(draft, chain)?;
        self.compare_with_recording(&cp)?;
        let graph = &self.inner.graph;
        let ran = run.nodes.iter().map(|n| &**graph.node(*n).name());
        events.push((EventType::StepCommitted, step_committed(&cp, ran)));
        if cp.frontier.is_empty() {
            let completed = payload!({ "step": cp.step, "state_hash": cp.state_hash });
            events.push((EventType::RunCompleted, completed));
        }
        Ok((cp, next.nodes, events))
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
    fn merge(&self, run: &mut Driven<S>, deltas: Vec<S::Delta>) -> Result<(), Stop> {
        let graph = &self.inner.graph;
        let writers = run
            .frontier
            .iter()
            .zip(&run.nodes)
            .map(|(item, node)| Writer { node: graph.node(*node).name(), order_key: item.order_key });
        let deltas: Vec<_> = writers.zip(deltas).collect();
        let state = Arc::make_mut(&mut run.state);
        merge_step(state, run.step, deltas, self.inner.options.conflict_policy).map_err(|f| {
            let err = Error::from_merge(&run.run_id, run.step, f);
            if matches!(err, Error::Conflict { .. }) {
                tracing::warn!(run = %run.run_id, step = run.step, error = %err, "merge conflict");
                graph.meters().merge_conflict();
            }
            err
        })?;
        Ok(())
    }

    /// The routes of router nodes in a step of several items: each router reads the state the step read
    /// with its own item's delta applied (as a LangGraph conditional edge does), not its siblings'.
    fn route_before_merge(
        &self,
        run: &Driven<S>,
        deltas: &[S::Delta],
        routes: &mut [Route],
    ) -> Result<(), Stop> {
        if run.frontier.len() < 2 {
            return Ok(()); // one item: the merged state is that state; routed after the merge
        }
        for (rank, &node) in run.nodes.iter().enumerate() {
            let Some(router) = self.inner.graph.node(node).router() else { continue };
            let mut state = (*run.state).clone();
            state.apply(deltas[rank].clone()).map_err(|source| Error::Merge {
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
                run.version = version;
                run.time_ms = cp.timestamp_ms;
                run.frontier = std::mem::take(&mut cp.frontier);
                run.waiting = std::mem::take(&mut cp.waiting);
                run.nodes = next_nodes;
                run.chain = chain;
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
            other => return Err(Error::version_conflict(&run.run_id, run.version, &other).into()),
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
                    interrupt: Some(interrupt::interrupt_id(run.frontier[rank].path.as_str(), index)),
                    detail,
                }),
                // Interrupts are collected by the step, never a failure.
                CtxStop::Interrupt { .. } => Stop::Error(Error::NodeFailed {
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
