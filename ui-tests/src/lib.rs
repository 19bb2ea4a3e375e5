//! Compile-time tests for the graph macros live under `tests/`: the failing cases (trybuild:
//! `tests/fail/<topic>/*.rs`, driven by `tests/ui.rs`) and the passing ones (`tests/pass.rs` with the
//! cases of `tests/pass/`, and the crates of `tests/crate_level/`).
