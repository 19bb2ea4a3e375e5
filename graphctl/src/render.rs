//! Text output: aligned tables, times, statuses and event summaries. JSON output is built next to each
//! command; this module only makes things readable.

use std::fmt::Write as _;

use serde_json::{Value, json};

use graph_runtime::events::{Event, EventType};
use graph_runtime::store::{
    EffectClass, EffectRecord, EffectState, Interrupt, InterruptKind, PauseReason, RunStatus,
};

/// Columns of text, left-aligned, padded to the widest cell; the last column is not padded.
pub(crate) struct Table {
    head: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(head: &[&'static str]) -> Self {
        Table { head: head.to_vec(), rows: Vec::new() }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub(crate) fn render(&self) -> String {
        let width = |i: usize| {
            let cells = self.rows.iter().filter_map(|r| r.get(i)).map(|c| c.chars().count());
            cells.chain([self.head[i].len()]).max().unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.head.len()).map(width).collect();
        let mut out = String::new();
        let head: Vec<String> = self.head.iter().map(|h| (*h).to_owned()).collect();
        for row in std::iter::once(&head).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 < row.len() {
                    let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
                } else {
                    line.push_str(cell);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `2026-05-04T10:21:07.123Z`: ms since the Unix epoch, in UTC.
pub(crate) fn time(ms: u64) -> String {
    let (secs, ms) = (ms / 1000, ms % 1000);
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z", rest / 3600, rest / 60 % 60, rest % 60)
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The status with its reason in a few words, for a table cell.
pub(crate) fn status_short(s: &RunStatus) -> String {
    match s {
        RunStatus::Paused(PauseReason::Backpressure) => "paused (backpressure)".into(),
        RunStatus::Paused(PauseReason::NeedsConfirmation { name, .. }) => {
            format!("paused (effect `{name}` needs confirmation)")
        }
        RunStatus::Interrupted(list) if list.iter().all(|i| i.kind == InterruptKind::Input) => {
            let due = s.wake_at_ms().map(|at| format!(", due {}", time(at))).unwrap_or_default();
            format!("interrupted ({} question{}{due})", list.len(), if list.len() == 1 { "" } else { "s" })
        }
        RunStatus::Interrupted(list) if list.iter().any(|i| i.kind == InterruptKind::Input) => {
            "interrupted (questions and sleeps)".into()
        }
        RunStatus::Interrupted(_) => "interrupted (breakpoint)".into(),
        RunStatus::Waiting(list) => {
            let topics: Vec<&str> = list.iter().filter_map(|i| i.topic.as_deref()).collect();
            match (topics.is_empty(), s.wake_at_ms()) {
                (true, Some(at)) => format!("waiting (asleep until {})", time(at)),
                (true, None) => "waiting".into(),
                (false, Some(at)) => format!("waiting (for {}, due {})", topics.join(", "), time(at)),
                (false, None) => format!("waiting (for {})", topics.join(", ")),
            }
        }
        other => other.as_str().into(),
    }
}

/// The status as JSON: `{"status": name, ...its details}`.
pub(crate) fn status_json(s: &RunStatus) -> Value {
    let mut v = json!({ "status": s.as_str() });
    match s {
        RunStatus::Paused(reason) => v["pause_reason"] = json!(reason),
        RunStatus::Interrupted(list) | RunStatus::Waiting(list) => {
            v["interrupts"] = json!(list);
            if let Some(at) = s.wake_at_ms() {
                v["wake_at_ms"] = json!(at);
            }
        }
        RunStatus::Failed(error) => v["error"] = json!(error),
        _ => {}
    }
    v
}

/// One line per interrupt: `approve#0  input at step 1, node approve: "approve a refund of 300?"`.
pub(crate) fn interrupt_line(i: &Interrupt) -> String {
    let kind = match i.kind {
        InterruptKind::Input => "waits for input",
        InterruptKind::Before => "breakpoint before",
        InterruptKind::After => "breakpoint after",
        InterruptKind::Sleep => "sleeps",
        InterruptKind::Event => "waits for an event",
        _ => "stopped",
    };
    let mut line = format!("{kind}: node `{}` at step {}, id `{}`", i.node, i.step, short_id(&i.id));
    if let Some(topic) = &i.topic {
        let _ = write!(line, ", topic `{topic}`");
    }
    if !i.payload.is_null() {
        let _ = write!(line, ", asks {}", i.payload);
    }
    match (i.kind, i.wake_at_ms) {
        (InterruptKind::Sleep, Some(at)) => {
            let _ = write!(line, ", until {}", time(at));
        }
        (InterruptKind::Event, Some(at)) => {
            let _ = write!(line, ", due {}", time(at));
        }
        (_, Some(at)) => {
            let _ = write!(line, ", deadline {}", time(at));
        }
        _ => {}
    }
    line
}

/// An interrupt id is `{64-char path}#{index}`: the path's first 12 characters are enough to read.
fn short_id(id: &str) -> String {
    match id.split_once('#') {
        Some((path, index)) if path.len() > 12 => format!("{}…#{index}", &path[..12]),
        _ => id.to_owned(),
    }
}

/// The first `n` characters of a hash.
pub(crate) fn short(hash: &str, n: usize) -> &str {
    hash.get(..n).unwrap_or(hash)
}

/// `a, b` or `-`.
pub(crate) fn names(list: &[String]) -> String {
    if list.is_empty() { "-".into() } else { list.join(", ") }
}

/// An event type as the log spells it (`STEP_COMMITTED`).
pub(crate) fn event_type(t: EventType) -> String {
    serde_json::to_value(t)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{t:?}"))
}

/// What an event says, in one line.
pub(crate) fn event_summary(e: &Event) -> String {
    let p = &e.payload.value();
    let s = |k: &str| p.get(k).map(plain).unwrap_or_default();
    let list = |k: &str| {
        p.get(k).and_then(Value::as_array).map(|a| a.iter().map(plain).collect::<Vec<_>>().join(", "))
    };
    match e.event_type {
        EventType::RunStarted => format!("graph {}, step {}, seed {}", s("graph"), s("step"), s("seed")),
        EventType::StepCommitted => format!(
            "step {}: ran {} → next {}",
            s("step"),
            list("ran").unwrap_or_default(),
            list("next").filter(|n| !n.is_empty()).unwrap_or_else(|| "END".into())
        ),
        EventType::EffectRecorded => {
            let class = p.get("class").and_then(|c| serde_json::from_value(c.clone()).ok()).map(class_name);
            let class = class.map_or_else(|| s("class"), str::to_owned);
            format!("step {}, node {}: {} ({class}), key {}", s("step"), s("node"), s("name"), s("key"))
        }
        EventType::Interrupted => {
            let n = p.get("interrupts").and_then(Value::as_array).map_or(0, Vec::len);
            let nodes: Vec<String> = p
                .get("interrupts")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|i| i.get("node")).map(plain).collect())
                .unwrap_or_default();
            format!("step {}: {n} waiting ({})", s("step"), nodes.join(", "))
        }
        EventType::Resumed => match p.get("inputs") {
            Some(inputs) => format!("step {}: with input {}", s("step"), inputs),
            None => format!("step {}, from {}", s("step"), s("from")),
        },
        EventType::RunPaused => {
            format!("step {}: {}", s("step"), p.get("reason").cloned().unwrap_or_default())
        }
        EventType::Forked => format!(
            "step {}: fork of run {} at step {}{}",
            s("step"),
            s("parent"),
            s("parent_step"),
            if p.get("edited") == Some(&Value::Bool(true)) { ", edited" } else { "" }
        ),
        EventType::RunCompleted => format!("step {}", s("step")),
        EventType::RunFailed => format!("step {}: {}", s("step"), s("error")),
        EventType::RunCancelled => format!("step {}", s("step")),
        _ => e.payload.as_str().to_owned(),
    }
}

/// A JSON value as text: strings without quotes.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An effect class as the builder names it.
pub(crate) fn class_name(c: EffectClass) -> &'static str {
    match c {
        EffectClass::Pure => "pure",
        EffectClass::Idempotent => "idempotent",
        EffectClass::NonIdempotent => "non-idempotent",
        _ => "other",
    }
}

/// An effect's state in a few words.
pub(crate) fn effect_state(r: &EffectRecord) -> String {
    match &r.state {
        EffectState::Started => "started (outcome unknown)".into(),
        EffectState::Completed { response } => format!("completed: {response}"),
        EffectState::Failed { message } => format!("failed: {message}"),
        EffectState::Rejected { message } => format!("rejected: {message}"),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_dates() {
        assert_eq!(time(0), "1970-01-01T00:00:00.000Z");
        // date -u -d @951782400.5 → 2000-02-29 00:00:00.500 (a leap day of a century leap year)
        assert_eq!(time(951_782_400_500), "2000-02-29T00:00:00.500Z");
        // date -u -d @1767225599 → 2025-12-31 23:59:59
        assert_eq!(time(1_767_225_599_999), "2025-12-31T23:59:59.999Z");
    }

    #[test]
    fn parked_runs_show_when_they_are_due() {
        let wait = |kind, at| Interrupt {
            id: format!("{}#0", "a".repeat(64)),
            kind,
            node: "payout".into(),
            path: "a".repeat(64),
            step: 4,
            index: 0,
            payload: Value::Null,
            wake_at_ms: at,
            topic: None,
        };
        // date -u -d @951782400.5 → 2000-02-29 00:00:00.500
        let asleep = RunStatus::Waiting(vec![wait(InterruptKind::Sleep, Some(951_782_400_500))]);
        assert_eq!(status_short(&asleep), "waiting (asleep until 2000-02-29T00:00:00.500Z)");
        assert_eq!(status_json(&asleep)["wake_at_ms"], 951_782_400_500u64);
        assert_eq!(
            interrupt_line(&asleep.waits()[0]),
            "sleeps: node `payout` at step 4, id `aaaaaaaaaaaa…#0`, until 2000-02-29T00:00:00.500Z"
        );
        let asked = RunStatus::Interrupted(vec![wait(InterruptKind::Input, Some(0))]);
        assert_eq!(status_short(&asked), "interrupted (1 question, due 1970-01-01T00:00:00.000Z)");
        assert!(interrupt_line(&asked.waits()[0]).ends_with(", deadline 1970-01-01T00:00:00.000Z"));
    }

    #[test]
    fn tables_pad_every_column_but_the_last() {
        let mut t = Table::new(&["A", "LONG"]);
        t.row(vec!["wide cell".into(), "x".into()]);
        assert_eq!(t.render(), "A          LONG\nwide cell  x\n");
    }
}
