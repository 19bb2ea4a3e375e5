//! The delta's setters: `field(value)` takes `impl Into<T>` (`.verdict("x")` writes a `String`,
//! `.last("x".to_string())` an `Option<String>`, an array a set), except for the numeric primitives and
//! `bool` and an `Option` of one, which take `T` itself so that an integer literal gets the field's type
//! (`.n(1)` with `n: u64`). An `append` field also has `push_<field>(item)`, which appends one item to
//! the written part where `field(value)` replaces it: `impl Into<T>` for `Vec<T>` and `VecDeque<T>` (the
//! element itself for numbers), `impl Into<String>` (`&str`, `String`, `char`) for a `String`.
#![deny(warnings)]

use std::collections::{BTreeSet, VecDeque};

use graph_runtime::prelude::*;
use graph_runtime::state::Strategy;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Review {
    pub verdict: String,
    pub last: Option<String>,
    #[reduce(sum)]
    pub n: u64,
    #[reduce(max)]
    pub score: f64,
    pub done: bool,
    pub retries: Option<u32>,
    pub limit: std::primitive::u16,
    #[reduce(union)]
    pub labels: BTreeSet<String>,
    #[reduce(append)]
    pub findings: Vec<String>,
    #[reduce(append)]
    pub sizes: Vec<u64>,
    #[reduce(append)]
    pub queue: VecDeque<char>,
    #[reduce(append)]
    pub transcript: String,
}

fn main() {
    let d = ReviewDelta::default()
        .verdict("approved")
        .last("x".to_string())
        .n(1)
        .score(0.5)
        .done(true)
        .retries(Some(3))
        .limit(7)
        .labels(["style".to_owned()])
        .push_findings("naming")
        .push_findings(format!("unchecked input in {}", "parse"))
        .push_sizes(10)
        .push_sizes(20)
        .push_queue('a')
        .push_transcript("hello")
        .push_transcript(' ')
        .push_transcript(String::from("world"));
    assert_eq!(d.verdict.as_deref(), Some("approved"));
    assert_eq!(d.last, Some(Some("x".to_owned())));
    assert_eq!(
        (d.n, d.score, d.done, d.retries, d.limit),
        (Some(1), Some(0.5), Some(true), Some(Some(3)), Some(7))
    );
    assert_eq!(d.findings, Some(vec!["naming".to_owned(), "unchecked input in parse".to_owned()]));
    assert_eq!(d.sizes, Some(vec![10, 20]));
    assert_eq!(d.queue, Some(VecDeque::from(['a'])));
    assert_eq!(d.transcript.as_deref(), Some("hello world"));

    // `field(value)` replaces the written part, pushes after it append to it.
    let d = ReviewDelta::default().push_findings("a").findings(vec!["b".to_owned()]).push_findings("c");
    assert_eq!(d.findings, Some(vec!["b".to_owned(), "c".to_owned()]));
    let mut writes = Vec::new();
    d.writes(&mut |w| writes.push((w.field, w.strategy)));
    assert_eq!(writes, [("findings", Strategy::Append)], "a push writes the field like its setter");

    // Merged like any delta: the pushed items are appended to the state's.
    let mut state =
        Review { findings: vec!["old".to_owned()], transcript: "> ".to_owned(), ..Review::default() };
    state.apply(ReviewDelta::default().push_findings("new").push_transcript("hi")).unwrap();
    assert_eq!(state.findings, ["old", "new"]);
    assert_eq!(state.transcript, "> hi");
}

/// The case as a test: it compiles as a crate of its own and `main` runs to its assertions.
#[test]
fn compiles_and_runs() {
    main();
}
