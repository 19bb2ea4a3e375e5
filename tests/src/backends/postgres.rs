//! The PostgreSQL store on a database of its own (feature `postgres`).

use std::str::FromStr;

use graph_runtime::StoreError;
use graph_runtime::store::PostgresStore;
use graph_runtime::store::conformance;
use graph_runtime::store::server::sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use graph_runtime::store::server::sqlx::{self, Connection};

use super::RawAccess;

/// The server the tests use: `GRAPH_TEST_POSTGRES_URL`, by default the local one.
pub fn server_url() -> String {
    std::env::var("GRAPH_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// How to start the local server, for the message of a test that cannot reach it.
pub const HOW_TO_START: &str = "start it with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, \
     or point GRAPH_TEST_POSTGRES_URL at another server (a superuser: the tests create databases)";

/// A database of its own on the test server, created at the first open and dropped with the backend.
pub struct Postgres {
    server: String,
    name: String,
    created: tokio::sync::OnceCell<()>,
}

impl Postgres {
    /// A fresh database (created when first opened).
    pub fn new() -> Self {
        Postgres {
            server: server_url(),
            name: super::unique_name("graph_test"),
            created: tokio::sync::OnceCell::new(),
        }
    }

    /// The database's name.
    pub fn database(&self) -> &str {
        &self.name
    }

    /// The connection options of the database.
    pub fn options(&self) -> PgConnectOptions {
        PgConnectOptions::from_str(&self.server)
            .unwrap_or_else(|e| panic!("GRAPH_TEST_POSTGRES_URL `{}` is not a URL: {e}", self.server))
            .database(&self.name)
    }

    /// The URL of the database (the server's URL with this database's name).
    pub fn url(&self) -> String {
        super::with_database(&self.server, &self.name)
    }

    /// Creates the database (once).
    pub async fn create(&self) {
        self.created
            .get_or_init(|| async {
                let mut admin = sqlx::PgConnection::connect(&self.server).await.unwrap_or_else(|e| {
                    panic!("cannot reach the PostgreSQL test server at {}: {e}; {HOW_TO_START}", self.server)
                });
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{}\"", self.name)))
                    .execute(&mut admin)
                    .await
                    .unwrap_or_else(|e| panic!("CREATE DATABASE {} on {}: {e}", self.name, self.server));
                let _ = admin.close().await;
            })
            .await;
    }

    /// Connects a store to the database (creating it first), with `pool` options.
    pub async fn connect_with(&self, pool: PgPoolOptions) -> Result<PostgresStore, StoreError> {
        self.create().await;
        PostgresStore::connect_with(self.options(), pool).await
    }
}

impl Default for Postgres {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.created.get().is_none() {
            return;
        }
        let (server, name) = (self.server.clone(), self.name.clone());
        super::on_own_runtime(async move {
            let mut admin = sqlx::PgConnection::connect(&server).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")))
                .execute(&mut admin)
                .await?;
            admin.close().await
        });
    }
}

impl conformance::Backend for Postgres {
    type Store = PostgresStore;
    async fn open(&self) -> PostgresStore {
        self.connect_with(PostgresStore::pool_options())
            .await
            .unwrap_or_else(|e| panic!("connect to {} ({}): {e}; {HOW_TO_START}", self.server, self.name))
    }
    async fn reopen(&self, store: PostgresStore) -> PostgresStore {
        store.close().await;
        drop(store);
        self.open().await
    }
    fn fail_point(store: &PostgresStore) -> graph_runtime::store::FailPoint {
        store.fail_point().clone()
    }
}

impl RawAccess for Postgres {
    async fn raw_checkpoint(
        store: &PostgresStore,
        run: &str,
        step: u64,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        store.raw_checkpoint(run, step).await
    }
    async fn put_raw_checkpoint(
        store: &PostgresStore,
        run: &str,
        step: u64,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        store.put_raw_checkpoint(run, step, bytes).await
    }
}
