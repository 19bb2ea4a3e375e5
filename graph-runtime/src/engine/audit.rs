//! The audit side of an engine: the event log written with every commit and status change, its
//! verification (incremental on resume, whole on demand), a run's history, and forks.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::core::Engine;
use super::drive::version_conflict;
use crate::error::{Error, Result, StoreError};
use crate::events::{self, ChainHead, ChainKey, Event, EventType, payload};
use crate::graph::Graph;
use crate::persist::{self, Chain, Draft};
use crate::run::RunOutcome;
use crate::state::Reducer;
use crate::store::{Checkpoint, CommitOutcome, RunInfo, RunStatus, Store};

/// Events read per store call when a whole log is verified.
const PAGE: usize = 4096;

/// A run's event log, verified by [`Engine::verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChainReport {
    /// The run.
    pub run_id: String,
    /// How many events the log holds (all verified).
    pub events: u64,
    /// Its last event.
    pub head: Option<ChainHead>,
    /// How many stored checkpoints were matched with the event that records their commit (state hash
    /// compared). Checkpoints written without an event (a fork's copies of its parent's steps, runs
    /// written before the event log existed) are not counted.
    pub checkpoints_matched: u64,
}

/// One stored checkpoint of a run, as [`Engine::history`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HistoryEntry {
    /// The step.
    pub step: u64,
    /// When it was committed, ms since the Unix epoch.
    pub timestamp_ms: u64,
    /// Its label.
    pub label: Option<String>,
    /// The nodes whose step produced it, in order (`None` for step 0 and when the previous checkpoint
    /// was pruned).
    pub ran: Option<Vec<String>>,
    /// The nodes the next step runs (empty once the run is complete).
    pub next: Vec<String>,
    /// The SHA-256 of its state.
    pub state_hash: String,
}

