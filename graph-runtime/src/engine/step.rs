//! Executing the items of one step.
//!
//! Items start in ascending order key (strictly: an item never starts before a lower-ordered one), at
//! most `max_concurrent_nodes` of the run at once and at most the node's limit per node, each after
//! admission into the engine-wide queue of `queue_depth` items. A started item runs its attempts
//! (timeout, retry with deterministic backoff) against the step's shared state. The step ends when all
//! items finished (the barrier) — an item that fails after its retries goes to its error handler, or is
//! reported at the barrier with its siblings' outputs kept — or at the first panic, effect stop,
//! cancellation, budget expiry or admission timeout, in which case every running item is cancelled and
//! awaited before returning: no item of a stopped step outlives it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::ctx::{AttemptOutcome, Ctx, CustomSink, ItemId};
use crate::env::EffectNote;
use crate::error::{Asked, CtxStop, NodeError};
use crate::graph::Graph;
use crate::node::{Node, Route};
use crate::policy::{EngineOptions, RetryPolicy};
use crate::state::Reducer;
use crate::store::WorkItem;
use crate::stream::{NodeOutcome, Observer, StreamEvent, StreamModes};
use crate::telemetry::Meters;

/// What one finished item produced: its delta, its route, the messages it emitted and the effects it
/// used.
pub(crate) struct ItemOutput<S: Reducer> {
    pub(crate) delta: S::Delta,
    pub(crate) route: Route,
    pub(crate) emits: Vec<(String, serde_json::Value)>,
    pub(crate) effects: Vec<EffectNote>,
}

/// A step that reached its barrier: every item's output, except the items that asked for input
/// or sleep (`Ctx::interrupt`, `Ctx::sleep`), which are `None` and listed in `interrupts` by rank.
pub(crate) struct StepDone<S: Reducer> {
    pub(crate) outputs: Vec<Option<ItemOutput<S>>>,
    pub(crate) interrupts: Vec<(usize, Asked)>,
    /// The lowest-ranked item that failed after its retries (without an error handler), when any did:
    /// `(rank, attempts, error)`. Its siblings ran to the barrier, and the outputs of those that
    /// finished are kept, so resuming runs the failed item (and the interrupted ones) alone.
    pub(crate) failed: Option<(usize, u32, NodeError)>,
}

/// Why a step stopped before its barrier.
#[derive(Debug)]
pub(crate) enum StepStop {
    Cancelled,
    Budget,
    Backpressure,
    Failed { rank: usize, attempts: u32, error: NodeError },
    Panicked { rank: usize, message: String },
}

pub(crate) struct StepInput<'a, S: Reducer> {
    pub(crate) graph: &'a Graph<S>,
    pub(crate) options: &'a EngineOptions,
    pub(crate) admission: &'a Arc<Semaphore>,
    pub(crate) run_id: &'a Arc<str>,
    pub(crate) run_seed: u64,
    pub(crate) time_ms: u64,
    pub(crate) step: u64,
    pub(crate) items: &'a [WorkItem],
    pub(crate) nodes: &'a [usize],
    pub(crate) state: &'a Arc<S>,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) run_deadline: Instant,
    /// What effect calls of the step's items reach.
    pub(crate) env: &'a Arc<crate::env::RunEnv>,
    /// The inputs given to each item's `interrupt` calls, by rank (empty: none).
    pub(crate) resume_inputs: &'a [Option<Arc<Vec<serde_json::Value>>>],
    /// Where the items' events go when the run is streamed.
    pub(crate) observer: Option<&'a Arc<Observer<S>>>,
}

type Acquire = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;
type Attempted<S> = Result<ItemOutput<S>, (u32, NodeError)>;

/// After a failed attempt: another one, or the item's failure.
enum Next {
    Retry(NodeError),
    Stop(NodeError),
}

/// Runs every item of a step that `done` has no output for; returns the outputs indexed by rank.
///
/// Not an `async fn`: the future of a step of one item and that of a step of several are alternatives
/// (an `Either`, as large as the larger of the two), and `input` is held once, by the one that runs (an
/// `async fn` holds a moved-in argument twice: rustc keeps it beside the local it moves into). A run
/// parked in a node holds this future.
pub(crate) fn execute_step<'a, S: Reducer>(
    input: StepInput<'a, S>,
    mut done: Vec<Option<ItemOutput<S>>>,
) -> impl Future<Output = Result<StepDone<S>, StepStop>> + Send + 'a {
    use tokio_util::either::Either;
    if input.items.len() == 1 {
        return match done.pop().flatten() {
            Some(out) => Either::Left(Either::Left(std::future::ready(Ok(StepDone {
                outputs: vec![Some(out)],
                interrupts: Vec::new(),
                failed: None,
            })))),
            None => Either::Left(Either::Right(execute_alone(input))),
        };
    }
    Either::Right(execute_many(input, done))
}

