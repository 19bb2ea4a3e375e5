//! What the test files of this package share: a database of a test's own on the local PostgreSQL.

/// A database created for one test on the PostgreSQL server at `GRAPH_TEST_POSTGRES_URL` (by default
/// the local one), dropped when this is dropped (also when the test panics).
#[cfg(feature = "postgres")]
pub(crate) struct PostgresDatabase {
    /// The database's URL.
    pub(crate) url: String,
    server: String,
    name: String,
}

#[cfg(feature = "postgres")]
impl PostgresDatabase {
    /// The database `{prefix}_{process id}`, created afresh (one left by an earlier run dropped first).
    pub(crate) fn create(prefix: &str) -> Self {
        let server = std::env::var("GRAPH_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let name = format!("{prefix}_{}", std::process::id());
        let base = server.split('?').next().unwrap_or(&server);
        let url = format!("{}/{name}", &base[..base.rfind('/').expect("a URL with a database")]);
        let db = PostgresDatabase { url, server, name };
        db.admin(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", db.name));
        db.admin(&format!("CREATE DATABASE {}", db.name));
        db
    }

    fn admin(&self, sql: &str) {
        use graph_runtime::store::server::sqlx::{self, Connection};
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mut c = sqlx::PgConnection::connect(&self.server)
                .await
                .unwrap_or_else(|e| panic!("cannot reach PostgreSQL at {}: {e}", self.server));
            sqlx::query(sqlx::AssertSqlSafe(sql.to_owned())).execute(&mut c).await.unwrap();
        })
    }
}

#[cfg(feature = "postgres")]
impl Drop for PostgresDatabase {
    fn drop(&mut self) {
        self.admin(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
    }
}
