//! Writes the fuzz targets' seed corpora (`fuzz/corpus/<target>/`) from a real store: the example
//! graphs run on a sled store, then every record it holds is read back and written as the bytes the
//! stores keep (each store encodes with the same `graph_store` encoders, and the SQL stores keep these
//! bytes in their rows), with the commit log's segment and manifest files as they lie on disk.
//!
//! `cargo +nightly fuzz run` extends these corpora as it finds new coverage; only these seeds are
//! committed. Run from `fuzz/`: `cargo +nightly run --example seeds`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use graph_examples::approval::{self, approval_flow};
use graph_examples::payments::{Order, checkout};
use graph_runtime::Store;
use graph_runtime::prelude::*;
use graph_store::mailbox::MailboxOp;
use graph_store::schedule::{Missed, Schedule, ScheduleOp};
use graph_store::{events, journal, mailbox, record, schedule};

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = PathBuf::from("corpus").join(target);
    std::fs::create_dir_all(&dir).expect("the corpus folder");
    std::fs::write(dir.join(name), bytes).expect("a seed");
}

/// A records-target input: `kind | step | run length | run | flip (3 bytes, none) | mode | bytes`.
fn record_seed(name: &str, kind: u8, run: &str, step: u64, bytes: &[u8]) {
    let head = |mode: u8| {
        let mut b = vec![kind, step as u8, run.len() as u8];
        b.extend_from_slice(run.as_bytes());
        b.extend_from_slice(&[0, 0, 0, mode]);
        b
    };
    let mut stored = head(0);
    stored.extend_from_slice(bytes);
    assert!(graph_fuzz::record_round_trip(usize::from(kind), run, step, bytes), "{name} decodes");
    write("records", &format!("{name}-stored"), &stored);
    // The body alone, for the sealed mode (an envelope's header is 40 bytes; a bare JSON run row has none).
    let body = if bytes.first() == Some(&b'{') { bytes } else { &bytes[40..] };
    let mut sealed = head(1);
    sealed.extend_from_slice(body);
    write("records", &format!("{name}-body"), &sealed);
}

async fn fill(store: Arc<dyn Store>, ledger: &Path) {
    let orders = Engine::builder(checkout::graph()).shared_store(store.clone()).build();
    let order = Order {
        id: "order-1".into(),
        customer: "alice".into(),
        amount_cents: 3000,
        provider: ledger.display().to_string(),
        ..Order::default()
    };
    assert!(orders.run("order-1", order).await.expect("the order runs").is_completed());
    let expenses = Engine::builder(approval_flow::graph()).shared_store(store.clone()).build();
    let waiting = expenses.run("expense-1", approval::sample_request()).await.expect("the expense runs");
    assert_eq!(waiting.interrupts().len(), 1);
    let send = MailboxOp::Send {
        topic: "approved".into(),
        dedupe_key: Some("mail-1".into()),
        payload: serde_json::json!({"by": "bob", "note": "ok \u{e9}\u{0}"}),
        sent_at_ms: 1_700_000_000_000,
    };
    store.mailbox_op("expense-1", send).await.expect("a message");
    let nightly = Schedule {
        name: "nightly".into(),
        graph_fingerprint: approval_flow::graph().fingerprint().to_owned(),
        spec: "0 2 * * *".into(),
        input: serde_json::to_value(approval::sample_request()).expect("JSON"),
        missed: Missed::default(),
        paused: false,
        next_fire_ms: 1_700_000_000_000,
        updated_ms: 1_700_000_000_000,
        version: 0,
    };
    store
        .schedule_op("nightly", ScheduleOp::Put { schedule: Box::new(nightly), expected_version: Some(0) })
        .await
        .expect("a schedule");
}

async fn records(store: &dyn Store) {
    let mut n = 0;
    for info in store.list_runs(&Default::default()).await.expect("the runs") {
        let run = info.run_id.clone();
        record_seed(&format!("run-{run}"), 1, &run, 0, &record::encode_run(&info));
        for cp in store.checkpoints(&run, 0, info.latest_step).await.expect("checkpoints") {
            record_seed(&format!("checkpoint-{run}-{}", cp.step), 0, &run, cp.step, &record::encode(&cp));
            let state = match &cp.state {
                graph_store::StateRepr::Full(bytes) => bytes.clone(),
                graph_store::StateRepr::Delta { deltas, .. } => deltas.clone(),
            };
            write("canonical", &format!("state-{run}-{}", cp.step), &state);
        }
        if let Some(pending) = store.pending(&run).await.expect("pending") {
            record_seed(&format!("pending-{run}"), 2, &run, 0, &pending);
        }
        for e in store.effects(&run).await.expect("effects") {
            n += 1;
            record_seed(&format!("effect-{n}"), 3, &run, 0, &journal::encode_effect(&e));
        }
        let mb = store.mailbox(&run).await.expect("a mailbox");
        if !mb.messages.is_empty() {
            record_seed(&format!("mailbox-{run}"), 5, &run, 0, &mailbox::encode(&mb));
        }
        let log = store.events(&run, 0, usize::MAX).await.expect("events");
        for e in &log {
            let mut seed = vec![0];
            seed.extend_from_slice(&events::encode(e));
            write("events", &format!("event-{run}-{}", e.seq), &seed);
            write("canonical", &format!("payload-{run}-{}", e.seq), e.payload.as_str().as_bytes());
        }
    }
    for row in store.outbox(100).await.expect("the outbox") {
        n += 1;
        record_seed(&format!("outbox-{n}"), 4, &row.run_id, 0, &journal::encode_outbox(&row));
    }
    for s in store.schedules().await.expect("schedules") {
        record_seed(&format!("schedule-{}", s.name), 6, "", 0, &schedule::encode(&s));
    }
    // Chains built by the events target: unkeyed and keyed, of one to eight events, with a change.
    for (i, seed) in [
        &b"\x01\x00\x03\x01\x05\x00\x01\x02\"a\""[..],
        b"\x01\x01keykeykeykeykeyk\x07\x06\x10\x00\x80\x04{\"a\":1}",
    ]
    .iter()
    .enumerate()
    {
        write("events", &format!("chain-{i}"), seed);
    }
}