/// Wall-clock ms since the Unix epoch.
fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl<S: Reducer> Engine<S> {
    /// Verifies the events written since checkpoint `cp` was committed on (its own and the status
    /// changes after it) against the head the run row records, and that they record `cp`'s state: what
    /// resuming from `cp` relies on, at a cost that does not grow with the run's history.
    pub(super) async fn verify_tail(&self, info: &RunInfo, cp: &Checkpoint) -> Result<()> {
        let Some(head) = &info.event_head else {
            return Ok(()); // a run written before the event log existed
        };
        let from = cp.event_head.as_ref();
        let start = from.map_or(0, |h| h.seq + 1);
        let run = &info.run_id;
        let tail = self.read_events(run, start, head.seq.saturating_add(1)).await?;
        let last = events::verify_segment(run, from, &tail, self.inner.chain_key.as_ref())?;
        events::check_head(run, from, last.as_ref(), Some(head))?;
        // The first event recording the commit of `cp`'s step, and the state hash it records.
        let commit = tail.iter().find_map(|e| match commit_of(e) {
            Some((step, hash)) if step == cp.step => Some((e.seq, hash)),
            _ => None,
        });
        match commit {
            Some((_, Some(hash))) if hash == cp.state_hash => Ok(()),
            Some((seq, _)) => Err(Error::ExecutionCorrupted { run: run.clone(), seq }),
            None => Err(Error::ExecutionCorrupted { run: run.clone(), seq: start }),
        }
    }

    /// The events of a run's log with `from <= seq < to`, read page by page; a damaged one is
    /// `ExecutionCorrupted` at its seq.
    async fn read_events(&self, run: &str, from: u64, to: u64) -> Result<Vec<Event>> {
        let mut out = Vec::new();
        let mut next = from;
        while next < to {
            let want = usize::try_from(to - next).unwrap_or(usize::MAX).min(PAGE);
            let page = self.inner.store.events(run, next, want).await.map_err(corrupted_event)?;
            let Some(last) = page.last() else { break };
            next = last.seq.saturating_add(1).max(next + 1);
            let short = page.len() < want;
            out.extend(page);
            if short {
                break;
            }
        }
        Ok(out)
    }

    /// Verifies a run's whole event log: every event's hash from genesis (with the engine's key in keyed
    /// mode), no gap, no reordering, the run row's head at its end, every stored checkpoint against
    /// the event that recorded its commit, and every commit the log records against the stored
    /// checkpoints: one the log records at or after the oldest stored checkpoint must still be there
    /// (pruning removes only the oldest and keeps the latest). Reads the log page by page.
    ///
    /// # Errors
    ///
    /// [`Error::ExecutionCorrupted`] naming the first event that does not verify (or the first missing
    /// one); [`StoreError::Corrupted`] naming the first step whose commit the log records but whose
    /// checkpoint is gone (its row or its index entry lost); `UnsupportedSchemaVersion` for an event of
    /// an unknown format (an edited version number reads as one); [`Error::RunNotFound`]; store errors.
    pub async fn verify(&self, run_id: &str) -> Result<ChainReport> {
        verify_run(&*self.inner.store, run_id, self.inner.chain_key.as_ref()).await
    }

    /// Up to `limit` events of a run's log from `seq` on, as stored (not verified: see
    /// [`Engine::verify`]).
    ///
    /// # Errors
    ///
    /// Store errors; `CorruptedEvent` for an event that does not decode.
    pub async fn events(&self, run_id: &str, from: u64, limit: usize) -> Result<Vec<Event>> {
        Ok(self.inner.store.events(run_id, from, limit).await?)
    }

    /// Every stored checkpoint of a run, oldest first: step, time, label, the nodes whose step produced
    /// it and those the next step runs, and its state hash. Read [`Engine::state_at`] for a state, and
    /// [`Engine::fork`] to go on from one.
    ///
    /// # Errors
    ///
    /// Store errors.
    pub async fn history(&self, run_id: &str) -> Result<Vec<HistoryEntry>> {
        run_history(&*self.inner.store, run_id).await
    }

    /// Starts run `new_run_id` from checkpoint `step` of run `run_id` (time travel): the new run's
    /// history is a copy of the parent's checkpoints up to `step` (same states, frontiers, seed and
    /// times), its event log starts with a `FORKED` event naming the parent, its step and the parent's
    /// event head there, and [`Engine::resume`] continues it from `step`. The parent is not changed.
    /// Nodes are deterministic, so a fork that is not edited goes the way its parent went (effects are
    /// the fork's own: its effect keys name the new run).
    ///
    /// The parent's event log is verified first. The fork is written `step` first, then the earlier
    /// copies: once it returns, the fork is complete.
    ///
    /// # Errors
    ///
    /// [`Error::RunExists`] for a used `new_run_id`; [`Error::StepNotFound`]; [`Error::RunNotFound`];
    /// [`Error::GraphChanged`]; [`Error::ExecutionCorrupted`] for a parent whose log does not verify;
    /// store errors.
    pub async fn fork(&self, run_id: &str, step: u64, new_run_id: &str) -> Result<RunOutcome<S>> {
        self.fork_inner(run_id, step, new_run_id, None).await
    }

    /// [`Engine::fork`] with `update` applied to the state at `step` through the reducer, as if a node
    /// of that step had returned it (LangGraph's `update_state` on a past checkpoint): the fork's
    /// checkpoint `step` holds the edited state, and the next step reads it. The parent is not changed.
    ///
    /// # Errors
    ///
    /// As [`Engine::fork`]; [`Error::Merge`] when `update` does not apply.
    pub async fn fork_with(
        &self,
        run_id: &str,
        step: u64,
        new_run_id: &str,
        update: S::Delta,
    ) -> Result<RunOutcome<S>> {
        self.fork_inner(run_id, step, new_run_id, Some(update)).await
    }

    /// What a fork of `run_id` at `step` copies: the parent's checkpoints up to `step` (verified, on
    /// this graph) and checkpoint `step` itself; `new_run_id` must not exist yet.
    async fn fork_source(
        &self,
        run_id: &str,
        step: u64,
        new_run_id: &str,
    ) -> Result<(Vec<Checkpoint>, Checkpoint)> {
        let store = &*self.inner.store;
        let graph = &self.inner.graph;
        if store.run_info(new_run_id).await?.is_some() {
            return Err(Error::RunExists { run: new_run_id.to_owned() });
        }
        let info =
            store.run_info(run_id).await?.ok_or_else(|| Error::RunNotFound { run: run_id.to_owned() })?;
        if info.graph_fingerprint != graph.fingerprint() {
            return Err(Error::GraphChanged {
                run: run_id.to_owned(),
                stored: info.graph_fingerprint,
                current: graph.fingerprint().to_owned(),
            });
        }
        self.verify(run_id).await?;
        let parent = store.checkpoints(run_id, 0, step).await?;
        let not_found = || Error::StepNotFound { run: run_id.to_owned(), step };
        let at = parent.last().filter(|c| c.step == step).ok_or_else(not_found)?.clone();
        Ok((parent, at))
    }

    async fn fork_inner(
        &self,
        run_id: &str,
        step: u64,
        new_run_id: &str,
        update: Option<S::Delta>,
    ) -> Result<RunOutcome<S>> {
        let store = &*self.inner.store;
        let graph = &self.inner.graph;
        let (parent, at) = self.fork_source(run_id, step, new_run_id).await?;
        // The stored checkpoints before `step` are consecutive from a snapshot (prune keeps every step
        // from the snapshot of the oldest kept one on).
        let new_run: Arc<str> = new_run_id.into();
        let copies = persist::fork_copies::<S>(&parent[..parent.len() - 1], &new_run)?;
        let (mut state, _) = persist::load_state::<S>(store, &at).await?;
        let edited = update.is_some();
        if let Some(update) = update {
            state.apply(update).map_err(|source| Error::Merge {
                run: new_run_id.to_owned(),
                step,
                node: "fork_with".into(),
                source,
            })?;
        }
        // Checkpoint `step` is written in full (it is the fork's root: it must load before its chain is
        // copied) and, when edited, holds the edited state under a new key and hash.
        let root = fork_root(graph, &new_run, step, &state, &at)?;
        let forked = payload!({
            "step": step,
            "parent": run_id,
            "parent_step": step,
            "parent_state_hash": at.state_hash,
            "parent_event_head": at.event_head,
            "edited": edited,
            "state_hash": root.state_hash,
            "idempotency_key": root.idempotency_key,
            "shape": graph.shape(),
        });
        let (events, _) = self.chain(None, [(EventType::Forked, forked)], now_ms());
        let status = if root.frontier.is_empty() { RunStatus::Completed } else { RunStatus::Running };
        let mut version = match store.save_checkpoint(&root, &events, &status, 0).await? {
            CommitOutcome::Committed { version } => version,
            _ => return Err(Error::RunExists { run: new_run_id.to_owned() }),
        };
        for copy in &copies {
            version = match store.save_checkpoint(copy, &[], &status, version).await? {
                CommitOutcome::Committed { version } => version,
                other => return Err(version_conflict(new_run_id, version, &other)),
            };
        }
        tracing::info!(run = new_run_id, parent = run_id, step, edited, "run forked");
        Ok(RunOutcome { run_id: new_run_id.to_owned(), state, status, steps: step })
    }
}

