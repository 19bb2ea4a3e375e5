//! Streaming a run: typed events as they happen, for a UI, a log or a progress bar.
//!
//! [`Engine::stream`](crate::Engine::stream) (and `stream_resume`, `stream_resume_with_inputs`) starts
//! the run on a task of its own and returns a [`RunStream`]: a `futures::Stream` of [`StreamEvent`]s
//! (also readable with [`RunStream::next`] without any stream library), ending with
//! [`StreamEvent::Finished`] carrying what `run`/`resume` would have returned. The caller picks what
//! it receives ([`StreamModes`], as LangGraph's `stream_mode`):
//!
//! | mode | events |
//! |---|---|
//! | `VALUES` | [`StreamEvent::Values`]: the state after each committed step (and at the start) |
//! | `UPDATES` | [`StreamEvent::Updated`]: each item's delta as it finishes |
//! | `CUSTOM` | [`StreamEvent::Custom`]: what nodes send with [`Ctx::stream`](crate::Ctx::stream) (tokens) |
//! | `DEBUG` | the lifecycle: run and step started, node started and finished (attempt, duration, outcome), retries, step committed, effects, interrupts |
//!
//! One item's events arrive in the order it produced them (started, its custom payloads, finished,
//! its update), never interleaved with themselves; items of one step run at once, so their events
//! interleave with each other's. A slow consumer either slows the run down (the channel is bounded:
//! [`Overflow::Wait`], the default) or loses events, counted in a [`StreamEvent::Dropped`] notice
//! ([`Overflow::Drop`]); `Finished` is never dropped. Dropping the stream cancels the run only with
//! [`StreamOptions::cancel_on_drop`]; otherwise the run goes on to its end.
//!
//! Streamed payloads are not part of the state: they are not checkpointed or journaled. A step that
//! runs again (after a crash, a retry, an interrupt) streams them again as its node runs; what an
//! earlier process streamed is not stored, so a resumed stream does not repeat it; a replay streams
//! nothing.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::ctx::CustomSink;
use crate::error::Error;
use crate::keys::OrderKey;
use crate::node::BoxFuture;
use crate::run::{ObserverSlot, RunOptions, RunOutcome};
use crate::state::Reducer;
use crate::store::Interrupt;

