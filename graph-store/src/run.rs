//! Runs as the store keeps them: the run row ([`RunInfo`]), its status ([`RunStatus`]) and the status's
//! persisted name ([`StatusKind`]), and the filter of [`crate::Store::list_runs`].

use serde::{Deserialize, Serialize};

use crate::events::ChainHead;

/// Where a run stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum RunStatus {
    /// Executing, or stopped by a crash: resumable.
    Running,
    /// Reached END; the latest checkpoint holds the final state.
    Completed,
    /// Paused with a durable checkpoint; `resume` continues.
    Paused(PauseReason),
    /// Stopped for a person: nodes asked for input (`Ctx::interrupt`, perhaps with a deadline), or a
    /// breakpoint was reached. `Engine::resume_with_input` answers; `resume` continues past breakpoints.
    Interrupted(Vec<Interrupt>),
    /// Parked for time or mail alone: every item that stopped sleeps (`Ctx::sleep`) or waits for an
    /// external event (`Ctx::wait_event`), so no person is asked. The run holds no task; whoever wakes
    /// due runs (an engine's timer service, a worker) continues it at the earliest
    /// [`Interrupt::wake_at_ms`] ([`RunStatus::wake_at_ms`]).
    Waiting(Vec<Interrupt>),
    /// Stopped by an error; `resume` retries from the last committed step.
    Failed(String),
    /// Cancelled by the user; `resume` continues.
    Cancelled,
}

impl RunStatus {
    /// Whether the run stopped at an end of its own (completed, failed or cancelled), not waiting to go
    /// on (running, paused, interrupted). A failed or cancelled run commits again only if resumed.
    pub fn has_ended(&self) -> bool {
        matches!(self, RunStatus::Completed | RunStatus::Failed(_) | RunStatus::Cancelled)
    }

    /// Its variant, without the data it carries.
    pub fn kind(&self) -> StatusKind {
        match self {
            RunStatus::Running => StatusKind::Running,
            RunStatus::Completed => StatusKind::Completed,
            RunStatus::Paused(_) => StatusKind::Paused,
            RunStatus::Interrupted(_) => StatusKind::Interrupted,
            RunStatus::Waiting(_) => StatusKind::Waiting,
            RunStatus::Failed(_) => StatusKind::Failed,
            RunStatus::Cancelled => StatusKind::Cancelled,
        }
    }

    /// Its persisted name ([`StatusKind::as_str`]).
    pub fn as_str(&self) -> &'static str {
        self.kind().as_str()
    }

    /// What the run waits for: the interrupts of an `Interrupted` or `Waiting` run (empty otherwise).
    pub fn waits(&self) -> &[Interrupt] {
        match self {
            RunStatus::Interrupted(list) | RunStatus::Waiting(list) => list,
            _ => &[],
        }
    }

    /// When the run is due to be woken: the earliest wake time of what it waits for (a sleep's end, a
    /// question's deadline), ms since the Unix epoch; `None` when nothing it waits for has a time. What
    /// the server stores keep in their `wake_at_ms` column, and what wakes a run.
    ///
    /// ```
    /// use graph_store::{Interrupt, InterruptKind, RunStatus};
    /// let sleep = |at| Interrupt {
    ///     id: "p#0".into(), kind: InterruptKind::Sleep, node: "n".into(), path: "p".into(),
    ///     step: 1, index: 0, payload: serde_json::Value::Null, wake_at_ms: Some(at), topic: None,
    /// };
    /// assert_eq!(RunStatus::Waiting(vec![sleep(9), sleep(5)]).wake_at_ms(), Some(5));
    /// assert_eq!(RunStatus::Running.wake_at_ms(), None);
    /// ```
    pub fn wake_at_ms(&self) -> Option<u64> {
        self.waits().iter().filter_map(|i| i.wake_at_ms).min()
    }

    /// This status with each wait's due time replaced by `due(wait)` (another status as it is): a
    /// message's arrival moving an event wait's time to now, or putting it back.
    pub fn with_due_times(&self, due: impl Fn(&Interrupt) -> Option<u64>) -> RunStatus {
        let map = |list: &[Interrupt]| -> Vec<Interrupt> {
            list.iter().map(|i| Interrupt { wake_at_ms: due(i), ..i.clone() }).collect()
        };
        match self {
            RunStatus::Waiting(list) => RunStatus::Waiting(map(list)),
            RunStatus::Interrupted(list) => RunStatus::Interrupted(map(list)),
            other => other.clone(),
        }
    }
}

