//! Child runs: a node starts a run of any graph and waits for its result durably.
//!
//! [`Ctx::spawn_run`] writes the child run (its id derived from the parent item and a key the node
//! gives, [`spawned_run_id`], so a retry, a resume or a crash never starts two) and, by default, drives
//! it in this process on a task of its own; [`Ctx::join_run`] returns the child's result once it has
//! one, and otherwise parks the parent (`Waiting`, no task held) until the child ends: a child driven
//! here wakes its parent the moment it ends; a child left to a worker pool (or answered by someone
//! else) is seen at the parent's next look, every [`ChildOptions::poll`]. The result is journaled, so
//! resume and replay read the same one. A child's failure reaches the parent as a typed
//! [`ChildError`] the node can handle.
//!
//! When the parent ends (completes, fails or is cancelled) its children that have not ended are
//! cancelled ([`ParentClose::Cancel`], the default) or left to run ([`ParentClose::Abandon`]). See
//! `docs/composition.md`.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ctx::{Answer, Ctx};
use crate::engine::Engine;
use crate::env::Control;
use crate::error::{Error, NodeError};
use crate::run::RunOptions;
use crate::state::Reducer;
use crate::store::RunStatus;

/// A child run a node started ([`Ctx::spawn_run`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChildRun {
    /// The child's run id.
    pub run_id: String,
}

/// Why a child run has no result ([`Ctx::join_run`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[non_exhaustive]
pub enum ChildError {
    /// The child failed (after its nodes' retries).
    #[error("child run `{run}` failed: {error}")]
    Failed {
        /// The child's run id.
        run: String,
        /// Its failure, as its status records it.
        error: String,
    },
    /// The child was cancelled.
    #[error("child run `{run}` was cancelled")]
    Cancelled {
        /// The child's run id.
        run: String,
    },
}

/// What happens to a parent's children that have not ended when the parent ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ParentClose {
    /// Cancel them ([`Engine::cancel_run`]).
    #[default]
    Cancel,
    /// Leave them to run on.
    Abandon,
}

/// Where a child run is driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Drive {
    /// On a task of this process, through the engine given to `spawn_run` (again at each of the
    /// parent's looks, after a restart).
    #[default]
    Here,
    /// Not here: the child is written `Running` for a worker pool that serves its graph to claim.
    Pool,
}

/// How a child run is started and waited for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ChildOptions {
    /// Where it is driven (default [`Drive::Here`]).
    pub drive: Drive,
    /// What happens to it when the parent ends first (default [`ParentClose::Cancel`]).
    pub parent_close: ParentClose,
    /// How often a parked parent looks at a child that did not wake it (default 30 s): a child driven
    /// elsewhere, or one that waits for a person.
    pub poll: Duration,
}

impl Default for ChildOptions {
    fn default() -> Self {
        ChildOptions { drive: Drive::Here, parent_close: ParentClose::Cancel, poll: Duration::from_secs(30) }
    }
}

impl ChildOptions {
    /// Sets where the child is driven.
    pub fn drive(mut self, drive: Drive) -> Self {
        self.drive = drive;
        self
    }

    /// Sets the parent-close policy.
    pub fn parent_close(mut self, policy: ParentClose) -> Self {
        self.parent_close = policy;
        self
    }

    /// Sets how often a parked parent looks at the child.
    pub fn poll(mut self, every: Duration) -> Self {
        self.poll = every;
        self
    }
}

/// The run id of the child a parent item starts under `key`:
/// `"{parent run}/{node}.{step}.{path prefix}~{key}"`.
pub fn spawned_run_id(parent_run: &str, node: &str, step: u64, path: &str, key: &str) -> String {
    format!("{}~{key}", crate::subgraph::child_run_id(parent_run, node, step, path))
}

/// The topic a child's end is announced on in its parent's mailbox.
fn topic_of(child: &str) -> String {
    format!("child:{child}")
}

