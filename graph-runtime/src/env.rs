//! What the effect calls of a run's items reach: the store whose journal they use, or a replay's
//! record of the original run; and what an item tells the event log of the effects it used.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::clock::Clock;
use crate::error::Divergence;
use crate::store::{EffectClass, EffectRecord, Store};

/// What effect calls of a run's items reach: the store whose journal they use, or a replay.
pub(crate) struct RunEnv {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) replay: Option<Arc<Replay>>,
    /// What sleeps and deadlines are measured by.
    pub(crate) clock: Arc<dyn Clock>,
    /// The engine's options and chain key, which a subgraph's runs share.
    pub(crate) options: crate::policy::EngineOptions,
    pub(crate) chain_key: Option<crate::events::ChainKey>,
    /// The engine whose runs these are, to wake one of them in this process (a child run that finished
    /// wakes its parent). Unset in a replay.
    pub(crate) waker: std::sync::OnceLock<std::sync::Weak<dyn RunWaker>>,
    /// The child runs this engine's runs started in this process (`crate::child`).
    pub(crate) children: Children,
}

/// Wakes a run of an engine, without the engine's state type.
pub(crate) trait RunWaker: Send + Sync {
    /// Wakes `run` if what it waits for is due (an event just sent to it).
    fn wake(self: Arc<Self>, run: String) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
}

impl std::fmt::Debug for RunEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunEnv").field("replay", &self.replay.is_some()).finish()
    }
}

/// How [`Engine::replay`](crate::Engine::replay) treats a divergence from the recorded run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReplayMode {
    /// Stop at the first divergence with `Error::ReplayMismatch`.
    #[default]
    Strict,
    /// Record every divergence in the outcome and go on (an effect that diverged returns its recorded
    /// response when there is one).
    Lenient,
}

/// A replay's record of the original run: its journal and its checkpoints, and what diverged.
pub(crate) struct Replay {
    pub(crate) mode: ReplayMode,
    /// The original journal, by effect key (the replay keeps the run id, so keys match).
    pub(crate) journal: BTreeMap<String, EffectRecord>,
    /// The original checkpoints' bytes (`record::encode`) and times, by step.
    pub(crate) checkpoints: BTreeMap<u64, (Vec<u8>, u64)>,
    /// The step the original run reached: the replay stops there.
    pub(crate) until: u64,
    /// The original run is parked in step `until` (its items asked, slept or wait for an event): the
    /// replay runs that step too, so the calls its items made before they stopped are checked, and
    /// stops where they stopped.
    pub(crate) parked: bool,
    /// The inputs the original run was resumed with, by (step, item path), in call order.
    pub(crate) inputs: BTreeMap<(u64, String), Vec<serde_json::Value>>,
    pub(crate) divergences: Mutex<Vec<Divergence>>,
    /// The store that holds the original run (and its subgraphs' runs, whose results a replay reads).
    pub(crate) source: Arc<dyn Store>,
}

impl Replay {
    /// Records a divergence; under `Strict` returns the error that stops the replay.
    pub(crate) fn diverged(&self, d: Divergence) -> Option<Divergence> {
        self.divergences.lock().unwrap_or_else(|e| e.into_inner()).push(d.clone());
        (self.mode == ReplayMode::Strict).then_some(d)
    }
}

/// An effect whose response an item used: what the event log records (`EFFECT_RECORDED`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct EffectNote {
    pub(crate) key: String,
    pub(crate) name: String,
    pub(crate) class: EffectClass,
    pub(crate) request_hash: String,
}

impl EffectNote {
    pub(crate) fn of(record: &EffectRecord) -> Self {
        EffectNote {
            key: record.key.clone(),
            name: record.name.clone(),
            class: record.class,
            request_hash: record.request_hash.clone(),
        }
    }
}

/// Cancels a stored run of some graph (an `Engine` without its state type).
pub(crate) trait Control: Send + Sync {
    fn cancel(&self, run: String) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
}

/// A child a parent started: its run id, whether the parent's close cancels it, and how to cancel it.
type Started = (String, bool, Arc<dyn Control>);

/// The children the runs of one engine started in this process, by parent run (`crate::child`).
#[derive(Default)]
pub(crate) struct Children {
    by_parent: Mutex<HashMap<String, Vec<Started>>>,
}

impl Children {
    pub(crate) fn add(&self, parent: &str, child: &str, cancel: bool, control: Arc<dyn Control>) {
        let mut map = self.by_parent.lock().unwrap_or_else(|e| e.into_inner());
        let list = map.entry(parent.to_owned()).or_default();
        if !list.iter().any(|(c, ..)| c == child) {
            list.push((child.to_owned(), cancel, control));
        }
    }

    /// The parent ended: its children follow their policy, and the parent is forgotten.
    pub(crate) async fn parent_closed(&self, parent: &str) {
        let list = self.by_parent.lock().unwrap_or_else(|e| e.into_inner()).remove(parent);
        for (child, cancel, control) in list.unwrap_or_default() {
            if cancel {
                control.cancel(child).await;
            }
        }
    }
}

impl std::fmt::Debug for Children {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Children")
    }
}
