//! What the database-server backends share: unique database names, URLs, async work in `Drop`.

use std::sync::atomic::{AtomicU64, Ordering};

/// A database name no other test (of this or another process) uses: `prefix_pid_counter_nanos`.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{prefix}_{}_{}_{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// `url` with its database (the path) replaced by `database`; the query string is kept.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[scheme_end..].find('/') {
        Some(slash) => &base[..scheme_end + slash],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{database}?{q}"),
        None => format!("{base}/{database}"),
    }
}

/// Runs `work` to completion on a runtime of its own, on a thread of its own (from `Drop`, inside or
/// outside a runtime); a failure is printed, never a panic.
pub fn on_own_runtime<F, E>(work: F)
where
    F: std::future::Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let done = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        rt.block_on(work)
    })
    .join();
    match done {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("cleaning up a test database failed: {e}"),
        Err(_) => eprintln!("cleaning up a test database panicked"),
    }
}
