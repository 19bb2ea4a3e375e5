//! Typed errors. Every message says what happened and what to do about it; match on the variants, never
//! on the text.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

pub use graph_store::error::{BoxError, REMEDY_RECORD, StoreError};
use graph_store::events::ChainError;

use crate::state::MergeFailure;
pub use crate::state::{ConflictError, MergeError};

/// The crate's result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a run stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A node returned an error and its retry policy gave up (or the error was not retryable).
    #[error(
        "node `{node}` failed at step {step} of run `{run}` after {attempts} attempt(s): {source}; \
         make the error retryable, or give the node more attempts (`retry(attempts = n)`) if it is transient"
    )]
    NodeFailed {
        /// The run.
        run: String,
        /// The step the node ran in.
        step: u64,
        /// The node.
        node: String,
        /// Attempts made, including the first.
        attempts: u32,
        /// The node's last error.
        #[source]
        source: BoxError,
    },
    /// A node exceeded its timeout on its last allowed attempt.
    #[error(
        "node `{node}` timed out after {timeout:?} at step {step} of run `{run}` ({attempts} attempt(s)); \
         raise its `timeout` or the engine's `default_node_timeout`"
    )]
    NodeTimeout {
        /// The run.
        run: String,
        /// The step.
        step: u64,
        /// The node.
        node: String,
        /// The timeout that elapsed.
        timeout: Duration,
        /// Attempts made.
        attempts: u32,
    },
    /// A node panicked. Panics are not retried.
    #[error("node `{node}` panicked at step {step} of run `{run}`: {message}")]
    NodePanicked {
        /// The run.
        run: String,
        /// The step.
        step: u64,
        /// The node.
        node: String,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// The run was cancelled; its last committed step is intact and `resume` continues it.
    #[error("run `{run}` was cancelled during step {step}; `Engine::resume` continues it from that step")]
    Cancelled {
        /// The run.
        run: String,
        /// The step that was executing.
        step: u64,
    },
    /// The run's wall-clock budget elapsed.
    #[error(
        "run `{run}` exceeded its wall-clock budget of {budget:?} during step {step}; raise \
         `run_wall_clock_budget` or `resume` the run, which continues from its last committed step"
    )]
    BudgetExceeded {
        /// The run.
        run: String,
        /// The step that was executing.
        step: u64,
        /// The budget.
        budget: Duration,
    },
    /// The run reached `max_steps` without finishing.
    #[error(
        "run `{run}` reached max_steps = {max_steps} without reaching END; a loop may lack an exit, or \
         raise `max_steps`"
    )]
    MaxStepsExceeded {
        /// The run.
        run: String,
        /// The limit.
        max_steps: u64,
    },
    /// A node routed nowhere (an empty fork, or no declared edge): the run cannot progress.
    #[error(
        "no progress in run `{run}` at step {step}: node `{node}` routed nowhere; route to a declared \
         edge or to END"
    )]
    NoProgress {
        /// The run.
        run: String,
        /// The step.
        step: u64,
        /// The node that routed nowhere.
        node: String,
    },
    /// A node routed to an edge index it did not declare.
    #[error(
        "node `{node}` routed to edge {edge} at step {step} of run `{run}`, but declares {declared} edge(s) \
         (indices 0..{declared}); routes can only name declared edges"
    )]
    UndeclaredEdge {
        /// The run.
        run: String,
        /// The step.
        step: u64,
        /// The node.
        node: String,
        /// The edge index it named.
        edge: u32,
        /// How many edges the node declares.
        declared: usize,
    },
    /// Two items of one step wrote a field the conflict policy does not let them share.
    #[error("run `{run}`: {source}")]
    Conflict {
        /// The run.
        run: String,
        /// The conflict (boxed: it is large and rare).
        #[source]
        source: Box<ConflictError>,
    },
    /// A reducer failed to merge a node's delta.
    #[error("run `{run}`: merging the delta of node `{node}` at step {step} failed: {source}")]
    Merge {
        /// The run.
        run: String,
        /// The step.
        step: u64,
        /// The node whose delta failed.
        node: String,
        /// The reducer's error.
        #[source]
        source: MergeError,
    },
    /// `run` was called with an id that already has checkpoints.
    #[error("run `{run}` already exists; use `Engine::resume` to continue it or pick a new run id")]
    RunExists {
        /// The run.
        run: String,
    },
    /// This engine is already driving the run.
    #[error("run `{run}` is already being driven by this engine; wait for it or cancel it")]
    AlreadyRunning {
        /// The run.
        run: String,
    },
    /// `resume` was called with an id that has no checkpoint.
    #[error("run `{run}` has no checkpoint in this store; start it with `Engine::run`")]
    RunNotFound {
        /// The run.
        run: String,
    },
    /// The run was started by a different graph than the one resuming it.
    #[error(
        "run `{run}` was started by graph fingerprint {stored}, this engine runs {current}; resume it \
         with the graph it started with"
    )]
    GraphChanged {
        /// The run.
        run: String,
        /// The fingerprint stored with the run.
        stored: String,
        /// This engine's graph fingerprint.
        current: String,
    },
    /// The run runs another version of the graph than this engine's own, one the engine serves
    /// (`EngineBuilder::serves`) with a state type of its own: a call typed by this engine's state
    /// cannot return it. Nothing was done.
    #[error(
        "run `{run}` runs version {version} of graph `{graph}`, whose state type is not this engine's \
         (version {current}); continue it through `engine.version::<ItsState>({version})`, or move it to \
         this version with `engine.migrate(run, {current})`"
    )]
    OtherVersion {
        /// The run.
        run: String,
        /// The graph.
        graph: String,
        /// The version the run runs.
        version: u32,
        /// This engine's version.
        current: u32,
    },
    /// A migration was refused; the run is unchanged.
    #[error("run `{run}` cannot be migrated from version {from} to version {to}: {reason}")]
    Migration {
        /// The run.
        run: String,
        /// The version the run runs.
        from: u32,
        /// The version asked for.
        to: u32,
        /// Why, and what to do.
        reason: String,
    },
    /// The state's bytes are not a function of its value: serialized twice, or after a round trip, it
    /// gives other bytes. Its hash and the step's idempotency key would then differ between processes,
    /// which breaks resume and exactly-once commits.
    #[error(
        "run `{run}`: the state of step {step} is not serialized deterministically ({detail}); its hash and \
         the step's idempotency key would change between processes: use `BTreeSet` instead of `HashSet` \
         (maps are sorted for you), and make every custom `Serialize` of the state depend on the value \
         alone (and reducers pure)"
    )]
    NondeterministicState {
        /// The run.
        run: String,
        /// The step whose state it is.
        step: u64,
        /// What differed.
        detail: String,
    },
    /// The state or a delta could not be (de)serialized.
    #[error("run `{run}`: cannot serialize or deserialize {what}: {source}")]
    Serialization {
        /// The run.
        run: String,
        /// What was being converted.
        what: &'static str,
        /// serde_json's error.
        #[source]
        source: serde_json::Error,
    },
    /// A strict replay diverged from the recorded run: a different effect call (name or request), an
    /// effect the recorded run did not make, or a checkpoint that differs.
    #[error(
        "replay of run `{run}` diverged at step {step}{}{}: the recorded run has {expected}, the replay {found}; \
         the graph or a node's code changed since the run was recorded, or a node is not deterministic",
        if node.is_empty() { String::new() } else { format!(", node `{node}`") },
        call.map(|c| format!(", effect call {c}")).unwrap_or_default()
    )]
    ReplayMismatch {
        /// The recorded run.
        run: String,
        /// The step.
        step: u64,
        /// The node whose effect call diverged (empty for a checkpoint).
        node: String,
        /// The effect call's index in its item's attempt (`None` for a checkpoint).
        call: Option<u32>,
        /// What the recording has.
        expected: String,
        /// What the replay produced.
        found: String,
    },
    /// A run's event log does not verify: an event was changed, removed, reordered or cut off.
    #[error(
        "the event log of run `{run}` is broken at event {seq}: it was changed, removed, reordered or cut off \
         after it was written; restore the store from a backup (the checkpoints are checked separately)"
    )]
    ExecutionCorrupted {
        /// The run.
        run: String,
        /// The first event that does not verify (or the first missing one).
        seq: u64,
    },
    /// An input given to `resume_with_input(s)` cannot be delivered: the run waits for no input (or not
    /// for this one), or the node cannot read it as the type it asks for. Nothing was changed: the run
    /// still waits, and the input was discarded.
    #[error("the input for run `{run}`{} was not accepted: {detail}; nothing was changed", interrupt.as_ref().map(|i| format!(" (interrupt `{i}`)")).unwrap_or_default())]
    ResumeInput {
        /// The run.
        run: String,
        /// The interrupt the input was for, when known.
        interrupt: Option<String>,
        /// Why.
        detail: String,
    },
    /// An answer came after the question's deadline (`Ctx::interrupt_with_deadline`): the node is given
    /// its timeout instead (when the run is woken), and the answer is refused. Nothing was changed.
    #[error(
        "the answer to interrupt `{interrupt}` of run `{run}` came after its deadline ({deadline_ms} ms since \
         the epoch, now {now_ms}); the node takes its timeout instead; nothing was changed"
    )]
    DeadlinePassed {
        /// The run.
        run: String,
        /// The interrupt answered.
        interrupt: String,
        /// Its deadline, ms since the Unix epoch.
        deadline_ms: u64,
        /// The engine's clock when the answer came.
        now_ms: u64,
    },
    /// An external event delivered to a waiting node could not be read as the type it waits for: the
    /// message is kept in the run's mailbox, marked rejected (never delivered again), and the run keeps
    /// waiting for the next message of the topic.
    #[error(
        "event {seq} of topic `{topic}` sent to run `{run}` was rejected by the waiting node: {detail}; the \
         message is kept, marked rejected, and the run keeps waiting"
    )]
    EventRejected {
        /// The run.
        run: String,
        /// The topic.
        topic: String,
        /// The message's sequence number in the run's mailbox.
        seq: u64,
        /// Why.
        detail: String,
    },
    /// A schedule that cannot be made or changed: a spec that does not parse (the detail says what is
    /// wrong), an empty name, or a schedule of this graph that does not exist.
    #[error("schedule `{name}`: {detail}")]
    InvalidSchedule {
        /// The schedule.
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// A step of a run that the store does not hold (never reached, or pruned).
    #[error("run `{run}` has no checkpoint at step {step} in this store (never reached, or pruned)")]
    StepNotFound {
        /// The run.
        run: String,
        /// The step.
        step: u64,
    },
    /// `resolve_effect` named an effect that is not waiting for confirmation.
    #[error(
        "effect `{key}` of run `{run}` is not waiting for confirmation (it is {state}); nothing was changed"
    )]
    EffectNotPending {
        /// The run.
        run: String,
        /// The effect key.
        key: String,
        /// Where the effect stands.
        state: String,
    },
    /// Another writer advanced the run (optimistic locking).
    #[error(
        "run `{run}` was advanced by another writer (expected version {expected}, found {found}); only one \
         engine may drive a run at a time"
    )]
    VersionConflict {
        /// The run.
        run: String,
        /// The version this engine expected.
        expected: u64,
        /// The version in the store.
        found: u64,
    },
    /// The run's lease was lost (expired, or taken over by another worker) while this engine drove it
    /// under a worker (`graph_runtime::worker`): nothing more was written; the new holder continues the run.
    #[error(
        "run `{run}` was fenced at step {step}: its lease was lost (expired or taken over by another \
         worker); nothing was written"
    )]
    Fenced {
        /// The run.
        run: String,
        /// The last step this engine saw committed.
        step: u64,
    },
    /// Another writer drives the run (a worker claimed it while this engine drove it without a lease):
    /// this engine stopped without writing anything more; the other writer continues the run. Continue
    /// a run of a worker pool by handing it back ([`RunOptions::hand_back`](crate::RunOptions::hand_back)).
    #[error(
        "run `{run}` is driven by another writer (seen at step {step}): this engine stopped and wrote \
         nothing more; hand runs of a worker pool back to it instead of driving them beside it"
    )]
    Superseded {
        /// The run.
        run: String,
        /// The last step this engine saw committed.
        step: u64,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The graph description is invalid.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

impl From<ChainError> for Error {
    fn from(e: ChainError) -> Self {
        match e {
            ChainError::Broken { run, seq } => Error::ExecutionCorrupted { run, seq },
            ChainError::Store(e) => Error::Store(e),
            other => Error::Store(StoreError::Backend { message: other.to_string(), source: None }),
        }
    }
}

impl Error {
    /// The error of a step whose merge failed.
    pub(crate) fn from_merge(run: &str, step: u64, failure: MergeFailure) -> Self {
        match failure {
            MergeFailure::Conflict(source) => {
                Error::Conflict { run: run.to_owned(), source: Box::new(source) }
            }
            MergeFailure::Merge { node, error } => {
                Error::Merge { run: run.to_owned(), step, node, source: error }
            }
        }
    }
}

/// The graph description is invalid (the macros report these at compile time).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// An edge or the entry names a node that does not exist.
    #[error("unknown node `{name}` in {place}{}", suggestion.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default())]
    UnknownNode {
        /// The name.
        name: String,
        /// Where it was named.
        place: String,
        /// The closest existing name.
        suggestion: Option<String>,
    },
    /// Two nodes share a name.
    #[error("node `{name}` is declared twice; node names must be unique")]
    DuplicateNode {
        /// The name.
        name: String,
    },
    /// A node is named `END`'s reserved id.
    #[error("`{name}` is reserved for END and cannot name a node")]
    ReservedName {
        /// The name.
        name: String,
    },
    /// No entry node was set.
    #[error("the graph has no entry node; mark one with `entry`")]
    NoEntry,
    /// Two entry nodes were set.
    #[error("the graph has two entry nodes, `{first}` and `{second}`; keep one")]
    TwoEntries {
        /// The first entry.
        first: String,
        /// The second.
        second: String,
    },
    /// A node was given two error handlers.
    #[error("node `{node}` has two `on_error` handlers; keep one")]
    TwoHandlers {
        /// The node.
        node: String,
    },
    /// A node cannot be reached from the entry.
    #[error("node `{node}` is unreachable from the entry `{entry}`; add an edge to it or remove it")]
    Unreachable {
        /// The node.
        node: String,
        /// The entry.
        entry: String,
    },
    /// A wait-for-all join names a predecessor with no edge to it.
    #[error(
        "node `{node}` waits for `{predecessor}`, which has no edge to it; add `{node}` to the edges of \
         `{predecessor}` or remove it from the `wait_for`"
    )]
    WaitWithoutEdge {
        /// The join node.
        node: String,
        /// The predecessor without an edge to it.
        predecessor: String,
    },
    /// END cannot be reached from a node (a loop with no exit).
    #[error(
        "END cannot be reached from node `{node}`; add an edge to END on its path (a loop needs an exit)"
    )]
    NoWayToEnd {
        /// The node.
        node: String,
    },
}

