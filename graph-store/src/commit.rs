//! The commit rule, written once: every backend gathers the facts of a commit inside the transaction
//! that writes it and asks [`decide`] what to do; a status change asks [`decide_status`]. The order of
//! the checks, and what each outcome reports, exist only here.
//!
//! How a backend gathers the facts is its own: a lookup under a lock (the memory and sled stores), a
//! unique index that refuses the key's or the checkpoint's row (the SQL stores: the refusal *is* the
//! fact). A fact the backend learns only by trying to write (a checkpoint row the primary key refuses)
//! is given as absent first; if the write is refused, the backend rolls back what it wrote and asks
//! again with the fact it learnt.
//!
//! ```
//! use graph_store::commit::{CommitFacts, Verdict, decide};
//! use graph_store::CommitOutcome;
//!
//! let facts = CommitFacts::new("sha256:k", 3);
//! assert_eq!(decide(&facts.version(3)), Verdict::Write { version: 4 });
//! assert_eq!(
//!     decide(&facts.version(3).key_seen(true)),
//!     Verdict::Refuse(CommitOutcome::AlreadyCommitted { version: 3 })
//! );
//! // The step comes before the version.
//! assert_eq!(
//!     decide(&facts.version(5).step_taken_by(Some("sha256:other"))),
//!     Verdict::Refuse(CommitOutcome::StepTaken { existing_key: "sha256:other".into(), version: 5 })
//! );
//! assert_eq!(decide(&facts.version(5)), Verdict::Refuse(CommitOutcome::VersionConflict { current: 5 }));
//! ```

/// What a commit did. Never an error for the expected races: each is a typed outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitOutcome {
    /// Written; the run row is now at `version`.
    Committed {
        /// The run's new version.
        version: u64,
    },
    /// This exact commit (same idempotency key) happened before: treat as success.
    AlreadyCommitted {
        /// The run's current version.
        version: u64,
    },
    /// A different result was committed for this step: adopt the stored one, discard ours.
    StepTaken {
        /// The stored checkpoint's idempotency key.
        existing_key: String,
        /// The run's current version.
        version: u64,
    },
    /// The run row moved past the version the writer expected.
    VersionConflict {
        /// The run's current version (0: no such run).
        current: u64,
    },
    /// The commit was made under a worker's lease (a [`crate::lease::LeasedStore`]) that is no longer
    /// the run's live lease (expired, or taken over by another worker): nothing was written, and the
    /// writer must stop touching the run. Only stores that lease runs to workers report it.
    Fenced,
}

/// What a backend found about one commit of a checkpoint, inside the transaction that would write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommitFacts<'a> {
    /// The commit's idempotency key.
    pub key: &'a str,
    /// The version the writer expects the run row at (0: a run's first commit).
    pub expected_version: u64,
    /// The key is stored already.
    pub key_seen: bool,
    /// The commit is made under a worker's lease that is not the run's live lease any more (checked
    /// under the lock on the run row that a claim also needs). Always false without a lease.
    pub fenced: bool,
    /// The idempotency key of the checkpoint stored for the commit's step, if one is.
    pub step_taken_by: Option<&'a str>,
    /// The run row's version (0: the run has no row).
    pub version: u64,
}

impl<'a> CommitFacts<'a> {
    /// The facts of a commit of `key` expecting `expected_version`, before anything is found: the key
    /// not stored, not fenced, the step free, no run row.
    pub fn new(key: &'a str, expected_version: u64) -> Self {
        CommitFacts { key, expected_version, key_seen: false, fenced: false, step_taken_by: None, version: 0 }
    }

    /// With the key found stored (or not).
    pub fn key_seen(self, seen: bool) -> Self {
        CommitFacts { key_seen: seen, ..self }
    }

    /// With the lease found lost (or not).
    pub fn fenced(self, fenced: bool) -> Self {
        CommitFacts { fenced, ..self }
    }

    /// With the key of the checkpoint stored for the step (`None`: the step is free).
    pub fn step_taken_by(self, key: Option<&'a str>) -> Self {
        CommitFacts { step_taken_by: key, ..self }
    }

    /// With the run row found at `version` (0: no row).
    pub fn version(self, version: u64) -> Self {
        CommitFacts { version, ..self }
    }
}