/// Runs the items of a step of several (see [`execute_step`]).
async fn execute_many<S: Reducer>(
    input: StepInput<'_, S>,
    done: Vec<Option<ItemOutput<S>>>,
) -> Result<StepDone<S>, StepStop> {
    let mut d = Dispatch::new(&input, done);
    let budget = sleep_until(input.run_deadline);
    tokio::pin!(budget);
    let cancelled = input.cancel.cancelled();
    tokio::pin!(cancelled);
    let stop = loop {
        d.start_ready();
        if d.next == d.items() && d.set.is_empty() {
            break None;
        }
        let blocked = d.blocked_on_admission();
        if blocked && d.acquire.is_none() {
            d.acquire = Some(Box::pin(input.admission.clone().acquire_owned()));
        }
        let admission_deadline = blocked.then(|| *d.waiting_since.get_or_insert_with(Instant::now));
        let admission_deadline = admission_deadline.map(|t| t + input.options.backpressure_timeout);
        tokio::select! {
            biased;
            _ = &mut cancelled => break Some(StepStop::Cancelled),
            _ = &mut budget => break Some(StepStop::Budget),
            Some(joined) = d.set.join_next_with_id(), if !d.set.is_empty() => {
                if let Err(stop) = d.finished(joined) {
                    break Some(stop);
                }
            }
            p = async { d.acquire.as_mut().expect("set when blocked").await }, if d.acquire.is_some() => {
                d.acquire = None;
                match p {
                    Ok(p) => d.permit = Some(p),
                    Err(_) => break Some(StepStop::Cancelled), // the semaphore is never closed
                }
            }
            _ = sleep_until(admission_deadline.unwrap_or(input.run_deadline)), if admission_deadline.is_some() => {
                break Some(StepStop::Backpressure);
            }
        }
    };
    match stop {
        Some(stop) => {
            d.stop().await;
            Err(stop)
        }
        None => Ok(StepDone { outputs: d.outputs, interrupts: d.interrupts, failed: d.failed }),
    }
}

/// The dispatch of a step of several items: what runs, what waits, what finished.
struct Dispatch<'i, 'a, S: Reducer> {
    input: &'i StepInput<'a, S>,
    /// Attempts of this step observe this token; cancelling it reaches every running item.
    step_token: CancellationToken,
    outputs: Vec<Option<ItemOutput<S>>>,
    /// Items that asked for input: `(rank, call index, payload)`.
    interrupts: Vec<(usize, Asked)>,
    /// The lowest-ranked item that failed, if any (see [`StepDone::failed`]).
    failed: Option<(usize, u32, NodeError)>,
    running_per_node: HashMap<usize, usize>,
    ranks: HashMap<tokio::task::Id, usize>,
    set: JoinSet<Attempted<S>>,
    /// The rank of the next item to start.
    next: usize,
    /// An admission permit acquired for the next item.
    permit: Option<OwnedSemaphorePermit>,
    acquire: Option<Acquire>,
    /// Since when the next item waits for admission alone.
    waiting_since: Option<Instant>,
}

impl<'i, 'a, S: Reducer> Dispatch<'i, 'a, S> {
    fn new(input: &'i StepInput<'a, S>, mut done: Vec<Option<ItemOutput<S>>>) -> Self {
        done.resize_with(input.items.len(), || None);
        Dispatch {
            input,
            step_token: input.cancel.child_token(),
            outputs: done,
            interrupts: Vec::new(),
            failed: None,
            running_per_node: HashMap::new(),
            ranks: HashMap::new(),
            set: JoinSet::new(),
            next: 0,
            permit: None,
            acquire: None,
            waiting_since: None,
        }
    }

    fn items(&self) -> usize {
        self.input.items.len()
    }

    /// Whether the run's and the node's limits let the next item start now.
    fn limits_allow_next(&self) -> bool {
        let node = self.input.nodes[self.next];
        let options = self.input.options;
        let node_limit = self.input.graph.node(node).policy().max_concurrency;
        let node_limit = node_limit.or(options.max_per_node_concurrency).unwrap_or(usize::MAX).max(1);
        self.set.len() < options.max_concurrent_nodes.max(1)
            && self.running_per_node.get(&node).copied().unwrap_or(0) < node_limit
    }

