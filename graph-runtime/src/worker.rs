//! Workers: many processes sharing the runs of one database whose store leases runs to workers
//! ([`LeaseStore`]: PostgreSQL or MySQL/MariaDB, features `postgres`, `mysql`; `docs/operations.md`).
//!
//! Any process submits runs ([`crate::Engine::submit`] writes the run and its step 0 without executing
//! them); every [`Worker`] claims runnable runs of its graph with a lease ([`LeaseStore::claim`]; workers of
//! several graphs can share a database), drives each from its
//! last committed checkpoint, heartbeats the lease every third of its length, and releases it when the
//! run completes, pauses, fails or is stopped. Every commit it makes is fenced by the lease
//! ([`LeaseStore::leased`]): once the lease is lost (expired: the worker stalled, its heartbeats did not
//! reach the database; or taken over) the commit writes nothing and the worker drops the run at once
//! ([`crate::Error::Fenced`]), its in-flight nodes cancelled. A run whose worker died is claimed by
//! another worker after its lease expires and resumed from its last checkpoint.
//!
//! Workers are also the pool's timer service: a claim takes parked runs (`Waiting`, or `Interrupted`
//! with a deadline) once they are due by the database's clock, and the worker wakes them (a sleep
//! ended, a deadline passed, an external event made the run due); once a poll interval each worker
//! fires its graph's schedules ([`crate::Engine::fire_schedules`]), whose runs are claimed like any
//! other (`docs/time.md`).
//!
//! # Examples
//!
//! ```no_run
//! # use graph_runtime::prelude::*;
//! # use graph_runtime::node::BoxFuture;
//! # use graph_runtime::worker::Worker;
//! # fn hop<'a>(_s: &'a (), _c: &'a mut Ctx) -> BoxFuture<'a, NodeResult<(), Route>> {
//! #     Box::pin(async { Ok(((), Route::End)) })
//! # }
//! # async fn f(store: impl graph_runtime::worker::LeaseStore) -> Result<(), Box<dyn std::error::Error>> {
//! # let graph = Graph::<()>::builder("g").node("hop", hop).entry("hop").edge("hop", END).build()?;
//! // let store = graph_runtime::store::PostgresStore::connect("postgres://app@db/graphs").await?;
//! // Anywhere: submit work.
//! Engine::builder(graph.clone()).store(store.clone()).build().submit("order-1", ()).await?;
//! // On every worker machine: drive it.
//! let shutdown = graph_runtime::CancellationToken::new();
//! let worker = Worker::builder(graph, store)
//!     .concurrency(16)
//!     .lease(std::time::Duration::from_secs(30))
//!     .build();
//! let report = worker.run(shutdown).await?; // until `shutdown` is cancelled
//! println!("{report:?}");
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::engine::{Continue, Engine, RunOptions, Servable};
use crate::error::Error;
use crate::events::ChainKey;
use crate::graph::Graph;
use crate::policy::EngineOptions;
use crate::state::Reducer;
use crate::store::RunStatus;
pub use crate::store::lease::{Lease, LeaseStore, LeasedStore};

/// Configures a [`Worker`].
pub struct WorkerBuilder<S: Reducer, L: LeaseStore> {
    graph: Graph<S>,
    store: L,
    id: Option<String>,
    concurrency: usize,
    lease: Duration,
    heartbeat: Option<Duration>,
    poll: Duration,
    grace: Duration,
    options: EngineOptions,
    chain_key: Option<ChainKey>,
    clock: Option<Arc<dyn Clock>>,
    /// Older versions of the graph it serves too.
    served: Vec<Arc<dyn Servable>>,
}

