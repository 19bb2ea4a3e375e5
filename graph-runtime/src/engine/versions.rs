//! Versions of a graph served side by side, the migrations that move a run from one to the next, and
//! the replay check of stored runs against this build's code.
//!
//! A run records the fingerprint of the graph it runs (the version is part of it from 2 on). An engine
//! built on the newest version also serves older ones ([`EngineBuilder::serves`]): each is an engine
//! of its own graph over the same store, clock and options (its state type erased here as
//! [`Served`]), so a run continues on the version it started with while new runs start on the newest.
//! Every call that names a run finds its version first ([`Engine::route`]).
//!
//! A migration ([`Migration`]) moves a run to a later version at a step boundary: the state at its
//! latest checkpoint read as the old type and mapped to the new one, its frontier and waits mapped to
//! the new graph's nodes, committed as one checkpoint of the new version with a `MIGRATED` event. The
//! items the frontier carries over keep the step they were scheduled in (`WorkItem::origin_step`), so
//! their effect keys and child runs keep their identity: nothing they journaled runs again.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::core::{Engine, EngineBuilder};
use super::due::Timers;
use super::served::{Continue, Migrating, MigrationStep, Progress, Servable, Served};
use crate::env::{ReplayMode, RunEnv};
use crate::error::{Divergence, Error, Result};
use crate::events::{EventType, payload};
use crate::graph::Graph;
use crate::persist::{self, Chain, Draft, PendingStep};
use crate::run::RunOptions;
use crate::state::Reducer;
use crate::store::{
    Checkpoint, CommitOutcome, Interrupt, RunFilter, RunStatus, Store, WaitingJoin, WorkItem,
};

/// A typed step from the runs of one version of a graph (state `A`) to the next (state `B`): the
/// state mapped by a function, and the nodes a parked run may stand at mapped to the new graph's.
/// A node of the old graph that the new one has under the same name maps to itself; a renamed or
/// removed node needs [`Migration::node`] (where its items go) or [`Migration::drop_node`] (its items
/// end there).
///
/// Give it to [`EngineBuilder::migration`]; `#[graph(version = N, migrate_from = m, migrate = f)]`
/// generates one as `migration()`.
pub struct Migration<A: Reducer, B: Reducer> {
    from: Graph<A>,
    to: Graph<B>,
    state: StateMap<A, B>,
    /// Old node → new node (`None`: its items are dropped).
    nodes: BTreeMap<String, Option<String>>,
}

type StateMap<A, B> = Arc<dyn Fn(A) -> std::result::Result<B, String> + Send + Sync>;

impl<A: Reducer, B: Reducer> Migration<A, B> {
    /// The migration from `from`'s runs to `to`'s, mapping the state with `state`.
    ///
    /// # Panics
    ///
    /// When `to`'s version is not above `from`'s (a migration goes forward).
    pub fn new(from: Graph<A>, to: Graph<B>, state: impl Fn(A) -> B + Send + Sync + 'static) -> Self {
        Self::try_new(from, to, move |a| Ok(state(a)))
    }

    /// [`Migration::new`] with a mapping that may refuse a state (its message is the migration's
    /// error; the run is unchanged).
    ///
    /// # Panics
    ///
    /// As [`Migration::new`].
    pub fn try_new(
        from: Graph<A>,
        to: Graph<B>,
        state: impl Fn(A) -> std::result::Result<B, String> + Send + Sync + 'static,
    ) -> Self {
        assert!(
            to.version() > from.version(),
            "a migration goes to a later version: graph `{}` version {} → `{}` version {}",
            from.name(),
            from.version(),
            to.name(),
            to.version()
        );
        Migration { from, to, state: Arc::new(state), nodes: BTreeMap::new() }
    }

    /// Items of the old graph's node `old` (renamed or removed) continue at the new graph's `new`.
    #[must_use]
    pub fn node(mut self, old: &str, new: &str) -> Self {
        self.nodes.insert(old.to_owned(), Some(new.to_owned()));
        self
    }

    /// Items of the old graph's node `old` are dropped: their paths end at the migration.
    #[must_use]
    pub fn drop_node(mut self, old: &str) -> Self {
        self.nodes.insert(old.to_owned(), None);
        self
    }

    /// The version it migrates from.
    pub fn from_version(&self) -> u32 {
        self.from.version()
    }

