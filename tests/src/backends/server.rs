//! What the database-server backends share: unique database names, URLs, async work in `Drop`, and
//! the backend type itself ([`server_backend!`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// A database name no other test (of this or another process) uses: `prefix_pid_counter_nanos`.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{prefix}_{}_{}_{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// `url` with its database (the path) replaced by `database`; the query string is kept.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[scheme_end..].find('/') {
        Some(slash) => &base[..scheme_end + slash],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{database}?{q}"),
        None => format!("{base}/{database}"),
    }
}

/// Runs `work` to completion on a runtime of its own, on a thread of its own (from `Drop`, inside or
/// outside a runtime); a failure is printed, never a panic.
pub fn on_own_runtime<F, E>(work: F)
where
    F: std::future::Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let done = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        rt.block_on(work)
    })
    .join();
    match done {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("cleaning up a test database failed: {e}"),
        Err(_) => eprintln!("cleaning up a test database panicked"),
    }
}

/// A database-server backend: a database of its own on the test server (`$server_url()`), created at
/// the first open and dropped with the backend, with its [`conformance::Backend`](graph_runtime::store::conformance::Backend)
/// and [`RawAccess`](super::RawAccess) implementations. The backends differ in their sqlx types, the
/// variable naming the server, how a database name is quoted and how a database in use is dropped.
macro_rules! server_backend {
    (
        $(#[$doc:meta])*
        $name:ident {
            store: $store:ty,
            options: $options:ty,
            pool: $pool:ty,
            connection: $connection:ty,
            server: $server:literal,
            url_var: $url_var:literal,
            create: $create:literal,
            drop: $drop:literal $(,)?
        }
    ) => {
        $(#[$doc])*
        pub struct $name {
            server: String,
            name: String,
            created: tokio::sync::OnceCell<()>,
        }

        impl $name {
            /// A fresh database (created when first opened).
            pub fn new() -> Self {
                $name {
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
            pub fn options(&self) -> $options {
                <$options as std::str::FromStr>::from_str(&self.server)
                    .unwrap_or_else(|e| panic!("{} `{}` is not a URL: {e}", $url_var, self.server))
                    .database(&self.name)
            }

            /// The URL of the database (the server's URL with this database's name).
            pub fn url(&self) -> String {
                super::with_database(&self.server, &self.name)
            }

            /// Creates the database (once).
            pub async fn create(&self) {
                use graph_runtime::store::server::sqlx::{self, Connection};
                self.created
                    .get_or_init(|| async {
                        let mut admin = <$connection>::connect(&self.server).await.unwrap_or_else(|e| {
                            panic!("cannot reach the {} test server at {}: {e}; {HOW_TO_START}", $server, self.server)
                        });
                        sqlx::query(sqlx::AssertSqlSafe(format!($create, self.name)))
                            .execute(&mut admin)
                            .await
                            .unwrap_or_else(|e| panic!("CREATE DATABASE {} on {}: {e}", self.name, self.server));
                        let _ = admin.close().await;
                    })
                    .await;
            }

            /// Connects a store to the database (creating it first), with `pool` options.
            pub async fn connect_with(&self, pool: $pool) -> Result<$store, graph_runtime::StoreError> {
                self.create().await;
                <$store>::connect_with(self.options(), pool).await
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                use graph_runtime::store::server::sqlx::{self, Connection};
                if self.created.get().is_none() {
                    return;
                }
                let (server, name) = (self.server.clone(), self.name.clone());
                super::on_own_runtime(async move {
                    let mut admin = <$connection>::connect(&server).await?;
                    sqlx::query(sqlx::AssertSqlSafe(format!($drop, name))).execute(&mut admin).await?;
                    admin.close().await
                });
            }
        }

        impl graph_runtime::store::conformance::Backend for $name {
            type Store = $store;
            async fn open(&self) -> $store {
                self.connect_with(<$store>::pool_options())
                    .await
                    .unwrap_or_else(|e| panic!("connect to {} ({}): {e}; {HOW_TO_START}", self.server, self.name))
            }
            async fn reopen(&self, store: $store) -> $store {
                store.close().await;
                drop(store);
                self.open().await
            }
            fn fail_point(store: &$store) -> graph_runtime::store::FailPoint {
                store.fail_point().clone()
            }
        }

        impl super::RawAccess for $name {
            async fn raw_checkpoint(
                store: &$store,
                run: &str,
                step: u64,
            ) -> Result<Option<Vec<u8>>, graph_runtime::StoreError> {
                store.raw_checkpoint(run, step).await
            }
            async fn put_raw_checkpoint(
                store: &$store,
                run: &str,
                step: u64,
                bytes: &[u8],
            ) -> Result<(), graph_runtime::StoreError> {
                store.put_raw_checkpoint(run, step, bytes).await
            }
            async fn remove_checkpoint(
                store: &$store,
                run: &str,
                step: u64,
            ) -> Result<(), graph_runtime::StoreError> {
                store.remove_raw_checkpoint(run, step).await
            }
        }
    };
}
pub(super) use server_backend;
