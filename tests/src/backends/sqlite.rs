//! The SQLite store in a temporary directory (feature `sqlite`).

use graph_runtime::StoreError;
use graph_runtime::store::{SqliteOptions, SqliteStore, conformance};

use super::RawAccess;

/// The SQLite store, its database file in a temporary directory.
pub struct Sqlite(tempfile::TempDir, SqliteOptions);

impl Sqlite {
    /// A fresh, empty directory; the store opens with the default options.
    pub fn new() -> Self {
        Self::with(SqliteOptions::default())
    }

    /// A fresh, empty directory; the store opens with `options`.
    pub fn with(options: SqliteOptions) -> Self {
        Sqlite(tempfile::tempdir().expect("a temporary directory"), options)
    }

    /// The database file.
    pub fn file(&self) -> std::path::PathBuf {
        self.0.path().join("store.sqlite")
    }
}

impl Default for Sqlite {
    fn default() -> Self {
        Self::new()
    }
}

impl conformance::Backend for Sqlite {
    type Store = SqliteStore;
    async fn open(&self) -> SqliteStore {
        SqliteStore::open_with(self.file(), self.1.clone()).expect("open the SQLite store")
    }
    async fn reopen(&self, store: SqliteStore) -> SqliteStore {
        drop(store);
        self.open().await
    }
    fn fail_point(store: &SqliteStore) -> graph_runtime::store::FailPoint {
        store.fail_point().clone()
    }
}

impl RawAccess for Sqlite {
    async fn raw_checkpoint(
        store: &SqliteStore,
        run: &str,
        step: u64,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        store.raw_checkpoint(run, step).await
    }
    async fn put_raw_checkpoint(
        store: &SqliteStore,
        run: &str,
        step: u64,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        store.put_raw_checkpoint(run, step, bytes).await
    }
    async fn remove_checkpoint(store: &SqliteStore, run: &str, step: u64) -> Result<(), StoreError> {
        store.remove_raw_checkpoint(run, step).await
    }
}
