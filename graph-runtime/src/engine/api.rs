//! The calls a caller makes to start and continue runs and to read their results: `run`, `submit`,
//! `resume`, `run_or_resume`, `outcome`, `state_at`.

use super::core::Engine;
use super::drive::{Start, version_conflict};
use super::versions::Route;
use crate::error::{Error, Result};
use crate::events::{EventType, payload};
use crate::persist;
use crate::run::{RunOptions, RunOutcome};
use crate::state::Reducer;
use crate::store::{CommitOutcome, Interrupt, InterruptKind, RunStatus};

impl<S: Reducer> Engine<S> {
    /// Starts a new run and drives it to completion, a pause, or an error.
    ///
    /// # Errors
    ///
    /// [`Error::RunExists`] for a used id; otherwise what stopped the run (see [`Error`]). After any
    /// error the last committed step is intact and [`Engine::resume`] continues from it.
    pub async fn run(&self, run_id: &str, input: S) -> Result<RunOutcome<S>> {
        self.run_with(run_id, input, RunOptions::default()).await
    }

    /// [`Engine::run`] with options.
    ///
    /// # Errors
    ///
    /// As [`Engine::run`].
    pub async fn run_with(&self, run_id: &str, input: S, opts: RunOptions) -> Result<RunOutcome<S>> {
        // Boxed: its reads and first commit would otherwise take room in the caller's future for as long
        // as the run is driven (a future is as large as its largest suspension point).
        let (cp, chain, version, head) = Box::pin(self.start(run_id, &input, &opts)).await?;
        let entry = self.inner.graph.entry_index();
        let start = Start::first(cp, input, chain, vec![entry], version, head);
        self.drive(self.driver(start, opts)).await
    }

    /// Writes a new run and its step 0 (the first checkpoint [`Engine::run`] writes) without executing
    /// anything: the run is `Running`, and any engine's [`Engine::resume`] or a
    /// `graph_runtime::worker::Worker` (features `postgres` / `mysql`) on the same store picks it up.
    ///
    /// # Errors
    ///
    /// [`Error::RunExists`] for a used id; store errors.
    pub async fn submit(&self, run_id: &str, input: S) -> Result<()> {
        self.submit_with(run_id, input, RunOptions::default()).await
    }

    /// [`Engine::submit`] with options (seed and label are stored; the rest apply to whoever drives it).
    ///
    /// # Errors
    ///
    /// As [`Engine::submit`].
    pub async fn submit_with(&self, run_id: &str, input: S, opts: RunOptions) -> Result<()> {
        self.start(run_id, &input, &opts).await?;
        tracing::info!(run = run_id, graph = self.inner.graph.name(), "run submitted");
        Ok(())
    }

    /// Continues a run from its latest checkpoint, after verifying the event log from that checkpoint on
    /// (see [`crate::events`]). A completed run returns its final state without executing anything; a run
    /// that waits for input (`Ctx::interrupt`) returns its `Interrupted` status unchanged (answer it with
    /// [`Engine::resume_with_input`]); a run stopped at a breakpoint continues past it.
    ///
    /// # Errors
    ///
    /// [`Error::RunNotFound`], [`Error::GraphChanged`] (a run of a graph version this engine does not
    /// serve), [`Error::OtherVersion`] (a run of a served version with another state type: continue it
    /// through [`Engine::version`]), [`Error::ExecutionCorrupted`] for a broken event log, store errors
    /// for unreadable checkpoints, and whatever stops the run.
    pub async fn resume(&self, run_id: &str) -> Result<RunOutcome<S>> {
        self.resume_with(run_id, RunOptions::default()).await
    }

    /// [`Engine::resume`] with options (the seed is the stored one).
    ///
    /// # Errors
    ///
    /// As [`Engine::resume`].
    pub async fn resume_with(&self, run_id: &str, opts: RunOptions) -> Result<RunOutcome<S>> {
        if let Some(version) = self.typed_route(run_id).await? {
            return Box::pin(version.resume_with(run_id, opts)).await;
        }
        self.resume_once(run_id, opts, false).await
    }

