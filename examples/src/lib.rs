//! Runnable example workflows; see `examples/`.
//!
//! The examples' graphs and drivers live here, in one module each, so that `examples/tests/` can run
//! them and check their outcomes; the files in `examples/` parse arguments and print.

pub mod approval;
pub mod composition;
pub mod escalation;
pub mod map_reduce;
pub mod payments;
pub mod research;
pub mod review;
pub mod versioning;
