//! Runs that wait for a time: waking a run whose sleep ended or whose question's deadline passed
//! ([`Engine::wake`]), the due runs this engine knows of ([`Engine::wake_due`]), and the timer service
//! that wakes them as they come due ([`Engine::run_timers`]).
//!
//! A parked run is a row and nothing more in the store: its status (`Waiting`, or `Interrupted` with a
//! deadline) carries each wait's time. An engine on an embedded store keeps an index of the due times
//! it knows (one entry per parked run, a few dozen bytes), filled from the store on the first
//! [`Engine::wake_due`] and from every park it writes, so its timer service reads the store only for
//! what is due. On a server store the workers of a pool claim due runs from the database instead
//! (`graph_runtime::worker`), in the database's clock.
//!
//! Waking writes what came (a sleep's `{"woke_at": ms}`, a deadline's `{"timed_out_at": ms}`, ms of the
//! engine's clock) as the answer of the wait, with a `RESUMED` event whose `by` is `"timer"`, and the node
//! runs again: its call returns the recorded time. A resume or replay reads the recorded answer and
//! never waits again.

use std::sync::Arc;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::core::Engine;
use super::served::Continue;
use super::versions::Route;
use crate::error::{Error, Result};
use crate::persist::PendingStep;
use crate::run::{RunOptions, RunOutcome};
use crate::state::Reducer;
use crate::store::mailbox::{MailboxOp, MailboxReply};
use crate::store::{Interrupt, InterruptKind, RunFilter, RunStatus, StatusKind};

impl<S: Reducer> Engine<S> {
    /// Wakes the run if what it waits for has come due by the engine's clock: each sleep that ended
    /// and each question whose deadline passed is given its time, each event wait whose topic has a
    /// message in the mailbox is given the oldest, and the run continues (driven here, or handed back
    /// with [`RunOptions::hand_back`], which leaves the messages to whoever drives it). A run with nothing due (or not waiting) is
    /// returned as it is, without writing anything. Safe from several processes at once: one wake
    /// writes, the others find the run moved on.
    ///
    /// # Errors
    ///
    /// As [`Engine::resume`].
    pub async fn wake(&self, run_id: &str) -> Result<RunOutcome<S>> {
        self.wake_with(run_id, RunOptions::default()).await
    }

    /// [`Engine::wake`] with options.
    ///
    /// # Errors
    ///
    /// As [`Engine::resume`].
    pub async fn wake_with(&self, run_id: &str, opts: RunOptions) -> Result<RunOutcome<S>> {
        if let Some(version) = self.typed_route(run_id).await? {
            return Box::pin(version.wake_with(run_id, opts)).await;
        }
        self.wake_or_stored(run_id, opts, false).await
    }

    /// A run a worker claimed: woken when it is parked (the store found it due, by the database's clock,
    /// which rules the pool: what it waits for is due though this engine's clock may lag a little),
    /// resumed otherwise.
    pub(crate) async fn continue_claimed(&self, run_id: &str, opts: RunOptions) -> Result<RunOutcome<S>> {
        match self.inner.store.run_info(run_id).await? {
            Some(info)
                if matches!(info.status, RunStatus::Waiting(_) | RunStatus::Interrupted(_))
                    && info.status.wake_at_ms().is_some() =>
            {
                self.wake_or_stored(run_id, opts, true).await
            }
            _ => self.resume_with(run_id, opts).await,
        }
    }

