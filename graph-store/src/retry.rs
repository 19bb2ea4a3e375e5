//! [`RetryStore`]: retries a store's retryable errors ([`StoreError::is_retryable`]: a database server
//! that is down, restarting, or closed the connection) with exponential backoff, 10 ms doubling to 1 s,
//! until a deadline. `EngineBuilder::build` wraps every engine's store in one, for
//! `EngineOptions::store_retry_timeout` (default 30 s).
//!
//! # A call that landed
//!
//! A write whose connection dropped after the server committed it is reported `Unavailable`, and its
//! retry finds it done:
//!
//! - `save_checkpoint`: the idempotency key is stored, so the retry is `AlreadyCommitted`; when the
//!   stored checkpoint is this call's, one version past the expected one, it is reported `Committed`
//!   (otherwise `AlreadyCommitted`, which the engine treats as success too, continuing from the stored
//!   checkpoint — except for a run's first checkpoint, where it means the run exists);
//! - `set_status`, which has no key: a retry that finds the run exactly one version past the expected
//!   one, with the status and event head the call wrote, reports it `Committed`;
//! - `put_effect`: a retry that finds the entry equal to the one it writes reports it `Written`.
//!
//! Reads are retried as they are; `prune` and `ack_outbox` too (their counts then cover only the retry).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::events::Event;
use crate::{
    Checkpoint, CheckpointMeta, CommitOutcome, EffectOutcome, EffectRecord, EffectState, Integrity,
    OutboxRow, RunFilter, RunInfo, RunStatus, Store, StoreError,
};

/// The first pause between two attempts.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause between two attempts.
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// A [`Store`] that retries the retryable errors of the store it wraps for up to `timeout` from a call's
/// first retryable error (see the [module docs](self)); after that, the last error is returned.
#[derive(Clone)]
pub struct RetryStore {
    inner: Arc<dyn Store>,
    timeout: Duration,
}

impl std::fmt::Debug for RetryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryStore").field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

impl RetryStore {
    /// Wraps `inner`: a call that fails retryably is retried for up to `timeout` (zero: never retried).
    pub fn new(inner: Arc<dyn Store>, timeout: Duration) -> Self {
        RetryStore { inner, timeout }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    /// Runs `call` until it succeeds, fails permanently, or the deadline passes; `retried` tells the
    /// call whether an earlier attempt failed retryably (and so may have landed).
    async fn retry<T, F, Fut>(&self, what: &str, mut call: F) -> Result<T, StoreError>
    where
        F: FnMut(bool) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        // The clock is read at the first retryable error, not before every call: a loop step makes
        // one store call, and reading the clock was ~1 % of its time.
        let mut deadline = None;
        let mut pause = FIRST_PAUSE;
        let mut retried = false;
        let mut attempts = 1u32;
        loop {
            match call(retried).await {
                Err(e) if e.is_retryable() => {
                    let now = Instant::now();
                    let deadline = *deadline.get_or_insert(now + self.timeout);
                    if now >= deadline {
                        tracing::warn!(what, attempts, error = %e, "the store stayed unavailable; giving up");
                        return Err(e);
                    }
                    tracing::warn!(what, attempts, error = %e, retry_in_ms = pause.as_millis() as u64, "store unavailable; retrying");
                    tokio::time::sleep(pause.min(deadline - now)).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                    retried = true;
                    attempts += 1;
                }
                other => {
                    if retried && other.is_ok() {
                        tracing::info!(what, attempts, "the store is available again");
                    }
                    return other;
                }
            }
        }
    }
}

#[async_trait]
impl Store for RetryStore {
    async fn save_checkpoint(
        &self,
        cp: &Checkpoint,
        events: &[Event],
        status: &RunStatus,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        // A commit that landed before its connection dropped comes back `AlreadyCommitted` (its key). When
        // the stored checkpoint is this one, exactly one version on, it was this call's: `Committed` (the
        // engine starts a run only on `Committed`).
        self.retry("save_checkpoint", |retried| async move {
            match self.inner.save_checkpoint(cp, events, status, expected_version).await? {
                outcome @ CommitOutcome::AlreadyCommitted { version }
                    if retried && version == expected_version + 1 =>
                {
                    let stored = self.inner.load_checkpoint(&cp.run_id, cp.step).await?;
                    Ok(if stored.as_ref() == Some(cp) {
                        CommitOutcome::Committed { version }
                    } else {
                        outcome
                    })
                }
                other => Ok(other),
            }
        })
        .await
    }

