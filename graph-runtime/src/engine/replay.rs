//! What an engine offers around effects: replay of a recorded run, a person's answer about an effect
//! whose outcome a crash left unknown, and the outbox.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::core::Engine;
use super::drive::Stop;
use crate::env::{Replay, ReplayMode, RunEnv};
use crate::error::Divergence;
use crate::error::{Error, Result};
use crate::events::EventType;
use crate::persist;
use crate::run::RunOptions;
use crate::state::Reducer;
use crate::store::record::{self, encode};

/// A checkpoint's bytes without its event head: what a replay compares (the replay writes its own log,
/// without the original's status changes, so its heads differ).
fn encode_unchained(cp: &Checkpoint) -> Vec<u8> {
    let mut cp = cp.clone();
    cp.event_head = None;
    encode(&cp)
}
use crate::store::{Checkpoint, EffectState, MemoryStore, OutboxRow, Resolution, RunStatus, Store};

/// What a replay did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReplayOutcome<S> {
    /// The replayed run.
    pub run_id: String,
    /// The state the replay reached.
    pub state: S,
    /// The step the replay reached (the recorded run's latest).
    pub steps: u64,
    /// Every divergence from the recording (empty under `Strict`: the first one is an error).
    pub divergences: Vec<Divergence>,
}

impl<S: Reducer> Engine<S> {
    /// Re-executes a stored run from its recorded input, seed, times and effect responses, into a
    /// scratch store: nothing is written to this engine's store and no effect closure is called. Every
    /// effect call is checked against the journal (its name and request), and every checkpoint the
    /// replay produces against the stored one, byte for byte.
    ///
    /// # Errors
    ///
    /// [`Error::ReplayMismatch`] at the first divergence under [`ReplayMode::Strict`];
    /// [`Error::RunNotFound`]; [`Error::GraphChanged`]; store errors; a run whose first checkpoint was
    /// pruned cannot be replayed (a `Corrupted` error says so).
    pub async fn replay(&self, run_id: &str, mode: ReplayMode) -> Result<ReplayOutcome<S>> {
        if let Some(version) = self.typed_route(run_id).await? {
            return Box::pin(version.replay(run_id, mode)).await;
        }
        let store = &*self.inner.store;
        let info =
            store.run_info(run_id).await?.ok_or_else(|| Error::RunNotFound { run: run_id.to_owned() })?;
        if info.graph_fingerprint != self.inner.graph.fingerprint() {
            return Err(Error::GraphChanged {
                run: run_id.to_owned(),
                stored: info.graph_fingerprint,
                current: self.inner.graph.fingerprint().to_owned(),
            });
        }
        self.verify(run_id).await?;
        let recorded = store.checkpoints(run_id, 0, info.latest_step).await?;
        let Some(first) = recorded.first().filter(|c| c.step == 0) else {
            return Err(crate::StoreError::corrupted_record(
                run_id,
                0,
                "replay needs the run's first checkpoint, which was pruned",
            )
            .into());
        };
        let (input, _) = persist::load_state::<S>(store, first).await?;
        let mut opts = RunOptions::default().seed(first.rng_seed);
        opts.label = first.label.clone();
        let journal = store.effects(run_id).await?.into_iter().map(|e| (e.key.clone(), e)).collect();
        let replay = Arc::new(Replay {
            mode,
            journal,
            checkpoints: recorded.iter().map(|c| (c.step, (encode_unchained(c), c.timestamp_ms))).collect(),
            until: info.latest_step,
            parked: matches!(info.status, RunStatus::Interrupted(_) | RunStatus::Waiting(_)),
            inputs: self.recorded_inputs(run_id).await?,
            divergences: Mutex::new(Vec::new()),
            source: self.inner.store.clone(),
        });
        // An engine of the same graph over a scratch store, its effect calls reaching the recording.
        let scratch: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let engine = Engine::nested(
            self.inner.graph.clone(),
            &Arc::new(RunEnv {
                store: scratch,
                replay: Some(replay.clone()),
                clock: self.inner.env.clock.clone(),
                options: self.inner.options.clone(),
                chain_key: self.inner.chain_key.clone(),
                waker: Default::default(),
                children: Default::default(),
            }),
        );
        let out = engine.run_with(run_id, input, opts).await?;
        let divergences = std::mem::take(&mut *replay.divergences.lock().unwrap_or_else(|e| e.into_inner()));
        Ok(ReplayOutcome { run_id: run_id.to_owned(), state: out.state, steps: out.steps, divergences })
    }

