//! Metrics, through the [`metrics`](https://docs.rs/metrics) facade (feature `metrics`): the engine
//! records, the application installs a recorder (`metrics-exporter-prometheus`, or any other) and
//! chooses where they go. Without the feature, or without a recorder, recording costs nothing or next
//! to nothing.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `graph_inflight_nodes` | gauge | `graph` | attempts running now |
//! | `graph_queue_depth` | gauge | `graph` | items holding an admission permit (running or about to) |
//! | `graph_step_latency_seconds` | histogram | `graph` | a step, from its items' start to its commit |
//! | `graph_node_latency_seconds` | histogram | `graph`, `node` | one attempt of an item |
//! | `graph_commit_latency_seconds` | histogram | `graph` | one `save_checkpoint` |
//! | `graph_commits_total` | counter | `graph`, `outcome` | commits by outcome: `committed`, `already_committed`, `step_taken`, `version_conflict`, `error` |
//! | `graph_retries_total` | counter | `graph`, `node` | attempts retried |
//! | `graph_merge_conflicts_total` | counter | `graph` | steps stopped by a merge conflict |
//! | `graph_backpressure_events_total` | counter | `graph` | runs paused because admission timed out |
//! | `graph_worker_claims_total` | counter | `graph`, `takeover` | runs claimed by workers; `takeover` is `true` when another worker had held the run |
//! | `graph_worker_leases_held` | gauge | `graph` | runs workers of this process hold a lease on |
//!
//! No metric is labelled by run id: runs are unbounded, labels must not be. Node names come from the
//! graph, a bounded set.
//!
//! Why the `metrics` facade rather than `prometheus`: a library should not choose the exporter, and the
//! facade (one small crate) lets the application pick Prometheus, StatsD or OpenTelemetry.

use std::sync::Arc;
use std::time::Duration;

use crate::store::CommitOutcome;

/// The engine's meters for one graph (every run of it): the `graph` and `node` label values and, with
/// the feature, the handles registered with the recorder in place. A step records eight values;
/// building each one's key (an allocated label list) and looking it up in the recorder every time
/// was about 2,500 instructions a step, with or without a recorder. The handles are registered once
/// per recorder instead: the first record into a recorder the graph has not recorded into (the
/// no-op one, one installed later, a thread's local one) registers them all, so a graph used before
/// its recorder was installed records into it afterwards.
pub(crate) struct Meters {
    #[cfg(feature = "metrics")]
    graph: Arc<str>,
    #[cfg(feature = "metrics")]
    nodes: Vec<Arc<str>>,
    /// The handles registered with the first recorder the graph recorded into, and its address: read
    /// without a lock (a fan-out step's items record from every worker thread at once).
    #[cfg(feature = "metrics")]
    first: std::sync::OnceLock<(usize, Handles)>,
    /// The handles of the latest other recorder, and its address.
    #[cfg(feature = "metrics")]
    later: std::sync::RwLock<Option<(usize, Arc<Handles>)>>,
}

/// Every handle of [`Meters`], registered with one recorder.
#[cfg(feature = "metrics")]
struct Handles {
    inflight: metrics::Gauge,
    queue_depth: metrics::Gauge,
    step_latency: metrics::Histogram,
    commit_latency: metrics::Histogram,
    /// By outcome, in [`OUTCOMES`] order.
    commits: Vec<metrics::Counter>,
    /// By node index.
    node_latency: Vec<metrics::Histogram>,
    /// By node index.
    retries: Vec<metrics::Counter>,
    merge_conflicts: metrics::Counter,
    backpressure: metrics::Counter,
}

/// The `outcome` label values of `graph_commits_total`.
#[cfg(feature = "metrics")]
const OUTCOMES: [&str; 6] =
    ["committed", "already_committed", "step_taken", "version_conflict", "fenced", "error"];

#[cfg(feature = "metrics")]
impl Handles {
    fn register(r: &dyn metrics::Recorder, graph: &Arc<str>, nodes: &[Arc<str>]) -> Handles {
        use metrics::{Key, Label, Level, Metadata};
        static META: Metadata<'static> = Metadata::new(module_path!(), Level::INFO, Some(module_path!()));
        let g = || Label::new("graph", Arc::clone(graph));
        let key = |name: &'static str| Key::from_parts(name, vec![g()]);
        let with = |name: &'static str, label: &'static str, value: metrics::SharedString| {
            Key::from_parts(name, vec![g(), Label::new(label, value)])
        };
        Handles {
            inflight: r.register_gauge(&key("graph_inflight_nodes"), &META),
            queue_depth: r.register_gauge(&key("graph_queue_depth"), &META),
            step_latency: r.register_histogram(&key("graph_step_latency_seconds"), &META),
            commit_latency: r.register_histogram(&key("graph_commit_latency_seconds"), &META),
            commits: OUTCOMES
                .iter()
                .map(|o| r.register_counter(&with("graph_commits_total", "outcome", (*o).into()), &META))
                .collect(),
            node_latency: nodes
                .iter()
                .map(|n| {
                    let key = with("graph_node_latency_seconds", "node", Arc::clone(n).into());
                    r.register_histogram(&key, &META)
                })
                .collect(),
            retries: nodes
                .iter()
                .map(|n| {
                    r.register_counter(&with("graph_retries_total", "node", Arc::clone(n).into()), &META)
                })
                .collect(),
            merge_conflicts: r.register_counter(&key("graph_merge_conflicts_total"), &META),
            backpressure: r.register_counter(&key("graph_backpressure_events_total"), &META),
        }
    }
}

