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

/// A moment a latency metric is measured from or to: read from the clock only with the feature (a
/// loop step read the clock eleven times, ~1 % of the step each; without the feature a stopwatch is
/// nothing and its durations zero, which the no-op meters ignore).
#[derive(Clone, Copy)]
pub(crate) struct Stopwatch {
    #[cfg(feature = "metrics")]
    at: std::time::Instant,
}

impl Stopwatch {
    /// Now.
    pub(crate) fn now() -> Self {
        Stopwatch {
            #[cfg(feature = "metrics")]
            at: std::time::Instant::now(),
        }
    }

    /// The time from `earlier` to this moment.
    pub(crate) fn since(self, earlier: Stopwatch) -> Duration {
        #[cfg(feature = "metrics")]
        {
            self.at.saturating_duration_since(earlier.at)
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = earlier;
            Duration::ZERO
        }
    }
}

/// The engine's meters for one graph (every run of it): with the feature, the key of every value its
/// runs record, built once. A step records eight values; building each one's key (an allocated label
/// list, the `graph` and `node` names) every time was about 2,500 instructions a step, with or without
/// a recorder. The keys are built when the graph is, and each record looks its key up in the recorder
/// in place at that moment (the global one, a thread's local one, or none), as the `metrics` macros
/// do: handles are not kept, so a recorder installed or swapped later receives what follows, and one
/// dropped is never written to. (Handles kept per recorder were tried: no cheaper with no recorder in
/// callgrind, and wrong, as a recorder can only be told apart by its address, which a dropped local
/// recorder's successor may reuse.)
pub(crate) struct Meters {
    #[cfg(feature = "metrics")]
    keys: Keys,
}

/// Every key of [`Meters`].
#[cfg(feature = "metrics")]
struct Keys {
    inflight: metrics::Key,
    queue_depth: metrics::Key,
    step_latency: metrics::Key,
    commit_latency: metrics::Key,
    /// By outcome, in [`OUTCOMES`] order.
    commits: Vec<metrics::Key>,
    /// By node index.
    node_latency: Vec<metrics::Key>,
    /// By node index.
    retries: Vec<metrics::Key>,
    merge_conflicts: metrics::Key,
    backpressure: metrics::Key,
}

/// The `outcome` label values of `graph_commits_total`.
#[cfg(feature = "metrics")]
const OUTCOMES: [&str; 6] =
    ["committed", "already_committed", "step_taken", "version_conflict", "fenced", "error"];

/// What the engine's records tell a recorder of where they come from (as the `metrics` macros would).
#[cfg(feature = "metrics")]
static META: metrics::Metadata<'static> =
    metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

#[cfg(feature = "metrics")]
impl Keys {
    fn new(graph: &Arc<str>, nodes: &[Arc<str>]) -> Keys {
        use metrics::{Key, Label};
        let g = || Label::new("graph", Arc::clone(graph));
        let key = |name: &'static str| Key::from_parts(name, vec![g()]);
        let with = |name: &'static str, label: &'static str, value: metrics::SharedString| {
            Key::from_parts(name, vec![g(), Label::new(label, value)])
        };
        Keys {
            inflight: key("graph_inflight_nodes"),
            queue_depth: key("graph_queue_depth"),
            step_latency: key("graph_step_latency_seconds"),
            commit_latency: key("graph_commit_latency_seconds"),
            commits: OUTCOMES.iter().map(|o| with("graph_commits_total", "outcome", (*o).into())).collect(),
            node_latency: nodes
                .iter()
                .map(|n| with("graph_node_latency_seconds", "node", Arc::clone(n).into()))
                .collect(),
            retries: nodes
                .iter()
                .map(|n| with("graph_retries_total", "node", Arc::clone(n).into()))
                .collect(),
            merge_conflicts: key("graph_merge_conflicts_total"),
            backpressure: key("graph_backpressure_events_total"),
        }
    }
}

