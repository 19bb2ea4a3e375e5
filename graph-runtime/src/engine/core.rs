//! The engine and its configuration: [`Engine`] (a graph, a store, options and what the runs share) and
//! [`EngineBuilder`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, SystemClock};
use crate::env::{RunEnv, RunWaker};
use crate::events::ChainKey;
use crate::graph::Graph;
use crate::policy::EngineOptions;
use crate::state::Reducer;
use crate::store::{MemoryStore, RetryStore, Store};

use super::due::Timers;
use super::served::{Continue, MigrationStep, Servable, Served};

/// Runs one graph against one store. Cheap to clone; clones share the store, the admission queue and
/// the registry of active runs.
pub struct Engine<S: Reducer> {
    pub(super) inner: Arc<Inner<S>>,
}

impl<S: Reducer> Clone for Engine<S> {
    fn clone(&self) -> Self {
        Engine { inner: self.inner.clone() }
    }
}

/// A run this engine drives: its cancellation token, and whether a continuation of it (a wake, a
/// resume) came while it was driven and found it busy, to be tried again once the driver stops (so a
/// wake is never lost to a race between two continuations in one process).
pub(super) struct Active {
    pub(super) token: CancellationToken,
    pub(super) rewake: bool,
}

/// What an engine's clones share.
pub(super) struct Inner<S: Reducer> {
    pub(super) graph: Graph<S>,
    pub(super) store: Arc<dyn Store>,
    /// What effect calls reach: the store's journal, or a replay's recording.
    pub(super) env: Arc<RunEnv>,
    pub(super) options: EngineOptions,
    pub(super) admission: Arc<Semaphore>,
    /// The runs this engine drives, with their cancellation tokens.
    pub(super) active: Mutex<HashMap<String, Active>>,
    /// The key of the keyed event chain, when there is one.
    pub(super) chain_key: Option<ChainKey>,
    /// The runs this engine knows to be due at a time (its timer service's index), shared with the
    /// older versions it serves (a run one of them parks is woken by this engine's service).
    pub(super) timers: Arc<Timers>,
    /// The older versions of the graph it serves (`EngineBuilder::serves`), oldest first.
    pub(super) versions: Vec<Arc<dyn Served>>,
    /// The migrations `Engine::migrate` may apply.
    pub(super) migrations: Vec<Arc<dyn MigrationStep>>,
}

impl<S: Reducer> Engine<S> {
    /// Starts configuring an engine for `graph`.
    pub fn builder(graph: Graph<S>) -> EngineBuilder<S> {
        EngineBuilder::new(graph)
    }

    /// An engine of `graph` over `env` as it is: its store (used as given, not wrapped again), clock,
    /// options and chain key; an admission queue, registry and timer index of its own. A subgraph's
    /// runs use one over the parent engine's env (the parent's item holds one of the parent's permits
    /// while the subgraph runs); a replay one over a scratch store and the recording.
    pub(crate) fn nested(graph: Graph<S>, env: &Arc<RunEnv>) -> Self {
        Self::nested_with_timers(graph, env, Arc::default())
    }

    /// [`Engine::nested`] noting due times in `timers` (a served version: the serving engine's index).
    pub(super) fn nested_with_timers(graph: Graph<S>, env: &Arc<RunEnv>, timers: Arc<Timers>) -> Self {
        let options = env.options.clone();
        Engine {
            inner: Arc::new(Inner {
                graph,
                store: env.store.clone(),
                env: env.clone(),
                admission: Arc::new(Semaphore::new(options.queue_depth)),
                options,
                active: Mutex::new(HashMap::new()),
                chain_key: env.chain_key.clone(),
                timers,
                versions: Vec::new(),
                migrations: Vec::new(),
            }),
        }
    }

    /// The graph.
    pub fn graph(&self) -> &Graph<S> {
        &self.inner.graph
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The options in force.
    pub fn options(&self) -> &EngineOptions {
        &self.inner.options
    }

    /// The clock the engine reads for checkpoint times, sleeps and deadlines.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.env.clock
    }