/// What a node returns on failure. Any `std::error::Error` converts into it with `?`.
///
/// Errors are retryable by default (the retry policy decides how often); [`NodeError::fatal`] marks one
/// that no retry can fix.
pub struct NodeError {
    inner: BoxError,
    retryable: bool,
    timeout: Option<Duration>,
    /// Set by an effect call that must stop the step whatever the node does (a pause for confirmation, a
    /// strict replay's divergence).
    /// Boxed: every node returns a `NodeError` on failure, and this is rare.
    pub(crate) stop: Option<Box<CtxStop>>,
}

impl NodeError {
    /// A retryable error with a message.
    pub fn new(message: impl fmt::Display) -> Self {
        NodeError { inner: message.to_string().into(), retryable: true, timeout: None, stop: None }
    }

    /// An error no retry can fix: the retry policy is not consulted.
    pub fn fatal(message: impl fmt::Display) -> Self {
        NodeError { retryable: false, ..NodeError::new(message) }
    }

    /// Wraps any error as retryable.
    pub fn from_error(error: impl Into<BoxError>) -> Self {
        NodeError { inner: error.into(), retryable: true, timeout: None, stop: None }
    }

    /// Sets whether a retry may help.
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    pub(crate) fn timed_out(timeout: Duration) -> Self {
        NodeError {
            inner: format!("timed out after {timeout:?}").into(),
            retryable: true,
            timeout: Some(timeout),
            stop: None,
        }
    }

