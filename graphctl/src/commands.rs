//! The commands: each reads (or, for `prune` and `resume`, writes) through the `Store` trait and the
//! store-level audit functions, and returns its text and its JSON; `execute` prints one of them.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use super::args::{Command, StatusArg};
use super::diff::{Change, diff};
use super::exit::{Exit, Failure};
use super::registry::{Registered, Registry};
use super::render::{self, Table};
use graph_runtime::Clock as _;
use graph_runtime::engine::{run_history, verify_run};
use graph_runtime::error::Error;
use graph_runtime::events::{ChainKey, Event, EventType};
use graph_runtime::graph::GraphShape;
use graph_runtime::keys::{hex, sha256_parts};
use graph_runtime::store::mailbox::MessageState;
use graph_runtime::store::record::StateRepr;
use graph_runtime::store::schedule::Missed;
use graph_runtime::store::{Integrity, PauseReason, RunFilter, RunInfo, RunStatus, Store};

/// An open store and what the command line asked for.
pub(crate) struct Session<'a> {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) graphs: &'a Registry,
    pub(crate) json: bool,
    /// `--store` as given.
    pub(crate) spec: &'a str,
}

/// What a command prints, and how graphctl exits after printing it.
pub(crate) struct Output {
    pub(crate) text: String,
    pub(crate) json: Value,
    pub(crate) exit: Exit,
}

impl Output {
    fn ok(text: String, json: Value) -> Self {
        Output { text, json, exit: Exit::Ok }
    }
}

type Outcome = Result<Output, Failure>;

