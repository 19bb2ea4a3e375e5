//! The database-server stores when the server goes away: connections killed by the server mid-run
//! (`pg_terminate_backend`, `KILL`), the network cut and restored (a TCP proxy), the retry timeout
//! expiring; migrations from several connects at once, a newer schema, TLS options passed through.
//!
//! Needs the servers: `cargo test -p graph-tests --features postgres,mysql --test stores -- sql_servers::`
//! (GRAPH_TEST_POSTGRES_URL / GRAPH_TEST_MYSQL_URL, by default the local ones). An unreachable server
//! fails the tests, with the URL and how to start it.

#![cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code, unused_imports))]

use std::time::{Duration, Instant};

use graph_runtime::store::conformance::Backend;
#[cfg(any(feature = "postgres", feature = "mysql"))]
use graph_runtime::store::server::LeaseStore;
use graph_runtime::{END, Engine, EngineOptions, Error, Graph, Route, Store, StoreError};
use graph_tests::proxy::Proxy;
use graph_tests::{Trace, TraceDelta, state_hash};

/// Says, in a run without the feature, that these tests did not run.
#[cfg(not(feature = "postgres"))]
#[test]
#[ignore = "built without feature postgres: run cargo test -p graph-tests --features postgres,mysql"]
fn postgres_server_tests_not_run() {}

/// Says, in a run without the feature, that these tests did not run.
#[cfg(not(feature = "mysql"))]
#[test]
#[ignore = "built without feature mysql: run cargo test -p graph-tests --features postgres,mysql"]
fn mysql_server_tests_not_run() {}

/// What the tests need of a server beyond a [`Backend`].
trait Server: Backend {
    /// Creates the backend's database.
    fn create(&self) -> impl std::future::Future<Output = ()> + Send;
    /// Connects a store to the backend's database, through `127.0.0.1:port` when given, with a pool
    /// acquire timeout of `acquire`.
    fn connect(
        &self,
        port: Option<u16>,
        acquire: Duration,
    ) -> impl std::future::Future<Output = Result<Self::Store, StoreError>> + Send + 'static;
    /// The server's `host:port`.
    fn target(&self) -> String;
    /// Closes, from the server side, every connection to the backend's database; returns how many.
    fn kill_connections(&self) -> impl std::future::Future<Output = u64> + Send;
    /// Runs one statement on the backend's database through `store`.
    fn execute(store: &Self::Store, sql: &'static str) -> impl std::future::Future<Output = ()> + Send;
    /// Rows of `graph_schema_version`.
    fn schema_rows(store: &Self::Store) -> impl std::future::Future<Output = i64> + Send;
    /// Connects to the backend's database as `user` (no password).
    fn connect_as(
        &self,
        user: &str,
    ) -> impl std::future::Future<Output = Result<Self::Store, StoreError>> + Send;
    /// Connects with `query` (TLS options) appended to the database's URL.
    fn connect_url(
        &self,
        query: &str,
    ) -> impl std::future::Future<Output = Result<Self::Store, StoreError>> + Send;
}

#[cfg(feature = "postgres")]
mod pg {
    use super::*;
    use graph_runtime::store::PostgresStore;
    use graph_runtime::store::server::sqlx::{self, Connection};
    pub(super) use graph_tests::backends::Postgres;

    impl Server for Postgres {
        async fn create(&self) {
            Postgres::create(self).await;
        }
        fn connect(
            &self,
            port: Option<u16>,
            acquire: Duration,
        ) -> impl std::future::Future<Output = Result<PostgresStore, StoreError>> + Send + 'static {
            let mut options = self.options();
            if let Some(port) = port {
                options = options.host("127.0.0.1").port(port);
            }
            let pool = PostgresStore::pool_options().acquire_timeout(acquire);
            async move { PostgresStore::connect_with(options, pool).await }
        }
        fn target(&self) -> String {
            let o = self.options();
            format!("{}:{}", o.get_host(), o.get_port())
        }
        async fn kill_connections(&self) -> u64 {
            let url = graph_tests::backends::servers::postgres_url();
            let mut admin = sqlx::PgConnection::connect(&url).await.expect("an admin connection");
            let killed: Vec<bool> = sqlx::query_scalar(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
            )
            .bind(self.database())
            .fetch_all(&mut admin)
            .await
            .expect("pg_terminate_backend");
            let _ = admin.close().await;
            killed.into_iter().filter(|k| *k).count() as u64
        }
        async fn execute(store: &PostgresStore, sql: &'static str) {
            sqlx::query(sql).execute(store.pool()).await.expect(sql);
        }
        async fn schema_rows(store: &PostgresStore) -> i64 {
            sqlx::query_scalar("SELECT COUNT(*) FROM graph_schema_version")
                .fetch_one(store.pool())
                .await
                .unwrap()
        }
        async fn connect_as(&self, user: &str) -> Result<PostgresStore, StoreError> {
            PostgresStore::connect_with(
                self.options().username(user).password(""),
                PostgresStore::pool_options(),
            )
            .await
        }
        async fn connect_url(&self, query: &str) -> Result<PostgresStore, StoreError> {
            self.create().await;
            PostgresStore::connect(&format!("{}?{query}", self.url())).await
        }
    }
}

#[cfg(feature = "mysql")]
mod my {
    use super::*;
    use graph_runtime::store::MySqlStore;
    use graph_runtime::store::server::sqlx::{self, Connection};
    pub(super) use graph_tests::backends::MySql;

    impl Server for MySql {
        async fn create(&self) {
            MySql::create(self).await;
        }
        fn connect(
            &self,
            port: Option<u16>,
            acquire: Duration,
        ) -> impl std::future::Future<Output = Result<MySqlStore, StoreError>> + Send + 'static {
            let mut options = self.options();
            if let Some(port) = port {
                options = options.host("127.0.0.1").port(port);
            }
            let pool = MySqlStore::pool_options().acquire_timeout(acquire);
            async move { MySqlStore::connect_with(options, pool).await }
        }
        fn target(&self) -> String {
            let o = self.options();
            format!("{}:{}", o.get_host(), o.get_port())
        }
        async fn kill_connections(&self) -> u64 {
            let url = graph_tests::backends::servers::mysql_url();
            let mut admin = sqlx::MySqlConnection::connect(&url).await.expect("an admin connection");
            let ids: Vec<i64> = sqlx::query_scalar(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()",
            )
            .bind(self.database())
            .fetch_all(&mut admin)
            .await
            .expect("the process list");
            let mut killed = 0;
            for id in ids {
                // Unknown thread (it ended meanwhile) is fine.
                if sqlx::query(sqlx::AssertSqlSafe(format!("KILL CONNECTION {id}")))
                    .execute(&mut admin)
                    .await
                    .is_ok()
                {
                    killed += 1;
                }
            }
            let _ = admin.close().await;
            killed
        }
        async fn execute(store: &MySqlStore, sql: &'static str) {
            sqlx::query(sql).execute(store.pool()).await.expect(sql);
        }
        async fn schema_rows(store: &MySqlStore) -> i64 {
            sqlx::query_scalar("SELECT COUNT(*) FROM graph_schema_version")
                .fetch_one(store.pool())
                .await
                .unwrap()
        }
        async fn connect_as(&self, user: &str) -> Result<MySqlStore, StoreError> {
            MySqlStore::connect_with(self.options().username(user).password(""), MySqlStore::pool_options())
                .await
        }
        async fn connect_url(&self, query: &str) -> Result<MySqlStore, StoreError> {
            self.create().await;
            MySqlStore::connect(&format!("{}?{query}", self.url())).await
        }
    }
}

/// A store on `b`'s database (created first) connected through a new proxy to its server, with a
/// pool acquire timeout of `acquire`; and the proxy.
async fn through_proxy<B: Server>(b: &B, acquire: Duration) -> (Proxy, B::Store) {
    b.create().await;
    let proxy = Proxy::start(b.target()).await;
    let store = b.connect(Some(proxy.port()), acquire).await.expect("connect through the proxy");
    (proxy, store)
}

#[cfg(feature = "mysql")]
use my::MySql;
#[cfg(feature = "postgres")]
use pg::Postgres;