    /// [`Engine::resume_with`]; `retried`: this is the second look after a version conflict.
    async fn resume_once(&self, run_id: &str, opts: RunOptions, retried: bool) -> Result<RunOutcome<S>> {
        let (info, cp) = self.stored(run_id).await?;
        let (state, chain) = persist::load_state(&*self.inner.store, &cp).await?;
        let nodes = self.node_indices(&cp)?;
        // A completed run, or one that waits for input or for a time, stays as it is.
        let waits = |i: &Interrupt| matches!(i.kind, InterruptKind::Input | InterruptKind::Sleep);
        let stays = match &info.status {
            _ if cp.frontier.is_empty() => Some(RunStatus::Completed),
            RunStatus::Interrupted(list) | RunStatus::Waiting(list) if list.iter().any(waits) => {
                Some(info.status.clone())
            }
            _ => None,
        };
        if let Some(status) = stays {
            return Ok(RunOutcome { run_id: run_id.to_owned(), state, status, steps: cp.step });
        }
        let resumption = self.load_pending(run_id, cp.step).await?;
        // A pending step means the step's items ran: its breakpoints before were passed.
        let past_breakpoint = resumption.is_some()
            || matches!(&info.status, RunStatus::Interrupted(list)
                if list.iter().any(|i| i.kind == InterruptKind::Before && i.step == cp.step));
        let step = cp.step;
        let hand_back = opts.hand_back;
        if hand_back && past_breakpoint && resumption.is_none() {
            return Err(Error::ResumeInput {
                run: run_id.to_owned(),
                interrupt: None,
                detail: "a run stopped at a breakpoint before its step cannot be handed back (a worker \
                         would stop at the breakpoint again); resume it here"
                    .into(),
            });
        }
        if hand_back && info.status == RunStatus::Running {
            // Claimable as it is.
            return Ok(RunOutcome {
                run_id: run_id.to_owned(),
                state,
                status: RunStatus::Running,
                steps: step,
            });
        }
        let start = Start::stored(cp, state, chain, nodes, &info).resuming(resumption, past_breakpoint);
        if hand_back {
            let resumed = payload!({ "step": step, "from": info.status.as_str() });
            let mut run = self.driver(start.announcing((EventType::Resumed, resumed)), opts);
            return self.hand_back(&mut run).await;
        }
        let again = opts.clone();
        let mut run = self.driver(start, opts);
        if info.status != RunStatus::Running {
            // Registered first: a concurrent continuation in this engine (a wake) cannot drive the run
            // between this write and the drive, which would leave the write without its driver.
            self.claim(&mut run)?;
            let resumed = payload!({ "step": step, "from": info.status.as_str() });
            match self
                .write_status(&mut run, &RunStatus::Running, (EventType::Resumed, resumed), None)
                .await?
            {
                CommitOutcome::Committed { .. } => {}
                // Advanced since it was read (by a wake that drove it meanwhile): look again, once.
                CommitOutcome::VersionConflict { .. } if !retried => {
                    drop(run);
                    return Box::pin(self.resume_once(run_id, again, true)).await;
                }
                other => return Err(version_conflict(run_id, info.version, &other)),
            }
        }
        tracing::info!(run = run_id, step, "run resumed");
        match self.drive(run).await {
            // Moved by another driver before this one wrote anything (the version it expected is the
            // one read): look again, once.
            Err(Error::VersionConflict { expected, .. }) if !retried && expected == info.version => {
                Box::pin(self.resume_once(run_id, again, true)).await
            }
            other => other,
        }
    }

    /// Starts the run if the store does not have it, or continues it if it does (LangGraph users continue
    /// a thread by its id). By the stored status:
    ///
    /// | stored | what happens | `input` |
    /// |---|---|---|
    /// | no run | [`Engine::run`]: starts it | the run's input |
    /// | `Completed` | returns the stored final state; nothing executes | unused |
    /// | `Running` (a crash or a kill), `Paused`, `Cancelled`, `Failed` | [`Engine::resume`]: continues from the last committed step | unused |
    ///
    /// # Examples
    ///
    /// ```
    /// # use graph_runtime::prelude::*;
    /// # use graph_runtime::node::BoxFuture;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), graph_runtime::Error> {
    /// # fn hop<'a>(_s: &'a (), _c: &'a mut Ctx) -> BoxFuture<'a, NodeResult<(), Route>> {
    /// #     Box::pin(async { Ok(((), Route::End)) })
    /// # }
    /// # let graph = Graph::<()>::builder("g").node("hop", hop).entry("hop").edge("hop", END).build()?;
    /// let engine = Engine::builder(graph).build();
    /// let first = engine.run_or_resume("thread-1", ()).await?; // starts it
    /// let again = engine.run_or_resume("thread-1", ()).await?; // the stored result
    /// assert!(first.is_completed() && again.is_completed());
    /// assert_eq!(first.steps, again.steps);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Engine::run`] and [`Engine::resume`].
    pub async fn run_or_resume(&self, run_id: &str, input: S) -> Result<RunOutcome<S>> {
        self.run_or_resume_with(run_id, input, RunOptions::default()).await
    }