impl Session<'_> {
    /// Runs `command`, prints its output (text, or JSON with `--json`) and returns the exit code.
    pub(crate) async fn execute(&self, command: Command) -> Result<Exit, Failure> {
        let out = self.output(command).await?;
        let text = if self.json {
            let mut s = serde_json::to_string_pretty(&out.json).unwrap_or_default();
            s.push('\n');
            s
        } else {
            out.text
        };
        // A closed pipe (`graphctl events r | head`) is not an error worth a message.
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
        Ok(out.exit)
    }

    /// Runs `command` and returns what it would print (`graphctl serve` answers with its JSON).
    pub(crate) async fn output(&self, command: Command) -> Result<Output, Failure> {
        let out = match command {
            Command::Runs { status, limit, prefix, after } => {
                let page = Page { prefix, after, by_id: false };
                self.runs(status, limit, page).await?
            }
            Command::Show { run } => self.show(&run).await?,
            Command::History { run } => self.history(&run).await?,
            Command::State { run, step, compact } => self.state(&run, step, compact).await?,
            Command::Diff { run, from, to } => self.diff(&run, from, to).await?,
            Command::Graph { run, registered, dot } => {
                self.graph(run.as_deref(), registered.as_deref(), dot).await?
            }
            Command::Events { run, from, limit } => self.events(&run, from, limit).await?,
            Command::Verify { run, key_file, no_store_check, .. } => {
                let key = key_file.as_deref().map(read_key).transpose()?;
                match run {
                    Some(_) if no_store_check => {
                        return Err(Failure::new(
                            Exit::Usage,
                            "--no-store-check goes with --all (one run's check never reads the whole store)",
                        ));
                    }
                    Some(run) => self.verify(&run, key).await?,
                    None => self.verify_all(key, !no_store_check).await?,
                }
            }
            Command::Effects { run } => self.effects(&run).await?,
            Command::Outbox { run } => self.outbox(&run).await?,
            Command::Prune { run, keep, .. } => {
                let keep = usize::try_from(keep).unwrap_or(usize::MAX);
                match run {
                    Some(run) => self.prune(&run, keep).await?,
                    None => self.prune_all(keep).await?,
                }
            }
            Command::SendEvent { run, topic, payload, key } => {
                self.send_event(&run, &topic, &payload, key.as_deref()).await?
            }
            Command::Mailbox { run } => self.mailbox(&run).await?,
            Command::Schedules => self.schedules().await?,
            Command::Backup { to } => self.backup(&to).await?,
            Command::Rebuild => self.rebuild().await?,
            Command::Salvage { to, key_file } => {
                let key = key_file.as_deref().map(read_key).transpose()?;
                self.salvage(&to, key).await?
            }
            Command::Restore { from, key_file } => {
                let key = key_file.as_deref().map(read_key).transpose()?;
                self.restore(&from, key).await?
            }
            Command::Migrate { run, status, to, dry_run, .. } => {
                self.migrate(run.as_deref(), status, to, dry_run).await?
            }
            Command::Replay { run, status, .. } => self.replay(run.as_deref(), status).await?,
            Command::Resume { run, key_file } => {
                let key = key_file.as_deref().map(read_key).transpose()?;
                self.resume(&run, key).await?
            }
            Command::Answer { run, input, interrupt, key_file } => {
                let key = key_file.as_deref().map(read_key).transpose()?;
                self.answer(&run, &input, interrupt.as_deref(), key).await?
            }
            Command::Cancel { run, key_file } => {
                let key = key_file.as_deref().map(read_key).transpose()?;
                let info = self.run_info(&run).await?;
                let graph = self.registered(&info, "only its graph's engine can cancel it").await?;
                let status = graph.cancel(self.store.clone(), &run, key).await?;
                let mut j = render::status_json(&status);
                j["run_id"] = json!(run);
                Output::ok(format!("run {run}: {}\n", render::status_short(&status)), j)
            }
            Command::Fork { run, step, new_run } => {
                let info = self.run_info(&run).await?;
                let graph = self.registered(&info, "only its graph's nodes can run the fork").await?;
                let out = graph.fork(self.store.clone(), &run, step, &new_run, None).await?;
                self.resumed(&new_run, out, format!("forked {run} at step {step} as {new_run}"))?
            }
            Command::ResolveEffect { run, key, completed, retry, fail } => {
                use graph_runtime::store::Resolution;
                let resolution = match (completed, retry, fail) {
                    (Some(json), _, _) => {
                        Resolution::Completed(serde_json::from_str(&json).map_err(|e| {
                            Failure::new(
                                Exit::Usage,
                                format!("--completed is not JSON ({e}); quote a text: '\"ok\"'"),
                            )
                        })?)
                    }
                    (None, true, _) => Resolution::Retry,
                    (None, false, Some(message)) => Resolution::Fail(message),
                    (None, false, None) => {
                        return Err(Failure::new(
                            Exit::Usage,
                            "say one of --completed JSON, --retry, --fail MESSAGE",
                        ));
                    }
                };
                let info = self.run_info(&run).await?;
                let graph = self.registered(&info, "only its graph's engine can resolve its effects").await?;
                graph.resolve_effect(self.store.clone(), &run, &key, resolution).await?;
                let text = format!("run {run}: effect {key} resolved; `resume` continues the run\n");
                Output::ok(text, json!({ "run_id": run, "effect": key, "resolved": true }))
            }
            Command::HandBack { run } => {
                let info = self.run_info(&run).await?;
                let graph = self.registered(&info, "only its graph's engine can hand it back").await?;
                let out = graph.hand_back(self.store.clone(), &run, None).await?;
                self.resumed(&run, out, format!("handed {run} back to the pool"))?
            }
            Command::Serve { .. } => {
                return Err(Failure::new(Exit::Usage, "`serve` runs a server; it has no output of its own"));
            }
        };
        Ok(out)
    }

    // -----------------------------------------------------------------------------------------------
    // Reading runs
    // -----------------------------------------------------------------------------------------------

    /// The runs of `status`: every one, most recently committed first, then `limit` of them; or, with
    /// a prefix, a cursor or `page.by_id`, a page of `limit` in run-id order read from the store's
    /// index alone (a store of 100,000 runs lists a page as fast as one of ten).
    pub(crate) async fn runs(&self, status: Option<StatusArg>, limit: Option<usize>, page: Page) -> Outcome {
        let mut filter = match status {
            Some(s) => RunFilter::all().status(status_of(s)),
            None => RunFilter::all(),
        };
        let paged = page.by_id || page.prefix.is_some() || page.after.is_some();
        if let Some(p) = page.prefix {
            filter = filter.prefix(p);
        }
        if let Some(a) = page.after {
            filter = filter.after(a);
        }
        if paged && let Some(n) = limit {
            filter = filter.limit(n);
        }
        let mut rows = Vec::new();
        for info in self.store.list_runs(&filter).await? {
            // A run whose latest checkpoint is damaged is still listed (`show` or `verify` says more).
            let latest = self.store.latest(&info.run_id).await.ok().flatten();
            let first = self.first_event(&info.run_id).await;
            let graph = first.as_ref().and_then(graph_name);
            let row = Row {
                updated: latest.as_ref().map(|c| c.timestamp_ms),
                label: latest.and_then(|c| c.label),
                started: first.map(|e| e.timestamp_ms),
                graph,
            };
            rows.push((info, row));
        }
        // A page with as many runs as asked for has a next one (perhaps empty), after its last id.
        let next = match (paged, limit, rows.last()) {
            (true, Some(n), Some((last, _))) if rows.len() >= n => Some(last.run_id.clone()),
            _ => None,
        };
        if !paged {
            // Most recently committed first; RunInfo has no time, its latest checkpoint has.
            rows.sort_by(|a, b| b.1.updated.cmp(&a.1.updated).then_with(|| a.0.run_id.cmp(&b.0.run_id)));
            rows.truncate(limit.unwrap_or(usize::MAX));
        }
        let mut table = Table::new(&["RUN", "STATUS", "STEP", "UPDATED", "GRAPH", "VERSION"]);
        let mut list = Vec::new();
        for (info, Row { updated, label, started, graph }) in &rows {
            let registered = self.graphs.get(&info.graph_fingerprint).is_some();
            table.row(vec![
                info.run_id.clone(),
                render::status_short(&info.status),
                info.latest_step.to_string(),
                updated.map_or_else(|| "unreadable".into(), render::time),
                graph.clone().unwrap_or_else(|| "?".into()),
                graph_runtime::graph_version(&info.graph_fingerprint).to_string(),
            ]);
            let mut row = render::status_json(&info.status);
            row["run_id"] = json!(info.run_id);
            row["latest_step"] = json!(info.latest_step);
            row["updated_ms"] = json!(updated);
            row["graph"] = json!(graph);
            row["label"] = json!(label);
            row["started_ms"] = json!(started);
            row["fingerprint"] = json!(info.graph_fingerprint);
            row["version"] = json!(graph_runtime::graph_version(&info.graph_fingerprint));
            row["registered"] = json!(registered);
            list.push(row);
        }
        let text = if rows.is_empty() {
            let what = status.map(|s| format!("{} ", status_of(s).as_str())).unwrap_or_default();
            format!("no {what}runs in the store at {}\n", self.shown_store())
        } else {
            let mut text = table.render();
            if let Some(next) = &next {
                text.push_str(&format!("more: the same command with --after {next}\n"));
            }
            text
        };
        let mut out = json!({ "runs": list });
        if paged {
            out["next"] = json!(next);
        }
        Ok(Output::ok(text, out))
    }

    async fn show(&self, run: &str) -> Outcome {
        let info = self.run_info(run).await?;
        let history = self.store.history(run).await?;
        let first = self.first_event(run).await;
        let registered = self.graphs.get(&info.graph_fingerprint).is_some();
        let graph = first.as_ref().and_then(graph_name);
        let forked = first.as_ref().filter(|e| e.event_type == EventType::Forked).map(|e| {
            let p = e.payload.value();
            (
                p.get("parent").and_then(Value::as_str).unwrap_or("?").to_owned(),
                p.get("parent_step").and_then(Value::as_u64),
            )
        });
        let events = info.event_head.as_ref().map_or(0, |h| h.seq + 1);
        let (first_cp, last_cp) = (history.first(), history.last());
        let label = first_cp.and_then(|m| m.label.clone());

        let mut t = String::new();
        let mut line = |k: &str, v: String| t.push_str(&format!("{k:<14}{v}\n"));
        line("run", info.run_id.clone());
        line("status", render::status_short(&info.status));
        match &info.status {
            RunStatus::Interrupted(list) | RunStatus::Waiting(list) => {
                list.iter().for_each(|i| line("", render::interrupt_line(i)))
            }
            RunStatus::Failed(error) => line("", format!("error: {error}")),
            RunStatus::Paused(PauseReason::NeedsConfirmation { key, name }) => line(
                "",
                format!(
                    "effect `{name}` (key {key}) started before a crash; say what happened (`Engine::resolve_effect`), then resume"
                ),
            ),
            _ => {}
        }
        let reg = if registered { "registered in this graphctl" } else { "not registered in this graphctl" };
        line("graph", format!("{} ({reg})", graph.clone().unwrap_or_else(|| "?".into())));
        line("fingerprint", info.graph_fingerprint.clone());
        line("version", graph_runtime::graph_version(&info.graph_fingerprint).to_string());
        if let Some((parent, step)) = &forked {
            line(
                "forked from",
                format!("run {parent} at step {}", step.map_or("?".into(), |s| s.to_string())),
            );
        }
        if let Some(label) = &label {
            line("label", label.clone());
        }
        let stored = match (first_cp, last_cp) {
            (Some(a), Some(b)) if a.step == b.step => format!("; 1 checkpoint stored, step {}", a.step),
            (Some(a), Some(b)) => {
                format!("; {} checkpoints stored, steps {}–{}", history.len(), a.step, b.step)
            }
            _ => "; no checkpoint stored".into(),
        };
        line("steps", format!("latest {}{stored}", info.latest_step));
        if let (Some(a), Some(b)) = (first_cp, last_cp) {
            line("first commit", render::time(a.timestamp_ms));
            line("last commit", render::time(b.timestamp_ms));
        }
        let head = info
            .event_head
            .as_ref()
            .map(|h| format!(", head seq {} hash {}", h.seq, render::short(&h.hash, 12)));
        line("events", format!("{events}{} (`graphctl verify {run}` checks them)", head.unwrap_or_default()));

        let mut j = render::status_json(&info.status);
        j["run_id"] = json!(info.run_id);
        j["latest_step"] = json!(info.latest_step);
        // The run row's version (each commit and status change moves it); `version` is the graph's.
        j["row_version"] = json!(info.version);
        j["graph"] = json!(graph);
        j["fingerprint"] = json!(info.graph_fingerprint);
        j["version"] = json!(graph_runtime::graph_version(&info.graph_fingerprint));
        j["registered"] = json!(registered);
        j["forked_from"] = forked.map_or(Value::Null, |(run, step)| json!({ "run_id": run, "step": step }));
        j["label"] = json!(label);
        j["checkpoints"] = json!(history.len());
        j["first_step"] = json!(first_cp.map(|m| m.step));
        j["first_commit_ms"] = json!(first_cp.map(|m| m.timestamp_ms));
        j["last_commit_ms"] = json!(last_cp.map(|m| m.timestamp_ms));
        j["events"] = json!(events);
        j["event_head"] = json!(info.event_head);
        Ok(Output::ok(t, j))
    }

    async fn history(&self, run: &str) -> Outcome {
        self.run_info(run).await?;
        let runs: Vec<String> =
            self.store.list_runs(&RunFilter::all()).await?.into_iter().map(|i| i.run_id).collect();
        let mut table = Table::new(&["STEP", "TIME", "LABEL", "RAN", "NEXT", "STATE HASH"]);
        let list = self.history_rows(run, &runs, "", &mut table).await?;
        Ok(Output::ok(table.render(), json!({ "run_id": run, "history": list })))
    }

    /// The history of `run` as rows of `table` (indented by `indent`) and as JSON; the steps of its
    /// nested runs (subgraphs, child runs: ids under `{run}/`) follow the parent step that committed them.
    fn history_rows<'a>(
        &'a self,
        run: &'a str,
        runs: &'a [String],
        indent: &'a str,
        table: &'a mut Table,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<Value>, Failure>> + Send + 'a>> {
        Box::pin(async move {
            let entries = run_history(&*self.store, run).await?;
            let nested = nested_runs(run, runs);
            let mut list = Vec::new();
            for e in &entries {
                table.row(vec![
                    format!("{indent}{}", e.step),
                    render::time(e.timestamp_ms),
                    e.label.clone().unwrap_or_else(|| "-".into()),
                    e.ran.as_deref().map_or_else(|| "-".into(), render::names),
                    if e.next.is_empty() { "END".into() } else { render::names(&e.next) },
                    render::short(&e.state_hash, 12).to_owned(),
                ]);
                let mut inner = Vec::new();
                // A nested run started in step `s` (its parent item's step) is committed with step s + 1.
                for n in nested.iter().filter(|n| n.step + 1 == e.step) {
                    // The nested run's own id is last, where a long cell widens no other column.
                    table.row(vec![
                        format!("{indent}  └ {}", n.node),
                        String::new(),
                        if n.spawned { "child run" } else { "subgraph" }.into(),
                        n.status(&*self.store).await,
                        String::new(),
                        n.run_id.clone(),
                    ]);
                    let deeper = format!("{indent}    ");
                    let history = self.history_rows(&n.run_id, runs, &deeper, table).await?;
                    inner.push(json!({
                        "run_id": n.run_id,
                        "kind": if n.spawned { "child" } else { "subgraph" },
                        "node": n.node,
                        "history": history,
                    }));
                }
                let mut row = json!({
                    "step": e.step,
                    "timestamp_ms": e.timestamp_ms,
                    "label": e.label,
                    "ran": e.ran,
                    "next": e.next,
                    "state_hash": e.state_hash,
                });
                if !inner.is_empty() {
                    row["nested"] = json!(inner);
                }
                list.push(row);
            }
            Ok(list)
        })
    }

    async fn state(&self, run: &str, step: Option<u64>, compact: bool) -> Outcome {
        let info = self.run_info(run).await?;
        let step = step.unwrap_or(info.latest_step);
        let state = self.state_value(&info, step).await?;
        let mut text =
            if compact { serde_json::to_string(&state) } else { serde_json::to_string_pretty(&state) }
                .unwrap_or_default();
        text.push('\n');
        Ok(Output::ok(text, json!({ "run_id": run, "step": step, "state": state })))
    }

    async fn diff(&self, run: &str, from: u64, to: u64) -> Outcome {
        let info = self.run_info(run).await?;
        let old = self.state_value(&info, from).await?;
        let new = self.state_value(&info, to).await?;
        let changes = diff(&old, &new);
        let mut text = match changes.len() {
            0 => format!("run {run}: no change from step {from} to step {to}\n"),
            n => format!(
                "run {run}: {n} change{} from step {from} to step {to}\n",
                if n == 1 { "" } else { "s" }
            ),
        };
        let mut table = Table::new(&["", "PATH", "VALUE"]);
        for c in &changes {
            let (op, value) = match c {
                Change::Added { new, .. } => ("+", new.to_string()),
                Change::Removed { old, .. } => ("-", old.to_string()),
                Change::Changed { old, new, .. } => ("~", format!("{old} → {new}")),
            };
            table.row(vec![op.into(), c.path().into(), value]);
        }
        if !changes.is_empty() {
            // The header row of this table says nothing the lines do not: leave it out.
            text.extend(table.render().lines().skip(1).map(|l| format!("  {l}\n")));
        }
        let list: Vec<Value> = changes.iter().map(Change::to_json).collect();
        Ok(Output::ok(text, json!({ "run_id": run, "from": from, "to": to, "changes": list })))
    }

    async fn graph(&self, run: Option<&str>, registered: Option<&str>, dot: bool) -> Outcome {
        let shape = match (run, registered) {
            (Some(run), _) => self.run_shape(run).await?,
            (None, Some(name)) => self.graphs.by_name(name).map(|g| g.shape()).ok_or_else(|| {
                let names: Vec<&str> = self.graphs.names().collect();
                let known = if names.is_empty() {
                    "this graphctl registers none".to_owned()
                } else {
                    format!("registered: {}", graph_core::suggest::list(names.iter().copied()))
                };
                let hint = graph_core::suggest::did_you_mean(name, names.iter().copied());
                Failure::new(
                    Exit::NotFound,
                    format!("no graph named `{name}` is registered in this graphctl ({known}){hint}"),
                )
            })?,
            (None, None) => {
                return Err(Failure::new(Exit::Usage, "`graph` needs a run id or `--registered NAME`"));
            }
        };
        let text = if dot { shape.dot() } else { shape.mermaid() };
        let mut j = json!(shape);
        j[if dot { "dot" } else { "mermaid" }] = json!(text);
        Ok(Output::ok(text, j))
    }

    /// The shape the run's first event recorded, or its registered graph's.
    pub(crate) async fn run_shape(&self, run: &str) -> Result<GraphShape, Failure> {
        let info = self.run_info(run).await?;
        let recorded = self.first_event(run).await.and_then(|e| e.payload.get("shape"));
        if let Some(shape) = recorded.and_then(|s| serde_json::from_value::<GraphShape>(s).ok()) {
            return Ok(shape);
        }
        match self.graphs.get(&info.graph_fingerprint) {
            Some(g) => Ok(g.shape()),
            None => Err(Failure::new(
                Exit::Unsupported,
                format!(
                    "run `{run}` has no recorded graph shape (it was written before runs recorded one, or \
                     its log is damaged), and this graphctl does not register its graph (fingerprint {})",
                    info.graph_fingerprint
                ),
            )),
        }
    }

    async fn events(&self, run: &str, from: u64, limit: usize) -> Outcome {
        self.run_info(run).await?;
        let mut events = self.store.events(run, from, limit.saturating_add(1)).await?;
        let more = events.len() > limit;
        events.truncate(limit);
        let mut table = Table::new(&["SEQ", "TIME", "TYPE", "SUMMARY"]);
        for e in &events {
            table.row(vec![
                e.seq.to_string(),
                render::time(e.timestamp_ms),
                render::event_type(e.event_type),
                render::event_summary(e),
            ]);
        }
        let next = more.then(|| events.last().map_or(from, |e| e.seq + 1));
        let mut text = if events.is_empty() {
            format!("no events of run {run} from seq {from}\n")
        } else {
            table.render()
        };
        if let Some(next) = next {
            text.push_str(&format!("… more: --from {next}\n"));
        }
        Ok(Output::ok(text, json!({ "run_id": run, "events": events, "next": next })))
    }

    async fn effects(&self, run: &str) -> Outcome {
        self.run_info(run).await?;
        let records = self.store.effects(run).await?;
        let mut table = Table::new(&["STEP", "NODE", "CALL", "NAME", "CLASS", "KEY", "STATE"]);
        for r in &records {
            table.row(vec![
                r.step.to_string(),
                r.node.clone(),
                r.call_index.to_string(),
                r.name.clone(),
                render::class_name(r.class).into(),
                r.key.clone(),
                render::effect_state(r),
            ]);
        }
        let text =
            if records.is_empty() { format!("run {run} journaled no effect\n") } else { table.render() };
        Ok(Output::ok(text, json!({ "run_id": run, "effects": records })))
    }

    /// The rows the run's commits put in the outbox, from its stored checkpoints (a pruned checkpoint's
    /// rows are no longer listed), each `delivered` once the store's outbox no longer holds it.
    async fn outbox(&self, run: &str) -> Outcome {
        let info = self.run_info(run).await?;
        let waiting: std::collections::HashSet<String> = self
            .store
            .outbox(OUTBOX_SCAN)
            .await?
            .into_iter()
            .filter(|r| r.run_id == run)
            .map(|r| r.key)
            .collect();
        let mut table = Table::new(&["STEP", "TOPIC", "KEY", "DELIVERED", "PAYLOAD"]);
        let mut rows = Vec::new();
        for cp in self.store.checkpoints(run, 0, info.latest_step).await? {
            for row in cp.outbox {
                let delivered = !waiting.contains(&row.key);
                table.row(vec![
                    row.step.to_string(),
                    row.topic.clone(),
                    row.key.clone(),
                    if delivered { "yes".into() } else { "no".into() },
                    row.payload.to_string(),
                ]);
                rows.push(json!({
                    "step": row.step, "topic": row.topic, "key": row.key, "payload": row.payload,
                    "delivered": delivered,
                }));
            }
        }
        let text = if rows.is_empty() { format!("run {run} emitted nothing\n") } else { table.render() };
        Ok(Output::ok(text, json!({ "run_id": run, "outbox": rows })))
    }

    // -----------------------------------------------------------------------------------------------
    // Verifying
    // -----------------------------------------------------------------------------------------------

    async fn verify(&self, run: &str, key: Option<ChainKey>) -> Outcome {
        self.run_info(run).await?;
        let report =
            verify_run(&*self.store, run, key.as_ref()).await.map_err(|e| broken(e, key.is_none()))?;
        let head =
            report.head.as_ref().map(|h| format!(", head seq {} hash {}", h.seq, render::short(&h.hash, 12)));
        let text = format!(
            "run {run}: the event log verifies: {} events{}; {} checkpoints match their commit events\n",
            report.events,
            head.unwrap_or_default(),
            report.checkpoints_matched
        );
        let j = json!({
            "run_id": run,
            "ok": true,
            "events": report.events,
            "head": report.head,
            "checkpoints_matched": report.checkpoints_matched,
        });
        Ok(Output::ok(text, j))
    }

    async fn verify_all(&self, key: Option<ChainKey>, store_check: bool) -> Outcome {
        // The store's whole-store check first (SQLite: `PRAGMA integrity_check`): a damaged index can
        // hide a run from the list below, which only this finds.
        let integrity = if store_check {
            self.store.check_integrity().await
        } else {
            Ok(Integrity::NotChecked { why: "skipped (--no-store-check)" })
        };
        let (mut exit, line, check) = match integrity {
            Ok(Integrity::Sound { check }) => (
                Exit::Ok,
                format!("store: {check}: ok\n"),
                json!({ "checked": true, "ok": true, "check": check }),
            ),
            Ok(Integrity::NotChecked { why }) => {
                (Exit::Ok, format!("store: not checked: {why}\n"), json!({ "checked": false, "why": why }))
            }
            // Damage in bytes the store did not need: reported, and the runs are checked as usual.
            Ok(Integrity::Findings { check, findings }) => {
                let mut text =
                    format!("store: {check}: ok, with {} finding(s) in bytes not needed:\n", findings.len());
                for f in &findings {
                    text.push_str(&format!("  warning: {f}\n"));
                }
                (Exit::Ok, text, json!({ "checked": true, "ok": true, "check": check, "findings": findings }))
            }
            Ok(other) => {
                let what = format!("{other:?}");
                (Exit::Ok, format!("store: {what}\n"), json!({ "checked": false, "why": what }))
            }
            Err(e) => {
                let f = Failure::from(e);
                let j = json!({ "checked": true, "ok": false, "error": f.message });
                (f.exit, format!("store: {}\n", f.message), j)
            }
        };
        let runs = self.store.list_runs(&RunFilter::all()).await?;
        let bar = progress(runs.len(), "verifying");
        let mut table = Table::new(&["RUN", "RESULT", "EVENTS", "MATCHED"]);
        let (mut list, mut broken_runs) = (Vec::new(), 0);
        let mut by_status = ByStatus::default();
        for info in &runs {
            bar.set_message(info.run_id.clone());
            let run = &info.run_id;
            let verified: graph_runtime::error::Result<_> = async {
                let report = verify_run(&*self.store, run, key.as_ref()).await?;
                match by_status.unlisted(&*self.store, info).await? {
                    Some(status) => Err(unlisted(run, status).into()),
                    None => Ok(report),
                }
            }
            .await;
            match verified {
                Ok(r) => {
                    table.row(vec![
                        run.clone(),
                        "ok".into(),
                        r.events.to_string(),
                        r.checkpoints_matched.to_string(),
                    ]);
                    list.push(json!({ "run_id": run, "ok": true, "events": r.events, "head": r.head, "checkpoints_matched": r.checkpoints_matched }));
                }
                Err(e) => {
                    let seq = match &e {
                        Error::ExecutionCorrupted { seq, .. } => Some(*seq),
                        _ => None,
                    };
                    let f = broken(e, key.is_none());
                    broken_runs += 1;
                    // Damage outranks any other failure in the exit code.
                    if exit != Exit::Corrupted {
                        exit = f.exit;
                    }
                    let result = seq.map_or_else(|| "error".to_owned(), |s| format!("broken at event {s}"));
                    table.row(vec![run.clone(), result, "-".into(), "-".into()]);
                    list.push(json!({ "run_id": run, "ok": false, "seq": seq, "error": f.message }));
                }
            }
            bar.inc(1);
        }
        bar.finish_and_clear();
        let mut text = table.render();
        let n = runs.len();
        let good = n - broken_runs;
        text.push_str(&format!(
            "{n} run{}: {good} verif{}, {broken_runs} do{} not\n",
            plural(n),
            if good == 1 { "ies" } else { "y" },
            if broken_runs == 1 { "es" } else { "" }
        ));
        for item in list.iter().filter(|i| i["ok"] == false) {
            text.push_str(&format!(
                "  {}: {}\n",
                item["run_id"].as_str().unwrap_or("?"),
                item["error"].as_str().unwrap_or("?")
            ));
        }
        text.push_str(&line);
        let j = json!({ "runs": list, "verified": runs.len() - broken_runs, "broken": broken_runs, "store": check });
        Ok(Output { text, json: j, exit })
    }

    // -----------------------------------------------------------------------------------------------
    // Writing
    // -----------------------------------------------------------------------------------------------

    async fn prune(&self, run: &str, keep: usize) -> Outcome {
        self.run_info(run).await?;
        let deleted = self.store.prune(run, keep).await?;
        let steps: Vec<u64> = self.store.history(run).await?.iter().map(|m| m.step).collect();
        let text = format!(
            "run {run}: deleted {deleted} checkpoint{}; steps stored now: {}\n",
            plural(deleted),
            step_ranges(&steps)
        );
        Ok(Output::ok(text, json!({ "run_id": run, "deleted": deleted, "stored_steps": steps })))
    }

    async fn prune_all(&self, keep: usize) -> Outcome {
        let runs = self.store.list_runs(&RunFilter::all()).await?;
        let bar = progress(runs.len(), "pruning");
        let mut table = Table::new(&["RUN", "DELETED"]);
        let (mut list, mut total) = (Vec::new(), 0);
        for info in &runs {
            bar.set_message(info.run_id.clone());
            let deleted = self.store.prune(&info.run_id, keep).await?;
            total += deleted;
            table.row(vec![info.run_id.clone(), deleted.to_string()]);
            list.push(json!({ "run_id": info.run_id, "deleted": deleted }));
            bar.inc(1);
        }
        bar.finish_and_clear();
        let mut text = table.render();
        let n = runs.len();
        text.push_str(&format!("{n} run{}: deleted {total} checkpoint{}\n", plural(n), plural(total)));
        Ok(Output::ok(text, json!({ "runs": list, "deleted": total })))
    }

    async fn resume(&self, run: &str, key: Option<ChainKey>) -> Outcome {
        let info = self.run_info(run).await?;
        let graph = self.registered(&info, "only its graph's nodes can resume it").await?;
        let out =
            graph.resume(self.store.clone(), run, key.clone()).await.map_err(|e| broken(e, key.is_none()))?;
        let mut text = format!("run {run}: {} at step {}\n", render::status_short(&out.status), out.steps);
        if let RunStatus::Interrupted(list) = &out.status {
            for i in list {
                text.push_str(&format!("  {}\n", render::interrupt_line(i)));
            }
            text.push_str(&format!(
                "  (`resume` gives no input: answer with `graphctl answer {run} <json>`)\n"
            ));
        }
        text.push_str(&format!("state: {}\n", out.state));
        Ok(Output::ok(text, driven_json(run, out)))
    }

    /// The runs a `migrate`/`replay` command names: one, or every run (of a status).
    async fn selected(&self, run: Option<&str>, status: Option<StatusArg>) -> Result<Vec<RunInfo>, Failure> {
        match run {
            Some(run) => Ok(vec![self.run_info(run).await?]),
            None => {
                let filter = status.map_or_else(RunFilter::all, |s| RunFilter::all().status(status_of(s)));
                Ok(self.store.list_runs(&filter).await?)
            }
        }
    }

    /// The run's graph name: its registered graph's, or its log's.
    async fn graph_name_of(&self, info: &RunInfo) -> Option<String> {
        match self.graphs.get(&info.graph_fingerprint) {
            Some(g) => Some(g.name().to_owned()),
            None => self.first_event(&info.run_id).await.as_ref().and_then(graph_name),
        }
    }

    async fn migrate(&self, run: Option<&str>, status: Option<StatusArg>, to: u32, dry_run: bool) -> Outcome {
        let runs = self.selected(run, status).await?;
        let mut table = Table::new(&["RUN", "FROM", "TO", "STEP", "RESULT"]);
        let (mut list, mut refused) = (Vec::new(), 0);
        for info in &runs {
            let from = graph_runtime::graph_version(&info.graph_fingerprint);
            // `--all` passes over what has nothing to migrate.
            let finished = matches!(info.status, RunStatus::Completed | RunStatus::Cancelled);
            if run.is_none() && (from == to || finished) {
                continue;
            }
            let name = self.graph_name_of(info).await.unwrap_or_else(|| "?".into());
            let result = match self.graphs.version_of(&name, to) {
                Some(target) => target
                    .migrate(self.store.clone(), &info.run_id, &self.graphs.migrations, dry_run)
                    .await
                    .map_err(|e| e.to_string()),
                None => Err(format!("version {to} of graph `{name}` is not registered in this graphctl")),
            };
            let (step, said, j) = match &result {
                Ok(m) => {
                    let what = if dry_run { "would migrate" } else { "migrated" };
                    let moves = format!("{} → {}", m.frontier.0.join(","), m.frontier.1.join(","));
                    let j = json!({
                        "run_id": info.run_id, "from": m.from, "to": m.to, "step": m.step, "migrated": !dry_run,
                        "frontier_before": m.frontier.0, "frontier_after": m.frontier.1,
                        "state_before": m.state_before, "state_after": m.state_after,
                    });
                    (m.step.to_string(), format!("{what} ({moves})"), j)
                }
                Err(e) => {
                    refused += 1;
                    (
                        "-".to_owned(),
                        format!("refused: {e}"),
                        json!({ "run_id": info.run_id, "from": from, "to": to, "error": e }),
                    )
                }
            };
            table.row(vec![info.run_id.clone(), from.to_string(), to.to_string(), step, said]);
            list.push(j);
        }
        let mut text = if list.is_empty() {
            format!(
                "no run to migrate to version {to}
"
            )
        } else {
            table.render()
        };
        if dry_run && !list.is_empty() {
            text.push_str(
                "(dry run: nothing was written)
",
            );
        }
        let exit = if refused > 0 { Exit::Diverged } else { Exit::Ok };
        Ok(Output { text, json: json!({ "runs": list, "dry_run": dry_run, "refused": refused }), exit })
    }

    async fn replay(&self, run: Option<&str>, status: Option<StatusArg>) -> Outcome {
        use graph_runtime::engine::ReplayVerdict as V;
        let runs = self.selected(run, status).await?;
        let mut table = Table::new(&["RUN", "VERSION", "RESULT"]);
        let (mut list, mut bad) = (Vec::new(), 0);
        let started = std::time::Instant::now();
        for info in &runs {
            let version = graph_runtime::graph_version(&info.graph_fingerprint);
            let verdict = match self.graphs.get(&info.graph_fingerprint) {
                Some(g) => g.check_replay(self.store.clone(), &info.run_id).await?.verdict,
                None => V::NotServed { version, fingerprint: info.graph_fingerprint.clone() },
            };
            let (said, j) = match &verdict {
                V::Same { steps } => {
                    let n = usize::try_from(*steps).unwrap_or(usize::MAX);
                    (format!("same ({steps} step{})", plural(n)), json!({ "result": "same", "steps": steps }))
                }
                V::Diverged(d) => {
                    bad += 1;
                    let at = match (&d.call, d.node.as_str()) {
                        (Some(call), node) => format!("step {}, node `{node}`, effect call {call}", d.step),
                        (None, _) => format!("step {} (its checkpoint)", d.step),
                    };
                    let text = format!("DIFFERS at {at}: recorded {}, this build {}", d.expected, d.found);
                    let j = json!({ "result": "diverged", "step": d.step, "node": d.node, "call": d.call,
                        "expected": d.expected, "found": d.found });
                    (text, j)
                }
                V::NotServed { version, fingerprint } => {
                    bad += 1;
                    (
                        format!(
                            "NOT REGISTERED: version {version} (fingerprint {fingerprint}) is not in this build"
                        ),
                        json!({ "result": "not_served", "fingerprint": fingerprint }),
                    )
                }
                V::Migrated { step } => (
                    format!("skipped: migrated at step {step} (its history spans two versions)"),
                    json!({ "result": "migrated", "step": step }),
                ),
                V::Failed(e) => {
                    bad += 1;
                    (format!("FAILED: {e}"), json!({ "result": "failed", "error": e }))
                }
                _ => ("?".to_owned(), json!({ "result": "unknown" })),
            };
            table.row(vec![info.run_id.clone(), version.to_string(), said]);
            let mut j = j;
            j["run_id"] = json!(info.run_id);
            j["version"] = json!(version);
            list.push(j);
        }
        let elapsed = started.elapsed();
        let mut text = if list.is_empty() {
            "no runs to replay
"
            .to_owned()
        } else {
            table.render()
        };
        let n = list.len();
        text.push_str(&format!(
            "{n} run{} replayed in {:.1} s: {} differ or cannot be replayed by this build
",
            plural(n),
            elapsed.as_secs_f64(),
            bad
        ));
        let exit = if bad > 0 { Exit::Diverged } else { Exit::Ok };
        let j = json!({ "runs": list, "bad": bad, "elapsed_ms": elapsed.as_millis() as u64 });
        Ok(Output { text, json: j, exit })
    }

    /// The output of a command that drove a run: its status, steps and state.
    fn resumed(&self, run: &str, out: super::registry::Resumed, what: String) -> Outcome {
        let text = format!(
            "{what}: {} at step {}\nstate: {}\n",
            render::status_short(&out.status),
            out.steps,
            out.state
        );
        Ok(Output::ok(text, driven_json(run, out)))
    }

    async fn answer(
        &self,
        run: &str,
        input: &str,
        interrupt: Option<&str>,
        key: Option<ChainKey>,
    ) -> Outcome {
        let input: Value = serde_json::from_str(input).map_err(|e| {
            Failure::new(Exit::Usage, format!("the answer is not JSON ({e}); quote a text: '\"yes\"'"))
        })?;
        let info = self.run_info(run).await?;
        let id = match interrupt {
            Some(id) => id.to_owned(),
            None => {
                let asked: Vec<&str> = info
                    .status
                    .waits()
                    .iter()
                    .filter(|i| i.kind == graph_runtime::store::InterruptKind::Input)
                    .map(|i| i.id.as_str())
                    .collect();
                match asked.as_slice() {
                    [one] => (*one).to_owned(),
                    [] => {
                        return Err(Failure::new(
                            Exit::Usage,
                            format!(
                                "run `{run}` waits for no answer: it is {}",
                                render::status_short(&info.status)
                            ),
                        ));
                    }
                    many => {
                        return Err(Failure::new(
                            Exit::Usage,
                            format!(
                                "{} questions wait ({}): name one with --interrupt",
                                many.len(),
                                many.join(", ")
                            ),
                        ));
                    }
                }
            }
        };
        let graph = self.registered(&info, "only its graph's nodes can take the answer").await?;
        let out = graph
            .answer(self.store.clone(), run, vec![(id.clone(), input)], key.clone())
            .await
            .map_err(|e| broken(e, key.is_none()))?;
        let text = format!(
            "run {run}: answered {id}; {} at step {}\n",
            render::status_short(&out.status),
            out.steps
        );
        let mut j = driven_json(run, out);
        j["answered"] = json!(id);
        Ok(Output::ok(text, j))
    }

    async fn send_event(&self, run: &str, topic: &str, payload: &str, key: Option<&str>) -> Outcome {
        let payload: Value = serde_json::from_str(payload).map_err(|e| {
            Failure::new(Exit::Usage, format!("the payload is not JSON ({e}); quote a text: '\"yes\"'"))
        })?;
        self.run_info(run).await?;
        let now = graph_runtime::SystemClock.now_ms();
        let (sent, due) = graph_runtime::engine::send_event(&*self.store, run, topic, key, payload, now)
            .await
            .map_err(|e| Failure::new(Exit::Failure, e.to_string()))?;
        let what = match (sent.duplicate, due) {
            (true, _) => "already sent with this key: nothing added",
            (false, true) => "the run waits for it: due now",
            (false, false) => "kept until the run waits for the topic",
        };
        let text = format!("run {run}: event {} of topic `{topic}` ({what})\n", sent.seq);
        let j = json!({ "run_id": run, "topic": topic, "seq": sent.seq, "duplicate": sent.duplicate, "due": due });
        Ok(Output::ok(text, j))
    }

    async fn backup(&self, to: &std::path::Path) -> Outcome {
        let started = std::time::Instant::now();
        self.store.backup_to(to).await?;
        let took_ms = started.elapsed().as_millis();
        let copy = crate::open::open_store(&crate::open::copy_spec(self.spec, to), false).await?;
        let runs = copy.list_runs(&RunFilter::all()).await?.len();
        let text = format!("backed up {runs} runs to {} in {took_ms} ms\n", to.display());
        Ok(Output::ok(text, json!({ "to": to.display().to_string(), "runs": runs, "took_ms": took_ms })))
    }

    /// `rebuild`: the store was opened with its index rebuilt (`open::open_rebuilt`).
    async fn rebuild(&self) -> Outcome {
        let findings = match self.store.check_integrity().await? {
            Integrity::Findings { findings, .. } => findings,
            _ => Vec::new(),
        };
        let runs = self.store.list_runs(&RunFilter::all()).await?.len();
        let mut text = format!("rebuilt the index of {} from its commit log: {runs} runs\n", self.spec);
        for f in &findings {
            text.push_str(&format!("  {f}\n"));
        }
        text.push_str("check every run with `graphctl verify --all`\n");
        Ok(Output::ok(text, json!({ "store": self.spec, "runs": runs, "findings": findings })))
    }

    async fn salvage(&self, to: &std::path::Path, key: Option<ChainKey>) -> Outcome {
        let report = graph_runtime::engine::salvage(&*self.store, to, key.as_ref()).await?;
        let (intact, lost): (Vec<String>, Vec<(String, String)>) = (
            report.salvaged,
            report.lost.into_iter().map(|(run, e)| (run, broken(e, key.is_none()).message)).collect(),
        );
        let mut text = format!("salvaged {} runs to {}", intact.len(), to.display());
        if lost.is_empty() {
            text.push_str("; every run read back intact\n");
        } else {
            text.push_str(&format!("; {} could not be read back intact:\n", lost.len()));
            for (run, why) in &lost {
                text.push_str(&format!("  {run}: {why}\n"));
            }
        }
        let j = json!({
            "to": to.display().to_string(),
            "salvaged": intact,
            "lost": lost.iter().map(|(run, why)| json!({ "run_id": run, "error": why })).collect::<Vec<_>>(),
        });
        let exit = if lost.is_empty() { Exit::Ok } else { Exit::Corrupted };
        Ok(Output { text, json: j, exit })
    }

    /// `restore`: this session's store is the backup; `--store` names where it goes.
    async fn restore(&self, from: &str, key: Option<ChainKey>) -> Outcome {
        let target = match self.spec.split_once("://") {
            None => std::path::PathBuf::from(self.spec),
            Some(("sqlite", path)) => std::path::PathBuf::from(path),
            Some(_) => {
                return Err(Failure::new(
                    Exit::Usage,
                    "restore writes a sled folder or a SQLite file: a server's database is restored with \
                     the database's own tools (docs/stores.md)",
                ));
            }
        };
        if target.exists() {
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "{} exists: restore writes a new store (move the damaged one aside first)",
                    target.display()
                ),
            ));
        }
        let runs = self.store.list_runs(&RunFilter::all()).await?;
        let (mut events, mut matched) = (0, 0);
        for info in &runs {
            match verify_run(&*self.store, &info.run_id, key.as_ref()).await {
                Ok(r) => (events, matched) = (events + r.events, matched + r.checkpoints_matched),
                Err(e) => {
                    let f = broken(e, key.is_none());
                    return Err(Failure::new(
                        f.exit,
                        format!("the backup {from} does not verify, nothing was restored: {}", f.message),
                    ));
                }
            }
        }
        self.store.backup_to(&target).await?;
        let text = format!(
            "restored {} runs from {from} to {} ({events} events and {matched} checkpoints verified)\n",
            runs.len(),
            target.display()
        );
        let j = json!({ "from": from, "to": target.display().to_string(), "runs": runs.len(), "events": events, "checkpoints_matched": matched });
        Ok(Output::ok(text, j))
    }

    async fn schedules(&self) -> Outcome {
        let schedules = self.store.schedules().await?;
        let mut t = Table::new(&["SCHEDULE", "SPEC", "NEXT", "MISSED", "STATE", "GRAPH"]);
        let mut list = Vec::new();
        for s in &schedules {
            let graph = self.graphs.get(&s.graph_fingerprint).map(|g| g.name().to_owned());
            let missed = match s.missed {
                Missed::Skip => "skip",
                Missed::CatchUpOne => "catch up one",
                Missed::CatchUpAll => "catch up all",
                _ => "other",
            };
            t.row(vec![
                s.name.clone(),
                s.spec.clone(),
                render::time(s.next_fire_ms),
                missed.into(),
                (if s.paused { "paused" } else { "active" }).into(),
                graph.clone().unwrap_or_else(|| {
                    format!("{}…", &s.graph_fingerprint[..12.min(s.graph_fingerprint.len())])
                }),
            ]);
            let mut j = json!(s);
            j["graph"] = json!(graph);
            list.push(j);
        }
        let text = if schedules.is_empty() { "no schedules in the store\n".to_owned() } else { t.render() };
        Ok(Output::ok(text, json!({ "schedules": list })))
    }

    async fn mailbox(&self, run: &str) -> Outcome {
        self.run_info(run).await?;
        let mailbox = self.store.mailbox(run).await?;
        let mut t = Table::new(&["SEQ", "TOPIC", "SENT", "STATE", "PAYLOAD"]);
        for m in &mailbox.messages {
            let state = match &m.state {
                MessageState::Unclaimed => "waiting".to_owned(),
                MessageState::Claimed { by } => format!("delivered to {by}"),
                MessageState::Rejected { detail, .. } => format!("rejected: {detail}"),
                other => format!("{other:?}"),
            };
            t.row(vec![
                m.seq.to_string(),
                m.topic.clone(),
                render::time(m.sent_at_ms),
                state,
                m.payload.to_string(),
            ]);
        }
        let text = if mailbox.messages.is_empty() { format!("run {run}: no events\n") } else { t.render() };
        Ok(Output::ok(text, json!({ "run_id": run, "messages": mailbox.messages })))
    }

    // -----------------------------------------------------------------------------------------------
    // Shared
    // -----------------------------------------------------------------------------------------------

    /// The run's row, or `NotFound` with the closest run id.
    pub(crate) async fn run_info(&self, run: &str) -> Result<RunInfo, Failure> {
        if let Some(info) = self.store.run_info(run).await? {
            return Ok(info);
        }
        // Near ids: those sharing the first half of this one (a typo further on), else the first ones
        // of the store; a bounded read, whatever the store holds.
        let mut half = run.len() / 2;
        while !run.is_char_boundary(half) {
            half -= 1;
        }
        let near = RunFilter::all().prefix(&run[..half]).limit(SUGGEST_FROM);
        let mut runs = self.store.list_runs(&near).await.unwrap_or_default();
        if runs.is_empty() {
            runs = self.store.list_runs(&RunFilter::all().limit(SUGGEST_FROM)).await.unwrap_or_default();
        }
        let hint = graph_core::suggest::did_you_mean(run, runs.iter().map(|i| i.run_id.as_str()));
        Err(Failure::new(
            Exit::NotFound,
            format!(
                "no run `{run}` in the store at {}{hint} (`graphctl runs` lists them)",
                self.shown_store()
            ),
        ))
    }

    /// The run's registered graph, or `Unsupported` saying `why` it is needed.
    async fn registered(&self, info: &RunInfo, why: &str) -> Result<&dyn Registered, Failure> {
        if let Some(g) = self.graphs.get(&info.graph_fingerprint) {
            return Ok(g);
        }
        let name =
            self.first_event(&info.run_id).await.as_ref().and_then(graph_name).unwrap_or_else(|| "?".into());
        Err(Failure::new(
            Exit::Unsupported,
            format!(
                "run `{}` was started by graph `{name}` (fingerprint {}), which this graphctl does not register: \
                 {why}; build a graphctl that registers it (`Cli::new().graph(..)`, see docs/graphctl.md)",
                info.run_id, info.graph_fingerprint
            ),
        ))
    }

    /// The state at `step`: rebuilt by the registered graph, or read from a full snapshot (verified
    /// against its hash), which needs no graph.
    async fn state_value(&self, info: &RunInfo, step: u64) -> Result<Value, Failure> {
        let run = &info.run_id;
        if let Some(g) = self.graphs.get(&info.graph_fingerprint) {
            return match g.state_at(self.store.clone(), run, step).await? {
                Some(state) => Ok(state),
                None => Err(self.step_not_found(run, step).await),
            };
        }
        let Some(cp) = self.store.load_checkpoint(run, step).await? else {
            return Err(self.step_not_found(run, step).await);
        };
        match &cp.state {
            StateRepr::Full(bytes) => {
                let damaged = |detail: String| {
                    Failure::from(graph_runtime::error::StoreError::corrupted_record(run, step, detail))
                };
                if hex(&sha256_parts(&[bytes])) != cp.state_hash {
                    return Err(damaged("the state does not match its hash".into()));
                }
                serde_json::from_slice(bytes).map_err(|e| damaged(format!("the state does not decode: {e}")))
            }
            StateRepr::Delta { base, .. } => {
                let why = format!(
                    "step {step} is stored as the deltas since step {base}, which only its graph's reducer can \
                     apply (full snapshots, step 0 among them, need no graph)"
                );
                Err(self
                    .registered(info, &why)
                    .await
                    .err()
                    .unwrap_or_else(|| Failure::new(Exit::Failure, why)))
            }
        }
    }

    async fn step_not_found(&self, run: &str, step: u64) -> Failure {
        let steps: Vec<u64> =
            self.store.history(run).await.unwrap_or_default().iter().map(|m| m.step).collect();
        Failure::new(
            Exit::NotFound,
            format!(
                "run `{run}` has no checkpoint at step {step} (stored: {}; pruned steps are absent)",
                step_ranges(&steps)
            ),
        )
    }

    /// The run's first event (`RUN_STARTED` or `FORKED`), if it can be read.
    async fn first_event(&self, run: &str) -> Option<Event> {
        self.store.events(run, 0, 1).await.ok()?.into_iter().next()
    }

    /// `--store` as shown in messages: a URL's credentials left out.
    fn shown_store(&self) -> String {
        match (self.spec.split_once("://"), self.spec.rsplit_once('@')) {
            (Some((scheme, _)), Some((_, host))) => format!("{scheme}://…@{host}"),
            _ => self.spec.to_owned(),
        }
    }
}

