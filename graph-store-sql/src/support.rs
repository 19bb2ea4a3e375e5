//! What the generic store and its dialects share: the classes of sqlx errors, the store error of each,
//! integers as the schema keeps them, and the migrations' statements.

use std::time::Duration;

use graph_store::StoreError;

/// The schema version this build writes and reads (`graph_schema_version`).
pub const SERVER_SCHEMA_VERSION: u32 = 5;

/// How long a session of the built-in stores may sit idle inside a transaction before the server ends
/// it (PostgreSQL's `idle_in_transaction_session_timeout`, MariaDB's `idle_transaction_timeout`; MySQL
/// has no such setting). The stores' transactions never wait on anything but their own next statement,
/// so only a stopped or stalled process comes near it; ending its session releases the run rows it
/// locked, and a worker whose lease has expired is then taken over instead of blocking the run. The
/// stopped process, when it goes on, finds its connection closed (`Unavailable`) and, retrying, its
/// lease gone (fenced).
pub const IDLE_IN_TRANSACTION: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs `statement`, a session setting the store works without, on a new connection: a server that
/// refuses it (an older version, another make) keeps its default, and the refusal is logged.
pub(crate) async fn optional_setting<DB: sqlx::Database>(conn: &mut DB::Connection, statement: &str)
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
{
    if let Err(e) = sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(conn).await {
        tracing::debug!(error = %e, statement, "session setting not applied");
    }
}

/// How often a transaction that lost a race (unique violation past the key, serialization failure,
/// deadlock) is run again before the error is reported.
pub const CONFLICT_RETRIES: u32 = 20;

/// How an sqlx error is handled (a [`Dialect`](crate::Dialect) says, by its error codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Class {
    /// A unique index refused a row.
    Unique,
    /// Lost a race (serialization failure, deadlock): run the transaction again.
    Conflict,
    /// The server cannot be reached for now.
    Unavailable,
    /// Anything else: permanent.
    Other,
}

/// The class of sqlx errors that do not come from the server's SQL engine (what a dialect's
/// `classify` answers for an error without a database code).
pub fn client_class(e: &sqlx::Error) -> Class {
    match e {
        // A certificate the TLS handshake refused (rustls reports it as invalid data): permanent.
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::InvalidData => Class::Other,
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed => Class::Unavailable,
        // The server closed the connection in the middle of a message.
        sqlx::Error::Protocol(_) => Class::Unavailable,
        _ => Class::Other,
    }
}

/// A typed store error for `e`. A store's own errors go through its `error` method, which also makes
/// the store's idle connections suspect when `e` says the server could not be reached.
pub(crate) fn store_error(class: Class, what: &str, e: sqlx::Error) -> StoreError {
    match class {
        Class::Unavailable => StoreError::unavailable(what.to_owned(), ServerError(e)),
        _ => StoreError::backend(what.to_owned(), ServerError(e)),
    }
}

/// The cause of a server store's [`StoreError`]: an sqlx error, said once.
///
/// sqlx's text of an error the server returned repeats the server's message as the error's source,
/// and PostgreSQL's adds the line of the server's own C source that raised it (`role "x" does not
/// exist at line 768: role "x" does not exist at line 768`). This says the server's message once,
/// with its code (PostgreSQL: the SQLSTATE, its detail and hint; MySQL: the error number and
/// SQLSTATE); any other sqlx error as sqlx says it, with its causes. [`ServerError::sqlx`] is the
/// error itself (`StoreError`'s `source()` downcasts to this type).
#[derive(Debug)]
pub struct ServerError(sqlx::Error);

impl ServerError {
    /// The sqlx error.
    pub fn sqlx(&self) -> &sqlx::Error {
        &self.0
    }

    /// The sqlx error, owned.
    pub fn into_sqlx(self) -> sqlx::Error {
        self.0
    }
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sqlx::Error::Database(db) = &self.0 else { return std::fmt::Display::fmt(&self.0, f) };
        #[cfg(feature = "postgres")]
        if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
            write!(f, "{} (SQLSTATE {})", pg.message(), pg.code())?;
            if let Some(detail) = pg.detail() {
                write!(f, "; {detail}")?;
            }
            if let Some(hint) = pg.hint() {
                write!(f, "; hint: {hint}")?;
            }
            return Ok(());
        }
        // MySQL's: "1045 (28000): Access denied for user …".
        std::fmt::Display::fmt(db, f)
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0 {
            // Said in full by `Display`.
            sqlx::Error::Database(_) => None,
            e => std::error::Error::source(e),
        }
    }
}

/// How long [`connect_error`] waits for its one connection of its own.
const CONNECT_PROBE: Duration = Duration::from_secs(2);

