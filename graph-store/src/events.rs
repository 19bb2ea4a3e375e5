//! The event log: an append-only, hash-chained record of what happened to a run.
//!
//! Every run has a log of [`Event`]s — run started, step committed, effect recorded, interrupted,
//! resumed, forked, completed, failed, cancelled — written in the same transaction as the change it
//! records (a step commit, a status change). Each event's `hash` chains it to the one before:
//!
//! ```text
//! hash_0 = SHA256("GENESIS"            || canonical(event_0 without its hash))
//! hash_n = SHA256(hex(hash_{n-1})      || canonical(event_n without its hash))
//! ```
//!
//! where `canonical` is the JSON of the event's other fields (`event_type`, `payload`, `schema_version`,
//! `seq`, `timestamp_ms`) with every object's keys sorted and no whitespace (`canonical::to_vec_sorted`),
//! and `hex` lowercase. The payload is kept in that form from the start ([`Payload`]: its canonical
//! text), so hashing and storing an event writes its bytes, it does not walk a JSON tree. The whole
//! event but its hash is covered, not only its payload: a changed type, sequence number or time breaks
//! the chain too. In keyed mode ([`ChainKey`]) each `SHA256(..)` is `HMAC-SHA256(key, ..)`: a chain
//! recomputed without the key is rejected, so it is tamper-proof, not only tamper-evident.
//!
//! Verification ([`verify`]) recomputes the chain and reports the first event that does not match as
//! [`ChainError::Broken`]` { run, seq }` (graph-runtime's `Error::ExecutionCorrupted`): a flipped byte, a deleted event, a swapped pair, a truncated
//! tail (checked against the head the run row records). An unknown `schema_version` is
//! `UnsupportedSchemaVersion`: never read by guessing.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::keys::hex;

/// The event format version this build writes and reads.
pub const EVENT_SCHEMA_VERSION: u32 = 1;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum EventType {
    /// The run's first checkpoint was committed.
    RunStarted,
    /// A step's checkpoint was committed.
    StepCommitted,
    /// An effect's response was journaled during the step (recorded with the step's commit).
    EffectRecorded,
    /// The run stopped to wait for input (an interrupt or a breakpoint).
    Interrupted,
    /// The run was resumed (with input, after an interrupt; by a timer, for a sleep or a deadline that
    /// came: the payload's `by` is `"timer"`).
    Resumed,
    /// The run was handed back to a worker pool: left `Running`, with what continued it, for a worker
    /// to claim instead of driven by the writer.
    HandedBack,
    /// The run paused (backpressure, or an effect waiting for confirmation).
    RunPaused,
    /// The run was created as a fork of another run's checkpoint.
    Forked,
    /// The run reached END.
    RunCompleted,
    /// The run stopped with an error.
    RunFailed,
    /// The run was cancelled.
    RunCancelled,
    /// The run was moved to another version of its graph (a migration's commit: its state and
    /// frontier mapped, committed as a checkpoint of the new version).
    Migrated,
}

/// One entry of a run's event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Event {
    /// Its position in the run's log, from 0.
    pub seq: u64,
    /// What happened.
    pub event_type: EventType,
    /// When, ms since the Unix epoch.
    pub timestamp_ms: u64,
    /// The details, as canonical JSON.
    pub payload: Payload,
    /// Lowercase hex of the chain hash (see the module documentation).
    pub hash: String,
    /// The event format version.
    pub schema_version: u32,
}

impl Event {
    /// The log's head when this event is its last.
    pub fn head(&self) -> ChainHead {
        ChainHead { seq: self.seq, hash: self.hash.clone() }
    }
}

/// An event's details: a JSON value kept as its canonical text (every object's keys sorted, no
/// whitespace: [`crate::canonical::to_vec_sorted`]), the bytes its hash covers. Cloning shares the text.
///
/// ```
/// use graph_store::events::Payload;
///
/// let p = Payload::from(serde_json::json!({"step": 3, "ran": ["plan"]}));
/// assert_eq!(p.as_str(), r#"{"ran":["plan"],"step":3}"#);
/// assert_eq!(p.value()["step"], 3);
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Payload(Arc<str>);

