//! What the effect calls of a run's items reach: the store whose journal they use, or a replay's
//! record of the original run; and what an item tells the event log of the effects it used.

use std::collections::BTreeMap;
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
    pub(crate) children: crate::child::Children,
}

/// Wakes a run of an engine, without the engine's state type.
pub(crate) trait RunWaker: Send + Sync {
    /// Wakes `run` if what it waits for is due (an event just sent to it).
    fn wake(self: Arc<Self>, run: String) -> crate::node::BoxFuture<'static, ()>;
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
