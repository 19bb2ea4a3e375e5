//! The engine: runs, resumes and cancels runs of one graph, step by step.
//!
//! The loop of a run, for step `N` with committed state `S_N` and frontier `F_N`:
//!
//! 1. execute every item of `F_N` against `S_N` (`step.rs`);
//! 2. at the barrier, merge their deltas into `S_N` in ascending order key, giving `S_{N+1}`;
//! 3. build `F_{N+1}` from their routes (`frontier.rs`);
//! 4. commit checkpoint `N+1` (state, frontier, idempotency key, run row) to the store, and only then
//!    dispatch its items. An empty `F_{N+1}` means every path reached END: the run is complete.
//!
//! A crash anywhere loses at most the step in flight; `resume` re-executes it from checkpoint `N` and,
//! nodes being deterministic, commits the same checkpoint `N+1`.
//!
//! # The files
//!
//! - `core.rs`: [`Engine`] and [`EngineBuilder`];
//! - `drive.rs`: the run loop, in one room: the driver, a step's stages, the commit and what the store
//!   says of it, and every status write;
//! - `step.rs` (executing a step's items) and `frontier.rs` (the next frontier), which the loop calls;
//! - the calls a caller makes: `api.rs` (run, submit, resume, outcome), `interrupt.rs` (resuming with
//!   input), `audit.rs` (history, verification, forks), `replay.rs` (replay, effect resolution, the
//!   outbox), `streaming.rs` (streamed runs), `timers.rs` (waking runs whose sleep, deadline or
//!   message is due, and the timer service), `mail.rs` (sending external events), `schedules.rs`
//!   (schedules and their firings), `versions.rs` (older versions served beside the graph,
//!   migrations, the replay check).

mod api;
mod audit;
mod core;
mod drive;
mod due;
mod frontier;
mod interrupt;
mod mail;
mod replay;
mod schedules;
mod served;
mod step;
mod streaming;
mod timers;
mod versions;

pub use self::core::{Engine, EngineBuilder};
pub use crate::run::{RunOptions, RunOutcome};
pub use audit::{ChainReport, HistoryEntry, SalvageReport, run_history, salvage, verify_run};
pub use mail::{Sent, send_event};
pub use replay::ReplayOutcome;
pub use schedules::fired_run_id;
pub(crate) use served::{Continue, Servable};
pub(crate) use versions::check_served;
pub use versions::{AnyMigration, Migrated, Migration, ReplayCheck, ReplayVerdict};
