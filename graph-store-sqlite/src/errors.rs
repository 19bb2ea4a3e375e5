//! What the store, its writer and its log check share: SQLite's errors as store errors, the flag of a
//! store stopped by an I/O error, integers, and the files beside the database.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use graph_store::StoreError;
use rusqlite::Connection;

use crate::vfs;

/// What to do about a damaged database file.
pub(crate) const REMEDY_FILE: &str = "the database file is damaged (a disk fault, or a file that is not this store's \
     database): restore it from a backup; the store changed nothing";

/// Set once an I/O error of the writing connection stopped the store: from then on it refuses every
/// operation with `StoreError::FailStopped` until it is dropped and opened again. After a failed write
/// or sync what the files hold is known only by reading them back: the kernel may have dropped the
/// written pages, and a later sync can succeed without them (docs/stores.md, "Fail-stop after an I/O
/// error, not after a full disk"). A full disk at a write (SQLite's `SQLITE_FULL`) does not stop the
/// store: that write failed as a whole, and the next transaction writes its frames again.
#[derive(Default)]
pub(crate) struct Stopped(Mutex<Option<String>>);

impl Stopped {
    /// `FailStopped` once the store stopped.
    pub(crate) fn check(&self, path: &Path) -> Result<(), StoreError> {
        match &*self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            None => Ok(()),
            Some(cause) => Err(StoreError::FailStopped { path: path.to_owned(), cause: cause.clone() }),
        }
    }

    /// Stops the store after `error`, an I/O error of the writing connection ([`is_io_failure`]), and
    /// returns the error to report.
    pub(crate) fn stop(&self, path: &Path, error: StoreError) -> StoreError {
        let mut stopped = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let cause = stopped.get_or_insert_with(|| error.to_string()).clone();
        tracing::error!(store = %path.display(), %cause, "store stopped after an I/O error");
        StoreError::FailStopped { path: path.to_owned(), cause }
    }
}

/// The file SQLite keeps beside the database file `path` under `suffix`: its write-ahead log (`-wal`)
/// or the log's index (`-shm`).
pub(crate) fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The operating system's error opening the database file `path` for writing, never creating it;
/// `None` when it opens.
pub(crate) fn write_open_error(path: &Path) -> Option<std::io::Error> {
    std::fs::OpenOptions::new().read(true).write(true).open(path).err()
}

/// A SQLite error as a store error: busy or locked → `Unavailable` (nothing was written; retry),
/// damaged or not a database → `Corrupted` naming the file, anything else → `Backend`.
pub(crate) fn sql_error(path: &Path, what: &str, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    // A stored value of another type than the schema gives its column (a NULL or an integer where a
    // record's bytes are): the file was damaged in a way SQLite's own checks let through.
    if matches!(e, rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::FromSqlConversionFailure(..)) {
        return StoreError::corrupted_file(
            path,
            format!("{what}: a stored value has the wrong type: {e}"),
            REMEDY_FILE,
        );
    }
    if let rusqlite::Error::SqliteFailure(f, _) = &e {
        match f.code {
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
                return StoreError::unavailable(
                    format!(
                        "{what}: {} is locked by another connection past the busy timeout",
                        path.display()
                    ),
                    e,
                );
            }
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => {
                return StoreError::corrupted_file(path, format!("{what}: {e}"), REMEDY_FILE);
            }
            _ => {}
        }
    }
    StoreError::backend(format!("{what} ({})", path.display()), e)
}