    /// Wakes the run if anything it waits for is due (`None`: nothing is, nothing was written);
    /// `claimed_due`: the store found it due, so its earliest wait is due whatever this engine's clock
    /// says.
    pub(super) async fn try_wake(
        &self,
        run_id: &str,
        opts: RunOptions,
        claimed_due: bool,
    ) -> Result<Option<RunOutcome<S>>> {
        let (info, cp) = self.stored(run_id).await?;
        let waits = info.status.waits();
        if waits.is_empty() {
            return Ok(None);
        }
        let store = &*self.inner.store;
        let mut now = self.inner.env.clock.now_ms();
        if claimed_due {
            now = now.max(info.status.wake_at_ms().unwrap_or(0));
        }
        let pending = self.load_pending(run_id, cp.step).await?;
        let mut due = Vec::new();
        // What this wake delivers of the mailbox: (interrupt id, topic, seq, claimer).
        let mut delivered = Vec::new();
        for i in waits {
            let answer = match i.kind {
                InterruptKind::Event => {
                    let topic = i.topic.clone().unwrap_or_default();
                    let claimer = claimer_of(i);
                    // A hand-back leaves events to whoever drives the run (who can reject a payload).
                    let claimed = match opts.hand_back {
                        true => None,
                        false => {
                            let op = MailboxOp::Claim { topic: topic.clone(), claimer: claimer.clone() };
                            match store.mailbox_op(run_id, op).await? {
                                MailboxReply::Claimed(m) => m,
                                _ => None,
                            }
                        }
                    };
                    match claimed {
                        Some(m) => {
                            delivered.push((i.id.clone(), topic, m.seq, claimer));
                            Some(serde_json::json!({ "event": { "seq": m.seq, "payload": m.payload } }))
                        }
                        None if timeout_of(i, pending.as_ref()).is_some_and(|at| at <= now) => {
                            Some(serde_json::json!({ "timed_out_at": now }))
                        }
                        None => None,
                    }
                }
                InterruptKind::Sleep if i.wake_at_ms.is_some_and(|at| at <= now) => {
                    Some(serde_json::json!({ "woke_at": now }))
                }
                InterruptKind::Input if i.wake_at_ms.is_some_and(|at| at <= now) => {
                    Some(serde_json::json!({ "timed_out_at": now }))
                }
                _ => None,
            };
            if let Some(answer) = answer {
                due.push((i.clone(), answer));
            }
        }
        if due.is_empty() {
            // Woken by a message another wake took first: the due times go back to the waits' own.
            if info.status.wake_at_ms().is_some_and(|at| at <= now) {
                self.restore_due_times(run_id).await?;
            }
            return Ok(None);
        }
        let by = if delivered.is_empty() { "timer" } else { "event" };
        tracing::info!(run = run_id, step = cp.step, due = due.len(), by, "run woken");
        match self.continue_answered(&info, cp, due, Some(by), opts).await {
            Err(Error::ResumeInput { interrupt: Some(id), detail, .. })
                if delivered.iter().any(|d| d.0 == id) =>
            {
                let (_, topic, seq, claimer) =
                    delivered.into_iter().find(|d| d.0 == id).expect("found above");
                tracing::warn!(run = run_id, topic, seq, %detail, "an event was rejected by its node; the run keeps waiting");
                store.mailbox_op(run_id, MailboxOp::Reject { seq, claimer, detail: detail.clone() }).await?;
                self.restore_due_times(run_id).await?;
                Err(Error::EventRejected { run: run_id.to_owned(), topic, seq, detail })
            }
            other => other.map(Some),
        }
    }

    /// Writes the run's status back with each event wait's own due time (its timeout, or none) where a
    /// message's arrival had moved it to now. Nothing when nothing moved; a conflict means the run moved
    /// on, which is as good.
    pub(super) async fn restore_due_times(&self, run_id: &str) -> Result<()> {
        let store = &*self.inner.store;
        let Some(info) = store.run_info(run_id).await? else { return Ok(()) };
        let pending = self.load_pending(run_id, info.latest_step).await?;
        let restored = info.status.with_due_times(|i| match i.kind {
            InterruptKind::Event => timeout_of(i, pending.as_ref()),
            _ => i.wake_at_ms,
        });
        if restored != info.status {
            store.set_status(run_id, &restored, &[], None, info.version).await?;
            // The index's entry for the moved time was taken: the restored one is the run's next.
            if let Some(at) = restored.wake_at_ms() {
                self.inner.timers.note(at, &run_id.into());
            }
        }
        Ok(())
    }

    /// Wakes the run for what is due now (the engine that parked it, finding mail for it).
    pub(super) async fn wake_now(&self, run_id: &str) -> Result<Option<RunOutcome<S>>> {
        self.try_wake(run_id, RunOptions::default(), false).await
    }

    /// [`Engine::try_wake`], or the run as stored when nothing was due (it exists: it was just read).
    async fn wake_or_stored(
        &self,
        run_id: &str,
        opts: RunOptions,
        claimed_due: bool,
    ) -> Result<RunOutcome<S>> {
        match self.try_wake(run_id, opts, claimed_due).await? {
            Some(out) => Ok(out),
            None => self.outcome(run_id).await?.ok_or_else(|| Error::RunNotFound { run: run_id.to_owned() }),
        }
    }

