//! Opening the store `--store` names: one function, one match on the URL scheme.
//!
//! A plain path is a sled folder, which must exist and hold a store: graphctl never creates one; a plain
//! path ending in `.sqlite` or `.db` that is a file is a SQLite database, as `sqlite://<path>` is. The SQL
//! schemes (`sqlite://`, `postgres://`, `mysql://`) belong to the SQL stores of features `sqlite`,
//! `postgres` and `mysql`; a graphctl built without the scheme's feature says so and exits 6. A command
//! that only reads opens a SQLite store read-only (`SqliteStore::open_read_only`: nothing written, and
//! a file system mounted read-only is no obstacle).

use std::path::Path;
use std::sync::Arc;

use super::exit::{Exit, Failure};
use graph_runtime::store::Store;

/// Opens the store `spec` names, for a command that `writes` or only reads.
pub(crate) async fn open_store(spec: &str, writes: bool) -> Result<Arc<dyn Store>, Failure> {
    match spec.split_once("://") {
        None if is_sqlite_file(Path::new(spec)) => open_sqlite(Path::new(spec), writes),
        None => open_folder(Path::new(spec)),
        // Each SQL store behind its feature; a build without the feature says so.
        Some(("sqlite", path)) => open_sqlite(Path::new(path), writes),
        #[cfg(feature = "postgres")]
        Some(("postgres" | "postgresql", _)) => {
            Ok(Arc::new(graph_runtime::store::PostgresStore::connect(spec).await?))
        }
        #[cfg(not(feature = "postgres"))]
        Some(("postgres" | "postgresql", _)) => Err(not_built("postgres")),
        #[cfg(feature = "mysql")]
        Some(("mysql" | "mariadb", _)) => {
            Ok(Arc::new(graph_runtime::store::MySqlStore::connect(spec).await?))
        }
        #[cfg(not(feature = "mysql"))]
        Some(("mysql" | "mariadb", _)) => Err(not_built("mysql")),
        Some((scheme, _)) => Err(Failure::new(
            Exit::Usage,
            format!(
                "unknown store URL scheme `{scheme}://`: give a sled folder path, or a `sqlite://`, \
                 `postgres://` or `mysql://` URL"
            ),
        )),
    }
}

#[cfg_attr(
    all(feature = "postgres", feature = "mysql", feature = "sqlite"),
    allow(dead_code, reason = "every store is built in")
)]
fn not_built(feature: &str) -> Failure {
    Failure::new(Exit::Unsupported, format!("this graphctl was built without the `{feature}` feature"))
}

/// The `--store` of a copy, at `to`, of the store `spec` names (`backup` writes one of the same kind):
/// a SQLite file's copy is opened as one whatever its name.
pub(crate) fn copy_spec(spec: &str, to: &Path) -> String {
    let sqlite = match spec.split_once("://") {
        None => is_sqlite_file(Path::new(spec)),
        Some((scheme, _)) => scheme == "sqlite",
    };
    if sqlite { format!("sqlite://{}", to.display()) } else { to.display().to_string() }
}

/// A plain path naming a SQLite database: an existing file ending in `.sqlite` or `.db`.
fn is_sqlite_file(path: &Path) -> bool {
    path.is_file() && path.extension().is_some_and(|e| e == "sqlite" || e == "db")
}

/// A SQLite database file, which must exist: `SqliteStore::open` would create it. Read-only unless the
/// command `writes`.
#[cfg(feature = "sqlite")]
fn open_sqlite(path: &Path, writes: bool) -> Result<Arc<dyn Store>, Failure> {
    if !path.is_file() {
        let why = if path.is_dir() {
            "it is a folder, not a SQLite database file"
        } else {
            "the SQLite database file does not exist (graphctl never creates one)"
        };
        return Err(Failure::new(Exit::NotFound, format!("no store at {}: {why}", path.display())));
    }
    if writes {
        Ok(Arc::new(graph_runtime::store::SqliteStore::open(path)?))
    } else {
        Ok(Arc::new(graph_runtime::store::SqliteStore::open_read_only(path)?))
    }
}

#[cfg(not(feature = "sqlite"))]
fn open_sqlite(_path: &Path, _writes: bool) -> Result<Arc<dyn Store>, Failure> {
    Err(not_built("sqlite"))
}

/// A sled store's folder, checked before opening: `SledStore::open` creates what is missing.
fn open_folder(path: &Path) -> Result<Arc<dyn Store>, Failure> {
    check_folder(path)?;
    Ok(Arc::new(graph_runtime::store::SledStore::open(path)?))
}

/// A sled store's folder, opened with its index rebuilt from its commit log (`graphctl rebuild`).
pub(crate) fn open_rebuilt(spec: &str) -> Result<Arc<dyn Store>, Failure> {
    let path = Path::new(spec);
    if spec.contains("://") || is_sqlite_file(path) {
        return Err(Failure::new(
            Exit::Usage,
            "rebuild is for a sled store's folder (its index is rebuilt from its commit log); a SQL \
             store's damage is repaired from a backup (`graphctl restore`, docs/stores.md)",
        ));
    }
    // The index itself may be gone: the commit log (`wal/`) is what a rebuild needs.
    if !path.join("wal").is_dir() {
        check_folder(path)?;
    }
    let options = graph_runtime::store::SledOptions::default().rebuild_index(true);
    Ok(Arc::new(graph_runtime::store::SledStore::open_with(path, options)?))
}

/// The folder exists and holds a store (its `db/`); otherwise say which of its subfolders do.
fn check_folder(path: &Path) -> Result<(), Failure> {
    let shown = path.display();
    if !path.exists() {
        return Err(Failure::new(
            Exit::NotFound,
            format!(
                "no store at {shown}: the folder does not exist (graphctl never creates one; pass `--store`)"
            ),
        ));
    }
    if !path.is_dir() {
        return Err(Failure::new(Exit::NotFound, format!("no store at {shown}: it is not a folder")));
    }
    if path.join("db").is_dir() {
        return Ok(());
    }
    let stores: Vec<String> = std::fs::read_dir(path)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.path().join("db").is_dir())
                .map(|e| e.path().display().to_string())
                .collect()
        })
        .unwrap_or_default();
    let hint = match stores.as_slice() {
        [] => String::new(),
        found => {
            let mut found = found.to_vec();
            found.sort();
            format!("; stores inside it: {}", found.join(", "))
        }
    };
    Err(Failure::new(
        Exit::NotFound,
        format!("no store at {shown}: the folder holds no graph-runtime store{hint}"),
    ))
}
