//! When a pooled connection is pinged before use.
//!
//! sqlx pings every connection it takes from the pool by default (`test_before_acquire`): one more
//! round trip before every commit and read, whose only use is to find connections the server or the
//! network has closed. The stores' pools ping instead only a connection that is suspect: idle for
//! [`IDLE_PING`] or more, or idle since before a connection failure of the same
//! store (its [`Suspicion`], shared by the store's clones and its pool's hook).
//! A connection the server closed while it was idle (a restart, `pg_terminate_backend`, `KILL`) fails
//! its first statement; the store runs that read, or that transaction's `BEGIN`, once more
//! (`SqlStore`'s `on_pool`, `transaction`), and the failure has made the pool's other idle
//! connections suspect: the second try pings them, drops the dead ones and gets a live or a new one,
//! instead of failing once per dead connection. (sqlx still pings a connection when it goes back to
//! the pool, in a task of its own, off the caller's path.)
//!
//! A failure makes only its own store's connections suspect: another store of the process may be on
//! another server, and one on the same server finds its dead connections the same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnectionMetadata;

/// How long a connection may sit idle in the pool before it is pinged when taken.
pub(crate) const IDLE_PING: Duration = Duration::from_secs(10);

/// A pool's last connection failure, which makes the connections idle since then suspect.
#[derive(Debug)]
pub(crate) struct Suspicion {
    /// What `last_failure` counts from.
    epoch: Instant,
    /// The last connection failure, in milliseconds since `epoch` plus one (0: none yet).
    last_failure: AtomicU64,
}

impl Suspicion {
    /// A pool's, with no failure yet.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Suspicion { epoch: Instant::now(), last_failure: AtomicU64::new(0) })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Notes that a connection of the pool failed (an sqlx error of class `Unavailable`).
    pub(crate) fn connection_failed(&self) {
        self.last_failure.store(self.now_ms().saturating_add(1), Ordering::Relaxed);
    }

    /// Whether a connection with `meta` must be pinged before use: idle for [`IDLE_PING`] or
    /// more, or idle since before (or about when: millisecond granularity) the pool's last
    /// connection failure.
    pub(crate) fn suspect(&self, meta: &PoolConnectionMetadata) -> bool {
        if meta.idle_for >= IDLE_PING {
            return true;
        }
        let last = self.last_failure.load(Ordering::Relaxed);
        let idle_ms = u64::try_from(meta.idle_for.as_millis()).unwrap_or(u64::MAX);
        last != 0 && self.now_ms().saturating_sub(last - 1) <= idle_ms.saturating_add(1)
    }

    /// The pool's `before_acquire` hook: pings a [`suspect`](Self::suspect) connection (an error
    /// drops it from the pool, which then tries another or opens a new one).
    pub(crate) async fn ping_if_suspect<C: sqlx::Connection>(
        self: Arc<Self>,
        conn: &mut C,
        meta: PoolConnectionMetadata,
    ) -> Result<bool, sqlx::Error> {
        if self.suspect(&meta) {
            conn.ping().await?;
        }
        Ok(true)
    }
}
