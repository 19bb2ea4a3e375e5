//! The values both canonical benches serialize.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

/// One review finding.
#[derive(Serialize)]
pub(crate) struct Finding {
    file: String,
    line: u32,
    severity: u8,
    message: String,
    fixed: Option<bool>,
}

/// A review state of about 1 KB of JSON, without maps.
#[derive(Serialize)]
pub(crate) struct Plain {
    run: String,
    step: u64,
    pr: String,
    tokens: u64,
    score: f64,
    approved: Option<bool>,
    findings: Vec<Finding>,
    history: Vec<u64>,
}

/// A state whose bulk is a `HashMap` of 100 entries.
#[derive(Serialize)]
pub(crate) struct WithMap {
    run: String,
    step: u64,
    counts: HashMap<String, u64>,
}

pub(crate) fn plain() -> Plain {
    Plain {
        run: "run-0001".into(),
        step: 42,
        pr: "https://example.invalid/org/repo/pull/1234".into(),
        tokens: 123_456,
        score: 0.8125,
        approved: None,
        findings: (0..5)
            .map(|i| Finding {
                file: format!("src/module_{i}/handler.rs"),
                line: 100 + i * 17,
                severity: (i % 3) as u8,
                message: format!("value is cloned on every call; borrow it instead (finding {i})"),
                fixed: if i % 2 == 0 { Some(false) } else { None },
            })
            .collect(),
        history: (0..20).map(|i| i * 1_000_003).collect(),
    }
}

/// The same entries in a `BTreeMap`: a map whose entries come in sorted order.
#[derive(Serialize)]
#[allow(dead_code)] // used by `canonical_ab` only
pub(crate) struct WithSortedMap {
    run: String,
    step: u64,
    counts: BTreeMap<String, u64>,
}

#[allow(dead_code)] // used by `canonical_ab` only
pub(crate) fn with_sorted_map() -> WithSortedMap {
    let WithMap { run, step, counts } = with_map();
    WithSortedMap { run, step, counts: counts.into_iter().collect() }
}

pub(crate) fn with_map() -> WithMap {
    WithMap {
        run: "run-0001".into(),
        step: 42,
        counts: (0..100u64).map(|i| (format!("node-{i:03}"), i * 7919)).collect(),
    }
}
