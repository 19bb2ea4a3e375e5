//! A store that delegates every call to another and lets a test step in where it needs to: around
//! commits (to report acknowledgements, or to abort the process at a commit point), on every error, and
//! on the events read back (to damage them as a disk or an editor would). One wrapper for every test,
//! so a new method of the store contract is delegated in one place.

use async_trait::async_trait;
use graph_runtime::events::Event;
use graph_runtime::node::BoxFuture;
use graph_runtime::store::{
    Checkpoint, CheckpointMeta, EffectOutcome, EffectRecord, EffectState, Integrity, OutboxRow, RunFilter,
    RunInfo,
};
use graph_runtime::{CommitOutcome, RunStatus, Store, StoreError};

/// Where a test steps into a [`Hooked`] store. Every method does nothing by default.
pub trait Hooks: Send + Sync + 'static {
    /// Runs a `save_checkpoint` call (`call`) of `cp`: await it, and act before or after.
    fn save<'a>(
        &'a self,
        cp: &'a Checkpoint,
        call: BoxFuture<'a, Result<CommitOutcome, StoreError>>,
    ) -> BoxFuture<'a, Result<CommitOutcome, StoreError>> {
        let _ = cp;
        call
    }

    /// Sees every error an operation returns.
    fn on_error(&self, e: &StoreError) {
        let _ = e;
    }

    /// What `events` returns, given what the store returned.
    fn events(&self, run_id: &str, events: Vec<Event>) -> Result<Vec<Event>, StoreError> {
        let _ = run_id;
        Ok(events)
    }
}

/// `inner` with `hooks` stepping in.
#[derive(Debug, Clone)]
pub struct Hooked<St, H> {
    /// The store every call reaches.
    pub inner: St,
    /// The test's hooks.
    pub hooks: H,
}

impl<St, H: Hooks> Hooked<St, H> {
    fn saw<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(e) = &r {
            self.hooks.on_error(e);
        }
        r
    }
}

#[async_trait]
impl<St: Store, H: Hooks> Store for Hooked<St, H> {
    async fn save_checkpoint(
        &self,
        cp: &Checkpoint,
        events: &[Event],
        status: &RunStatus,
        v: u64,
    ) -> Result<CommitOutcome, StoreError> {
        let call = self.inner.save_checkpoint(cp, events, status, v);
        let r = self.hooks.save(cp, call).await;
        self.saw(r)
    }
    async fn set_status(
        &self,
        run: &str,
        s: &RunStatus,
        events: &[Event],
        pending: Option<&[u8]>,
        v: u64,
    ) -> Result<CommitOutcome, StoreError> {
        self.saw(self.inner.set_status(run, s, events, pending, v).await)
    }
    async fn events(&self, run: &str, from: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let events = self.saw(self.inner.events(run, from, limit).await)?;
        self.saw(self.hooks.events(run, events))
    }
    async fn pending(&self, run: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.saw(self.inner.pending(run).await)
    }
    async fn mailbox_op(
        &self,
        run: &str,
        op: graph_runtime::store::mailbox::MailboxOp,
    ) -> Result<graph_runtime::store::mailbox::MailboxReply, StoreError> {
        self.saw(self.inner.mailbox_op(run, op).await)
    }
    async fn mailbox(&self, run: &str) -> Result<graph_runtime::store::mailbox::Mailbox, StoreError> {
        self.saw(self.inner.mailbox(run).await)
    }
    async fn schedule_op(
        &self,
        name: &str,
        op: graph_runtime::store::schedule::ScheduleOp,
    ) -> Result<graph_runtime::store::schedule::ScheduleReply, StoreError> {
        self.saw(self.inner.schedule_op(name, op).await)
    }
    async fn schedules(&self) -> Result<Vec<graph_runtime::store::schedule::Schedule>, StoreError> {
        self.saw(self.inner.schedules().await)
    }
    async fn run_info(&self, run: &str) -> Result<Option<RunInfo>, StoreError> {
        self.saw(self.inner.run_info(run).await)
    }
    async fn load_checkpoint(&self, run: &str, step: u64) -> Result<Option<Checkpoint>, StoreError> {
        self.saw(self.inner.load_checkpoint(run, step).await)
    }
    async fn latest(&self, run: &str) -> Result<Option<Checkpoint>, StoreError> {
        self.saw(self.inner.latest(run).await)
    }
    async fn checkpoints(&self, run: &str, from: u64, to: u64) -> Result<Vec<Checkpoint>, StoreError> {
        self.saw(self.inner.checkpoints(run, from, to).await)
    }
    async fn history(&self, run: &str) -> Result<Vec<CheckpointMeta>, StoreError> {
        self.saw(self.inner.history(run).await)
    }
    async fn list_runs(&self, f: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        self.saw(self.inner.list_runs(f).await)
    }
    async fn prune(&self, run: &str, keep: usize) -> Result<usize, StoreError> {
        self.saw(self.inner.prune(run, keep).await)
    }
    async fn load_effect(&self, key: &str) -> Result<Option<EffectRecord>, StoreError> {
        self.saw(self.inner.load_effect(key).await)
    }
    async fn put_effect(
        &self,
        r: &EffectRecord,
        e: Option<&EffectState>,
    ) -> Result<EffectOutcome, StoreError> {
        self.saw(self.inner.put_effect(r, e).await)
    }
    async fn effects(&self, run: &str) -> Result<Vec<EffectRecord>, StoreError> {
        self.saw(self.inner.effects(run).await)
    }
    async fn outbox(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        self.saw(self.inner.outbox(limit).await)
    }
    async fn ack_outbox(&self, keys: &[String]) -> Result<usize, StoreError> {
        self.saw(self.inner.ack_outbox(keys).await)
    }

    async fn check_integrity(&self) -> Result<Integrity, StoreError> {
        self.saw(self.inner.check_integrity().await)
    }

    async fn backup_to(&self, dest: &std::path::Path) -> Result<(), StoreError> {
        self.saw(self.inner.backup_to(dest).await)
    }

    async fn salvage_to(&self, dest: &std::path::Path, runs: &[String]) -> Result<(), StoreError> {
        self.saw(self.inner.salvage_to(dest, runs).await)
    }
}

/// Shared hooks: a test keeps one handle to look at what they saw, the store the other.
impl<H: Hooks> Hooks for std::sync::Arc<H> {
    fn save<'a>(
        &'a self,
        cp: &'a Checkpoint,
        call: BoxFuture<'a, Result<CommitOutcome, StoreError>>,
    ) -> BoxFuture<'a, Result<CommitOutcome, StoreError>> {
        (**self).save(cp, call)
    }
    fn on_error(&self, e: &StoreError) {
        (**self).on_error(e)
    }
    fn events(&self, run_id: &str, events: Vec<Event>) -> Result<Vec<Event>, StoreError> {
        (**self).events(run_id, events)
    }
}