/// The commit log's files: its segments cut after their last written byte, and the manifest.
fn commit_log(dir: &Path) {
    for entry in walk(dir) {
        let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let bytes = std::fs::read(&entry).expect("a store file");
        if bytes.starts_with(b"GRWL") {
            let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |p| (p + 64).min(bytes.len()));
            let mut seed = vec![0];
            seed.extend_from_slice(&bytes[..end]);
            write("commit_log", &format!("segment-{name}"), &seed);
        } else if bytes.starts_with(b"GRMF") {
            let mut seed = vec![2];
            seed.extend_from_slice(&bytes);
            write("commit_log", "manifest", &seed);
        }
    }
    write(
        "commit_log",
        "built-groups",
        b"\x04\x10\x00\x01saltsalt\x05\x00\x00\x00\x00\x00\x00\x00\x01\x0a\x00\x04\x00\x00\x00key1",
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("a folder").flatten() {
        let p = e.path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

/// Requests of every endpoint of `graphctl serve`, and command lines of every graphctl command.
fn requests_and_command_lines() {
    let requests: &[(u8, &str, &str)] = &[
        (0, "/", ""),
        (0, "/api/openapi.json", ""),
        (0, "/api/graphs", ""),
        (0, "/api/graphs/approval.svg", ""),
        (0, "/api/runs?status=interrupted&limit=5&prefix=exp&after=a", ""),
        (0, "/api/runs/expense-1", ""),
        (0, "/api/runs/expense-1/history", ""),
        (0, "/api/runs/expense-1/state?step=0", ""),
        (0, "/api/runs/expense-1/diff?from=0&to=1", ""),
        (0, "/api/runs/expense-1/events?from=0&limit=10", ""),
        (0, "/api/runs/expense-1/effects", ""),
        (0, "/api/runs/expense-1/outbox", ""),
        (0, "/api/runs/expense-1/mailbox", ""),
        (0, "/api/runs/expense-1/verify", ""),
        (0, "/api/runs/expense-1/live", ""),
        (0, "/api/schedules", ""),
        (1, "/api/runs/expense-1/answer", r#"{"input": {"approved": true}}"#),
        (1, "/api/runs/expense-1/events", r#"{"topic": "approved", "payload": 1, "dedupe_key": "k"}"#),
        (1, "/api/runs/expense-1/cancel", r#"{"reason": "no"}"#),
        (1, "/api/runs/expense-1/resume", "{}"),
        (1, "/api/runs/expense-1/fork", r#"{"step": 0, "new_run": "copy"}"#),
        (1, "/api/runs/expense-1/effects/resolve", r#"{"key": "k", "completed": 1}"#),
    ];
    for (i, (method, target, body)) in requests.iter().enumerate() {
        let mut seed = vec![*method, 1];
        seed.extend_from_slice(target.as_bytes());
        seed.push(b'\n');
        seed.extend_from_slice(body.as_bytes());
        write("http_api", &format!("request-{i}"), &seed);
    }
    let lines: &[&[&str]] = &[
        &["runs", "--status", "interrupted", "--prefix", "exp", "--after", "a", "--limit", "5"],
        &["--store", "sqlite://x.db", "--json", "show", "run-1"],
        &["history", "run-1"],
        &["state", "run-1", "--step", "3"],
        &["diff", "run-1", "--from", "0", "--to", "2"],
        &["verify", "--all"],
        &["verify", "run-1", "--key-file", "k"],
        &["events", "run-1"],
        &["answer", "run-1", "--input", "{\"approved\":true}", "--interrupt", "i-1"],
        &["send-event", "run-1", "--topic", "approved", "--payload", "1", "--dedupe-key", "d"],
        &["cancel", "run-1"],
        &["resume", "run-1"],
        &["fork", "run-1", "--step", "2", "--new-run", "run-2"],
        &["prune", "run-1", "--keep", "3"],
        &["outbox"],
        &["effects", "run-1"],
        &["resolve-effect", "run-1", "--key", "k", "--completed", "{}"],
        &["hand-back", "run-1"],
        &["migrate", "--dry-run"],
        &["schedules"],
        &["serve", "--listen", "127.0.0.1:0", "--token-file", "t"],
        &["graphs"],
    ];
    for (i, line) in lines.iter().enumerate() {
        write("graphctl_args", &format!("line-{i}"), line.join("\0").as_bytes());
    }
}

fn main() {
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let dir = tmp.path().join("store");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    rt.block_on(async {
        let store: Arc<dyn Store> =
            Arc::new(graph_runtime::store::SledStore::open(&dir).expect("a sled store"));
        fill(store.clone(), &tmp.path().join("ledger")).await;
        records(&*store).await;
    });
    commit_log(&dir);
    requests_and_command_lines();
    println!("seeds written under corpus/");
}