    /// Moves past items that finished before (a step resumed after an interrupt).
    fn skip_done(&mut self) {
        while self.next < self.items() && self.outputs[self.next].is_some() {
            self.next += 1;
        }
    }

    /// Starts as many items as the limits and admission allow, in order.
    fn start_ready(&mut self) {
        self.skip_done();
        while self.next < self.items() && self.limits_allow_next() {
            let permit = match self.permit.take() {
                Some(p) => p,
                None => match self.input.admission.clone().try_acquire_owned() {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            self.waiting_since = None;
            let (rank, node) = (self.next, self.input.nodes[self.next]);
            let attempts = Box::new(attempts_for(self.input, rank, &self.step_token));
            let span = node_span(attempts.ctx.item());
            let admitted = self.input.graph.meters().admitted();
            let handle = self.set.spawn(
                async move {
                    let _permit = (permit, admitted); // admission is released when the item finishes
                    attempts.run().await
                }
                .instrument(span),
            );
            self.ranks.insert(handle.id(), rank);
            *self.running_per_node.entry(node).or_default() += 1;
            self.next += 1;
            self.skip_done();
        }
    }

    /// Blocked on admission alone: the limits would let the next item start.
    fn blocked_on_admission(&self) -> bool {
        self.next < self.items() && self.permit.is_none() && self.limits_allow_next()
    }

    /// Records a finished item; `Err` when it stops the step.
    fn finished(
        &mut self,
        joined: Result<(tokio::task::Id, Attempted<S>), tokio::task::JoinError>,
    ) -> Result<(), StepStop> {
        let (id, result) = match joined {
            Ok((id, r)) => (id, Ok(r)),
            Err(e) => (e.id(), Err(e)),
        };
        let rank = self.ranks.remove(&id).expect("every task is registered");
        if let Some(c) = self.running_per_node.get_mut(&self.input.nodes[rank]) {
            *c -= 1;
        }
        match result {
            Ok(Ok(out)) => {
                self.outputs[rank] = Some(out);
                Ok(())
            }
            Ok(Err((_, NodeError { stop: Some(stop), .. }))) if matches!(*stop, CtxStop::Interrupt(_)) => {
                let CtxStop::Interrupt(asked) = *stop else { unreachable!("matched above") };
                self.interrupts.push((rank, asked));
                Ok(())
            }
            Ok(Err((attempts, error))) if error.stop.is_some() => {
                Err(StepStop::Failed { rank, attempts, error })
            }
            Ok(Err((attempts, error))) => {
                match handled(self.input, rank, attempts, error) {
                    Ok(out) => self.outputs[rank] = Some(out),
                    // The siblings run on to the barrier: their work is kept with the failure.
                    Err(failure) => {
                        if self.failed.as_ref().is_none_or(|(r, ..)| *r > rank) {
                            self.failed = Some(failure);
                        }
                    }
                }
                Ok(())
            }
            Err(e) if e.is_panic() => {
                Err(StepStop::Panicked { rank, message: panic_message(e.into_panic()) })
            }
            Err(_) => Err(StepStop::Cancelled),
        }
    }

    /// Stops every running item and waits for them: no item of a stopped step outlives it.
    async fn stop(&mut self) {
        self.step_token.cancel();
        self.set.abort_all();
        while self.set.join_next().await.is_some() {}
    }
}

/// A step of one item runs on the run's own task: no spawn, no cross-thread hop. Admission, the budget,
/// cancellation and panics are handled as for a wider step.
#[allow(clippy::manual_async_fn, reason = "an async fn would hold its moved-in argument twice")]
fn execute_alone<'a, S: Reducer>(
    input: StepInput<'a, S>,
) -> impl Future<Output = Result<StepDone<S>, StepStop>> + Send + 'a {
    // An `async move` block holds `input` once (see `execute_step`).
    async move {
        let options = input.options;
        if input.cancel.is_cancelled() {
            return Err(StepStop::Cancelled);
        }
        if Instant::now() >= input.run_deadline {
            return Err(StepStop::Budget);
        }
        let permit =
            match input.admission.clone().try_acquire_owned() {
                Ok(p) => p,
                // Boxed: the wait's futures would otherwise take room in the step's future for as long as
                // its item runs.
                Err(_) => Box::pin(async {
                    tokio::select! {
                        biased;
                        _ = input.cancel.cancelled() => Err(StepStop::Cancelled),
                        p = input.admission.clone().acquire_owned() => p.map_err(|_| StepStop::Cancelled),
                        _ = tokio::time::sleep(options.backpressure_timeout) => Err(StepStop::Backpressure),
                    }
                })
                .await?,
            };
        let admitted = input.graph.meters().admitted();
        // The item observes the run's token directly: a step of one has no siblings to stop. The attempts
        // move into their future in a scope of their own, so the generator keeps no slot for them.
        let work = {
            let attempts = Box::new(attempts_for(&input, 0, input.cancel));
            let span = node_span(attempts.ctx.item());
            attempts.run().instrument(span)
        };
        let mut work = std::pin::pin!(work);
        // One poll first: an item that finishes without waiting never arms the budget's timer or registers
        // with the token (both checked above). On a multi-threaded runtime arming a timer wakes the thread
        // parked on the timer, once per step. Only a waiting item needs the race, where cancellation wins.
        let first =
            std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut CatchUnwind(work.as_mut())).poll(cx))).await;
        let finished = match first {
            Poll::Ready(r) => r,
            Poll::Pending => tokio::select! {
                biased;
                _ = input.cancel.cancelled() => return Err(StepStop::Cancelled),
                _ = sleep_until(input.run_deadline) => return Err(StepStop::Budget),
                r = CatchUnwind(work.as_mut()) => r,
            },
        };
        let result = match finished {
            Ok(Ok(out)) => Ok(StepDone { outputs: vec![Some(out)], interrupts: Vec::new(), failed: None }),
            Ok(Err((_, NodeError { stop: Some(stop), .. }))) if matches!(*stop, CtxStop::Interrupt(_)) => {
                let CtxStop::Interrupt(asked) = *stop else { unreachable!("matched above") };
                Ok(StepDone { outputs: vec![None], interrupts: vec![(0, asked)], failed: None })
            }
            Ok(Err((attempts, error))) if error.stop.is_some() => {
                Err(StepStop::Failed { rank: 0, attempts, error })
            }
            Ok(Err((attempts, error))) => match handled(&input, 0, attempts, error) {
                Ok(out) => Ok(StepDone { outputs: vec![Some(out)], interrupts: Vec::new(), failed: None }),
                Err((rank, attempts, error)) => Err(StepStop::Failed { rank, attempts, error }),
            },
            Err(payload) => Err(StepStop::Panicked { rank: 0, message: panic_message(payload) }),
        };
        drop((permit, admitted));
        result
    }
}