/// A [`RunStatus`]'s variant: what stores persist in a query column (the SQL stores' `status`), what
/// the event log records (`RESUMED`'s `from`), and what `graphctl runs --status` takes. The names are
/// stored: they never change.
///
/// ```
/// use graph_store::{RunStatus, StatusKind};
/// assert_eq!(RunStatus::Failed("boom".into()).as_str(), "failed");
/// assert_eq!("interrupted".parse::<StatusKind>(), Ok(StatusKind::Interrupted));
/// for kind in StatusKind::ALL {
///     assert_eq!(kind.as_str().parse::<StatusKind>(), Ok(kind));
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum StatusKind {
    /// [`RunStatus::Running`]: `"running"`.
    Running,
    /// [`RunStatus::Completed`]: `"completed"`.
    Completed,
    /// [`RunStatus::Paused`]: `"paused"`.
    Paused,
    /// [`RunStatus::Interrupted`]: `"interrupted"`.
    Interrupted,
    /// [`RunStatus::Waiting`]: `"waiting"`.
    Waiting,
    /// [`RunStatus::Failed`]: `"failed"`.
    Failed,
    /// [`RunStatus::Cancelled`]: `"cancelled"`.
    Cancelled,
}

impl StatusKind {
    /// Every kind, in this order.
    pub const ALL: [StatusKind; 7] = [
        StatusKind::Running,
        StatusKind::Completed,
        StatusKind::Paused,
        StatusKind::Interrupted,
        StatusKind::Waiting,
        StatusKind::Failed,
        StatusKind::Cancelled,
    ];

    /// The persisted name.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusKind::Running => "running",
            StatusKind::Completed => "completed",
            StatusKind::Paused => "paused",
            StatusKind::Interrupted => "interrupted",
            StatusKind::Waiting => "waiting",
            StatusKind::Failed => "failed",
            StatusKind::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for StatusKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a [`StatusKind`]'s (its message lists the valid ones).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown run status `{0}`; expected one of running, completed, paused, interrupted, waiting, failed, cancelled"
)]
pub struct UnknownStatus(pub String);

impl std::str::FromStr for StatusKind {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StatusKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| UnknownStatus(s.to_owned()))
    }
}

impl From<&RunStatus> for StatusKind {
    fn from(s: &RunStatus) -> Self {
        s.kind()
    }
}

impl From<RunStatus> for StatusKind {
    fn from(s: RunStatus) -> Self {
        s.kind()
    }
}

/// Why a run paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum PauseReason {
    /// Work items waited for admission longer than `backpressure_timeout`.
    Backpressure,
    /// A non-idempotent effect started before a crash and its outcome is unknown: a person must say what
    /// happened (`Engine::resolve_effect`) before `resume` continues.
    NeedsConfirmation {
        /// The effect key.
        key: String,
        /// The effect's name.
        name: String,
    },
}

/// One reason a run is [`RunStatus::Interrupted`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interrupt {
    /// What an answer names it by (`Engine::resume_with_inputs`): `"{path}#{index}"`.
    pub id: String,
    /// What stopped the run.
    pub kind: InterruptKind,
    /// The node.
    pub node: String,
    /// The work item's path identity (branches of one step have distinct paths).
    pub path: String,
    /// The step the node runs in (its item is in checkpoint `step`'s frontier).
    pub step: u64,
    /// Which `interrupt` call of the node's attempt, from 0 (0 for breakpoints).
    pub index: u32,
    /// What the node passed to `Ctx::interrupt` (null for breakpoints and sleeps).
    pub payload: serde_json::Value,
    /// When it is due, ms since the Unix epoch (the engine's clock when the node asked): a sleep's end,
    /// a question's deadline (`Ctx::interrupt_with_deadline`); `None` for a question without one and
    /// for breakpoints. Absent from records written before timers existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_at_ms: Option<u64>,
    /// The topic an [`InterruptKind::Event`] wait is for (`None` for the other kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
}

