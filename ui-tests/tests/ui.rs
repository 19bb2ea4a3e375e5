//! The macros' compile-time behaviour: every `fail/<topic>/*.rs` must fail with its reviewed `.stderr`
//! (one mistake per file). The cases that must compile and run are ordinary tests of this crate
//! (`tests/pass.rs`, `tests/crate_level/`): with no pass case, trybuild checks every failing case in one
//! `cargo check` instead of building each one alone.
//!
//! Regenerate the expected output with `TRYBUILD=overwrite cargo test -p graph-ui-tests` and review the
//! diff like code.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/fail/*/*.rs");
}

/// The builder and the macros share one "did you mean" (graph-core): the typo of
/// `fail/graph/unknown-edge-transposed.rs` gets the same suggestion from `Graph::builder`.
#[test]
fn the_builder_and_the_macros_suggest_the_same_name() {
    use graph_runtime::{END, Graph, GraphError, Route};
    let err = Graph::<()>::builder("flow")
        .node("start", |_s, _c| Box::pin(async { Ok(((), Route::Declared)) }))
        .node("plan", |_s, _c| Box::pin(async { Ok(((), Route::Declared)) }))
        .entry("start")
        .edge("start", "lpan")
        .edge("plan", END)
        .build()
        .unwrap_err();
    let GraphError::UnknownNode { suggestion: Some(builder), .. } = &err else { panic!("{err:?}") };
    let stderr = std::fs::read_to_string("tests/fail/graph/unknown-edge-transposed.stderr").unwrap();
    assert!(stderr.contains(&format!("did you mean `{builder}`?")), "builder: {builder}; macros: {stderr}");
    assert_eq!(builder, "plan");
}