graph_tests::for_backends! {
    super: [
        connections_killed_by_the_server_mid_run_lose_and_double_nothing,
        connections_closed_while_idle_in_the_pool_fail_no_call,
        a_cut_network_is_retried_and_the_run_continues_when_it_returns,
        an_expired_retry_timeout_is_a_typed_unavailable_error,
        concurrent_connects_migrate_once,
        a_newer_schema_is_unsupported,
        a_refused_port_at_connect_is_unavailable_and_says_why,
        a_server_that_never_answers_is_unavailable_and_says_so,
        refused_credentials_are_permanent_and_said_once,
        an_interrupted_migration_runs_again,
        runs_without_their_graph_are_sorted_by_the_first_claim,
        a_lost_lease_stops_before_an_effect_call,
        a_lost_last_checkpoint_is_corrupted_not_an_older_latest,
    ];
    #[cfg(feature = "postgres")]
    postgres => Postgres::new(),
    #[cfg(feature = "mysql")]
    mysql => MySql::new(),
}

graph_tests::for_backends! {
    super: [
        concurrent_runs_share_commit_groups,
        a_few_concurrent_runs_commit_alone,
        groups_whose_connections_are_killed_lose_and_double_nothing,
        a_group_fences_the_commits_whose_lease_was_lost,
        a_group_in_one_statement_never_writes_over_a_row_it_did_not_know,
        a_group_in_one_statement_that_fails_writes_nothing,
        messages_larger_than_a_tls_record_are_not_held_back,
    ];
    #[cfg(feature = "postgres")]
    postgres_groups => Postgres::new(),
}

graph_tests::for_backends! {
    super: [
        commits_onto_a_known_row_take_three_round_trips,
        a_commit_onto_a_known_row_never_writes_over_a_row_it_did_not_know,
        another_stores_connection_failure_costs_this_store_no_ping,
    ];
    #[cfg(feature = "mysql")]
    mysql_known_rows => MySql::new(),
}

