//! What the fuzz targets share: the properties each decoder of stored bytes must hold, as functions
//! that panic when one fails (libFuzzer reports a panic as a crash).
//!
//! Every stored record is checksummed, so bytes a fuzzer makes up are refused at the checksum and never
//! reach the decoder behind it. Each target therefore feeds a decoder twice: the input as stored bytes,
//! and the input as a record's body sealed with a valid checksum, as a store would have written it
//! (what a bug in a writer, or a record of a future build, would look like). Then it changes one byte of
//! that sealed record, which must be refused.

use graph_store::envelope::seal;
use graph_store::{journal, mailbox, record, schedule};

/// A byte reader over the fuzzer's input: takes what a target needs, zeros once it runs out.
#[derive(Debug)]
pub struct Input<'a>(pub &'a [u8]);

impl<'a> Input<'a> {
    /// The next byte.
    pub fn byte(&mut self) -> u8 {
        self.take(1).first().copied().unwrap_or(0)
    }
    /// The next little-endian `u16`.
    pub fn u16(&mut self) -> u16 {
        u16::from(self.byte()) | (u16::from(self.byte()) << 8)
    }
    /// The next little-endian `u64`.
    pub fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        let t = self.take(8);
        b[..t.len()].copy_from_slice(t);
        u64::from_le_bytes(b)
    }
    /// The next `n` bytes (fewer at the end).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
    /// What is left.
    pub fn rest(&mut self) -> &'a [u8] {
        self.take(usize::MAX)
    }
}

/// The kinds of record the stores keep (the SQL stores keep these same bytes in their rows): checkpoint,
/// run row, pending step, effect entry, outbox row, mailbox, schedule.
pub const KINDS: [&[u8; 4]; 7] = [b"GRCK", b"GRRU", b"GRPS", b"GREF", b"GROB", b"GRMB", b"GRSC"];

/// Decodes `bytes` as a record of kind `kind` (an index of [`KINDS`]) stored under `(run, step)`;
/// when it decodes, its encoding decodes to it again. Returns whether it decoded.
pub fn record_round_trip(kind: usize, run: &str, step: u64, bytes: &[u8]) -> bool {
    match kind % KINDS.len() {
        0 => record::decode(run, step, bytes)
            .map(|cp| {
                let again = record::decode(run, step, &record::encode(&cp)).expect("its own encoding");
                assert_eq!(again, cp, "a checkpoint does not round-trip");
            })
            .is_ok(),
        1 => record::decode_run(bytes)
            .map(|r| assert_eq!(record::decode_run(&record::encode_run(&r)).expect("its own encoding"), r))
            .is_ok(),
        2 => graph_runtime::fuzzing::pending_step(bytes),
        3 => journal::decode_effect(bytes)
            .map(|r| {
                assert_eq!(journal::decode_effect(&journal::encode_effect(&r)).expect("its own encoding"), r)
            })
            .is_ok(),
        4 => journal::decode_outbox(bytes)
            .map(|r| {
                assert_eq!(journal::decode_outbox(&journal::encode_outbox(&r)).expect("its own encoding"), r)
            })
            .is_ok(),
        5 => mailbox::decode(bytes)
            .map(|m| assert_eq!(mailbox::decode(&mailbox::encode(&m)).expect("its own encoding"), m))
            .is_ok(),
        _ => schedule::decode(bytes)
            .map(|s| assert_eq!(schedule::decode(&schedule::encode(&s)).expect("its own encoding"), s))
            .is_ok(),
    }
}

/// The records target: `kind | step | run length | run | flip at (u16) | flip xor | mode | bytes`.
/// Mode 0: `bytes` as stored. Otherwise `bytes` is a body, sealed in a valid envelope of the kind, then
/// decoded; then one byte of that envelope is changed, and the changed record must be refused.
pub fn records(data: &[u8]) {
    let mut input = Input(data);
    let kind = usize::from(input.byte()) % KINDS.len();
    let step = u64::from(input.byte());
    let run_len = usize::from(input.byte());
    let run = String::from_utf8_lossy(input.take(run_len)).into_owned();
    let (flip_at, xor, mode) = (usize::from(input.u16()), input.byte(), input.byte());
    let bytes = input.rest();
    if mode % 2 == 0 {
        record_round_trip(kind, &run, step, bytes);
        return;
    }
    let mut sealed = seal(KINDS[kind], bytes);
    let decoded = record_round_trip(kind, &run, step, &sealed);
    if xor != 0 {
        let at = flip_at % sealed.len();
        sealed[at] ^= xor;
        assert!(
            !record_round_trip(kind, &run, step, &sealed),
            "a changed byte at {at} of a {} record was accepted (the intact one decoded: {decoded})",
            String::from_utf8_lossy(KINDS[kind])
        );
    }
}