impl Payload {
    /// The canonical JSON of `value`.
    ///
    /// # Errors
    ///
    /// When `value` does not serialize to JSON (a map with keys that are not strings or numbers).
    pub fn new<T: ?Sized + Serialize>(value: &T) -> Result<Self, serde_json::Error> {
        let bytes = crate::canonical::to_vec_sorted(value)?;
        Ok(Payload(String::from_utf8(bytes).expect("JSON is UTF-8").into()))
    }

    /// A payload from text its writer guarantees is canonical JSON (checked in debug builds).
    pub fn from_canonical(text: &str) -> Self {
        debug_assert_eq!(
            Payload::from(serde_json::from_str::<serde_json::Value>(text).unwrap()).as_str(),
            text
        );
        Payload(text.into())
    }

    /// The payload `write` writes, canonical JSON as for [`Payload::from_canonical`], through a buffer
    /// the thread reuses: the payload's own allocation is the only one (a `String` turned into an
    /// `Arc<str>` is copied into a second).
    pub fn write_canonical(write: impl FnOnce(&mut String)) -> Self {
        thread_local!(static BUFFER: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) });
        BUFFER.with_borrow_mut(|buf| {
            buf.clear();
            write(buf);
            let payload = Payload::from_canonical(buf);
            if buf.capacity() > 4096 {
                *buf = String::new(); // one long payload does not hold its buffer for the thread's life
            }
            payload
        })
    }

    /// The canonical JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The payload as a JSON value (parsed from its text).
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_str(&self.0).expect("a payload holds JSON")
    }

    /// The field `name` of an object payload (`None` for a missing field or a payload that is not an
    /// object).
    pub fn get(&self, name: &str) -> Option<serde_json::Value> {
        match self.value() {
            serde_json::Value::Object(mut fields) => fields.remove(name),
            _ => None,
        }
    }
}

impl From<serde_json::Value> for Payload {
    fn from(value: serde_json::Value) -> Self {
        Payload::new(&value).expect("a JSON value serializes")
    }
}

impl From<&serde_json::Value> for Payload {
    fn from(value: &serde_json::Value) -> Self {
        Payload::new(value).expect("a JSON value serializes")
    }
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Display for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde_json::Value::deserialize(d).map(Payload::from)
    }
}

/// The last event of a run's log: its sequence number and hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainHead {
    /// The last event's sequence number.
    pub seq: u64,
    /// Its hash.
    pub hash: String,
}

/// A key for the keyed (HMAC-SHA256) chain.
#[derive(Clone)]
pub struct ChainKey(Vec<u8>);

impl ChainKey {
    /// A key from bytes (use at least 32 random bytes, kept outside the store).
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        ChainKey(bytes.into())
    }
}

impl std::fmt::Debug for ChainKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChainKey(..)")
    }
}

/// Writes `n` as JSON (serde_json's integer formatting, without `fmt`'s machinery).
fn number(out: &mut Vec<u8>, n: u64) {
    serde_json::to_writer(out, &n).expect("writes to a Vec");
}

/// The canonical bytes an event's hash covers: the event without its hash, keys sorted, no whitespace.
pub fn covered_bytes(e: &Event) -> Vec<u8> {
    let mut out = Vec::with_capacity(e.payload.0.len() + 96);
    write_covered(e, &mut |b| out.extend_from_slice(b));
    out
}

