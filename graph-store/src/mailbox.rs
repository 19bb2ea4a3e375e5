//! A run's mailbox: the external events sent to it (`Engine::send_event`), kept durably until the run
//! waits for their topic (`Ctx::wait_event`), delivered in send order per topic, each to one waiting
//! call.
//!
//! A store keeps one mailbox per run, as one value (its [`encode`] bytes), and changes it only through
//! [`crate::Store::mailbox_op`]: read the mailbox under the store's lock, [`Mailbox::apply`] the
//! operation (the rules, written here once), write it back when it changed, in one atomic write.
//!
//! - **Send** ([`MailboxOp::Send`]): the message gets the next sequence number of the run (from 0); a
//!   `dedupe_key` already used by a message of the run makes it that message ([`MailboxReply::Duplicate`],
//!   nothing written); a run the store does not have is [`MailboxReply::NoSuchRun`] (the backend checks:
//!   [`Mailbox::apply`] is told whether the run exists).
//! - **Claim** ([`MailboxOp::Claim`]): the message a waiting call takes. A message already claimed by
//!   this `claimer` (a crash came between the claim and the step's commit) is given again; else the
//!   oldest unclaimed message of the topic is claimed for it; else none. So each message goes to one
//!   waiting call and each waiting call gets one message, whatever crashes between.
//! - **Reject** ([`MailboxOp::Reject`]): the claimer could not read the payload as the type it waits
//!   for: the message is kept, marked rejected with the reason, and never delivered again; the run keeps
//!   waiting for the next one.

use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// One external event sent to a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Message {
    /// Its position among the run's messages, from 0: the send order.
    pub seq: u64,
    /// What the waiting node names it by.
    pub topic: String,
    /// The sender's key: a second send with it is the same message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe_key: Option<String>,
    /// The payload, as JSON.
    pub payload: serde_json::Value,
    /// When it was sent, ms since the Unix epoch (the sender's clock).
    pub sent_at_ms: u64,
    /// Where it stands.
    pub state: MessageState,
}

/// Where a [`Message`] stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum MessageState {
    /// Not yet taken by a waiting call.
    Unclaimed,
    /// Taken by the waiting call `by` (`"{step}:{path}#{index}"` of the run).
    Claimed {
        /// The claimer.
        by: String,
    },
    /// The claimer could not read it; never delivered again.
    Rejected {
        /// The claimer.
        by: String,
        /// Why.
        detail: String,
    },
}

/// A change to a run's mailbox.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum MailboxOp {
    /// Adds a message.
    Send {
        /// The topic.
        topic: String,
        /// The sender's dedupe key.
        dedupe_key: Option<String>,
        /// The payload.
        payload: serde_json::Value,
        /// The sender's clock, ms since the Unix epoch.
        sent_at_ms: u64,
    },
    /// Takes the message of `topic` for `claimer`.
    Claim {
        /// The topic.
        topic: String,
        /// The waiting call.
        claimer: String,
    },
    /// Marks message `seq`, claimed by `claimer`, rejected.
    Reject {
        /// The message.
        seq: u64,
        /// Its claimer.
        claimer: String,
        /// Why.
        detail: String,
    },
}

/// What a [`MailboxOp`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum MailboxReply {
    /// Sent as message `seq`.
    Sent {
        /// Its sequence number.
        seq: u64,
    },
    /// A message with this dedupe key was sent before, as `seq`: nothing written.
    Duplicate {
        /// The earlier message's sequence number.
        seq: u64,
    },
    /// The store has no such run: nothing written.
    NoSuchRun,
    /// The message claimed (or claimed before by the same claimer), or none.
    Claimed(Option<Message>),
    /// Whether the message was found claimed by the claimer (and is now rejected).
    Rejected(bool),
}

/// A run's messages, in send order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Mailbox {
    /// The messages.
    pub messages: Vec<Message>,
}