    /// [`Engine::run_or_resume`] with options (a resumed run keeps its stored seed).
    ///
    /// # Errors
    ///
    /// As [`Engine::run_or_resume`].
    pub async fn run_or_resume_with(
        &self,
        run_id: &str,
        input: S,
        opts: RunOptions,
    ) -> Result<RunOutcome<S>> {
        if self.inner.store.run_info(run_id).await?.is_some() {
            return self.resume_with(run_id, opts).await;
        }
        match self.run_with(run_id, input, opts.clone()).await {
            // Another writer created it between the check and the first commit.
            Err(Error::RunExists { .. }) => self.resume_with(run_id, opts).await,
            other => other,
        }
    }

    /// Cancels a run wherever it stands: driven by this engine (its driver stops and writes
    /// `Cancelled`, as [`Engine::cancel`]), or stored (waiting, interrupted, paused, failed, or running in
    /// another process, which then stops at its next commit with a version conflict): the status becomes
    /// `Cancelled` with its event. A completed or cancelled run is left as it is. Returns the status the
    /// run has now (a run cancelled here reports `Cancelled` once its driver stopped).
    ///
    /// # Errors
    ///
    /// [`Error::RunNotFound`], [`Error::GraphChanged`], store errors; a version conflict when another
    /// writer changed the run meanwhile (call again).
    pub async fn cancel_run(&self, run_id: &str) -> Result<RunStatus> {
        if self.cancel(run_id) {
            return Ok(RunStatus::Cancelled);
        }
        match self.route(run_id).await? {
            Route::Own => {}
            Route::Same(version) => return Box::pin(version.cancel_run(run_id)).await,
            Route::Other(version) => return version.cancel_run(run_id).await,
        }
        let (info, cp) = self.stored(run_id).await?;
        if matches!(info.status, RunStatus::Completed | RunStatus::Cancelled) || cp.frontier.is_empty() {
            return Ok(info.status);
        }
        let (state, chain) = persist::load_state(&*self.inner.store, &cp).await?;
        let nodes = self.node_indices(&cp)?;
        let step = cp.step;
        let pending = self.load_pending(run_id, step).await?;
        let start = Start::stored(cp, state, chain, nodes, &info).resuming(pending, false);
        let mut run = self.driver(start, RunOptions::default());
        let cancelled = payload!({ "step": step, "from": info.status.as_str() });
        let pending = run.resumption().map(persist::PendingStep::encode);
        match self
            .write_status(
                &mut run,
                &RunStatus::Cancelled,
                (EventType::RunCancelled, cancelled),
                pending.as_deref(),
            )
            .await?
        {
            CommitOutcome::Committed { .. } => {
                tracing::info!(run = run_id, step, "run cancelled");
                self.inner.env.children.parent_closed(run_id).await;
                Ok(RunStatus::Cancelled)
            }
            other => Err(version_conflict(run_id, info.version, &other)),
        }
    }

    /// The stored outcome of a run, without executing anything: its status and the state at its latest
    /// committed step (the final state once `Completed`; for a run that is `Running` here or elsewhere,
    /// the last committed step's). `None` when the store has no such run.
    ///
    /// # Errors
    ///
    /// Store errors for unreadable checkpoints; [`Error::GraphChanged`] when the run was started by
    /// another graph (its state may not be this graph's state type).
    pub async fn outcome(&self, run_id: &str) -> Result<Option<RunOutcome<S>>> {
        if let Some(version) = self.typed_route(run_id).await? {
            return Box::pin(version.outcome(run_id)).await;
        }
        let store = &self.inner.store;
        let Some(info) = store.run_info(run_id).await? else { return Ok(None) };
        if info.graph_fingerprint != self.inner.graph.fingerprint() {
            return Err(Error::GraphChanged {
                run: run_id.to_owned(),
                stored: info.graph_fingerprint,
                current: self.inner.graph.fingerprint().to_owned(),
            });
        }
        let Some(cp) = store.latest(run_id).await? else { return Ok(None) };
        let (state, _) = persist::load_state(&**store, &cp).await?;
        Ok(Some(RunOutcome { run_id: run_id.to_owned(), state, status: info.status, steps: cp.step }))
    }

    /// The state stored at `step` of a run.
    ///
    /// # Errors
    ///
    /// Store errors; [`Error::Serialization`] when the stored state does not decode as `S`.
    pub async fn state_at(&self, run_id: &str, step: u64) -> Result<Option<S>> {
        if let Some(version) = self.typed_route(run_id).await? {
            return Box::pin(version.state_at(run_id, step)).await;
        }
        match self.inner.store.load_checkpoint(run_id, step).await? {
            Some(cp) => Ok(Some(persist::load_state(&*self.inner.store, &cp).await?.0)),
            None => Ok(None),
        }
    }
}