/// Passes [`covered_bytes`] to `put` in pieces, without building them: the payload as it is held (the
/// hash of every event of every step reads it this way, with no copy).
fn write_covered(e: &Event, put: &mut dyn FnMut(&[u8])) {
    /// `value` as JSON, through a buffer on the stack (an event type's name, a number).
    fn json(put: &mut dyn FnMut(&[u8]), value: &impl Serialize) {
        let mut buf = [0u8; 64];
        let mut rest: &mut [u8] = &mut buf;
        serde_json::to_writer(&mut rest, value).expect("an event type or a number fits 64 bytes");
        let written = 64 - rest.len();
        put(&buf[..written]);
    }
    put(b"{\"event_type\":");
    json(put, &e.event_type);
    put(b",\"payload\":");
    put(e.payload.0.as_bytes());
    put(b",\"schema_version\":");
    json(put, &u64::from(e.schema_version));
    put(b",\"seq\":");
    json(put, &e.seq);
    put(b",\"timestamp_ms\":");
    json(put, &e.timestamp_ms);
    put(b"}");
}

/// The hash of `e` after `prev` (`None` for the first event).
pub fn chain_hash(prev: Option<&str>, e: &Event, key: Option<&ChainKey>) -> String {
    let prefix: &[u8] = match prev {
        None => b"GENESIS",
        Some(p) => p.as_bytes(),
    };
    match key {
        None => {
            let mut h = Sha256::new();
            h.update(prefix);
            write_covered(e, &mut |b| h.update(b));
            hex(&h.finalize())
        }
        Some(k) => hex(&hmac_sha256(&k.0, |put| {
            put(prefix);
            write_covered(e, put);
        })),
    }
}

/// HMAC-SHA256 (RFC 2104) over the concatenation of what `message` passes to its argument.
fn hmac_sha256(key: &[u8], message: impl FnOnce(&mut dyn FnMut(&[u8]))) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let (mut ipad, mut opad) = ([0x36u8; BLOCK], [0x5cu8; BLOCK]);
    for i in 0..BLOCK {
        ipad[i] ^= k[i];
        opad[i] ^= k[i];
    }
    let mut inner = Sha256::new();
    inner.update(ipad);
    message(&mut |b| inner.update(b));
    let mut outer = Sha256::new();
    outer.update(opad);
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// Builds the next events of a run's log, chaining them from `head`.
#[derive(Debug)]
pub struct Appender<'k> {
    head: Option<ChainHead>,
    key: Option<&'k ChainKey>,
}

impl<'k> Appender<'k> {
    /// An appender after `head` (`None`: the log's first event comes next), hashing with `key` when
    /// the chain is keyed.
    pub fn new(head: Option<ChainHead>, key: Option<&'k ChainKey>) -> Self {
        Appender { head, key }
    }

    /// The next event, hashed.
    pub fn next(&mut self, event_type: EventType, timestamp_ms: u64, payload: Payload) -> Event {
        let prev = self.head.as_ref().map(|h| (h.seq, h.hash.as_str()));
        let e = next_event(prev, self.key, event_type, timestamp_ms, payload);
        ChainHead::advance(&mut self.head, std::slice::from_ref(&e));
        e
    }

    /// The head after the events built, taken.
    pub fn into_head(self) -> Option<ChainHead> {
        self.head
    }
}

/// The bytes a store keeps for an event: its JSON (every field, the hash included), fields in declaration
/// order: `serde_json::to_vec` of the event, written without walking the payload.
pub fn encode(e: &Event) -> Vec<u8> {
    let mut out = Vec::with_capacity(e.payload.0.len() + e.hash.len() + 112);
    out.extend_from_slice(b"{\"seq\":");
    number(&mut out, e.seq);
    out.extend_from_slice(b",\"event_type\":");
    serde_json::to_writer(&mut out, &e.event_type).expect("writes to a Vec");
    out.extend_from_slice(b",\"timestamp_ms\":");
    number(&mut out, e.timestamp_ms);
    out.extend_from_slice(b",\"payload\":");
    out.extend_from_slice(e.payload.0.as_bytes());
    out.extend_from_slice(b",\"hash\":");
    serde_json::to_writer(&mut out, &e.hash).expect("writes to a Vec");
    out.extend_from_slice(b",\"schema_version\":");
    number(&mut out, e.schema_version.into());
    out.push(b'}');
    out
}