/// As [`sql_error`], for an error `conn` returned, with what SQLite's own text leaves out of an I/O
/// failure, a file it cannot open or a full disk (it says "disk I/O error", "unable to open database
/// file" or "database or disk is full", whatever failed): the operation that failed, by SQLite's
/// extended code, and the operating system's error ([`vfs::os_error`]) as the cause, e.g. "committing a write transaction (…/runs.sqlite): disk I/O
/// error syncing a file (SQLite code 1034): Input/output error (os error 5)".
pub(crate) fn sql_error_on(conn: &Connection, path: &Path, what: &str, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    let rusqlite::Error::SqliteFailure(f, _) = &e else { return sql_error(path, what, e) };
    match f.code {
        ErrorCode::SystemIoFailure => {
            let operation = io_operation(f.extended_code).map(|op| format!(" {op}")).unwrap_or_default();
            let message = format!(
                "{what} ({}): disk I/O error{operation} (SQLite code {})",
                path.display(),
                f.extended_code
            );
            match vfs::os_error(conn) {
                Some(os) => StoreError::backend(message, os),
                // SQLite's own text for the code would only repeat "disk I/O error".
                None => StoreError::backend(message, "the operating system reported no error number"),
            }
        }
        // A file of the database (its log, its index) that SQLite could not open or create: a file
        // system turned read-only, a folder the process may not write. SQLite's last OS error is
        // that of its last try (ENOENT, opening the missing log read-only); the database file
        // opened for writing, never created, gives the cause.
        ErrorCode::CannotOpen => match write_open_error(path) {
            Some(io) => StoreError::backend(
                format!(
                    "{what} ({}): SQLite cannot open a file of the database (SQLite code {})",
                    path.display(),
                    f.extended_code
                ),
                io,
            ),
            None => sql_error(path, what, e),
        },
        // The `unix` VFS answers this to a write that found no space (ENOSPC); the store sets no page
        // limit, the other way to it.
        ErrorCode::DiskFull => {
            StoreError::backend(format!("{what} ({}): the disk is full", path.display()), *f)
        }
        _ => sql_error(path, what, e),
    }
}

/// What failed, by an I/O error's extended code (SQLite's `SQLITE_IOERR_*`), when the code says.
fn io_operation(extended_code: std::ffi::c_int) -> Option<&'static str> {
    use rusqlite::ffi;
    Some(match extended_code {
        ffi::SQLITE_IOERR_READ | ffi::SQLITE_IOERR_SHORT_READ => "reading a file",
        ffi::SQLITE_IOERR_WRITE => "writing a file",
        ffi::SQLITE_IOERR_FSYNC => "syncing a file",
        ffi::SQLITE_IOERR_DIR_FSYNC => "syncing a folder",
        ffi::SQLITE_IOERR_TRUNCATE => "truncating a file",
        ffi::SQLITE_IOERR_FSTAT => "reading a file's size",
        ffi::SQLITE_IOERR_DELETE | ffi::SQLITE_IOERR_DELETE_NOENT => "deleting a file",
        ffi::SQLITE_IOERR_CLOSE => "closing a file",
        ffi::SQLITE_IOERR_LOCK
        | ffi::SQLITE_IOERR_UNLOCK
        | ffi::SQLITE_IOERR_RDLOCK
        | ffi::SQLITE_IOERR_CHECKRESERVEDLOCK => "locking a file",
        ffi::SQLITE_IOERR_SHMOPEN
        | ffi::SQLITE_IOERR_SHMSIZE
        | ffi::SQLITE_IOERR_SHMLOCK
        | ffi::SQLITE_IOERR_SHMMAP => "on the log's shared-memory index",
        ffi::SQLITE_IOERR_MMAP => "mapping a file",
        _ => return None,
    })
}

/// Whether `e` is an I/O error (SQLite's `SQLITE_IOERR` and its extended codes; not `SQLITE_FULL`).
pub(crate) fn is_io_failure(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::SystemIoFailure)
}

/// Whether `e` is a primary-key or unique-constraint violation (by extended error code).
pub(crate) fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
    )
}

/// A u64 of the API as SQLite's i64.
pub(crate) fn int(v: u64) -> Result<i64, StoreError> {
    i64::try_from(v)
        .map_err(|_| StoreError::backend("a value does not fit SQLite's integers", format!("{v}")))
}

/// A u64 bound of a range query, clamped to SQLite's integers (nothing is stored beyond them).
pub(crate) fn bound(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A stored i64 back as the API's u64.
pub(crate) fn uint(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}
