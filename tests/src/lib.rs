//! Integration tests for graph-runtime live under `tests/`; shared helpers are here.
