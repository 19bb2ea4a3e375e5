//! Leases of runs to workers, and fencing: what lets many worker processes share the runs of
//! one PostgreSQL or MySQL/MariaDB database (see [`crate::worker`] and `docs/operations.md`).
//!
//! # The lease table
//!
//! `graph_leases` (schema 2) holds, per run a worker ever claimed, its `owner`, a fencing `token` and
//! `expires_at`, always in the **database's** clock (`clock_timestamp()` / `CURRENT_TIMESTAMP(6)`), so
//! the workers' clocks never matter. Rows are never deleted: the token only grows.
//!
//! - [`LeaseStore::claim`]: one transaction selects up to `n` runs of the claimer's graph whose status
//!   is `running` (this includes a submitted, not yet started run) and that have no live lease, locking
//!   their run rows
//!   `FOR UPDATE SKIP LOCKED` (a run locked by a commit or by another claimer is skipped, never waited
//!   for); for each it re-reads the lease row under its lock, and takes it: owner = the claimer, token =
//!   token + 1, expires = now + lease, and a row in `graph_lease_claims` (the claim log: token, owner,
//!   time, and when the replaced lease ran out). A run's graph is the column `graph_fingerprint` of
//!   `graph_runs` (schema 4), written with the row by a run's first commit made alone. Rows without it
//!   (written before schema 4, or by a PostgreSQL commit group) get it from the claim itself, first, in
//!   the same transaction: it locks the runnable runs whose column is NULL (`SKIP LOCKED`), decodes
//!   each run row and writes the fingerprint it holds, which never changes. So a worker never takes a
//!   run its graph cannot resume, whoever wrote the run.
//! - [`LeaseStore::heartbeat`]: extends a lease that is still the caller's (owner and token) and still
//!   live; `false` when it is not, and the holder must stop.
//! - [`LeaseStore::release`]: hands a lease back (owner '' and expired now), so another worker claims
//!   the run at once instead of after expiry.
//!
//! # Fencing
//!
//! A commit made through [`LeaseStore::leased`] (a [`LeasedStore`]) checks, inside its transaction and
//! under its lock on the run row, that the run's lease row has this owner and token and has not expired
//! (database time); otherwise it writes nothing and reports [`CommitOutcome::Fenced`]. A claim needs the
//! same run-row lock, so no takeover lands between the check and the commit. Effect journal writes
//! (`put_effect`) through a leased store are checked the same way, under the same lock, and report
//! [`EffectOutcome::Fenced`]: a worker that lost its lease does not record, and so does not make, a
//! non-idempotent call (its `Started` entry comes first). Writes made without a lease (a plain
//! `Engine::run` / `resume`) are not checked: see `docs/operations.md`.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::events::Event;
use crate::store::{
    Checkpoint, CheckpointMeta, CommitOutcome, EffectOutcome, EffectRecord, EffectState, Integrity,
    OutboxRow, RunFilter, RunInfo, RunStatus, Store,
};

/// A run held by a worker: who holds it and with which fencing token.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lease {
    /// The run.
    pub run_id: String,
    /// The holder (a worker id).
    pub owner: String,
    /// The fencing token: grows by one with every claim of the run.
    pub token: u64,
}

impl Lease {
    /// A lease value (for tests and tools; leases are made by [`LeaseStore::claim`]).
    pub fn new(run_id: impl Into<String>, owner: impl Into<String>, token: u64) -> Self {
        Lease { run_id: run_id.into(), owner: owner.into(), token }
    }
}

/// A store whose runs can be leased to workers: the database-server stores ([`super::PostgresStore`],
/// [`super::MySqlStore`]). The embedded stores (memory, sled, SQLite) serve one process and do not
/// implement it, so a [`crate::worker::Worker`] on them does not compile.
#[async_trait]
pub trait LeaseStore: Store + Clone {
    /// Claims up to `n` runnable runs (status `running`, no live lease) of the graph whose fingerprint
    /// is `graph` ([`crate::Graph::fingerprint`]) for `owner`, for `lease`. Returns the leases taken
    /// (fewer than `n`, or none, when there is no more work). Runs of other graphs are left to their
    /// own workers.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when the database cannot be reached; `Backend` otherwise. Nothing is
    /// claimed then.
    async fn claim(
        &self,
        owner: &str,
        graph: &str,
        n: usize,
        lease: Duration,
    ) -> Result<Vec<Lease>, StoreError>;