    async fn set_status(
        &self,
        run_id: &str,
        status: &RunStatus,
        events: &[Event],
        pending: Option<&[u8]>,
        expected_version: u64,
    ) -> Result<CommitOutcome, StoreError> {
        self.retry("set_status", |retried| async move {
            let outcome = self.inner.set_status(run_id, status, events, pending, expected_version).await?;
            match outcome {
                CommitOutcome::VersionConflict { current } if retried && current == expected_version + 1 => {
                    // Did the attempt that failed land? Then the row holds exactly what it wrote.
                    let row = self.inner.run_info(run_id).await?;
                    let head = events.last().map(|e| (e.seq, e.hash.clone()));
                    let landed = row.is_some_and(|r| {
                        r.version == current
                            && &r.status == status
                            && (head.is_none() || r.event_head.map(|h| (h.seq, h.hash)) == head)
                    });
                    Ok(if landed { CommitOutcome::Committed { version: current } } else { outcome })
                }
                other => Ok(other),
            }
        })
        .await
    }

    async fn events(&self, run_id: &str, from: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        self.retry("events", |_| self.inner.events(run_id, from, limit)).await
    }

    async fn pending(&self, run_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.retry("pending", |_| self.inner.pending(run_id)).await
    }

    /// Retried like the other writes: a send that may have landed is sent again with its dedupe key
    /// (the engine gives every send one), a claim is given its message again, a rejection is refused.
    async fn mailbox_op(
        &self,
        run_id: &str,
        op: crate::mailbox::MailboxOp,
    ) -> Result<crate::mailbox::MailboxReply, StoreError> {
        self.retry("mailbox_op", |_| self.inner.mailbox_op(run_id, op.clone())).await
    }

    async fn mailbox(&self, run_id: &str) -> Result<crate::mailbox::Mailbox, StoreError> {
        self.retry("mailbox", |_| self.inner.mailbox(run_id)).await
    }

    /// Retried like the other writes: a put is checked against the version it read (a retried put
    /// that landed is a conflict the writer reads again), a delete is a delete.
    async fn schedule_op(
        &self,
        name: &str,
        op: crate::schedule::ScheduleOp,
    ) -> Result<crate::schedule::ScheduleReply, StoreError> {
        self.retry("schedule_op", |_| self.inner.schedule_op(name, op.clone())).await
    }

    async fn schedules(&self) -> Result<Vec<crate::schedule::Schedule>, StoreError> {
        self.retry("schedules", |_| self.inner.schedules()).await
    }