    /// Cancels a run this engine is driving; false if it is not active here.
    pub fn cancel(&self, run_id: &str) -> bool {
        let active = self.inner.active.lock().unwrap_or_else(|e| e.into_inner());
        active.get(run_id).map(|a| a.token.cancel()).is_some() || self.cancel_any(run_id)
    }
}

/// Configures an [`Engine`].
pub struct EngineBuilder<S: Reducer> {
    pub(super) graph: Graph<S>,
    store: Option<Arc<dyn Store>>,
    options: EngineOptions,
    chain_key: Option<ChainKey>,
    clock: Option<Arc<dyn Clock>>,
    /// Older versions to serve (`serves`).
    pub(super) served: Vec<Arc<dyn Servable>>,
    pub(super) migrations: Vec<Arc<dyn MigrationStep>>,
}

impl<S: Reducer> EngineBuilder<S> {
    pub(super) fn new(graph: Graph<S>) -> Self {
        EngineBuilder {
            graph,
            store: None,
            options: EngineOptions::default(),
            chain_key: None,
            clock: None,
            served: Vec::new(),
            migrations: Vec::new(),
        }
    }

    /// The clock (default: [`SystemClock`]); a [`crate::TestClock`] lets a test move time itself.
    /// Every engine and worker of one store should read the same time.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// A clock shared with other engines.
    pub fn shared_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The store (default: a fresh [`MemoryStore`]).
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// A store shared with other engines.
    pub fn shared_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The options (default: [`EngineOptions::default`]).
    pub fn options(mut self, options: EngineOptions) -> Self {
        self.options = options;
        self
    }

    /// Keys the event log (HMAC-SHA256 with `key` instead of SHA-256; see [`crate::events`]): a chain
    /// recomputed without the key no longer verifies. Every engine that writes or verifies the runs of a
    /// store must be given the same key; keep it outside the store.
    pub fn chain_key(mut self, key: ChainKey) -> Self {
        self.chain_key = Some(key);
        self
    }

    /// Builds the engine. Limits of zero are raised to one. The store is wrapped in a
    /// [`crate::store::RetryStore`] for [`EngineOptions::store_retry_timeout`] unless it says no call
    /// of it can fail retryably ([`Store::can_be_unavailable`]: the memory store).
    pub fn build(self) -> Engine<S> {
        let mut options = self.options;
        options.max_concurrent_nodes = options.max_concurrent_nodes.max(1);
        options.queue_depth = options.queue_depth.clamp(1, Semaphore::MAX_PERMITS);
        let store = self.store.unwrap_or_else(|| Arc::new(MemoryStore::new()));
        // Every store's retryable errors (a server that went away) are retried for the timeout.
        let store: Arc<dyn Store> = match store.can_be_unavailable() {
            true => Arc::new(RetryStore::new(store, options.store_retry_timeout)),
            false => store,
        };
        let env = Arc::new(RunEnv {
            store: store.clone(),
            replay: None,
            clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
            options: options.clone(),
            chain_key: self.chain_key.clone(),
            waker: Default::default(),
            children: Default::default(),
        });
        let mut served = self.served;
        served.sort_by_key(|s| s.version());
        let timers = Arc::<Timers>::default();
        let versions = served.iter().map(|s| s.serve(&env, &timers)).collect();
        let engine = Engine {
            inner: Arc::new(Inner {
                graph: self.graph,
                env,
                store,
                admission: Arc::new(Semaphore::new(options.queue_depth)),
                options,
                active: Mutex::new(HashMap::new()),
                chain_key: self.chain_key,
                timers,
                versions,
                migrations: self.migrations,
            }),
        };
        let waker: Weak<dyn RunWaker> = Arc::downgrade(&engine.inner) as Weak<dyn RunWaker>;
        let _ = engine.inner.env.waker.set(waker);
        engine
    }
}

impl<S: Reducer> RunWaker for Inner<S> {
    fn wake(self: Arc<Self>, run: String) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        let engine = Engine { inner: self };
        Box::pin(async move {
            let woken = engine.continue_any(&run, Continue::Wake, Default::default()).await;
            if let Err(e) = woken {
                tracing::warn!(run, error = %e, "waking the run failed; a timer service or worker wakes it");
            }
        })
    }
}