    /// Extends `lease` to now + `duration` if it is still held (owner and token match, not expired);
    /// `false` when it was lost.
    ///
    /// # Errors
    ///
    /// As [`LeaseStore::claim`]; the lease is unchanged then.
    async fn heartbeat(&self, lease: &Lease, duration: Duration) -> Result<bool, StoreError>;

    /// Releases `lease` (if it is still the holder's); `false` when it was not held any more.
    ///
    /// # Errors
    ///
    /// As [`LeaseStore::claim`].
    async fn release(&self, lease: &Lease) -> Result<bool, StoreError>;

    /// The run's current lease as the database has it: holder ('' once released), token, and whether
    /// it is live; `None` for a run never claimed.
    ///
    /// # Errors
    ///
    /// As [`LeaseStore::claim`].
    async fn lease_of(&self, run_id: &str) -> Result<Option<(Lease, bool)>, StoreError>;

    /// This store, with every commit fenced by `lease` ([`CommitOutcome::Fenced`] once it is lost).
    fn leased(&self, lease: Lease) -> LeasedStore<Self> {
        LeasedStore { inner: self.clone(), lease }
    }
}

tokio::task_local! {
    /// The lease the commit running on this task is fenced by; set by [`LeasedStore`] around the call
    /// and read inside the commit transaction (`fenced`), so the commit code takes no extra argument.
    static FENCE: Lease;
}

/// The lease a commit in progress must hold, if any.
pub(in crate::store::server) fn current_fence() -> Option<Lease> {
    FENCE.try_with(Lease::clone).ok()
}

/// A store bound to one lease: reads pass through; `save_checkpoint` and `set_status` are fenced (see the
/// [module docs](self)). Made by [`LeaseStore::leased`].
#[derive(Debug, Clone)]
pub struct LeasedStore<L> {
    inner: L,
    lease: Lease,
}

impl<L> LeasedStore<L> {
    /// The lease commits are fenced by.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }
}

impl<L: LeaseStore> LeasedStore<L> {
    /// Whether the lease is still the run's live lease (a read, outside any commit).
    async fn holds(&self) -> Result<bool, StoreError> {
        Ok(matches!(self.inner.lease_of(&self.lease.run_id).await?, Some((l, true)) if l == self.lease))
    }
}

#[async_trait]
impl<L: LeaseStore> Store for LeasedStore<L> {
    async fn save_checkpoint(
        &self,
        cp: &Checkpoint,
        events: &[Event],
        status: &RunStatus,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        let mut outcome = FENCE
            .scope(self.lease.clone(), self.inner.save_checkpoint(cp, events, status, expected_version))
            .await;
        // `AlreadyCommitted` / `StepTaken` are decided (by the key, the step) before the fencing check:
        // nothing was written, but a holder that lost its lease must stop rather than adopt and go on.
        if matches!(outcome, Ok(CommitOutcome::AlreadyCommitted { .. } | CommitOutcome::StepTaken { .. }))
            && !self.holds().await?
        {
            outcome = Ok(CommitOutcome::Fenced);
        }
        if matches!(outcome, Ok(CommitOutcome::Fenced)) {
            tracing::warn!(run = %cp.run_id, step = cp.step, owner = %self.lease.owner, token = self.lease.token,
                "commit fenced: the lease was lost");
        }
        outcome
    }

    async fn set_status(
        &self,
        run_id: &str,
        status: &RunStatus,
        events: &[Event],
        pending: Option<&[u8]>,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        let write = self.inner.set_status(run_id, status, events, pending, expected_version);
        let outcome = FENCE.scope(self.lease.clone(), write).await;
        if matches!(outcome, Ok(CommitOutcome::Fenced)) {
            tracing::warn!(run = run_id, owner = %self.lease.owner, token = self.lease.token,
                "status update fenced: the lease was lost");
        }
        outcome
    }

    async fn events(&self, run_id: &str, from: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        self.inner.events(run_id, from, limit).await
    }

    async fn pending(&self, run_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.pending(run_id).await
    }

