//! graphctl's exit codes and the failure a command returns (one line for stderr and its code), and the
//! store it opens by default: what every other file of the crate may name without importing `lib.rs`.

use std::process::ExitCode;

use graph_runtime::error::{Error, StoreError};

/// The store graphctl opens without `--store`: a sled folder.
pub const DEFAULT_STORE: &str = "data";

/// graphctl's exit codes: distinct per kind of failure, so scripts can tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exit {
    /// 0: done.
    Ok = 0,
    /// 1: any other failure (an I/O error, a run that failed again on `resume`, ...).
    Failure = 1,
    /// 2: the command line is wrong (clap's usage errors, an unknown store URL scheme).
    Usage = 2,
    /// 3: no such store, run, step or registered graph.
    NotFound = 3,
    /// 4: the store is in use by another process (`StoreError::Locked`).
    Locked = 4,
    /// 5: damaged data, or an event log that does not verify.
    Corrupted = 5,
    /// 6: this graphctl cannot do it: the run's graph is not registered in it (a state stored as
    /// deltas, `resume`), or the store's kind (an SQL feature) was not built in.
    Unsupported = 6,
    /// 7: the store cannot be reached for now (`StoreError::Unavailable`: a database server down or
    /// not answering, a SQLite file locked past the busy timeout); the same command may succeed later.
    Unavailable = 7,
    /// 8: `replay`: this build's code does not reproduce a stored run's history (a change that needs
    /// a patch marker or a new graph version), or a run's version is not registered; `migrate`: a
    /// run could not be migrated (the others were).
    Diverged = 8,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

/// Why a command failed: one line for stderr and an exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) exit: Exit,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(exit: Exit, message: impl Into<String>) -> Self {
        Failure { exit, message: message.into() }
    }
}

/// The exit code of a store error.
fn store_exit(e: &StoreError) -> Exit {
    match e {
        StoreError::Locked { .. } => Exit::Locked,
        StoreError::Unavailable { .. } => Exit::Unavailable,
        StoreError::Unsupported { .. } => Exit::Usage,
        StoreError::Corrupted { .. } | StoreError::CorruptedEvent { .. } => Exit::Corrupted,
        _ => Exit::Failure,
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::new(store_exit(&e), e.to_string())
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let exit = match &e {
            Error::Store(inner) => store_exit(inner),
            Error::RunNotFound { .. } | Error::StepNotFound { .. } => Exit::NotFound,
            Error::ExecutionCorrupted { .. } | Error::NondeterministicState { .. } => Exit::Corrupted,
            Error::Migration { .. } => Exit::Diverged,
            // The run is unchanged: the answer does not fit the question, or came too late.
            Error::ResumeInput { .. }
            | Error::DeadlinePassed { .. }
            | Error::RunExists { .. }
            | Error::EffectNotPending { .. } => Exit::Usage,
            _ => Exit::Failure,
        };
        Failure::new(exit, e.to_string())
    }
}