/// The event types a fuzzed chain is built of.
const EVENT_TYPES: [graph_store::events::EventType; 6] = [
    graph_store::events::EventType::RunStarted,
    graph_store::events::EventType::StepCommitted,
    graph_store::events::EventType::EffectRecorded,
    graph_store::events::EventType::Interrupted,
    graph_store::events::EventType::Resumed,
    graph_store::events::EventType::RunCompleted,
];

/// The events target. Mode 0: the input as one stored event (decoded or refused; a decoded one encodes
/// to bytes that decode to it again). Otherwise: a chain of up to 8 events built from the input (payloads
/// the input's JSON where it parses, its text otherwise; keyed or not), stored, one byte of one stored
/// event changed, read back and verified: the intact chain verifies, and a changed one verifies only if
/// every event read back equals the one written.
pub fn events(data: &[u8]) {
    use graph_store::events::{Appender, ChainKey, Payload, decode, encode, verify};
    let mut input = Input(data);
    if input.byte() % 2 == 0 {
        let bytes = input.rest();
        if let Ok(e) = decode("r", 0, bytes) {
            assert_eq!(
                decode("r", 0, &encode(&e)).expect("its own encoding"),
                e,
                "an event does not round-trip"
            );
            let _ = verify("r", None, std::slice::from_ref(&e), None, None);
        }
        return;
    }
    let keyed = input.byte() % 2 == 1;
    let key = keyed.then(|| ChainKey::new(input.take(16).to_vec()));
    let n = usize::from(input.byte() % 8) + 1;
    let (target, flip_at, xor) = (usize::from(input.byte()) % n, usize::from(input.u16()), input.byte());
    let mut appender = Appender::new(None, key.as_ref());
    let mut written = Vec::with_capacity(n);
    for i in 0..n {
        let len = usize::from(input.byte());
        let chunk = input.take(len);
        let value = serde_json::from_slice(chunk)
            .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(chunk).into_owned()));
        let payload = Payload::new(&value).expect("a JSON value");
        written.push(appender.next(EVENT_TYPES[i % EVENT_TYPES.len()], input.u64() >> 16, payload));
    }
    let head = appender.into_head();
    verify("r", None, &written, head.as_ref(), key.as_ref()).expect("an intact chain verifies");
    let mut stored: Vec<Vec<u8>> = written.iter().map(encode).collect();
    if xor != 0 {
        let bytes = &mut stored[target];
        let at = flip_at % bytes.len();
        bytes[at] ^= xor;
    }
    let Ok(read) =
        stored.iter().enumerate().map(|(i, b)| decode("r", i as u64, b)).collect::<Result<Vec<_>, _>>()
    else {
        return;
    };
    if verify("r", None, &read, head.as_ref(), key.as_ref()).is_ok() {
        assert_eq!(read, written, "a chain with a changed byte verified as other events");
    }
}

/// Canonical JSON written the slow, obvious way: every object's keys sorted by their UTF-8 bytes,
/// everything else as serde_json writes it.
fn reference_canonical(v: &serde_json::Value, out: &mut Vec<u8>) {
    use serde_json::Value;
    match v {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                reference_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (k, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&serde_json::to_vec(k).expect("a string"));
                out.push(b':');
                reference_canonical(value, out);
            }
            out.push(b'}');
        }
        scalar => out.extend_from_slice(&serde_json::to_vec(scalar).expect("a scalar")),
    }
}

/// The canonical target: any JSON the input parses as is written as the obvious reference writes it,
/// by both of the module's forms and by an event payload; the bytes parse back to the same value, and
/// writing that again gives the same bytes.
pub fn canonical(data: &[u8]) {
    use graph_store::canonical::{to_vec, to_vec_sorted};
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let c = to_vec(&v).expect("a JSON value serializes");
    let mut expected = Vec::new();
    reference_canonical(&v, &mut expected);
    assert_eq!(String::from_utf8_lossy(&c), String::from_utf8_lossy(&expected), "not the reference's bytes");
    assert_eq!(to_vec_sorted(&v).expect("serializes"), c, "the sorted form differs for a JSON value");
    assert_eq!(graph_store::events::Payload::new(&v).expect("serializes").as_str().as_bytes(), &c[..]);
    let back: serde_json::Value = serde_json::from_slice(&c).expect("canonical bytes parse");
    assert_eq!(back, v, "canonical bytes parse to another value");
    assert_eq!(to_vec(&back).expect("serializes"), c, "canonical bytes are not a fixed point");
}

