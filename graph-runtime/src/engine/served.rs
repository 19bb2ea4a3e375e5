//! What an engine needs to know of the older versions it serves and of the migrations it may apply,
//! without their state types: the traits `versions.rs` implements for `Engine<T>`, `Graph<T>` and
//! `Migration<A, B>`, and what passes between them.

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;

use super::due::Timers;
use crate::env::RunEnv;
use crate::error::Result;
use crate::persist::PendingStep;
use crate::run::RunOptions;
use crate::store::{Checkpoint, RunInfo, RunStatus, Store, WaitingJoin, WorkItem};

/// A migration without its state types.
#[async_trait]
pub(crate) trait MigrationStep: Send + Sync {
    fn from(&self) -> (u32, &str);
    fn to(&self) -> (u32, &str);
    /// The state at `cp`, rebuilt with the old graph's reducer, as JSON.
    async fn load(&self, store: &dyn Store, cp: &Checkpoint) -> Result<serde_json::Value>;
    /// The old version's state (JSON) mapped to the new one's (JSON).
    fn map_state(&self, run: &str, state: serde_json::Value) -> Result<serde_json::Value, String>;
    /// Where the old node's items go: `Ok(Some(new))`, `Ok(None)` (dropped), or why there is no
    /// mapping.
    fn map_node(&self, node: &str) -> Result<Option<String>, String>;
}

/// How [`Served::continue_run`] continues a run.
pub(crate) enum Continue {
    /// Wakes it if anything it waits for is due (`None` when nothing is).
    Wake,
    /// A worker claimed it (`Engine::continue_claimed`).
    Claimed,
}

/// Where a continued run stands.
pub(crate) struct Progress {
    pub(crate) status: RunStatus,
    pub(crate) steps: u64,
}

/// What a migration commits, computed by the engine that migrates, committed by the target version's.
pub(crate) struct Migrating {
    pub(crate) info: RunInfo,
    pub(crate) cp: Checkpoint,
    pub(crate) state: serde_json::Value,
    pub(crate) frontier: Vec<WorkItem>,
    pub(crate) waiting: Vec<WaitingJoin>,
    pub(crate) status: RunStatus,
    pub(crate) pending: Option<PendingStep>,
    pub(crate) from: u32,
    pub(crate) dry_run: bool,
}

/// A version an engine serves, its state type erased: an engine of that graph over the serving
/// engine's env.
#[async_trait]
pub(crate) trait Served: Send + Sync {
    fn fingerprint(&self) -> &str;
    fn version(&self) -> u32;
    fn name(&self) -> &str;
    /// The engine, for a typed caller to take back (`Engine<T>`).
    fn as_any(&self) -> &dyn Any;
    /// `Engine::cancel` on this version's registry.
    fn cancel_local(&self, run_id: &str) -> bool;
    /// Whether this version's engine drives the run now.
    fn drives(&self, run_id: &str) -> bool;
    async fn continue_run(&self, run_id: &str, how: Continue, opts: RunOptions) -> Result<Option<Progress>>;
    /// `Engine::cancel_run`.
    async fn cancel_run(&self, run_id: &str) -> Result<RunStatus>;
    /// A strict replay of the run; the steps replayed.
    async fn replay_strict(&self, run_id: &str) -> Result<u64>;
    /// Commits (or, dry, checks) a migration to this version; the checkpoint it commits.
    async fn commit_migration(&self, m: Migrating) -> Result<Checkpoint>;
}

/// A graph an engine builder was asked to serve, waiting for the env to build its engine on.
pub(crate) trait Servable: Send + Sync {
    fn fingerprint(&self) -> &str;
    fn version(&self) -> u32;
    /// An engine of this graph over `env`, noting due times in the serving engine's `timers`.
    fn serve(&self, env: &Arc<RunEnv>, timers: &Arc<Timers>) -> Arc<dyn Served>;
}