    /// Answers a run paused with `PauseReason::NeedsConfirmation`: whether the effect `key`, which
    /// started before a crash, happened. Then `resume` continues the run: the step runs again and the
    /// effect returns the answer (`Completed`: that response; `Retry`: the call is made again; `Fail`:
    /// the node gets the error).
    ///
    /// # Errors
    ///
    /// [`Error::EffectNotPending`] when the effect is not waiting for confirmation (nothing changes);
    /// store errors.
    pub async fn resolve_effect(&self, run_id: &str, key: &str, resolution: Resolution) -> Result<()> {
        let store = &*self.inner.store;
        let not_pending =
            |state: String| Error::EffectNotPending { run: run_id.to_owned(), key: key.to_owned(), state };
        let Some(mut entry) = store.load_effect(key).await? else {
            return Err(not_pending("not in the journal".into()));
        };
        if entry.run_id != run_id || entry.state != EffectState::Started {
            return Err(not_pending(format!("{:?} in run `{}`", entry.state, entry.run_id)));
        }
        entry.state = match resolution {
            Resolution::Completed(response) => EffectState::Completed { response },
            Resolution::Retry => {
                EffectState::Failed { message: "a person asked for the call to be made again".into() }
            }
            Resolution::Fail(message) => EffectState::Rejected { message },
        };
        match store.put_effect(&entry, Some(&EffectState::Started)).await? {
            crate::store::EffectOutcome::Written => Ok(()),
            other => Err(not_pending(format!("changed meanwhile: {other:?}"))),
        }
    }

    /// Outbox rows not yet acknowledged, oldest first, at most `limit`: what committed steps emitted
    /// (`ctx.emit`). A row stays until [`Engine::ack_outbox`]; after a crash between delivery and ack it
    /// is delivered again with the same key, so consumers can deduplicate.
    ///
    /// # Errors
    ///
    /// Store errors.
    pub async fn outbox(&self, limit: usize) -> Result<Vec<OutboxRow>> {
        Ok(self.inner.store.outbox(limit).await?)
    }

    /// Acknowledges delivered outbox rows by key; returns how many were pending.
    ///
    /// # Errors
    ///
    /// Store errors.
    pub async fn ack_outbox(&self, keys: &[String]) -> Result<usize> {
        Ok(self.inner.store.ack_outbox(keys).await?)
    }

    /// The inputs a run was resumed with (its `RESUMED` events), by (step, item path), in call order.
    async fn recorded_inputs(&self, run_id: &str) -> Result<BTreeMap<(u64, String), Vec<serde_json::Value>>> {
        let mut by_item: BTreeMap<(u64, String), BTreeMap<u64, serde_json::Value>> = BTreeMap::new();
        let mut from = 0;
        loop {
            let page = self.inner.store.events(run_id, from, 4096).await?;
            let Some(last) = page.last() else { break };
            from = last.seq + 1;
            for e in page.iter().filter(|e| e.event_type == EventType::Resumed) {
                let payload = e.payload.value();
                let Some(step) = payload.get("step").and_then(serde_json::Value::as_u64) else { continue };
                for input in payload.get("inputs").and_then(|i| i.as_array()).into_iter().flatten() {
                    let (Some(path), Some(index)) = (
                        input.get("path").and_then(|p| p.as_str()),
                        input.get("index").and_then(|i| i.as_u64()),
                    ) else {
                        continue;
                    };
                    let value = input.get("input").cloned().unwrap_or_default();
                    by_item.entry((step, path.to_owned())).or_default().insert(index, value);
                }
            }
        }
        Ok(by_item.into_iter().map(|(k, calls)| (k, calls.into_values().collect())).collect())
    }

    /// The time checkpoint `step` records: in a replay the recorded checkpoint's, else the engine's
    /// clock, never before `not_before` (the previous checkpoint's: a run's times never go backwards).
    pub(super) fn step_time(&self, step: u64, not_before: u64) -> u64 {
        let recorded = self.inner.env.replay.as_ref().and_then(|r| r.checkpoints.get(&step).map(|(_, t)| *t));
        recorded.unwrap_or_else(|| self.inner.env.clock.now_ms().max(not_before))
    }

    /// In a replay, whether the recorded run's latest step is reached (a parked run's is run too:
    /// its items stop where they stopped).
    pub(super) fn replay_done(&self, step: u64) -> bool {
        self.inner.env.replay.as_ref().is_some_and(|r| step > r.until || (step == r.until && !r.parked))
    }

    /// In a replay, checks a checkpoint against the recorded one, byte for byte.
    pub(super) fn compare_with_recording(&self, cp: &Checkpoint) -> std::result::Result<(), Stop> {
        let Some(replay) = &self.inner.env.replay else { return Ok(()) };
        let found = encode_unchained(cp);
        let expected = replay.checkpoints.get(&cp.step).map(|(b, _)| b);
        if expected == Some(&found) {
            return Ok(());
        }
        let describe = |c: Option<&Checkpoint>| match c {
            Some(c) => format!(
                "checkpoint {} with state hash {} and key {}",
                c.step, c.state_hash, c.idempotency_key
            ),
            None => format!("no checkpoint {}", cp.step),
        };
        let recorded = expected.and_then(|b| record::decode(&cp.run_id, cp.step, b).ok());
        let d = Divergence {
            step: cp.step,
            node: String::new(),
            call: None,
            expected: describe(recorded.as_ref()),
            found: describe(Some(cp)),
        };
        match replay.diverged(d) {
            Some(d) => Err(Stop::Error(Error::ReplayMismatch {
                run: cp.run_id.to_string(),
                step: d.step,
                node: d.node,
                call: d.call,
                expected: d.expected,
                found: d.found,
            })),
            None => Ok(()),
        }
    }
}
