//! The MySQL / MariaDB store on a database of its own (feature `mysql`).

use std::str::FromStr;

use graph_runtime::StoreError;
use graph_runtime::store::MySqlStore;
use graph_runtime::store::conformance;
use graph_runtime::store::server::sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use graph_runtime::store::server::sqlx::{self, Connection};

use super::RawAccess;

/// The server the tests use: `GRAPH_TEST_MYSQL_URL`, by default the local one.
pub fn server_url() -> String {
    std::env::var("GRAPH_TEST_MYSQL_URL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

/// How to start the local server, for the message of a test that cannot reach it.
pub const HOW_TO_START: &str = "start it with `start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`, \
     or point GRAPH_TEST_MYSQL_URL at another server (a user that may create databases)";

/// A database of its own on the test server, created at the first open and dropped with the backend.
pub struct MySql {
    server: String,
    name: String,
    created: tokio::sync::OnceCell<()>,
}

impl MySql {
    /// A fresh database (created when first opened).
    pub fn new() -> Self {
        MySql {
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
    pub fn options(&self) -> MySqlConnectOptions {
        MySqlConnectOptions::from_str(&self.server)
            .unwrap_or_else(|e| panic!("GRAPH_TEST_MYSQL_URL `{}` is not a URL: {e}", self.server))
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
                let mut admin = sqlx::MySqlConnection::connect(&self.server).await.unwrap_or_else(|e| {
                    panic!("cannot reach the MySQL test server at {}: {e}; {HOW_TO_START}", self.server)
                });
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{}`", self.name)))
                    .execute(&mut admin)
                    .await
                    .unwrap_or_else(|e| panic!("CREATE DATABASE {} on {}: {e}", self.name, self.server));
                let _ = admin.close().await;
            })
            .await;
    }

    /// Connects a store to the database (creating it first), with `pool` options.
    pub async fn connect_with(&self, pool: MySqlPoolOptions) -> Result<MySqlStore, StoreError> {
        self.create().await;
        MySqlStore::connect_with(self.options(), pool).await
    }
}

impl Default for MySql {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for MySql {
    fn drop(&mut self) {
        if self.created.get().is_none() {
            return;
        }
        let (server, name) = (self.server.clone(), self.name.clone());
        super::on_own_runtime(async move {
            let mut admin = sqlx::MySqlConnection::connect(&server).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{name}`")))
                .execute(&mut admin)
                .await?;
            admin.close().await
        });
    }
}

impl conformance::Backend for MySql {
    type Store = MySqlStore;
    async fn open(&self) -> MySqlStore {
        self.connect_with(MySqlStore::pool_options())
            .await
            .unwrap_or_else(|e| panic!("connect to {} ({}): {e}; {HOW_TO_START}", self.server, self.name))
    }
    async fn reopen(&self, store: MySqlStore) -> MySqlStore {
        store.close().await;
        drop(store);
        self.open().await
    }
    fn fail_point(store: &MySqlStore) -> graph_runtime::store::FailPoint {
        store.fail_point().clone()
    }
}

impl RawAccess for MySql {
    async fn raw_checkpoint(store: &MySqlStore, run: &str, step: u64) -> Result<Option<Vec<u8>>, StoreError> {
        store.raw_checkpoint(run, step).await
    }
    async fn put_raw_checkpoint(
        store: &MySqlStore,
        run: &str,
        step: u64,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        store.put_raw_checkpoint(run, step, bytes).await
    }
}
