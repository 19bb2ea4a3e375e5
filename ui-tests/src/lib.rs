//! Compile-time tests for the graph macros live under `tests/` (trybuild: `fail/<topic>/*.rs`, `pass/*.rs`).
