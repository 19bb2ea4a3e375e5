//! The records of what a run did to the world: the effect journal and the outbox.
//!
//! An **effect** (`ctx.effect(...)`) is journaled in commits of its own, outside the step commit: a
//! `Started` entry before a non-idempotent call, the response (or the failure) as soon as the call
//! returns. So a crash after the call but before the step commit does not repeat it: the re-executed
//! step finds the journaled response. An entry is keyed by its effect key, unique in the store; the
//! store never overwrites one silently — every write is a compare-and-set with a typed outcome.
//!
//! An **outbox** row (`ctx.emit(...)`) is written in the step commit itself (none for a step that is not
//! committed), drained after it, and deleted when acknowledged; each has a stable key so a consumer that
//! sees one twice (after a crash between drain and ack) can tell.

use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::keys::{hex, sha256_parts};

/// How an effect may be repeated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum EffectClass {
    /// No side effect: recomputed freely; recorded only so replay needs no call.
    Pure,
    /// Safe to repeat with the same effect key (the external system deduplicates by it): after a crash
    /// with no journaled response, called again with the same key.
    Idempotent,
    /// Must not happen twice: after a crash between its start and its journaled response, the run pauses
    /// for a person to say what happened (`PauseReason::NeedsConfirmation`).
    NonIdempotent,
}

/// Where an effect stands in the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum EffectState {
    /// A non-idempotent call began; no outcome was journaled (yet).
    Started,
    /// The call returned this response.
    Completed {
        /// The response, as JSON.
        response: serde_json::Value,
    },
    /// The call failed, or a person said it did not happen: it may be called again.
    Failed {
        /// Why.
        message: String,
    },
    /// A person said the call failed for good: the effect returns this error, without a call.
    Rejected {
        /// What the node sees as the effect's error.
        message: String,
    },
}

/// A person's answer about an effect whose outcome a crash left unknown
/// (`Engine::resolve_effect`).
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// It happened, with this response (what the closure would have returned, as JSON).
    Completed(serde_json::Value),
    /// It did not happen: call it again.
    Retry,
    /// It failed for good: the effect returns this error to the node.
    Fail(String),
}

/// One effect call, as journaled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectRecord {
    /// The effect key: `hex(SHA256(run_id ":" step ":" path ":" call_index))[..32]`.
    pub key: String,
    /// The run.
    pub run_id: String,
    /// The step the calling item belongs to.
    pub step: u64,
    /// The calling item's node.
    pub node: String,
    /// The calling item's path identity.
    pub path: String,
    /// The call's index among the effect calls of the item's attempt, from 0.
    pub call_index: u32,
    /// The effect's name, as the node gave it.
    pub name: String,
    /// How it may be repeated.
    pub class: EffectClass,
    /// Lowercase hex SHA-256 of the request's canonical JSON.
    pub request_hash: String,
    /// Where it stands.
    pub state: EffectState,
}

/// What a journal write did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EffectOutcome {
    /// Written.
    Written,
    /// The entry is not in the expected state (or already exists): nothing was written; here it is.
    Exists(EffectRecord),
    /// No entry has this key.
    Missing,
    /// Written under a worker's lease (a `LeasedStore` of the server stores) that is no longer the run's
    /// live lease: nothing was written, and the holder must stop (the run belongs to another worker).
    Fenced,
}

/// The compare-and-set rule of [`crate::Store::put_effect`], written once: what a write of an entry
/// whose key currently holds `current`, expecting `expected`, does. Under a worker's lease that is lost
/// (`fenced`, checked under the run row's lock as a commit is) nothing is written, whatever the entry.
///
/// ```
/// use graph_store::journal::decide_effect;
/// use graph_store::{EffectOutcome, EffectState};
///
/// assert_eq!(decide_effect(false, None, None), EffectOutcome::Written);
/// assert_eq!(decide_effect(false, None, Some(&EffectState::Started)), EffectOutcome::Missing);
/// assert_eq!(decide_effect(true, None, None), EffectOutcome::Fenced);
/// ```
pub fn decide_effect(
    fenced: bool,
    current: Option<&EffectRecord>,
    expected: Option<&EffectState>,
) -> EffectOutcome {
    match (current, expected) {
        _ if fenced => EffectOutcome::Fenced,
        (None, None) => EffectOutcome::Written,
        (None, Some(_)) => EffectOutcome::Missing,
        (Some(c), Some(e)) if &c.state == e => EffectOutcome::Written,
        (Some(c), _) => EffectOutcome::Exists(c.clone()),
    }
}

/// One message a step emitted, delivered after the step commits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxRow {
    /// Stable across redeliveries: `hex(SHA256(run_id ":" step ":" path ":emit:" index))[..32]`.
    pub key: String,
    /// The run.
    pub run_id: String,
    /// The step whose commit wrote it (the emitting item's step + 1).
    pub step: u64,
    /// The topic the node gave.
    pub topic: String,
    /// The payload, as JSON.
    pub payload: serde_json::Value,
}

impl OutboxRow {
    /// A row of `run_id`'s commit of `step`.
    pub fn new(
        key: impl Into<String>,
        run_id: impl Into<String>,
        step: u64,
        topic: impl Into<String>,
        payload: serde_json::Value,
    ) -> Self {
        OutboxRow { key: key.into(), run_id: run_id.into(), step, topic: topic.into(), payload }
    }
}

