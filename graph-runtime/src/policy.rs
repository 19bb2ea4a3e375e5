//! Execution policies: concurrency, timeouts, retries, budgets, backpressure. Defaults follow the
//! concurrency options of LangGraph-Go.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::NodeError;
use crate::keys::{PathId, jitter_unit};
use crate::state::ConflictPolicy;

/// Engine-wide options.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use graph_runtime::EngineOptions;
/// let opts = EngineOptions::default()
///     .max_concurrent_nodes(3)
///     .default_node_timeout(Duration::from_secs(5));
/// assert_eq!(opts.queue_depth, 1024);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EngineOptions {
    /// Items of one run executing at once (default 8).
    pub max_concurrent_nodes: usize,
    /// Items of one node executing at once within a run, unless the node sets its own (default: no
    /// limit beyond `max_concurrent_nodes`).
    pub max_per_node_concurrency: Option<usize>,
    /// Work items admitted engine-wide (queued for a worker or running), across all runs (default 1024).
    pub queue_depth: usize,
    /// How long an item may wait for admission before its run checkpoints and pauses (default 30 s).
    pub backpressure_timeout: Duration,
    /// Timeout of a node attempt unless the node sets its own (default 30 s).
    pub default_node_timeout: Duration,
    /// Wall-clock budget of one `run`/`resume` call (default 10 min).
    pub run_wall_clock_budget: Duration,
    /// Steps a run may take before it fails with `MaxStepsExceeded` (default 10,000).
    pub max_steps: u64,
    /// Retry policy of nodes that set none (default: no retry).
    pub default_retry: RetryPolicy,
    /// What two writers of one field in one step mean (default `Fail`).
    pub conflict_policy: ConflictPolicy,
    /// How long a store call that failed retryably (`StoreError::is_retryable`: a database server down
    /// or restarting, a connection it closed) is retried, with backoff from 10 ms to 1 s, before the
    /// error stops the run (default 30 s; zero: never retried). See `store::RetryStore`.
    pub store_retry_timeout: Duration,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            max_concurrent_nodes: 8,
            max_per_node_concurrency: None,
            queue_depth: 1024,
            backpressure_timeout: Duration::from_secs(30),
            default_node_timeout: Duration::from_secs(30),
            run_wall_clock_budget: Duration::from_secs(600),
            max_steps: 10_000,
            default_retry: RetryPolicy::none(),
            conflict_policy: ConflictPolicy::Fail,
            store_retry_timeout: Duration::from_secs(30),
        }
    }
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty),* $(,)?) => {$(
        $(#[$doc])*
        pub fn $name(mut self, value: $ty) -> Self {
            self.$name = value;
            self
        }
    )*};
}

impl EngineOptions {
    setters! {
        /// Sets [`EngineOptions::max_concurrent_nodes`] (at least 1).
        max_concurrent_nodes: usize,
        /// Sets [`EngineOptions::queue_depth`] (at least 1).
        queue_depth: usize,
        /// Sets [`EngineOptions::backpressure_timeout`].
        backpressure_timeout: Duration,
        /// Sets [`EngineOptions::default_node_timeout`].
        default_node_timeout: Duration,
        /// Sets [`EngineOptions::run_wall_clock_budget`].
        run_wall_clock_budget: Duration,
        /// Sets [`EngineOptions::max_steps`].
        max_steps: u64,
        /// Sets [`EngineOptions::default_retry`].
        default_retry: RetryPolicy,
        /// Sets [`EngineOptions::conflict_policy`].
        conflict_policy: ConflictPolicy,
        /// Sets [`EngineOptions::store_retry_timeout`].
        store_retry_timeout: Duration,
    }

    /// Sets [`EngineOptions::max_per_node_concurrency`].
    pub fn max_per_node_concurrency(mut self, value: usize) -> Self {
        self.max_per_node_concurrency = Some(value);
        self
    }
}

/// Per-node overrides of the engine options.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct NodePolicy {
    /// Timeout of one attempt.
    pub timeout: Option<Duration>,
    /// Retry policy.
    pub retry: Option<RetryPolicy>,
    /// Items of this node executing at once within a run.
    pub max_concurrency: Option<usize>,
}

impl NodePolicy {
    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Sets the per-node concurrency limit (at least 1).
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = Some(n);
        self
    }
}

/// Decides whether an error is worth another attempt.
pub type RetryPredicate = Arc<dyn Fn(&NodeError) -> bool + Send + Sync>;