/// The event after the one `prev` names by sequence number and hash (`None`: the log's first), hashed.
fn next_event(
    prev: Option<(u64, &str)>,
    key: Option<&ChainKey>,
    event_type: EventType,
    timestamp_ms: u64,
    payload: Payload,
) -> Event {
    let mut e = Event {
        seq: prev.map_or(0, |(seq, _)| seq + 1),
        event_type,
        timestamp_ms,
        payload,
        hash: String::new(),
        schema_version: EVENT_SCHEMA_VERSION,
    };
    e.hash = chain_hash(prev.map(|(_, hash)| hash), &e, key);
    e
}

/// `events` chained after `head` (`None`: they start the log), all stamped `timestamp_ms` and hashed
/// with `key` when the chain is keyed: what an [`Appender`] makes one at a time, without a copy of the
/// head. [`ChainHead::advance`] moves the head past them once they are written.
pub fn chain_after(
    head: Option<&ChainHead>,
    key: Option<&ChainKey>,
    timestamp_ms: u64,
    events: impl IntoIterator<Item = (EventType, Payload)>,
) -> Vec<Event> {
    let events = events.into_iter();
    let mut out: Vec<Event> = Vec::with_capacity(events.size_hint().0);
    for (event_type, payload) in events {
        let prev = match out.last() {
            Some(e) => Some((e.seq, e.hash.as_str())),
            None => head.map(|h| (h.seq, h.hash.as_str())),
        };
        let e = next_event(prev, key, event_type, timestamp_ms, payload);
        out.push(e);
    }
    out
}

impl ChainHead {
    /// Moves `head` past `events` (appended after it): to the last of them, its hash written over the
    /// old one's, so no allocation once there is a head. No events leave it as it is.
    pub fn advance(head: &mut Option<ChainHead>, events: &[Event]) {
        let Some(last) = events.last() else { return };
        match head {
            Some(h) => {
                h.seq = last.seq;
                h.hash.clone_from(&last.hash);
            }
            None => *head = Some(last.head()),
        }
    }
}

/// The head of a run's log after a write appends `events`: the last of them, or `before` when there
/// are none. Every store moves its run row's event head with this.
pub fn head_after(before: Option<ChainHead>, events: &[Event]) -> Option<ChainHead> {
    events.last().map_or(before, |e| Some(e.head()))
}

/// An event as the embedded stores' writers take it: its head and its [`encode`]d bytes, made on the
/// caller's thread before the write is queued.
#[derive(Debug, Clone)]
pub struct Encoded {
    /// The log's head when this event is its last.
    pub head: ChainHead,
    /// Its bytes ([`encode`]).
    pub bytes: Vec<u8>,
}

impl Encoded {
    /// `events`, each with its head and bytes.
    pub fn all(events: &[Event]) -> Vec<Encoded> {
        events.iter().map(|e| Encoded { head: e.head(), bytes: encode(e) }).collect()
    }

    /// [`head_after`] for encoded events.
    pub fn head_after(before: Option<ChainHead>, events: &[Encoded]) -> Option<ChainHead> {
        events.last().map_or(before, |e| Some(e.head.clone()))
    }
}

/// Reads the event a store keeps under `(run, seq)` ([`encode`]).
///
/// # Errors
///
/// `CorruptedEvent` when the bytes are not an event.
pub fn decode(run: &str, seq: u64, bytes: &[u8]) -> Result<Event, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::CorruptedEvent {
        run: run.to_owned(),
        seq,
        detail: format!("it does not decode: {e}"),
    })
}