impl<S: Reducer, L: LeaseStore> WorkerBuilder<S, L> {
    /// The clock the worker's engines read (default: [`crate::SystemClock`]). With a clock of your own
    /// (a [`crate::TestClock`]) parked runs are claimed when due by that clock; by default, when due
    /// by the database's.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// How often a held lease is extended (default: a third of the lease length, which survives two
    /// missed beats). An interval longer than the lease lets leases expire while runs are driven: their
    /// commits are then fenced (the tests use it to check fencing without the heartbeat's help).
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = Some(every.max(Duration::from_millis(1)));
        self
    }

    /// The worker's id, the lease owner in the database (default: `hostname-pid-random`). Must be unique
    /// among live workers.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Runs driven at once (default 4; zero is raised to one).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// The lease length (default 30 s; at least 300 ms): how long a dead worker's runs wait before
    /// another worker takes them over. Heartbeats run every third of it.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(300));
        self
    }

    /// How long an idle worker waits before it looks for work again (default 200 ms).
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = poll.max(Duration::from_millis(1));
        self
    }

    /// How long a shutdown waits for runs to reach a step boundary before it drops them (default 30 s;
    /// their in-flight steps are then re-executed by the next holder).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The engine options runs are driven with.
    pub fn options(mut self, options: EngineOptions) -> Self {
        self.options = options;
        self
    }

    /// The event-log key (see [`crate::engine::EngineBuilder::chain_key`]): the one the submitters use.
    pub fn chain_key(mut self, key: ChainKey) -> Self {
        self.chain_key = Some(key);
        self
    }

    /// Serves an older version of the graph too (as [`crate::EngineBuilder::serves`]): the worker
    /// claims the runs of every version it serves and drives each on its own version.
    ///
    /// # Panics
    ///
    /// As [`crate::EngineBuilder::serves`].
    #[must_use]
    pub fn serves<T: Reducer>(mut self, graph: Graph<T>) -> Self {
        crate::engine::check_served(&self.graph, &self.served, &graph);
        self.served.push(Arc::new(graph));
        self
    }

    /// Builds the worker.
    pub fn build(self) -> Worker<S, L> {
        let id = self.id.unwrap_or_else(default_id);
        Worker {
            inner: Arc::new(Shared {
                graph: self.graph,
                store: self.store,
                id,
                concurrency: self.concurrency,
                lease: self.lease,
                heartbeat: self.heartbeat.unwrap_or(self.lease / 3),
                poll: self.poll,
                grace: self.grace,
                options: self.options,
                chain_key: self.chain_key,
                clock: self.clock,
                served: self.served,
            }),
        }
    }
}

/// `hostname-pid-random`.
fn default_id() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "worker".into());
    let random = std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u8);
    format!("{host}-{}-{:08x}", std::process::id(), random as u32)
}

/// Claims runs of one graph from a server store and drives them (see the [module docs](self)).
pub struct Worker<S: Reducer, L: LeaseStore> {
    inner: Arc<Shared<S, L>>,
}

struct Shared<S: Reducer, L: LeaseStore> {
    graph: Graph<S>,
    store: L,
    id: String,
    concurrency: usize,
    lease: Duration,
    heartbeat: Duration,
    poll: Duration,
    grace: Duration,
    options: EngineOptions,
    chain_key: Option<ChainKey>,
    clock: Option<Arc<dyn Clock>>,
    /// Older versions of the graph it serves too.
    served: Vec<Arc<dyn Servable>>,
}

/// What a worker did, returned when it stops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerReport {
    /// Leases taken.
    pub claimed: u64,
    /// Of those, runs another worker had held before (takeovers: token above 1).
    pub takeovers: u64,
    /// Runs driven to completion.
    pub completed: u64,
    /// Runs that stopped for a person or paused (interrupted, paused).
    pub stopped: u64,
    /// Runs dropped because their lease was lost (a fenced commit, a lost heartbeat).
    pub fenced: u64,
    /// Runs that ended with another error (recorded in the run as the engine records it).
    pub failed: u64,
    /// Runs handed back at shutdown, left `Running` for other workers.
    pub handed_back: u64,
}

/// How one leased run ended.
enum End {
    Completed,
    Stopped,
    HandedBack,
    Fenced,
    Failed,
}

impl<S: Reducer, L: LeaseStore> Worker<S, L> {
    /// Starts configuring a worker driving runs of `graph` stored in `store`.
    pub fn builder(graph: Graph<S>, store: L) -> WorkerBuilder<S, L> {
        WorkerBuilder {
            graph,
            store,
            id: None,
            concurrency: 4,
            lease: Duration::from_secs(30),
            heartbeat: None,
            poll: Duration::from_millis(200),
            grace: Duration::from_secs(30),
            options: EngineOptions::default(),
            chain_key: None,
            clock: None,
            served: Vec::new(),
        }
    }