/// What an [`Interrupt`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum InterruptKind {
    /// The node called `Ctx::interrupt` and waits for input.
    Input,
    /// A breakpoint before the node (`interrupt_before`): its step has not started.
    Before,
    /// A breakpoint after the node (`interrupt_after`): its step is committed.
    After,
    /// The node sleeps (`Ctx::sleep`, `Ctx::sleep_until`) until [`Interrupt::wake_at_ms`].
    Sleep,
    /// The node waits for an external event of [`Interrupt::topic`] (`Ctx::wait_event`), until
    /// [`Interrupt::wake_at_ms`] when it gave a timeout. The wake time is moved to the send's time when
    /// a message of the topic arrives, so whoever wakes due runs delivers it.
    Event,
}

/// A run row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunInfo {
    /// The run.
    pub run_id: String,
    /// Its status.
    pub status: RunStatus,
    /// The latest committed step.
    pub latest_step: u64,
    /// The optimistic-locking version, +1 per write.
    pub version: u64,
    /// The fingerprint of the graph the run runs: the one it started with, or the one a migration
    /// moved it to (the latest checkpoint's).
    pub graph_fingerprint: String,
    /// The last event of the run's event log (`None` before the first, or for runs written before the
    /// event log existed). A store sets it from the events each write appends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_head: Option<ChainHead>,
}

impl RunInfo {
    /// A run row.
    pub fn new(
        run_id: impl Into<String>,
        status: RunStatus,
        latest_step: u64,
        version: u64,
        graph_fingerprint: impl Into<String>,
    ) -> Self {
        RunInfo {
            run_id: run_id.into(),
            status,
            latest_step,
            version,
            graph_fingerprint: graph_fingerprint.into(),
            event_head: None,
        }
    }

    /// The run row after a checkpoint of step `step` commits with `status`: one version past `before`
    /// (the row as it was; none for a run's first commit), the latest step the larger of the two, the
    /// fingerprint kept (`fingerprint` for a new run), and the event head `last_event` (the last event
    /// the commit appends) or, when it appends none, the one before. Every backend's commit writes this
    /// ([`RunInfo::commit`] in place, or [`RunInfo::first_commit`], for the memory store).
    pub fn after_commit(
        before: Option<&RunInfo>,
        run_id: &str,
        step: u64,
        status: &RunStatus,
        fingerprint: &str,
        last_event: Option<ChainHead>,
    ) -> RunInfo {
        match before {
            Some(r) => {
                let mut info = r.clone();
                info.commit(step, status, fingerprint, last_event);
                info
            }
            None => RunInfo::first_commit(run_id, step, status, fingerprint, last_event),
        }
    }

    /// This row after a checkpoint of step `step` of the graph `fingerprint` commits with `status`
    /// ([`RunInfo::after_commit`]). The row's fingerprint is the latest checkpoint's: a migration's
    /// commit moves the run to another graph version.
    pub fn commit(
        &mut self,
        step: u64,
        status: &RunStatus,
        fingerprint: &str,
        last_event: Option<ChainHead>,
    ) {
        self.status = status.clone();
        if self.graph_fingerprint != fingerprint {
            fingerprint.clone_into(&mut self.graph_fingerprint);
        }
        self.latest_step = self.latest_step.max(step);
        self.version += 1;
        if last_event.is_some() {
            self.event_head = last_event;
        }
    }

    /// The row of a run whose first checkpoint commits ([`RunInfo::after_commit`]).
    pub fn first_commit(
        run_id: &str,
        step: u64,
        status: &RunStatus,
        fingerprint: &str,
        last_event: Option<ChainHead>,
    ) -> RunInfo {
        let mut info = RunInfo::new(run_id, status.clone(), step, 1, fingerprint);
        info.event_head = last_event;
        info
    }

    /// This row after a status change to `status` commits, appending events that end at `last_event`
    /// (`None`: it appends none, the head stays): one version past, the latest step kept. Every
    /// backend's `set_status` writes this.
    pub fn after_status(&mut self, status: &RunStatus, last_event: Option<ChainHead>) {
        self.status = status.clone();
        self.version += 1;
        if last_event.is_some() {
            self.event_head = last_event;
        }
    }
}

