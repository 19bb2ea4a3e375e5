//! Every store backend the tests run on, behind one trait, so a test family is written once and
//! instantiated per backend with [`for_backends!`](crate::for_backends).
//!
//! A backend is a [`conformance::Backend`] (open, reopen, fail point) plus [`RawAccess`]: reading and
//! overwriting a checkpoint's stored bytes, which the corruption tests need. Each backend owns its data
//! (a temporary directory, a database of its own) and removes it when dropped, so tests run in parallel
//! and leave nothing behind.

#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod server;

#[cfg(feature = "mysql")]
pub use mysql::MySql;
#[cfg(feature = "postgres")]
pub use postgres::Postgres;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub use server::{on_own_runtime, unique_name, with_database};
/// The test servers' URLs and how to start them.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub mod servers {
    #[cfg(feature = "mysql")]
    pub use super::mysql::{HOW_TO_START as MYSQL_HOW_TO_START, server_url as mysql_url};
    #[cfg(feature = "postgres")]
    pub use super::postgres::{HOW_TO_START as POSTGRES_HOW_TO_START, server_url as postgres_url};
}

use graph_runtime::store::SledStore;
use graph_runtime::store::conformance;
use graph_runtime::{MemoryStore, StoreError};

#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
pub use sqlite::Sqlite;

/// A store opened from a spec by [`open_spec`]: the crash tests' child processes are told which store to
/// use this way.
pub enum SpecStore {
    /// `sled:<folder>` (or a plain path).
    Sled(SledStore),
    /// `sqlite:<database file>`.
    #[cfg(feature = "sqlite")]
    Sqlite(graph_runtime::store::SqliteStore),
    /// `postgres:<database URL>`.
    #[cfg(feature = "postgres")]
    Postgres(graph_runtime::store::PostgresStore),
}

impl SpecStore {
    /// The store as a shared trait object.
    pub fn shared(self) -> std::sync::Arc<dyn graph_runtime::Store> {
        match self {
            SpecStore::Sled(s) => std::sync::Arc::new(s),
            #[cfg(feature = "sqlite")]
            SpecStore::Sqlite(s) => std::sync::Arc::new(s),
            #[cfg(feature = "postgres")]
            SpecStore::Postgres(s) => std::sync::Arc::new(s),
        }
    }
}

/// Opens the store `spec` names: `sled:<folder>`, `sqlite:<database file>`, `sqlite-async:<database
/// file>` (`Durability::Async`), `postgres:<database URL>`, or a plain path (a sled folder, as the crash
/// children were first called).
///
/// # Errors
///
/// The store's own open errors; `Backend` for a spec of a backend this build lacks.
pub async fn open_spec(spec: &str) -> Result<SpecStore, StoreError> {
    match spec.split_once(':') {
        #[cfg(feature = "postgres")]
        Some(("postgres", url)) => {
            Ok(SpecStore::Postgres(graph_runtime::store::PostgresStore::connect(url).await?))
        }
        #[cfg(not(feature = "postgres"))]
        Some(("postgres", _)) => {
            Err(StoreError::backend("no PostgreSQL store", "graph-tests built without `postgres`"))
        }
        Some(("sled", dir)) => Ok(SpecStore::Sled(SledStore::open(dir)?)),
        #[cfg(feature = "sqlite")]
        Some(("sqlite", file)) => Ok(SpecStore::Sqlite(graph_runtime::store::SqliteStore::open(file)?)),
        #[cfg(feature = "sqlite")]
        Some(("sqlite-async", file)) => {
            use graph_runtime::store::{Durability, SqliteOptions, SqliteStore};
            let options = SqliteOptions::default().durability(Durability::Async);
            Ok(SpecStore::Sqlite(SqliteStore::open_with(file, options)?))
        }
        #[cfg(not(feature = "sqlite"))]
        Some(("sqlite" | "sqlite-async", _)) => {
            Err(StoreError::backend("no SQLite store", "graph-tests built without `sqlite`"))
        }
        _ => Ok(SpecStore::Sled(SledStore::open(spec)?)),
    }
}

