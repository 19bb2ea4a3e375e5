//! The graphs a graphctl knows, by fingerprint: one trait object per graph, so the commands need no
//! state type. A run is matched to its graph by the fingerprint its row records; only that graph's
//! reducer can rebuild a state stored as deltas, and only its nodes can resume it.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use graph_runtime::engine::{AnyMigration, Engine, EngineBuilder, Migrated, ReplayCheck};
use graph_runtime::error::{Error, Result};
use graph_runtime::events::ChainKey;
use graph_runtime::graph::{Graph, GraphShape};
use graph_runtime::policy::EngineOptions;
use graph_runtime::state::Reducer;
use graph_runtime::store::{RunStatus, Store};

/// What `resume` reports.
pub(crate) struct Resumed {
    pub(crate) status: RunStatus,
    pub(crate) steps: u64,
    pub(crate) state: serde_json::Value,
}

/// A registered graph, without its state type.
#[async_trait]
pub(crate) trait Registered: Send + Sync {
    fn name(&self) -> &str;
    fn shape(&self) -> GraphShape;
    /// The state at `step`, as JSON (`None`: no such checkpoint).
    async fn state_at(
        &self,
        store: Arc<dyn Store>,
        run: &str,
        step: u64,
    ) -> Result<Option<serde_json::Value>>;
    /// `Engine::resume`.
    async fn resume(&self, store: Arc<dyn Store>, run: &str, key: Option<ChainKey>) -> Result<Resumed>;
    /// `Engine::resume_with_inputs`: answers the run's questions by id and continues it.
    async fn answer(
        &self,
        store: Arc<dyn Store>,
        run: &str,
        inputs: Vec<(String, serde_json::Value)>,
        key: Option<ChainKey>,
    ) -> Result<Resumed>;
    /// `Engine::fork`: a new run from `run`'s checkpoint `step`, left `Running` for `resume`.
    async fn fork(
        &self,
        store: Arc<dyn Store>,
        run: &str,
        step: u64,
        new_run: &str,
        key: Option<ChainKey>,
    ) -> Result<Resumed>;
    /// `Engine::resolve_effect`.
    async fn resolve_effect(
        &self,
        store: Arc<dyn Store>,
        run: &str,
        effect: &str,
        resolution: graph_runtime::store::Resolution,
    ) -> Result<()>;
    /// `Engine::resume_with` and `RunOptions::hand_back`: the run is left `Running` for a worker pool.
    async fn hand_back(&self, store: Arc<dyn Store>, run: &str, key: Option<ChainKey>) -> Result<Resumed>;
    /// `Engine::cancel_run`.
    async fn cancel(&self, store: Arc<dyn Store>, run: &str, key: Option<ChainKey>) -> Result<RunStatus>;
    /// The graph's version.
    fn version(&self) -> u32;
    /// `Engine::migrate` (or its dry run) of `run` to this graph's version, through `migrations`.
    async fn migrate(
        &self,
        store: Arc<dyn Store>,
        run: &str,
        migrations: &[AnyMigration],
        dry_run: bool,
    ) -> Result<Migrated>;
    /// `Engine::check_replay` of a run of this graph.
    async fn check_replay(&self, store: Arc<dyn Store>, run: &str) -> Result<ReplayCheck>;
}

struct Entry<S: Reducer> {
    graph: Graph<S>,
    options: EngineOptions,
}

impl<S: Reducer> Entry<S> {
    fn builder(&self, store: Arc<dyn Store>, key: Option<ChainKey>) -> EngineBuilder<S> {
        let builder = Engine::builder(self.graph.clone()).shared_store(store).options(self.options.clone());
        match key {
            Some(key) => builder.chain_key(key),
            None => builder,
        }
    }

    fn engine(&self, store: Arc<dyn Store>, key: Option<ChainKey>) -> Engine<S> {
        self.builder(store, key).build()
    }
}

fn to_json<S: Reducer>(run: &str, state: &S) -> Result<serde_json::Value> {
    serde_json::to_value(state).map_err(|source| Error::Serialization {
        run: run.to_owned(),
        what: "the state",
        source,
    })
}

/// What a call that drove `run` reports.
fn resumed<S: Reducer>(run: &str, out: graph_runtime::RunOutcome<S>) -> Result<Resumed> {
    Ok(Resumed { state: to_json(run, &out.state)?, status: out.status, steps: out.steps })
}