    async fn run_info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        self.retry("run_info", |_| self.inner.run_info(run_id)).await
    }

    async fn load_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Checkpoint>, StoreError> {
        self.retry("load_checkpoint", |_| self.inner.load_checkpoint(run_id, step)).await
    }

    async fn latest(&self, run_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        self.retry("latest", |_| self.inner.latest(run_id)).await
    }

    async fn checkpoints(&self, run_id: &str, from: u64, to: u64) -> Result<Vec<Checkpoint>, StoreError> {
        self.retry("checkpoints", |_| self.inner.checkpoints(run_id, from, to)).await
    }

    async fn history(&self, run_id: &str) -> Result<Vec<CheckpointMeta>, StoreError> {
        self.retry("history", |_| self.inner.history(run_id)).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        self.retry("list_runs", |_| self.inner.list_runs(filter)).await
    }

    async fn prune(&self, run_id: &str, keep: usize) -> Result<usize, StoreError> {
        self.retry("prune", |_| self.inner.prune(run_id, keep)).await
    }

    async fn load_effect(&self, key: &str) -> Result<Option<EffectRecord>, StoreError> {
        self.retry("load_effect", |_| self.inner.load_effect(key)).await
    }

    async fn put_effect(
        &self,
        record: &EffectRecord,
        expected: Option<&EffectState>,
    ) -> Result<EffectOutcome, StoreError> {
        self.retry("put_effect", |retried| async move {
            match self.inner.put_effect(record, expected).await? {
                // The attempt that failed landed: the entry is the one this call writes.
                EffectOutcome::Exists(current) if retried && current == *record => Ok(EffectOutcome::Written),
                other => Ok(other),
            }
        })
        .await
    }

    async fn effects(&self, run_id: &str) -> Result<Vec<EffectRecord>, StoreError> {
        self.retry("effects", |_| self.inner.effects(run_id)).await
    }

    async fn outbox(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        self.retry("outbox", |_| self.inner.outbox(limit)).await
    }

    async fn ack_outbox(&self, keys: &[String]) -> Result<usize, StoreError> {
        self.retry("ack_outbox", |_| self.inner.ack_outbox(keys)).await
    }

    async fn check_integrity(&self) -> Result<Integrity, StoreError> {
        self.retry("check_integrity", |_| self.inner.check_integrity()).await
    }

    async fn backup_to(&self, dest: &std::path::Path) -> Result<(), StoreError> {
        self.inner.backup_to(dest).await
    }

    async fn salvage_to(&self, dest: &std::path::Path, runs: &[String]) -> Result<(), StoreError> {
        self.inner.salvage_to(dest, runs).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::MemoryStore;
    use crate::record::test_checkpoint as checkpoint;

    /// A memory store whose writes land and then report `Unavailable` (a connection lost after the
    /// server committed), `lost` times; and whose reads fail `down` times before they work.
    #[derive(Default)]
    struct Flaky {
        inner: MemoryStore,
        lost: AtomicUsize,
        down: AtomicUsize,
    }

    fn take(n: &AtomicUsize) -> bool {
        n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1)).is_ok()
    }

    fn gone() -> StoreError {
        StoreError::unavailable("the connection was closed", "test")
    }

    #[async_trait]
    impl Store for Flaky {
        async fn save_checkpoint(
            &self,
            cp: &Checkpoint,
            events: &[Event],
            status: &RunStatus,
            expected_version: u64,
        ) -> Result<CommitOutcome, StoreError> {
            let out = self.inner.save_checkpoint(cp, events, status, expected_version).await?;
            if take(&self.lost) { Err(gone()) } else { Ok(out) }
        }
        async fn set_status(
            &self,
            run_id: &str,
            status: &RunStatus,
            events: &[Event],
            pending: Option<&[u8]>,
            expected_version: u64,
        ) -> Result<CommitOutcome, StoreError> {
            let out = self.inner.set_status(run_id, status, events, pending, expected_version).await?;
            if take(&self.lost) { Err(gone()) } else { Ok(out) }
        }
        async fn events(&self, run_id: &str, from: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
            self.inner.events(run_id, from, limit).await
        }
        async fn pending(&self, run_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
            self.inner.pending(run_id).await
        }
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
            if take(&self.down) {
                return Err(gone());
            }
            self.inner.run_info(run_id).await
        }
        async fn load_checkpoint(&self, run_id: &str, step: u64) -> Result<Option<Checkpoint>, StoreError> {
            self.inner.load_checkpoint(run_id, step).await
        }
        async fn latest(&self, run_id: &str) -> Result<Option<Checkpoint>, StoreError> {
            self.inner.latest(run_id).await
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
            let out = self.inner.put_effect(record, expected).await?;
            if take(&self.lost) { Err(gone()) } else { Ok(out) }
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
    }

    #[tokio::test]
    async fn writes_that_landed_before_the_connection_dropped_are_reported_as_done() {
        let flaky = Arc::new(Flaky::default());
        let store = RetryStore::new(flaky.clone(), Duration::from_secs(5));
        flaky.lost.store(1, Ordering::SeqCst);
        let first = store.save_checkpoint(&checkpoint(0), &[], &RunStatus::Running, 0).await.unwrap();
        assert_eq!(first, CommitOutcome::Committed { version: 1 }, "the landed first commit is this call's");
        flaky.lost.store(1, Ordering::SeqCst);
        let status = store.set_status("r", &RunStatus::Cancelled, &[], None, 1).await.unwrap();
        assert_eq!(status, CommitOutcome::Committed { version: 2 });
        // Another writer's status is still a conflict.
        assert_eq!(
            store.set_status("r", &RunStatus::Running, &[], None, 1).await.unwrap(),
            CommitOutcome::VersionConflict { current: 2 }
        );
        assert_eq!(flaky.inner.history("r").await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn reads_are_retried_until_the_store_is_back_and_then_give_up_after_the_timeout() {
        let flaky = Arc::new(Flaky::default());
        flaky.down.store(3, Ordering::SeqCst);
        let store = RetryStore::new(flaky.clone(), Duration::from_secs(5));
        assert_eq!(store.run_info("r").await.unwrap(), None);
        flaky.down.store(usize::MAX, Ordering::SeqCst);
        let short = RetryStore::new(flaky, Duration::from_millis(100));
        let started = Instant::now();
        assert!(short.run_info("r").await.unwrap_err().is_retryable());
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