impl Meters {
    /// The meters of graph `graph` with nodes `nodes` (in node-index order).
    pub(crate) fn new(graph: &Arc<str>, nodes: Vec<Arc<str>>) -> Meters {
        #[cfg(feature = "metrics")]
        {
            Meters { graph: Arc::clone(graph), nodes, first: Default::default(), later: Default::default() }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = (graph, nodes);
            Meters {}
        }
    }

    /// Runs `f` with the handles registered with the current recorder, registering them first when
    /// the recorder is not the one they were registered with.
    #[cfg(feature = "metrics")]
    fn with<T>(&self, f: impl FnOnce(&Handles) -> T) -> T {
        metrics::with_recorder(|r| {
            // The recorder's address identifies it (a recorder installed for good, or the no-op one).
            let id = std::ptr::from_ref(r).cast::<()>() as usize;
            let (first, h) = self.first.get_or_init(|| (id, Handles::register(r, &self.graph, &self.nodes)));
            if *first == id {
                return f(h);
            }
            let read = self.later.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((later, h)) = read.as_ref()
                && *later == id
            {
                return f(h);
            }
            drop(read);
            let h = Arc::new(Handles::register(r, &self.graph, &self.nodes));
            *self.later.write().unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some((id, Arc::clone(&h)));
            f(&h)
        })
    }

    /// Counts one running attempt until the guard is dropped.
    pub(crate) fn inflight(&self) -> GaugeGuard {
        #[cfg(feature = "metrics")]
        {
            GaugeGuard::up(self.with(|h| h.inflight.clone()))
        }
        #[cfg(not(feature = "metrics"))]
        GaugeGuard {}
    }

    /// Counts one admitted item until the guard (held with its admission permit) is dropped.
    pub(crate) fn admitted(&self) -> GaugeGuard {
        #[cfg(feature = "metrics")]
        {
            GaugeGuard::up(self.with(|h| h.queue_depth.clone()))
        }
        #[cfg(not(feature = "metrics"))]
        GaugeGuard {}
    }

    /// An attempt of node `node` (its index) took `d`.
    pub(crate) fn node_latency(&self, node: usize, d: Duration) {
        #[cfg(feature = "metrics")]
        self.with(|h| h.node_latency[node].record(d.as_secs_f64()));
        #[cfg(not(feature = "metrics"))]
        let _ = (node, d);
    }

    /// A step took `d`, from its items' start to its commit.
    pub(crate) fn step_latency(&self, d: Duration) {
        #[cfg(feature = "metrics")]
        self.with(|h| h.step_latency.record(d.as_secs_f64()));
        #[cfg(not(feature = "metrics"))]
        let _ = d;
    }

    /// A commit took `d` and ended with `outcome` (`None`: an error).
    pub(crate) fn commit(&self, d: Duration, outcome: Option<&CommitOutcome>) {
        #[cfg(feature = "metrics")]
        {
            let i = match outcome {
                Some(CommitOutcome::Committed { .. }) => 0,
                Some(CommitOutcome::AlreadyCommitted { .. }) => 1,
                Some(CommitOutcome::StepTaken { .. }) => 2,
                Some(CommitOutcome::VersionConflict { .. }) => 3,
                Some(CommitOutcome::Fenced) => 4,
                None => 5,
            };
            self.with(|h| {
                h.commit_latency.record(d.as_secs_f64());
                h.commits[i].increment(1);
            });
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (d, outcome);
    }

    /// An attempt of node `node` (its index) is retried.
    pub(crate) fn retry(&self, node: usize) {
        #[cfg(feature = "metrics")]
        self.with(|h| h.retries[node].increment(1));
        #[cfg(not(feature = "metrics"))]
        let _ = node;
    }

    /// A step stopped on a merge conflict.
    pub(crate) fn merge_conflict(&self) {
        #[cfg(feature = "metrics")]
        self.with(|h| h.merge_conflicts.increment(1));
    }

    /// A run paused because admission timed out.
    pub(crate) fn backpressure(&self) {
        #[cfg(feature = "metrics")]
        self.with(|h| h.backpressure.increment(1));
    }
}

/// Holds one unit of a gauge, given back when dropped (to the handle it was taken from).
#[must_use]
pub(crate) struct GaugeGuard {
    #[cfg(feature = "metrics")]
    gauge: metrics::Gauge,
}

#[cfg(feature = "metrics")]
impl GaugeGuard {
    fn up(gauge: metrics::Gauge) -> GaugeGuard {
        gauge.increment(1.0);
        GaugeGuard { gauge }
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        self.gauge.decrement(1.0);
    }
}

/// A worker claimed a run (`takeover`: another worker had held it).
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn worker_claim(graph: &Arc<str>, takeover: bool) {
    #[cfg(feature = "metrics")]
    metrics::counter!("graph_worker_claims_total", "graph" => Arc::clone(graph), "takeover" => if takeover { "true" } else { "false" })
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (graph, takeover);
}

/// Counts one lease held by a worker of this process until dropped.
#[cfg(any(feature = "postgres", feature = "mysql"))]
#[must_use]
pub(crate) struct LeaseHeld {
    #[cfg(feature = "metrics")]
    graph: Arc<str>,
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
impl LeaseHeld {
    pub(crate) fn start(graph: &Arc<str>) -> Self {
        #[cfg(feature = "metrics")]
        {
            metrics::gauge!("graph_worker_leases_held", "graph" => Arc::clone(graph)).increment(1.0);
            LeaseHeld { graph: Arc::clone(graph) }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = graph;
            LeaseHeld {}
        }
    }
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
impl Drop for LeaseHeld {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        metrics::gauge!("graph_worker_leases_held", "graph" => Arc::clone(&self.graph)).decrement(1.0);
    }
}