/// An item that failed after its retries: routed to its node's error handler (`on_error`) with the
/// failure as the handler's input, when it has one; otherwise the failure, `(rank, attempts, error)`.
fn handled<S: Reducer>(
    input: &StepInput<'_, S>,
    rank: usize,
    attempts: u32,
    error: NodeError,
) -> Result<ItemOutput<S>, (usize, u32, NodeError)> {
    let node = input.graph.node(input.nodes[rank]);
    if node.on_error().is_none() {
        return Err((rank, attempts, error));
    }
    let failure = crate::node::NodeFailure {
        node: node.name().to_string(),
        step: input.step,
        attempts,
        error: error.to_string(),
        timed_out: error.timeout().is_some(),
    };
    tracing::info!(node = %node.name(), step = input.step, attempts, error = %error, "node failed; its error handler runs");
    let input = serde_json::to_value(&failure).expect("a failure serializes");
    Ok(ItemOutput {
        delta: S::Delta::default(),
        route: Route::Fork(vec![crate::node::Branch { edge: crate::graph::ERROR_EDGE, input: Some(input) }]),
        emits: Vec::new(),
        effects: Vec::new(),
    })
}

/// The span of an item's attempts: run, step, node, order key, and the attempt once it starts.
fn node_span(item: &ItemId) -> tracing::Span {
    let span = tracing::debug_span!(
        "node",
        run = %item.run_id,
        step = item.step,
        node = %item.node,
        order_key = %item.order_key,
        attempt = tracing::field::Empty,
        otel.name = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    #[cfg(feature = "otel")]
    span.record("otel.name", format!("node {}", item.node));
    span
}

/// Polls a future, turning a panic into an error value (what a spawned task's `JoinError` gives).
struct CatchUnwind<'a, F>(Pin<&'a mut F>);

