//! graphctl end to end: the stock binary run on sled stores these tests fill with runs of the example
//! graphs in every status (completed, interrupted by `ctx.interrupt`, failed, forked, a keyed log),
//! each command's table and `--json` checked, and every failure's exit code and single line on stderr.

use std::path::{Path, PathBuf};
use std::process::Command;

use graph_examples::approval::{self, approval_flow};
use graph_examples::payments::{Order, checkout};
use graph_runtime::ChainKey;
use graph_runtime::prelude::*;
use serde_json::{Value, json};

mod common;

/// What one graphctl invocation did.
#[derive(Debug)]
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Ran {
    /// Succeeded (exit 0) with nothing on stderr.
    fn ok(self) -> Self {
        assert_eq!(self.code, 0, "{self:?}");
        assert!(self.stderr.is_empty(), "{self:?}");
        self
    }

    /// Failed with `code` and one line on stderr, which contains `text`.
    fn fails(self, code: i32, text: &str) -> Self {
        assert_eq!(self.code, code, "{self:?}");
        assert_eq!(self.stderr.lines().count(), 1, "one line on stderr: {self:?}");
        assert!(self.stderr.starts_with("error: "), "{self:?}");
        assert!(self.stderr.contains(text), "expected {text:?} in {self:?}");
        self
    }
}

fn graphctl(store: &Path, args: &[&str]) -> Ran {
    let out = Command::new(env!("CARGO_BIN_EXE_graphctl-examples"))
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("graphctl runs");
    Ran {
        code: out.status.code().expect("graphctl exits, it is not killed"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// `graphctl --json ARGS`, which must succeed, parsed.
fn json(store: &Path, args: &[&str]) -> Value {
    let ran = graphctl(store, &[&["--json"][..], args].concat()).ok();
    serde_json::from_str(&ran.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", ran.stdout))
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// An order of the checkout example, charged through the provider ledger at `ledger`.
fn order(id: &str, amount_cents: u64, ledger: &Path) -> Order {
    Order {
        id: id.into(),
        customer: "alice".into(),
        amount_cents,
        provider: ledger.display().to_string(),
        ..Order::default()
    }
}

/// A folder with a sled store (`store/`) and the checkout example's provider ledger (`ledger.txt`).
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }
}

/// A sled store in `dir` with runs of two example graphs, one of each status: `order-1` (checkout,
/// completed, labelled `nightly`), `order-0` (checkout, failed: nothing to charge), `expense-1`
/// (approval, interrupted: it waits for its approver) and `order-1-again` (a fork of `order-1` at step
/// 1, running). The provider's ledger is `ledger`. The store is closed on return.
fn store_with_runs(dir: &Path, ledger: &Path) {
    fill(std::sync::Arc::new(SledStore::open(dir).unwrap()), ledger);
}

/// The runs of [`store_with_runs`], in `store`, which is closed on return.
fn fill(store: std::sync::Arc<dyn graph_runtime::Store>, ledger: &Path) {
    block_on(async {
        let orders = Engine::builder(checkout::graph()).shared_store(store.clone()).build();
        let labelled = RunOptions::default().label("nightly");
        assert!(
            orders
                .run_with("order-1", order("order-1", 3000, ledger), labelled)
                .await
                .unwrap()
                .is_completed()
        );
        assert!(orders.run("order-0", order("order-0", 0, ledger)).await.is_err());
        let expenses = Engine::builder(approval_flow::graph()).shared_store(store).build();
        let asked = expenses.run("expense-1", approval::sample_request()).await.unwrap();
        assert_eq!(asked.interrupts().len(), 1);
        orders.fork("order-1", 1, "order-1-again").await.unwrap();
    });
}

fn runs() -> Fixture {
    let fixture = Fixture { dir: tempfile::tempdir().unwrap() };
    store_with_runs(&fixture.store(), &fixture.dir.path().join("ledger.txt"));
    fixture
}

/// The question `expense-1` asks, as its payload is shown (JSON).
fn question() -> String {
    Value::String(approval::sample_request().question()).to_string()
}

#[test]
fn runs_lists_every_status_most_recent_first() {
    let f = runs();
    let table = graphctl(&f.store(), &["runs"]).ok().stdout;
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("RUN") && lines[0].contains("UPDATED"), "{table}");
    for (run, status, graph) in [
        ("order-1 ", "completed", "checkout"),
        ("expense-1 ", "interrupted (1 question)", "approval"),
        ("order-0 ", "failed", "checkout"),
        ("order-1-again ", "running", "checkout"),
    ] {
        let line = lines.iter().find(|l| l.starts_with(run)).unwrap_or_else(|| panic!("{run} in {table}"));
        assert!(line.contains(status) && line.ends_with(&format!("{graph}  1")), "{line}");
    }

    let all = json(&f.store(), &["runs"]);
    let runs = all["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    let times: Vec<u64> = runs.iter().map(|r| r["updated_ms"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first: {times:?}");
    assert!(runs.iter().all(|r| r["registered"] == true && r["version"] == 1));

    let waiting = json(&f.store(), &["runs", "--status", "interrupted"]);
    assert_eq!(waiting["runs"].as_array().unwrap().len(), 1);
    assert_eq!(waiting["runs"][0]["run_id"], "expense-1");
    assert_eq!(waiting["runs"][0]["interrupts"][0]["node"], "approve");
    assert_eq!(json(&f.store(), &["runs", "--limit", "2"])["runs"].as_array().unwrap().len(), 2);
    let none = graphctl(&f.store(), &["runs", "--status", "cancelled"]).ok().stdout;
    assert!(none.starts_with("no cancelled runs"), "{none}");
}

#[test]
fn show_names_the_status_its_reason_the_graph_and_the_fork() {
    let f = runs();
    let waiting = graphctl(&f.store(), &["show", "expense-1"]).ok().stdout;
    assert!(waiting.contains("interrupted (1 question)"), "{waiting}");
    assert!(waiting.contains("waits for input: node `approve` at step 1"), "{waiting}");
    assert!(waiting.contains(&format!("asks {}", question())), "{waiting}");
    assert!(waiting.contains("approval (registered in this graphctl)"), "{waiting}");

    let failed = graphctl(&f.store(), &["show", "order-0"]).ok().stdout;
    assert!(failed.contains("failed") && failed.contains("order order-0 has nothing to charge"), "{failed}");

    let fork = graphctl(&f.store(), &["show", "order-1-again"]).ok().stdout;
    assert!(fork.contains("forked from   run order-1 at step 1"), "{fork}");

    let done = json(&f.store(), &["show", "order-1"]);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["latest_step"], 3);
    assert_eq!(done["label"], "nightly");
    assert_eq!(done["graph"], "checkout");
    assert_eq!(done["fingerprint"], checkout::graph().fingerprint());
    assert_eq!(done["checkpoints"], 4);
    // RUN_STARTED, three STEP_COMMITTED, one EFFECT_RECORDED, RUN_COMPLETED.
    assert_eq!(done["events"], 6);
    assert!(done["first_commit_ms"].as_u64() <= done["last_commit_ms"].as_u64());
    assert_eq!(json(&f.store(), &["show", "order-1-again"])["forked_from"]["run_id"], "order-1");
}

#[test]
fn history_lists_each_step_with_what_ran_and_what_runs_next() {
    let f = runs();
    let table = graphctl(&f.store(), &["history", "order-1"]).ok().stdout;
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 5, "{table}");
    assert!(
        lines[1].starts_with("0 ") && lines[1].contains("nightly") && lines[1].contains("check"),
        "{table}"
    );
    assert!(lines[3].contains("charge") && lines[3].contains("ship"), "{table}");
    assert!(lines[4].starts_with("3 ") && lines[4].contains("END"), "{table}");

    let history = json(&f.store(), &["history", "order-1"]);
    let steps = history["history"].as_array().unwrap();
    assert_eq!(steps[2]["ran"], json!(["charge"]));
    assert_eq!(steps[2]["next"], json!(["ship"]));
    assert_eq!(steps[0]["ran"], Value::Null);
    assert_eq!(steps[3]["state_hash"].as_str().unwrap().len(), 64);
}

