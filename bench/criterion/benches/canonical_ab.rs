//! Interleaved A/B of `graph_runtime::canonical::to_vec` against `serde_json::to_vec` on the values of the
//! `canonical` criterion bench: each round times both back to back, alternating which goes first, so load
//! from other work on the machine hits both alike; the median of the per-round ratios is the figure.
//!
//! `cargo bench -p graph-bench-criterion --bench canonical_ab`

#[path = "canonical/fixtures.rs"]
mod fixtures;

use std::hint::black_box;
use std::time::Instant;

use fixtures::{plain, with_map, with_sorted_map};
use graph_runtime::canonical;

/// Median ns/op of `a` and of `b`, and the median of the per-round ratios `b / a`.
fn interleaved(a: &dyn Fn(), b: &dyn Fn(), iters: u32, rounds: usize) -> (f64, f64, f64) {
    let time = |f: &dyn Fn()| {
        let start = Instant::now();
        for _ in 0..iters {
            f();
        }
        start.elapsed().as_nanos() as f64 / f64::from(iters)
    };
    for _ in 0..iters {
        a();
        b();
    }
    let (mut ta, mut tb, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (x, y) = if round % 2 == 0 {
            let x = time(a);
            (x, time(b))
        } else {
            let y = time(b);
            (time(a), y)
        };
        ta.push(x);
        tb.push(y);
        ratios.push(y / x);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(&mut ta), median(&mut tb), median(&mut ratios))
}

fn ab() {
    let plain = plain();
    let map = with_map();
    println!("interleaved A/B, 400 rounds (median ns/op; median of per-round ratios):");
    let (a, b, r) = interleaved(
        &|| drop(black_box(serde_json::to_vec(black_box(&plain)).unwrap())),
        &|| drop(black_box(canonical::to_vec(black_box(&plain)).unwrap())),
        2_000,
        400,
    );
    println!("  plain-1KB    serde_json {a:7.0} ns  canonical {b:7.0} ns  ratio {r:.2}");
    let (a, b, r) = interleaved(
        &|| drop(black_box(serde_json::to_vec(black_box(&map)).unwrap())),
        &|| drop(black_box(canonical::to_vec(black_box(&map)).unwrap())),
        1_000,
        400,
    );
    println!("  hashmap-100  serde_json {a:7.0} ns  canonical {b:7.0} ns  ratio {r:.2}");
    let sorted = with_sorted_map();
    let (a, b, r) = interleaved(
        &|| drop(black_box(serde_json::to_vec(black_box(&sorted)).unwrap())),
        &|| drop(black_box(canonical::to_vec(black_box(&sorted)).unwrap())),
        1_000,
        400,
    );
    println!("  btreemap-100 serde_json {a:7.0} ns  canonical {b:7.0} ns  ratio {r:.2}");
}

fn main() {
    // `cargo test --benches` runs bench targets without `--bench`: build-check only, no timing.
    if std::env::args().any(|a| a == "--bench") {
        ab();
    }
}