impl<F: Future> Future for CatchUnwind<'_, F> {
    type Output = Result<F::Output, Box<dyn std::any::Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let fut = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Err(payload) => std::task::Poll::Ready(Err(payload)),
        }
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => {
            p.downcast_ref::<&str>().map_or_else(|| "non-string panic payload".into(), |s| (*s).to_owned())
        }
    }
}

/// The attempts of item `rank` of the step.
fn attempts_for<S: Reducer>(
    input: &StepInput<'_, S>,
    rank: usize,
    step_token: &CancellationToken,
) -> Attempts<S> {
    let item = &input.items[rank];
    let node = input.graph.node(input.nodes[rank]);
    let options = input.options;
    Attempts {
        handler: node.handler().clone(),
        state: input.state.clone(),
        ctx: Ctx::new(
            ItemId {
                run_id: input.run_id.clone(),
                // An item a migration carried over keeps the step it was scheduled in (its identity).
                step: item.origin_step.unwrap_or(input.step),
                node: node.name().clone(),
                order_key: item.order_key,
                path: item.path.clone(),
                run_seed: input.run_seed,
                now_ms: input.time_ms,
                input: item.input.clone().map(Arc::new),
                env: Some(input.env.clone()),
                resume_inputs: input.resume_inputs.get(rank).cloned().flatten(),
                sink: input.observer.map(|o| o.clone() as Arc<dyn CustomSink>),
            },
            1,
            step_token.clone(),
            None,
        ),
        observer: input.observer.cloned(),
        meters: input.graph.meters().clone(),
        node: input.nodes[rank],
        timeout: node.policy().timeout.unwrap_or(options.default_node_timeout),
        retry: node.policy().retry.clone().unwrap_or_else(|| options.default_retry.clone()),
        run_deadline: input.run_deadline,
    }
}

/// Everything one item needs to run its attempts on a worker.
struct Attempts<S: Reducer> {
    handler: Arc<dyn Node<S>>,
    state: Arc<S>,
    /// The item's context, one for all its attempts: who the item is, and the step's token. Inside
    /// the attempts' box (the node borrows it across its awaits; here it is off the item's future).
    ctx: Ctx,
    timeout: Duration,
    retry: RetryPolicy,
    run_deadline: Instant,
    observer: Option<Arc<Observer<S>>>,
    /// What the graph's runs record, and the node's index there.
    meters: Arc<Meters>,
    node: usize,
}

impl<S: Reducer> Attempts<S> {
    /// Sends a lifecycle event of this item when the run is streamed.
    async fn debug(&self, event: impl FnOnce(&ItemId) -> StreamEvent<S>) {
        if let Some(o) = self.observer.as_ref().filter(|o| o.wants(StreamModes::DEBUG)) {
            Box::pin(o.emit(StreamModes::DEBUG, event(self.ctx.item()))).await;
        }
    }