/// Reading and writing a checkpoint's stored bytes (the envelope the store keeps), for corruption
/// tests. `None` from [`RawAccess::raw_checkpoint`] when the backend keeps no bytes (the memory store).
pub trait RawAccess: conformance::Backend {
    /// The stored bytes of a checkpoint.
    fn raw_checkpoint(
        store: &Self::Store,
        run: &str,
        step: u64,
    ) -> impl std::future::Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send;
    /// Overwrites the stored bytes of a checkpoint.
    fn put_raw_checkpoint(
        store: &Self::Store,
        run: &str,
        step: u64,
        bytes: &[u8],
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send;
    /// Deletes a checkpoint as damage that loses it would: the run row and the event log still name
    /// its commit.
    fn remove_checkpoint(
        store: &Self::Store,
        run: &str,
        step: u64,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send;
}

/// The in-memory model store.
#[derive(Default)]
pub struct Memory(MemoryStore);

impl Memory {
    /// A fresh memory store.
    pub fn new() -> Self {
        Memory(MemoryStore::new())
    }
}

impl conformance::Backend for Memory {
    type Store = MemoryStore;
    async fn open(&self) -> MemoryStore {
        self.0.clone()
    }
    async fn reopen(&self, store: MemoryStore) -> MemoryStore {
        drop(store);
        self.0.clone()
    }
    fn fail_point(store: &MemoryStore) -> graph_runtime::store::FailPoint {
        store.fail_point().clone()
    }
}

/// The sled store in a temporary directory.
pub struct Sled(tempfile::TempDir);

impl Sled {
    /// A fresh, empty directory.
    pub fn new() -> Self {
        Sled(tempfile::tempdir().expect("a temporary directory"))
    }
}

impl Default for Sled {
    fn default() -> Self {
        Self::new()
    }
}

impl conformance::Backend for Sled {
    type Store = SledStore;
    async fn open(&self) -> SledStore {
        SledStore::open(self.0.path()).expect("open the sled store")
    }
    async fn reopen(&self, store: SledStore) -> SledStore {
        drop(store);
        self.open().await
    }
    fn fail_point(store: &SledStore) -> graph_runtime::store::FailPoint {
        store.fail_point().clone()
    }
}

impl RawAccess for Sled {
    async fn raw_checkpoint(store: &SledStore, run: &str, step: u64) -> Result<Option<Vec<u8>>, StoreError> {
        store.raw_checkpoint(run, step)
    }
    async fn put_raw_checkpoint(
        store: &SledStore,
        run: &str,
        step: u64,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        store.put_raw_checkpoint(run, step, bytes)
    }
    async fn remove_checkpoint(store: &SledStore, run: &str, step: u64) -> Result<(), StoreError> {
        store.remove_from_index(run, step)
    }
}

/// Instantiates test families once per backend: for each `module => constructor`, a module of
/// `#[tokio::test]`s (multi-threaded runtime), one per family, each calling
/// `prefix::family(&constructor).await`. `prefix` is a module in scope of the invoking file (`suite` for
/// the conformance suite) or `super` for families written in that file. An entry may carry attributes
/// (`#[cfg(feature = "postgres")] postgres => …`), put on its module.
///
/// ```ignore
/// graph_tests::for_backends! {
///     suite: [concurrent_same_key, version_conflicts];
///     memory => graph_tests::backends::Memory::new(),
///     sled => graph_tests::backends::Sled::new(),
/// }
/// ```
#[macro_export]
macro_rules! for_backends {
    ($prefix:ident: $families:tt; $($(#[$attr:meta])* $module:ident => $ctor:expr),+ $(,)?) => {
        $($crate::for_backends!(@module $prefix $families [$(#[$attr])*] $module $ctor);)+
    };
    (@module $prefix:ident [$($family:ident),* $(,)?] [$(#[$attr:meta])*] $module:ident $ctor:expr) => {
        $(#[$attr])*
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $family() {
                $prefix::$family(&$ctor).await;
            })*
        }
    };
}
