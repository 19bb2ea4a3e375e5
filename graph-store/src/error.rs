//! The store's typed error. Every message says what happened and what to do about it; match on the
//! variants, never on the text.

use std::error::Error as StdError;

/// A boxed error cause.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// A store operation failed.
///
/// `Display` shows the whole cause: a backend error's source chain is part of the message (a user reads
/// "No space left on device", not only "the commit failed").
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Stored bytes are damaged: what they should hold cannot be read back.
    #[error("{}", corrupted_message(run.as_deref(), *step, file.as_deref(), detail, remedy))]
    Corrupted {
        /// The run whose records are damaged, when known.
        run: Option<String>,
        /// The step whose checkpoint is damaged, when known.
        step: Option<u64>,
        /// The damaged file of the store, when known.
        file: Option<std::path::PathBuf>,
        /// What is wrong.
        detail: String,
        /// What the user can do about it.
        remedy: &'static str,
    },
    /// A record was written by a newer version of this library.
    #[error(
        "stored schema version {found} is not supported (this build reads {supported}); upgrade graph-runtime"
    )]
    UnsupportedSchemaVersion {
        /// The version found.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// Another process holds the store.
    #[error("the store at {path:?} is in use by another process; stop it, or open another folder")]
    Locked {
        /// The store's path.
        path: std::path::PathBuf,
    },
    /// A write to a store opened read-only (`SqliteStore::open_read_only`).
    #[error(
        "the store at {} was opened read-only and refuses writes; open it for writing to change it",
        path.display()
    )]
    ReadOnly {
        /// The store's path.
        path: std::path::PathBuf,
    },
    /// An I/O error stopped the store: it refuses every operation until it is dropped and opened again,
    /// because after a failed write what its files hold is known only by reading them back.
    #[error(
        "the store at {} stopped after an I/O error and refuses every operation until it is opened again: \
         {cause}; every commit it acknowledged is on disk: fix the cause (free space, check the device), \
         drop this store and open it again",
        path.display()
    )]
    FailStopped {
        /// The store's path.
        path: std::path::PathBuf,
        /// The first error, with its cause.
        cause: String,
    },
    /// A stored event of a run's event log cannot be read back (see [`crate::events`]).
    #[error("event {seq} of the event log of run `{run}` is damaged: {detail}; {}", REMEDY_RECORD)]
    CorruptedEvent {
        /// The run.
        run: String,
        /// The event's sequence number.
        seq: u64,
        /// What is wrong.
        detail: String,
    },
    /// The store cannot be reached for now (a database server that is down or restarting, a connection
    /// the server closed, a database locked past its busy timeout): nothing was written by the failed
    /// call, and the same call may succeed later. The engine retries commits that fail this way for
    /// `EngineOptions::store_retry_timeout`.
    #[error("the store is unavailable: {message}{}", cause_chain(source.as_deref()))]
    Unavailable {
        /// What failed.
        message: String,
        /// The cause.
        #[source]
        source: Option<BoxError>,
    },
    /// The store does not do what was asked (`Store::backup_to` on a store without a backup of its
    /// own); `detail` says what to use instead.
    #[error("this store does not support {operation}: {detail}")]
    Unsupported {
        /// What was asked.
        operation: &'static str,
        /// Why not, and what to do instead.
        detail: String,
    },
    /// The backend failed (I/O, connection, ...).
    #[error("{message}{}", cause_chain(source.as_deref()))]
    Backend {
        /// What failed.
        message: String,
        /// The cause.
        #[source]
        source: Option<BoxError>,
    },
}

/// What a user can do about a damaged checkpoint record.
pub const REMEDY_RECORD: &str = "the bytes changed after they were written (a disk or memory fault, \
     or an edit of the store's files): restore the store from a backup, or start the run again";

fn corrupted_message(
    run: Option<&str>,
    step: Option<u64>,
    file: Option<&std::path::Path>,
    detail: &str,
    remedy: &str,
) -> String {
    let mut m = String::from("stored data is damaged");
    match (step, run) {
        (Some(step), Some(run)) => m.push_str(&format!(": checkpoint {step} of run `{run}`")),
        (None, Some(run)) => m.push_str(&format!(": run `{run}`")),
        _ => {}
    }
    if let Some(file) = file {
        m.push_str(&format!(" in {}", file.display()));
    }
    format!("{m}: {detail}; {remedy}")
}

/// `: cause: its cause: ...` for a source chain (empty without a source).
fn cause_chain(source: Option<&(dyn StdError + Send + Sync + 'static)>) -> String {
    let mut out = String::new();
    let mut next: Option<&(dyn StdError + 'static)> = source.map(|s| s as &(dyn StdError + 'static));
    while let Some(e) = next {
        // A cause whose text the one before already ends with (an error that says its source in its
        // own text: "error communicating with database: Connection refused", then "Connection
        // refused") is said once.
        let text = e.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = e.source();
    }
    out
}

impl StoreError {
    /// An [`StoreError::Unavailable`] error with a cause.
    pub fn unavailable(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Unavailable { message: message.into(), source: Some(source.into()) }
    }

    /// Whether the same call may succeed if tried again later (the store was unavailable; nothing was
    /// written). Every other error is permanent for that call.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }

    /// A backend error with a cause.
    pub fn backend(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Backend { message: message.into(), source: Some(source.into()) }
    }

    /// A damaged checkpoint record of `run` at `step` (its bytes do not read back as written).
    pub fn corrupted_record(run: impl Into<String>, step: u64, detail: impl Into<String>) -> Self {
        StoreError::Corrupted {
            run: Some(run.into()),
            step: Some(step),
            file: None,
            detail: detail.into(),
            remedy: REMEDY_RECORD,
        }
    }

    /// Damage in a file of the store.
    pub fn corrupted_file(
        file: impl Into<std::path::PathBuf>,
        detail: impl Into<String>,
        remedy: &'static str,
    ) -> Self {
        StoreError::Corrupted {
            run: None,
            step: None,
            file: Some(file.into()),
            detail: detail.into(),
            remedy,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use super::*;

    /// An error that says its cause in its own text, as sqlx's and many others do.
    #[derive(Debug)]
    struct Wraps(std::io::Error);

    impl fmt::Display for Wraps {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "error communicating with database: {}", self.0)
        }
    }

    impl StdError for Wraps {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_already_said_by_the_error_before_it_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let e = StoreError::unavailable("connecting", Wraps(io));
        assert_eq!(
            e.to_string(),
            "the store is unavailable: connecting: error communicating with database: Connection refused"
        );
        // A cause the error before does not say is kept.
        let e = StoreError::backend("writing", std::io::Error::other("disk full"));
        assert_eq!(e.to_string(), "writing: disk full");
    }
}