    /// The worker's id (the lease owner).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Claims and drives runs until `shutdown` is cancelled; then stops claiming, lets every run reach
    /// its next step boundary (at most the shutdown grace), releases the leases, and returns what it did.
    ///
    /// # Errors
    ///
    /// None so far: a database that cannot be reached is retried (claims resume when it is back; the
    /// runs' own commits retry for `EngineOptions::store_retry_timeout`). The `Result` leaves room for
    /// configuration errors.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<WorkerReport, Error> {
        let me = &self.inner;
        tracing::info!(worker = %me.id, concurrency = me.concurrency, lease_ms = me.lease.as_millis() as u64, "worker started");
        let mut report = WorkerReport::default();
        let drain = CancellationToken::new();
        let held: Arc<Mutex<HashMap<String, Lease>>> = Arc::default();
        let mut runs: JoinSet<End> = JoinSet::new();
        let mut backoff = me.poll;
        let scheduler = me.engine(Arc::new(me.store.clone()));
        let mut fired_at: Option<tokio::time::Instant> = None;
        while !shutdown.is_cancelled() {
            // Schedules, at most once a poll interval: the runs they start are claimed like any other.
            if fired_at.is_none_or(|t| t.elapsed() >= me.poll) {
                fired_at = Some(tokio::time::Instant::now());
                if let Err(e) = scheduler.fire_schedules().await {
                    tracing::warn!(worker = %me.id, error = %e, "firing schedules failed; retrying");
                }
            }
            let free = me.concurrency.saturating_sub(runs.len());
            let mut claimed_any = false;
            if free > 0 {
                let due_by = me.clock.as_ref().map(|c| c.now_ms());
                match me.claim(free, due_by).await {
                    Ok(leases) => {
                        backoff = me.poll;
                        claimed_any = !leases.is_empty();
                        for lease in leases {
                            report.claimed += 1;
                            if lease.token > 1 {
                                report.takeovers += 1;
                            }
                            tracing::info!(worker = %me.id, run = %lease.run_id, token = lease.token,
                                takeover = lease.token > 1, "claimed a run");
                            crate::telemetry::worker_claim(me.graph.name_arc(), lease.token > 1);
                            held.lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .insert(lease.run_id.clone(), lease.clone());
                            // The gauge counts the lease until the run's task ends (or is aborted).
                            let gauge = crate::telemetry::LeaseHeld::start(me.graph.name_arc());
                            let driven = drive(self.inner.clone(), lease, drain.clone(), held.clone());
                            runs.spawn(async move {
                                let _gauge = gauge;
                                driven.await
                            });
                        }
                    }
                    Err(e) => {
                        tracing::warn!(worker = %me.id, error = %e, "claiming runs failed; retrying");
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
            if claimed_any && runs.len() < me.concurrency {
                // More may be waiting: claim again before sleeping, but let finished runs be counted.
                while let Some(done) = runs.try_join_next() {
                    count(&mut report, done);
                }
                continue;
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                Some(done) = runs.join_next(), if !runs.is_empty() => count(&mut report, done),
                () = tokio::time::sleep(backoff) => {}
            }
        }
        // Graceful shutdown: no more claims; each run stops at its next step boundary and hands its lease
        // back; after the grace period the rest are dropped (their in-flight steps are redone elsewhere).
        tracing::info!(worker = %me.id, running = runs.len(), "worker stopping");
        drain.cancel();
        let deadline = tokio::time::sleep(me.grace);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                next = runs.join_next() => match next {
                    Some(done) => count(&mut report, done),
                    None => break,
                },
                () = &mut deadline => {
                    tracing::warn!(worker = %me.id, running = runs.len(), "shutdown grace over; dropping runs");
                    runs.abort_all();
                    while let Some(done) = runs.join_next().await {
                        count(&mut report, done);
                    }
                    break;
                }
            }
        }
        let left: Vec<Lease> =
            held.lock().unwrap_or_else(|e| e.into_inner()).drain().map(|(_, l)| l).collect();
        for lease in left {
            report.handed_back += 1;
            release(&me.store, &lease).await;
        }
        tracing::info!(worker = %me.id, ?report, "worker stopped");
        Ok(report)
    }
}

impl<S: Reducer, L: LeaseStore> Shared<S, L> {
    /// An engine of the worker's graph, options, key and clock on `store`.
    fn engine(&self, store: Arc<dyn crate::store::Store>) -> Engine<S> {
        let mut builder =
            Engine::builder(self.graph.clone()).shared_store(store).options(self.options.clone());
        if let Some(key) = &self.chain_key {
            builder = builder.chain_key(key.clone());
        }
        if let Some(clock) = &self.clock {
            builder = builder.shared_clock(clock.clone());
        }
        for graph in &self.served {
            builder = builder.serves_erased(graph.clone());
        }
        builder.build()
    }

