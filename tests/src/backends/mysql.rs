//! The MySQL / MariaDB store on a database of its own (feature `mysql`).

use graph_runtime::store::MySqlStore;
use graph_runtime::store::server::sqlx::MySqlConnection;
use graph_runtime::store::server::sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};

/// The server the tests use: `GRAPH_TEST_MYSQL_URL`, by default the local one.
pub fn server_url() -> String {
    std::env::var("GRAPH_TEST_MYSQL_URL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

/// How to start the local server, for the message of a test that cannot reach it.
pub const HOW_TO_START: &str = "start it with `start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`, \
     or point GRAPH_TEST_MYSQL_URL at another server (a user that may create databases)";

super::server::server_backend! {
    /// A database of its own on the test server, created at the first open and dropped with the backend.
    MySql {
        store: MySqlStore,
        options: MySqlConnectOptions,
        pool: MySqlPoolOptions,
        connection: MySqlConnection,
        server: "MySQL",
        url_var: "GRAPH_TEST_MYSQL_URL",
        create: "CREATE DATABASE `{}`",
        drop: "DROP DATABASE IF EXISTS `{}`",
    }
}