/// How many run ids a "did you mean" for an unknown run reads at most.
const SUGGEST_FROM: usize = 1_000;

/// How many of the store's undelivered outbox rows `graphctl outbox` reads to tell a run's rows delivered.
const OUTBOX_SCAN: usize = 100_000;

/// How `graphctl runs` pages: by a prefix, after a cursor, or in run-id order from the first run.
#[derive(Debug, Default)]
pub(crate) struct Page {
    pub(crate) prefix: Option<String>,
    pub(crate) after: Option<String>,
    pub(crate) by_id: bool,
}

/// What a runs listing shows of a run beyond its row: from its latest checkpoint and its first event.
struct Row {
    updated: Option<u64>,
    label: Option<String>,
    started: Option<u64>,
    graph: Option<String>,
}

/// The graph name a run's first event records (`RUN_STARTED`'s `graph`, or the recorded shape's name).
fn graph_name(e: &Event) -> Option<String> {
    let p = &e.payload.value();
    p.get("graph")
        .or_else(|| p.get("shape").and_then(|s| s.get("name")))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The runs `list_runs` gives under each status, read once a status (`verify --all`).
#[derive(Default)]
struct ByStatus(std::collections::HashMap<&'static str, std::collections::HashSet<String>>);

impl ByStatus {
    /// The status whose list leaves out `info`'s run (listed among all runs), when it does: an entry of
    /// the store's index of runs by status is lost, and `runs --status` would not show the run. A run
    /// that changed status meanwhile is never reported: a run missing from its status's list is read
    /// again, the list too, and it counts only when the run's row had the same version before and
    /// after the new list (every status change moves it).
    async fn unlisted(
        &mut self,
        store: &dyn Store,
        info: &RunInfo,
    ) -> Result<Option<&'static str>, graph_runtime::StoreError> {
        let name = info.status.as_str();
        if !self.0.contains_key(name) {
            self.list(store, &info.status).await?;
        }
        if self.0[name].contains(&info.run_id) {
            return Ok(None);
        }
        let Some(before) = store.run_info(&info.run_id).await? else { return Ok(None) };
        let name = self.list(store, &before.status).await?;
        let found = self.0[name].contains(&info.run_id);
        let after = store.run_info(&info.run_id).await?;
        let unchanged = after.is_some_and(|a| a.version == before.version);
        Ok((!found && unchanged).then_some(name))
    }

    /// Reads (again) the runs listed under `status`; returns its name.
    async fn list(
        &mut self,
        store: &dyn Store,
        status: &RunStatus,
    ) -> Result<&'static str, graph_runtime::StoreError> {
        let listed = store.list_runs(&RunFilter::all().status(status.clone())).await?;
        let name = status.as_str();
        self.0.insert(name, listed.into_iter().map(|r| r.run_id).collect());
        Ok(name)
    }
}