/// The root checkpoint of a fork at `at` (step `step` of the parent) holding `state`: in full, with the
/// parent's frontier, joins, seed, label and time.
fn fork_root<S: Reducer>(
    graph: &Graph<S>,
    new_run: &Arc<str>,
    step: u64,
    state: &S,
    at: &Checkpoint,
) -> Result<Checkpoint> {
    let draft = Draft {
        run_id: new_run,
        step,
        state,
        deltas: None,
        frontier: at.frontier.clone(),
        waiting: at.waiting.clone(),
        outbox: Vec::new(),
        seed: at.rng_seed,
        label: at.label.clone(),
        fingerprint: graph.fingerprint_arc(),
        at_ms: at.timestamp_ms,
        event_head: None,
    };
    persist::draft(draft, &mut Chain::default())
}

/// [`Engine::verify`] on any store, without a graph: what tools that do not have the graph's code use.
///
/// # Errors
///
/// As [`Engine::verify`].
pub async fn verify_run(store: &dyn Store, run_id: &str, key: Option<&ChainKey>) -> Result<ChainReport> {
    // The run row, the events and the checkpoints are separate reads, and the run may go on committing
    // while it is verified: the log is verified up to the head the row recorded when it was read
    // (`verify_as_of`), and anything that still disagrees is damage only if the row did not move
    // meanwhile; else it is read again.
    let mut tries = 0;
    loop {
        let info =
            store.run_info(run_id).await?.ok_or_else(|| Error::RunNotFound { run: run_id.to_owned() })?;
        match verify_as_of(store, &info, key).await {
            Err(e @ (Error::ExecutionCorrupted { .. } | Error::Store(StoreError::Corrupted { .. })))
                if tries < 3 =>
            {
                let now = store.run_info(run_id).await?;
                if now.is_none_or(|now| now.version == info.version) {
                    return Err(e);
                }
                tries += 1;
            }
            other => return other,
        }
    }
}

