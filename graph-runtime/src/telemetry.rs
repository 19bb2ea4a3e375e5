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

/// Counts one running attempt until dropped.
#[must_use]
pub(crate) struct Inflight {
    #[cfg(feature = "metrics")]
    graph: Arc<str>,
}

impl Inflight {
    pub(crate) fn start(graph: &Arc<str>) -> Self {
        #[cfg(feature = "metrics")]
        {
            metrics::gauge!("graph_inflight_nodes", "graph" => Arc::clone(graph)).increment(1.0);
            Inflight { graph: Arc::clone(graph) }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = graph;
            Inflight {}
        }
    }
}

impl Drop for Inflight {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        metrics::gauge!("graph_inflight_nodes", "graph" => Arc::clone(&self.graph)).decrement(1.0);
    }
}

/// Counts one admitted item until dropped (held with its admission permit).
#[must_use]
pub(crate) struct Admitted {
    #[cfg(feature = "metrics")]
    graph: Arc<str>,
}

impl Admitted {
    pub(crate) fn start(graph: &Arc<str>) -> Self {
        #[cfg(feature = "metrics")]
        {
            metrics::gauge!("graph_queue_depth", "graph" => Arc::clone(graph)).increment(1.0);
            Admitted { graph: Arc::clone(graph) }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = graph;
            Admitted {}
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        metrics::gauge!("graph_queue_depth", "graph" => Arc::clone(&self.graph)).decrement(1.0);
    }
}

/// An attempt of `node` took `d`.
pub(crate) fn node_latency(graph: &Arc<str>, node: &Arc<str>, d: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!("graph_node_latency_seconds", "graph" => Arc::clone(graph), "node" => Arc::clone(node))
        .record(d.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (graph, node, d);
}

/// A step took `d`, from its items' start to its commit.
pub(crate) fn step_latency(graph: &Arc<str>, d: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!("graph_step_latency_seconds", "graph" => Arc::clone(graph)).record(d.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (graph, d);
}

/// A commit took `d` and ended with `outcome` (`None`: an error).
pub(crate) fn commit(graph: &Arc<str>, d: Duration, outcome: Option<&CommitOutcome>) {
    #[cfg(feature = "metrics")]
    {
        let outcome = match outcome {
            Some(CommitOutcome::Committed { .. }) => "committed",
            Some(CommitOutcome::AlreadyCommitted { .. }) => "already_committed",
            Some(CommitOutcome::StepTaken { .. }) => "step_taken",
            Some(CommitOutcome::VersionConflict { .. }) => "version_conflict",
            Some(CommitOutcome::Fenced) => "fenced",
            None => "error",
        };
        metrics::histogram!("graph_commit_latency_seconds", "graph" => Arc::clone(graph))
            .record(d.as_secs_f64());
        metrics::counter!("graph_commits_total", "graph" => Arc::clone(graph), "outcome" => outcome)
            .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (graph, d, outcome);
}

/// An attempt of `node` is retried.
pub(crate) fn retry(graph: &Arc<str>, node: &Arc<str>) {
    #[cfg(feature = "metrics")]
    metrics::counter!("graph_retries_total", "graph" => Arc::clone(graph), "node" => Arc::clone(node))
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (graph, node);
}

/// A step stopped on a merge conflict.
pub(crate) fn merge_conflict(graph: &Arc<str>) {
    #[cfg(feature = "metrics")]
    metrics::counter!("graph_merge_conflicts_total", "graph" => Arc::clone(graph)).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = graph;
}

/// A run paused because admission timed out.
pub(crate) fn backpressure(graph: &Arc<str>) {
    #[cfg(feature = "metrics")]
    metrics::counter!("graph_backpressure_events_total", "graph" => Arc::clone(graph)).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = graph;
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