#[test]
fn state_and_diff_rebuild_states_with_the_registered_graph() {
    let f = runs();
    let store = f.store();
    let last = json(&store, &["state", "order-1"]);
    assert_eq!(last["step"], 3);
    let receipt = last["state"]["receipt"].as_str().unwrap().to_owned();
    let first: Value =
        serde_json::from_str(&graphctl(&store, &["state", "order-1", "--step", "0"]).ok().stdout).unwrap();
    assert_eq!(
        (&first["id"], &first["log"], &first["receipt"]),
        (&json!("order-1"), &json!([]), &Value::Null)
    );
    let compact = graphctl(&store, &["state", "order-1", "--step", "2", "--compact"]).ok().stdout;
    assert_eq!(compact.lines().count(), 1, "{compact}");
    assert_eq!(serde_json::from_str::<Value>(&compact).unwrap()["receipt"], json!(receipt));

    let changes = json(&store, &["diff", "order-1", "0", "3"]);
    assert_eq!(
        changes["changes"],
        json!([
            { "op": "added", "path": "/log/0", "new": "checked 30.00" },
            { "op": "added", "path": "/log/1", "new": format!("charged: {receipt}") },
            { "op": "added", "path": "/log/2", "new": "shipment booked" },
            { "op": "changed", "path": "/receipt", "old": null, "new": receipt },
        ])
    );
    let text = graphctl(&store, &["diff", "order-1", "0", "3"]).ok().stdout;
    assert!(text.starts_with("run order-1: 4 changes from step 0 to step 3\n"), "{text}");
    assert!(text.contains(&format!("~  /receipt  null → \"{receipt}\"")), "{text}");
    assert!(text.contains("+  /log/2    \"shipment booked\""), "{text}");
    let same = graphctl(&store, &["diff", "order-1", "3", "3"]).ok().stdout;
    assert_eq!(same, "run order-1: no change from step 3 to step 3\n");
    graphctl(&store, &["state", "order-1", "--step", "9"]).fails(3, "no checkpoint at step 9 (stored: 0–3");
}

#[test]
fn graph_draws_the_shape_the_run_recorded() {
    let f = runs();
    let mermaid = graphctl(&f.store(), &["graph", "order-1"]).ok().stdout;
    assert_eq!(mermaid, checkout::graph().mermaid());
    assert!(mermaid.contains("check -->|0| charge"), "{mermaid}");
    let dot = graphctl(&f.store(), &["graph", "expense-1", "--dot"]).ok().stdout;
    assert_eq!(dot, approval_flow::graph().dot());
    let registered = graphctl(&f.store(), &["graph", "--registered", "checkout"]).ok().stdout;
    assert_eq!(registered, mermaid);
    assert_eq!(json(&f.store(), &["graph", "order-1"])["entry"], "check");
    graphctl(&f.store(), &["graph", "--registered", "checkot"]).fails(3, "did you mean `checkout`?");
}

#[test]
fn events_pages_through_the_log() {
    let f = runs();
    let table = graphctl(&f.store(), &["events", "order-1"]).ok().stdout;
    let types: Vec<&str> = table.lines().skip(1).map(|l| l.split_whitespace().nth(2).unwrap()).collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "STEP_COMMITTED",
            "EFFECT_RECORDED",
            "STEP_COMMITTED",
            "STEP_COMMITTED",
            "RUN_COMPLETED"
        ]
    );
    assert!(table.contains("step 2: ran charge → next ship"), "{table}");
    assert!(table.contains("card.charge (non-idempotent)"), "{table}");

    let page = graphctl(&f.store(), &["events", "order-1", "--from", "1", "--limit", "2"]).ok().stdout;
    assert_eq!(page.lines().count(), 4, "{page}");
    assert!(page.ends_with("… more: --from 3\n"), "{page}");
    let page = json(&f.store(), &["events", "order-1", "--from", "1", "--limit", "2"]);
    let seqs: Vec<u64> =
        page["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!((seqs, page["next"].clone()), (vec![1, 2], json!(3)));
    let waiting = graphctl(&f.store(), &["events", "expense-1"]).ok().stdout;
    assert!(waiting.contains("INTERRUPTED") && waiting.contains("1 waiting (approve)"), "{waiting}");
}

#[test]
fn effects_shows_the_journal() {
    let f = runs();
    let table = graphctl(&f.store(), &["effects", "order-1"]).ok().stdout;
    let row = table.lines().nth(1).unwrap();
    assert!(row.starts_with("1 ") && row.contains("charge") && row.contains("card.charge"), "{table}");
    assert!(row.contains("non-idempotent") && row.contains("completed: {"), "{table}");
    let journal = json(&f.store(), &["effects", "order-1"]);
    assert_eq!(journal["effects"][0]["name"], "card.charge");
    assert_eq!(journal["effects"][0]["key"].as_str().unwrap().len(), 32);
    assert_eq!(
        graphctl(&f.store(), &["effects", "expense-1"]).ok().stdout,
        "run expense-1 journaled no effect\n"
    );
}

