//! Human in the loop: nodes that ask for input (`Ctx::interrupt`), breakpoints before and after nodes,
//! and resuming with input.
//!
//! When items of a step ask for input, the step's other items run to the barrier, and the run's status
//! becomes `Interrupted` together with a *pending step* (`persist::PendingStep`): the finished items'
//! outputs, so they are not run again. Resuming with input runs the step again with those outputs and
//! the interrupted items alone, each given its input; the barrier then merges every output in order-key
//! order, exactly as if the inputs had been there from the start. Nothing is written before the step
//! commits (or interrupts again), so an input the node cannot read changes nothing.

use super::core::Engine;
use super::drive::Start;
use crate::error::{Error, Result, StoreError};
use crate::events::{EventType, payload};
use crate::persist::{self, PendingStep};
use crate::run::{RunOptions, RunOutcome};
use crate::state::Reducer;
use crate::store::{Checkpoint, Interrupt, InterruptKind, RunInfo, RunStatus};

impl<S: Reducer> Engine<S> {
    /// Answers the one interrupt a run waits for with `input` and continues the run: the interrupted
    /// node runs again from its start and its `ctx.interrupt(..)` call returns `input`; the items that
    /// finished in the same step are not run again. Works from any process: everything it needs is in
    /// the store.
    ///
    /// # Errors
    ///
    /// [`Error::ResumeInput`] when the run does not wait for exactly one input, or when the node cannot
    /// read `input` as the type it asks for (nothing changes: the run still waits); as
    /// [`Engine::resume`] otherwise.
    pub async fn resume_with_input(
        &self,
        run_id: &str,
        input: &impl serde::Serialize,
    ) -> Result<RunOutcome<S>> {
        let value = serde_json::to_value(input).map_err(|e| Error::ResumeInput {
            run: run_id.to_owned(),
            interrupt: None,
            detail: format!("it does not serialize: {e}"),
        })?;
        let info = self.inner.store.run_info(run_id).await?;
        let waiting: Vec<String> = match &info {
            Some(info) => info
                .status
                .waits()
                .iter()
                .filter(|i| i.kind == InterruptKind::Input)
                .map(|i| i.id.clone())
                .collect(),
            None => Vec::new(),
        };
        match waiting.as_slice() {
            [one] => self.resume_with_inputs(run_id, [(one.clone(), value)]).await,
            // The general path reports the status (or the missing run).
            [] => self.resume_with_inputs(run_id, []).await,
            many => Err(Error::ResumeInput {
                run: run_id.to_owned(),
                interrupt: None,
                detail: format!(
                    "{} interrupts wait for input ({}); answer each by id with `resume_with_inputs`",
                    many.len(),
                    many.join(", ")
                ),
            }),
        }
    }

    /// Answers interrupts of a run by id (`Interrupt::id`) and continues it: every answered node runs
    /// again with its input; a waiting interrupt left unanswered asks again (its node runs again too,
    /// and its effects are journaled, so they are not repeated). Inputs are JSON values; the node reads
    /// its input as the type it asks for.
    ///
    /// # Errors
    ///
    /// [`Error::ResumeInput`] when the run waits for no input, an id names no waiting interrupt, no
    /// input is given, or a node cannot read its input (nothing changes); as [`Engine::resume`]
    /// otherwise.
    pub async fn resume_with_inputs(
        &self,
        run_id: &str,
        inputs: impl IntoIterator<Item = (String, serde_json::Value)>,
    ) -> Result<RunOutcome<S>> {
        self.resume_with_inputs_with(run_id, inputs, RunOptions::default()).await
    }

    /// [`Engine::resume_with_inputs`] with options (the seed is the stored one). With
    /// [`RunOptions::hand_back`] the answers are written and the run is left `Running` for a worker
    /// pool to claim, instead of driven here.
    ///
    /// # Errors
    ///
    /// As [`Engine::resume_with_inputs`].
    pub async fn resume_with_inputs_with(
        &self,
        run_id: &str,
        inputs: impl IntoIterator<Item = (String, serde_json::Value)>,
        opts: RunOptions,
    ) -> Result<RunOutcome<S>> {
        if let Some(version) = self.typed_route(run_id).await? {
            return Box::pin(version.resume_with_inputs_with(run_id, inputs, opts)).await;
        }
        let reject = |interrupt: Option<&str>, detail: String| Error::ResumeInput {
            run: run_id.to_owned(),
            interrupt: interrupt.map(str::to_owned),
            detail,
        };
        let (info, cp) = self.stored(run_id).await?;
        let waiting: Vec<&Interrupt> =
            info.status.waits().iter().filter(|i| i.kind == InterruptKind::Input).collect();
        if waiting.is_empty() {
            let status = match &info.status {
                RunStatus::Interrupted(_) => "stopped at a breakpoint (`resume` continues it)".to_owned(),
                RunStatus::Waiting(list) if list.iter().all(|i| i.kind == InterruptKind::Sleep) => format!(
                    "asleep until {} ms since the epoch (a timer wakes it)",
                    list.iter().filter_map(|i| i.wake_at_ms).min().unwrap_or_default()
                ),
                RunStatus::Waiting(_) => {
                    "waiting for a time or an external event (a timer or `send_event` wakes it)".to_owned()
                }
                other => format!("{other:?}"),
            };
            return Err(reject(None, format!("the run waits for no input: it is {status}")));
        }
        let now = self.inner.env.clock.now_ms();
        let mut answers = Vec::new();
        for (id, value) in inputs {
            let Some(i) = waiting.iter().find(|i| i.id == id) else {
                let ids: Vec<&str> = waiting.iter().map(|i| i.id.as_str()).collect();
                return Err(reject(
                    Some(&id),
                    format!("no interrupt waits with this id; waiting: {}", ids.join(", ")),
                ));
            };
            if answers.iter().any(|(a, _): &(&Interrupt, _)| a.id == id) {
                return Err(reject(Some(&id), "answered twice".into()));
            }
            let value = match i.wake_at_ms {
                Some(deadline_ms) if now >= deadline_ms => {
                    return Err(Error::DeadlinePassed {
                        run: run_id.to_owned(),
                        interrupt: id,
                        deadline_ms,
                        now_ms: now,
                    });
                }
                // A question with a deadline reads `{"answer": …}` (`ctx::Reply`).
                Some(_) => serde_json::json!({ "answer": value }),
                None => value,
            };
            answers.push((*i, value));
        }
        if answers.is_empty() {
            return Err(reject(None, "no input was given".into()));
        }
        tracing::info!(run = run_id, step = cp.step, inputs = answers.len(), "run resumed with input");
        let answers: Vec<(Interrupt, serde_json::Value)> =
            answers.into_iter().map(|(i, v)| (i.clone(), v)).collect();
        self.continue_answered(&info, cp, answers, None, opts).await
    }

