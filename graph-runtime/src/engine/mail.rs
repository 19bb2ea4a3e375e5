//! External events: [`Engine::send_event`] puts a message in a run's mailbox (the store's, see
//! `graph_store::mailbox`) and, when the run waits for its topic (`Ctx::wait_event`), makes the run
//! due now, so whoever wakes due runs (the timer service, a worker, [`Engine::wake`]) delivers it. A
//! message sent before the run waits stays in the mailbox; the run takes it when it asks (a run that
//! parks with mail for its topic is woken at once by the engine that parked it).

use std::sync::atomic::{AtomicU64, Ordering};

use super::core::Engine;
use crate::error::{Error, Result};
use crate::state::Reducer;
use crate::store::mailbox::{Mailbox, MailboxOp, MailboxReply};
use crate::store::{InterruptKind, RunStatus, Store};

/// What [`Engine::send_event`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sent {
    /// The message's sequence number in the run's mailbox (the send order, from 0).
    pub seq: u64,
    /// A message with the same dedupe key was sent before (it is that one; nothing was added).
    pub duplicate: bool,
}

impl<S: Reducer> Engine<S> {
    /// Sends an external event to a run: `payload` under `topic`, kept in the run's mailbox until a
    /// node of the run waits for the topic (`Ctx::wait_event`), delivered in send order per topic,
    /// each message once. Works from any process with the store (and no graph of the run's: the
    /// mailbox is the store's). When the run waits for the topic now, it becomes due at once: the timer
    /// service ([`Engine::run_timers`]) or a worker delivers the message; [`Engine::wake`] delivers it
    /// here. Returns once the message is durable.
    ///
    /// # Errors
    ///
    /// [`Error::RunNotFound`] for a run the store does not have (nothing is kept); store errors
    /// (nothing is kept either: send again).
    pub async fn send_event(
        &self,
        run_id: &str,
        topic: &str,
        payload: &impl serde::Serialize,
    ) -> Result<Sent> {
        self.send(run_id, topic, None, payload).await
    }

    /// [`Engine::send_event`] with the sender's dedupe key: a second send with the same key (a retried
    /// webhook) is the same message ([`Sent::duplicate`]), whatever its payload.
    ///
    /// # Errors
    ///
    /// As [`Engine::send_event`].
    pub async fn send_event_once(
        &self,
        run_id: &str,
        topic: &str,
        dedupe_key: &str,
        payload: &impl serde::Serialize,
    ) -> Result<Sent> {
        self.send(run_id, topic, Some(dedupe_key.to_owned()), payload).await
    }

    /// The run's mailbox: every message sent to it, with where each stands (unclaimed, delivered to a
    /// waiting call, rejected).
    ///
    /// # Errors
    ///
    /// Store errors.
    pub async fn mailbox(&self, run_id: &str) -> Result<Mailbox> {
        Ok(self.inner.store.mailbox(run_id).await?)
    }

    async fn send(
        &self,
        run_id: &str,
        topic: &str,
        dedupe_key: Option<String>,
        payload: &impl serde::Serialize,
    ) -> Result<Sent> {
        let payload = serde_json::to_value(payload).map_err(|e| Error::Serialization {
            run: run_id.to_owned(),
            what: "an event's payload",
            source: e,
        })?;
        let now = self.inner.env.clock.now_ms();
        let (sent, due) =
            send_event(&*self.inner.store, run_id, topic, dedupe_key.as_deref(), payload, now).await?;
        if due {
            self.inner.timers.note(now, &run_id.into());
        }
        Ok(sent)
    }
}

/// What [`Engine::send_event`] does, for a store without an engine (graphctl's `send-event`): puts the
/// message in the run's mailbox (with `dedupe_key`, or one of its own) at `now_ms`, then, when the run
/// waits for `topic`, moves that wait's due time to `now_ms` (its status written again under the version
/// check; a run that moved meanwhile is read again). Returns what was sent and whether the run was
/// made due.
///
/// # Errors
///
/// [`Error::RunNotFound`] for a run the store does not have (nothing is kept); store errors.
pub async fn send_event(
    store: &dyn Store,
    run_id: &str,
    topic: &str,
    dedupe_key: Option<&str>,
    payload: serde_json::Value,
    now_ms: u64,
) -> Result<(Sent, bool)> {
    // Every send has a key, so a send the store retries after an error that may have landed is one
    // message.
    let dedupe_key = Some(dedupe_key.map_or_else(|| auto_key(now_ms), str::to_owned));
    let op = MailboxOp::Send { topic: topic.to_owned(), dedupe_key, payload, sent_at_ms: now_ms };
    let sent = match store.mailbox_op(run_id, op).await? {
        MailboxReply::Sent { seq } => Sent { seq, duplicate: false },
        MailboxReply::Duplicate { seq } => Sent { seq, duplicate: true },
        MailboxReply::NoSuchRun => return Err(Error::RunNotFound { run: run_id.to_owned() }),
        other => {
            return Err(
                crate::StoreError::backend("a send answered another reply", format!("{other:?}")).into()
            );
        }
    };
    tracing::info!(run = run_id, topic, seq = sent.seq, duplicate = sent.duplicate, "event sent");
    for _ in 0..16 {
        let Some(info) = store.run_info(run_id).await? else { return Ok((sent, false)) };
        let waits_here =
            |i: &crate::store::Interrupt| i.kind == InterruptKind::Event && i.topic.as_deref() == Some(topic);
        if !info.status.waits().iter().any(waits_here) {
            return Ok((sent, false));
        }
        let due = info.status.with_due_times(|i| match waits_here(i) {
            true => Some(i.wake_at_ms.map_or(now_ms, |at| at.min(now_ms))),
            false => i.wake_at_ms,
        });
        if due != info.status {
            match store.set_status(run_id, &due, &[], None, info.version).await? {
                crate::store::CommitOutcome::Committed { .. } => {}
                _ => continue,
            }
        }
        return Ok((sent, matches!(due, RunStatus::Waiting(_) | RunStatus::Interrupted(_))));
    }
    Ok((sent, false))
}

/// A dedupe key for a send that gave none: unique to this process and moment.
fn auto_key(now_ms: u64) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("auto:{}:{now_ms}.{nanos}:{n}", std::process::id())
}