/// The commit-log target. Mode 0: a segment file; 1: a redo record; 2: a manifest file; 3: a valid
/// manifest with one byte changed; otherwise a segment built of groups of records from the input, with
/// one byte changed (see `graph_store_sled::fuzzing`).
pub fn commit_log(data: &[u8]) {
    use graph_runtime::fuzzing::sled;
    let mut input = Input(data);
    match input.byte() % 5 {
        0 => sled::segment(input.rest()),
        1 => sled::redo(input.rest()),
        2 => sled::manifest(input.rest()),
        3 => {
            let flip = (usize::from(input.u16()), input.byte());
            let checkpoint = input.u64();
            let extra: Vec<u64> =
                input.rest().chunks(8).map(|c| c.iter().fold(0, |a, &b| a << 8 | u64::from(b))).collect();
            sled::manifest_flip(checkpoint, &extra, flip);
        }
        _ => {
            let flip = (usize::from(input.u16()), input.byte());
            let (salt, first_seq) = (input.u64(), input.u64() >> 8);
            let mut groups = Vec::new();
            while !input.0.is_empty() && groups.len() < 16 {
                let records = usize::from(input.byte() % 4) + 1;
                groups.push(
                    (0..records)
                        .map(|_| {
                            let len = usize::from(input.byte());
                            input.take(len).to_vec()
                        })
                        .collect(),
                );
            }
            sled::segment_round_trip(salt, first_seq, &groups, Some(flip));
        }
    }
}

/// The graphctl target: the input's NUL-separated words (any bytes, UTF-8 or not) as a command line.
pub fn graphctl_args(data: &[u8]) {
    use std::os::unix::ffi::OsStrExt as _;
    let mut argv = vec![std::ffi::OsString::from("graphctl")];
    argv.extend(data.split(|&b| b == 0).map(|w| std::ffi::OsStr::from_bytes(w).to_owned()));
    graphctl::fuzzing::parse_args(&argv);
}

/// The bearer token of the HTTP target's server.
pub const TOKEN: &str = "fuzz-token";

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime"))
}

/// A memory store holding one approval run, `expense-1`, waiting for its approver.
async fn filled_store() -> std::sync::Arc<dyn graph_runtime::Store> {
    use graph_examples::approval::{self, approval_flow};
    let store: std::sync::Arc<dyn graph_runtime::Store> =
        std::sync::Arc::new(graph_store::MemoryStore::new());
    let engine = graph_runtime::Engine::builder(approval_flow::graph()).shared_store(store.clone()).build();
    let outcome = engine.run("expense-1", approval::sample_request()).await.expect("the run starts");
    assert_eq!(outcome.interrupts().len(), 1);
    store
}

/// The HTTP target: `method | token? | target | '\n' | body` sent to `graphctl serve`'s router over a
/// store holding one waiting run (a fresh one for anything but `GET`). No answer is a server error, and
/// every JSON answer parses.
pub fn http_api(data: &[u8]) {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;
    static SHARED: std::sync::OnceLock<std::sync::Arc<dyn graph_runtime::Store>> = std::sync::OnceLock::new();
    let mut input = Input(data);
    let method = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"][usize::from(input.byte()) % 6];
    let token = input.byte() % 2 == 1;
    let rest = input.rest();
    let (target, body) = match rest.iter().position(|&b| b == b'\n') {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    let mut uri = b"/".to_vec();
    uri.extend_from_slice(target.strip_prefix(b"/").unwrap_or(target));
    let mut req = Request::builder().method(method).uri(&uri[..]).header("content-type", "application/json");
    if token {
        req = req.header("authorization", format!("Bearer {TOKEN}"));
    }
    let Ok(req) = req.body(Body::from(body.to_vec())) else { return };
    let shared = (method == "GET").then(|| SHARED.get_or_init(|| runtime().block_on(filled_store())).clone());
    runtime().block_on(async move {
        let store = match shared {
            Some(s) => s,
            None => filled_store().await,
        };
        let app = graphctl::Cli::new()
            .graph(graph_examples::approval::approval_flow::graph())
            .router(store, Some(TOKEN.to_owned()));
        let response = app.oneshot(req).await.expect("the router answers");
        let status = response.status();
        assert!(!status.is_server_error(), "{method} {}: {status}", String::from_utf8_lossy(&uri));
        // A `HEAD` answer has the headers of a `GET` and no body.
        let json = method != "HEAD"
            && response.headers().get("content-type").is_some_and(|v| v == "application/json");
        if json {
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 24).await.expect("a whole body");
            if let Err(e) = serde_json::from_slice::<serde_json::Value>(&bytes) {
                panic!("{method} {}: a JSON answer does not parse ({e})", String::from_utf8_lossy(&uri));
            }
        }
    });
}