    /// The version it migrates to.
    pub fn to_version(&self) -> u32 {
        self.to.version()
    }

    /// The graph it migrates from.
    pub fn from_graph(&self) -> &Graph<A> {
        &self.from
    }

    /// The graph it migrates to.
    pub fn to_graph(&self) -> &Graph<B> {
        &self.to
    }
}

impl<A: Reducer, B: Reducer> Clone for Migration<A, B> {
    fn clone(&self) -> Self {
        Migration {
            from: self.from.clone(),
            to: self.to.clone(),
            state: self.state.clone(),
            nodes: self.nodes.clone(),
        }
    }
}

/// A [`Migration`] without its state types, for code that keeps migrations of several versions
/// together (a graphctl registering them). Every `Migration` converts into one.
#[derive(Clone)]
pub struct AnyMigration(Arc<dyn MigrationStep>);

impl<A: Reducer, B: Reducer> From<Migration<A, B>> for AnyMigration {
    fn from(m: Migration<A, B>) -> Self {
        AnyMigration(Arc::new(m))
    }
}

impl AnyMigration {
    /// The version it migrates from, and its graph's fingerprint.
    pub fn from_version(&self) -> (u32, &str) {
        self.0.from()
    }

    /// The version it migrates to, and its graph's fingerprint.
    pub fn to_version(&self) -> (u32, &str) {
        self.0.to()
    }
}

impl std::fmt::Debug for AnyMigration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnyMigration").field("from", &self.0.from()).field("to", &self.0.to()).finish()
    }
}

#[async_trait]
impl<A: Reducer, B: Reducer> MigrationStep for Migration<A, B> {
    fn from(&self) -> (u32, &str) {
        (self.from.version(), self.from.fingerprint())
    }

    fn to(&self) -> (u32, &str) {
        (self.to.version(), self.to.fingerprint())
    }

    async fn load(&self, store: &dyn Store, cp: &Checkpoint) -> Result<serde_json::Value> {
        let (state, _) = persist::load_state::<A>(store, cp).await?;
        serde_json::to_value(&state).map_err(|source| Error::Serialization {
            run: cp.run_id.to_string(),
            what: "the state",
            source,
        })
    }

    fn map_state(&self, run: &str, state: serde_json::Value) -> Result<serde_json::Value, String> {
        let old: A = serde_json::from_value(state).map_err(|e| {
            format!("its state does not read as version {}'s state type: {e}", self.from.version())
        })?;
        let new = (self.state)(old)?;
        serde_json::to_value(&new)
            .map_err(|e| format!("run `{run}`: the mapped state does not serialize: {e}"))
    }

    fn map_node(&self, node: &str) -> Result<Option<String>, String> {
        let target = match self.nodes.get(node) {
            Some(mapped) => mapped.clone(),
            None => Some(node.to_owned()),
        };
        match target {
            Some(t) if self.to.node_index(&t).is_none() => Err(match self.nodes.contains_key(node) {
                true => format!(
                    "the migration maps node `{node}` to `{t}`, which version {} does not have",
                    self.to.version()
                ),
                false => format!(
                    "the run stands at node `{node}`, which version {} does not have: map it with \
                     `.node(\"{node}\", \"<new node>\")` or `.drop_node(\"{node}\")`",
                    self.to.version()
                ),
            }),
            other => Ok(other),
        }
    }
}

impl<T: Reducer> Servable for Graph<T> {
    fn fingerprint(&self) -> &str {
        Graph::fingerprint(self)
    }

    fn version(&self) -> u32 {
        Graph::version(self)
    }

    fn serve(&self, env: &Arc<RunEnv>, timers: &Arc<Timers>) -> Arc<dyn Served> {
        Arc::new(Engine::nested_with_timers(self.clone(), env, timers.clone()))
    }
}

#[async_trait]
impl<S: Reducer> Served for Engine<S> {
    fn fingerprint(&self) -> &str {
        self.inner.graph.fingerprint()
    }

    fn version(&self) -> u32 {
        self.inner.graph.version()
    }

