//! What the engine tells operators: metrics (feature `metrics`, rendered by the Prometheus exporter after
//! runs) and spans (exported to OpenTelemetry's in-memory exporter: run → step → node, with the
//! `otel.name`s of feature `otel`).

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use graph_runtime::prelude::*;
use graph_tests::Trace;
use graph_tests::graphs::{flaky, two_writers};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tracing_subscriber::layer::SubscriberExt;

/// The tests of this file run one at a time. tracing caches whether a callsite is enabled when it is
/// first hit; the metrics test hitting the engine's span callsites on another thread (no subscriber
/// there) while the OpenTelemetry test installs its thread's subscriber can cache them as disabled, and
/// that test then sees no spans (seen once under load).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The process's Prometheus recorder (a recorder is global: installed once per test binary).
fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::set_global_recorder(recorder).expect("one recorder per process");
        handle
    })
}

/// The value of the first sample line of `metric` whose labels contain every one of `labels`.
fn sample(text: &str, metric: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{metric}{{")) || l.starts_with(&format!("{metric} ")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_runs_render_with_bounded_labels() {
    let _serial = SERIAL.lock().await;
    let handle = prometheus();
    // A run with retries: one flaky node failing twice.
    let retry = RetryPolicy::attempts(3);
    let engine = Engine::builder(flaky(2, false, retry, Arc::new(AtomicU32::new(0)))).build();
    assert!(engine.run("m-flaky", Trace::default()).await.unwrap().is_completed());
    // A run stopped by a merge conflict.
    let engine = Engine::builder(two_writers()).build();
    assert!(engine.run("m-conflict", Trace::default()).await.is_err());
    // A run paused by backpressure: one admission slot, held by a sleeping run.
    let sleeper = graph_tests::graphs::sleeper(Duration::from_millis(400), NodePolicy::default());
    let engine = Engine::builder(sleeper)
        .options(EngineOptions::default().queue_depth(1).backpressure_timeout(Duration::from_millis(20)))
        .build();
    let busy = tokio::spawn({
        let e = engine.clone();
        async move { e.run("m-busy", Trace::default()).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let paused = engine.run("m-paused", Trace::default()).await.unwrap();
    assert_eq!(paused.status, RunStatus::Paused(PauseReason::Backpressure));
    assert!(busy.await.unwrap().unwrap().is_completed());

    let text = handle.render();
    let flaky = "graph=\"flaky\"";
    assert_eq!(sample(&text, "graph_retries_total", &[flaky, "node=\"flaky\""]), Some(2.0), "{text}");
    // Step 0 (the input) and step 1.
    assert_eq!(sample(&text, "graph_commits_total", &[flaky, "outcome=\"committed\""]), Some(2.0));
    assert_eq!(sample(&text, "graph_node_latency_seconds_count", &[flaky, "node=\"flaky\""]), Some(3.0));
    assert_eq!(sample(&text, "graph_step_latency_seconds_count", &[flaky]), Some(1.0));
    assert_eq!(sample(&text, "graph_commit_latency_seconds_count", &[flaky]), Some(2.0));
    assert_eq!(sample(&text, "graph_merge_conflicts_total", &["graph=\"conflict\""]), Some(1.0));
    assert_eq!(sample(&text, "graph_backpressure_events_total", &["graph=\"sleeper\""]), Some(1.0));
    // Everything that ran has finished: the gauges are back at zero.
    for graph in [flaky, "graph=\"conflict\"", "graph=\"sleeper\""] {
        assert_eq!(sample(&text, "graph_inflight_nodes", &[graph]), Some(0.0), "{graph}");
        assert_eq!(sample(&text, "graph_queue_depth", &[graph]), Some(0.0), "{graph}");
    }
    // No label carries a run id.
    assert!(!text.contains("m-flaky") && !text.contains("run="), "{text}");
}

/// A graph records into the recorder in place when it records: one installed after its first run
/// receives what follows, and so does each of several recorders used one after the other (in a loop,
/// where each sits where the previous one was dropped: a cache of handles by recorder address would
/// keep writing into the dropped one). Gauges go back to zero in the recorder they went up in.
#[test]
fn a_graph_records_into_a_recorder_installed_after_its_first_run() {
    let _serial = SERIAL.blocking_lock();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let engine = Engine::builder(fan()).build();
    assert!(rt.block_on(engine.run("before", Trace::default())).unwrap().is_completed());
    for i in 0..3 {
        // A recorder of this thread only, where the current-thread runtime runs the engine's tasks.
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            assert!(rt.block_on(engine.run(&format!("after-{i}"), Trace::default())).unwrap().is_completed());
        });
        let text = handle.render();
        let fan = "graph=\"fan\"";
        // Step 0 (the input), step 1 (a), step 2 (b and c): this run's only.
        let committed = sample(&text, "graph_commits_total", &[fan, "outcome=\"committed\""]);
        assert_eq!(committed, Some(3.0), "recorder {i}: {text}");
        assert_eq!(sample(&text, "graph_node_latency_seconds_count", &[fan, "node=\"b\""]), Some(1.0));
        assert_eq!(sample(&text, "graph_inflight_nodes", &[fan]), Some(0.0));
        assert_eq!(sample(&text, "graph_queue_depth", &[fan]), Some(0.0));
    }
}

/// a → b, c (one step) → END.
fn fan() -> Graph<Trace> {
    let node = graph_tests::graphs::logs;
    Graph::<Trace>::builder("fan")
        .node("a", node("a"))
        .node("b", node("b"))
        .node("c", node("c"))
        .entry("a")
        .edge("a", "b")
        .edge("a", "c")
        .edge("b", END)
        .edge("c", END)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn spans_export_to_opentelemetry_as_run_step_node() {
    let _serial = SERIAL.lock().await;
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("graph-tests"));
    let subscriber = tracing_subscriber::registry().with(layer);
    let _guard = tracing::subscriber::set_default(subscriber);
    let engine = Engine::builder(fan()).build();
    assert!(engine.run("otel-1", Trace::default()).await.unwrap().is_completed());
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let named = |name: &str| spans.iter().filter(|s| s.name == name).collect::<Vec<_>>();
    let [run] = named("run fan")[..] else {
        panic!("{:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>())
    };
    let steps = named("step 0").into_iter().chain(named("step 1")).collect::<Vec<_>>();
    assert_eq!(steps.len(), 2);
    for step in &steps {
        assert_eq!(step.parent_span_id, run.span_context.span_id(), "a step's parent is its run");
        assert_eq!(step.span_context.trace_id(), run.span_context.trace_id());
    }
    // a ran in step 0; b and c (spawned on tasks of their own) in step 1.
    for (node, step) in [("node a", steps[0]), ("node b", steps[1]), ("node c", steps[1])] {
        let [span] = named(node)[..] else { panic!("{node}") };
        assert_eq!(span.parent_span_id, step.span_context.span_id(), "{node}'s parent is its step");
        let attempt =
            span.attributes.iter().find(|kv| kv.key.as_str() == "attempt").map(|kv| kv.value.to_string());
        assert_eq!(attempt.as_deref(), Some("1"), "{node}");
    }
}
