//! Procedural macros for `graph-runtime`. Use them through the runtime's re-exports.
