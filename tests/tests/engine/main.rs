//! Engine integration tests: determinism, merge order, joins, concurrency limits, cancellation,
//! retries, timeouts, backpressure, RNG streams, recorded time and UUIDs, typed errors, the event log
//! and audit, effects, interrupts, streaming, submitted runs, canonical bytes, the macro twins, and the
//! engine on a store that fails. One binary, one module per topic.
//!
//! The hand-built graphs shared with the macro twins live in `graph_tests::graphs`.

mod audit;
mod backpressure;
mod cancellation;
mod canonical;
mod composition;
mod concurrency;
mod determinism;
mod effects;
mod errors;
mod faults_engine;
mod interrupts;
mod joins;
mod langgraph;
mod macro_twins;
mod mail;
mod merge_order;
mod recorded;
mod retries;
mod rng;
mod schedules;
mod streaming;
mod submit;
mod timeouts;
mod versions;