#[test]
fn verify_checks_one_run_or_all_of_them() {
    let f = runs();
    let one = graphctl(&f.store(), &["verify", "order-1"]).ok().stdout;
    assert!(one.starts_with("run order-1: the event log verifies: 6 events, head seq 5"), "{one}");
    assert!(one.contains("4 checkpoints match"), "{one}");
    let all = graphctl(&f.store(), &["verify", "--all"]).ok().stdout;
    assert!(
        all.contains("\n4 runs: 4 verify, 0 do not\nstore: the commit log's checksums: 0 closed segments"),
        "{all}"
    );
    let all = json(&f.store(), &["verify", "--all"]);
    assert_eq!((all["verified"].clone(), all["broken"].clone()), (json!(4), json!(0)));
    assert_eq!(all["store"]["checked"], json!(true), "a sled store checks its commit log: {all}");
}

/// The key of [`keyed_store`]'s log.
const KEY: &[u8; 32] = b"a graphctl test key, 32 bytes!!!";

/// A sled store in `dir` with one completed checkout run, `keyed`, whose event log is keyed with [`KEY`].
#[test]
fn backup_copies_a_store_and_restore_checks_it_and_writes_a_new_one() {
    let f = runs();
    let backup = f.dir.path().join("backup");
    let ran = graphctl(&f.store(), &["backup", "--to", backup.to_str().unwrap()]).ok();
    assert!(ran.stdout.starts_with("backed up 4 runs to "), "{ran:?}");
    graphctl(&f.store(), &["backup", "--to", backup.to_str().unwrap()]).fails(1, "exists already");
    // The backup is a store: every command reads it.
    assert_eq!(json(&backup, &["verify", "--all"])["runs"].as_array().map(Vec::len), Some(4));
    let restored = f.dir.path().join("restored");
    let done = json(&restored, &["restore", "--from", backup.to_str().unwrap()]);
    assert_eq!(
        (done["runs"].as_u64(), done["checkpoints_matched"].as_u64().is_some_and(|n| n > 4)),
        (Some(4), true)
    );
    let show = json(&restored, &["show", "expense-1"]);
    assert_eq!(show["status"], "interrupted", "{show}");
    // Restore writes a new store only.
    graphctl(&restored, &["restore", "--from", backup.to_str().unwrap()]).fails(2, "exists");
    // A backup that does not verify is not restored, and nothing is written: a SQLite store's backup
    // (a file), one byte of a checkpoint changed in it.
    let file = f.dir.path().join("store.sqlite");
    fill(
        std::sync::Arc::new(graph_runtime::store::SqliteStore::open(&file).unwrap()),
        &f.dir.path().join("l2"),
    );
    let copy = f.dir.path().join("backup.sqlite");
    graphctl(&file, &["backup", "--to", copy.to_str().unwrap()]).ok();
    // A SQLite store's copy is a SQLite file whatever its name.
    let unnamed = f.dir.path().join("backup-without-extension");
    let ran = graphctl(&file, &["backup", "--to", unnamed.to_str().unwrap()]).ok();
    assert!(ran.stdout.starts_with("backed up 4 runs to "), "{ran:?}");
    rusqlite::Connection::open(&copy)
        .unwrap()
        .execute_batch(
            "UPDATE checkpoints SET record = CAST(substr(record, 1, length(record) - 1) || x'00' AS BLOB)
             WHERE run_id = 'order-1' AND step = 1",
        )
        .unwrap();
    let damaged = f.dir.path().join("from-damaged.sqlite");
    graphctl(&damaged, &["restore", "--from", copy.to_str().unwrap()])
        .fails(5, "does not verify, nothing was restored");
    assert!(!damaged.exists());
    // Salvage takes the runs that verify and names the one that does not; exit 5.
    let salvaged = f.dir.path().join("salvaged.sqlite");
    let ran = graphctl(&copy, &["salvage", "--to", salvaged.to_str().unwrap()]);
    assert_eq!(ran.code, 5, "{ran:?}");
    assert!(ran.stdout.starts_with("salvaged 3 runs to ") && ran.stdout.contains("\n  order-1: "), "{ran:?}");
    let all = json(&salvaged, &["verify", "--all"]);
    let ids: Vec<&str> =
        all["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 3, "{all}");
    assert!(!ids.contains(&"order-1"), "{all}");
}

/// `rebuild` sets a sled store's index aside and rebuilds it from the commit log: every run reads back
/// as before (the same `verify --all` and `history`), the old files are kept, and a backup (a copy,
/// whose log is not its whole history) is refused with exit 2, changing nothing.
#[test]
fn rebuild_makes_the_index_again_from_the_commit_log() {
    let f = runs();
    let before = (json(&f.store(), &["verify", "--all"]), json(&f.store(), &["history", "order-1"]));
    let ran = graphctl(&f.store(), &["rebuild"]).ok();
    assert!(ran.stdout.starts_with("rebuilt the index of ") && ran.stdout.contains(": 4 runs\n"), "{ran:?}");
    assert!(ran.stdout.contains("the files it replaced are kept in "), "{ran:?}");
    assert!(f.store().join("db.damaged-1").join("db").is_file());
    let after = (json(&f.store(), &["verify", "--all"]), json(&f.store(), &["history", "order-1"]));
    assert_eq!(before, after);
    let backup = f.dir.path().join("backup");
    graphctl(&f.store(), &["backup", "--to", backup.to_str().unwrap()]).ok();
    graphctl(&backup, &["rebuild"]).fails(2, "does not hold the store's whole history");
    assert!(!backup.join("db.damaged-1").exists(), "a refused rebuild moves nothing");
    graphctl(Path::new("sqlite://store.sqlite"), &["rebuild"]).fails(2, "for a sled store's folder");
}

fn keyed_store(dir: &Path, ledger: &Path) {
    block_on(async {
        let store = SledStore::open(dir).unwrap();
        let engine = Engine::builder(checkout::graph()).store(store).chain_key(ChainKey::new(*KEY)).build();
        engine.run("keyed", order("keyed", 4000, ledger)).await.unwrap();
    });
}

#[test]
fn a_keyed_log_does_not_verify_without_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    keyed_store(&store, &dir.path().join("ledger.txt"));
    let keyless = graphctl(&store, &["verify", "keyed"]).fails(5, "broken at event 0");
    assert!(keyless.stderr.contains("--key-file"), "{keyless:?}");
    let all = graphctl(&store, &["verify", "--all"]);
    assert_eq!(all.code, 5, "{all:?}");
    assert!(all.stdout.contains("keyed  broken at event 0"), "{all:?}");
    assert!(all.stdout.contains("1 run: 0 verify, 1 does not"), "{all:?}");

    let key_file = dir.path().join("key");
    std::fs::write(&key_file, KEY).unwrap();
    let key_arg = key_file.to_str().unwrap();
    graphctl(&store, &["verify", "keyed", "--key-file", key_arg]).ok();
    graphctl(&store, &["verify", "--all", "--key-file", key_arg]).ok();
    // Resuming verifies the log's tail, with the key too.
    graphctl(&store, &["resume", "keyed"]).fails(5, "pass its key with `--key-file`");
    let done = graphctl(&store, &["resume", "keyed", "--key-file", key_arg]).ok().stdout;
    assert!(done.starts_with("run keyed: completed at step 3"), "{done}");
    std::fs::write(&key_file, b"another key").unwrap();
    graphctl(&store, &["verify", "keyed", "--key-file", key_arg]).fails(5, "event 0");
    graphctl(&store, &["verify", "keyed", "--key-file", "/no/such/key"]).fails(3, "no key file");
}

