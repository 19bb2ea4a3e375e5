//! The checkpoint stores: the store contract (the [`graph_store`] crate, re-exported here whole) and
//! the backends of the enabled features: [`SledStore`] (`sled`, the default), `SqliteStore`
//! (`sqlite`), `PostgresStore` (`postgres`) and `MySqlStore` (`mysql`).
//!
//! # Writing a backend
//!
//! Depend on `graph-store`, implement [`Store`], and run the conformance suite against it (feature
//! `conformance` of `graph-store`, or of this crate: [`conformance`]). See `docs/stores.md`.

pub use graph_store::*;

#[cfg(feature = "sled")]
pub use graph_store_sled::{SledOptions, SledStore};
#[cfg(feature = "mysql")]
pub use graph_store_sql::MySqlStore;
#[cfg(feature = "postgres")]
pub use graph_store_sql::PostgresStore;
#[cfg(feature = "sqlite")]
pub use graph_store_sqlite::{SQLITE_SCHEMA_VERSION, SqliteOptions, SqliteStore};

/// The database-server stores (graph-store-sql): [`PostgresStore`] and [`MySqlStore`], the generic
/// [`server::SqlStore`] under both, and the leases that let workers share their runs.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub mod server {
    pub use graph_store_sql::*;
}

/// The store conformance suite (feature `conformance`): `graph_store::conformance`, and what the SQLite
/// damage tests need of its log.
#[cfg(feature = "conformance")]
pub mod conformance {
    pub use graph_store::conformance::*;
    #[cfg(feature = "sqlite")]
    pub use graph_store_sqlite::log_groups as sqlite_log_groups;
}
