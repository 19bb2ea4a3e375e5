//! What a caller gives a run ([`RunOptions`]) and gets back ([`RunOutcome`]).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::store::{Interrupt, RunStatus};

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
    /// A token that stops the run at the next step boundary (after the step in flight is committed),
    /// leaving it `Running` for any engine to resume: the call returns `Ok` with status `Running`.
    /// Unlike `cancel`, nothing is written. Workers use it for a graceful shutdown.
    pub stop: Option<CancellationToken>,
    /// Continue the run on a worker pool instead of here (see [`RunOptions::hand_back`]).
    pub hand_back: bool,
    /// Where the run's events go when it is streamed.
    pub(crate) observer: ObserverSlot,
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

    /// Sets the token that stops the run at the next step boundary, left `Running` (see
    /// [`RunOptions::stop`](struct.RunOptions.html#structfield.stop)).
    pub fn stop(mut self, token: CancellationToken) -> Self {
        self.stop = Some(token);
        self
    }

    /// Hands the run back instead of driving it: a call that continues a waiting run
    /// (`resume_with_inputs_with`, `resume_with`, `wake_with`) writes what continues it (the answers,
    /// the `Running` status) and returns at once with status `Running`, and a worker of the pool claims
    /// it. Use it whenever workers serve the store: a run driven here beside them would be driven twice
    /// (one of the two then stops with `Error::Superseded` or `Error::Fenced`).
    pub fn hand_back(mut self) -> Self {
        self.hand_back = true;
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
    /// `Completed`, `Interrupted` (see [`RunOutcome::interrupts`]), or `Paused` with a reason.
    pub status: RunStatus,
    /// The latest committed step.
    pub steps: u64,
}

impl<S> RunOutcome<S> {
    /// True when the run reached END.
    pub fn is_completed(&self) -> bool {
        self.status == RunStatus::Completed
    }

    /// What the run waits for when it is `Interrupted` or `Waiting` (empty otherwise).
    pub fn interrupts(&self) -> &[Interrupt] {
        self.status.waits()
    }
}

/// An observer held without its state type (in `RunOptions`), for the engine to take back
/// ([`crate::stream`] keeps the observer's type).
#[derive(Clone, Default)]
pub(crate) struct ObserverSlot(pub(crate) Option<Arc<dyn std::any::Any + Send + Sync>>);

impl std::fmt::Debug for ObserverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "ObserverSlot(streaming)" } else { "ObserverSlot(none)" })
    }
}