/// What a [`RunStream`] carries. Which events are sent depends on the [`StreamModes`].
#[derive(Debug)]
#[non_exhaustive]
pub enum StreamEvent<S: Reducer> {
    /// `DEBUG`: the run started (`resumed`: from a stored checkpoint) at `step`.
    RunStarted {
        /// The run.
        run_id: String,
        /// The step it starts from.
        step: u64,
        /// Whether it continues a stored run.
        resumed: bool,
    },
    /// `DEBUG`: a step's items are about to run.
    StepStarted {
        /// The step.
        step: u64,
        /// Its items' nodes, in order.
        nodes: Vec<String>,
    },
    /// `DEBUG`: an attempt of an item started.
    NodeStarted {
        /// The step.
        step: u64,
        /// The node.
        node: String,
        /// The item's path identity.
        path: String,
        /// The item's order key.
        order_key: OrderKey,
        /// The attempt, from 1.
        attempt: u32,
    },
    /// `CUSTOM`: a payload a node sent with `ctx.stream` (a token, a progress note).
    Custom {
        /// The step.
        step: u64,
        /// The node.
        node: String,
        /// The item's path identity.
        path: String,
        /// What it sent.
        payload: serde_json::Value,
    },
    /// `DEBUG`: an attempt failed and will be retried after `delay`.
    Retrying {
        /// The step.
        step: u64,
        /// The node.
        node: String,
        /// The item's path identity.
        path: String,
        /// The attempt that failed.
        attempt: u32,
        /// Its error.
        error: String,
        /// The backoff before the next attempt.
        delay: Duration,
    },
    /// `DEBUG`: an attempt of an item ended.
    NodeFinished {
        /// The step.
        step: u64,
        /// The node.
        node: String,
        /// The item's path identity.
        path: String,
        /// The attempt.
        attempt: u32,
        /// How long it ran.
        duration: Duration,
        /// How it ended.
        outcome: NodeOutcome,
    },
    /// `UPDATES`: an item's delta, once it finished (merged at the step's barrier).
    Updated {
        /// The step.
        step: u64,
        /// The node.
        node: String,
        /// The item's path identity.
        path: String,
        /// Its delta.
        delta: S::Delta,
    },
    /// `DEBUG`: an effect's response was used by an item of the committed step.
    Effect {
        /// The step the item ran in.
        step: u64,
        /// The node.
        node: String,
        /// The effect key.
        key: String,
        /// The effect's name.
        name: String,
    },
    /// `DEBUG`: checkpoint `step` was committed.
    StepCommitted {
        /// The step.
        step: u64,
        /// Its idempotency key.
        idempotency_key: String,
        /// The SHA-256 of its state.
        state_hash: String,
    },
    /// `VALUES`: the state at checkpoint `step`.
    Values {
        /// The step.
        step: u64,
        /// The state.
        state: S,
    },
    /// `DEBUG`: the run stopped for input, at a breakpoint, for a time (`InterruptKind::Sleep`, with its
    /// wake time) or for an external event (`InterruptKind::Event`, with its topic); `Finished` follows,
    /// its status `Interrupted` or `Waiting`.
    Interrupted {
        /// What it waits for.
        interrupts: Vec<Interrupt>,
    },
    /// `DEBUG`: the run was woken at `step` (after `RunStarted`): `by` is `"timer"` (a sleep ended, a
    /// deadline or timeout passed) or `"event"` (an external event was delivered), and `inputs` what each
    /// woken wait was given (as the `RESUMED` event records them: `{id, node, path, index, input}`).
    Woken {
        /// The step.
        step: u64,
        /// What woke it.
        by: String,
        /// What each wait was given.
        inputs: Vec<serde_json::Value>,
    },
    /// An event of a subgraph's run (`UPDATES`, `CUSTOM` or `DEBUG`, as its kind), with where it comes
    /// from: `namespace` lists, outermost first, each subgraph node's name and the step it ran in
    /// (`"research@1"`), so a caller sees the child's tokens and updates as LangGraph's
    /// `stream(subgraphs=True)` shows them.
    Subgraph {
        /// The nesting, outermost first: `"{node}@{step}"` of each subgraph node.
        namespace: Vec<String>,
        /// What happened there.
        event: SubgraphEvent,
    },
    /// Events were dropped because the consumer was behind ([`Overflow::Drop`]).
    Dropped {
        /// How many, since the last notice.
        count: u64,
    },
    /// The run ended, paused or stopped: what `run`/`resume` would have returned. Always the last event.
    Finished(Result<RunOutcome<S>, Error>),
}

/// An event of a subgraph's run ([`StreamEvent::Subgraph`]): the child's state type is not the
/// stream's, so deltas are JSON.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SubgraphEvent {
    /// `CUSTOM`: a payload a node of the subgraph sent with `ctx.stream`.
    Custom {
        /// The subgraph's step.
        step: u64,
        /// The node.
        node: String,
        /// What it sent.
        payload: serde_json::Value,
    },
    /// `UPDATES`: a node of the subgraph finished with this delta.
    Updated {
        /// The subgraph's step.
        step: u64,
        /// The node.
        node: String,
        /// Its delta, as JSON.
        delta: serde_json::Value,
    },
    /// `DEBUG`: an attempt of a node of the subgraph started.
    NodeStarted {
        /// The subgraph's step.
        step: u64,
        /// The node.
        node: String,
        /// The attempt, from 1.
        attempt: u32,
    },
    /// `DEBUG`: an attempt of a node of the subgraph ended.
    NodeFinished {
        /// The subgraph's step.
        step: u64,
        /// The node.
        node: String,
        /// The attempt.
        attempt: u32,
        /// How long it ran.
        duration: Duration,
        /// How it ended.
        outcome: NodeOutcome,
    },
}

impl SubgraphEvent {
    /// The mode that carries it.
    pub(crate) fn mode(&self) -> StreamModes {
        match self {
            SubgraphEvent::Custom { .. } => StreamModes::CUSTOM,
            SubgraphEvent::Updated { .. } => StreamModes::UPDATES,
            _ => StreamModes::DEBUG,
        }
    }