    fn name(&self) -> &str {
        self.inner.graph.name()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn cancel_local(&self, run_id: &str) -> bool {
        self.cancel(run_id)
    }

    fn drives(&self, run_id: &str) -> bool {
        self.inner.active.lock().unwrap_or_else(|e| e.into_inner()).contains_key(run_id)
    }

    async fn continue_run(&self, run_id: &str, how: Continue, opts: RunOptions) -> Result<Option<Progress>> {
        let out = match how {
            Continue::Wake => self.try_wake(run_id, opts, false).await?,
            Continue::Claimed => Some(self.continue_claimed(run_id, opts).await?),
        };
        Ok(out.map(|o| Progress { status: o.status, steps: o.steps }))
    }

    async fn cancel_run(&self, run_id: &str) -> Result<RunStatus> {
        Engine::cancel_run(self, run_id).await
    }

    async fn replay_strict(&self, run_id: &str) -> Result<u64> {
        Ok(self.replay(run_id, ReplayMode::Strict).await?.steps)
    }

    async fn commit_migration(&self, m: Migrating) -> Result<Checkpoint> {
        let Migrating { info, cp: old, state, frontier, waiting, status, pending, from, dry_run } = m;
        let to = self.inner.graph.version();
        let refuse = |reason: String| Error::Migration { run: info.run_id.clone(), from, to, reason };
        let state: S = serde_json::from_value(state).map_err(|e| {
            refuse(format!("the mapped state does not read as version {to}'s state type: {e}"))
        })?;
        let step = old.step + 1;
        let at_ms = self.step_time(step, old.timestamp_ms);
        let draft = Draft {
            run_id: &old.run_id,
            step,
            state: &state,
            deltas: None,
            frontier,
            waiting,
            outbox: Vec::new(),
            seed: old.rng_seed,
            label: old.label.clone(),
            fingerprint: self.inner.graph.fingerprint_arc(),
            at_ms,
            event_head: info.event_head.clone(),
        };
        let cp = persist::draft(draft, &mut Chain::default())?;
        if dry_run {
            return Ok(cp);
        }
        let migrated = payload!({
            "step": step,
            "from_version": from,
            "to_version": to,
            "from": info.graph_fingerprint,
            "to": self.inner.graph.fingerprint(),
            "state_hash": cp.state_hash,
            "idempotency_key": cp.idempotency_key,
        });
        let (events, _) = self.chain(info.event_head.as_ref(), [(EventType::Migrated, migrated)], at_ms);
        let store = &*self.inner.store;
        match store.save_checkpoint(&cp, &events, &status, info.version).await? {
            CommitOutcome::Committed { version } => {
                // The due times the waits carried over asked for, kept for waits asked again (the
                // commit cleared the old step's pending record). Lost to a crash right here, a wait
                // asked again counts from then; the status keeps every due time either way.
                if let Some(pending) = pending.filter(|p| !p.items.is_empty()) {
                    let bytes = PendingStep { step, ..pending }.encode();
                    let _ = store.set_status(&info.run_id, &status, &[], Some(&bytes), version).await?;
                }
                tracing::info!(run = %info.run_id, from, to, step, "run migrated");
                Ok(cp)
            }
            other => Err(super::drive::version_conflict(&info.run_id, info.version, &other)),
        }
    }
}

/// Which engine a run's calls go to.
pub(super) enum Route<S: Reducer> {
    /// This engine's own graph (or a run it does not know: its own checks report it).
    Own,
    /// A served version with this engine's state type.
    Same(Engine<S>),
    /// A served version with another state type.
    Other(Arc<dyn Served>),
}

/// What [`Engine::migrate`] did (or, dry, would do).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Migrated {
    /// The run.
    pub run_id: String,
    /// The version it ran.
    pub from: u32,
    /// The version it runs now.
    pub to: u32,
    /// The checkpoint the migration committed (its step is the old latest + 1).
    pub step: u64,
    /// The state before, as JSON.
    pub state_before: serde_json::Value,
    /// The state after, as JSON.
    pub state_after: serde_json::Value,
    /// The frontier's nodes before and after.
    pub frontier: (Vec<String>, Vec<String>),
    /// Nothing was written (`migrate_dry_run`).
    pub dry_run: bool,
}

/// What the replay check found for one run ([`Engine::check_replay`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ReplayVerdict {
    /// This build's code re-executed every recorded step to the same checkpoints and effect calls.
    Same {
        /// The steps replayed.
        steps: u64,
    },
    /// The first difference between the recording and this build's code.
    Diverged(Divergence),
    /// No version this engine serves has the run's fingerprint: this build cannot continue it.
    NotServed {
        /// The version the run's fingerprint names.
        version: u32,
        /// The run's fingerprint.
        fingerprint: String,
    },
    /// The run was migrated at this step: its history spans two versions and is not replayed.
    Migrated {
        /// The migration's step.
        step: u64,
    },
    /// The replay could not run (a first checkpoint pruned, a store error).
    Failed(String),
}