/// What the rule says to do with a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Write it: the run row goes to `version` (one past the current one), and once the writes are
    /// committed the outcome is `Committed { version }`.
    Write {
        /// The run row's version after the write.
        version: u64,
    },
    /// Write nothing, and report this outcome.
    Refuse(CommitOutcome),
}

impl Verdict {
    /// The outcome to report: `Committed` for a `Write` (once its writes are committed), the refusal
    /// otherwise.
    pub fn outcome(self) -> CommitOutcome {
        match self {
            Verdict::Write { version } => CommitOutcome::Committed { version },
            Verdict::Refuse(outcome) => outcome,
        }
    }

    /// Whether the commit is to be written.
    pub fn writes(&self) -> bool {
        matches!(self, Verdict::Write { .. })
    }
}

/// The commit rule of [`crate::Store::save_checkpoint`], in its order:
///
/// 1. the key is stored → `AlreadyCommitted` (this exact commit happened: treat as success);
/// 2. under a lease that is lost → `Fenced` (the writer must stop);
/// 3. the step is taken by another key → `StepTaken` (adopt the stored checkpoint); taken by this key
///    (its key row missing: a damaged index of keys) → `AlreadyCommitted`;
/// 4. the run row is at another version than expected → `VersionConflict`;
/// 5. else write, the run row one version past.
pub fn decide(f: &CommitFacts<'_>) -> Verdict {
    let refuse = Verdict::Refuse;
    if f.key_seen {
        return refuse(CommitOutcome::AlreadyCommitted { version: f.version });
    }
    if f.fenced {
        return refuse(CommitOutcome::Fenced);
    }
    match f.step_taken_by {
        Some(existing) if existing == f.key => {
            return refuse(CommitOutcome::AlreadyCommitted { version: f.version });
        }
        Some(existing) => {
            return refuse(CommitOutcome::StepTaken {
                existing_key: existing.to_owned(),
                version: f.version,
            });
        }
        None => {}
    }
    if f.version != f.expected_version {
        return refuse(CommitOutcome::VersionConflict { current: f.version });
    }
    Verdict::Write { version: f.version + 1 }
}

/// The rule of [`crate::Store::set_status`], in its order: no run row → `VersionConflict { current: 0
/// }`; under a lease that is lost → `Fenced`; the row at another version than expected →
/// `VersionConflict`; else write, the row one version past ([`crate::RunInfo::after_status`]).
///
/// ```
/// use graph_store::commit::{Verdict, decide_status};
/// use graph_store::CommitOutcome;
///
/// assert_eq!(decide_status(Some(2), false, 2), Verdict::Write { version: 3 });
/// assert_eq!(decide_status(None, false, 0), Verdict::Refuse(CommitOutcome::VersionConflict { current: 0 }));
/// assert_eq!(decide_status(Some(2), true, 2), Verdict::Refuse(CommitOutcome::Fenced));
/// ```
pub fn decide_status(version: Option<u64>, fenced: bool, expected_version: u64) -> Verdict {
    let Some(version) = version else {
        return Verdict::Refuse(CommitOutcome::VersionConflict { current: 0 });
    };
    if fenced {
        return Verdict::Refuse(CommitOutcome::Fenced);
    }
    if version != expected_version {
        return Verdict::Refuse(CommitOutcome::VersionConflict { current: version });
    }
    Verdict::Write { version: version + 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every combination of the facts: the outcome follows the first fact that applies, in the rule's
    /// order, whatever the others are.
    #[test]
    fn the_first_fact_that_applies_decides() {
        for key_seen in [false, true] {
            for fenced in [false, true] {
                for step in [None, Some("k"), Some("other")] {
                    for version in [0, 3, 4] {
                        let f = CommitFacts::new("k", 3)
                            .key_seen(key_seen)
                            .fenced(fenced)
                            .step_taken_by(step)
                            .version(version);
                        let expected = if key_seen {
                            CommitOutcome::AlreadyCommitted { version }
                        } else if fenced {
                            CommitOutcome::Fenced
                        } else if step == Some("k") {
                            CommitOutcome::AlreadyCommitted { version }
                        } else if let Some(k) = step {
                            CommitOutcome::StepTaken { existing_key: k.to_owned(), version }
                        } else if version != 3 {
                            CommitOutcome::VersionConflict { current: version }
                        } else {
                            CommitOutcome::Committed { version: 4 }
                        };
                        assert_eq!(decide(&f).outcome(), expected, "{f:?}");
                    }
                }
            }
        }
    }
}
