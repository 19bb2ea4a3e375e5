//! Engine integration tests: determinism, merge order, joins, concurrency limits, cancellation,
//! retries, timeouts, backpressure, RNG streams, recorded time and UUIDs, and typed errors. One binary, one module per topic.
//!
//! The hand-built graphs shared with the macro twins live in `graph_tests::graphs`.

mod backpressure;
mod cancellation;
mod concurrency;
mod determinism;
mod errors;
mod joins;
mod langgraph;
mod merge_order;
mod recorded;
mod retries;
mod rng;
mod timeouts;
