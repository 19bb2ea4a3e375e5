//! A restore of a server store with the database's own tools: runs on PostgreSQL dumped with
//! `pg_dump --format=custom` and restored with `pg_restore` into a new database, and on MariaDB dumped
//! with `mariadb-dump --single-transaction` and loaded with `mariadb`, each while a run waits for its
//! input. The restored database opens as a store, every run verifies and has the history it had, and
//! the waiting run resumes to completion. (The server stores have no `backup_to`: it answers
//! `Unsupported`.)
//!
//!
//! And two engines without leases (plain stores, no `LeaseStore`) driving the same runs at once on one
//! database: losing a race is a typed, retryable outcome, never a damage report about a sound store,
//! and every run ends the same for both with a log that verifies.
//!
//! Needs the servers and their client tools: `cargo test -p graph-tests --features postgres,mysql
//! --test stores -- server_hardening::`.
#![cfg(any(feature = "postgres", feature = "mysql"))]

use std::process::Command;
use std::sync::Arc;

use graph_runtime::engine::verify_run;
use graph_runtime::{Engine, Store, StoreError};
use graph_tests::faults::run_id;
use graph_tests::graphs::approval;
use graph_tests::{Trace, crash_graph};

/// Two completed runs of `crash_graph` and one approval run waiting for its input, in `store`.
async fn fill(store: Arc<dyn Store>, ledger: std::path::PathBuf) {
    let engine = Engine::builder(crash_graph(5)).shared_store(store.clone()).build();
    for i in 0..2 {
        assert!(engine.run(&run_id(i), Trace::default()).await.unwrap().is_completed());
    }
    let waiting = Engine::builder(approval(1, ledger, None)).shared_store(store).build();
    assert_eq!(waiting.run("waiting", Trace::default()).await.unwrap().interrupts().len(), 1);
}

/// Each run's history (idempotency keys), in `store`.
async fn histories(store: &dyn Store) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for run in [run_id(0), run_id(1), "waiting".to_owned()] {
        verify_run(store, &run, None).await.unwrap_or_else(|e| panic!("{run}: {e}"));
        out.push(store.history(&run).await.unwrap().into_iter().map(|m| m.idempotency_key).collect());
    }
    out
}

/// The restored store: the same histories, and the waiting run resumes.
async fn check_restored(original: &[Vec<String>], restored: Arc<dyn Store>, ledger: std::path::PathBuf) {
    assert_eq!(histories(&*restored).await, original);
    let unsupported = restored.backup_to(std::path::Path::new("/nonexistent")).await.unwrap_err();
    assert!(matches!(unsupported, StoreError::Unsupported { .. }), "{unsupported}");
    let engine = Engine::builder(approval(1, ledger, None)).shared_store(restored).build();
    assert!(engine.resume_with_input("waiting", &true).await.unwrap().is_completed());
}

fn run(command: &mut Command) {
    let out = command.output().unwrap_or_else(|e| panic!("{command:?} does not start: {e}"));
    assert!(out.status.success(), "{command:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_postgres_database_restored_with_pg_restore_resumes_its_runs() {
    use graph_runtime::store::PostgresStore;
    use graph_tests::backends::Postgres;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (Postgres::new(), Postgres::new());
    let store: Arc<dyn Store> = Arc::new(a.connect_with(PostgresStore::pool_options()).await.unwrap());
    fill(store.clone(), dir.path().join("ledger")).await;
    let original = histories(&*store).await;
    let dump = dir.path().join("dump");
    run(Command::new("pg_dump").args(["--format=custom", "--no-owner", "--file"]).arg(&dump).arg(a.url()));
    drop(store);
    b.create().await;
    run(Command::new("pg_restore").args(["--no-owner", "--dbname"]).arg(b.url()).arg(&dump));
    let restored: Arc<dyn Store> = Arc::new(b.connect_with(PostgresStore::pool_options()).await.unwrap());
    check_restored(&original, restored, dir.path().join("ledger")).await;
}

#[cfg(feature = "mysql")]
#[tokio::test]
async fn a_mariadb_database_restored_from_mariadb_dump_resumes_its_runs() {
    use graph_runtime::store::MySqlStore;
    use graph_tests::backends::MySql;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (MySql::new(), MySql::new());
    let store: Arc<dyn Store> = Arc::new(a.connect_with(MySqlStore::pool_options()).await.unwrap());
    fill(store.clone(), dir.path().join("ledger")).await;
    let original = histories(&*store).await;
    let o = a.options();
    let (host, port, user) = (o.get_host().to_owned(), o.get_port().to_string(), o.get_username().to_owned());
    let dump = dir.path().join("dump.sql");
    let connection = |c: &mut Command| {
        c.args(["--host", &host, "--port", &port, "--user", &user, "--protocol=tcp"]);
    };
    let mut dumping = Command::new("mariadb-dump");
    connection(&mut dumping);
    dumping.args(["--single-transaction", "--routines", "--result-file"]).arg(&dump).arg(a.database());
    run(&mut dumping);
    drop(store);
    b.create().await;
    let mut loading = Command::new("mariadb");
    connection(&mut loading);
    loading.arg(b.database()).stdin(std::fs::File::open(&dump).unwrap());
    run(&mut loading);
    let restored: Arc<dyn Store> = Arc::new(b.connect_with(MySqlStore::pool_options()).await.unwrap());
    check_restored(&original, restored, dir.path().join("ledger")).await;
}

/// Two engines over `stores` (one database) drive the same four runs of `crash_graph` to completion.
async fn two_engines_drive_the_same_runs(stores: [Arc<dyn Store>; 2]) {
    let engines: Vec<Engine<Trace>> =
        stores.into_iter().map(|s| Engine::builder(crash_graph(40)).shared_store(s).build()).collect();
    graph_tests::faults::drive_the_same_runs(&engines, 4, "two engines without leases").await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_without_leases_on_postgres_never_report_damage() {
    use graph_runtime::store::PostgresStore;
    let db = graph_tests::backends::Postgres::new();
    let a: Arc<dyn Store> = Arc::new(db.connect_with(PostgresStore::pool_options()).await.unwrap());
    let b: Arc<dyn Store> = Arc::new(db.connect_with(PostgresStore::pool_options()).await.unwrap());
    two_engines_drive_the_same_runs([a, b]).await;
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_without_leases_on_mariadb_never_report_damage() {
    use graph_runtime::store::MySqlStore;
    let db = graph_tests::backends::MySql::new();
    let a: Arc<dyn Store> = Arc::new(db.connect_with(MySqlStore::pool_options()).await.unwrap());
    let b: Arc<dyn Store> = Arc::new(db.connect_with(MySqlStore::pool_options()).await.unwrap());
    two_engines_drive_the_same_runs([a, b]).await;
}