#[test]
fn prune_keeps_the_latest_checkpoints() {
    // A small state: snapshots come often, so pruning a long run deletes its early steps.
    let dir = tempfile::tempdir().unwrap();
    tally_store(dir.path(), 8, "");
    let pruned = json(dir.path(), &["prune", "t", "--keep", "1"]);
    let kept: Vec<u64> =
        pruned["stored_steps"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()).collect();
    assert_eq!(kept.last(), Some(&8));
    assert!(pruned["deleted"].as_u64().unwrap() > 0, "{pruned}");
    assert_eq!(pruned["deleted"].as_u64().unwrap() as usize + kept.len(), 9);
    let history = json(dir.path(), &["history", "t"]);
    assert_eq!(history["history"].as_array().unwrap().len(), kept.len());
    let again = graphctl(dir.path(), &["prune", "t", "--keep", "1"]).ok().stdout;
    assert!(again.starts_with("run t: deleted 0 checkpoints; steps stored now: "), "{again}");

    let f = runs();
    let all = graphctl(&f.store(), &["prune", "--all", "--keep", "1"]).ok().stdout;
    assert!(all.contains("4 runs: deleted"), "{all}");
    assert_eq!(
        json(&f.store(), &["history", "order-1"])["history"].as_array().unwrap().last().unwrap()["step"],
        3
    );
    assert_eq!(graphctl(&f.store(), &["prune", "order-1", "--keep", "0"]).code, 2);
}

#[test]
fn resume_finishes_a_fork_and_leaves_a_question_waiting() {
    let f = runs();
    let store = f.store();
    let done = graphctl(&store, &["resume", "order-1-again"]).ok().stdout;
    assert!(done.starts_with("run order-1-again: completed at step 3\n"), "{done}");
    assert_eq!(json(&store, &["show", "order-1-again"])["status"], "completed");
    // The fork went the way its parent went, and charged under an effect key of its own.
    let fork = json(&store, &["effects", "order-1-again"]);
    assert_eq!(fork["effects"][0]["name"], "card.charge");
    assert_ne!(fork["effects"][0]["key"], json(&store, &["effects", "order-1"])["effects"][0]["key"]);

    let waiting = graphctl(&store, &["resume", "expense-1"]).ok().stdout;
    assert!(waiting.starts_with("run expense-1: interrupted (1 question) at step 1\n"), "{waiting}");
    assert!(waiting.contains("answer with `graphctl answer expense-1 <json>`"), "{waiting}");
    graphctl(&store, &["resume", "order-0"]).fails(1, "order order-0 has nothing to charge");
}

/// A counter that runs `until` steps past step 0, with a constant field as ballast (a large one makes
/// its steps after 0 deltas). No graphctl registers it.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    /// Ticks so far (sum).
    #[reduce(sum)]
    pub n: u64,
    /// How many ticks to make (overwrite, never written).
    pub until: u64,
    /// Ballast (overwrite, never written).
    pub text: String,
}

#[graph(state = Tally, name = "tally")]
mod tally {
    use super::*;

    #[node(entry, to = [tick, END])]
    async fn tick(s: &Tally, _ctx: &mut Ctx) -> NodeResult<Tally, tick::Next> {
        Ok((TallyDelta::default().n(1), if s.n + 1 < s.until { tick::Next::Tick } else { tick::Next::End }))
    }
}

/// A sled store in `dir` with one completed tally run, `t`, of `until` ticks.
fn tally_store(dir: &Path, until: u64, ballast: &str) {
    block_on(async {
        let engine = Engine::builder(tally::graph()).store(SledStore::open(dir).unwrap()).build();
        let out = engine.run("t", Tally { n: 0, until, text: ballast.into() }).await.unwrap();
        assert_eq!(out.steps, until);
    });
}