/// How often and when a failed attempt is retried.
///
/// Attempts of one item run in its step, against the same committed state, each with a distinct RNG
/// stream. The delay before attempt `n + 1` is `backoff(n)` reduced by up to `jitter` (a fraction), with
/// the jitter drawn deterministically from the item's path and attempt, so retries are reproducible.
#[derive(Clone)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts in all, including the first (1 = no retry).
    pub max_attempts: u32,
    /// Delay before the next attempt.
    pub backoff: Backoff,
    /// Fraction in `[0, 1]` of the delay that jitter may remove.
    pub jitter: f64,
    /// Which errors are retried (default: [`NodeError::is_retryable`]).
    pub retryable: Option<RetryPredicate>,
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_attempts", &self.max_attempts)
            .field("backoff", &self.backoff)
            .field("jitter", &self.jitter)
            .field("retryable", &self.retryable.as_ref().map(|_| "fn"))
            .finish()
    }
}

impl RetryPolicy {
    /// One attempt, no retry.
    pub fn none() -> Self {
        RetryPolicy { max_attempts: 1, backoff: Backoff::Fixed(Duration::ZERO), jitter: 0.0, retryable: None }
    }

    /// Up to `max_attempts` attempts in all, no delay between them.
    pub fn attempts(max_attempts: u32) -> Self {
        RetryPolicy { max_attempts: max_attempts.max(1), ..RetryPolicy::none() }
    }

    /// Sets the backoff.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Sets the jitter fraction (clamped to `[0, 1]`).
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = if jitter.is_nan() { 0.0 } else { jitter.clamp(0.0, 1.0) };
        self
    }

    /// Sets which errors are retried.
    pub fn retry_if(mut self, f: impl Fn(&NodeError) -> bool + Send + Sync + 'static) -> Self {
        self.retryable = Some(Arc::new(f));
        self
    }

    pub(crate) fn should_retry(&self, err: &NodeError, attempt: u32) -> bool {
        attempt < self.max_attempts
            && match &self.retryable {
                Some(f) => err.is_retryable() && f(err),
                None => err.is_retryable(),
            }
    }

    /// The delay after failed attempt `attempt` (1-based) of the item at `path`.
    pub fn delay(&self, path: &PathId, attempt: u32) -> Duration {
        let base = self.backoff.delay(attempt);
        if self.jitter == 0.0 || base.is_zero() {
            return base;
        }
        base.mul_f64(1.0 - self.jitter * jitter_unit(path, attempt))
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::none()
    }
}

/// The delay schedule between attempts.
#[derive(Clone)]
#[non_exhaustive]
pub enum Backoff {
    /// The same delay every time (zero is valid).
    Fixed(Duration),
    /// `initial * factor^(attempt - 1)`, capped at `max`.
    Exponential {
        /// The first delay.
        initial: Duration,
        /// The growth factor.
        factor: f64,
        /// The cap.
        max: Duration,
    },
    /// A custom schedule: attempt number (1-based) to delay.
    Custom(Arc<dyn Fn(u32) -> Duration + Send + Sync>),
}

impl fmt::Debug for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backoff::Fixed(d) => f.debug_tuple("Fixed").field(d).finish(),
            Backoff::Exponential { initial, factor, max } => f
                .debug_struct("Exponential")
                .field("initial", initial)
                .field("factor", factor)
                .field("max", max)
                .finish(),
            Backoff::Custom(_) => f.write_str("Custom(fn)"),
        }
    }
}

impl Backoff {
    /// An exponential schedule doubling from `initial` up to `max`.
    pub fn exponential(initial: Duration, max: Duration) -> Self {
        Backoff::Exponential { initial, factor: 2.0, max }
    }

    /// The delay after failed attempt `attempt` (1-based), before jitter.
    pub fn delay(&self, attempt: u32) -> Duration {
        match self {
            Backoff::Fixed(d) => *d,
            Backoff::Exponential { initial, factor, max } => {
                let exp = attempt.saturating_sub(1).min(1024) as i32;
                let secs = initial.as_secs_f64() * factor.max(0.0).powi(exp);
                if !secs.is_finite() || secs >= max.as_secs_f64() {
                    *max
                } else {
                    Duration::from_secs_f64(secs)
                }
            }
            Backoff::Custom(f) => f(attempt),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_grows_and_caps() {
        let b = Backoff::exponential(Duration::from_millis(10), Duration::from_millis(50));
        let d: Vec<_> = (1..=5).map(|a| b.delay(a).as_millis()).collect();
        assert_eq!(d, [10, 20, 40, 50, 50]);
        assert_eq!(b.delay(u32::MAX), Duration::from_millis(50));
    }

    #[test]
    fn jitter_is_deterministic_and_bounded() {
        let p = RetryPolicy::attempts(3).backoff(Backoff::Fixed(Duration::from_millis(100))).jitter(0.5);
        let path = PathId::entry("n");
        let a = p.delay(&path, 1);
        assert_eq!(a, p.delay(&path, 1));
        assert!(a >= Duration::from_millis(50) && a <= Duration::from_millis(100), "{a:?}");
        let other: Vec<_> = (1..20).map(|i| p.delay(&path, i)).collect();
        assert!(other.iter().any(|d| *d != a), "jitter varies with the attempt");
    }
}
