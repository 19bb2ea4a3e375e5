//! Criterion benches: per-step and per-activation overhead on the memory and sled stores.
//!
//! `cargo bench -p graph-bench-criterion` — the side-by-side comparison with LangGraph is `bench/compare.sh`.

use criterion::{Criterion, criterion_group, criterion_main};
use graph_bench::{Count, Fan, fanout_graph, loop_graph};
use graph_runtime::store::{Durability, SledOptions, SledStore};
use graph_runtime::{Engine, EngineOptions};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn engine_loop(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("loop-1000-steps");
    g.sample_size(20);
    let engine = Engine::builder(loop_graph(1000)).build();
    let mut i = 0u64;
    g.bench_function("memory", |b| {
        b.to_async(&rt).iter(|| {
            i += 1;
            let engine = engine.clone();
            async move { engine.run(&format!("l{i}"), Count::default()).await.unwrap() }
        })
    });
    let dir = tempfile::tempdir().unwrap();
    let store =
        SledStore::open_with(dir.path(), SledOptions::default().durability(Durability::Async)).unwrap();
    let engine = Engine::builder(loop_graph(1000)).store(store).build();
    g.bench_function("sled-async", |b| {
        b.to_async(&rt).iter(|| {
            i += 1;
            let engine = engine.clone();
            async move { engine.run(&format!("s{i}"), Count::default()).await.unwrap() }
        })
    });
    g.finish();
}

fn engine_fanout(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("fanout-1000-branches");
    g.sample_size(20);
    let engine = Engine::builder(fanout_graph(1000))
        .options(EngineOptions::default().max_concurrent_nodes(64))
        .build();
    let mut i = 0u64;
    g.bench_function("memory", |b| {
        b.to_async(&rt).iter(|| {
            i += 1;
            let engine = engine.clone();
            async move { engine.run(&format!("f{i}"), Fan::default()).await.unwrap() }
        })
    });
    g.finish();
}

fn durable_commits(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("durable-loop-20-steps");
    g.sample_size(10);
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    let engine = Engine::builder(loop_graph(20)).store(store).build();
    let mut i = 0u64;
    g.bench_function("sled-sync", |b| {
        b.to_async(&rt).iter(|| {
            i += 1;
            let engine = engine.clone();
            async move { engine.run(&format!("d{i}"), Count::default()).await.unwrap() }
        })
    });
    g.finish();
}

criterion_group!(benches, engine_loop, engine_fanout, durable_commits);
criterion_main!(benches);
