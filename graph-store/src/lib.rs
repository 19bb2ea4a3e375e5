//! The store contract of graph-runtime: what a checkpoint store keeps, the rules every backend
//! follows, and the suite that checks a backend against them.
//!
//! A store keeps, per run, one checkpoint per committed step and a run row (status, latest step,
//! version). [`Store::save_checkpoint`] commits a checkpoint, its idempotency key (unique, enforced by the
//! store inside the commit, never check-then-insert) and the run row update in one atomic operation, or
//! nothing, and reports a typed [`CommitOutcome`]. Stores are state-type agnostic: what they keep is
//! described in [`record`], whose envelope ([`record::encode`]/[`record::decode`]) a backend writes and
//! reads, so it never builds or interprets state bytes itself.
//!
//! # The rules, written once
//!
//! - [`commit::decide`]: the commit rule. A backend gathers the facts inside its transaction (is the
//!   key stored? is the step taken, and by which key? the run row's version; under a lease, is it still
//!   held?) and the rule says, in its one order, whether to write or which outcome to report.
//!   [`commit::decide_status`] is the rule of a status change.
//! - [`journal::decide_effect`]: the effect journal's compare-and-set.
//! - [`mailbox::Mailbox::apply`]: a run's mailbox (external events: send, dedupe, claim, reject).
//! - [`schedule::apply`]: a schedule's row (written under a version check).
//! - [`RunStatus::as_str`] / [`StatusKind`]: the persisted names of the statuses.
//! - [`RunInfo::after_commit`] / [`RunInfo::after_status`]: the run row a write leaves.
//!
//! # Layers
//!
//! [`RetryStore`] retries a store's retryable errors; [`lease::LeasedStore`] fences every write of a
//! store that leases runs to workers ([`lease::LeaseStore`]) with one lease, passed explicitly; the
//! queue of group commit ([`group::GroupQueue`]: writers queue, leaders take groups) is shared by the
//! backends that group concurrent commits into one sync.
//!
//! # Writing a backend
//!
//! Implement [`Store`] and run the conformance suite against it: with the `conformance` feature,
//! [`conformance`] has one `async fn` per rule of the contract (atomicity, the unique key under 100
//! concurrent commits, injected failures, restarts between operations) and a model-based check against
//! [`MemoryStore`]; the built-in backends pass the same suite.

pub mod canonical;
pub mod commit;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod envelope;
pub mod error;
pub mod events;
mod fail;
pub mod group;
pub mod journal;
pub mod keys;
pub mod known;
pub mod lease;
pub mod mailbox;
mod memory;
pub mod record;
pub mod retry;
mod run;
pub mod schedule;
mod store;

pub use commit::{CommitFacts, CommitOutcome, Verdict};
pub use error::{BoxError, StoreError};
pub use fail::FailPoint;
pub use journal::{EffectClass, EffectOutcome, EffectRecord, EffectState, OutboxRow, Resolution};
pub use memory::MemoryStore;
pub use record::{Checkpoint, CheckpointMeta, SCHEMA_VERSION, StateRepr, WaitingJoin, WorkItem};
pub use retry::RetryStore;
pub use run::{
    Interrupt, InterruptKind, PauseReason, ReadThrough, RunFilter, RunInfo, RunStatus, StatusKind,
    UnknownStatus, behind_run_row,
};
pub use store::{Durability, Integrity, Store};