impl Mailbox {
    /// Applies `op` to the mailbox of a run that exists (`run_exists`) or not; returns the reply and
    /// whether the mailbox changed (and must be written back).
    ///
    /// ```
    /// use graph_store::mailbox::{Mailbox, MailboxOp, MailboxReply};
    /// let mut m = Mailbox::default();
    /// let send = |key: &str| MailboxOp::Send {
    ///     topic: "paid".into(), dedupe_key: Some(key.into()), payload: 1.into(), sent_at_ms: 0,
    /// };
    /// assert_eq!(m.apply(send("k"), true), (MailboxReply::Sent { seq: 0 }, true));
    /// assert_eq!(m.apply(send("k"), true), (MailboxReply::Duplicate { seq: 0 }, false));
    /// let claim = |by: &str| MailboxOp::Claim { topic: "paid".into(), claimer: by.into() };
    /// let MailboxReply::Claimed(Some(first)) = m.apply(claim("a"), true).0 else { panic!() };
    /// // The same claimer is given it again; another finds nothing.
    /// assert_eq!(m.apply(claim("a"), true).0, MailboxReply::Claimed(Some(first)));
    /// assert_eq!(m.apply(claim("b"), true).0, MailboxReply::Claimed(None));
    /// ```
    pub fn apply(&mut self, op: MailboxOp, run_exists: bool) -> (MailboxReply, bool) {
        match op {
            MailboxOp::Send { topic, dedupe_key, payload, sent_at_ms } => {
                if !run_exists {
                    return (MailboxReply::NoSuchRun, false);
                }
                if let Some(key) = &dedupe_key
                    && let Some(m) = self.messages.iter().find(|m| m.dedupe_key.as_ref() == Some(key))
                {
                    return (MailboxReply::Duplicate { seq: m.seq }, false);
                }
                let seq = self.messages.last().map_or(0, |m| m.seq + 1);
                self.messages.push(Message {
                    seq,
                    topic,
                    dedupe_key,
                    payload,
                    sent_at_ms,
                    state: MessageState::Unclaimed,
                });
                (MailboxReply::Sent { seq }, true)
            }
            MailboxOp::Claim { topic, claimer } => {
                let mine =
                    |m: &&mut Message| matches!(&m.state, MessageState::Claimed { by } if *by == claimer);
                if let Some(m) = self.messages.iter_mut().find(|m| m.topic == topic && mine(m)) {
                    return (MailboxReply::Claimed(Some(m.clone())), false);
                }
                match self
                    .messages
                    .iter_mut()
                    .find(|m| m.topic == topic && m.state == MessageState::Unclaimed)
                {
                    Some(m) => {
                        m.state = MessageState::Claimed { by: claimer };
                        (MailboxReply::Claimed(Some(m.clone())), true)
                    }
                    None => (MailboxReply::Claimed(None), false),
                }
            }
            MailboxOp::Reject { seq, claimer, detail } => {
                match self.messages.iter_mut().find(|m| m.seq == seq) {
                    Some(m) if matches!(&m.state, MessageState::Claimed { by } if *by == claimer) => {
                        m.state = MessageState::Rejected { by: claimer, detail };
                        (MailboxReply::Rejected(true), true)
                    }
                    _ => (MailboxReply::Rejected(false), false),
                }
            }
        }
    }

    /// Whether a message of `topic` waits to be claimed.
    pub fn has_unclaimed(&self, topic: &str) -> bool {
        self.messages.iter().any(|m| m.topic == topic && m.state == MessageState::Unclaimed)
    }
}

const MAILBOX_MAGIC: &[u8; 4] = b"GRMB";

/// The bytes a mailbox is stored as (the checksummed envelope of [`crate::envelope`]).
pub fn encode(m: &Mailbox) -> Vec<u8> {
    crate::envelope::seal(MAILBOX_MAGIC, &serde_json::to_vec(m).expect("a mailbox is plain data"))
}

/// Decodes a mailbox.
///
/// # Errors
///
/// `Corrupted` for damaged bytes, `UnsupportedSchemaVersion` for another format.
pub fn decode(bytes: &[u8]) -> Result<Mailbox, StoreError> {
    crate::envelope::unseal(MAILBOX_MAGIC, bytes, "a run's mailbox")
}

/// The whole of [`crate::Store::mailbox_op`] for a backend that holds the mailbox's bytes (`stored`,
/// `None` when the run has none yet) under its lock: the reply, and the bytes to write back when the
/// mailbox changed.
///
/// # Errors
///
/// Damaged stored bytes.
pub fn apply_to_bytes(
    stored: Option<&[u8]>,
    op: MailboxOp,
    run_exists: bool,
) -> Result<(MailboxReply, Option<Vec<u8>>), StoreError> {
    let mut mailbox = stored.map(decode).transpose()?.unwrap_or_default();
    let (reply, changed) = mailbox.apply(op, run_exists);
    Ok((reply, changed.then(|| encode(&mailbox))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(topic: &str, n: i64) -> MailboxOp {
        MailboxOp::Send { topic: topic.into(), dedupe_key: None, payload: n.into(), sent_at_ms: 7 }
    }

    #[test]
    fn messages_go_in_send_order_per_topic_once_each() {
        let mut m = Mailbox::default();
        for (t, n) in [("a", 1), ("b", 2), ("a", 3)] {
            m.apply(send(t, n), true);
        }
        let claim = |m: &mut Mailbox, who: &str| match m
            .apply(MailboxOp::Claim { topic: "a".into(), claimer: who.into() }, true)
        {
            (MailboxReply::Claimed(got), _) => got.map(|g| g.payload),
            other => panic!("{other:?}"),
        };
        assert_eq!(claim(&mut m, "x"), Some(1.into()));
        assert_eq!(claim(&mut m, "y"), Some(3.into()));
        assert_eq!(claim(&mut m, "z"), None);
        assert!(m.has_unclaimed("b") && !m.has_unclaimed("a"));
        // A rejection by another claimer is refused; by the claimer, the message is never given again.
        assert_eq!(
            m.apply(MailboxOp::Reject { seq: 0, claimer: "y".into(), detail: "d".into() }, true).0,
            MailboxReply::Rejected(false)
        );
        assert_eq!(
            m.apply(MailboxOp::Reject { seq: 0, claimer: "x".into(), detail: "d".into() }, true).0,
            MailboxReply::Rejected(true)
        );
        assert_eq!(claim(&mut m, "x"), None);
        assert_eq!(m.apply(send("a", 4), false), (MailboxReply::NoSuchRun, false));
    }

    #[test]
    fn mailboxes_round_trip_and_damage_is_detected() {
        let mut m = Mailbox::default();
        m.apply(send("a", 1), true);
        let bytes = encode(&m);
        assert_eq!(decode(&bytes).unwrap(), m);
        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(decode(&bad), Err(StoreError::Corrupted { .. })));
    }
}
