//! Store integration tests: the conformance suite on every backend, the engine on the durable stores,
//! the SQLite store, and (features `postgres`, `mysql`) the server stores and the workers that share
//! their runs. One binary, one module per topic.

mod backup;
mod pool_time;
mod server_hardening;
mod sql_servers;
mod sqlite_store;
mod store_conformance;
mod store_engine;
mod versioning;
mod workers;