/// Runs `commit` and asserts that it made `expected` requests (round trips) through `proxy`, counting
/// the ping sqlx's pool sends on a task of its own when it takes a connection back. The count starts
/// and ends with every connection of `store`'s pool back in it (waited for, up to 10 s each), so a
/// ping or any other request of an earlier commit is never counted in this one, however late the
/// machine runs it. (Before, the count ended 50 ms after it reached `expected`: one CI run under load
/// counted 5 for a commit of 4.)
#[cfg(feature = "mysql")]
async fn assert_requests<F: std::future::Future<Output = graph_runtime::store::CommitOutcome>>(
    proxy: &Proxy,
    store: &graph_runtime::store::MySqlStore,
    expected: u64,
    what: &str,
    commit: F,
) -> graph_runtime::store::CommitOutcome {
    let settled = || async {
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.pool().num_idle() < store.pool().size() as usize {
            assert!(Instant::now() < deadline, "{what}: a connection did not come back to the pool");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    settled().await;
    let before = proxy.requests();
    let out = commit.await;
    settled().await;
    assert_eq!(proxy.requests() - before, expected, "{what}");
    out
}

/// A MySQL commit onto the run row its store last wrote (and a new run's first) is `BEGIN`, one script
/// of statements, `COMMIT`: three round trips (counted by a proxy, with the pool's ping when it takes
/// the connection back: four); onto a row another store wrote, the row is read and locked first: one
/// more; and writes too large for a script are sent a statement each.
#[cfg(feature = "mysql")]
async fn commits_onto_a_known_row_take_three_round_trips(b: &MySql) {
    use graph_runtime::RunStatus;
    use graph_runtime::store::CommitOutcome;
    use graph_runtime::store::conformance::checkpoint;
    let (proxy, store) = through_proxy(b, Duration::from_secs(5)).await;
    let other = b.connect(None, Duration::from_secs(5)).await.unwrap();
    let running = RunStatus::Running;
    for step in 0..10 {
        let cp = checkpoint("k", step, step);
        let what = format!("step {step}: BEGIN, the script, COMMIT, the pool's ping");
        let out = assert_requests(&proxy, &store, 4, &what, async {
            store.save_checkpoint(&cp, &[], &running, step).await.unwrap()
        })
        .await;
        assert!(matches!(out, CommitOutcome::Committed { version } if version == step + 1), "{out:?}");
    }
    // A run another store committed: its row is read first, then known.
    let out = other.save_checkpoint(&checkpoint("u", 0, 0), &[], &running, 0).await.unwrap();
    assert!(matches!(out, CommitOutcome::Committed { version: 1 }), "{out:?}");
    let what = "BEGIN, the key with the row lock, the writes, COMMIT, the pool's ping";
    let out = assert_requests(&proxy, &store, 5, what, async {
        store.save_checkpoint(&checkpoint("u", 1, 1), &[], &running, 1).await.unwrap()
    })
    .await;
    assert!(matches!(out, CommitOutcome::Committed { version: 2 }), "{out:?}");
    let out = assert_requests(&proxy, &store, 4, "the row it wrote is known", async {
        store.save_checkpoint(&checkpoint("u", 2, 2), &[], &running, 2).await.unwrap()
    })
    .await;
    assert!(matches!(out, CommitOutcome::Committed { version: 3 }), "{out:?}");
    // A state of 100 KB: the key with the row lock, then the checkpoint and the run row as prepared
    // statements (each prepared once on the connection: the third commit is counted).
    let large = |step: u64| {
        let mut cp = checkpoint("l", step, step);
        let state = format!(r#"{{"v":"{}"}}"#, "x".repeat(100_000));
        cp.state = graph_runtime::store::StateRepr::Full(state.into_bytes());
        cp
    };
    for step in 0..2 {
        let out = store.save_checkpoint(&large(step), &[], &running, step).await.unwrap();
        assert!(matches!(out, CommitOutcome::Committed { version } if version == step + 1), "{out:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let what = "BEGIN, the key with the row lock, the checkpoint, the run row, COMMIT, the pool's ping";
    let out = assert_requests(&proxy, &store, 6, what, async {
        store.save_checkpoint(&large(2), &[], &running, 2).await.unwrap()
    })
    .await;
    assert!(matches!(out, CommitOutcome::Committed { version: 3 }), "{out:?}");
    let loaded = other.load_checkpoint("l", 2).await.unwrap().expect("the large checkpoint");
    assert_eq!(loaded, large(2), "a large checkpoint reads back whole");
    let loaded = other.load_checkpoint("k", 9).await.unwrap().expect("a checkpoint of a script");
    assert_eq!(loaded, checkpoint("k", 9, 9), "a checkpoint written by a script reads back whole");
}

/// A connection failure makes only its own store's idle connections suspect: a store on another
/// database whose connections the server killed, and whose next read failed once on a dead
/// connection, costs this store no ping. (Until 2026-11-27 one failure anywhere in the process made
/// every pool's idle connections suspect, and the count of the test above, run beside tests that kill
/// connections, was one more in a CI run.)
#[cfg(feature = "mysql")]
async fn another_stores_connection_failure_costs_this_store_no_ping(b: &MySql) {
    use graph_runtime::RunStatus;
    use graph_runtime::store::CommitOutcome;
    use graph_runtime::store::conformance::checkpoint;
    let (proxy, store) = through_proxy(b, Duration::from_secs(5)).await;
    let running = RunStatus::Running;
    let what = "the first commit: BEGIN, the script, COMMIT, the pool's ping";
    let out = assert_requests(&proxy, &store, 4, what, async {
        store.save_checkpoint(&checkpoint("r", 0, 0), &[], &running, 0).await.unwrap()
    })
    .await;
    assert!(matches!(out, CommitOutcome::Committed { version: 1 }), "{out:?}");
    // Another store loses its idle connection to the server; its next read fails on it and is run
    // again on a new one.
    let elsewhere = MySql::new();
    let other = elsewhere.open().await;
    other.load_checkpoint("r", 0).await.expect("a read");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(elsewhere.kill_connections().await >= 1, "the other store held a connection");
    assert_eq!(other.load_checkpoint("r", 0).await.expect("a read after the kill"), None);
    let what = "a commit after another store's connection failure: no ping before it";
    let out = assert_requests(&proxy, &store, 4, what, async {
        store.save_checkpoint(&checkpoint("r", 1, 1), &[], &running, 1).await.unwrap()
    })
    .await;
    assert!(matches!(out, CommitOutcome::Committed { version: 2 }), "{out:?}");
}

/// A MySQL commit onto a known run row writes it only where the stored row still holds the version it
/// expects and no pending step: a row another store changed is `VersionConflict` with nothing written
/// and the key free again; a row with a pending step (written by the same store) has it deleted by the
/// commit, which reads the row.
#[cfg(feature = "mysql")]
async fn a_commit_onto_a_known_row_never_writes_over_a_row_it_did_not_know(b: &MySql) {
    use graph_runtime::RunStatus;
    use graph_runtime::store::CommitOutcome;
    use graph_runtime::store::conformance::checkpoint;
    let store = b.open().await;
    let other = b.connect(None, Duration::from_secs(5)).await.unwrap();
    let running = RunStatus::Running;
    for run in ["same", "changed", "paused"] {
        let out = store.save_checkpoint(&checkpoint(run, 0, 0), &[], &running, 0).await.unwrap();
        assert!(matches!(out, CommitOutcome::Committed { version: 1 }), "{run}: {out:?}");
    }
    let out = other.set_status("changed", &RunStatus::Cancelled, &[], None, 1).await.unwrap();
    assert!(matches!(out, CommitOutcome::Committed { version: 2 }), "{out:?}");
    let out = store.set_status("paused", &RunStatus::Running, &[], Some(b"pending step"), 1).await.unwrap();
    assert!(matches!(out, CommitOutcome::Committed { version: 2 }), "{out:?}");
    assert_eq!(store.pending("paused").await.unwrap().as_deref(), Some(&b"pending step"[..]));

    let out = store.save_checkpoint(&checkpoint("same", 1, 1), &[], &running, 1).await.unwrap();
    assert!(matches!(out, CommitOutcome::Committed { version: 2 }), "{out:?}");

    let out = store.save_checkpoint(&checkpoint("changed", 1, 1), &[], &running, 1).await.unwrap();
    assert!(matches!(out, CommitOutcome::VersionConflict { current: 2 }), "{out:?}");
    let steps: Vec<u64> = store.history("changed").await.unwrap().iter().map(|m| m.step).collect();
    assert_eq!(steps, [0], "a refused commit writes nothing");
    let info = store.run_info("changed").await.unwrap().unwrap();
    assert_eq!((info.version, &info.status), (2, &RunStatus::Cancelled), "the other store's row");
    let again = store.save_checkpoint(&checkpoint("changed", 1, 1), &[], &running, 2).await.unwrap();
    assert!(matches!(again, CommitOutcome::Committed { version: 3 }), "its key was free: {again:?}");

    let out = store.save_checkpoint(&checkpoint("paused", 1, 1), &[], &running, 2).await.unwrap();
    assert!(matches!(out, CommitOutcome::Committed { version: 3 }), "{out:?}");
    assert_eq!(store.pending("paused").await.unwrap(), None, "the commit deleted the pending step");
}

/// Runs `{prefix}0`, `{prefix}1`, … (`runs` of them) of `engine` at once, each on a task of its own.
#[cfg(feature = "postgres")]
fn spawn_runs(
    engine: &Engine<Trace>,
    prefix: &str,
    runs: usize,
) -> Vec<tokio::task::JoinHandle<Result<graph_runtime::RunOutcome<Trace>, Error>>> {
    (0..runs)
        .map(|i| {
            let (engine, run) = (engine.clone(), format!("{prefix}{i}"));
            tokio::spawn(async move { engine.run(&run, Trace::default()).await })
        })
        .collect()
}

/// PostgreSQL's group commit: 32 runs at once, most of their commits answered by groups of several,
/// every step of every run committed once, each run equal to the same run on the memory store.
#[cfg(feature = "postgres")]
async fn concurrent_runs_share_commit_groups(b: &Postgres) {
    let store = b.open().await;
    let n = 20;
    let engine = Engine::builder(counter(n, Duration::ZERO)).store(store.clone()).build();
    let tasks = spawn_runs(&engine, "g", 32);
    let mut checkpoints = 0;
    for (i, task) in tasks.into_iter().enumerate() {
        let out = task.await.unwrap().unwrap();
        assert_equals_the_memory_run(&store, &format!("g{i}"), n, &out.state, out.steps).await;
        checkpoints += out.steps + 1;
    }
    // A commit made while nothing else is being committed goes alone (the runs' first and last).
    let (grouped, groups) = (store.grouped_commits(), store.group_transactions());
    assert!(grouped > checkpoints / 2, "{grouped} of {checkpoints} commits were answered by a group");
    assert!(groups < grouped, "{grouped} grouped commits in {groups} transactions: none shared one");
}

/// Up to four commits at once go alone, in the single-commit statements (cheaper for the server than a
/// group of one or two): four concurrent runs are never grouped, and each equals the memory store's.
/// The store's sessions plan each prepared statement once (`plan_cache_mode`).
#[cfg(feature = "postgres")]
async fn a_few_concurrent_runs_commit_alone(b: &Postgres) {
    let store = b.open().await;
    let n = 20;
    let engine = Engine::builder(counter(n, Duration::ZERO)).store(store.clone()).build();
    for (i, task) in spawn_runs(&engine, "a", 4).into_iter().enumerate() {
        let out = task.await.unwrap().unwrap();
        assert_equals_the_memory_run(&store, &format!("a{i}"), n, &out.state, out.steps).await;
    }
    assert_eq!((store.grouped_commits(), store.group_transactions()), (0, 0));
    let show = graph_runtime::store::server::sqlx::query_scalar("SHOW plan_cache_mode");
    let mode: String = show.fetch_one(store.pool()).await.unwrap();
    assert_eq!(mode, "force_generic_plan");
}

/// Group commit when the server kills the store's connections every 40 ms: 16 runs at once, some of
/// their groups cut short (before, during or after `COMMIT`), their commits retried alone or in later
/// groups; every run completes and equals the memory store's, every step and event exactly once.
#[cfg(feature = "postgres")]
async fn groups_whose_connections_are_killed_lose_and_double_nothing(b: &Postgres) {
    let store = b.open().await;
    let n = 30;
    let engine = Engine::builder(counter(n, Duration::from_millis(2)))
        .store(store.clone())
        .options(EngineOptions::default().store_retry_timeout(Duration::from_secs(60)))
        .build();
    let tasks = spawn_runs(&engine, "k", 16);
    let mut killed = 0;
    while !tasks.iter().all(|t| t.is_finished()) {
        killed += b.kill_connections().await;
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert!(killed > 0, "the server closed no connection of the store");
    eprintln!("{killed} connections killed by the server during the runs");
    for (i, task) in tasks.into_iter().enumerate() {
        let out = task.await.unwrap().expect("every run completes although its connections were killed");
        assert!(out.is_completed());
        assert_equals_the_memory_run(&store, &format!("k{i}"), n, &out.state, out.steps).await;
    }
    assert!(store.grouped_commits() > 0, "no commit went through a group");
}

/// Workers' commits in a group: 16 leased runs commit at once, two of their leases taken over just
/// before (another owner, the next token); those two are `Fenced` and write nothing, the others commit.
#[cfg(feature = "postgres")]
async fn a_group_fences_the_commits_whose_lease_was_lost(b: &Postgres) {
    use graph_runtime::RunStatus;
    use graph_runtime::store::CommitOutcome;
    use graph_runtime::store::conformance::checkpoint;
    let store = b.open().await;
    let runs: Vec<String> = (0..16).map(|i| format!("f{i:02}")).collect();
    for run in &runs {
        let out = store.save_checkpoint(&checkpoint(run, 0, 0), &[], &RunStatus::Running, 0).await.unwrap();
        assert!(matches!(out, CommitOutcome::Committed { version: 1 }), "{run}: {out:?}");
    }
    let leases = store.claim("w1", "fp", runs.len(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(leases.len(), runs.len(), "every run claimed");
    let lost = ["f03", "f11"];
    Postgres::execute(
        &store,
        "UPDATE graph_leases SET owner = 'w2', token = token + 1 WHERE run_id IN ('f03', 'f11')",
    )
    .await;
    let grouped = store.grouped_commits();
    let tasks: Vec<_> = leases
        .into_iter()
        .map(|lease| {
            let leased = store.leased(lease.clone());
            tokio::spawn(async move {
                let cp = checkpoint(&lease.run_id, 1, 1);
                (lease.run_id, leased.save_checkpoint(&cp, &[], &RunStatus::Running, 1).await)
            })
        })
        .collect();
    for task in tasks {
        let (run, out) = task.await.unwrap();
        let out = out.unwrap();
        let steps: Vec<u64> = store.history(&run).await.unwrap().iter().map(|m| m.step).collect();
        if lost.contains(&run.as_str()) {
            assert!(matches!(out, CommitOutcome::Fenced), "{run}: {out:?}");
            assert_eq!(steps, [0], "{run}: a fenced commit writes nothing");
        } else {
            assert!(matches!(out, CommitOutcome::Committed { version: 2 }), "{run}: {out:?}");
            assert_eq!(steps, [0, 1], "{run}");
        }
    }
    assert!(store.grouped_commits() > grouped, "no commit went through a group");
}

/// Commits step 0 of each of `runs` through `store`, one after the other (alone: `store` then knows
/// each run's row, at version 1).
#[cfg(feature = "postgres")]
async fn first_steps(store: &graph_runtime::store::PostgresStore, runs: &[String]) {
    use graph_runtime::RunStatus;
    use graph_runtime::store::CommitOutcome;
    use graph_runtime::store::conformance::checkpoint;
    for run in runs {
        let out = store.save_checkpoint(&checkpoint(run, 0, 0), &[], &RunStatus::Running, 0).await.unwrap();
        assert!(matches!(out, CommitOutcome::Committed { version: 1 }), "{run}: {out:?}");
    }
}

/// Commits step 1 of each of `runs` through `store` at once, so that none of them goes alone: the
/// rows of four other runs (`blockers`, at version 1) are locked by another transaction first, and
/// their own commits of step 1 take the four places of commits going alone, waiting on the lock,
/// until `runs` are answered. Returns each run's outcome, then the blockers'.
#[cfg(feature = "postgres")]
async fn second_steps_in_groups(
    store: &graph_runtime::store::PostgresStore,
    runs: &[String],
    blockers: &[String],
) -> (Vec<Result<graph_runtime::store::CommitOutcome, StoreError>>, Vec<graph_runtime::store::CommitOutcome>)
{
    use graph_runtime::RunStatus;
    use graph_runtime::store::conformance::checkpoint;
    use graph_runtime::store::server::sqlx;
    let step = |store: &graph_runtime::store::PostgresStore, run: &str| {
        let (store, run) = (store.clone(), run.to_owned());
        tokio::spawn(async move {
            store.save_checkpoint(&checkpoint(&run, 1, 1), &[], &RunStatus::Running, 1).await
        })
    };
    let mut lock = store.pool().begin().await.unwrap();
    let locked: Vec<String> =
        sqlx::query_scalar("SELECT run_id FROM graph_runs WHERE run_id = ANY($1) FOR UPDATE")
            .bind(blockers)
            .fetch_all(&mut *lock)
            .await
            .unwrap();
    assert_eq!(locked.len(), blockers.len());
    let waiting: Vec<_> = blockers.iter().map(|run| step(store, run)).collect();
    // Generous: the blockers' commits only have to reach the lock.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let tasks: Vec<_> = runs.iter().map(|run| step(store, run)).collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    assert!(waiting.iter().all(|t| !t.is_finished()), "a blocker's commit did not wait for the lock");
    lock.rollback().await.unwrap();
    let mut blocked = Vec::new();
    for task in waiting {
        blocked.push(task.await.unwrap().expect("a blocker's commit"));
    }
    (outcomes, blocked)
}

/// A group written in one statement computes each commit from the run row this store last wrote, and
/// writes it only if the stored row is still that one: 12 runs committed by `store`, the rows of 6 of
/// them then changed by a second store, then all 12 commit their next step in groups: the 6 are
/// `VersionConflict`, keep the second store's row and one step, and their keys are free again; the
/// others commit.
#[cfg(feature = "postgres")]
async fn a_group_in_one_statement_never_writes_over_a_row_it_did_not_know(b: &Postgres) {
    use graph_runtime::RunStatus;
    use graph_runtime::store::CommitOutcome;
    use graph_runtime::store::conformance::checkpoint;
    let store = b.open().await;
    let other = b.connect(None, Duration::from_secs(5)).await.unwrap();
    let runs: Vec<String> = (0..12).map(|i| format!("s{i:02}")).collect();
    let blockers: Vec<String> = (0..4).map(|i| format!("b{i}")).collect();
    first_steps(&store, &runs).await;
    first_steps(&store, &blockers).await;
    let changed = &runs[6..];
    for run in changed {
        let out = other.set_status(run, &RunStatus::Cancelled, &[], None, 1).await.unwrap();
        assert!(matches!(out, CommitOutcome::Committed { version: 2 }), "{run}: {out:?}");
    }
    let at_once = store.groups_at_once();
    let (outcomes, blocked) = second_steps_in_groups(&store, &runs, &blockers).await;
    assert!(store.groups_at_once() > at_once, "no group was written in one statement");
    for out in blocked {
        assert!(matches!(out, CommitOutcome::Committed { version: 2 }), "{out:?}");
    }
    for (run, out) in runs.iter().zip(outcomes) {
        let out = out.unwrap();
        let steps: Vec<u64> = store.history(run).await.unwrap().iter().map(|m| m.step).collect();
        let info = store.run_info(run).await.unwrap().unwrap();
        if changed.contains(run) {
            assert!(matches!(out, CommitOutcome::VersionConflict { current: 2 }), "{run}: {out:?}");
            assert_eq!(steps, [0], "{run}: a refused commit writes nothing");
            assert_eq!(
                (info.version, &info.status),
                (2, &RunStatus::Cancelled),
                "{run}: the other store's row"
            );
            // Its key was released: the same commit at the right version is accepted.
            let again =
                store.save_checkpoint(&checkpoint(run, 1, 1), &[], &RunStatus::Running, 2).await.unwrap();
            assert!(matches!(again, CommitOutcome::Committed { version: 3 }), "{run}: {again:?}");
        } else {
            assert!(matches!(out, CommitOutcome::Committed { version: 2 }), "{run}: {out:?}");
            assert_eq!(steps, [0, 1], "{run}");
            assert_eq!((info.version, info.latest_step), (2, 1), "{run}");
        }
    }
}

/// A group written in one statement while the test fail point is armed fails after its writes, in a
/// transaction: none of its commits is visible and their keys are free; the other commits are not
/// touched.
#[cfg(feature = "postgres")]
async fn a_group_in_one_statement_that_fails_writes_nothing(b: &Postgres) {
    use graph_runtime::RunStatus;
    use graph_runtime::store::CommitOutcome;
    use graph_runtime::store::conformance::checkpoint;
    let store = b.open().await;
    let runs: Vec<String> = (0..12).map(|i| format!("x{i:02}")).collect();
    let blockers: Vec<String> = (0..4).map(|i| format!("y{i}")).collect();
    first_steps(&store, &runs).await;
    first_steps(&store, &blockers).await;
    let at_once = store.groups_at_once();
    store.fail_point().fail_after(2);
    let (outcomes, blocked) = second_steps_in_groups(&store, &runs, &blockers).await;
    assert!(store.groups_at_once() > at_once, "no group was written in one statement");
    for out in blocked {
        assert!(matches!(out, CommitOutcome::Committed { version: 2 }), "{out:?}");
    }
    let mut failed = 0;
    for (run, out) in runs.iter().zip(outcomes) {
        let steps: Vec<u64> = store.history(run).await.unwrap().iter().map(|m| m.step).collect();
        let version = store.run_info(run).await.unwrap().unwrap().version;
        match out {
            Ok(out) => {
                assert!(matches!(out, CommitOutcome::Committed { version: 2 }), "{run}: {out:?}");
                assert_eq!((steps.as_slice(), version), ([0, 1].as_slice(), 2), "{run}");
            }
            Err(e) => {
                failed += 1;
                assert!(e.to_string().contains("injected"), "{run}: {e}");
                assert_eq!(
                    (steps.as_slice(), version),
                    ([0].as_slice(), 1),
                    "{run}: a failed group writes nothing"
                );
                let again =
                    store.save_checkpoint(&checkpoint(run, 1, 1), &[], &RunStatus::Running, 1).await.unwrap();
                assert!(matches!(again, CommitOutcome::Committed { version: 2 }), "{run}: {again:?}");
            }
        }
    }
    assert!(failed >= 1, "the fail point failed no commit");
}

/// A commit larger than one TLS record (16 KiB) leaves at once: with Nagle's algorithm on (sqlx's
/// default), its second record waited for the server's delayed acknowledgement, 40 ms or more a
/// commit. The same run of 10 steps that each append 40 KB, over `sslmode=require` and over
/// `sslmode=disable`, three times each in turns; the fastest of each is compared, so a stall of the
/// shared machine during one run does not decide (one CI run timed a single pair at 464 ms against
/// 161 ms). TLS may cost half the plain run again (it encrypts every byte: a debug build on a slow VM
/// took 431 ms against 224 ms) and 20 ms a step more; records held back exceed that by far (without the
/// fix: 580 ms against 106 ms; on that slow VM 608 ms against 176 ms), and a stall in every commit is
/// in the fastest run too.
#[cfg(feature = "postgres")]
async fn messages_larger_than_a_tls_record_are_not_held_back(b: &Postgres) {
    b.create().await;
    let steps = 10u64;
    let graph = Graph::<Trace>::builder("large")
        .node("tick", move |s, _| {
            let i = s.count;
            Box::pin(async move {
                let route = if i + 1 < steps { Route::Goto(0) } else { Route::Goto(1) };
                Ok((TraceDelta::default().count(1).log(format!("{i:040000}")), route))
            })
        })
        .entry("tick")
        .edge("tick", "tick")
        .edge("tick", END)
        .build()
        .unwrap();
    let mut engines = Vec::new();
    for mode in ["require", "disable"] {
        let store = graph_runtime::store::PostgresStore::connect(&format!("{}?sslmode={mode}", b.url()))
            .await
            .unwrap_or_else(|e| panic!("connecting to the local server with sslmode={mode}: {e}"));
        let engine = Engine::builder(graph.clone()).store(store).build();
        engine.run(&format!("warm-up-{mode}"), Trace::default()).await.unwrap();
        engines.push((mode, engine, Duration::MAX));
    }
    for round in 0..3 {
        for (mode, engine, fastest) in &mut engines {
            let started = Instant::now();
            let out = engine.run(&format!("r-{mode}-{round}"), Trace::default()).await.unwrap();
            *fastest = (*fastest).min(started.elapsed());
            assert_eq!(out.state.log.len() as u64, steps);
        }
    }
    let (tls, plain) = (engines[0].2, engines[1].2);
    let bound = plain * 3 / 2 + Duration::from_millis(20) * u32::try_from(steps).unwrap();
    assert!(tls < bound, "{steps} steps took at fastest {tls:?} over TLS and {plain:?} without");
}

/// A loop of `n` steps, each appending one entry and adding one, sleeping `pause` in its node.
fn counter(n: u64, pause: Duration) -> Graph<Trace> {
    Graph::<Trace>::builder("counter")
        .node("tick", move |s, ctx| {
            let i = s.count;
            Box::pin(async move {
                tokio::time::sleep(pause).await;
                let route = if i + 1 < n { Route::Goto(0) } else { Route::Goto(1) };
                Ok((TraceDelta::default().count(1).log(format!("tick {i} at step {}", ctx.step())), route))
            })
        })
        .entry("tick")
        .edge("tick", "tick")
        .edge("tick", END)
        .build()
        .unwrap()
}

/// The run `run` of `store` equals the same run on the memory store: state, steps, every step
/// committed exactly once, the event log as long and numbered without gaps or doubles.
async fn assert_equals_the_memory_run(store: &impl Store, run: &str, n: u64, state: &Trace, steps: u64) {
    let reference = Engine::builder(counter(n, Duration::ZERO)).build();
    let expected = reference.run(run, Trace::default()).await.unwrap();
    assert_eq!(state_hash(state), state_hash(&expected.state), "{run}");
    assert_eq!(state.log.len() as u64, n, "{run}: every tick once");
    assert_eq!(steps, expected.steps, "{run}");
    let history: Vec<u64> = store.history(run).await.unwrap().iter().map(|m| m.step).collect();
    assert_eq!(history, (0..=expected.steps).collect::<Vec<_>>(), "{run}: every step committed once");
    let events = store.events(run, 0, 100_000).await.unwrap();
    let expected_events = reference.store().events(run, 0, 100_000).await.unwrap();
    assert_eq!(events.len(), expected_events.len(), "{run}: the event log");
    assert!(events.iter().enumerate().all(|(i, e)| e.seq == i as u64), "event seqs without gaps or doubles");
    let types = |es: &[graph_runtime::events::Event]| {
        es.iter().map(|e| format!("{:?}", e.event_type)).collect::<Vec<_>>()
    };
    assert_eq!(types(&events), types(&expected_events), "{run}");
}

async fn connections_killed_by_the_server_mid_run_lose_and_double_nothing<B: Server>(b: &B) {
    let store = b.open().await;
    let engine = Engine::builder(counter(60, Duration::from_millis(5)))
        .store(store.clone())
        .options(EngineOptions::default().store_retry_timeout(Duration::from_secs(60)))
        .build();
    let done = std::sync::atomic::AtomicBool::new(false);
    let run = async {
        let out = engine.run("r", Trace::default()).await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        out
    };
    let killer = async {
        let mut killed = 0;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            killed += b.kill_connections().await;
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        killed
    };
    let (out, killed) = tokio::join!(run, killer);
    let out = out.expect("the run completes although its connections were killed");
    assert!(killed > 0, "the server closed no connection of the store");
    eprintln!("{killed} connections killed by the server during the run");
    assert!(out.is_completed());
    assert_equals_the_memory_run(&store, "r", 60, &out.state, out.steps).await;
}

/// The pool does not ping a connection it hands out unless it is suspect (idle 10 s, or since a
/// connection failure): a connection the server closed while idle fails its first statement, and the
/// store runs that read or `BEGIN` once more. No call fails, with the engine's retries off.
#[cfg(any(feature = "postgres", feature = "mysql"))]
async fn connections_closed_while_idle_in_the_pool_fail_no_call<B: Server>(b: &B)
where
    B::Store: LeaseStore,
{
    let store = b.open().await;
    let engine = Engine::builder(counter(3, Duration::ZERO))
        .store(store.clone())
        .options(EngineOptions::default().store_retry_timeout(Duration::ZERO))
        .build();
    let all = graph_runtime::store::RunFilter::all();
    // Several connections in the pool, all idle.
    let (a, b2, c, d) = tokio::join!(
        store.list_runs(&all),
        store.list_runs(&all),
        store.list_runs(&all),
        store.list_runs(&all)
    );
    for r in [a, b2, c, d] {
        r.expect("a read");
    }
    // A read first, 20 ms after the last connection failure (a connection idle since a failure is
    // pinged: this one is not); sqlx pings a connection as it goes back to the pool: wait until they
    // are all idle, then kill.
    let kill_idle = || async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        store.list_runs(&all).await.expect("a read");
        tokio::time::sleep(Duration::from_millis(200)).await;
        b.kill_connections().await
    };
    assert!(kill_idle().await >= 2, "the pool held several connections");
    let out = engine.run("r", Trace::default()).await.expect("a run on connections closed while idle");
    assert!(out.is_completed());
    assert!(kill_idle().await >= 1);
    assert_eq!(store.history("r").await.expect("a read on a closed connection").len() as u64, out.steps + 1);
    assert!(kill_idle().await >= 1);
    let resumed = engine.resume("r").await.expect("a resume on connections closed while idle");
    assert_eq!(state_hash(&resumed.state), state_hash(&out.state));
    // A transaction first: claiming runs for a worker (none is running).
    assert!(kill_idle().await >= 1);
    let claimed = store
        .claim("w", "fp", 1, Duration::from_secs(5))
        .await
        .expect("a claim on connections closed while idle");
    assert!(claimed.is_empty());
    assert_equals_the_memory_run(&store, "r", 3, &out.state, out.steps).await;
}

async fn a_cut_network_is_retried_and_the_run_continues_when_it_returns<B: Server>(b: &B) {
    let (proxy, store) = through_proxy(b, Duration::from_secs(1)).await;
    let engine = Engine::builder(counter(40, Duration::from_millis(20)))
        .store(store.clone())
        .options(EngineOptions::default().store_retry_timeout(Duration::from_secs(60)))
        .build();
    let outage = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.cut();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let refused = proxy.refused();
        proxy.restore();
        refused
    };
    let (out, refused) = tokio::join!(engine.run("r", Trace::default()), outage);
    let out = out.expect("the run continues once the server is back");
    assert!(refused > 0, "nothing tried to reach the server while it was away");
    assert!(out.is_completed());
    assert_equals_the_memory_run(&store, "r", 40, &out.state, out.steps).await;
}

async fn an_expired_retry_timeout_is_a_typed_unavailable_error<B: Server>(b: &B) {
    let (proxy, store) = through_proxy(b, Duration::from_millis(500)).await;
    let engine = Engine::builder(counter(1000, Duration::from_millis(10)))
        .store(store)
        .options(EngineOptions::default().store_retry_timeout(Duration::from_secs(2)))
        .build();
    let started = Instant::now();
    let cut = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.cut();
    };
    let (out, ()) = tokio::join!(engine.run("r", Trace::default()), cut);
    match out {
        Err(Error::Store(e @ StoreError::Unavailable { .. })) => {
            assert!(e.is_retryable());
            eprintln!("after {:?}: {e}", started.elapsed());
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(30), "gave up after {:?}", started.elapsed());
}

async fn concurrent_connects_migrate_once<B: Server>(b: &B) {
    b.create().await;
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..8 {
        set.spawn(b.connect(None, Duration::from_secs(30)));
    }
    let mut stores = Vec::new();
    while let Some(s) = set.join_next().await {
        stores.push(s.unwrap().expect("every concurrent connect succeeds"));
    }
    // One row per migration (1: runs, checkpoints, keys, events, effects; 2: worker leases; 3:
    // PostgreSQL's commit-group function, nothing on MySQL; 4: the graph of each run; 5: due times,
    // mailboxes, schedules), each once.
    assert_eq!(B::schema_rows(&stores[0]).await, 5, "each migration ran once");
    // They all work on the one schema.
    let cp = graph_runtime::store::conformance::checkpoint("m", 0, 1);
    assert!(matches!(
        stores[3].save_checkpoint(&cp, &[], &graph_runtime::RunStatus::Running, 0).await.unwrap(),
        graph_runtime::store::CommitOutcome::Committed { version: 1 }
    ));
    assert_eq!(stores[5].history("m").await.unwrap().len(), 1);
}

/// A migration whose statements ran but whose version row was not written (the process died between
/// them; MySQL commits DDL at once) runs again on the next connect without error: its statements are
/// idempotent (PostgreSQL's `IF NOT EXISTS`; MySQL's duplicate column and key errors, 1060 and 1061,
/// taken as done). Checked for the newest migration alone, then for the last two.
async fn an_interrupted_migration_runs_again<B: Server>(b: &B) {
    let store = b.open().await;
    for (version, delete) in [
        (5, "DELETE FROM graph_schema_version WHERE version >= 5"),
        (4, "DELETE FROM graph_schema_version WHERE version >= 4"),
    ] {
        B::execute(&store, delete).await;
        assert_eq!(B::schema_rows(&store).await, version - 1);
        let again = b.connect(None, Duration::from_secs(5)).await.expect("the schema applied over itself");
        assert_eq!(B::schema_rows(&again).await, 5);
    }
}

/// Runs whose row has no graph column yet (written before schema 4, or by a commit group, which leaves
/// it to the claims) are sorted by the first claim that sees them: each graph's claimer gets its own, and
/// a run row that does not decode is claimed by nobody.
#[cfg(any(feature = "postgres", feature = "mysql"))]
async fn runs_without_their_graph_are_sorted_by_the_first_claim<B: Server>(b: &B)
where
    B::Store: LeaseStore,
{
    use graph_runtime::RunStatus;
    use graph_runtime::store::conformance::checkpoint;
    let store = b.open().await;
    for (run, graph) in [("p0", "fp"), ("q0", "other"), ("p1", "fp"), ("q1", "other"), ("p9", "fp")] {
        let mut cp = checkpoint(run, 0, 0);
        cp.graph_fingerprint = graph.into();
        store.save_checkpoint(&cp, &[], &RunStatus::Running, 0).await.unwrap();
    }
    B::execute(&store, "UPDATE graph_runs SET graph_fingerprint = NULL").await;
    B::execute(&store, "UPDATE graph_runs SET row_bytes = 'not a run row' WHERE run_id = 'p9'").await;
    let long = Duration::from_secs(60);
    let ids = |leases: Vec<graph_runtime::store::server::Lease>| {
        leases.into_iter().map(|l| l.run_id).collect::<Vec<_>>()
    };
    assert_eq!(ids(store.claim("w", "other", 10, long).await.unwrap()), ["q0", "q1"]);
    assert_eq!(ids(store.claim("v", "fp", 10, long).await.unwrap()), ["p0", "p1"]);
    assert!(store.claim("v", "fp", 10, long).await.unwrap().is_empty(), "the damaged row is not claimed");
    assert!(store.lease_of("p9").await.unwrap().is_none());
    assert_eq!(
        store.run_info("p0").await.unwrap().expect("p0").graph_fingerprint,
        "fp",
        "the row is unchanged"
    );
    // A list that meets the damaged row names its run.
    match store.list_runs(&graph_runtime::store::RunFilter::all()).await {
        Err(StoreError::Corrupted { run: Some(run), .. }) => assert_eq!(run, "p9"),
        other => panic!("{other:?}"),
    }
}

/// A worker whose lease was taken over makes no non-idempotent call: the journal write that comes
/// before the call is fenced, the run stops with `Error::Fenced`, and nothing is journaled or committed.
/// The new holder then runs it to the end, each call made once.
#[cfg(any(feature = "postgres", feature = "mysql"))]
async fn a_lost_lease_stops_before_an_effect_call<B: Server>(b: &B)
where
    B::Store: LeaseStore,
{
    use graph_runtime::store::server::Lease;
    use graph_tests::graphs::{ledger_count, ledger_graph};
    let store = b.open().await;
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let graph = ledger_graph(3, ledger.clone(), None);
    Engine::builder(graph.clone()).store(store.clone()).build().submit("e", Trace::default()).await.unwrap();
    let a = store
        .claim("a", graph.fingerprint(), 1, Duration::from_secs(60))
        .await
        .unwrap()
        .pop()
        .expect("claimed");
    B::execute(&store, "UPDATE graph_leases SET owner = 'b', token = token + 1 WHERE run_id = 'e'").await;
    let stale = Engine::builder(graph.clone()).shared_store(std::sync::Arc::new(store.leased(a))).build();
    match stale.resume("e").await {
        Err(Error::Fenced { run, .. }) => assert_eq!(run, "e"),
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert!(!ledger.exists(), "no call was made: {:?}", std::fs::read_to_string(&ledger));
    assert!(store.effects("e").await.unwrap().is_empty(), "nothing journaled");
    assert_eq!(store.history("e").await.unwrap().len(), 1, "nothing committed");
    let holder = Engine::builder(graph)
        .shared_store(std::sync::Arc::new(store.leased(Lease::new("e", "b", 2))))
        .build();
    let out = holder.resume("e").await.expect("the new holder runs it");
    assert!(out.is_completed());
    let text = std::fs::read_to_string(&ledger).unwrap();
    let charges: Vec<&str> = text.lines().filter(|l| l.starts_with("charge ")).collect();
    assert_eq!(charges.len(), 3, "{text}");
    assert!(charges.iter().all(|c| ledger_count(&ledger, c) == 1), "each charge once: {text}");
}

/// A port nothing listens on: sqlx's pool tries again until its acquire timeout and says only that it
/// timed out; the store's error is `Unavailable` and says what refused it, and where.
async fn a_refused_port_at_connect_is_unavailable_and_says_why<B: Server>(b: &B) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let started = Instant::now();
    let e = match b.connect(Some(port), Duration::from_millis(300)).await {
        Err(e) => e,
        Ok(_) => panic!("connected to a closed port"),
    };
    let text = e.to_string();
    assert!(matches!(e, StoreError::Unavailable { .. }) && e.is_retryable(), "{e:?}");
    assert!(text.contains(&format!("127.0.0.1:{port}")), "the error names the server: {text}");
    assert_eq!(text.matches("Connection refused").count(), 1, "the error says why, once: {text}");
    assert!(!text.contains("pool timed out"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(30), "gave up after {:?}", started.elapsed());
}

/// A listener that takes the connection and never says a word (a server that hangs, or something
/// else on the port): `Unavailable`, saying that nothing answered.
async fn a_server_that_never_answers_is_unavailable_and_says_so<B: Server>(b: &B) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let e = match b.connect(Some(port), Duration::from_millis(300)).await {
        Err(e) => e,
        Ok(_) => panic!("connected to a listener that never answers"),
    };
    silent.abort();
    let text = e.to_string();
    assert!(matches!(e, StoreError::Unavailable { .. }) && e.is_retryable(), "{e:?}");
    assert!(text.contains(&format!("127.0.0.1:{port}")) && text.contains("no answer"), "{text}");
}

/// A user the server does not know: a permanent `Backend` error whose text gives the server's message
/// once (sqlx's own text says it twice, PostgreSQL's with the line of the server's C source), and whose
/// cause is the sqlx error.
#[cfg(any(feature = "postgres", feature = "mysql"))]
async fn refused_credentials_are_permanent_and_said_once<B: Server>(b: &B) {
    b.create().await;
    let e = match b.connect_as("graph_no_such_user").await {
        Err(e) => e,
        Ok(_) => panic!("a user the server does not know connected"),
    };
    let text = e.to_string();
    assert!(matches!(e, StoreError::Backend { .. }) && !e.is_retryable(), "{e:?}");
    assert_eq!(text.matches("graph_no_such_user").count(), 1, "said once: {text}");
    assert!(!text.contains(" at line "), "{text}");
    let cause = std::error::Error::source(&e)
        .and_then(|c| c.downcast_ref::<graph_runtime::store::server::ServerError>());
    assert!(
        matches!(cause.map(|c| c.sqlx()), Some(graph_runtime::store::server::sqlx::Error::Database(_))),
        "the cause is the server's error: {e:?}"
    );
}

async fn a_newer_schema_is_unsupported<B: Server>(b: &B) {
    let store = b.open().await;
    B::execute(&store, "INSERT INTO graph_schema_version (version) VALUES (99)").await;
    let again = b.connect(None, Duration::from_secs(5)).await;
    match again {
        Err(StoreError::UnsupportedSchemaVersion { found: 99, supported: 5 }) => {}
        Err(other) => panic!("expected UnsupportedSchemaVersion, got {other:?}"),
        Ok(_) => panic!("a database at schema 99 was opened"),
    }
    // Nothing was changed by the refused connect: versions 1 to 5 and the 99 written above.
    assert_eq!(B::schema_rows(&store).await, 6);
}

/// `sslmode` in the URL reaches the driver: `require` gets an encrypted connection from the local server
/// (its snakeoil certificate), `verify-full` refuses that self-signed certificate with a typed,
/// permanent error.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tls_options_pass_through() {
    use graph_runtime::store::server::sqlx;
    let b = Postgres::new();
    match b.connect_url("sslmode=require").await {
        Ok(store) => {
            let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
                .fetch_one(store.pool())
                .await
                .unwrap();
            assert!(ssl, "sslmode=require gave a connection without TLS");
        }
        Err(e) => {
            // A server without TLS: the requirement is refused, typed and permanent.
            assert!(matches!(e, StoreError::Backend { .. }) && !e.is_retryable(), "{e:?}");
            eprintln!("sslmode=require against a server without TLS: {e}");
        }
    }
    match b.connect_url("sslmode=verify-full").await {
        Err(e) => {
            assert!(matches!(e, StoreError::Backend { .. }) && !e.is_retryable(), "{e:?}");
            eprintln!("sslmode=verify-full: {e}");
        }
        Ok(_) => panic!("verify-full accepted a certificate no root signs"),
    }
}

/// `ssl-mode=required` in the URL reaches the driver: against the local server, which has no TLS, it is
/// a typed, permanent error.
#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_tls_options_pass_through() {
    let b = MySql::new();
    let plain = b.connect_url("ssl-mode=disabled").await.expect("ssl-mode=disabled connects");
    drop(plain);
    match b.connect_url("ssl-mode=required").await {
        Err(e) => {
            assert!(matches!(e, StoreError::Backend { .. }) && !e.is_retryable(), "{e:?}");
            eprintln!("ssl-mode=required: {e}");
        }
        Ok(store) => {
            // A server with TLS: the connection is encrypted.
            use graph_runtime::store::server::sqlx;
            let row: (String, String) = sqlx::query_as("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
                .fetch_one(store.pool())
                .await
                .unwrap();
            assert!(!row.1.is_empty(), "ssl-mode=required gave a connection without TLS");
        }
    }
}

/// `check_integrity` on PostgreSQL: not run (`NotChecked`, saying how to enable it) until amcheck is
/// installed in the store's database, then `bt_index_check` with `heapallindexed` on every B-tree index
/// of the store's tables, as many as the catalog lists.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_integrity_check_runs_amcheck_once_installed() {
    use graph_runtime::store::Integrity;
    use graph_runtime::store::server::sqlx;
    let b = Postgres::new();
    let store = b.open().await;
    graph_runtime::store::conformance::commit_steps(&store, "r", 0..5).await;
    match store.check_integrity().await.unwrap() {
        Integrity::NotChecked { why } => assert!(why.contains("CREATE EXTENSION amcheck"), "{why}"),
        other => panic!("without amcheck: {other:?}"),
    }
    <Postgres as Server>::execute(&store, "CREATE EXTENSION amcheck").await;
    let indexes: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() AND tablename LIKE 'graph%' \
         AND tablename <> 'graph_schema_version'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert!(indexes >= 13, "{indexes}");
    let check = format!("amcheck bt_index_check (heapallindexed) on {indexes} indexes");
    assert_eq!(store.check_integrity().await.unwrap(), Integrity::Sound { check });
    // A role that may read the store but not run amcheck's functions (revoked from PUBLIC): not
    // checked, saying what to grant. Roles are the server's, not the database's: a name of its own,
    // dropped at the end.
    let role = format!("graph_plain_{}", std::process::id());
    let admin = |sql: String| {
        let pool = store.pool().clone();
        async move { sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&pool).await.unwrap() }
    };
    admin(format!("CREATE ROLE {role} LOGIN")).await;
    admin(format!("GRANT USAGE, CREATE ON SCHEMA public TO {role}")).await;
    admin(format!("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")).await;
    // Nothing that can panic until the role is dropped.
    let answer = match b.connect_as(&role).await {
        Ok(plain) => {
            let answer = plain.check_integrity().await;
            plain.close().await;
            answer
        }
        Err(e) => Err(e),
    };
    admin(format!("DROP OWNED BY {role}")).await;
    admin(format!("DROP ROLE {role}")).await;
    match answer.unwrap() {
        Integrity::NotChecked { why } => {
            assert!(why.contains("GRANT EXECUTE ON FUNCTION bt_index_check"), "{why}")
        }
        other => panic!("as {role}: {other:?}"),
    }
    // An index whose entries no longer agree with its table: its declared columns swapped in the
    // catalog under its entries (as a superuser; the database is the test's own).
    <Postgres as Server>::execute(
        &store,
        "UPDATE pg_index SET indkey = '1 2'::int2vector WHERE indexrelid = 'graph_runs_status'::regclass",
    )
    .await;
    match store.check_integrity().await {
        Err(StoreError::Corrupted { detail, .. }) => {
            assert!(detail.starts_with("amcheck found an index inconsistent with its table"), "{detail}");
            println!("{detail}");
        }
        other => panic!("after the damage: {other:?}"),
    }
}

/// `check_integrity` on MySQL/MariaDB: `CHECK TABLE` on each of the store's tables.
#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_integrity_check_checks_every_table() {
    use graph_runtime::store::Integrity;
    use graph_runtime::store::server::sqlx;
    let b = MySql::new();
    let store = b.open().await;
    graph_runtime::store::conformance::commit_steps(&store, "r", 0..5).await;
    let tables: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() \
         AND TABLE_NAME LIKE 'graph%' AND TABLE_NAME <> 'graph_schema_version'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(tables, 11);
    let check = format!("CHECK TABLE on {tables} tables");
    assert_eq!(store.check_integrity().await.unwrap(), Integrity::Sound { check });
}

/// A MariaDB server of the test's own (`mariadb-install-db` into a temporary folder, `mariadbd` on a
/// socket there, no network), stopped with `SHUTDOWN` and killed when dropped.
#[cfg(feature = "mysql")]
struct PrivateMariaDb {
    dir: tempfile::TempDir,
    server: Option<std::process::Child>,
}

#[cfg(feature = "mysql")]
impl PrivateMariaDb {
    /// Installs the system tables; `None` (with why) when the server's programs are not on this machine.
    fn install() -> Result<Self, String> {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let ran = std::process::Command::new("mariadb-install-db")
            .args([
                "--no-defaults",
                "--user=root",
                "--skip-test-db",
                "--auth-root-authentication-method=normal",
            ])
            .arg(format!("--datadir={}", data.display()))
            .output()
            .map_err(|e| format!("mariadb-install-db: {e}"))?;
        assert!(ran.status.success(), "mariadb-install-db: {}", String::from_utf8_lossy(&ran.stderr));
        Ok(PrivateMariaDb { dir, server: None })
    }

    fn socket(&self) -> std::path::PathBuf {
        self.dir.path().join("sock")
    }

    /// The store's database on this server.
    fn url(&self) -> String {
        format!("mysql://root@localhost/store?socket={}", self.socket().display())
    }

    /// Starts the server and waits (up to 60 s) until it answers.
    async fn start(&mut self) {
        let d = self.dir.path();
        let server = std::process::Command::new("/usr/sbin/mariadbd")
            .arg("--no-defaults")
            .arg("--user=root")
            .arg("--skip-networking")
            .arg(format!("--datadir={}", d.join("data").display()))
            .arg(format!("--socket={}", self.socket().display()))
            .arg(format!("--pid-file={}", d.join("pid").display()))
            .arg(format!("--log-error={}", d.join("error.log").display()))
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("mariadbd starts");
        self.server = Some(server);
        let url = format!("mysql://root@localhost/?socket={}", self.socket().display());
        let started = Instant::now();
        loop {
            use graph_runtime::store::server::sqlx::{self, Connection};
            match sqlx::MySqlConnection::connect(&url).await {
                Ok(mut c) => {
                    sqlx::query("CREATE DATABASE IF NOT EXISTS store").execute(&mut c).await.unwrap();
                    return;
                }
                Err(e) => assert!(started.elapsed() < Duration::from_secs(60), "the private server: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `SHUTDOWN` (every page written to the tables' files), then waits for the process to end.
    async fn stop(&mut self) {
        use graph_runtime::store::server::sqlx::{self, Connection};
        let url = format!("mysql://root@localhost/?socket={}", self.socket().display());
        let mut c = sqlx::MySqlConnection::connect(&url).await.unwrap();
        let _ = sqlx::query("SHUTDOWN").execute(&mut c).await;
        let status = self.server.take().expect("running").wait().unwrap();
        assert!(status.success(), "mariadbd ended with {status}");
    }
}

#[cfg(feature = "mysql")]
impl Drop for PrivateMariaDb {
    fn drop(&mut self) {
        if let Some(mut server) = self.server.take() {
            let _ = server.kill();
            let _ = server.wait();
        }
    }
}

/// `check_integrity` on MySQL/MariaDB finds a damaged page: a server of the test's own holds a store,
/// is shut down cleanly, has 8 bytes of a leaf page of `graph_keys` flipped in its file (as a disk
/// would), and is started again: `CHECK TABLE` reports the table `Corrupt`, the store answers
/// `Corrupted` naming it. Needs MariaDB's programs (`mariadb-install-db`, `/usr/sbin/mariadbd`): without
/// them prints `NOT RUN` and passes, unless `GRAPH_FAULT_TESTS=require`.
#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_integrity_check_finds_a_damaged_page() {
    use graph_runtime::store::{Integrity, MySqlStore};
    let mut db = match PrivateMariaDb::install() {
        Ok(db) => db,
        Err(why) => {
            assert!(std::env::var("GRAPH_FAULT_TESTS").as_deref() != Ok("require"), "cannot run: {why}");
            println!("NOT RUN: {why}");
            return;
        }
    };
    db.start().await;
    let store = MySqlStore::connect(&db.url()).await.unwrap();
    for run in 0..40 {
        graph_runtime::store::conformance::commit_steps(&store, &format!("run-{run}"), 0..25).await;
    }
    assert!(matches!(store.check_integrity().await.unwrap(), Integrity::Sound { .. }));
    store.close().await;
    db.stop().await;

    // InnoDB's pages are 16 KiB: pages 0–3 of a table's file hold its space's header and the index
    // roots; the middle page of the 1,000 keys' file is a leaf.
    let file = db.dir.path().join("data/store/graph_keys.ibd");
    let mut bytes = std::fs::read(&file).unwrap();
    let pages = bytes.len() / 16_384;
    assert!(pages > 8, "graph_keys.ibd has {pages} pages");
    let at = pages / 2 * 16_384 + 300;
    for b in &mut bytes[at..at + 8] {
        *b ^= 0x5a;
    }
    std::fs::write(&file, &bytes).unwrap();

    db.start().await;
    let store = MySqlStore::connect(&db.url()).await.unwrap();
    match store.check_integrity().await {
        Err(StoreError::Corrupted { detail, .. }) => {
            assert!(detail.contains("store.graph_keys") && detail.contains("Corrupt"), "{detail}");
            println!("{detail}");
        }
        other => panic!("after the damage: {other:?}"),
    }
    store.close().await;
    db.stop().await;
}

/// The last checkpoint row of a run lost (as damage that loses a table's page or an index entry would
/// lose it; here deleted by hand) while its run row says that step was committed: `latest` and
/// `history` answer `Corrupted` naming the run and the step, not the step before as if it were the
/// last. Another run reads as before.
async fn a_lost_last_checkpoint_is_corrupted_not_an_older_latest<B: Server>(b: &B) {
    use graph_runtime::store::conformance::commit_steps;
    let store = b.open().await;
    commit_steps(&store, "lost", 0..5).await;
    commit_steps(&store, "kept", 0..5).await;
    B::execute(&store, "DELETE FROM graph_checkpoints WHERE run_id = 'lost' AND step = 4").await;
    let corrupted = |e: StoreError| match e {
        StoreError::Corrupted { run: Some(run), step: Some(4), detail, .. } if run == "lost" => {
            assert!(
                detail.contains("the run's row is at step 4 but the table of its checkpoints ends at step 3"),
                "{detail}"
            );
        }
        other => panic!("{other:?}"),
    };
    corrupted(store.latest("lost").await.map(|c| c.map(|c| c.step)).unwrap_err());
    corrupted(store.history("lost").await.map(|h| h.len()).unwrap_err());
    assert_eq!(store.latest("kept").await.unwrap().map(|c| c.step), Some(4));
    assert_eq!(
        store.history("kept").await.unwrap().iter().map(|m| m.step).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    assert_eq!(store.latest("none").await.unwrap(), None);
    assert!(store.history("none").await.unwrap().is_empty());
}
