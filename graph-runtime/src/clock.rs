//! The clock an engine reads for what happens in time: the recorded time of each checkpoint
//! ([`Ctx::now`](crate::Ctx::now)), when a sleep ends ([`Ctx::sleep`](crate::Ctx::sleep)), a question's
//! deadline, and when its timer service wakes a run.
//!
//! [`SystemClock`] (the default) is the wall clock. [`TestClock`] is moved by the test itself, so a
//! workflow that sleeps for three days runs in milliseconds and the same way every time:
//!
//! ```
//! use std::time::Duration;
//! use graph_runtime::clock::{Clock, TestClock};
//!
//! let clock = TestClock::at_ms(1_000);
//! clock.advance(Duration::from_secs(3 * 24 * 3600));
//! assert_eq!(clock.now_ms(), 1_000 + 3 * 24 * 3600 * 1000);
//! ```

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

/// A source of the current time, ms since the Unix epoch, and a way to wait for a time.
pub trait Clock: Debug + Send + Sync + 'static {
    /// The current time, ms since the Unix epoch.
    fn now_ms(&self) -> u64;

    /// Resolves once [`Clock::now_ms`] has reached `at_ms` (at once when it has).
    fn sleep_until(&self, at_ms: u64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// The wall clock (`SystemTime`); waits with tokio's timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        ms_of(SystemTime::now())
    }

    fn sleep_until(&self, at_ms: u64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            loop {
                let now = self.now_ms();
                if now >= at_ms {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(at_ms - now)).await;
            }
        })
    }
}

/// A clock that moves only when told ([`TestClock::advance`], [`TestClock::set_ms`]); clones share
/// one time. Whatever waits on it ([`Clock::sleep_until`]: an engine's timer service) wakes when it is
/// moved past the time it waits for.
#[derive(Debug, Clone)]
pub struct TestClock {
    now: Arc<watch::Sender<u64>>,
}

impl TestClock {
    /// A clock standing at `ms` since the Unix epoch.
    pub fn at_ms(ms: u64) -> Self {
        TestClock { now: Arc::new(watch::Sender::new(ms)) }
    }

    /// A clock standing at `time`.
    pub fn at(time: SystemTime) -> Self {
        TestClock::at_ms(ms_of(time))
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.now.send_modify(|now| *now = now.saturating_add(by));
    }

    /// Sets the clock to `ms` (it may go backwards: a test's own choice).
    pub fn set_ms(&self, ms: u64) {
        self.now.send_replace(ms);
    }
}

impl Clock for TestClock {
    fn now_ms(&self) -> u64 {
        *self.now.borrow()
    }

    fn sleep_until(&self, at_ms: u64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let mut rx = self.now.subscribe();
        Box::pin(async move {
            // The sender lives as long as `self`: `wait_for` ends only when the time is reached.
            let _ = rx.wait_for(|now| *now >= at_ms).await;
        })
    }
}

/// `time` as ms since the Unix epoch (0 before it).
pub(crate) fn ms_of(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `ms` since the Unix epoch as a time.
pub(crate) fn time_of(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_test_clock_wakes_its_sleepers_when_moved_past_their_time() {
        let clock = TestClock::at_ms(10);
        let waiter = {
            let clock = clock.clone();
            tokio::spawn(async move { clock.sleep_until(25).await })
        };
        tokio::task::yield_now().await;
        clock.advance(Duration::from_millis(10));
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "20 is before 25");
        clock.advance(Duration::from_millis(5));
        tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap();
        // A time already reached resolves at once.
        clock.sleep_until(3).await;
    }
}