/// Why a run's event log does not verify.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChainError {
    /// An event was changed, removed, reordered or cut off: `seq` is the first that does not verify
    /// (or the first missing one). graph-runtime reports it as `Error::ExecutionCorrupted`.
    #[error(
        "the event log of run `{run}` is broken at event {seq}: it was changed, removed, reordered or cut off \
         after it was written; restore the store from a backup (the checkpoints are checked separately)"
    )]
    Broken {
        /// The run.
        run: String,
        /// The first event that does not verify.
        seq: u64,
    },
    /// An event of a format this build does not read (`UnsupportedSchemaVersion`).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Verifies `events` (consecutive, from `from`'s successor, or from genesis with `from = None`) and,
/// with `head`, that they end exactly there (a truncated tail, or events past it, break it).
///
/// # Errors
///
/// [`ChainError::Broken`] naming the first event that does not verify (or the first missing one);
/// `UnsupportedSchemaVersion` for an event of an unknown format.
pub fn verify(
    run: &str,
    from: Option<&ChainHead>,
    events: &[Event],
    head: Option<&ChainHead>,
    key: Option<&ChainKey>,
) -> Result<(), ChainError> {
    let last = verify_segment(run, from, events, key)?;
    check_head(run, from, last.as_ref(), head)
}

/// Verifies `events`, consecutive after `from` (or from genesis), and returns the head they end at.
///
/// # Errors
///
/// As [`verify`].
pub fn verify_segment(
    run: &str,
    from: Option<&ChainHead>,
    events: &[Event],
    key: Option<&ChainKey>,
) -> Result<Option<ChainHead>, ChainError> {
    let corrupted = |seq: u64| ChainError::Broken { run: run.to_owned(), seq };
    let mut prev = from.cloned();
    for e in events {
        if e.schema_version != EVENT_SCHEMA_VERSION {
            return Err(ChainError::Store(StoreError::UnsupportedSchemaVersion {
                found: e.schema_version,
                supported: EVENT_SCHEMA_VERSION,
            }));
        }
        let expected_seq = prev.as_ref().map_or(0, |p| p.seq + 1);
        if e.seq != expected_seq {
            return Err(corrupted(expected_seq));
        }
        if chain_hash(prev.as_ref().map(|p| p.hash.as_str()), e, key) != e.hash {
            return Err(corrupted(e.seq));
        }
        prev = Some(e.head());
    }
    Ok(prev)
}

