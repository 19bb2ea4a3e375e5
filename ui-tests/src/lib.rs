//! Compile-time tests for the graph macros live under `tests/` (trybuild: `tests/fail/<topic>/*.rs`,
//! `tests/pass/*.rs`), driven by `tests/ui.rs`.