#[test]
fn migrate_moves_waiting_runs_to_a_new_version_and_replay_checks_what_is_stored() {
    use graph_examples::versioning::{self, RefundV2, refund_v1, refund_v2};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    block_on(async {
        let engine = Engine::builder(refund_v1::graph()).store(SledStore::open(store).unwrap()).build();
        for (run, amount) in [("refund-1", 40), ("refund-2", 700)] {
            engine.run(run, versioning::request("ada", amount)).await.unwrap();
        }
    });
    let versions = |j: &Value| -> Vec<u64> {
        j["runs"].as_array().unwrap().iter().map(|r| r["version"].as_u64().unwrap()).collect()
    };
    assert_eq!(versions(&json(store, &["runs"])), [1, 1]);
    let replayed = graphctl(store, &["replay", "--all"]).ok().stdout;
    assert!(replayed.contains("refund-1  1        same (1 step)"), "{replayed}");
    // A dry run says what it would do, and writes nothing.
    let dry = json(store, &["migrate", "refund-1", "--to", "2", "--dry-run"]);
    assert_eq!(dry["runs"][0]["frontier_after"], json!(["review"]));
    assert_eq!(dry["runs"][0]["state_after"]["amount_cents"], 4000);
    assert_eq!(versions(&json(store, &["runs"])), [1, 1]);
    // Every waiting run, then a version nothing registers.
    let moved = graphctl(store, &["migrate", "--all", "--status", "interrupted", "--to", "2"]).ok().stdout;
    assert_eq!(moved.matches("migrated (approve → review)").count(), 2, "{moved}");
    assert_eq!(versions(&json(store, &["runs"])), [2, 2]);
    let refused = graphctl(store, &["migrate", "refund-1", "--to", "3"]);
    assert_eq!(refused.code, 8, "{refused:?}");
    assert!(refused.stdout.contains("version 3 of graph `refund` is not registered"), "{refused:?}");
    // The migrated runs are version 2's: answered on it.
    block_on(async {
        let engine = Engine::builder(refund_v2::graph()).store(SledStore::open(store).unwrap()).build();
        let out: RunOutcome<RefundV2> = engine.resume_with_input("refund-2", &true).await.unwrap();
        assert_eq!(out.state.amount_cents, 70_000);
        assert_eq!(out.state.log.last().unwrap(), "paid 70000 cents (v2)");
    });
    let replayed = graphctl(store, &["replay", "refund-2"]).ok().stdout;
    assert!(replayed.contains("skipped: migrated at step 2"), "{replayed}");
    // A run of a graph this graphctl does not register fails the gate.
    tally_store(&store.join("tally"), 2, "");
    let gate = graphctl(&store.join("tally"), &["replay", "--all"]);
    assert_eq!(gate.code, 8, "{gate:?}");
    assert!(gate.stdout.contains("NOT REGISTERED: version 1"), "{gate:?}");
}

#[test]
fn without_the_graph_snapshots_and_shapes_still_read() {
    let dir = tempfile::tempdir().unwrap();
    tally_store(dir.path(), 3, &"x".repeat(2000));
    let store = dir.path();
    let shown = graphctl(store, &["show", "t"]).ok().stdout;
    assert!(shown.contains("tally (not registered in this graphctl)"), "{shown}");
    assert_eq!(graphctl(store, &["graph", "t"]).ok().stdout, tally::graph().mermaid());
    // Step 0 is a full snapshot: no graph needed.
    assert_eq!(json(store, &["state", "t", "--step", "0"])["state"]["n"], 0);
    graphctl(store, &["state", "t", "--step", "2"])
        .fails(6, "does not register: step 2 is stored as the deltas since step 0");
    graphctl(store, &["diff", "t", "0", "2"]).fails(6, "build a graphctl that registers it");
    graphctl(store, &["resume", "t"]).fails(6, "only its graph's nodes can resume it");
    graphctl(store, &["verify", "t"]).ok();
}

#[test]
fn failures_are_one_line_and_an_exit_code() {
    let f = runs();
    let store = &f.store();

    let missing = store.join("nowhere");
    graphctl(&missing, &["runs"]).fails(3, "the folder does not exist");
    assert!(!missing.exists(), "graphctl must not create a store");
    graphctl(f.dir.path(), &["runs"]).fails(3, "stores inside it:").fails(3, "/store");

    graphctl(store, &["show", "ordr-1"])
        .fails(3, "no run `ordr-1` in the store at")
        .fails(3, "did you mean `order-1`?");
    graphctl(store, &["diff", "order-1", "0", "7"]).fails(3, "no checkpoint at step 7");

    let held = SledStore::open(store).unwrap();
    graphctl(store, &["runs"]).fails(4, "is in use by another process");
    drop(held);
    graphctl(store, &["runs"]).ok();

    let built = [cfg!(feature = "postgres"), cfg!(feature = "mysql")];
    let urls = [("postgres://u:p@db/x", "postgres"), ("mysql://db/x", "mysql")];
    for (url, feature) in urls.into_iter().zip(built).filter(|(_, built)| !built).map(|(u, _)| u) {
        let built_without = format!("this graphctl was built without the `{feature}` feature");
        graphctl(Path::new(url), &["runs"]).fails(6, &built_without);
    }
    // Built with `sqlite` (the feature, or unified in by another package of a workspace build): a
    // missing database file is not created; built without it: says so.
    let sqlite = graphctl(Path::new("sqlite:///tmp/graphctl-no-such-store.db"), &["runs"]);
    if sqlite.code == 6 {
        sqlite.fails(6, "this graphctl was built without the `sqlite` feature");
    } else {
        sqlite.fails(3, "the SQLite database file does not exist");
        assert!(!Path::new("/tmp/graphctl-no-such-store.db").exists());
        let folder = format!("sqlite://{}", f.dir.path().display());
        graphctl(Path::new(&folder), &["runs"]).fails(3, "it is a folder, not a SQLite database file");
    }
    graphctl(Path::new("ftp://x"), &["runs"]).fails(2, "unknown store URL scheme `ftp://`");

    // A damaged file of the store that recovery needs (the commit log's segment, cut short): open
    // reports it, typed, and changes nothing.
    let mut segments: Vec<PathBuf> = std::fs::read_dir(store.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("wal-"))
        .collect();
    segments.sort();
    let segment = segments.pop().unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&segment, &bytes).unwrap();
    let name = format!("wal/{}", segment.file_name().unwrap().to_str().unwrap());
    graphctl(store, &["runs"]).fails(5, "stored data is damaged").fails(5, &name);
    assert_eq!(std::fs::read(&segment).unwrap(), bytes);

    let usage = graphctl(store, &["show"]);
    assert_eq!(usage.code, 2, "{usage:?}");
    let usage = graphctl(store, &["verify"]);
    assert_eq!(usage.code, 2, "{usage:?}");
    let help = graphctl(store, &["--help"]).ok().stdout;
    assert!(help.contains("Exit codes: 0 ok"), "{help}");
}

/// Not a check: fills the stores whose output docs/graphctl.md shows, in the folder `GRAPHCTL_DOCS_DIR`
/// names: `store/` ([`store_with_runs`]), `keyed/` ([`keyed_store`]) with its key in `key`, and the
/// provider's `ledger.txt` (`GRAPHCTL_DOCS_DIR=$PWD cargo test -p graphctl-examples --test graphctl --
/// --ignored docs_stores`).
#[test]
#[ignore = "fills the docs' example stores; run it by name"]
fn docs_stores() {
    let dir = std::env::var_os("GRAPHCTL_DOCS_DIR").expect("GRAPHCTL_DOCS_DIR names a folder");
    let dir = Path::new(&dir);
    store_with_runs(&dir.join("store"), &dir.join("ledger.txt"));
    keyed_store(&dir.join("keyed"), &dir.join("ledger.txt"));
    std::fs::write(dir.join("key"), KEY).unwrap();
}