/// Checks that a verified chain ends at `head`, the head the run row records: `last` is where the
/// verified events ended (`from` when there were none).
///
/// # Errors
///
/// [`ChainError::Broken`] naming the first missing event, or the first past the head.
pub fn check_head(
    run: &str,
    from: Option<&ChainHead>,
    last: Option<&ChainHead>,
    head: Option<&ChainHead>,
) -> Result<(), ChainError> {
    let corrupted = |seq: u64| Err(ChainError::Broken { run: run.to_owned(), seq });
    match (head, last) {
        (Some(h), Some(p)) if h == p => Ok(()),
        (None, None) => Ok(()),
        // Events missing at the end (a truncated tail), or a head that is not the last event's.
        (Some(h), Some(p)) if p.seq == h.seq => corrupted(p.seq),
        (Some(h), Some(p)) => corrupted(p.seq.min(h.seq) + 1),
        (Some(h), None) => corrupted(from.map_or(0, |f| f.seq + 1).min(h.seq)),
        // Events beyond what the run row records.
        (None, Some(p)) => corrupted(p.seq),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, t: EventType, payload: serde_json::Value) -> Event {
        Event {
            seq,
            event_type: t,
            timestamp_ms: 1000 + seq,
            payload: payload.into(),
            hash: String::new(),
            schema_version: 1,
        }
    }

    // Computed outside Rust (Python 3):
    //   import hashlib, hmac, json
    //   def cov(seq, t, p): return json.dumps({"seq": seq, "event_type": t, "timestamp_ms": 1000 + seq,
    //       "payload": p, "schema_version": 1}, sort_keys=True, separators=(",", ":")).encode()
    //   h0 = hashlib.sha256(b"GENESIS" + cov(0, "RUN_STARTED", {"run": "r", "b": [1, {"z": 1, "a": 2}]})).hexdigest()
    //   h1 = hashlib.sha256(h0.encode() + cov(1, "STEP_COMMITTED", {"step": 1})).hexdigest()
    //   k0 = hmac.new(b"secret", b"GENESIS" + cov(0, "RUN_STARTED", {"run": "r", "b": [1, {"z": 1, "a": 2}]}),
    //                 hashlib.sha256).hexdigest()
    #[test]
    fn chain_golden_vectors() {
        let e0 = event(0, EventType::RunStarted, serde_json::json!({"run": "r", "b": [1, {"z": 1, "a": 2}]}));
        let h0 = chain_hash(None, &e0, None);
        assert_eq!(h0, "9d05f411460497a5b60348a248c1083217265f7271c300fc495e15712d98631a");
        let e1 = event(1, EventType::StepCommitted, serde_json::json!({"step": 1}));
        assert_eq!(
            chain_hash(Some(&h0), &e1, None),
            "615163bc2c7efaf48cca49d92898455e0e5f71814fd0b097612a7efff7851740"
        );
        assert_eq!(
            chain_hash(None, &e0, Some(&ChainKey::new(*b"secret"))),
            "a675bd59cb2943d3e643a5eff715a383aa5725cf5e1371744e8aa8721e29aca6"
        );
    }

    /// The event's fields as the format defines them, serialized by serde: what `encode` and
    /// `covered_bytes` write by hand must be these bytes (logs written before the payload was kept as text
    /// verify and decode unchanged).
    #[derive(Serialize)]
    struct Serde<'a> {
        seq: u64,
        event_type: EventType,
        timestamp_ms: u64,
        payload: serde_json::Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        hash: Option<&'a str>,
        schema_version: u32,
    }

    #[test]
    fn hand_written_bytes_are_serdes() {
        let payloads = [
            serde_json::json!({"z": [1, {"b": "x\"y", "a": null}], "a": 1.5, "é": "\u{1}"}),
            serde_json::json!("text"),
            serde_json::json!(null),
            serde_json::json!({"step": u64::MAX}),
        ];
        for (i, p) in payloads.into_iter().enumerate() {
            let mut e = event(i as u64 * 1_000_000_007, EventType::EffectRecorded, p.clone());
            e.hash = "ab\"c".into();
            let full = Serde {
                seq: e.seq,
                event_type: e.event_type,
                timestamp_ms: e.timestamp_ms,
                payload: p.clone(),
                hash: Some(&e.hash),
                schema_version: e.schema_version,
            };
            assert_eq!(encode(&e), serde_json::to_vec(&full).unwrap());
            assert_eq!(decode("r", e.seq, &encode(&e)).unwrap(), e);
            let covered = Serde { hash: None, ..full };
            assert_eq!(covered_bytes(&e), crate::canonical::to_vec_sorted(&covered).unwrap());
            assert_eq!(e.payload.value(), p);
        }
    }

    // RFC 4231 test case 2.
    #[test]
    fn hmac_matches_rfc_4231() {
        let mac = hmac_sha256(b"Jefe", |put| {
            put(b"what do ya want ");
            put(b"for nothing?");
        });
        assert_eq!(hex(&mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    fn chain(n: u64, key: Option<&ChainKey>) -> (Vec<Event>, ChainHead) {
        let mut a = Appender::new(None, key);
        let events: Vec<Event> = (0..n)
            .map(|i| a.next(EventType::StepCommitted, 7 + i, serde_json::json!({"step": i}).into()))
            .collect();
        (events, a.into_head().unwrap())
    }

    #[test]
    fn events_chained_at_once_are_the_events_an_appender_makes_one_at_a_time() {
        let key = ChainKey::new(*b"secret");
        for key in [None, Some(&key)] {
            let (first, head) = chain(2, key);
            let payloads =
                |n: u64| (0..n).map(|i| (EventType::StepCommitted, serde_json::json!({"step": i}).into()));
            let mut a = Appender::new(Some(head.clone()), key);
            let one_by_one: Vec<Event> = payloads(3).map(|(t, p)| a.next(t, 9, p)).collect();
            let at_once = chain_after(Some(&head), key, 9, payloads(3));
            assert_eq!(at_once, one_by_one);
            let all: Vec<Event> = first.iter().chain(&at_once).cloned().collect();
            let mut moved = Some(head);
            ChainHead::advance(&mut moved, &at_once);
            assert_eq!(moved, a.into_head());
            assert!(verify("r", None, &all, moved.as_ref(), key).is_ok());
            // From no head: the log's first events; no events leave a head as it was.
            assert_eq!(chain_after(None, key, 7, payloads(1)), chain(1, key).0);
            let mut none = None;
            ChainHead::advance(&mut none, &[]);
            assert_eq!(none, None);
        }
    }

    #[test]
    fn any_damage_names_the_first_bad_event() {
        let (events, head) = chain(6, None);
        assert!(verify("r", None, &events, Some(&head), None).is_ok());
        let seq_of = |r: Result<(), ChainError>| match r {
            Err(ChainError::Broken { seq, .. }) => seq,
            other => panic!("{other:?}"),
        };
        // A changed payload, type or time.
        let mut bad = events.clone();
        bad[3].payload = serde_json::json!({"step": 99}).into();
        assert_eq!(seq_of(verify("r", None, &bad, Some(&head), None)), 3);
        let mut bad = events.clone();
        bad[2].timestamp_ms += 1;
        assert_eq!(seq_of(verify("r", None, &bad, Some(&head), None)), 2);
        // A deleted event, a swapped pair, a truncated tail.
        let mut bad = events.clone();
        bad.remove(4);
        assert_eq!(seq_of(verify("r", None, &bad, Some(&head), None)), 4);
        let mut bad = events.clone();
        bad.swap(1, 2);
        assert_eq!(seq_of(verify("r", None, &bad, Some(&head), None)), 1);
        assert_eq!(seq_of(verify("r", None, &events[..5], Some(&head), None)), 5);
        // From a verified head: only the rest is checked.
        let from = ChainHead { seq: 2, hash: events[2].hash.clone() };
        assert!(verify("r", Some(&from), &events[3..], Some(&head), None).is_ok());
        // An unknown version is not read.
        let mut newer = events.clone();
        newer[0].schema_version = 2;
        assert!(matches!(
            verify("r", None, &newer, Some(&head), None),
            Err(ChainError::Store(StoreError::UnsupportedSchemaVersion { found: 2, .. }))
        ));
    }

    #[test]
    fn a_keyed_chain_recomputed_without_the_key_is_rejected() {
        let key = ChainKey::new(b"k".repeat(32));
        let (events, head) = chain(4, Some(&key));
        assert!(verify("r", None, &events, Some(&head), Some(&key)).is_ok());
        // Someone edits event 1 and recomputes the chain, without the key.
        let mut forged = events.clone();
        forged[1].payload = serde_json::json!({"step": "edited"}).into();
        let mut prev: Option<String> = None;
        for e in &mut forged {
            e.hash = chain_hash(prev.as_deref(), e, None);
            prev = Some(e.hash.clone());
        }
        let forged_head = ChainHead { seq: 3, hash: prev.unwrap() };
        assert!(verify("r", None, &forged, Some(&forged_head), None).is_ok(), "it verifies unkeyed");
        assert!(matches!(
            verify("r", None, &forged, Some(&forged_head), Some(&key)),
            Err(ChainError::Broken { seq: 0, .. })
        ));
    }
}
