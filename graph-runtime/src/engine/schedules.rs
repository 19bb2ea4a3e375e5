//! Schedules: durable, cron-like definitions that start runs of this engine's graph
//! ([`Engine::schedule`]), kept in the store (`graph_store::schedule`), fired by the timer service
//! ([`Engine::run_timers`]) or by workers, each firing exactly once.
//!
//! A firing at time `t` of schedule `name` submits the run `"{name}@{t as YYYY-MM-DDTHH:MM:SSZ}"`: a run
//! id is created once, so engines and workers that fire the same schedule at once start one run. Then
//! the schedule's cursor (its next fire time) moves past now, under the row's version check.

use super::core::Engine;
use crate::cron::{Spec, utc};
use crate::error::{Error, Result};
use crate::run::RunOptions;
use crate::state::Reducer;
use crate::store::schedule::{Missed, Schedule, ScheduleOp, ScheduleReply};

/// How late a firing may be and still be made under [`Missed::Skip`].
const SKIP_AFTER_MS: u64 = 60_000;
/// At most this many firings at a time under [`Missed::CatchUpAll`].
const CATCH_UP_MAX: usize = 1_000;

impl<S: Reducer> Engine<S> {
    /// Creates (or replaces) the schedule `name`: a run of this graph with `input` at each time `spec`
    /// names (see [`crate::cron`]: `"0 2 * * *"`, `"@every 15m"`, UTC), missed firings skipped
    /// ([`Engine::schedule_with`] chooses). The first firing is the first time after now (the engine's
    /// clock). Fired by [`Engine::run_timers`] on an embedded store, by the workers on a server store.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSchedule`] for a spec that does not parse, or an empty name; store errors.
    pub async fn schedule(&self, name: &str, spec: &str, input: &S) -> Result<Schedule> {
        self.schedule_with(name, spec, input, Missed::Skip).await
    }

    /// [`Engine::schedule`] with a policy for the firings missed while no process made them.
    ///
    /// # Errors
    ///
    /// As [`Engine::schedule`].
    pub async fn schedule_with(&self, name: &str, spec: &str, input: &S, missed: Missed) -> Result<Schedule> {
        let invalid = |detail: String| Error::InvalidSchedule { name: name.to_owned(), detail };
        if name.trim().is_empty() {
            return Err(invalid("a schedule needs a name".into()));
        }
        let parsed = Spec::parse(spec).map_err(|e| invalid(e.to_string()))?;
        let now = self.inner.env.clock.now_ms();
        let next = parsed.next_after(now).ok_or_else(|| invalid(format!("`{spec}` never fires")))?;
        let input = serde_json::to_value(input).map_err(|e| Error::Serialization {
            run: name.to_owned(),
            what: "a schedule's input",
            source: e,
        })?;
        let schedule = Schedule {
            name: name.to_owned(),
            graph_fingerprint: self.inner.graph.fingerprint().to_owned(),
            spec: spec.to_owned(),
            input,
            missed,
            paused: false,
            next_fire_ms: next,
            updated_ms: now,
            version: 0,
        };
        let op = ScheduleOp::Put { schedule: Box::new(schedule.clone()), expected_version: None };
        let ScheduleReply::Written { version } = self.inner.store.schedule_op(name, op).await? else {
            return Err(crate::StoreError::backend(
                "a schedule's put answered another reply",
                name.to_owned(),
            )
            .into());
        };
        tracing::info!(schedule = name, spec, next = %utc(next), "schedule written");
        self.inner.timers.changed.notify_one();
        Ok(Schedule { version, ..schedule })
    }

    /// The schedules of this engine's graph, in name order.
    ///
    /// # Errors
    ///
    /// Store errors.
    pub async fn schedules(&self) -> Result<Vec<Schedule>> {
        let all = self.inner.store.schedules().await?;
        Ok(all.into_iter().filter(|s| s.graph_fingerprint == self.inner.graph.fingerprint()).collect())
    }

    /// Pauses the schedule: it fires no more until [`Engine::resume_schedule`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSchedule`] when there is no such schedule of this graph; store errors.
    pub async fn pause_schedule(&self, name: &str) -> Result<Schedule> {
        self.change_schedule(name, |s, _| s.paused = true).await
    }

    /// Resumes a paused schedule: its next firing is the first time after now (the firings of the
    /// pause are not made).
    ///
    /// # Errors
    ///
    /// As [`Engine::pause_schedule`].
    pub async fn resume_schedule(&self, name: &str) -> Result<Schedule> {
        self.change_schedule(name, |s, now| {
            if s.paused {
                s.paused = false;
                if let Ok(spec) = Spec::parse(&s.spec) {
                    s.next_fire_ms = spec.next_after(now).unwrap_or(u64::MAX);
                }
            }
        })
        .await
    }