    async fn run_info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        self.inner.run_info(run_id).await
    }

    async fn load_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Checkpoint>, StoreError> {
        self.inner.load_checkpoint(run_id, step).await
    }

    async fn latest(&self, run_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        self.inner.latest(run_id).await
    }

    async fn checkpoints(&self, run_id: &str, from: u64, to: u64) -> Result<Vec<Checkpoint>, StoreError> {
        self.inner.checkpoints(run_id, from, to).await
    }

    async fn history(&self, run_id: &str) -> Result<Vec<CheckpointMeta>, StoreError> {
        self.inner.history(run_id).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        self.inner.list_runs(filter).await
    }

    async fn prune(&self, run_id: &str, keep: usize) -> Result<usize, StoreError> {
        self.inner.prune(run_id, keep).await
    }

    async fn load_effect(&self, key: &str) -> Result<Option<EffectRecord>, StoreError> {
        self.inner.load_effect(key).await
    }

    async fn put_effect(
        &self,
        record: &EffectRecord,
        expected: Option<&EffectState>,
    ) -> Result<EffectOutcome, StoreError> {
        let outcome = FENCE.scope(self.lease.clone(), self.inner.put_effect(record, expected)).await;
        if matches!(outcome, Ok(EffectOutcome::Fenced)) {
            tracing::warn!(run = %record.run_id, effect = %record.name, owner = %self.lease.owner,
                token = self.lease.token, "effect journal write fenced: the lease was lost");
        }
        outcome
    }

    async fn effects(&self, run_id: &str) -> Result<Vec<EffectRecord>, StoreError> {
        self.inner.effects(run_id).await
    }

    async fn outbox(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        self.inner.outbox(limit).await
    }

    async fn ack_outbox(&self, keys: &[String]) -> Result<usize, StoreError> {
        self.inner.ack_outbox(keys).await
    }

    async fn check_integrity(&self) -> Result<Integrity, StoreError> {
        self.inner.check_integrity().await
    }
}

/// At most this many run rows have their graph read per claim (see `try_claim`).
const SORT_BATCH: u64 = 256;

