//! Runnable example workflows; see `examples/`.