/// One run's replay check.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ReplayCheck {
    /// The run.
    pub run_id: String,
    /// The version the run runs.
    pub version: u32,
    /// What the check found.
    pub verdict: ReplayVerdict,
}

impl<S: Reducer> Engine<S> {
    /// The engine of served version `version` with state type `T` (this engine's own version
    /// included): `None` when this engine does not serve that version, or serves it with another
    /// state type.
    pub fn version<T: Reducer>(&self, version: u32) -> Option<Engine<T>> {
        if self.inner.graph.version() == version {
            return (self as &dyn Any).downcast_ref::<Engine<T>>().cloned();
        }
        let served = self.inner.versions.iter().find(|v| v.version() == version)?;
        served.as_any().downcast_ref::<Engine<T>>().cloned()
    }

    /// The versions this engine serves, its own last.
    pub fn versions(&self) -> Vec<u32> {
        let mut all: Vec<u32> = self.inner.versions.iter().map(|v| v.version()).collect();
        all.push(self.inner.graph.version());
        all
    }

    /// The served version with this fingerprint, this engine's own included.
    fn served(&self, fingerprint: &str) -> Option<&dyn Served> {
        if self.inner.graph.fingerprint() == fingerprint {
            return Some(self);
        }
        self.inner.versions.iter().find(|v| v.fingerprint() == fingerprint).map(|v| &**v)
    }

    /// Where the calls for `run_id` go: this engine, or the served version its row names.
    pub(super) async fn route(&self, run_id: &str) -> Result<Route<S>> {
        if self.inner.versions.is_empty() {
            return Ok(Route::Own);
        }
        let Some(info) = self.inner.store.run_info(run_id).await? else { return Ok(Route::Own) };
        Ok(self.route_of(&info.graph_fingerprint))
    }

    fn route_of(&self, fingerprint: &str) -> Route<S> {
        if fingerprint == self.inner.graph.fingerprint() {
            return Route::Own;
        }
        match self.inner.versions.iter().find(|v| v.fingerprint() == fingerprint) {
            Some(v) => match v.as_any().downcast_ref::<Engine<S>>() {
                Some(same) => Route::Same(same.clone()),
                None => Route::Other(v.clone()),
            },
            None => Route::Own,
        }
    }

    /// The served version with this engine's state type that runs `run_id` (`None`: this engine, or
    /// a run it does not know).
    ///
    /// # Errors
    ///
    /// [`Error::OtherVersion`] for a run of a served version with another state type; store errors.
    pub(super) async fn typed_route(&self, run_id: &str) -> Result<Option<Engine<S>>> {
        match self.route(run_id).await? {
            Route::Own => Ok(None),
            Route::Same(engine) => Ok(Some(engine)),
            Route::Other(served) => Err(self.other_version(run_id, &*served)),
        }
    }

    /// The typed error of a run served with another state type.
    pub(super) fn other_version(&self, run_id: &str, served: &dyn Served) -> Error {
        Error::OtherVersion {
            run: run_id.to_owned(),
            graph: served.name().to_owned(),
            version: served.version(),
            current: self.inner.graph.version(),
        }
    }

    /// Continues a run on whichever served version it runs (the timer service, a worker, a child's
    /// wake): no state type needed.
    pub(crate) async fn continue_any(
        &self,
        run_id: &str,
        how: Continue,
        opts: RunOptions,
    ) -> Result<Option<Progress>> {
        match self.route(run_id).await? {
            Route::Own => Served::continue_run(self, run_id, how, opts).await,
            Route::Same(engine) => Served::continue_run(&engine, run_id, how, opts).await,
            Route::Other(served) => served.continue_run(run_id, how, opts).await,
        }
    }

    /// Cancels a run driven here on any served version; false if none drives it.
    pub(super) fn cancel_any(&self, run_id: &str) -> bool {
        self.inner.versions.iter().any(|v| v.cancel_local(run_id))
    }