/// The lease operations of one server store, over its SQL (`$sql`) and error classes (`$classify`).
macro_rules! lease_store {
    ($store:ty, $db:ty, $sql:ident, $classify:path) => {
        use crate::store::server::{Abort, CONFLICT_RETRIES, Class, conflict_pause, db_int};

        impl $store {
            /// Fencing, called by the commit transaction right after it locked the run row:
            /// true when the commit runs under a lease ([`LeasedStore`]) that is not the run's live
            /// lease any more (owner, token, expiry in database time). Unleased commits: false.
            pub(in crate::store::server) async fn fenced(
                tx: &mut sqlx::Transaction<'static, $db>,
                run: &str,
            ) -> Result<bool, Abort> {
                let Some(lease) = current_fence() else { return Ok(false) };
                if lease.run_id != run {
                    return Ok(true);
                }
                let row = sqlx::query($sql::FENCE)
                    .bind(run)
                    .fetch_optional(&mut **tx)
                    .await
                    .map_err(|e| Abort::Sql($classify(&e), e))?;
                let Some(row) = row else { return Ok(true) };
                let (owner, token, live) = lease_row(&row).map_err(|e| Abort::Sql($classify(&e), e))?;
                Ok(!(live && owner == lease.owner && token == lease.token))
            }

            /// One attempt of a claim.
            async fn try_claim(
                &self,
                owner: &str,
                graph: &str,
                n: usize,
                lease: Duration,
            ) -> Result<Vec<Lease>, sqlx::Error> {
                let mut tx = self.transaction().await?;
                // The runnable runs no claim has looked at yet: their graph, read from the run row, is
                // written to `graph_fingerprint` (it never changes), so the candidates below are this
                // graph's alone. Their rows are locked; the locked ones are left for the next claim.
                let unsorted: Vec<(String, Vec<u8>)> = sqlx::query_as($sql::UNSORTED)
                    .bind(db_int(SORT_BATCH))
                    .fetch_all(&mut *tx)
                    .await?;
                for (id, bytes) in unsorted {
                    let fingerprint = match crate::store::record::decode_run(&bytes) {
                        Ok(info) => info.graph_fingerprint,
                        Err(e) => {
                            // No worker could resume it; '' keeps it out of every claim.
                            tracing::warn!(run = %id, error = %e, "a run row does not decode; no worker will claim it");
                            String::new()
                        }
                    };
                    sqlx::query($sql::SET_GRAPH).bind(fingerprint).bind(&id).execute(&mut *tx).await?;
                }
                let ids: Vec<String> = sqlx::query_scalar($sql::CANDIDATES)
                    .bind(graph)
                    .bind(db_int(n as u64))
                    .fetch_all(&mut *tx)
                    .await?;
                let mut taken = Vec::with_capacity(ids.len());
                for id in ids {
                    let row = sqlx::query($sql::LOCK_LEASE).bind(&id).fetch_optional(&mut *tx).await?;
                    let token = match row {
                        Some(row) => {
                            let (holder, token, live) = lease_row(&row)?;
                            if live && !holder.is_empty() {
                                // A heartbeat extended it after the candidates were read.
                                continue;
                            }
                            token + 1
                        }
                        None => 1,
                    };
                    $sql::log_claim(&id, db_int(token), owner).execute(&mut *tx).await?;
                    let upsert = sqlx::query($sql::UPSERT_LEASE).bind(&id).bind(owner).bind(db_int(token));
                    $sql::bind_duration(upsert, lease).execute(&mut *tx).await?;
                    taken.push(Lease { run_id: id, owner: owner.to_owned(), token });
                }
                tx.commit().await?;
                Ok(taken)
            }
        }

        #[async_trait]
        impl LeaseStore for $store {
            async fn claim(
                &self,
                owner: &str,
                graph: &str,
                n: usize,
                lease: Duration,
            ) -> Result<Vec<Lease>, StoreError> {
                if n == 0 {
                    return Ok(Vec::new());
                }
                let mut tries = 0;
                loop {
                    match self.try_claim(owner, graph, n, lease).await {
                        Ok(taken) => {
                            if !taken.is_empty() {
                                tracing::debug!(owner, claimed = taken.len(), "claimed runs");
                            }
                            return Ok(taken);
                        }
                        Err(e) => {
                            let class = $classify(&e);
                            if matches!(class, Class::Conflict | Class::Unique) && tries < CONFLICT_RETRIES {
                                tries += 1;
                                conflict_pause(tries).await;
                                continue;
                            }
                            return Err(self.error(class, "claiming runs", e));
                        }
                    }
                }
            }

            async fn heartbeat(&self, lease: &Lease, duration: Duration) -> Result<bool, StoreError> {
                let q = || {
                    $sql::bind_duration(sqlx::query($sql::HEARTBEAT), duration)
                        .bind(lease.run_id.as_str())
                        .bind(lease.owner.as_str())
                        .bind(db_int(lease.token))
                };
                // Run twice, it extends the lease twice: the same.
                let done = self.on_pool("extending a lease", || q().execute(self.pool())).await?;
                Ok(done.rows_affected() == 1)
            }

            async fn release(&self, lease: &Lease) -> Result<bool, StoreError> {
                let done = sqlx::query($sql::RELEASE)
                    .bind(lease.run_id.as_str())
                    .bind(lease.owner.as_str())
                    .bind(db_int(lease.token))
                    .execute(self.pool())
                    .await
                    .map_err(|e| self.error($classify(&e), "releasing a lease", e))?;
                Ok(done.rows_affected() == 1)
            }

            async fn lease_of(&self, run_id: &str) -> Result<Option<(Lease, bool)>, StoreError> {
                let err = |e: sqlx::Error| self.error($classify(&e), "reading a lease", e);
                let row = self
                    .on_pool("reading a lease", || {
                        sqlx::query($sql::FENCE).bind(run_id).fetch_optional(self.pool())
                    })
                    .await?;
                match row {
                    Some(row) => {
                        let (owner, token, live) = lease_row(&row).map_err(err)?;
                        Ok(Some((Lease { run_id: run_id.to_owned(), owner, token }, live)))
                    }
                    None => Ok(None),
                }
            }
        }
    };
}

