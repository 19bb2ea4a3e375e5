//! The lease operations of the server stores ([`graph_store::lease::LeaseStore`]): claims,
//! heartbeats, releases, and the fenced writes. See `graph_store::lease` for what leases and fencing
//! promise.

use std::time::Duration;

use async_trait::async_trait;
use graph_store::events::Event;
use graph_store::lease::{Lease, LeaseStore};
use graph_store::{
    Checkpoint, CommitOutcome, EffectOutcome, EffectRecord, EffectState, RunStatus, StoreError,
};
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Type};

use crate::dialect::{Dialect, micros};
use crate::store::lease_row;
use crate::{CONFLICT_RETRIES, Class, SqlStore, conflict_pause, db_int};

/// At most this many run rows have their graph read per claim (see `try_claim`).
const SORT_BATCH: u64 = 256;

impl<D: Dialect> SqlStore<D>
where
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'q> &'q str: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> &'q [u8]: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> i64: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    for<'q> bool: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    for<'q> Vec<u8>: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    for<'q> String: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    usize: ColumnIndex<<D::Db as Database>::Row>,
{
    /// One attempt of a claim.
    async fn try_claim(
        &self,
        owner: &str,
        graph: &str,
        n: usize,
        lease: Duration,
        due_by: Option<u64>,
    ) -> Result<Vec<Lease>, sqlx::Error> {
        let mut tx = self.transaction().await?;
        // The runnable runs no claim has looked at yet: their graph, read from the run row, is written to
        // `graph_fingerprint` (a migration's commit sets it again in its own transaction), so the candidates below are this graph's alone. Their
        // rows are locked; the locked ones are left for the next claim.
        let unsorted: Vec<(String, Vec<u8>)> =
            sqlx::query_as(D::SQL.unsorted).bind(db_int(SORT_BATCH)).fetch_all(&mut *tx).await?;
        for (id, bytes) in unsorted {
            let fingerprint = match graph_store::record::decode_run(&bytes) {
                Ok(info) => info.graph_fingerprint,
                Err(e) => {
                    // No worker could resume it; '' keeps it out of every claim.
                    tracing::warn!(run = %id, error = %e, "a run row does not decode; no worker will claim it");
                    String::new()
                }
            };
            sqlx::query(D::SQL.set_graph).bind(fingerprint).bind(id.as_str()).execute(&mut *tx).await?;
        }
        let now = due_by.map_or(-1, db_int);
        let ids: Vec<String> = sqlx::query_scalar(D::SQL.candidates)
            .bind(graph)
            .bind(now)
            .bind(now)
            .bind(db_int(n as u64))
            .fetch_all(&mut *tx)
            .await?;
        let mut taken = Vec::with_capacity(ids.len());
        for id in ids {
            let row = sqlx::query(D::SQL.lock_lease).bind(id.as_str()).fetch_optional(&mut *tx).await?;
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
            sqlx::query(D::SQL.log_claim)
                .bind(id.as_str())
                .bind(db_int(token))
                .bind(owner)
                .bind(id.as_str())
                .execute(&mut *tx)
                .await?;
            sqlx::query(D::SQL.upsert_lease)
                .bind(id.as_str())
                .bind(owner)
                .bind(db_int(token))
                .bind(micros(lease))
                .execute(&mut *tx)
                .await?;
            taken.push(Lease::new(id, owner, token));
        }
        tx.commit().await?;
        Ok(taken)
    }
}

