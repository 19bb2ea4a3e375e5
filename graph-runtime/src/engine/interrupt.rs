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
use crate::store::{Interrupt, InterruptKind, RunStatus};

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
        let waiting: Vec<String> = match info.as_ref().map(|i| &i.status) {
            Some(RunStatus::Interrupted(list)) => {
                list.iter().filter(|i| i.kind == InterruptKind::Input).map(|i| i.id.clone()).collect()
            }
            _ => Vec::new(),
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
        self.resume_with_inputs_opts(run_id, inputs, RunOptions::default()).await
    }

    /// [`Engine::resume_with_inputs`] with options (the seed is the stored one).
    pub(super) async fn resume_with_inputs_opts(
        &self,
        run_id: &str,
        inputs: impl IntoIterator<Item = (String, serde_json::Value)>,
        opts: RunOptions,
    ) -> Result<RunOutcome<S>> {
        let store = &*self.inner.store;
        let reject = |interrupt: Option<&str>, detail: String| Error::ResumeInput {
            run: run_id.to_owned(),
            interrupt: interrupt.map(str::to_owned),
            detail,
        };
        let (info, cp) = self.stored(run_id).await?;
        let waiting: Vec<&Interrupt> = match &info.status {
            RunStatus::Interrupted(list) => list.iter().filter(|i| i.kind == InterruptKind::Input).collect(),
            _ => Vec::new(),
        };
        if waiting.is_empty() {
            let status = match &info.status {
                RunStatus::Interrupted(_) => "stopped at a breakpoint (`resume` continues it)".to_owned(),
                other => format!("{other:?}"),
            };
            return Err(reject(None, format!("the run waits for no input: it is {status}")));
        }
        let mut pending = self
            .load_pending(run_id, cp.step)
            .await?
            .unwrap_or(PendingStep { step: cp.step, items: Vec::new() });
        let answered = deliver(run_id, cp.step, &waiting, &mut pending, inputs)?;
        let (state, chain) = persist::load_state(store, &cp).await?;
        let nodes = self.node_indices(&cp)?;
        let step = cp.step;
        tracing::info!(run = run_id, step, inputs = answered.len(), "run resumed with input");
        let resumed = (EventType::Resumed, payload!({ "step": step, "inputs": answered }));
        // The step had started: its breakpoints before were passed.
        let start =
            Start::stored(cp, state, chain, nodes, &info).resuming(Some(pending), true).announcing(resumed);
        self.drive(self.driver(start, opts)).await
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

/// Delivers `inputs` to the interrupts of `waiting` they answer, into the pending step's items: what the
/// `Resumed` event records of each. Any input that answers no waiting interrupt, answers one twice, or
/// finds the pending step out of line with its interrupt refuses the whole resumption (nothing written).
fn deliver(
    run_id: &str,
    step: u64,
    waiting: &[&Interrupt],
    pending: &mut PendingStep,
    inputs: impl IntoIterator<Item = (String, serde_json::Value)>,
) -> Result<Vec<serde_json::Value>> {
    let reject = |interrupt: Option<&str>, detail: String| Error::ResumeInput {
        run: run_id.to_owned(),
        interrupt: interrupt.map(str::to_owned),
        detail,
    };
    let mut answered = Vec::new();
    for (id, value) in inputs {
        let Some(i) = waiting.iter().find(|i| i.id == id) else {
            let ids: Vec<&str> = waiting.iter().map(|i| i.id.as_str()).collect();
            return Err(reject(
                Some(&id),
                format!("no interrupt waits with this id; waiting: {}", ids.join(", ")),
            ));
        };
        if answered.iter().any(|a: &serde_json::Value| a["id"] == *id) {
            return Err(reject(Some(&id), "answered twice".into()));
        }
        let item = pending.item_mut(&i.path);
        if item.inputs.len() != i.index as usize {
            return Err(Error::Store(StoreError::corrupted_record(
                run_id,
                step,
                format!(
                    "interrupt `{id}` is call {} of its node, but the pending step holds {} earlier inputs",
                    i.index,
                    item.inputs.len()
                ),
            )));
        }
        item.inputs.push(value.clone());
        answered.push(serde_json::json!({
            "id": id, "node": i.node, "path": i.path, "index": i.index, "input": value,
        }));
    }
    if answered.is_empty() {
        return Err(reject(None, "no input was given".into()));
    }
    Ok(answered)
}