impl<C: Reducer> Control for Engine<C> {
    fn cancel(&self, run: String) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        let engine = self.clone();
        Box::pin(async move {
            // A child that ended (completed, failed, cancelled) is left as it is.
            if let Ok(Some(info)) = engine.store().run_info(&run).await
                && info.status.has_ended()
            {
                return;
            }
            match engine.cancel_run(&run).await {
                Ok(_) => tracing::info!(run, "child run cancelled with its parent"),
                Err(e) => tracing::warn!(run, error = %e, "cancelling a child run with its parent failed"),
            }
        })
    }
}

impl Ctx {
    /// Starts a run of `engine`'s graph as a child of this run, under `key` (unique among the node's
    /// children; the child's id is [`spawned_run_id`]), and drives it in this process. Calling it again
    /// (a retry, a resume, a crash and restart) finds the same child and starts nothing. Wait for its
    /// result with [`Ctx::join_run`]. The engine should use the same store and clock as this run's.
    ///
    /// # Errors
    ///
    /// A retryable error when the store cannot write the child.
    ///
    /// # Examples
    ///
    /// ```
    /// # use graph_runtime::prelude::*;
    /// # use graph_runtime::child::ChildRun;
    /// # async fn fan_out(ctx: &mut Ctx, docs: &Engine<()>, n: usize) -> Result<Vec<ChildRun>, NodeError> {
    /// let mut children = Vec::new();
    /// for i in 0..n {
    ///     children.push(ctx.spawn_run(docs, &format!("doc-{i}"), ()).await?);
    /// }
    /// for child in &children {
    ///     let _state = ctx.join_run(docs, child).await?; // parks the run until each has ended
    /// }
    /// # Ok(children)
    /// # }
    /// ```
    pub async fn spawn_run<C: Reducer>(
        &mut self,
        engine: &Engine<C>,
        key: &str,
        input: C,
    ) -> Result<ChildRun, NodeError> {
        self.spawn_run_with(engine, key, input, ChildOptions::default()).await
    }