    /// Runs attempts until one succeeds or the retry policy gives up; `Err((attempts, last error))`.
    ///
    /// An `async move` block rather than an `async fn`: it holds `self` once (see `execute_step`).
    #[allow(clippy::manual_async_fn, reason = "an async fn would hold its moved-in argument twice")]
    fn run(mut self: Box<Self>) -> impl Future<Output = Attempted<S>> + Send + 'static {
        async move {
            let mut attempt = 1u32;
            // Decided without an await, the decision's value gone before the next one: rustc gives a
            // local that lives across two suspension points a slot of its own beside the attempt's
            // future, which is what an item waiting in its node holds.
            let out = loop {
                let (result, outcome) = self.attempt(attempt).await;
                let error = match self.after(attempt, result, outcome) {
                    Ok(out) => break out,
                    Err(Next::Stop(error)) => return Err((attempt, error)),
                    Err(Next::Retry(error)) => error,
                };
                if !Box::pin(self.back_off(attempt, &error)).await {
                    return Err((attempt, error));
                }
                attempt += 1;
            };
            if self.observer.is_some() {
                Box::pin(self.updated(&out.delta)).await;
            }
            Ok(out)
        }
    }

    /// What follows attempt `attempt`: its output, another attempt, or the item's failure.
    fn after(
        &self,
        attempt: u32,
        result: Result<(S::Delta, Route), NodeError>,
        AttemptOutcome { emits, effects, stop }: AttemptOutcome,
    ) -> Result<ItemOutput<S>, Next> {
        if let Some(stop) = stop {
            // An effect call or an interrupt stops the item, whatever the node made of its error.
            let mut error = match result {
                Err(e) => e,
                Ok(_) => NodeError::fatal("an effect call or an interrupt stopped the node"),
            };
            error.stop = Some(Box::new(stop));
            return Err(Next::Stop(error));
        }
        match result {
            Ok((delta, route)) => Ok(ItemOutput { delta, route, emits, effects }),
            Err(error) if self.retry.should_retry(&error, attempt) => Err(Next::Retry(error)),
            Err(error) => Err(Next::Stop(error)),
        }
    }

    /// One attempt of the node, under its timeout and the run's deadline, with its debug events.
    async fn attempt(&mut self, attempt: u32) -> (Result<(S::Delta, Route), NodeError>, AttemptOutcome) {
        // One clock read for the deadline and the duration (tokio's clock: paused in tests, where the
        // duration is the clock's too).
        let started = Instant::now();
        let deadline = (started + self.timeout).min(self.run_deadline);
        tracing::Span::current().record("attempt", attempt);
        let inflight = self.meters.inflight();
        self.debug(|i| StreamEvent::NodeStarted {
            step: i.step,
            node: i.node.to_string(),
            path: i.path.as_str().to_owned(),
            order_key: i.order_key,
            attempt,
        })
        .await;
        // The context lives in the boxed `Attempts`, and the timer below and the rarely taken
        // `emit`/`back_off` futures are boxed: an item's task is one allocation of what it holds across
        // its awaits (792 bytes, 2,232 before), and under 1 KiB glibc serves it from exact-size bins (a
        // fan-out step spawns one per item; bench/analysis.md).
        self.ctx.begin_attempt(attempt, Some(deadline));
        let mut node = self.handler.run(&self.state, &mut self.ctx);
        // The node first: one that finishes without waiting never arms the timeout's timer.
        let result = match std::future::poll_fn(|cx| Poll::Ready(node.as_mut().poll(cx))).await {
            Poll::Ready(r) => r,
            Poll::Pending => {
                let timer = Box::pin(sleep_until(deadline));
                tokio::select! {
                    biased;
                    r = &mut node => r,
                    _ = timer => Err(NodeError::timed_out(self.timeout)),
                }
            }
        };
        drop(node);
        // The attempt is over: whatever it spawned with its token stops now.
        let outcome = self.ctx.end_attempt();
        drop(inflight);
        let duration = started.elapsed();
        self.meters.node_latency(self.node, duration);
        #[cfg(feature = "otel")]
        if result.is_err() && outcome.stop.is_none() {
            tracing::Span::current().record("otel.status_code", "ERROR");
        }
        let finished = match (&result, &outcome.stop) {
            (_, Some(_)) => NodeOutcome::Stopped,
            (Ok(_), None) => NodeOutcome::Finished,
            (Err(e), None) => NodeOutcome::Failed(e.to_string()),
        };
        self.debug(|i| StreamEvent::NodeFinished {
            step: i.step,
            node: i.node.to_string(),
            path: i.path.as_str().to_owned(),
            attempt,
            duration,
            outcome: finished,
        })
        .await;
        (result, outcome)
    }

    /// Streams the item's delta to an observer that asked for updates.
    async fn updated(&self, delta: &S::Delta) {
        if let Some(o) = self.observer.as_ref().filter(|o| o.wants(StreamModes::UPDATES)) {
            let i = self.ctx.item();
            let update = StreamEvent::Updated {
                step: i.step,
                node: i.node.to_string(),
                path: i.path.as_str().to_owned(),
                delta: delta.clone(),
            };
            Box::pin(o.emit(StreamModes::UPDATES, update)).await;
        }
    }

    /// Waits the retry policy's delay before attempt `attempt + 1`; false when the run was cancelled
    /// meanwhile.
    async fn back_off(&self, attempt: u32, error: &NodeError) -> bool {
        tracing::debug!(node = %self.ctx.item().node, attempt, error = %error, "retrying");
        self.meters.retry(self.node);
        let delay = self.retry.delay(&self.ctx.item().path, attempt);
        let message = error.to_string();
        self.debug(|i| StreamEvent::Retrying {
            step: i.step,
            node: i.node.to_string(),
            path: i.path.as_str().to_owned(),
            attempt,
            error: message,
            delay,
        })
        .await;
        if !delay.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.ctx.step_token().cancelled() => return false,
            }
        }
        true
    }
}
