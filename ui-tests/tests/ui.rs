//! The macros' compile-time behaviour: every `fail/<topic>/*.rs` must fail with its reviewed `.stderr`
//! (one mistake per file), every `pass/*.rs` must compile and run.
//!
//! Regenerate the expected output with `TRYBUILD=overwrite cargo test -p graph-ui-tests` and review the
//! diff like code.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/pass/*.rs");
    t.compile_fail("tests/fail/*/*.rs");
}