/// (owner, token, live) of a lease row read with `FENCE` / `LOCK_LEASE`.
fn lease_row<R: sqlx::Row>(row: &R) -> Result<(String, u64, bool), sqlx::Error>
where
    usize: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let owner: String = row.try_get(0)?;
    let token: i64 = row.try_get(1)?;
    let live: i64 = row.try_get(2)?;
    Ok((owner, super::from_db_int(token), live != 0))
}

#[cfg(feature = "postgres")]
mod pg {
    use super::*;
    use crate::store::server::PostgresStore;
    use crate::store::server::postgres::classify;
    use sqlx::postgres::{PgArguments, Postgres};

    mod sql {
        use super::*;

        /// Runnable runs whose graph no claim has read yet, their rows locked, skipping locked ones.
        pub(super) const UNSORTED: &str = "SELECT run_id, row_bytes FROM graph_runs \
             WHERE status = 'running' AND graph_fingerprint IS NULL \
             ORDER BY run_id LIMIT $1 FOR UPDATE SKIP LOCKED";
        pub(super) const SET_GRAPH: &str = "UPDATE graph_runs SET graph_fingerprint = $1 WHERE run_id = $2";
        /// Runnable runs of graph $1 without a live lease, their run rows locked, skipping locked ones.
        pub(super) const CANDIDATES: &str = "SELECT r.run_id FROM graph_runs r WHERE r.status = 'running' \
             AND r.graph_fingerprint = $1 AND NOT EXISTS (SELECT 1 FROM graph_leases l WHERE l.run_id = r.run_id AND l.owner <> '' \
             AND l.expires_at > clock_timestamp()) \
             ORDER BY r.run_id LIMIT $2 FOR UPDATE OF r SKIP LOCKED";
        /// (owner, token, live) of a run's lease.
        pub(super) const FENCE: &str = "SELECT owner, token, \
             (CASE WHEN expires_at > clock_timestamp() THEN 1 ELSE 0 END)::BIGINT \
             FROM graph_leases WHERE run_id = $1";
        pub(super) const LOCK_LEASE: &str = "SELECT owner, token, \
             (CASE WHEN expires_at > clock_timestamp() THEN 1 ELSE 0 END)::BIGINT \
             FROM graph_leases WHERE run_id = $1 FOR UPDATE";
        /// Before the lease is replaced: the previous holder and expiry come from its row.
        pub(super) const LOG_CLAIM: &str = "INSERT INTO graph_lease_claims \
             (run_id, token, owner, claimed_at, prev_owner, prev_expires) VALUES ($1, $2, $3, clock_timestamp(), \
             (SELECT owner FROM graph_leases WHERE run_id = $1), \
             (SELECT expires_at FROM graph_leases WHERE run_id = $1))";
        pub(super) const UPSERT_LEASE: &str = "INSERT INTO graph_leases (run_id, owner, token, expires_at) \
             VALUES ($1, $2, $3, clock_timestamp() + $4 * interval '1 microsecond') \
             ON CONFLICT (run_id) DO UPDATE SET owner = EXCLUDED.owner, token = EXCLUDED.token, \
             expires_at = EXCLUDED.expires_at";
        pub(super) const HEARTBEAT: &str = "UPDATE graph_leases \
             SET expires_at = clock_timestamp() + $1 * interval '1 microsecond' \
             WHERE run_id = $2 AND owner = $3 AND token = $4 AND expires_at > clock_timestamp()";
        pub(super) const RELEASE: &str = "UPDATE graph_leases SET owner = '', \
             expires_at = LEAST(expires_at, clock_timestamp()) WHERE run_id = $1 AND owner = $2 AND token = $3";

        /// The claim log row of `token` (the previous holder and expiry read from the lease row).
        pub(super) fn log_claim<'q>(
            id: &'q str,
            token: i64,
            owner: &'q str,
        ) -> sqlx::query::Query<'q, Postgres, PgArguments> {
            sqlx::query(LOG_CLAIM).bind(id).bind(token).bind(owner)
        }

        /// Binds a duration (microseconds, as a float: `float8 * interval`).
        pub(super) fn bind_duration(
            q: sqlx::query::Query<'_, Postgres, PgArguments>,
            d: Duration,
        ) -> sqlx::query::Query<'_, Postgres, PgArguments> {
            q.bind(d.as_micros() as f64)
        }
    }

    lease_store!(PostgresStore, Postgres, sql, classify);
}