/// The damage [`ByStatus::unlisted`] finds, as the store's `Corrupted`.
fn unlisted(run: &str, status: &str) -> graph_runtime::StoreError {
    graph_runtime::StoreError::Corrupted {
        run: Some(run.to_owned()),
        step: None,
        file: None,
        detail: format!(
            "the store lists it among all runs, with status `{status}`, but not among the runs of that status \
             (`graphctl runs --status {status}` leaves it out): an entry of the store's index of runs by \
             status is lost"
        ),
        remedy: "rebuilding the index restores the entry (SQLite: `REINDEX runs_by_status`; PostgreSQL: \
                 `REINDEX INDEX CONCURRENTLY graph_runs_status`; MySQL: `ALTER TABLE graph_runs FORCE`), and \
                 the store's whole-store check (`verify --all` without `--no-store-check`) tells whether \
                 more is damaged",
    }
}

/// A verification error, with a hint when no key was given: a keyed log never verifies without its key.
fn broken(e: Error, keyless: bool) -> Failure {
    let keyed_hint = keyless && matches!(e, Error::ExecutionCorrupted { .. });
    let mut f = Failure::from(e);
    if keyed_hint {
        f.message.push_str("; if the log is keyed, pass its key with `--key-file`");
    }
    f
}

/// The key in `path`: the file's bytes, exactly.
fn read_key(path: &Path) -> Result<ChainKey, Failure> {
    match std::fs::read(path) {
        Ok(bytes) if bytes.is_empty() => {
            Err(Failure::new(Exit::Usage, format!("the key file {} is empty", path.display())))
        }
        Ok(bytes) => Ok(ChainKey::new(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Failure::new(Exit::NotFound, format!("no key file at {}", path.display())))
        }
        Err(e) => {
            Err(Failure::new(Exit::Failure, format!("cannot read the key file {}: {e}", path.display())))
        }
    }
}

