//! Executing the items of one step.
//!
//! Items start in ascending order key (strictly: an item never starts before a lower-ordered one), at
//! most `max_concurrent_nodes` of the run at once and at most the node's limit per node, each after
//! admission into the engine-wide queue of `queue_depth` items. A started item runs its attempts
//! (timeout, retry with deterministic backoff) against the step's shared state. The step ends when all
//! items finished (the barrier), or at the first failure, cancellation, budget expiry or admission
//! timeout, in which case every running item is cancelled and awaited before returning: no item of a
//! stopped step outlives it.

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

use crate::ctx::Ctx;
use crate::error::NodeError;
use crate::graph::Graph;
use crate::keys::{OrderKey, PathId};
use crate::node::{Node, Route};
use crate::policy::{EngineOptions, RetryPolicy};
use crate::state::Reducer;
use crate::store::WorkItem;

/// What one finished item produced.
pub(crate) type ItemOutput<S> = (<S as Reducer>::Delta, Route);

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
}

type Acquire = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

/// Runs every item of a step; returns their outputs indexed by rank.
pub(crate) async fn execute_step<S: Reducer>(
    input: StepInput<'_, S>,
) -> Result<Vec<ItemOutput<S>>, StepStop> {
    let StepInput { graph, options, admission, items, nodes, .. } = input;
    let g = &graph.inner;
    let n = items.len();
    let max_running = options.max_concurrent_nodes.max(1);
    let node_limit = |node: usize| {
        g.nodes[node].policy.max_concurrency.or(options.max_per_node_concurrency).unwrap_or(usize::MAX).max(1)
    };
    if n == 1 {
        return execute_alone(input).await;
    }
    // Attempts of this step observe this token; cancelling it reaches every running item.
    let step_token = input.cancel.child_token();
    let mut outputs: Vec<Option<ItemOutput<S>>> = (0..n).map(|_| None).collect();
    let mut running_per_node: HashMap<usize, usize> = HashMap::new();
    let mut ranks: HashMap<tokio::task::Id, usize> = HashMap::new();
    let mut set: JoinSet<Result<ItemOutput<S>, (u32, NodeError)>> = JoinSet::new();
    let mut next = 0usize;
    let mut permit: Option<OwnedSemaphorePermit> = None;
    let mut acquire: Option<Acquire> = None;
    let mut waiting_since: Option<Instant> = None;

    let budget = sleep_until(input.run_deadline);
    tokio::pin!(budget);
    let cancelled = input.cancel.cancelled();
    tokio::pin!(cancelled);
    let stop = loop {
        // Start as many items as the limits allow, in order.
        while next < n {
            let node = nodes[next];
            if set.len() >= max_running
                || running_per_node.get(&node).copied().unwrap_or(0) >= node_limit(node)
            {
                break;
            }
            let p = match permit.take() {
                Some(p) => p,
                None => match admission.clone().try_acquire_owned() {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            waiting_since = None;
            let item = &items[next];
            let entry = &g.nodes[node];
            let attempt = attempts_for(&input, next, &step_token);
            let span = tracing::debug_span!("node", node = %entry.name, step = input.step, order_key = %item.order_key);
            let handle = set.spawn(
                async move {
                    let _permit = p; // admission is released when the item finishes
                    attempt.run().await
                }
                .instrument(span),
            );
            ranks.insert(handle.id(), next);
            *running_per_node.entry(node).or_default() += 1;
            next += 1;
        }
        if next == n && set.is_empty() {
            break None;
        }
        // Blocked on admission alone (limits would allow the next item)?
        let blocked = next < n
            && permit.is_none()
            && set.len() < max_running
            && running_per_node.get(&nodes[next]).copied().unwrap_or(0) < node_limit(nodes[next]);
        if blocked {
            if acquire.is_none() {
                acquire = Some(Box::pin(admission.clone().acquire_owned()));
            }
            waiting_since.get_or_insert_with(Instant::now);
        }
        let admission_deadline = waiting_since.map(|t| t + options.backpressure_timeout);
        tokio::select! {
            biased;
            _ = &mut cancelled => break Some(StepStop::Cancelled),
            _ = &mut budget => break Some(StepStop::Budget),
            Some(joined) = set.join_next_with_id(), if !set.is_empty() => {
                let (id, result) = match joined {
                    Ok((id, r)) => (id, Ok(r)),
                    Err(e) => (e.id(), Err(e)),
                };
                let rank = ranks.remove(&id).expect("every task is registered");
                if let Some(c) = running_per_node.get_mut(&nodes[rank]) {
                    *c -= 1;
                }
                match result {
                    Ok(Ok(out)) => outputs[rank] = Some(out),
                    Ok(Err((attempts, error))) => break Some(StepStop::Failed { rank, attempts, error }),
                    Err(e) if e.is_panic() => {
                        break Some(StepStop::Panicked { rank, message: panic_message(e.into_panic()) });
                    }
                    Err(_) => break Some(StepStop::Cancelled),
                }
            }
            p = async { acquire.as_mut().expect("set when blocked").await }, if acquire.is_some() => {
                acquire = None;
                match p {
                    Ok(p) => permit = Some(p),
                    Err(_) => break Some(StepStop::Cancelled), // the semaphore is never closed
                }
            }
            _ = sleep_until(admission_deadline.unwrap_or(input.run_deadline)), if admission_deadline.is_some() && blocked => {
                break Some(StepStop::Backpressure);
            }
        }
    };
    if let Some(stop) = stop {
        step_token.cancel();
        set.abort_all();
        while set.join_next().await.is_some() {}
        return Err(stop);
    }
    Ok(outputs.into_iter().map(|o| o.expect("every item finished")).collect())
}

/// A step of one item runs on the run's own task: no spawn, no cross-thread hop. Admission, the budget,
/// cancellation and panics are handled as for a wider step.
async fn execute_alone<S: Reducer>(input: StepInput<'_, S>) -> Result<Vec<ItemOutput<S>>, StepStop> {
    let options = input.options;
    if input.cancel.is_cancelled() {
        return Err(StepStop::Cancelled);
    }
    if Instant::now() >= input.run_deadline {
        return Err(StepStop::Budget);
    }
    let permit = match input.admission.clone().try_acquire_owned() {
        Ok(p) => p,
        Err(_) => tokio::select! {
            biased;
            _ = input.cancel.cancelled() => return Err(StepStop::Cancelled),
            p = input.admission.clone().acquire_owned() => p.map_err(|_| StepStop::Cancelled)?,
            _ = tokio::time::sleep(options.backpressure_timeout) => return Err(StepStop::Backpressure),
        },
    };
    // The item observes the run's token directly: a step of one has no siblings to stop.
    let attempts = attempts_for(&input, 0, input.cancel);
    let mut work = std::pin::pin!(attempts.run());
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
        Ok(Ok(out)) => Ok(vec![out]),
        Ok(Err((attempts, error))) => Err(StepStop::Failed { rank: 0, attempts, error }),
        Err(payload) => Err(StepStop::Panicked { rank: 0, message: panic_message(payload) }),
    };
    drop(permit);
    result
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
    let entry = &input.graph.inner.nodes[input.nodes[rank]];
    Attempts {
        handler: entry.handler.clone(),
        state: input.state.clone(),
        run_id: input.run_id.clone(),
        run_seed: input.run_seed,
        time_ms: input.time_ms,
        step: input.step,
        node: entry.name.clone(),
        order_key: item.order_key,
        path: item.path.clone(),
        input: item.input.clone().map(Arc::new),
        timeout: entry.policy.timeout.unwrap_or(input.options.default_node_timeout),
        retry: entry.policy.retry.clone().unwrap_or_else(|| input.options.default_retry.clone()),
        token: step_token.clone(),
        run_deadline: input.run_deadline,
    }
}

/// Everything one item needs to run its attempts on a worker.
struct Attempts<S: Reducer> {
    handler: Arc<dyn Node<S>>,
    state: Arc<S>,
    run_id: Arc<str>,
    run_seed: u64,
    time_ms: u64,
    step: u64,
    node: Arc<str>,
    order_key: OrderKey,
    path: PathId,
    input: Option<Arc<serde_json::Value>>,
    timeout: Duration,
    retry: RetryPolicy,
    token: CancellationToken,
    run_deadline: Instant,
}

impl<S: Reducer> Attempts<S> {
    /// Runs attempts until one succeeds or the retry policy gives up; `Err((attempts, last error))`.
    async fn run(self) -> Result<ItemOutput<S>, (u32, NodeError)> {
        let mut attempt = 1u32;
        loop {
            let node_deadline = Instant::now() + self.timeout;
            let deadline = node_deadline.min(self.run_deadline);
            let mut ctx = Ctx::new(
                self.run_id.clone(),
                self.step,
                self.node.clone(),
                self.order_key,
                attempt,
                self.path.clone(),
                self.run_seed,
                self.time_ms,
                self.token.clone(),
                Some(deadline),
                self.input.clone(),
            );
            // The node first: one that finishes without waiting never arms the timeout's timer.
            let result = tokio::select! {
                biased;
                r = self.handler.run(&self.state, &mut ctx) => r,
                _ = sleep_until(deadline) => Err(NodeError::timed_out(self.timeout)),
            };
            // The attempt is over: whatever it spawned with its token stops now.
            drop(ctx);
            match result {
                Ok(out) => return Ok(out),
                Err(error) if self.retry.should_retry(&error, attempt) => {
                    tracing::debug!(node = %self.node, attempt, error = %error, "retrying");
                    let delay = self.retry.delay(&self.path, attempt);
                    if !delay.is_zero() {
                        tokio::select! {
                            _ = tokio::time::sleep(delay) => {}
                            _ = self.token.cancelled() => return Err((attempt, error)),
                        }
                    }
                    attempt += 1;
                }
                Err(error) => return Err((attempt, error)),
            }
        }
    }
}