#[cfg(feature = "mysql")]
mod my {
    use super::*;
    use crate::store::server::MySqlStore;
    use crate::store::server::mysql::classify;
    use sqlx::mysql::{MySql, MySqlArguments};

    mod sql {
        use super::*;

        /// Runnable runs whose graph no claim has read yet, their rows locked, skipping locked ones.
        pub(super) const UNSORTED: &str = "SELECT CAST(run_id AS CHAR), row_bytes FROM graph_runs \
             WHERE status = 'running' AND graph_fingerprint IS NULL \
             ORDER BY run_id LIMIT ? FOR UPDATE SKIP LOCKED";
        pub(super) const SET_GRAPH: &str = "UPDATE graph_runs SET graph_fingerprint = ? WHERE run_id = ?";
        /// Runnable runs of graph ? without a live lease, their run rows locked, skipping locked ones
        /// (the subquery's rows are read, not locked: InnoDB locks only the outer query's rows).
        pub(super) const CANDIDATES: &str = "SELECT CAST(r.run_id AS CHAR) FROM graph_runs r WHERE r.status = 'running' \
             AND r.graph_fingerprint = ? AND NOT EXISTS (SELECT 1 FROM graph_leases l WHERE l.run_id = r.run_id AND l.owner <> '' \
             AND l.expires_at > CURRENT_TIMESTAMP(6)) \
             ORDER BY r.run_id LIMIT ? FOR UPDATE SKIP LOCKED";
        /// (owner, token, live) of a run's lease.
        pub(super) const FENCE: &str = "SELECT CAST(owner AS CHAR), token, CAST(expires_at > CURRENT_TIMESTAMP(6) AS SIGNED) \
             FROM graph_leases WHERE run_id = ?";
        pub(super) const LOCK_LEASE: &str = "SELECT CAST(owner AS CHAR), token, \
             CAST(expires_at > CURRENT_TIMESTAMP(6) AS SIGNED) FROM graph_leases WHERE run_id = ? FOR UPDATE";
        /// Before the lease is replaced: the previous holder and expiry come from its row (bound twice).
        pub(super) const LOG_CLAIM: &str = "INSERT INTO graph_lease_claims \
             (run_id, token, owner, claimed_at, prev_owner, prev_expires) \
             SELECT ?, ?, ?, CURRENT_TIMESTAMP(6), l.owner, l.expires_at \
             FROM (SELECT 1 AS one) x LEFT JOIN graph_leases l ON l.run_id = ?";
        pub(super) const UPSERT_LEASE: &str = "INSERT INTO graph_leases (run_id, owner, token, expires_at) \
             VALUES (?, ?, ?, CURRENT_TIMESTAMP(6) + INTERVAL ? MICROSECOND) \
             ON DUPLICATE KEY UPDATE owner = VALUES(owner), token = VALUES(token), \
             expires_at = VALUES(expires_at)";
        pub(super) const HEARTBEAT: &str = "UPDATE graph_leases \
             SET expires_at = CURRENT_TIMESTAMP(6) + INTERVAL ? MICROSECOND \
             WHERE run_id = ? AND owner = ? AND token = ? AND expires_at > CURRENT_TIMESTAMP(6)";
        pub(super) const RELEASE: &str = "UPDATE graph_leases SET owner = '', \
             expires_at = LEAST(expires_at, CURRENT_TIMESTAMP(6)) WHERE run_id = ? AND owner = ? AND token = ?";

        /// The claim log row of `token` (the previous holder and expiry read from the lease row).
        pub(super) fn log_claim<'q>(
            id: &'q str,
            token: i64,
            owner: &'q str,
        ) -> sqlx::query::Query<'q, MySql, MySqlArguments> {
            sqlx::query(LOG_CLAIM).bind(id).bind(token).bind(owner).bind(id)
        }

        /// Binds a duration (microseconds).
        pub(super) fn bind_duration(
            q: sqlx::query::Query<'_, MySql, MySqlArguments>,
            d: Duration,
        ) -> sqlx::query::Query<'_, MySql, MySqlArguments> {
            q.bind(i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        }
    }

    lease_store!(MySqlStore, MySql, sql, classify);
}