/// The JSON of a run a command drove: its status (as `render::status_json`), id, steps and state.
fn driven_json(run: &str, out: super::registry::Resumed) -> Value {
    let mut j = render::status_json(&out.status);
    j["run_id"] = json!(run);
    j["steps"] = json!(out.steps);
    j["state"] = out.state;
    j
}

/// The token of `serve --token-file`: the file's text, without surrounding whitespace; at least 16
/// characters (a short token is guessed).
pub(crate) fn read_token(path: &Path) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            Failure::new(Exit::NotFound, format!("no token file at {}", path.display()))
        }
        _ => Failure::new(Exit::Failure, format!("cannot read the token file {}: {e}", path.display())),
    })?;
    let token = text.trim();
    if token.len() < 16 || token.chars().any(char::is_whitespace) {
        return Err(Failure::new(
            Exit::Usage,
            format!("the token in {} is to be one word of at least 16 characters", path.display()),
        ));
    }
    Ok(token.to_owned())
}

/// A status of `--status`'s variant (the filter compares variants only).
fn status_of(s: StatusArg) -> RunStatus {
    match s {
        StatusArg::Running => RunStatus::Running,
        StatusArg::Completed => RunStatus::Completed,
        StatusArg::Paused => RunStatus::Paused(PauseReason::Backpressure),
        StatusArg::Interrupted => RunStatus::Interrupted(Vec::new()),
        StatusArg::Waiting => RunStatus::Waiting(Vec::new()),
        StatusArg::Failed => RunStatus::Failed(String::new()),
        StatusArg::Cancelled => RunStatus::Cancelled,
    }
}