#[async_trait]
impl<S: Reducer> Registered for Entry<S> {
    fn name(&self) -> &str {
        self.graph.name()
    }

    fn shape(&self) -> GraphShape {
        self.graph.shape()
    }

    async fn state_at(
        &self,
        store: Arc<dyn Store>,
        run: &str,
        step: u64,
    ) -> Result<Option<serde_json::Value>> {
        match self.engine(store, None).state_at(run, step).await? {
            Some(state) => Ok(Some(to_json(run, &state)?)),
            None => Ok(None),
        }
    }

    async fn resume(&self, store: Arc<dyn Store>, run: &str, key: Option<ChainKey>) -> Result<Resumed> {
        let out = self.engine(store, key).resume(run).await?;
        resumed(run, out)
    }

    async fn answer(
        &self,
        store: Arc<dyn Store>,
        run: &str,
        inputs: Vec<(String, serde_json::Value)>,
        key: Option<ChainKey>,
    ) -> Result<Resumed> {
        let out = self.engine(store, key).resume_with_inputs(run, inputs).await?;
        resumed(run, out)
    }

    async fn fork(
        &self,
        store: Arc<dyn Store>,
        run: &str,
        step: u64,
        new_run: &str,
        key: Option<ChainKey>,
    ) -> Result<Resumed> {
        let out = self.engine(store, key).fork(run, step, new_run).await?;
        resumed(new_run, out)
    }

    async fn resolve_effect(
        &self,
        store: Arc<dyn Store>,
        run: &str,
        effect: &str,
        resolution: graph_runtime::store::Resolution,
    ) -> Result<()> {
        self.engine(store, None).resolve_effect(run, effect, resolution).await
    }

    async fn hand_back(&self, store: Arc<dyn Store>, run: &str, key: Option<ChainKey>) -> Result<Resumed> {
        let opts = graph_runtime::RunOptions::default().hand_back();
        let out = self.engine(store, key).resume_with(run, opts).await?;
        resumed(run, out)
    }

    async fn cancel(&self, store: Arc<dyn Store>, run: &str, key: Option<ChainKey>) -> Result<RunStatus> {
        self.engine(store, key).cancel_run(run).await
    }

    fn version(&self) -> u32 {
        self.graph.version()
    }

    async fn migrate(
        &self,
        store: Arc<dyn Store>,
        run: &str,
        migrations: &[AnyMigration],
        dry_run: bool,
    ) -> Result<Migrated> {
        let mut builder = self.builder(store, None);
        for m in migrations {
            builder = builder.migration(m.clone());
        }
        let engine = builder.build();
        let to = self.graph.version();
        match dry_run {
            true => engine.migrate_dry_run(run, to).await,
            false => engine.migrate(run, to).await,
        }
    }

    async fn check_replay(&self, store: Arc<dyn Store>, run: &str) -> Result<ReplayCheck> {
        self.engine(store, None).check_replay(run).await
    }
}

/// The registered graphs, by fingerprint, and the migrations between their versions.
#[derive(Default)]
pub(crate) struct Registry {
    graphs: BTreeMap<String, Box<dyn Registered>>,
    pub(crate) migrations: Vec<AnyMigration>,
}

impl Registry {
    pub(crate) fn insert<S: Reducer>(&mut self, graph: Graph<S>, options: EngineOptions) {
        self.graphs.insert(graph.fingerprint().to_owned(), Box::new(Entry { graph, options }));
    }

    /// The graph with this fingerprint.
    pub(crate) fn get(&self, fingerprint: &str) -> Option<&dyn Registered> {
        self.graphs.get(fingerprint).map(|g| &**g)
    }

    /// Version `version` of the graph named `name`.
    pub(crate) fn version_of(&self, name: &str, version: u32) -> Option<&dyn Registered> {
        self.graphs.values().find(|g| g.name() == name && g.version() == version).map(|g| &**g)
    }

    /// Whether a graph with this fingerprint is registered.
    pub(crate) fn has(&self, fingerprint: &str) -> bool {
        self.graphs.contains_key(fingerprint)
    }

    /// The graph with this name (the first by fingerprint when several share it).
    pub(crate) fn by_name(&self, name: &str) -> Option<&dyn Registered> {
        self.graphs.values().find(|g| g.name() == name).map(|g| &**g)
    }

    /// The registered graphs' names, by fingerprint.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.graphs.values().map(|g| g.name())
    }
}
