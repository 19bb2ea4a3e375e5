//! Leases of runs to workers, and fencing: what lets many worker processes share the runs of one
//! database (the SQL server stores implement [`LeaseStore`]; graph-runtime's `worker` drives them; see
//! `docs/operations.md`).
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
//! A commit made through [`LeaseStore::leased`] (a [`LeasedStore`]) passes its lease to the store
//! ([`LeaseStore::save_checkpoint_fenced`]), which checks, inside its transaction and
//! under its lock on the run row, that the run's lease row has this owner and token and has not expired
//! (database time); otherwise it writes nothing and reports [`CommitOutcome::Fenced`]. A claim needs the
//! same run-row lock, so no takeover lands between the check and the commit. Effect journal writes
//! (`put_effect`) through a leased store are checked the same way, under the same lock, and report
//! [`EffectOutcome::Fenced`]: a worker that lost its lease does not record, and so does not make, a
//! non-idempotent call (its `Started` entry comes first). Writes made without a lease (a plain
//! `Engine::run` / `resume`) are not checked: see `docs/operations.md`.

use std::time::Duration;

use async_trait::async_trait;

use crate::events::Event;
use crate::{
    Checkpoint, CheckpointMeta, CommitOutcome, EffectOutcome, EffectRecord, EffectState, Integrity,
    OutboxRow, RunFilter, RunInfo, RunStatus, Store, StoreError,
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

/// A store whose runs can be leased to workers: the database-server stores (graph-store-sql's
/// `PostgresStore`, `MySqlStore`). The embedded stores (memory, sled, SQLite) serve one process and do
/// not implement it, so graph-runtime's `Worker` on them does not compile.
#[async_trait]
pub trait LeaseStore: Store + Clone {
    /// Claims up to `n` runnable runs (status `running`, no live lease) of the graph whose fingerprint
    /// is `graph` (graph-runtime's `Graph::fingerprint`) for `owner`, for `lease`, and its parked runs
    /// that are due (`waiting` or `interrupted` with a wake time, [`RunStatus::wake_at_ms`], at or before
    /// the database's clock). Returns the leases taken (fewer than `n`, or none, when there is no more
    /// work). Runs of other graphs are left to their own workers.
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
    ) -> Result<Vec<Lease>, StoreError> {
        self.claim_due_by(owner, graph, n, lease, None).await
    }

    /// [`LeaseStore::claim`], with parked runs due by `due_by` (ms since the Unix epoch) instead of the
    /// database's clock when it is given: for workers that read a test clock.
    ///
    /// # Errors
    ///
    /// As [`LeaseStore::claim`].
    async fn claim_due_by(
        &self,
        owner: &str,
        graph: &str,
        n: usize,
        lease: Duration,
        due_by: Option<u64>,
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

    /// [`Store::save_checkpoint`] fenced by `fence`: the commit rule ([`crate::commit::decide`]) with
    /// `fenced` found inside the commit's transaction, under its lock on the run row, from the run's
    /// lease row (owner, token, expiry in the database's clock).
    ///
    /// # Errors
    ///
    /// As [`Store::save_checkpoint`].
    async fn save_checkpoint_fenced(
        &self,
        cp: &Checkpoint,
        events: &[Event],
        status: &RunStatus,
        expected_version: u64,
        fence: &Lease,
    ) -> Result<CommitOutcome, StoreError>;

    /// [`Store::set_status`] fenced by `fence` ([`crate::commit::decide_status`]).
    ///
    /// # Errors
    ///
    /// As [`Store::set_status`].
    async fn set_status_fenced(
        &self,
        run_id: &str,
        status: &RunStatus,
        events: &[Event],
        pending: Option<&[u8]>,
        expected_version: u64,
        fence: &Lease,
    ) -> Result<CommitOutcome, StoreError>;

    /// [`Store::put_effect`] fenced by `fence`: checked under the run row's lock, as a commit is, before
    /// the compare-and-set ([`crate::journal::decide_effect`]).
    ///
    /// # Errors
    ///
    /// As [`Store::put_effect`].
    async fn put_effect_fenced(
        &self,
        record: &EffectRecord,
        expected: Option<&EffectState>,
        fence: &Lease,
    ) -> Result<EffectOutcome, StoreError>;

    /// This store, with every commit fenced by `lease` ([`CommitOutcome::Fenced`] once it is lost).
    fn leased(&self, lease: Lease) -> LeasedStore<Self> {
        LeasedStore { inner: self.clone(), lease }
    }
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
        let mut outcome =
            self.inner.save_checkpoint_fenced(cp, events, status, expected_version, &self.lease).await;
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
        let outcome = self
            .inner
            .set_status_fenced(run_id, status, events, pending, expected_version, &self.lease)
            .await;
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

    /// Not fenced: a claim is the waiting call's own (a new holder asking for the same call gets the
    /// same message), and a send is not a holder's write.
    async fn mailbox_op(
        &self,
        run_id: &str,
        op: crate::mailbox::MailboxOp,
    ) -> Result<crate::mailbox::MailboxReply, StoreError> {
        self.inner.mailbox_op(run_id, op).await
    }

    async fn mailbox(&self, run_id: &str) -> Result<crate::mailbox::Mailbox, StoreError> {
        self.inner.mailbox(run_id).await
    }

    async fn schedule_op(
        &self,
        name: &str,
        op: crate::schedule::ScheduleOp,
    ) -> Result<crate::schedule::ScheduleReply, StoreError> {
        self.inner.schedule_op(name, op).await
    }

    async fn schedules(&self) -> Result<Vec<crate::schedule::Schedule>, StoreError> {
        self.inner.schedules().await
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
        let outcome = self.inner.put_effect_fenced(record, expected, &self.lease).await;
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

    async fn backup_to(&self, dest: &std::path::Path) -> Result<(), StoreError> {
        self.inner.backup_to(dest).await
    }

    async fn salvage_to(&self, dest: &std::path::Path, runs: &[String]) -> Result<(), StoreError> {
        self.inner.salvage_to(dest, runs).await
    }
}
