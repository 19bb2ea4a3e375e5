//! Human in the loop: nodes that ask for input (`Ctx::interrupt`), breakpoints before and after nodes,
//! and resuming with input.
//!
//! When items of a step ask for input, the step's other items run to the barrier, and the run's status
//! becomes `Interrupted` together with a *pending step* (`persist::PendingStep`): the finished items'
//! outputs, so they are not run again. Resuming with input runs the step again with those outputs and
//! the interrupted items alone, each given its input; the barrier then merges every output in order-key
//! order, exactly as if the inputs had been there from the start. Nothing is written before the step
//! commits (or interrupts again), so an input the node cannot read changes nothing.

use std::sync::Arc;

use super::advance::{Driven, Stop};
use super::step::{ItemOutput, StepDone};
use super::{Engine, RunOptions, RunOutcome};
use crate::error::{Error, Result, StoreError};
use crate::events::{EventType, payload};
use crate::node::{Branch, Route};
use crate::persist::{self, DoneItem, PendingItem, PendingStep, StoredRoute};
use crate::state::Reducer;
use crate::store::{CommitOutcome, Interrupt, InterruptKind, RunStatus};

/// The id an interrupt is answered by: its item's path and the call's index.
pub(crate) fn interrupt_id(path: &str, index: u32) -> String {
    format!("{path}#{index}")
}

type Inputs = Vec<Option<Arc<Vec<serde_json::Value>>>>;
/// Each item's stored output, and the inputs given to each.
type Resumed<S> = (Vec<Option<ItemOutput<S>>>, Inputs);

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
        let (info, mut cp) = self.stored(run_id).await?;
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
        let mut run = self.driver(run_id.into(), &mut cp, state, chain, nodes, opts);
        (run.version, run.head) = (info.version, info.event_head);
        run.queued = vec![(EventType::Resumed, payload!({ "step": step, "inputs": answered }))];
        run.resumption = Some(pending);
        // The step had started: its breakpoints before were passed.
        run.past_breakpoint = true;
        tracing::info!(run = run_id, step, inputs = answered.len(), "run resumed with input");
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

    /// For each item of the current step: its output when a resumption holds one, and the inputs given
    /// to its interrupts (by a resumption, or in a replay by the recorded run).
    pub(super) fn resumed_items(&self, run: &Driven<S>) -> std::result::Result<Resumed<S>, Stop> {
        let replay = self.inner.env.replay.as_ref();
        let pending = run.resumption.as_ref().filter(|p| p.step == run.step);
        if pending.is_none() && replay.is_none_or(|r| r.inputs.is_empty()) {
            return Ok((Vec::new(), Vec::new()));
        }
        let mut done = Vec::with_capacity(run.frontier.len());
        let mut inputs = Vec::with_capacity(run.frontier.len());
        for item in &run.frontier {
            let path = item.path.as_str();
            let stored = pending.and_then(|p| p.items.iter().find(|i| i.path == path));
            done.push(match stored.and_then(|i| i.done.as_ref()) {
                Some(d) => Some(output_of::<S>(&run.run_id, run.step, d)?),
                None => None,
            });
            let given = match stored.filter(|i| !i.inputs.is_empty()) {
                Some(i) => Some(Arc::new(i.inputs.clone())),
                None => replay
                    .and_then(|r| r.inputs.get(&(run.step, path.to_owned())))
                    .map(|v| Arc::new(v.clone())),
            };
            inputs.push(given);
        }
        Ok((done, inputs))
    }

    /// Items of the step asked for input: records the finished items' outputs and the interrupts, and
    /// writes the `Interrupted` status with them.
    pub(super) async fn interrupted(&self, run: &mut Driven<S>, done: StepDone<S>) -> Stop {
        let mut pending = run
            .resumption
            .take()
            .filter(|p| p.step == run.step)
            .unwrap_or(PendingStep { step: run.step, items: Vec::new() });
        for (item, out) in run.frontier.iter().zip(&done.outputs) {
            if let Some(out) = out {
                let stored = match done_of::<S>(&run.run_id, out) {
                    Ok(d) => d,
                    Err(e) => return Stop::Error(e),
                };
                pending_item(&mut pending, item.path.as_str()).done = Some(stored);
            }
        }
        let graph = &self.inner.graph;
        let mut asked = done.interrupts;
        asked.sort_by_key(|(rank, index, _)| (*rank, *index));
        let interrupts: Vec<Interrupt> = asked
            .into_iter()
            .map(|(rank, index, payload)| {
                let path = run.frontier[rank].path.as_str().to_owned();
                Interrupt {
                    id: interrupt_id(&path, index),
                    kind: InterruptKind::Input,
                    node: graph.node(run.nodes[rank]).name().to_string(),
                    path,
                    step: run.step,
                    index,
                    payload,
                }
            })
            .collect();
        let event = payload!({ "step": run.step, "interrupts": interrupts });
        let status = RunStatus::Interrupted(interrupts.clone());
        let bytes = pending.encode();
        run.resumption = Some(pending);
        match self.write_status(run, &status, (EventType::Interrupted, event), Some(&bytes)).await {
            Ok(CommitOutcome::Committed { .. }) => Stop::Interrupted(interrupts),
            Ok(other) => Stop::Error(Error::version_conflict(&run.run_id, run.version, &other)),
            Err(e) => Stop::Error(e.into()),
        }
    }

    /// The breakpoints of `kind` on the current step's nodes (none in a replay).
    pub(super) fn breakpoints(&self, run: &Driven<S>, kind: InterruptKind) -> Vec<Interrupt> {
        if self.inner.env.replay.is_some() {
            return Vec::new();
        }
        let graph = &self.inner.graph;
        run.frontier
            .iter()
            .zip(&run.nodes)
            .filter(|(_, n)| match kind {
                InterruptKind::Before => graph.node(**n).interrupt_before(),
                InterruptKind::After => graph.node(**n).interrupt_after(),
                _ => false,
            })
            .map(|(item, n)| Interrupt {
                id: interrupt_id(item.path.as_str(), 0),
                kind,
                node: graph.node(*n).name().to_string(),
                path: item.path.as_str().to_owned(),
                step: run.step,
                index: 0,
                payload: serde_json::Value::Null,
            })
            .collect()
    }

    /// Stops the run at breakpoints: writes the `Interrupted` status.
    pub(super) async fn stop_at_breakpoint(
        &self,
        mut run: Driven<S>,
        list: Vec<Interrupt>,
    ) -> Result<RunOutcome<S>> {
        let event = payload!({ "step": run.step, "interrupts": list });
        let status = RunStatus::Interrupted(list);
        match self.write_status(&mut run, &status, (EventType::Interrupted, event), None).await? {
            CommitOutcome::Committed { .. } => {
                tracing::info!(run = %run.run_id, step = run.step, "run stopped at a breakpoint");
                Ok(run.outcome(status))
            }
            other => Err(Error::version_conflict(&run.run_id, run.version, &other)),
        }
    }
}