#[async_trait]
impl<D: Dialect> LeaseStore for SqlStore<D>
where
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'q> &'q str: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> &'q [u8]: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> i64: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    for<'q> bool: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    for<'q> Vec<u8>: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    for<'q> String: Encode<'q, D::Db> + Decode<'q, D::Db> + Type<D::Db>,
    usize: ColumnIndex<<D::Db as Database>::Row>,
{
    async fn claim_due_by(
        &self,
        owner: &str,
        graph: &str,
        n: usize,
        lease: Duration,
        due_by: Option<u64>,
    ) -> Result<Vec<Lease>, StoreError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut tries = 0;
        loop {
            match self.try_claim(owner, graph, n, lease, due_by).await {
                Ok(taken) => {
                    if !taken.is_empty() {
                        tracing::debug!(owner, claimed = taken.len(), "claimed runs");
                    }
                    return Ok(taken);
                }
                Err(e) => {
                    let class = D::classify(&e);
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
            sqlx::query(D::SQL.heartbeat)
                .bind(micros(duration))
                .bind(lease.run_id.as_str())
                .bind(lease.owner.as_str())
                .bind(db_int(lease.token))
        };
        // Run twice, it extends the lease twice: the same.
        let done = self.on_pool("extending a lease", || q().execute(&self.pool)).await?;
        Ok(D::rows_affected(&done) == 1)
    }

    async fn release(&self, lease: &Lease) -> Result<bool, StoreError> {
        let done = sqlx::query(D::SQL.release)
            .bind(lease.run_id.as_str())
            .bind(lease.owner.as_str())
            .bind(db_int(lease.token))
            .execute(&self.pool)
            .await
            .map_err(|e| self.error(D::classify(&e), "releasing a lease", e))?;
        Ok(D::rows_affected(&done) == 1)
    }

    async fn lease_of(&self, run_id: &str) -> Result<Option<(Lease, bool)>, StoreError> {
        let what = "reading a lease";
        let row =
            self.on_pool(what, || sqlx::query(D::SQL.fence).bind(run_id).fetch_optional(&self.pool)).await?;
        match row {
            Some(row) => {
                let (owner, token, live) =
                    lease_row(&row).map_err(|e| self.error(D::classify(&e), what, e))?;
                Ok(Some((Lease::new(run_id, owner, token), live)))
            }
            None => Ok(None),
        }
    }

    async fn save_checkpoint_fenced(
        &self,
        cp: &Checkpoint,
        events: &[Event],
        status: &RunStatus,
        expected_version: u64,
        fence: &Lease,
    ) -> Result<CommitOutcome, StoreError> {
        self.save(cp, events, status, expected_version, Some(fence)).await
    }

    async fn set_status_fenced(
        &self,
        run_id: &str,
        status: &RunStatus,
        events: &[Event],
        pending: Option<&[u8]>,
        expected_version: u64,
        fence: &Lease,
    ) -> Result<CommitOutcome, StoreError> {
        self.status(run_id, status, events, pending, expected_version, Some(fence)).await
    }

    async fn put_effect_fenced(
        &self,
        record: &EffectRecord,
        expected: Option<&EffectState>,
        fence: &Lease,
    ) -> Result<EffectOutcome, StoreError> {
        self.effect(record, expected, Some(fence)).await
    }
}

#[cfg(all(test, any(feature = "postgres", feature = "mysql")))]
mod tests {
    use crate::Dialect;

    /// The claims find runnable and parked runs by the persisted names of their statuses, written into
    /// the SQL as literals (the planner sees them): they must be the names the stores write.
    #[test]
    fn claims_name_the_persisted_running_and_parked_statuses() {
        use graph_store::StatusKind;
        let running = format!("status = '{}'", StatusKind::Running.as_str());
        let parked =
            format!("status IN ('{}', '{}')", StatusKind::Waiting.as_str(), StatusKind::Interrupted.as_str());
        let mut statements: Vec<&str> = Vec::new();
        #[cfg(feature = "postgres")]
        statements.extend([crate::PostgresDialect::SQL.unsorted, crate::PostgresDialect::SQL.candidates]);
        #[cfg(feature = "mysql")]
        statements.extend([crate::MySqlDialect::SQL.unsorted, crate::MySqlDialect::SQL.candidates]);
        for sql in statements {
            assert!(sql.contains(&running), "{sql}");
            assert!(sql.contains(&parked), "{sql}");
        }
    }
}