    /// [`Ctx::spawn_run`] with options.
    ///
    /// # Errors
    ///
    /// As [`Ctx::spawn_run`].
    pub async fn spawn_run_with<C: Reducer>(
        &mut self,
        engine: &Engine<C>,
        key: &str,
        input: C,
        opts: ChildOptions,
    ) -> Result<ChildRun, NodeError> {
        let item = self.item();
        let parent = item.run_id.to_string();
        let id = spawned_run_id(&parent, &item.node, item.step, item.path.as_str(), key);
        let seed = crate::subgraph::child_seed(item.run_seed, &id);
        let env = self.env();
        if env.as_ref().is_some_and(|e| e.replay.is_some()) {
            // A replay reads the child's result from the journal; it starts nothing.
            return Ok(ChildRun { run_id: id });
        }
        let run_opts = RunOptions::default().seed(seed).label(format!("child of {parent}"));
        match engine.submit_with(&id, input, run_opts).await {
            Ok(()) | Err(Error::RunExists { .. }) => {}
            Err(e) => return Err(NodeError::new(format!("starting child run `{id}`: {e}"))),
        }
        if let Some(env) = &env {
            env.children.add(
                &parent,
                &id,
                opts.parent_close == ParentClose::Cancel,
                Arc::new(engine.clone()),
            );
        }
        if opts.drive == Drive::Here {
            let (engine, child) = (engine.clone(), id.clone());
            let env = env.clone();
            tokio::spawn(async move {
                // Only a runnable child is driven: a failed or cancelled one has ended (a resume would
                // continue it), a waiting one is continued by whatever it waits for.
                let stored = engine.store().run_info(&child).await.ok().flatten().map(|i| i.status);
                let ended = match stored {
                    Some(RunStatus::Running) => match engine.resume(&child).await {
                        Ok(out) => out.status.has_ended(),
                        // Driven by this engine already, or elsewhere: that driver carries it on.
                        Err(Error::AlreadyRunning { .. } | Error::VersionConflict { .. }) => false,
                        Err(e) => {
                            tracing::info!(run = child, error = %e, "child run ended with an error");
                            true
                        }
                    },
                    Some(status) => status.has_ended(),
                    None => false,
                };
                let Some(env) = env.filter(|_| ended) else { return };
                // Announced once per child (a dedupe key), then the parent is woken in this process.
                let now = env.clock.now_ms();
                let topic = topic_of(&child);
                let sent = crate::engine::send_event(
                    &*env.store,
                    &parent,
                    &topic,
                    Some(&topic),
                    serde_json::json!({}),
                    now,
                )
                .await;
                match sent {
                    Ok((_, due)) => {
                        if due && let Some(waker) = env.waker.get().and_then(std::sync::Weak::upgrade) {
                            waker.wake(parent).await;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(run = parent, child, error = %e, "announcing a child's end failed")
                    }
                }
            });
        }
        Ok(ChildRun { run_id: id })
    }

    /// The result of a child run ([`Ctx::spawn_run`]): its final state, or why it has none. While the
    /// child has not ended, this parks the run (propagate the error with `?`), as a `wait_event` does;
    /// the node runs again from its start when the child ends (or at the next look, every
    /// [`ChildOptions::poll`]), so start children before joining them. The result is journaled.
    ///
    /// # Errors
    ///
    /// The stop itself while the child runs: propagate it; a retryable error when the store cannot be
    /// read.
    pub async fn join_run<C: Reducer>(
        &mut self,
        engine: &Engine<C>,
        child: &ChildRun,
    ) -> Result<Result<C, ChildError>, NodeError> {
        self.join_run_with(engine, child, ChildOptions::default()).await
    }

    /// [`Ctx::join_run`] with options (the poll interval).
    ///
    /// # Errors
    ///
    /// As [`Ctx::join_run`].
    pub async fn join_run_with<C: Reducer>(
        &mut self,
        engine: &Engine<C>,
        child: &ChildRun,
        opts: ChildOptions,
    ) -> Result<Result<C, ChildError>, NodeError> {
        let run = child.run_id.clone();
        let replay = self.env().is_some_and(|e| e.replay.is_some());
        loop {
            let ended = replay || child_ended(engine, &run).await?;
            if ended {
                let (engine, id) = (engine.clone(), run.clone());
                return self
                    .effect("join_run", &run)
                    .idempotent()
                    .run(|_key| async move { result_of(&engine, &id).await })
                    .await;
            }
            match self.wait_event_with_timeout::<serde_json::Value>(&topic_of(&run), opts.poll)? {
                Answer::Given(_) | Answer::TimedOut { .. } => {}
            }
        }
    }
}

async fn child_ended<C: Reducer>(engine: &Engine<C>, run: &str) -> Result<bool, NodeError> {
    let info = engine
        .store()
        .run_info(run)
        .await
        .map_err(|e| NodeError::new(format!("reading child run `{run}`: {e}")))?
        .ok_or_else(|| NodeError::fatal(format!("child run `{run}` is not in the store")))?;
    Ok(info.status.has_ended())
}

async fn result_of<C: Reducer>(engine: &Engine<C>, run: &str) -> Result<Result<C, ChildError>, NodeError> {
    let out = engine
        .outcome(run)
        .await
        .map_err(|e| NodeError::new(format!("reading child run `{run}`: {e}")))?
        .ok_or_else(|| NodeError::fatal(format!("child run `{run}` is not in the store")))?;
    Ok(match out.status {
        RunStatus::Completed => Ok(out.state),
        RunStatus::Failed(error) => Err(ChildError::Failed { run: run.to_owned(), error }),
        RunStatus::Cancelled => Err(ChildError::Cancelled { run: run.to_owned() }),
        other => return Err(NodeError::new(format!("child run `{run}` has not ended: {}", other.as_str()))),
    })
}
