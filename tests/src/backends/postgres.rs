//! The PostgreSQL store on a database of its own (feature `postgres`).

use graph_runtime::store::PostgresStore;
use graph_runtime::store::server::sqlx::PgConnection;
use graph_runtime::store::server::sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// The server the tests use: `GRAPH_TEST_POSTGRES_URL`, by default the local one.
pub fn server_url() -> String {
    std::env::var("GRAPH_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// How to start the local server, for the message of a test that cannot reach it.
pub const HOW_TO_START: &str = "start it with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, \
     or point GRAPH_TEST_POSTGRES_URL at another server (a superuser: the tests create databases)";

super::server::server_backend! {
    /// A database of its own on the test server, created at the first open and dropped with the backend.
    Postgres {
        store: PostgresStore,
        options: PgConnectOptions,
        pool: PgPoolOptions,
        connection: PgConnection,
        server: "PostgreSQL",
        url_var: "GRAPH_TEST_POSTGRES_URL",
        create: "CREATE DATABASE \"{}\"",
        drop: "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
    }
}