    /// The fingerprints of every version this engine serves, its own first.
    pub(crate) fn served_fingerprints(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.inner.graph.fingerprint())
            .chain(self.inner.versions.iter().map(|v| v.fingerprint()))
    }

    /// Moves a stored run to version `to` of its graph, at its latest step boundary: its state read
    /// as its version's type and mapped by each migration of the chain from its version to `to`
    /// ([`EngineBuilder::migration`]), its frontier, joins and waits mapped to the new graph's
    /// nodes, committed atomically as checkpoint `latest + 1` of version `to` with a `MIGRATED`
    /// event, under the run row's version check. A parked run stays parked (same questions, ids and
    /// due times); a run `Running` elsewhere loses its next commit to this one.
    ///
    /// # Errors
    ///
    /// [`Error::Migration`] (the run is unchanged) when no chain of migrations leads from the run's
    /// version to `to`, `to` is not served here, the run is completed, cancelled or driven by this
    /// engine, its latest step has finished items or partial answers waiting to be merged (answer
    /// its questions first), its state does not read as the old type or the mapped one as the new,
    /// or the run stands at a node with no mapping; [`Error::RunNotFound`]; `VersionConflict` when
    /// the run moved meanwhile; store errors.
    pub async fn migrate(&self, run_id: &str, to: u32) -> Result<Migrated> {
        self.migrate_inner(run_id, to, false).await
    }

    /// [`Engine::migrate`] without writing: what it would commit (the errors it would give).
    ///
    /// # Errors
    ///
    /// As [`Engine::migrate`].
    pub async fn migrate_dry_run(&self, run_id: &str, to: u32) -> Result<Migrated> {
        self.migrate_inner(run_id, to, true).await
    }

    async fn migrate_inner(&self, run_id: &str, to: u32, dry_run: bool) -> Result<Migrated> {
        let store = &*self.inner.store;
        let info =
            store.run_info(run_id).await?.ok_or_else(|| Error::RunNotFound { run: run_id.to_owned() })?;
        let from = graph_core::fingerprint_version(&info.graph_fingerprint);
        let refuse = |reason: String| Error::Migration { run: run_id.to_owned(), from, to, reason };
        // The chain of migrations from the run's fingerprint to version `to`.
        let mut chain: Vec<&Arc<dyn MigrationStep>> = Vec::new();
        let mut at = info.graph_fingerprint.as_str();
        while graph_core::fingerprint_version(at) != to {
            let next = self.inner.migrations.iter().find(|m| m.from().1 == at && m.to().0 <= to);
            let Some(next) = next.filter(|_| chain.len() <= self.inner.migrations.len()) else {
                return Err(refuse(match chain.is_empty() && graph_core::fingerprint_version(at) > to {
                    true => "migrations go to later versions only".into(),
                    false => format!(
                        "no migration starts from version {} (fingerprint {at}); give the engine one with \
                         `EngineBuilder::migration`",
                        graph_core::fingerprint_version(at)
                    ),
                }));
            };
            chain.push(next);
            at = next.to().1;
        }
        if chain.is_empty() {
            return Err(refuse(format!("it already runs version {to}")));
        }
        let Some(target) = self.served(at) else {
            return Err(refuse(format!("this engine does not serve version {to} (fingerprint {at})")));
        };
        match &info.status {
            RunStatus::Completed | RunStatus::Cancelled => {
                return Err(refuse(format!(
                    "it is {}; a finished run keeps its version",
                    info.status.as_str()
                )));
            }
            _ if self.drives_any(run_id) => {
                return Err(refuse("this engine is driving it; migrate it once it parks or stops".into()));
            }
            _ => {}
        }
        let cp = store.latest(run_id).await?.ok_or_else(|| Error::RunNotFound { run: run_id.to_owned() })?;
        if cp.frontier.is_empty() {
            return Err(refuse("it has reached END".into()));
        }
        let pending = self.load_pending(run_id, cp.step).await?;
        if let Some(p) = &pending
            && p.items.iter().any(|i| i.done.is_some() || !i.inputs.is_empty())
        {
            return Err(refuse(format!(
                "step {} has finished items or given answers not yet merged (of the old version's types); \
                 answer its remaining questions, or let it reach its next step, then migrate",
                cp.step
            )));
        }
        let state_before = chain[0].load(store, &cp).await?;
        let mut state = state_before.clone();
        let mut frontier = cp.frontier.clone();
        let mut waiting = cp.waiting.clone();
        let mut waits: Vec<Interrupt> = info.status.waits().to_vec();
        for m in &chain {
            state = m.map_state(run_id, state).map_err(refuse)?;
            frontier = map_items(frontier, cp.step, &***m).map_err(refuse)?;
            waiting = map_joins(waiting, &***m).map_err(refuse)?;
            waits = map_waits(waits, cp.step + 1, &***m).map_err(refuse)?;
        }
        // The pending record keeps only the due times of waits still standing.
        let pending = pending.map(|p| PendingStep {
            step: cp.step + 1,
            items: p.items.into_iter().filter(|i| waits.iter().any(|w| w.path == i.path)).collect(),
        });
        let status = match &info.status {
            RunStatus::Interrupted(_) if !waits.is_empty() => RunStatus::Interrupted(waits),
            RunStatus::Waiting(_) if !waits.is_empty() => RunStatus::Waiting(waits),
            // Every wait was on a dropped node: the run goes on.
            RunStatus::Interrupted(_) | RunStatus::Waiting(_) => RunStatus::Running,
            other => other.clone(),
        };
        let before: Vec<String> = cp.frontier.iter().map(|w| w.node.to_string()).collect();
        let after: Vec<String> = frontier.iter().map(|w| w.node.to_string()).collect();
        let migrating = Migrating {
            info,
            cp,
            state: state.clone(),
            frontier,
            waiting,
            status: status.clone(),
            pending,
            from,
            dry_run,
        };
        let committed = target.commit_migration(migrating).await?;
        if !dry_run && let Some(at) = status.wake_at_ms() {
            self.inner.timers.note(at, &run_id.into());
        }
        Ok(Migrated {
            run_id: run_id.to_owned(),
            from,
            to,
            step: committed.step,
            state_before,
            state_after: state,
            frontier: (before, after),
            dry_run,
        })
    }

    /// Whether this engine (any served version) drives the run now.
    fn drives_any(&self, run_id: &str) -> bool {
        Served::drives(self, run_id) || self.inner.versions.iter().any(|v| v.drives(run_id))
    }

    /// Re-executes a stored run with this build's code in strict replay mode, on the version the
    /// run runs: the first step whose checkpoint (state, frontier) or effect call differs from the
    /// recording, or why it cannot be checked. Writes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::RunNotFound`] and store errors reading the run; everything about the replay itself
    /// is in the verdict.
    pub async fn check_replay(&self, run_id: &str) -> Result<ReplayCheck> {
        let store = &*self.inner.store;
        let info =
            store.run_info(run_id).await?.ok_or_else(|| Error::RunNotFound { run: run_id.to_owned() })?;
        let version = graph_core::fingerprint_version(&info.graph_fingerprint);
        let check = |verdict| ReplayCheck { run_id: run_id.to_owned(), version, verdict };
        let Some(served) = self.served(&info.graph_fingerprint) else {
            return Ok(check(ReplayVerdict::NotServed { version, fingerprint: info.graph_fingerprint }));
        };
        // A migrated run's first checkpoints are another version's (step 0 read alone in the common
        // case; the history only when step 0 was pruned or is another version's).
        let first = match store.load_checkpoint(run_id, 0).await? {
            Some(cp) => Some(cp),
            None => match store.history(run_id).await?.first() {
                Some(meta) => store.load_checkpoint(run_id, meta.step).await?,
                None => None,
            },
        };
        if let Some(first) = first.filter(|cp| *cp.graph_fingerprint != *info.graph_fingerprint) {
            let kept = store.checkpoints(run_id, first.step, info.latest_step).await?;
            let migrated_at = kept
                .iter()
                .find(|cp| *cp.graph_fingerprint == *info.graph_fingerprint)
                .map_or(first.step, |cp| cp.step);
            return Ok(check(ReplayVerdict::Migrated { step: migrated_at }));
        }
        Ok(check(match served.replay_strict(run_id).await {
            Ok(steps) => ReplayVerdict::Same { steps },
            Err(Error::ReplayMismatch { step, node, call, expected, found, .. }) => {
                ReplayVerdict::Diverged(Divergence { step, node, call, expected, found })
            }
            Err(e) => ReplayVerdict::Failed(e.to_string()),
        }))
    }

    /// [`Engine::check_replay`] of every stored run `filter` selects, in run-id order.
    ///
    /// # Errors
    ///
    /// Store errors listing or reading the runs.
    pub async fn check_replays(&self, filter: &RunFilter) -> Result<Vec<ReplayCheck>> {
        let mut out = Vec::new();
        for info in self.inner.store.list_runs(filter).await? {
            out.push(self.check_replay(&info.run_id).await?);
        }
        Ok(out)
    }
}