/// `s` unless `n` is 1.
fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `0–3, 7, 9–10` (or `none`).
fn step_ranges(steps: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < steps.len() {
        let mut j = i;
        while j + 1 < steps.len() && steps[j + 1] == steps[j] + 1 {
            j += 1;
        }
        out.push(if i == j { steps[i].to_string() } else { format!("{}–{}", steps[i], steps[j]) });
        i = j + 1;
    }
    if out.is_empty() { "none".into() } else { out.join(", ") }
}

/// A progress bar on stderr for `n` runs (indicatif draws nothing when stderr is not a terminal).
fn progress(n: usize, what: &'static str) -> ProgressBar {
    let bar = ProgressBar::new(n as u64).with_prefix(what);
    if let Ok(style) = ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {wide_msg}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// A run nested in another: a subgraph's run (`{parent}/{node}.{step}.{path}`) or a child run
/// (`…~{key}`).
struct Nested {
    run_id: String,
    node: String,
    step: u64,
    spawned: bool,
}

impl Nested {
    async fn status(&self, store: &dyn Store) -> String {
        match store.run_info(&self.run_id).await {
            Ok(Some(info)) => render::status_short(&info.status),
            _ => "unreadable".into(),
        }
    }
}

/// The runs nested directly in `run`, in id order.
fn nested_runs(run: &str, runs: &[String]) -> Vec<Nested> {
    let prefix = format!("{run}/");
    let mut out: Vec<Nested> = runs
        .iter()
        .filter_map(|id| {
            let rest = id.strip_prefix(&prefix)?;
            let (base, spawned) = match rest.split_once('~') {
                Some((base, _key)) => (base, true),
                None => (rest, false),
            };
            if base.contains('/') {
                return None; // deeper: listed under its own parent
            }
            let mut parts = base.rsplitn(3, '.');
            let (_path, step, node) = (parts.next()?, parts.next()?, parts.next()?);
            Some(Nested { run_id: id.clone(), node: node.to_owned(), step: step.parse().ok()?, spawned })
        })
        .collect();
    out.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_read_as_ranges() {
        assert_eq!(step_ranges(&[]), "none");
        assert_eq!(step_ranges(&[0, 1, 2, 3, 7, 9, 10]), "0–3, 7, 9–10");
    }
}
