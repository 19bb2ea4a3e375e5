//! graph-runtime's database-server stores: [`PostgresStore`] (feature `postgres`) and [`MySqlStore`]
//! for MySQL and MariaDB (feature `mysql`), on sqlx's runtime query API (no compile-time checked
//! queries, no database needed to build).
//!
//! Both are one generic store, [`SqlStore`], over a small [`Dialect`]: the dialect gives the SQL text,
//! how its errors are classified, how a transaction starts, the two statements of a commit that each
//! server writes its own way (the key and the row lock; the writes of a step), and its optional faster
//! path (PostgreSQL's commit groups, MySQL's commit onto a known run row). Everything else — the order
//! of a commit, its retries, the reads, the effect journal, fencing and leases — is written once, in
//! [`SqlStore`]. What they store is the bytes of `graph_store::record` and `graph_store::journal` beside
//! query columns; they never interpret state bytes.
//!
//! # A commit
//!
//! One transaction at READ COMMITTED, whose facts feed the contract's rule
//! (`graph_store::commit::decide`):
//!
//! 1. insert the idempotency key (primary key): a unique violation (23505 / 1062, through sqlx's typed
//!    `is_unique_violation`) is the key seen; a concurrent commit of the same key waits on the key's
//!    index entry until the first one commits or rolls back;
//! 2. lock the run row (`SELECT … FOR UPDATE`): commits of one run are serialized from here on; under a
//!    worker's lease, read the lease row (fenced or not);
//! 3. when the version differs: insert the checkpoint alone, its primary key (run, step) refusing it
//!    is the step taken (read back after the rollback), else the version conflicts (both roll back,
//!    releasing the key);
//! 4. otherwise insert the checkpoint (refused: the step taken, as in 3), its outbox rows and events,
//!    delete the pending step (only when the run row says there is one), write the run row;
//! 5. commit.
//!
//! The statements of steps 1–2 and 4 are the dialect's ([`Dialect::key_then_lock`],
//! [`Dialect::write_step`]): on PostgreSQL steps 1–2 are one statement (the key insert's `RETURNING`
//! feeds the row lock, so the key
//! is still first) and step 4 is one statement of data-modifying CTEs, so a commit is four round trips
//! (`BEGIN`, two statements, `COMMIT`); on MySQL steps 1–2 and steps 3–4 are each one *script*
//! (statements sent as one text query, values as hex literals: `Script` in `mysql.rs`), so a commit is
//! four round trips too, and three onto a run row the store knows (the MySQL dialect's shortcut: the
//! locking read left out, the run row's update checking the version it expects). The connection comes
//! from the pool without a ping (`pool_check`), and with Nagle's algorithm off (`nodelay`).
//!
//! On PostgreSQL, commits of concurrent runs are grouped: one transaction, two statements over arrays,
//! for a whole group (`postgres/group.rs`); a commit the group cannot decide, and a commit made while no
//! group is being written and fewer than four others go alone, runs the transaction above on its own.
//!
//! A unique violation after step 1 (two first commits of a new run racing past an absent run row),
//! a serialization failure or a deadlock (40001, 40P01 / 1213, 1205) rolls back and runs the whole
//! transaction again, up to [`CONFLICT_RETRIES`] times. Any other error rolls back everything.
//!
//! READ COMMITTED is enough because every decision is taken under a lock (the key's index entry, the
//! run row) or enforced by a unique index; SERIALIZABLE / REPEATABLE READ would only add aborts (and,
//! in InnoDB, gap locks) to commits that are already serialized per run.
//!
//! # Errors
//!
//! Connection-class failures (refused, reset, closed by the server, `pg_terminate_backend`, `KILL`,
//! server shutting down, pool timeout) are [`StoreError::Unavailable`](graph_store::StoreError::Unavailable) (retryable: the engine retries
//! through `graph_store::RetryStore`); everything else is a permanent `Backend` error.

// Without a feature the crate is empty; with `generic` alone it holds the generic store, for a dialect
// of one's own, and the helpers of the built-in dialects are unused.
#![cfg(feature = "generic")]
#![cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]

pub mod dialect;
mod lease;
#[cfg(feature = "mysql")]
pub mod mysql;
mod nodelay;
pub(crate) mod pool_check;
#[cfg(feature = "postgres")]
pub mod postgres;
mod store;
mod support;

pub use dialect::{Dialect, Statements, StepWrites};
pub use graph_store::lease::{Lease, LeaseStore, LeasedStore};
#[cfg(feature = "mysql")]
pub use mysql::{MySqlDialect, MySqlStore};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresDialect, PostgresStore};
pub use store::SqlStore;
#[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(unused_imports))]
pub(crate) use support::{
    Abort, conflict_pause, connect_error, db_int, from_db_int, newer_schema, statements, store_error, target,
};
pub use support::{
    CONFLICT_RETRIES, Class, IDLE_IN_TRANSACTION, SERVER_SCHEMA_VERSION, ServerError, client_class,
};

/// The sqlx these stores are built on, for [`PostgresStore::connect_with`] / [`MySqlStore::connect_with`]
/// options and for queries on [`PostgresStore::pool`] / [`MySqlStore::pool`].
pub use sqlx;