/// Panics unless `graph` is an older version of `own` not yet in `served` (see
/// [`EngineBuilder::serves`]).
pub(crate) fn check_served<S: Reducer, T: Reducer>(
    own: &Graph<S>,
    served: &[Arc<dyn Servable>],
    graph: &Graph<T>,
) {
    assert!(
        graph.name() == own.name(),
        "serves: `{}` is another graph than `{}`; serve older versions of the engine's own graph",
        graph.name(),
        own.name()
    );
    assert!(
        graph.version() < own.version(),
        "serves: version {} of `{}` is not older than the engine's own (version {}); build the engine on \
         the newest version",
        graph.version(),
        own.name(),
        own.version()
    );
    assert!(
        !served.iter().any(|s| s.version() == graph.version()),
        "serves: version {} of `{}` is served twice",
        graph.version(),
        own.name()
    );
}

/// The frontier `items` of step `step` mapped through `m`: renamed, dropped, each keeping the step
/// it was first scheduled in.
fn map_items(items: Vec<WorkItem>, step: u64, m: &dyn MigrationStep) -> Result<Vec<WorkItem>, String> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        if let Some(node) = m.map_node(&item.node)? {
            out.push(WorkItem {
                node: node.into(),
                origin_step: Some(item.origin_step.unwrap_or(step)),
                ..item
            });
        }
    }
    Ok(out)
}