/// Runs its closure when dropped (also when a test panics): drops a test database.
#[cfg(any(feature = "postgres", feature = "mysql"))]
struct Cleanup<F: Fn()>(F);

#[cfg(any(feature = "postgres", feature = "mysql"))]
impl<F: Fn()> Drop for Cleanup<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// `url` with its database (the path) replaced by `database`.
#[cfg(any(feature = "postgres", feature = "mysql"))]
fn with_database(url: &str, database: &str) -> String {
    let url = url.split('?').next().unwrap_or(url);
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let slash = url[scheme_end..].find('/').map_or(url.len(), |i| scheme_end + i);
    format!("{}/{database}", &url[..slash])
}

/// graphctl on a SQL store (`--store sqlite://…` / `postgres://…` / `mysql://…`): lists, shows,
/// reads the states of and verifies the runs an engine wrote there, through each of `urls` (every one
/// names the same database, created by the caller).
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
fn graphctl_reads_runs_written_to(urls: &[&str], store: std::sync::Arc<dyn graph_runtime::Store>) {
    let dir = tempfile::tempdir().unwrap();
    block_on(async {
        let orders = Engine::builder(checkout::graph()).shared_store(store).build();
        let ledger = dir.path().join("ledger.txt");
        assert!(orders.run("order-1", order("order-1", 3000, &ledger)).await.unwrap().is_completed());
    });
    for url in urls {
        let at = Path::new(url);
        let runs = json(at, &["runs"]);
        assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
        assert_eq!(runs["runs"][0]["run_id"], "order-1");
        assert!(graphctl(at, &["history", "order-1"]).ok().stdout.contains("charge"));
        assert!(graphctl(at, &["show", "order-1"]).ok().stdout.contains("completed"));
        let state = json(at, &["state", "order-1"]);
        assert_eq!(state["state"]["id"], "order-1", "{state}");
        assert!(state["state"]["receipt"].is_string(), "{state}");
        graphctl(at, &["verify", "--all"]).ok();
        graphctl(at, &["show", "nope"]).fails(3, "no run `nope`");
    }
}

/// A SQLite store read by `sqlite://<file>` and by a `.sqlite` file's path.
#[cfg(feature = "sqlite")]
#[test]
fn graphctl_opens_sqlite_files() {
    use graph_runtime::store::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.sqlite");
    let store = SqliteStore::open(&file).unwrap();
    let path = file.display().to_string();
    graphctl_reads_runs_written_to(&[&format!("sqlite://{path}"), &path], std::sync::Arc::new(store));
    // `verify --all` runs the store's `PRAGMA integrity_check` first.
    let all = json(&file, &["verify", "--all"]);
    assert_eq!(
        all["store"],
        json!({ "checked": true, "ok": true, "check": "PRAGMA integrity_check" }),
        "{all}"
    );
    assert!(
        graphctl(&file, &["verify", "--all"]).ok().stdout.ends_with("store: PRAGMA integrity_check: ok\n")
    );
    // An index whose entries no longer agree with its table (its definition changed under it): every
    // run still verifies, the file does not, exit 5.
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch(
            "PRAGMA writable_schema = ON;
             UPDATE sqlite_master SET sql = 'CREATE INDEX runs_by_status ON runs (run_id, status)'
             WHERE name = 'runs_by_status';",
        )
        .unwrap();
    let ran = graphctl(&file, &["verify", "--all"]);
    assert_eq!(ran.code, 5, "{ran:?}");
    assert!(ran.stdout.contains("1 run: 1 verifies, 0 do not\n"), "{ran:?}");
    assert!(
        ran.stdout.contains("store: stored data is damaged in")
            && ran.stdout.contains("PRAGMA integrity_check found the file inconsistent")
            && ran.stdout.contains("runs_by_status"),
        "{ran:?}"
    );
    let ran = graphctl(&file, &["--json", "verify", "--all"]);
    let all: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!((ran.code, all["store"]["ok"].clone()), (5, json!(false)), "{all}");
    // `--no-store-check` skips it (for a store too large to read whole now): the runs alone decide.
    let skipped = graphctl(&file, &["verify", "--all", "--no-store-check"]).ok().stdout;
    assert!(skipped.ends_with("store: not checked: skipped (--no-store-check)\n"), "{skipped}");
    graphctl(&file, &["verify", "order-1", "--no-store-check"]).fails(2, "--no-store-check goes with --all");
}

/// What no read of a SQLite store notices and `verify` does: a run left out of its status's list (an
/// index entry lost), and a checkpoint lost from the middle of a run's history. Each exits 5 naming
/// the run, with the whole-store check skipped (`--no-store-check`) as well as with it.
#[cfg(feature = "sqlite")]
#[test]
fn graphctl_verify_finds_what_no_read_notices() {
    use graph_runtime::store::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.sqlite");
    let store = SqliteStore::open(&file).unwrap();
    block_on(async {
        let orders = Engine::builder(checkout::graph()).store(store.clone()).build();
        let ledger = dir.path().join("ledger.txt");
        for id in ["order-1", "order-2"] {
            assert!(orders.run(id, order(id, 3000, &ledger)).await.unwrap().is_completed());
        }
    });
    drop(store);
    graphctl(&file, &["verify", "--all"]).ok();
    let listed =
        |file: &Path| json(file, &["runs", "--status", "completed"])["runs"].as_array().unwrap().len();
    assert_eq!(listed(&file), 2);

    // The index of runs by status rebuilt without `order-2`'s entry (defined as partial for the
    // rebuild, then as it was): the runs table still holds the run, completed.
    let sql =
        |statements: &str| rusqlite::Connection::open(&file).unwrap().execute_batch(statements).unwrap();
    let define = |index: &str| {
        sql(&format!(
            "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = '{index}' WHERE name = 'runs_by_status';"
        ))
    };
    let original: String = rusqlite::Connection::open(&file)
        .unwrap()
        .query_row("SELECT sql FROM sqlite_master WHERE name = 'runs_by_status'", [], |r| r.get(0))
        .unwrap();
    define(&format!("{original} WHERE run_id <> ''order-2''"));
    sql("REINDEX runs_by_status");
    define(&original);
    assert_eq!(listed(&file), 1, "`runs --status completed` leaves `order-2` out, without an error");
    for args in [&["verify", "--all", "--no-store-check"][..], &["verify", "--all"]] {
        let ran = graphctl(&file, args);
        assert_eq!(ran.code, 5, "{ran:?}");
        assert!(ran.stdout.contains("2 runs: 1 verifies, 1 does not\n"), "{ran:?}");
        assert!(
            ran.stdout.contains("order-2: stored data is damaged: run `order-2`: the store lists it among all runs, with status `completed`, but not among the runs of that status"),
            "{ran:?}"
        );
    }

    // A checkpoint lost from the middle of `order-1`'s history: no read notices (the run row and the
    // last checkpoint agree), the event log does.
    let raw = rusqlite::Connection::open(&file).unwrap();
    let steps: i64 =
        raw.query_row("SELECT COUNT(*) FROM checkpoints WHERE run_id = 'order-1'", [], |r| r.get(0)).unwrap();
    assert!(steps >= 3, "{steps} checkpoints: step 1 is between two others");
    raw.execute("DELETE FROM checkpoints WHERE run_id = 'order-1' AND step = 1", []).unwrap();
    drop(raw);
    graphctl(&file, &["history", "order-1"]).ok();
    graphctl(&file, &["verify", "order-1"]).fails(5, "the event log records the commit of step 1");
    let ran = graphctl(&file, &["verify", "--all", "--no-store-check"]);
    assert_eq!(ran.code, 5, "{ran:?}");
    assert!(ran.stdout.contains("2 runs: 0 verify, 2 do not\n"), "{ran:?}");
}