/// What [`salvage`] copied and what it could not.
#[derive(Debug)]
#[non_exhaustive]
pub struct SalvageReport {
    /// The runs copied, in run-id order: each verified (`verify_run`) before it was.
    pub salvaged: Vec<String>,
    /// The runs left out, each with why (its run record does not decode, or `verify_run`'s error).
    pub lost: Vec<(String, Error)>,
}

/// Copies every run of `store` that reads back intact into a new store at `dest` (a path that must
/// not exist yet) and names each run it could not, with why: one damaged record costs its run, not
/// the store. A run is intact when its row decodes and [`verify_run`] passes (its event log from
/// genesis, every stored checkpoint against it). What is copied is each kept run's records byte for
/// byte, and every schedule ([`Store::salvage_to`]: the sled and SQLite stores).
///
/// # Errors
///
/// `Unsupported` for stores without a salvage of their own; `dest` exists or cannot be written; a
/// failure to read the store that names no run (nothing is written then).
pub async fn salvage(
    store: &dyn Store,
    dest: &std::path::Path,
    key: Option<&ChainKey>,
) -> Result<SalvageReport> {
    // Every run id, one page of one at a time: a row that does not decode names its run and is passed
    // over, where a whole page would fail on it. (The stores decode a page's rows in order and stop at
    // its limit, so the run an error names is the one after the cursor.)
    let (mut ids, mut lost) = (Vec::new(), Vec::new());
    let mut after: Option<String> = None;
    loop {
        let mut filter = crate::store::RunFilter::all().limit(1);
        if let Some(a) = &after {
            filter = filter.after(a);
        }
        match store.list_runs(&filter).await {
            Ok(page) => match page.into_iter().next() {
                Some(info) => {
                    after = Some(info.run_id.clone());
                    ids.push(info.run_id);
                }
                None => break,
            },
            Err(e) => {
                let named = match &e {
                    StoreError::Corrupted { run: Some(run), .. } if after.as_ref() != Some(run) => {
                        Some(run.clone())
                    }
                    _ => None,
                };
                let Some(run) = named else { return Err(e.into()) };
                after = Some(run.clone());
                lost.push((run, e.into()));
            }
        }
    }
    let mut salvaged = Vec::new();
    for run in ids {
        match verify_run(store, &run, key).await {
            Ok(_) => salvaged.push(run),
            Err(e) => lost.push((run, e)),
        }
    }
    store.salvage_to(dest, &salvaged).await?;
    lost.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(SalvageReport { salvaged, lost })
}