/// Which runs [`crate::Store::list_runs`] returns, in run-id order (bytes): a page of them with a cursor
/// ([`RunFilter::after`], the last id of the page before) and a [`RunFilter::limit`].
///
/// `RunFilter::all().prefix("batch-").limit(50)` is the first page of the runs whose ids start with
/// `batch-`; `.after(last)` with the last id of a page is the page after it.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RunFilter {
    /// Only runs whose status is of this kind.
    pub status: Option<StatusKind>,
    /// At most this many, in run-id order.
    pub limit: Option<usize>,
    /// Only runs whose id sorts after this one: the cursor of a page (the last id of the one before).
    pub after: Option<String>,
    /// Only runs whose id starts with this.
    pub prefix: Option<String>,
}

impl RunFilter {
    /// Every run.
    pub fn all() -> Self {
        RunFilter::default()
    }

    /// Runs whose status is of `kind` (a [`StatusKind`], or a [`RunStatus`] whose variant it takes).
    pub fn status(mut self, kind: impl Into<StatusKind>) -> Self {
        self.status = Some(kind.into());
        self
    }

    /// At most `n` runs.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// Runs whose id sorts after `run_id` (byte order): the next page after the one `run_id` ended.
    pub fn after(mut self, run_id: impl Into<String>) -> Self {
        self.after = Some(run_id.into());
        self
    }

    /// Runs whose id starts with `prefix`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// Whether `info` passes the filter's status, cursor and prefix (the limit is the caller's to apply).
    pub fn matches(&self, info: &RunInfo) -> bool {
        self.status.is_none_or(|k| k == info.status.kind())
            && self.after.as_deref().is_none_or(|a| info.run_id.as_str() > a)
            && self.prefix.as_deref().is_none_or(|p| info.run_id.starts_with(p))
    }

    /// The least run id a listing in run-id order starts from (inclusive): the prefix or the cursor,
    /// whichever sorts later; `""` for every run. A backend reads from here, skips the cursor itself
    /// ([`RunFilter::matches`]), and stops at the first id [`RunFilter::past`] says is beyond.
    pub fn start(&self) -> &str {
        match (self.after.as_deref(), self.prefix.as_deref()) {
            (Some(a), Some(p)) => a.max(p),
            (Some(a), None) => a,
            (None, Some(p)) => p,
            (None, None) => "",
        }
    }

    /// Whether a listing in run-id order from [`RunFilter::start`] is past every run the filter takes
    /// once it reaches `run_id`: the ids starting with a prefix are the ones right after it, in byte
    /// order.
    pub fn past(&self, run_id: &str) -> bool {
        self.prefix.as_deref().is_some_and(|p| !run_id.starts_with(p))
    }

    /// How many rows from [`RunFilter::start`] a backend that filters the status itself reads for the
    /// limit: one more (the cursor's own row may be among them); every row without a limit.
    pub fn rows_to_read(&self) -> Option<usize> {
        self.limit.map(|n| n.saturating_add(1))
    }
}

/// What a store's reads of a run's checkpoints went through, for [`behind_run_row`]'s message: "the
/// index of its checkpoints", and what it means when that ends before the run row ("the index is
/// damaged"); the damaged file, if the store has one; what to do.
pub struct ReadThrough {
    /// What the read went through ("the index of its checkpoints").
    pub what: &'static str,
    /// What it means when that ends before the run row ("the index is damaged").
    pub lost: &'static str,
    /// The damaged file, if the store has one.
    pub file: Option<std::path::PathBuf>,
    /// What to do.
    pub remedy: &'static str,
}

/// `Corrupted` for `run_id` when its run row says it committed step `latest` but the last checkpoint
/// of the run a read found is `last`, an earlier one or none. A sound store never shows that: the run
/// row is written in the commit of its checkpoint, and a prune keeps the latest. Without a run row
/// there is nothing to compare.
pub fn behind_run_row(
    run_id: &str,
    latest: Option<u64>,
    last: Option<u64>,
    through: ReadThrough,
) -> Result<(), crate::StoreError> {
    let Some(latest) = latest else { return Ok(()) };
    if last.is_some_and(|last| last >= latest) {
        return Ok(());
    }
    let ReadThrough { what, lost, file, remedy } = through;
    Err(crate::StoreError::Corrupted {
        run: Some(run_id.to_owned()),
        step: Some(latest),
        file,
        detail: format!(
            "the run's row is at step {latest} but {what} ends at {}: {lost}",
            last.map_or("none".to_owned(), |s| format!("step {s}"))
        ),
        remedy,
    })
}
