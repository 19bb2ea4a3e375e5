//! Configuring an engine ([`EngineBuilder`]) and a run ([`RunOptions`]), and what a run returns
//! ([`RunOutcome`]).

use super::*;

/// Configures an [`Engine`].
pub struct EngineBuilder<S: Reducer> {
    graph: Graph<S>,
    store: Option<Arc<dyn Store>>,
    options: EngineOptions,
    chain_key: Option<ChainKey>,
}

impl<S: Reducer> EngineBuilder<S> {
    pub(super) fn new(graph: Graph<S>) -> Self {
        EngineBuilder { graph, store: None, options: EngineOptions::default(), chain_key: None }
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
    /// [`crate::store::RetryStore`] for [`EngineOptions::store_retry_timeout`].
    pub fn build(self) -> Engine<S> {
        let mut options = self.options;
        options.max_concurrent_nodes = options.max_concurrent_nodes.max(1);
        options.queue_depth = options.queue_depth.clamp(1, Semaphore::MAX_PERMITS);
        let store = self.store.unwrap_or_else(|| Arc::new(MemoryStore::new()));
        // Every store's retryable errors (a server that went away) are retried for the timeout.
        let store: Arc<dyn Store> =
            Arc::new(crate::store::RetryStore::new(store, options.store_retry_timeout));
        Engine {
            inner: Arc::new(Inner {
                graph: self.graph,
                env: Arc::new(RunEnv { store: store.clone(), replay: None }),
                store,
                admission: Arc::new(Semaphore::new(options.queue_depth)),
                options,
                active: Mutex::new(HashMap::new()),
                chain_key: self.chain_key,
            }),
        }
    }
}

/// Per-run options.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RunOptions {
    /// The run seed (default: derived from the run id). Ignored by `resume`, which uses the stored one.
    pub seed: Option<u64>,
    /// A token that cancels the run.
    pub cancel: Option<CancellationToken>,
    /// A label stored with the run's first checkpoint.
    pub label: Option<String>,
    /// A token that stops the run at the next step boundary (after the step in flight is committed),
    /// leaving it `Running` for any engine to resume: the call returns `Ok` with status `Running`.
    /// Unlike `cancel`, nothing is written. Workers use it for a graceful shutdown.
    pub stop: Option<CancellationToken>,
    /// Where the run's events go when it is streamed.
    pub(crate) observer: crate::stream::ObserverSlot,
}

impl RunOptions {
    /// Sets the seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Sets the cancellation token.
    pub fn cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Sets the token that stops the run at the next step boundary, left `Running` (see
    /// [`RunOptions::stop`](struct.RunOptions.html#structfield.stop)).
    pub fn stop(mut self, token: CancellationToken) -> Self {
        self.stop = Some(token);
        self
    }

    /// Sets the label.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }
}

/// How a `run` or `resume` call ended without error.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunOutcome<S> {
    /// The run.
    pub run_id: String,
    /// The state at the latest committed step (the final state when completed).
    pub state: S,
    /// `Completed`, `Interrupted` (see [`RunOutcome::interrupts`]), or `Paused` with a reason.
    pub status: RunStatus,
    /// The latest committed step.
    pub steps: u64,
}

impl<S> RunOutcome<S> {
    /// True when the run reached END.
    pub fn is_completed(&self) -> bool {
        self.status == RunStatus::Completed
    }

    /// What the run waits for when it is `Interrupted` (empty otherwise).
    pub fn interrupts(&self) -> &[crate::store::Interrupt] {
        match &self.status {
            RunStatus::Interrupted(list) => list,
            _ => &[],
        }
    }
}