    /// Deletes the schedule; `false` when there was none. The runs it started are not touched.
    ///
    /// # Errors
    ///
    /// Store errors.
    pub async fn delete_schedule(&self, name: &str) -> Result<bool> {
        match self.inner.store.schedule_op(name, ScheduleOp::Delete).await? {
            ScheduleReply::Deleted(found) => Ok(found),
            other => Err(crate::StoreError::backend(
                "a schedule's delete answered another reply",
                format!("{other:?}"),
            )
            .into()),
        }
    }

    /// Makes every firing of this graph's schedules that is due by the engine's clock, as each
    /// schedule's [`Missed`] policy says, and returns the ids of the runs it submitted (a run another
    /// engine or worker submitted first is not listed). The runs are left `Running` for whoever drives
    /// them: the timer service drives the ones it fires; workers claim theirs.
    ///
    /// # Errors
    ///
    /// Store errors reading the schedules; a schedule whose input no longer reads as this graph's
    /// state is logged and left as it is.
    pub async fn fire_schedules(&self) -> Result<Vec<String>> {
        Ok(self.fire_due().await?.0)
    }

    /// [`Engine::fire_schedules`], and the earliest next firing of this graph's active schedules after
    /// it, from the one read of the schedules (the timer service sleeps until then). A schedule that
    /// cannot fire (a spec or input that no longer reads) has none.
    pub(super) async fn fire_due(&self) -> Result<(Vec<String>, Option<u64>)> {
        let now = self.inner.env.clock.now_ms();
        let mut started = Vec::new();
        let mut earliest: Option<u64> = None;
        let mut next_at = |t: u64| earliest = Some(earliest.map_or(t, |e| e.min(t)));
        for s in self.schedules().await? {
            if s.paused {
                continue;
            }
            if s.next_fire_ms > now {
                next_at(s.next_fire_ms);
                continue;
            }
            let Ok(spec) = Spec::parse(&s.spec) else {
                tracing::warn!(schedule = %s.name, spec = %s.spec, "a stored schedule's spec does not parse; not fired");
                continue;
            };
            let input: S = match serde_json::from_value(s.input.clone()) {
                Ok(input) => input,
                Err(e) => {
                    tracing::warn!(schedule = %s.name, error = %e, "a schedule's input does not read as the graph's state; not fired");
                    continue;
                }
            };
            let mut due = Vec::new();
            let mut t = s.next_fire_ms;
            while t <= now && due.len() <= CATCH_UP_MAX {
                due.push(t);
                t = spec.next_after(t).unwrap_or(u64::MAX);
            }
            let fire: Vec<u64> = match s.missed {
                Missed::CatchUpAll => due.iter().copied().take(CATCH_UP_MAX).collect(),
                Missed::CatchUpOne => due.last().copied().into_iter().collect(),
                _ => due.iter().copied().filter(|t| now - t <= SKIP_AFTER_MS).collect(),
            };
            for at in &fire {
                let run = fired_run_id(&s.name, *at);
                let opts = RunOptions::default().label(format!("schedule {} at {}", s.name, utc(*at)));
                match self.submit_with(&run, input.clone(), opts).await {
                    Ok(()) => {
                        tracing::info!(schedule = %s.name, run, "schedule fired");
                        started.push(run);
                    }
                    // Fired already (by another engine or worker, or before a crash).
                    Err(Error::RunExists { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            let last = fire.last().copied().unwrap_or(0).max(now);
            let next = spec.next_after(last).unwrap_or(u64::MAX);
            let moved = Schedule { next_fire_ms: next, updated_ms: now, ..s.clone() };
            // A conflict: another engine moved it first, past the same firings.
            let op = ScheduleOp::Put { schedule: Box::new(moved), expected_version: Some(s.version) };
            self.inner.store.schedule_op(&s.name, op).await?;
            next_at(next);
        }
        Ok((started, earliest))
    }

    async fn change_schedule(&self, name: &str, change: impl Fn(&mut Schedule, u64)) -> Result<Schedule> {
        for _ in 0..16 {
            let Some(mut s) = self.schedules().await?.into_iter().find(|s| s.name == name) else {
                return Err(Error::InvalidSchedule {
                    name: name.to_owned(),
                    detail: "no such schedule of this graph".into(),
                });
            };
            let read = s.version;
            let now = self.inner.env.clock.now_ms();
            change(&mut s, now);
            s.updated_ms = now;
            let op = ScheduleOp::Put { schedule: Box::new(s.clone()), expected_version: Some(read) };
            if let ScheduleReply::Written { version } = self.inner.store.schedule_op(name, op).await? {
                self.inner.timers.changed.notify_one();
                return Ok(Schedule { version, ..s });
            }
        }
        Err(Error::InvalidSchedule {
            name: name.to_owned(),
            detail: "it kept changing under this writer".into(),
        })
    }
}

/// The run a schedule's firing at `at_ms` starts: `"{name}@{YYYY-MM-DDTHH:MM:SSZ}"`.
pub fn fired_run_id(name: &str, at_ms: u64) -> String {
    format!("{name}@{}", utc(at_ms))
}