/// A SQLite store on a file system mounted read-only (as ext4 is after an error with
/// `errors=remount-ro`): the reading commands work (they open it read-only), a writing one fails with
/// one line that says why. Needs root to mount a tmpfs: without it prints `NOT RUN` and passes, unless
/// `GRAPH_FAULT_TESTS=require`.
#[cfg(feature = "sqlite")]
#[test]
fn graphctl_reads_a_sqlite_store_on_a_read_only_file_system() {
    use graph_runtime::store::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().to_string_lossy().into_owned();
    let mount = |args: &[&str]| Command::new("mount").args(args).status().is_ok_and(|s| s.success());
    if !mount(&["-t", "tmpfs", "-o", "size=16m", "tmpfs", &at]) {
        let why = "cannot mount a tmpfs (root is needed)";
        assert!(std::env::var("GRAPH_FAULT_TESTS").as_deref() != Ok("require"), "cannot run: {why}");
        println!("NOT RUN: {why}");
        return;
    }
    struct Unmount(String);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(at.clone());
    let file = dir.path().join("runs.sqlite");
    let store = SqliteStore::open(&file).unwrap();
    block_on(async {
        let orders = Engine::builder(checkout::graph()).store(store.clone()).build();
        let ledger = dir.path().join("ledger.txt");
        assert!(orders.run("order-1", order("order-1", 3000, &ledger)).await.unwrap().is_completed());
    });
    drop(store);
    assert!(mount(&["-o", "remount,ro", &at]), "remount read-only");
    let runs = json(&file, &["runs"]);
    assert_eq!(runs["runs"][0]["run_id"], "order-1", "{runs}");
    assert!(graphctl(&file, &["show", "order-1"]).ok().stdout.contains("completed"));
    graphctl(&file, &["verify", "--all"]).ok();
    graphctl(&file, &["prune", "order-1", "--keep", "1"]).fails(1, "Read-only file system");
}

/// Needs the local PostgreSQL (or GRAPH_TEST_POSTGRES_URL); a database of its own, dropped at the end.
#[cfg(feature = "postgres")]
#[test]
fn graphctl_opens_postgres_urls() {
    use graph_runtime::store::PostgresStore;
    let db = common::PostgresDatabase::create("graphctl_test");
    let url = &db.url;
    let store = block_on(PostgresStore::connect(url)).unwrap();
    graphctl_reads_runs_written_to(
        &[&url.replacen("postgres://", "postgresql://", 1)],
        std::sync::Arc::new(store),
    );
}

/// Needs the local MariaDB (or GRAPH_TEST_MYSQL_URL); a database of its own, dropped at the end.
#[cfg(feature = "mysql")]
#[test]
fn graphctl_opens_mysql_urls() {
    use graph_runtime::store::MySqlStore;
    use graph_runtime::store::server::sqlx::{self, Connection};
    let server =
        std::env::var("GRAPH_TEST_MYSQL_URL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into());
    let name = format!("graphctl_test_{}", std::process::id());
    let url = with_database(&server, &name);
    let admin = |sql: String| {
        let server = server.clone();
        block_on(async move {
            let mut c = sqlx::MySqlConnection::connect(&server)
                .await
                .unwrap_or_else(|e| panic!("cannot reach MySQL at {server}: {e}"));
            sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut c).await.unwrap();
        })
    };
    admin(format!("DROP DATABASE IF EXISTS {name}"));
    admin(format!("CREATE DATABASE {name}"));
    let _cleanup = Cleanup(|| admin(format!("DROP DATABASE IF EXISTS {name}")));
    let store = block_on(MySqlStore::connect(&url)).unwrap();
    graphctl_reads_runs_written_to(&[&url.replacen("mysql://", "mariadb://", 1)], std::sync::Arc::new(store));
}

/// A server that refuses the connection (a port where nothing listens): exit 7, the store unavailable
/// for now, with the server's address and the refusal in the one line.
#[cfg(any(feature = "postgres", feature = "mysql"))]
#[test]
fn an_unreachable_server_exits_7() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut urls = Vec::new();
    if cfg!(feature = "postgres") {
        urls.push(format!("postgres://postgres@127.0.0.1:{port}/test"));
    }
    if cfg!(feature = "mysql") {
        urls.push(format!("mysql://root@127.0.0.1:{port}/test"));
    }
    for url in urls {
        graphctl(Path::new(&url), &["runs"])
            .fails(7, "the store is unavailable")
            .fails(7, &format!("127.0.0.1:{port}"))
            .fails(7, "Connection refused");
    }
}

