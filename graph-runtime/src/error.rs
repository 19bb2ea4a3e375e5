//! Typed errors. Every message says what happened and what to do about it; match on the variants, never
//! on the text.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use crate::state::MergeFailure;
pub use crate::state::{ConflictError, MergeError};

/// The crate's result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A boxed error cause.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

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
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The graph description is invalid.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

impl Error {
    /// The error of a store outcome that found the run row at another version than `expected`.
    pub(crate) fn version_conflict(run: &str, expected: u64, outcome: &crate::store::CommitOutcome) -> Self {
        use crate::store::CommitOutcome;
        let found = match outcome {
            CommitOutcome::Fenced => return Error::Fenced { run: run.to_owned(), step: 0 },
            CommitOutcome::VersionConflict { current }
            | CommitOutcome::Committed { version: current }
            | CommitOutcome::AlreadyCommitted { version: current }
            | CommitOutcome::StepTaken { version: current, .. } => *current,
        };
        Error::VersionConflict { run: run.to_owned(), expected, found }
    }

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

/// A store operation failed.
///
/// `Display` shows the whole cause: a backend error's source chain is part of the message (a user reads
/// "No space left on device", not only "the commit failed").
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Stored bytes are damaged: what they should hold cannot be read back.
    #[error("{}", corrupted_message(run.as_deref(), *step, file.as_deref(), detail, remedy))]
    Corrupted {
        /// The run whose records are damaged, when known.
        run: Option<String>,
        /// The step whose checkpoint is damaged, when known.
        step: Option<u64>,
        /// The damaged file of the store, when known.
        file: Option<std::path::PathBuf>,
        /// What is wrong.
        detail: String,
        /// What the user can do about it.
        remedy: &'static str,
    },
    /// A record was written by a newer version of this library.
    #[error(
        "stored schema version {found} is not supported (this build reads {supported}); upgrade graph-runtime"
    )]
    UnsupportedSchemaVersion {
        /// The version found.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// Another process holds the store.
    #[error("the store at {path:?} is in use by another process; stop it, or open another folder")]
    Locked {
        /// The store's path.
        path: std::path::PathBuf,
    },
    /// A write to a store opened read-only (`SqliteStore::open_read_only`).
    #[error(
        "the store at {} was opened read-only and refuses writes; open it for writing to change it",
        path.display()
    )]
    ReadOnly {
        /// The store's path.
        path: std::path::PathBuf,
    },
    /// An I/O error stopped the store: it refuses every operation until it is dropped and opened again,
    /// because after a failed write what its files hold is known only by reading them back.
    #[error(
        "the store at {} stopped after an I/O error and refuses every operation until it is opened again: \
         {cause}; every commit it acknowledged is on disk: fix the cause (free space, check the device), \
         drop this store and open it again",
        path.display()
    )]
    FailStopped {
        /// The store's path.
        path: std::path::PathBuf,
        /// The first error, with its cause.
        cause: String,
    },
    /// A stored event of a run's event log cannot be read back (see [`crate::events`]).
    #[error("event {seq} of the event log of run `{run}` is damaged: {detail}; {}", REMEDY_RECORD)]
    CorruptedEvent {
        /// The run.
        run: String,
        /// The event's sequence number.
        seq: u64,
        /// What is wrong.
        detail: String,
    },
    /// The store cannot be reached for now (a database server that is down or restarting, a connection
    /// the server closed, a database locked past its busy timeout): nothing was written by the failed
    /// call, and the same call may succeed later. The engine retries commits that fail this way for
    /// `EngineOptions::store_retry_timeout`.
    #[error("the store is unavailable: {message}{}", cause_chain(source.as_deref()))]
    Unavailable {
        /// What failed.
        message: String,
        /// The cause.
        #[source]
        source: Option<BoxError>,
    },
    /// The backend failed (I/O, connection, ...).
    #[error("{message}{}", cause_chain(source.as_deref()))]
    Backend {
        /// What failed.
        message: String,
        /// The cause.
        #[source]
        source: Option<BoxError>,
    },
}

/// What a user can do about a damaged checkpoint record.
pub(crate) const REMEDY_RECORD: &str = "the bytes changed after they were written (a disk or memory fault, \
     or an edit of the store's files): restore the store from a backup, or start the run again";

fn corrupted_message(
    run: Option<&str>,
    step: Option<u64>,
    file: Option<&std::path::Path>,
    detail: &str,
    remedy: &str,
) -> String {
    let mut m = String::from("stored data is damaged");
    match (step, run) {
        (Some(step), Some(run)) => m.push_str(&format!(": checkpoint {step} of run `{run}`")),
        (None, Some(run)) => m.push_str(&format!(": run `{run}`")),
        _ => {}
    }
    if let Some(file) = file {
        m.push_str(&format!(" in {}", file.display()));
    }
    format!("{m}: {detail}; {remedy}")
}

/// `: cause: its cause: ...` for a source chain (empty without a source).
fn cause_chain(source: Option<&(dyn StdError + Send + Sync + 'static)>) -> String {
    let mut out = String::new();
    let mut next: Option<&(dyn StdError + 'static)> = source.map(|s| s as &(dyn StdError + 'static));
    while let Some(e) = next {
        // A cause whose text the one before already ends with (an error that says its source in its
        // own text: "error communicating with database: Connection refused", then "Connection
        // refused") is said once.
        let text = e.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = e.source();
    }
    out
}

impl StoreError {
    /// An [`StoreError::Unavailable`] error with a cause.
    pub fn unavailable(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Unavailable { message: message.into(), source: Some(source.into()) }
    }

    /// Whether the same call may succeed if tried again later (the store was unavailable; nothing was
    /// written). Every other error is permanent for that call.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }

    /// A backend error with a cause.
    pub fn backend(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Backend { message: message.into(), source: Some(source.into()) }
    }

    /// A damaged checkpoint record of `run` at `step` (its bytes do not read back as written).
    pub fn corrupted_record(run: impl Into<String>, step: u64, detail: impl Into<String>) -> Self {
        StoreError::Corrupted {
            run: Some(run.into()),
            step: Some(step),
            file: None,
            detail: detail.into(),
            remedy: REMEDY_RECORD,
        }
    }

    /// Damage in a file of the store.
    pub fn corrupted_file(
        file: impl Into<std::path::PathBuf>,
        detail: impl Into<String>,
        remedy: &'static str,
    ) -> Self {
        StoreError::Corrupted {
            run: None,
            step: None,
            file: Some(file.into()),
            detail: detail.into(),
            remedy,
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
    pub(crate) stop: Option<Box<crate::ctx::CtxStop>>,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that says its cause in its own text, as sqlx's and many others do.
    #[derive(Debug)]
    struct Wraps(std::io::Error);

    impl fmt::Display for Wraps {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "error communicating with database: {}", self.0)
        }
    }

    impl StdError for Wraps {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_already_said_by_the_error_before_it_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let e = StoreError::unavailable("connecting", Wraps(io));
        assert_eq!(
            e.to_string(),
            "the store is unavailable: connecting: error communicating with database: Connection refused"
        );
        // A cause the error before does not say is kept.
        let e = StoreError::backend("writing", std::io::Error::other("disk full"));
        assert_eq!(e.to_string(), "writing: disk full");
    }
}