    /// A subgraph's own event as its parent's stream shows it (`None`: not forwarded), with the
    /// namespace it comes from below this level.
    pub(crate) fn of<C: Reducer>(event: StreamEvent<C>) -> Option<(Vec<String>, SubgraphEvent)> {
        Some(match event {
            StreamEvent::Custom { step, node, payload, .. } => {
                (Vec::new(), SubgraphEvent::Custom { step, node, payload })
            }
            StreamEvent::Updated { step, node, delta, .. } => {
                let delta = serde_json::to_value(&delta).unwrap_or(serde_json::Value::Null);
                (Vec::new(), SubgraphEvent::Updated { step, node, delta })
            }
            StreamEvent::NodeStarted { step, node, attempt, .. } => {
                (Vec::new(), SubgraphEvent::NodeStarted { step, node, attempt })
            }
            StreamEvent::NodeFinished { step, node, attempt, duration, outcome, .. } => {
                (Vec::new(), SubgraphEvent::NodeFinished { step, node, attempt, duration, outcome })
            }
            StreamEvent::Subgraph { namespace, event } => (namespace, event),
            _ => return None,
        })
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeOutcome {
    /// It returned its delta.
    Finished,
    /// It returned an error (retried or not: see `Retrying`).
    Failed(String),
    /// It asked for input (`ctx.interrupt`), or an effect stopped it.
    Stopped,
}

/// Which events a stream carries: an OR of the constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamModes(u8);

impl StreamModes {
    /// The state after each committed step.
    pub const VALUES: StreamModes = StreamModes(1);
    /// Each item's delta.
    pub const UPDATES: StreamModes = StreamModes(2);
    /// What nodes send with `ctx.stream`.
    pub const CUSTOM: StreamModes = StreamModes(4);
    /// The lifecycle of the run, its steps and its nodes.
    pub const DEBUG: StreamModes = StreamModes(8);
    /// Every event.
    pub const ALL: StreamModes = StreamModes(15);

    /// Whether every mode of `other` is in `self`.
    pub fn contains(self, other: StreamModes) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for StreamModes {
    type Output = StreamModes;
    fn bitor(self, rhs: StreamModes) -> StreamModes {
        StreamModes(self.0 | rhs.0)
    }
}

impl Default for StreamModes {
    /// `UPDATES | CUSTOM | DEBUG`: everything but the state after each step (a clone per step).
    fn default() -> Self {
        StreamModes::UPDATES | StreamModes::CUSTOM | StreamModes::DEBUG
    }
}

/// What a stream does when its consumer is behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Overflow {
    /// The run waits for the consumer (backpressure).
    #[default]
    Wait,
    /// Events are dropped and counted ([`StreamEvent::Dropped`]); the run never waits.
    Drop,
}

/// Options of a stream.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StreamOptions {
    /// Which events (default: [`StreamModes::default`]).
    pub modes: StreamModes,
    /// Events buffered before the consumer is behind (default 1024).
    pub buffer: usize,
    /// What happens then (default: [`Overflow::Wait`]).
    pub overflow: Overflow,
    /// Dropping the stream cancels the run (default: false; the run goes on).
    pub cancel_on_drop: bool,
    /// The run's options (seed, cancellation token, label).
    pub run: RunOptions,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            modes: StreamModes::default(),
            buffer: 1024,
            overflow: Overflow::Wait,
            cancel_on_drop: false,
            run: RunOptions::default(),
        }
    }
}

impl StreamOptions {
    /// Sets the modes.
    pub fn modes(mut self, modes: StreamModes) -> Self {
        self.modes = modes;
        self
    }

    /// Sets the buffer size (at least 1).
    pub fn buffer(mut self, events: usize) -> Self {
        self.buffer = events.max(1);
        self
    }

    /// Sets what happens when the consumer is behind.
    pub fn overflow(mut self, overflow: Overflow) -> Self {
        self.overflow = overflow;
        self
    }

    /// Dropping the stream cancels the run.
    pub fn cancel_on_drop(mut self, yes: bool) -> Self {
        self.cancel_on_drop = yes;
        self
    }

    /// Sets the run's options.
    pub fn run(mut self, run: RunOptions) -> Self {
        self.run = run;
        self
    }
}