    /// Whether a retry may help (the default predicate of [`RetryPolicy`](crate::RetryPolicy)).
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The timeout, when the engine ended the attempt for exceeding it.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The underlying error.
    pub fn inner(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.inner
    }

    /// The underlying error, owned.
    pub fn into_inner(self) -> BoxError {
        self.inner
    }
}

impl<E: StdError + Send + Sync + 'static> From<E> for NodeError {
    fn from(error: E) -> Self {
        NodeError::from_error(error)
    }
}

impl fmt::Debug for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeError")
            .field("inner", &self.inner)
            .field("retryable", &self.retryable)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

/// One way a replay differed from the recorded run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Divergence {
    /// The step (for an effect: the step its item belongs to; for a checkpoint: its step).
    pub step: u64,
    /// The node of the item whose effect call diverged (empty for a checkpoint).
    pub node: String,
    /// The effect call's index within its item's attempt (`None` for a checkpoint).
    pub call: Option<u32>,
    /// What the recorded run has.
    pub expected: String,
    /// What the replay produced.
    pub found: String,
}

/// Why an effect call stops the step, whatever the node returns.
#[derive(Debug, Clone)]
pub(crate) enum CtxStop {
    /// Another writer drives the run (an effect's journal entry changed while its call ran): the run
    /// stops without writing anything more, as a fenced one does.
    Superseded,
    /// A non-idempotent effect's outcome is unknown: the run pauses for confirmation.
    NeedsConfirmation { key: String, name: String },
    /// A strict replay diverged.
    ReplayMismatch(Divergence),
    /// The node asked for input (`Ctx::interrupt`) or sleeps (`Ctx::sleep`): its item waits; its
    /// siblings run on.
    Interrupt(Asked),
    /// The input given for an interrupt does not read as the type the node asks for.
    InputRejected { index: u32, detail: String },
    /// An effect's journal write was fenced: the worker's lease on the run is lost, and the run stops
    /// without writing anything more (as a fenced commit does).
    Fenced,
}

/// What a node's stopping call asked for: a question (perhaps with a deadline) or a sleep.
#[derive(Debug, Clone)]
pub(crate) struct Asked {
    /// Which waiting call of the attempt (`interrupt`, `sleep` and their kin share the count), from 0.
    pub(crate) index: u32,
    pub(crate) kind: graph_store::InterruptKind,
    pub(crate) payload: serde_json::Value,
    /// A sleep's end, a question's deadline or an event wait's timeout, ms since the Unix epoch.
    pub(crate) wake_at_ms: Option<u64>,
    /// The topic of an event wait.
    pub(crate) topic: Option<String>,
    /// The id of the interrupt of a subgraph's run this one stands for (`None`: the node's own).
    pub(crate) nested: Option<String>,
}