/// The current recorder's handle for `key`.
#[cfg(feature = "metrics")]
fn counter(key: &metrics::Key) -> metrics::Counter {
    metrics::with_recorder(|r| r.register_counter(key, &META))
}

/// The current recorder's handle for `key`.
#[cfg(feature = "metrics")]
fn gauge(key: &metrics::Key) -> metrics::Gauge {
    metrics::with_recorder(|r| r.register_gauge(key, &META))
}

/// The current recorder's handle for `key`.
#[cfg(feature = "metrics")]
fn histogram(key: &metrics::Key) -> metrics::Histogram {
    metrics::with_recorder(|r| r.register_histogram(key, &META))
}

impl Meters {
    /// The meters of graph `graph` with nodes `nodes` (in node-index order).
    pub(crate) fn new(graph: &Arc<str>, nodes: &[Arc<str>]) -> Meters {
        #[cfg(feature = "metrics")]
        {
            Meters { keys: Keys::new(graph, nodes) }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = (graph, nodes);
            Meters {}
        }
    }

    /// Counts one running attempt until the guard is dropped.
    pub(crate) fn inflight(&self) -> GaugeGuard {
        #[cfg(feature = "metrics")]
        {
            GaugeGuard::up(gauge(&self.keys.inflight))
        }
        #[cfg(not(feature = "metrics"))]
        GaugeGuard {}
    }

    /// Counts one admitted item until the guard (held with its admission permit) is dropped.
    pub(crate) fn admitted(&self) -> GaugeGuard {
        #[cfg(feature = "metrics")]
        {
            GaugeGuard::up(gauge(&self.keys.queue_depth))
        }
        #[cfg(not(feature = "metrics"))]
        GaugeGuard {}
    }

    /// An attempt of node `node` (its index) took `d`.
    pub(crate) fn node_latency(&self, node: usize, d: Duration) {
        #[cfg(feature = "metrics")]
        histogram(&self.keys.node_latency[node]).record(d.as_secs_f64());
        #[cfg(not(feature = "metrics"))]
        let _ = (node, d);
    }

    /// A step took `d`, from its items' start to its commit.
    pub(crate) fn step_latency(&self, d: Duration) {
        #[cfg(feature = "metrics")]
        histogram(&self.keys.step_latency).record(d.as_secs_f64());
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
                Some(_) | None => 5,
            };
            histogram(&self.keys.commit_latency).record(d.as_secs_f64());
            counter(&self.keys.commits[i]).increment(1);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (d, outcome);
    }

    /// An attempt of node `node` (its index) is retried.
    pub(crate) fn retry(&self, node: usize) {
        #[cfg(feature = "metrics")]
        counter(&self.keys.retries[node]).increment(1);
        #[cfg(not(feature = "metrics"))]
        let _ = node;
    }

    /// A step stopped on a merge conflict.
    pub(crate) fn merge_conflict(&self) {
        #[cfg(feature = "metrics")]
        counter(&self.keys.merge_conflicts).increment(1);
    }

    /// A run paused because admission timed out.
    pub(crate) fn backpressure(&self) {
        #[cfg(feature = "metrics")]
        counter(&self.keys.backpressure).increment(1);
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
pub(crate) fn worker_claim(graph: &Arc<str>, takeover: bool) {
    #[cfg(feature = "metrics")]
    metrics::counter!("graph_worker_claims_total", "graph" => Arc::clone(graph), "takeover" => if takeover { "true" } else { "false" })
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (graph, takeover);
}

/// Counts one lease held by a worker of this process until dropped.
#[must_use]
pub(crate) struct LeaseHeld {
    #[cfg(feature = "metrics")]
    graph: Arc<str>,
}

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

impl Drop for LeaseHeld {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        metrics::gauge!("graph_worker_leases_held", "graph" => Arc::clone(&self.graph)).decrement(1.0);
    }
}