/// The effect key of call `call_index` of the item at `path` in `step` of `run_id`:
/// `hex(SHA256(utf8(run_id) ":" decimal(step) ":" path ":" decimal(call_index)))[..32]`.
///
/// # Examples
///
/// ```
/// use graph_store::journal::effect_key;
/// // python3 -c 'import hashlib; print(hashlib.sha256(b"run-1:3:" + b"a" * 64 + b":0").hexdigest()[:32])'
/// assert_eq!(effect_key("run-1", 3, &"a".repeat(64), 0), "172574e9cd7d26fae7ab37a936a2ee67");
/// ```
pub fn effect_key(run_id: &str, step: u64, path: &str, call_index: u32) -> String {
    let text = format!("{run_id}:{step}:{path}:{call_index}");
    hex(&sha256_parts(&[text.as_bytes()]))[..32].to_owned()
}

/// The journal key of patch marker `id` of the item at `path` in `step` of `run_id`
/// (`Ctx::patched`): `hex(SHA256(utf8(run_id) ":" decimal(step) ":" path ":patch:" utf8(id)))[..32]`.
pub fn patch_key(run_id: &str, step: u64, path: &str, id: &str) -> String {
    let text = format!("{run_id}:{step}:{path}:patch:{id}");
    hex(&sha256_parts(&[text.as_bytes()]))[..32].to_owned()
}

/// The outbox key of emit `index` of the item at `path` in `step` of `run_id`:
/// `hex(SHA256(utf8(run_id) ":" decimal(step) ":" path ":emit:" decimal(index)))[..32]`.
pub fn outbox_key(run_id: &str, step: u64, path: &str, index: u32) -> String {
    let text = format!("{run_id}:{step}:{path}:emit:{index}");
    hex(&sha256_parts(&[text.as_bytes()]))[..32].to_owned()
}

const EFFECT_MAGIC: &[u8; 4] = b"GREF";
const OUTBOX_MAGIC: &[u8; 4] = b"GROB";

/// The bytes an effect entry is stored as (the checksummed envelope of [`crate::envelope`]).
pub fn encode_effect(r: &EffectRecord) -> Vec<u8> {
    crate::envelope::seal(EFFECT_MAGIC, &serde_json::to_vec(r).expect("an effect entry is plain data"))
}

/// Decodes an effect entry.
///
/// # Errors
///
/// `Corrupted` for damaged bytes, `UnsupportedSchemaVersion` for another format.
pub fn decode_effect(bytes: &[u8]) -> Result<EffectRecord, StoreError> {
    crate::envelope::unseal(EFFECT_MAGIC, bytes, "an effect journal entry")
}

/// The bytes an outbox row is stored as.
pub fn encode_outbox(r: &OutboxRow) -> Vec<u8> {
    crate::envelope::seal(OUTBOX_MAGIC, &serde_json::to_vec(r).expect("an outbox row is plain data"))
}

/// Decodes an outbox row.
///
/// # Errors
///
/// `Corrupted` for damaged bytes, `UnsupportedSchemaVersion` for another format.
pub fn decode_outbox(bytes: &[u8]) -> Result<OutboxRow, StoreError> {
    crate::envelope::unseal(OUTBOX_MAGIC, bytes, "an outbox row")
}

#[cfg(test)]
mod tests {
    use super::*;

    // Computed outside Rust:
    //   python3 -c 'import hashlib; print(hashlib.sha256(b"run-1:3:" + b"a" * 64 + b":0").hexdigest()[:32])'
    //   python3 -c 'import hashlib; print(hashlib.sha256("réunion:0:" .encode() + b"0f" * 32 + b":17").hexdigest()[:32])'
    //   python3 -c 'import hashlib; print(hashlib.sha256(b"r:12:" + b"b" * 64 + b":emit:2").hexdigest()[:32])'
    #[test]
    fn keys_golden_vectors() {
        assert_eq!(effect_key("run-1", 3, &"a".repeat(64), 0), "172574e9cd7d26fae7ab37a936a2ee67");
        assert_eq!(effect_key("réunion", 0, &"0f".repeat(32), 17), "a64cd0e630adf6c0f3e4ef593910d7aa");
        assert_eq!(outbox_key("r", 12, &"b".repeat(64), 2), "3b804421f8a649b8c04cdcdc4b36e98f");
    }

    #[test]
    fn entries_round_trip_and_damage_is_detected() {
        let r = EffectRecord {
            key: "k".into(),
            run_id: "r".into(),
            step: 1,
            node: "n".into(),
            path: "p".into(),
            call_index: 0,
            name: "charge".into(),
            class: EffectClass::NonIdempotent,
            request_hash: "h".into(),
            state: EffectState::Completed { response: serde_json::json!({"ok": true}) },
        };
        let bytes = encode_effect(&r);
        assert_eq!(decode_effect(&bytes).unwrap(), r);
        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(decode_effect(&bad), Err(StoreError::Corrupted { .. })));
        let o = OutboxRow {
            key: "o".into(),
            run_id: "r".into(),
            step: 2,
            topic: "t".into(),
            payload: serde_json::json!([1]),
        };
        assert_eq!(decode_outbox(&encode_outbox(&o)).unwrap(), o);
    }
}