/// The events of a streamed run (see the [module docs](self)).
#[derive(Debug)]
pub struct RunStream<S: Reducer> {
    rx: mpsc::Receiver<StreamEvent<S>>,
    /// Cancelled when the stream is dropped (with `cancel_on_drop`).
    cancel: Option<CancellationToken>,
}

impl<S: Reducer> RunStream<S> {
    pub(crate) fn new(rx: mpsc::Receiver<StreamEvent<S>>, cancel: Option<CancellationToken>) -> Self {
        RunStream { rx, cancel }
    }

    /// The next event; `None` after `Finished`.
    pub async fn next(&mut self) -> Option<StreamEvent<S>> {
        self.rx.recv().await
    }

    /// Reads the stream to its end and returns what `Finished` carried.
    ///
    /// # Errors
    ///
    /// What stopped the run.
    pub async fn outcome(mut self) -> Result<RunOutcome<S>, Error> {
        while let Some(e) = self.rx.recv().await {
            if let StreamEvent::Finished(out) = e {
                return out;
            }
        }
        Err(Error::Cancelled { run: String::new(), step: 0 })
    }
}

impl<S: Reducer> futures_core::Stream for RunStream<S> {
    type Item = StreamEvent<S>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl<S: Reducer> Drop for RunStream<S> {
    fn drop(&mut self) {
        if let Some(token) = &self.cancel {
            token.cancel();
        }
    }
}

/// The sending side of a stream, shared by a run's driver and its items.
#[derive(Debug)]
pub(crate) struct Observer<S: Reducer> {
    tx: mpsc::Sender<StreamEvent<S>>,
    modes: StreamModes,
    overflow: Overflow,
    dropped: AtomicU64,
}

impl<S: Reducer> Observer<S> {
    pub(crate) fn new(tx: mpsc::Sender<StreamEvent<S>>, modes: StreamModes, overflow: Overflow) -> Self {
        Observer { tx, modes, overflow, dropped: AtomicU64::new(0) }
    }

    /// Whether the stream carries `mode`.
    pub(crate) fn wants(&self, mode: StreamModes) -> bool {
        self.modes.contains(mode)
    }

    /// Sends `event` (of `mode`; nothing when the stream does not carry it). A consumer that is gone is
    /// not an error: the run goes on.
    pub(crate) async fn emit(&self, mode: StreamModes, event: StreamEvent<S>) {
        if !self.wants(mode) {
            return;
        }
        match self.overflow {
            Overflow::Wait => {
                let _ = self.tx.send(event).await;
            }
            Overflow::Drop => {
                let dropped = self.dropped.load(Ordering::Relaxed);
                if dropped > 0 {
                    match self.tx.try_send(StreamEvent::Dropped { count: dropped }) {
                        Ok(()) => {
                            self.dropped.fetch_sub(dropped, Ordering::Relaxed);
                        }
                        Err(_) => {
                            self.dropped.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    }
                }
                if self.tx.try_send(event).is_err() {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Sends an event of a subgraph's run, with where it comes from.
    pub(crate) async fn subgraph(&self, namespace: Vec<String>, event: SubgraphEvent) {
        let mode = event.mode();
        self.emit(mode, StreamEvent::Subgraph { namespace, event }).await;
    }

    /// The modes the stream carries.
    pub(crate) fn modes(&self) -> StreamModes {
        self.modes
    }

    /// Sends the last event, waiting for room whatever the overflow policy.
    pub(crate) async fn finish(&self, out: Result<RunOutcome<S>, Error>) {
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let _ = self.tx.send(StreamEvent::Dropped { count: dropped }).await;
        }
        let _ = self.tx.send(StreamEvent::Finished(out)).await;
    }
}

impl<S: Reducer> CustomSink for Observer<S> {
    fn any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }

    fn custom<'a>(
        &'a self,
        step: u64,
        node: &'a str,
        path: &'a str,
        payload: serde_json::Value,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let event = StreamEvent::Custom { step, node: node.to_owned(), path: path.to_owned(), payload };
            self.emit(StreamModes::CUSTOM, event).await;
        })
    }
}

/// The observer in `slot`, when the run streams (its state type is `S`).
pub(crate) fn observer_of<S: Reducer>(slot: &ObserverSlot) -> Option<Arc<Observer<S>>> {
    slot.0.clone().and_then(|a| a.downcast::<Observer<S>>().ok())
}