/// Waiting joins mapped through `m` (a dropped join node drops the join; a dropped predecessor its
/// arrival).
fn map_joins(joins: Vec<WaitingJoin>, m: &dyn MigrationStep) -> Result<Vec<WaitingJoin>, String> {
    let mut out = Vec::with_capacity(joins.len());
    for join in joins {
        let Some(node) = m.map_node(&join.node)? else { continue };
        let mut arrived = Vec::with_capacity(join.arrived.len());
        for a in &join.arrived {
            if let Some(a) = m.map_node(a)? {
                arrived.push(a.into());
            }
        }
        out.push(WaitingJoin { node: node.into(), arrived, ..join });
    }
    Ok(out)
}

/// The waits of a parked run mapped through `m`, now of step `step`.
fn map_waits(waits: Vec<Interrupt>, step: u64, m: &dyn MigrationStep) -> Result<Vec<Interrupt>, String> {
    let mut out = Vec::with_capacity(waits.len());
    for w in waits {
        if let Some(node) = m.map_node(&w.node)? {
            out.push(Interrupt { node, step, ..w });
        }
    }
    Ok(out)
}

impl<S: Reducer> EngineBuilder<S> {
    /// Serves an older version of the graph beside the engine's own: runs recorded with `graph`'s
    /// fingerprint continue on it (resumed, woken, answered, claimed by a worker), while new runs
    /// start on the engine's own graph, the newest. A call typed by the engine's state
    /// (`resume`, `resume_with_input`, `outcome`, ...) on a run of a version with another state type
    /// is [`Error::OtherVersion`]; [`Engine::version`] gives that version's typed engine.
    ///
    /// # Panics
    ///
    /// When `graph` is another graph (another name), is not older than the engine's own, or is
    /// served twice.
    #[must_use]
    pub fn serves<T: Reducer>(mut self, graph: Graph<T>) -> Self {
        check_served(&self.graph, &self.served, &graph);
        self.served.push(Arc::new(graph));
        self
    }

    /// [`EngineBuilder::serves`] of a graph kept without its state type (a worker's).
    pub(crate) fn serves_erased(mut self, graph: Arc<dyn Servable>) -> Self {
        self.served.push(graph);
        self
    }

    /// Adds a migration [`Engine::migrate`] may apply (a chain of them moves a run several versions).
    /// Its target version must be served by the engine (its own or [`EngineBuilder::serves`]) when a
    /// run is migrated.
    #[must_use]
    pub fn migration(mut self, migration: impl Into<AnyMigration>) -> Self {
        self.migrations.push(migration.into().0);
        self
    }
}