    /// Delivers `answers` to the interrupts of the stored run `info` they answer (into the run's pending
    /// step) and continues it: drives it here, or, with [`RunOptions::hand_back`], writes the answers with
    /// the `Running` status and returns. `by` names what answered when it is not a person (`"timer"`),
    /// for the `RESUMED` event.
    pub(super) async fn continue_answered(
        &self,
        info: &RunInfo,
        cp: Checkpoint,
        answers: Vec<(Interrupt, serde_json::Value)>,
        by: Option<&str>,
        opts: RunOptions,
    ) -> Result<RunOutcome<S>> {
        let run_id = info.run_id.as_str();
        let mut pending = self
            .load_pending(run_id, cp.step)
            .await?
            .unwrap_or(PendingStep { step: cp.step, items: Vec::new() });
        let answered = match deliver(run_id, cp.step, &mut pending, answers) {
            Err(Delivery::Moved) => {
                // The pending step was read after the row, and another continuation answered meanwhile:
                // the run moved on (this answer came too late), nothing is damaged.
                let found = self.inner.store.run_info(run_id).await?.map_or(info.version, |i| i.version);
                return Err(Error::VersionConflict { run: run_id.to_owned(), expected: info.version, found });
            }
            Err(Delivery::Failed(e)) => return Err(e),
            Ok(answered) => answered,
        };
        let step = cp.step;
        let resumed = match by {
            Some(by) => payload!({ "step": step, "inputs": answered, "by": by }),
            None => payload!({ "step": step, "inputs": answered }),
        };
        let (state, chain) = persist::load_state(&*self.inner.store, &cp).await?;
        let nodes = self.node_indices(&cp)?;
        let hand_back = opts.hand_back;
        // The step had started: its breakpoints before were passed.
        let start = Start::stored(cp, state, chain, nodes, info)
            .resuming(Some(pending), true)
            .announcing((EventType::Resumed, resumed))
            .parked(&info.status);
        let mut run = self.driver(start, opts);
        if hand_back {
            return self.hand_back(&mut run).await;
        }
        self.drive(run).await
    }

    /// The run's pending step, if it belongs to checkpoint `step`'s frontier.
    pub(super) async fn load_pending(&self, run_id: &str, step: u64) -> Result<Option<PendingStep>> {
        let Some(bytes) = self.inner.store.pending(run_id).await? else { return Ok(None) };
        let pending = PendingStep::decode(&bytes).map_err(|e| match e {
            StoreError::Corrupted { detail, .. } => StoreError::corrupted_record(run_id, step, detail),
            other => other,
        })?;
        Ok((pending.step == step).then_some(pending))
    }
}

/// Why answers were not delivered.
enum Delivery {
    /// The pending step holds an input for the answered call already: another continuation answered
    /// it after the run row was read.
    Moved,
    /// The pending step is behind the interrupt it should answer: damaged.
    Failed(Error),
}

/// Delivers `answers` into the pending step's items: what the `RESUMED` event records of each. An
/// answer that finds the pending step out of line with its interrupt refuses the whole resumption
/// (nothing written).
fn deliver(
    run_id: &str,
    step: u64,
    pending: &mut PendingStep,
    answers: Vec<(Interrupt, serde_json::Value)>,
) -> std::result::Result<Vec<serde_json::Value>, Delivery> {
    let mut answered = Vec::new();
    for (i, value) in answers {
        let item = pending.item_mut(&i.path);
        if item.inputs.len() > i.index as usize {
            return Err(Delivery::Moved);
        }
        if item.inputs.len() != i.index as usize {
            return Err(Delivery::Failed(Error::Store(StoreError::corrupted_record(
                run_id,
                step,
                format!(
                    "interrupt `{}` is call {} of its node, but the pending step holds {} earlier inputs",
                    i.id,
                    i.index,
                    item.inputs.len()
                ),
            ))));
        }
        // An answer to a subgraph's question is the subgraph's to deliver: it names the question
        // there (`crate::subgraph`).
        let delivered = match i.id.split_once('>') {
            Some((_, nested)) => serde_json::json!({ "interrupt": nested, "input": value }),
            None => value.clone(),
        };
        item.inputs.push(delivered);
        answered.push(serde_json::json!({
            "id": i.id, "node": i.node, "path": i.path, "index": i.index, "input": value,
        }));
    }
    Ok(answered)
}