/// The error of a store whose pool could not open its first connection to `target` (`host:port,
/// database name`) within `timeout`, its acquire timeout.
///
/// sqlx's pool tries a refused connection (and a server starting up) again until that timeout and
/// then says only "pool timed out while waiting for an open connection". So then one more connection
/// is tried outside the pool (`probe`, for at most [`CONNECT_PROBE`]) to say why: the error stays
/// [`StoreError::Unavailable`], with the probe's error as its cause ("Connection refused"). Any other
/// error is classified by `classify` as everywhere else.
pub(crate) async fn connect_error<C>(
    backend: &str,
    target: &str,
    timeout: Duration,
    e: sqlx::Error,
    classify: fn(&sqlx::Error) -> Class,
    probe: impl std::future::Future<Output = Result<C, sqlx::Error>>,
) -> StoreError {
    let what = format!("connecting to {backend} at {target}");
    if !matches!(e, sqlx::Error::PoolTimedOut) {
        return store_error(classify(&e), &what, e);
    }
    let what = format!("{what}: no connection within {timeout:?}");
    let message = match tokio::time::timeout(CONNECT_PROBE, probe).await {
        Ok(Err(cause)) => return StoreError::unavailable(what, ServerError(cause)),
        Ok(Ok(_)) => format!("{what} (one more attempt connected: the server may be back)"),
        Err(_) => format!(
            "{what}: no answer to one more attempt within {CONNECT_PROBE:?} (a {backend} server \
             that does not answer, or not a {backend} server)"
        ),
    };
    StoreError::Unavailable { message, source: None }
}

/// `host:port, database name` of a connection, for errors (never the user or the password).
pub(crate) fn target(host: &str, port: u16, database: Option<&str>) -> String {
    match database {
        Some(db) => format!("{host}:{port}, database {db}"),
        None => format!("{host}:{port}"),
    }
}

/// What a transaction attempt ended with when it did not return an outcome.
#[derive(Debug)]
pub(crate) enum Abort {
    /// An sqlx error and its class.
    Sql(Class, sqlx::Error),
    /// A store error (a damaged row, an injected failure).
    Store(StoreError),
}

impl From<StoreError> for Abort {
    fn from(e: StoreError) -> Self {
        Abort::Store(e)
    }
}

/// A `u64` (step, version, seq) as the `BIGINT` the schema keeps, saturating.
pub(crate) fn db_int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A `BIGINT` read back as a `u64`.
pub(crate) fn from_db_int(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A short pause before a transaction that lost a race runs again (grows with the attempt, a few ms).
pub(crate) async fn conflict_pause(attempt: u32) {
    tokio::time::sleep(Duration::from_millis(u64::from(attempt.min(10)) * 2 + 1)).await;
}

/// The statements of one migration file, split on `;` at the end of a line outside a `$$`-quoted
/// function body (the files hold no other `;` and no other dollar quotes); comment lines are left out.
pub(crate) fn statements(file: &str) -> impl Iterator<Item = String> + '_ {
    let mut current = String::new();
    let mut out = Vec::new();
    let mut in_body = false;
    for line in file.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("--") || trimmed.is_empty() {
            continue;
        }
        current.push_str(line);
        current.push('\n');
        in_body ^= line.matches("$$").count() % 2 == 1;
        if trimmed.ends_with(';') && !in_body {
            out.push(std::mem::take(&mut current).trim().trim_end_matches(';').to_owned());
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_owned());
    }
    out.into_iter()
}

/// The error for a database whose schema is newer than this build.
pub(crate) fn newer_schema(found: i64) -> StoreError {
    StoreError::UnsupportedSchemaVersion {
        found: u32::try_from(found).unwrap_or(u32::MAX),
        supported: SERVER_SCHEMA_VERSION,
    }
}

#[cfg(test)]
mod tests {
    use super::statements;

    #[test]
    fn a_function_body_is_one_statement_and_the_files_split_on_their_semicolons() {
        let file = "-- a comment;\nCREATE TABLE a (x INT);\n\nCREATE FUNCTION f() RETURNS INT LANGUAGE plpgsql AS $$\n\
                    BEGIN\n    -- inside;\n    PERFORM 1;\n    RETURN 2;\nEND\n$$;\nCREATE INDEX i ON a (x);\n";
        let got: Vec<String> = statements(file).collect();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0], "CREATE TABLE a (x INT)");
        assert!(got[1].starts_with("CREATE FUNCTION f()") && got[1].contains("PERFORM 1;\n    RETURN 2;"));
        assert!(got[1].ends_with("$$"), "{:?}", got[1]);
        assert_eq!(got[2], "CREATE INDEX i ON a (x)");
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn the_commit_group_migration_is_one_statement() {
        let file = include_str!("../migrations/postgres/0003_commit_group.sql");
        let got: Vec<String> = statements(file).collect();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].contains("RETURN l_written;"));
    }

    #[cfg(feature = "mysql")]
    #[test]
    fn mysql_schema_3_has_no_statement() {
        let file = include_str!("../migrations/mysql/0003_commit_group.sql");
        assert_eq!(statements(file).count(), 0);
    }
}