/// The entry of `path` in a pending step, added when missing.
fn pending_item<'p>(pending: &'p mut PendingStep, path: &str) -> &'p mut PendingItem {
    let at = match pending.items.iter().position(|i| i.path == path) {
        Some(at) => at,
        None => {
            pending.items.push(PendingItem { path: path.to_owned(), done: None, inputs: Vec::new() });
            pending.items.len() - 1
        }
    };
    &mut pending.items[at]
}

/// A finished item's output, as a pending step stores it.
fn done_of<S: Reducer>(run: &str, out: &ItemOutput<S>) -> Result<DoneItem> {
    let delta = serde_json::to_value(&out.delta).map_err(|source| Error::Serialization {
        run: run.to_owned(),
        what: "a delta",
        source,
    })?;
    let route = match &out.route {
        Route::Declared => StoredRoute::Declared,
        Route::Goto(e) => StoredRoute::Goto(*e),
        Route::Fork(branches) => {
            StoredRoute::Fork(branches.iter().map(|b| (b.edge, b.input.clone())).collect())
        }
        Route::End => StoredRoute::End,
    };
    Ok(DoneItem { delta, route, emits: out.emits.clone(), effects: out.effects.clone() })
}

/// The output a pending step stored for an item.
fn output_of<S: Reducer>(run: &str, step: u64, d: &DoneItem) -> std::result::Result<ItemOutput<S>, Stop> {
    let delta = serde_json::from_value(d.delta.clone()).map_err(|e| {
        Stop::Error(Error::Store(StoreError::corrupted_record(
            run,
            step,
            format!("a finished item's delta in the pending step does not decode: {e}"),
        )))
    })?;
    let route = match &d.route {
        StoredRoute::Declared => Route::Declared,
        StoredRoute::Goto(e) => Route::Goto(*e),
        StoredRoute::Fork(b) => {
            Route::Fork(b.iter().map(|(edge, input)| Branch { edge: *edge, input: input.clone() }).collect())
        }
        StoredRoute::End => Route::End,
    };
    Ok(ItemOutput { delta, route, emits: d.emits.clone(), effects: d.effects.clone() })
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
        let item = pending_item(pending, &i.path);
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
