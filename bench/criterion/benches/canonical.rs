//! Criterion benches: `graph_runtime::canonical::to_vec` against `serde_json::to_vec`, on a ~1 KB struct
//! without maps (the hot path: the engine serializes the state every step) and on a struct holding a
//! 100-entry `HashMap` (buffered and sorted).
//!
//! `cargo bench -p graph-bench-criterion --bench canonical`. On a machine shared with other work the load drifts
//! between criterion's separate runs; `--bench canonical_ab` times both back to back instead. The figures
//! are in the module documentation of `graph-runtime/src/canonical.rs`.

#[path = "canonical/fixtures.rs"]
mod fixtures;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use fixtures::{plain, with_map};
use graph_runtime::canonical;

fn serialize(c: &mut Criterion) {
    let plain = plain();
    let len = serde_json::to_vec(&plain).unwrap().len();
    assert!((900..1200).contains(&len), "the plain state is about 1 KB of JSON, not {len} bytes");
    assert_eq!(canonical::to_vec(&plain).unwrap(), serde_json::to_vec(&plain).unwrap());
    let map = with_map();

    let mut g = c.benchmark_group("canonical");
    g.bench_function("plain-1KB/serde_json", |b| b.iter(|| serde_json::to_vec(black_box(&plain)).unwrap()));
    g.bench_function("plain-1KB/canonical", |b| b.iter(|| canonical::to_vec(black_box(&plain)).unwrap()));
    g.bench_function("hashmap-100/serde_json", |b| b.iter(|| serde_json::to_vec(black_box(&map)).unwrap()));
    g.bench_function("hashmap-100/canonical", |b| b.iter(|| canonical::to_vec(black_box(&map)).unwrap()));
    g.finish();
}

criterion_group!(benches, serialize);
criterion_main!(benches);