#[test]
fn parked_runs_show_when_they_are_due_and_send_event_fills_the_mailbox() {
    use graph_examples::escalation::{self, CONFIRMED, PAYOUT_DELAY, escalation_flow};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // Two days ago by the test's clock: the payout's sleep has ended by the wall clock graphctl reads.
    let now = graph_runtime::Clock::now_ms(&graph_runtime::SystemClock);
    let clock = graph_runtime::TestClock::at_ms(now - 48 * 3600 * 1000);
    block_on(async {
        let engine = Engine::builder(escalation_flow::graph())
            .store(SledStore::open(&store).unwrap())
            .clock(clock.clone())
            .build();
        engine.run("asks", escalation::sample_request()).await.unwrap();
        engine.run("sleeps", escalation::sample_request()).await.unwrap();
        engine.run("confirms", escalation::sample_request()).await.unwrap();
        for run in ["sleeps", "confirms"] {
            assert!(matches!(
                engine.resume_with_input(run, &true).await.unwrap().status,
                RunStatus::Waiting(_)
            ));
        }
        clock.advance(PAYOUT_DELAY);
        // `sleeps` is left asleep (it was not woken); `confirms` now waits for the bank.
        let out = engine.wake("confirms").await.unwrap();
        assert_eq!(out.interrupts()[0].topic.as_deref(), Some(CONFIRMED));
        engine.schedule("nightly", "0 2 * * *", &escalation::sample_request()).await.unwrap();
        engine.schedule("paused", "@every 15m", &escalation::sample_request()).await.unwrap();
        engine.pause_schedule("paused").await.unwrap();
    });
    let schedules = graphctl(&store, &["schedules"]).ok().stdout;
    let lines: Vec<&str> = schedules.lines().collect();
    assert!(lines[0].starts_with("SCHEDULE"), "{schedules}");
    assert!(
        lines[1].starts_with("nightly")
            && lines[1].contains("0 2 * * *")
            && lines[1].contains("T02:00:00.000Z"),
        "{schedules}"
    );
    assert!(
        lines[1].contains("skip") && lines[1].contains("active") && lines[1].ends_with("escalation"),
        "{schedules}"
    );
    assert!(lines[2].starts_with("paused") && lines[2].contains("paused"), "{schedules}");
    let listed = json(&store, &["schedules"]);
    assert_eq!(listed["schedules"][1]["paused"], true);
    assert_eq!(listed["schedules"][0]["graph"], "escalation");
    let runs = graphctl(&store, &["runs", "--status", "waiting"]).ok().stdout;
    assert!(runs.contains("sleeps") && runs.contains("confirms") && !runs.contains("asks"), "{runs}");
    assert!(runs.contains("waiting (asleep until "), "{runs}");
    assert!(runs.contains("waiting (for bank.confirmed, due "), "{runs}");
    let asks = graphctl(&store, &["show", "asks"]).ok().stdout;
    assert!(asks.contains("interrupted (1 question, due ") && asks.contains(", deadline "), "{asks}");
    let sleeping = graphctl(&store, &["show", "sleeps"]).ok().stdout;
    assert!(sleeping.contains("sleeps: node `payout`") && sleeping.contains(", until "), "{sleeping}");

    // An event for a topic the run does not wait for yet is kept; the one `confirms` waits for makes
    // it due now; a second send with the same key is the first.
    let kept = graphctl(&store, &["send-event", "sleeps", CONFIRMED, "\"BNK-1\""]).ok().stdout;
    assert!(
        kept.contains("event 0 of topic `bank.confirmed` (kept until the run waits for the topic)"),
        "{kept}"
    );
    let due = json(&store, &["send-event", "confirms", CONFIRMED, "\"BNK-2\"", "--key", "tx-2"]);
    assert_eq!(
        (due["seq"].as_u64(), due["due"].as_bool(), due["duplicate"].as_bool()),
        (Some(0), Some(true), Some(false))
    );
    let again = json(&store, &["send-event", "confirms", CONFIRMED, "\"other\"", "--key", "tx-2"]);
    assert_eq!(again["duplicate"], true);
    let mailbox = graphctl(&store, &["mailbox", "confirms"]).ok().stdout;
    assert!(
        mailbox.contains("bank.confirmed") && mailbox.contains("\"BNK-2\"") && mailbox.contains("waiting"),
        "{mailbox}"
    );
    assert!(!mailbox.contains("other"), "{mailbox}");
    graphctl(&store, &["send-event", "nobody", "t", "1"]).fails(3, "no run `nobody`");
    graphctl(&store, &["send-event", "confirms", "t", "not json"]).fails(2, "the payload is not JSON");

    // The event is delivered by whoever wakes the run.
    block_on(async {
        let engine =
            Engine::builder(escalation_flow::graph()).store(SledStore::open(&store).unwrap()).build();
        let out = engine.wake("confirms").await.unwrap();
        assert!(out.is_completed(), "{:?}", out.status);
        assert_eq!(out.state.bank_reference.as_deref(), Some("BNK-2"));
    });
    let mailbox = json(&store, &["mailbox", "confirms"]);
    assert!(mailbox["messages"][0]["state"]["Claimed"].is_object(), "{mailbox}");
}

#[test]
fn history_shows_a_subgraphs_steps_under_the_step_that_ran_it() {
    use graph_examples::composition::{Article, writer};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    block_on(async {
        let engine = Engine::builder(writer::graph()).store(SledStore::open(&store).unwrap()).build();
        engine.run("a", Article { subject: "sagas".into(), ..Article::default() }).await.unwrap();
        engine.resume_with_input("a", &0).await.unwrap();
    });
    let table = graphctl(&store, &["history", "a"]).ok().stdout;
    let lines: Vec<&str> = table.lines().collect();
    // Steps 0..=3 of the writer, and the subgraph's 0..=2 after step 2 (the commit of the step that ran it).
    assert_eq!(lines.len(), 1 + 4 + 1 + 3, "{table}");
    assert!(lines[3].starts_with("2 ") && lines[3].contains("research"), "{table}");
    assert!(lines[4].starts_with("  └ research") && lines[4].contains("subgraph"), "{table}");
    assert!(lines[4].contains("completed") && lines[4].contains("a/research.1."), "{table}");
    assert!(lines[5].starts_with("    0 ") && lines[5].contains("search"), "{table}");
    assert!(
        lines[7].starts_with("    2 ") && lines[7].contains("choose") && lines[7].contains("END"),
        "{table}"
    );
    assert!(lines[8].starts_with("3 ") && lines[8].contains("draft"), "{table}");

    let history = json(&store, &["history", "a"]);
    let nested = &history["history"][2]["nested"][0];
    assert_eq!(nested["kind"], "subgraph");
    assert_eq!(nested["node"], "research");
    assert_eq!(nested["history"].as_array().unwrap().len(), 3);
    // The subgraph's run is a run like any: its state reads back with the registered subgraph.
    let child = nested["run_id"].as_str().unwrap();
    let state = json(&store, &["state", child]);
    assert_eq!(state["state"]["chosen"], "handbook on sagas");
}