    /// Wakes every run of this engine's graph (of every version it serves) that is due by its clock
    /// ([`Engine::wake`]), driving them concurrently, and returns how each woken run ended, by run id
    /// (a run found with nothing due, answered or woken elsewhere first, is not listed; nor is a run
    /// of a served version with another state type, woken all the same). The first call reads the
    /// store's parked runs (`Waiting`, and `Interrupted` with a deadline); later ones use the index
    /// this engine keeps.
    ///
    /// # Errors
    ///
    /// Store errors reading the parked runs; each run's own error is in its entry.
    pub async fn wake_due(&self) -> Result<Vec<(String, Result<RunOutcome<S>>)>> {
        self.load_timers().await?;
        let now = self.inner.env.clock.now_ms();
        let (due, _) = self.inner.timers.take_due(now);
        let mut set = JoinSet::new();
        for run in due {
            let engine = self.clone();
            set.spawn(async move {
                let out = match engine.route(&run).await {
                    Ok(Route::Own) => engine.try_wake(&run, RunOptions::default(), false).await,
                    Ok(Route::Same(version)) => version.try_wake(&run, RunOptions::default(), false).await,
                    // Another state type: woken on its version, not listed.
                    Ok(Route::Other(served)) => {
                        served.continue_run(&run, Continue::Wake, RunOptions::default()).await.map(|_| None)
                    }
                    Err(e) => Err(e),
                };
                (run.to_string(), out)
            });
        }
        let mut out = Vec::new();
        while let Some(done) = set.join_next().await {
            match done {
                Ok((_, Ok(None))) => {}
                Ok((run, result)) => out.push((run, result.map(|o| o.expect("matched above")))),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => {}
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The timer service of an embedded store: wakes the runs of this engine's graph as they come due
    /// (by the engine's clock, a [`crate::TestClock`] included), each on a task of its own, and fires
    /// its schedules ([`Engine::fire_schedules`], driving the runs they start), until `shutdown` is
    /// cancelled; then waits for the runs it woke. Runs parked before it started are read
    /// from the store first. Run one per store and graph; on a server store with workers, the workers
    /// wake due runs instead.
    ///
    /// # Errors
    ///
    /// Store errors reading the parked runs at start (each woken run's own error is logged).
    pub async fn run_timers(&self, shutdown: CancellationToken) -> Result<()> {
        self.load_timers().await?;
        let timers = &self.inner.timers;
        let clock = self.inner.env.clock.clone();
        let mut runs: JoinSet<()> = JoinSet::new();
        tracing::info!(graph = self.inner.graph.name(), parked = timers.len(), "timer service started");
        loop {
            let (due, next) = timers.take_due(clock.now_ms());
            for run in due {
                let engine = self.clone();
                runs.spawn(async move {
                    match engine.continue_any(&run, Continue::Wake, RunOptions::default()).await {
                        Ok(None) => {}
                        Ok(Some(out)) => {
                            tracing::debug!(run = %run, status = out.status.as_str(), "woken run stopped")
                        }
                        Err(e) => tracing::warn!(run = %run, error = %e, "waking a run failed"),
                    }
                });
            }
            // Schedules: the runs fired here are driven here.
            let next_firing = match self.fire_due().await {
                Ok((started, next_firing)) => {
                    for run in started {
                        let engine = self.clone();
                        runs.spawn(async move {
                            if let Err(e) = engine.resume(&run).await {
                                tracing::warn!(run = %run, error = %e, "a scheduled run failed");
                            }
                        });
                    }
                    next_firing
                }
                Err(e) => {
                    tracing::warn!(error = %e, "firing schedules failed; retrying in a second");
                    Some(clock.now_ms() + 1_000)
                }
            };
            while runs.try_join_next().is_some() {}
            let next = match (next, next_firing) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let sleep = async {
                match next {
                    Some(at) => clock.sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = sleep => {}
                () = timers.changed.notified() => {}
            }
        }
        while runs.join_next().await.is_some() {}
        tracing::info!(graph = self.inner.graph.name(), "timer service stopped");
        Ok(())
    }

    /// Fills the timer index from the store once: the parked runs of this graph with a due time.
    async fn load_timers(&self) -> Result<()> {
        if self.inner.timers.is_loaded() {
            return Ok(());
        }
        let store = &self.inner.store;
        let mut found = Vec::new();
        for kind in [StatusKind::Waiting, StatusKind::Interrupted] {
            for info in store.list_runs(&RunFilter::all().status(kind)).await? {
                if !self.served_fingerprints().any(|f| f == info.graph_fingerprint) {
                    continue;
                }
                if let Some(at) = info.status.wake_at_ms() {
                    found.push((at, Arc::<str>::from(info.run_id)));
                }
            }
        }
        let timers = &self.inner.timers;
        let mut index = timers.index.lock().unwrap_or_else(|e| e.into_inner());
        if !index.loaded {
            index.loaded = true;
            index.due.extend(found);
        }
        drop(index);
        timers.changed.notify_one();
        Ok(())
    }
}

/// Who claims an event wait's message: the wait call, `"{step}:{path}#{index}"` of its run.
pub(super) fn claimer_of(i: &Interrupt) -> String {
    format!("{}:{}#{}", i.step, i.path, i.index)
}

/// An event wait's own timeout: the due time its item recorded when it asked (a message's arrival
/// moves the status's, not this one).
fn timeout_of(i: &Interrupt, pending: Option<&PendingStep>) -> Option<u64> {
    let item = pending?.items.iter().find(|p| p.path == i.path)?;
    item.wakes.iter().find(|(index, _)| *index == i.index).map(|(_, at)| *at)
}