/// [`verify_run`] against the run row `info` as read.
async fn verify_as_of(store: &dyn Store, info: &RunInfo, key: Option<&ChainKey>) -> Result<ChainReport> {
    let run_id = info.run_id.as_str();
    let mut prev: Option<ChainHead> = None;
    let mut count = 0u64;
    // The state hash each commit event records, by step (the last commit of a step wins: a step is
    // committed once).
    let mut recorded: BTreeMap<u64, (u64, String)> = BTreeMap::new();
    // The log up to the head the row records: events are only ever appended, so what lies up to it
    // does not change while the run goes on.
    let end = info.event_head.as_ref().map(|h| h.seq + 1);
    loop {
        let from = prev.as_ref().map_or(0, |p| p.seq + 1);
        let want =
            end.map_or(PAGE, |end| usize::try_from(end.saturating_sub(from)).unwrap_or(PAGE).min(PAGE));
        if want == 0 {
            break;
        }
        let page = store.events(run_id, from, want).await.map_err(corrupted_event)?;
        let n = page.len();
        if let Some(last) = events::verify_segment(run_id, prev.as_ref(), &page, key)? {
            prev = Some(last);
        }
        for e in &page {
            if let Some((step, Some(hash))) = commit_of(e) {
                recorded.insert(step, (e.seq, hash));
            }
        }
        count += n as u64;
        if n < want {
            break;
        }
    }
    events::check_head(run_id, None, prev.as_ref(), info.event_head.as_ref())?;
    // Events past that head: a commit since the row was read, or events added to the log by hand.
    if let Some(end) = end
        && !store.events(run_id, end, 1).await.map_err(corrupted_event)?.is_empty()
    {
        let now = store.run_info(run_id).await?;
        if now.is_none_or(|now| now.version == info.version) {
            return Err(Error::ExecutionCorrupted { run: run_id.to_owned(), seq: end });
        }
    }
    let history = store.history(run_id).await?;
    let mut matched = 0;
    for meta in &history {
        if let Some((seq, hash)) = recorded.get(&meta.step) {
            if *hash != meta.state_hash {
                return Err(Error::ExecutionCorrupted { run: run_id.to_owned(), seq: *seq });
            }
            matched += 1;
        }
    }
    lost_checkpoint(run_id, &recorded, &history)?;
    Ok(ChainReport { run_id: run_id.to_owned(), events: count, head: prev, checkpoints_matched: matched })
}

/// `Corrupted` for the first commit the log records (`recorded`, by step) whose checkpoint `history`
/// (in step order) lacks though it holds an older one. Only `prune` deletes checkpoints, and only the
/// oldest, always keeping the latest: a recorded step at or after the oldest stored one (any recorded
/// step, when none is stored) was lost, as a damaged index loses an entry without any read noticing
/// (docs/stores.md, "Not caught by the reads").
fn lost_checkpoint(
    run_id: &str,
    recorded: &BTreeMap<u64, (u64, String)>,
    history: &[crate::store::CheckpointMeta],
) -> Result<()> {
    let oldest = history.first().map(|m| m.step);
    let stored = |step: &u64| history.binary_search_by_key(step, |m| m.step).is_ok();
    let Some((step, (seq, _))) = recorded.range(oldest.unwrap_or(0)..).find(|(s, _)| !stored(s)) else {
        return Ok(());
    };
    let holds = match oldest {
        Some(o) => format!("holds its checkpoints from step {o} on but not this one"),
        None => "holds none of its checkpoints".to_owned(),
    };
    let detail = format!(
        "the event log records the commit of step {step} (event {seq}), and the store {holds}: pruning \
         removes only the oldest checkpoints and keeps the latest, so this one was lost (its row, or its \
         index entry)"
    );
    Err(StoreError::corrupted_record(run_id, *step, detail).into())
}

/// [`Engine::history`] on any store, without a graph.
///
/// # Errors
///
/// Store errors.
pub async fn run_history(store: &dyn Store, run_id: &str) -> Result<Vec<HistoryEntry>> {
    let metas = store.history(run_id).await?;
    let mut out: Vec<HistoryEntry> = Vec::with_capacity(metas.len());
    for m in metas {
        let ran = out.last().filter(|p| p.step + 1 == m.step).map(|p| p.next.clone());
        out.push(HistoryEntry {
            step: m.step,
            timestamp_ms: m.timestamp_ms,
            label: m.label,
            ran,
            next: m.next,
            state_hash: m.state_hash,
        });
    }
    Ok(out)
}

/// The commit an event records (`RUN_STARTED`, `STEP_COMMITTED`, `FORKED`, `MIGRATED`): its step, and
/// the state hash it records. The payload is parsed once, and only for those event types.
fn commit_of(e: &Event) -> Option<(u64, Option<String>)> {
    match e.event_type {
        EventType::RunStarted | EventType::StepCommitted | EventType::Forked | EventType::Migrated => {
            let p = e.payload.value();
            let step = p.get("step")?.as_u64()?;
            Some((step, p.get("state_hash").and_then(|h| h.as_str()).map(str::to_owned)))
        }
        _ => None,
    }
}

/// A damaged stored event is a broken log at its seq.
fn corrupted_event(e: StoreError) -> Error {
    match e {
        StoreError::CorruptedEvent { run, seq, .. } => Error::ExecutionCorrupted { run, seq },
        other => other.into(),
    }
}