    /// Claims up to `n` runs of the versions the worker serves, its own graph's first.
    async fn claim(&self, n: usize, due_by: Option<u64>) -> Result<Vec<Lease>, crate::store::StoreError> {
        let fingerprints =
            std::iter::once(self.graph.fingerprint()).chain(self.served.iter().map(|g| g.fingerprint()));
        let mut leases = Vec::new();
        for fingerprint in fingerprints {
            let free = n - leases.len();
            if free == 0 {
                break;
            }
            leases.extend(self.store.claim_due_by(&self.id, fingerprint, free, self.lease, due_by).await?);
        }
        Ok(leases)
    }
}

fn count(report: &mut WorkerReport, done: Result<End, tokio::task::JoinError>) {
    match done {
        Ok(End::Completed) => report.completed += 1,
        Ok(End::Stopped) => report.stopped += 1,
        Ok(End::HandedBack) => report.handed_back += 1,
        Ok(End::Fenced) => report.fenced += 1,
        Ok(End::Failed) => report.failed += 1,
        // Aborted at the end of the shutdown grace: its lease is released from `held`.
        Err(e) if e.is_cancelled() => {}
        Err(e) => {
            tracing::error!(error = %e, "a run's task panicked");
            report.failed += 1;
        }
    }
}

/// Releases a lease, logging failures (an unreleased lease simply expires).
async fn release<L: LeaseStore>(store: &L, lease: &Lease) {
    match store.release(lease).await {
        Ok(true) => tracing::debug!(run = %lease.run_id, token = lease.token, "lease released"),
        Ok(false) => tracing::debug!(run = %lease.run_id, token = lease.token, "lease already lost"),
        Err(e) => tracing::warn!(run = %lease.run_id, error = %e, "releasing a lease failed; it will expire"),
    }
}

/// Drives one leased run: its engine commits through the lease; a heartbeat keeps the lease and, once
/// it is lost, drops the driver (cancelling its in-flight nodes).
async fn drive<S: Reducer, L: LeaseStore>(
    me: Arc<Shared<S, L>>,
    lease: Lease,
    drain: CancellationToken,
    held: Arc<Mutex<HashMap<String, Lease>>>,
) -> End {
    let engine = me.engine(Arc::new(me.store.leased(lease.clone())));
    let run_id = lease.run_id.clone();
    // A parked run was claimed because it is due (by the database's clock, which rules the pool).
    let driving = engine.continue_any(&run_id, Continue::Claimed, RunOptions::default().stop(drain));
    let beating = heartbeat(&me.store, &lease, me.lease, me.heartbeat);
    let end = tokio::select! {
        result = driving => match result.map(|out| out.expect("a claimed run is continued")) {
            Ok(out) => match out.status {
                RunStatus::Completed => {
                    tracing::info!(worker = %me.id, run = %run_id, steps = out.steps, "run completed");
                    End::Completed
                }
                RunStatus::Running => End::HandedBack,
                _ => End::Stopped,
            },
            // Another writer drives the run: this worker's lease is still its own, so it is released.
            Err(Error::Superseded { step, .. }) => {
                tracing::warn!(worker = %me.id, run = %run_id, step, "another writer drives the run; leaving it");
                End::Stopped
            }
            Err(Error::Fenced { step, .. }) => {
                tracing::warn!(worker = %me.id, run = %run_id, token = lease.token, step, "fenced: the lease was lost; dropping the run");
                End::Fenced
            }
            Err(e) => {
                tracing::warn!(worker = %me.id, run = %run_id, error = %e, "run ended with an error");
                End::Failed
            }
        },
        // Dropping `driving` aborts the driver task and its nodes.
        () = beating => {
            tracing::warn!(worker = %me.id, run = %run_id, token = lease.token, "lease lost (heartbeat); dropping the run");
            End::Fenced
        }
    };
    held.lock().unwrap_or_else(|e| e.into_inner()).remove(&run_id);
    if !matches!(end, End::Fenced) {
        release(&me.store, &lease).await;
    }
    end
}

/// Extends `lease` to `length` every `every`; returns once it is lost. A database that cannot be reached
/// is retried at the next beat; the lease may expire meanwhile, which the next beat (or a fenced commit)
/// finds.
async fn heartbeat<L: LeaseStore>(store: &L, lease: &Lease, length: Duration, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        match store.heartbeat(lease, length).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => tracing::warn!(run = %lease.run_id, error = %e, "heartbeat failed; retrying"),
        }
    }
}
