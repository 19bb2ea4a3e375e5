//! The context a node runs with: who it is, cancellation, and deterministic time and randomness.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand_chacha::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};
use uuid::Uuid;

use crate::error::NodeError;
use crate::keys::{OrderKey, PathId, item_rng_seed};

/// What one attempt of one work item knows about itself.
///
/// Everything here is a function of the run's input, graph and seed, or recorded in the step's
/// checkpoint ([`Ctx::now`]), except cancellation and the deadline; so a node that reads only its state
/// and its `Ctx` computes the same thing when its step is retried, resumed or replayed.
#[derive(Debug)]
pub struct Ctx {
    item: ItemId,
    attempt: u32,
    /// The step's token: cancelled with the run, or when a sibling item stops the step.
    cancel: CancellationToken,
    /// The token handed to work the node spawns, made on first request and cancelled when the attempt
    /// ends (when this context is dropped).
    spawned: OnceLock<CancellationToken>,
    deadline: Option<Instant>,
    /// Boxed: most nodes never draw, and an inline stream would add 300 bytes to every task.
    rng: Option<Box<ChaCha20Rng>>,
}

/// Who a work item is: what every attempt's [`Ctx`] of the item shares.
#[derive(Debug, Clone)]
pub(crate) struct ItemId {
    pub(crate) run_id: Arc<str>,
    pub(crate) step: u64,
    pub(crate) node: Arc<str>,
    pub(crate) order_key: OrderKey,
    pub(crate) path: PathId,
    pub(crate) run_seed: u64,
    /// The step's recorded time, ms since the Unix epoch.
    pub(crate) now_ms: u64,
    /// The branch input, when forked with one.
    pub(crate) input: Option<Arc<serde_json::Value>>,
}

impl Ctx {
    /// The context of one attempt of `item`.
    pub(crate) fn new(
        item: ItemId,
        attempt: u32,
        cancel: CancellationToken,
        deadline: Option<Instant>,
    ) -> Self {
        Ctx { item, attempt, cancel, spawned: OnceLock::new(), deadline, rng: None }
    }

    /// A context outside any engine, for unit-testing a node: step 0, first attempt, entry path, seed
    /// derived from `run_id`, and [`Ctx::now`] at the Unix epoch (set it with [`Ctx::with_now`]).
    pub fn standalone(run_id: &str, node: &str) -> Self {
        let item = ItemId {
            run_id: run_id.into(),
            step: 0,
            node: node.into(),
            order_key: OrderKey::ENTRY,
            path: PathId::entry(node),
            run_seed: crate::keys::derive_run_seed(run_id),
            now_ms: 0,
            input: None,
        };
        Ctx::new(item, 1, CancellationToken::new(), None)
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.item.run_id
    }

    /// The step this item belongs to (0 is the entry step).
    pub fn step(&self) -> u64 {
        self.item.step
    }

    /// The node's name.
    pub fn node(&self) -> &str {
        &self.item.node
    }

    /// The item's order key within its step.
    pub fn order_key(&self) -> OrderKey {
        self.item.order_key
    }

    /// The attempt number, starting at 1.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The item's path identity (unique per activation in the run).
    pub fn path(&self) -> &PathId {
        &self.item.path
    }

    /// The run's seed.
    pub fn run_seed(&self) -> u64 {
        self.item.run_seed
    }

    /// The deterministic random stream of this attempt: ChaCha20 seeded from the run seed, the path
    /// identity and the attempt. Loop iterations and retries get distinct streams; a resumed or replayed
    /// run gets the same ones.
    pub fn rng(&mut self) -> &mut ChaCha20Rng {
        let (seed, path, attempt) = (self.item.run_seed, &self.item.path, self.attempt);
        self.rng.get_or_insert_with(|| Box::new(ChaCha20Rng::from_seed(item_rng_seed(seed, path, attempt))))
    }

    /// A version-4 UUID drawn from [`Ctx::rng`]: the same on every retry-free replay or resume of this
    /// attempt, distinct across loop iterations, branches and attempts. Use it where a node would call
    /// `Uuid::new_v4()`.
    pub fn uuid(&mut self) -> Uuid {
        let mut bytes = [0u8; 16];
        self.rng().fill_bytes(&mut bytes);
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }

    /// The step's recorded time: when the checkpoint that scheduled this step was committed.
    ///
    /// It is the same for every item and every attempt of the step, and the same when the step runs
    /// again after a crash, a resume or a replay, because it is read from the checkpoint rather than from
    /// the clock. It never goes backwards along a run. Use it where a node would call
    /// `SystemTime::now()`; for measuring durations or timeouts use the node's own timers.
    pub fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.item.now_ms)
    }

    /// This context with [`Ctx::now`] set, for unit tests of time-dependent nodes.
    #[must_use]
    pub fn with_now(mut self, now: SystemTime) -> Self {
        self.item.now_ms = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        self
    }

    /// True once the run is cancelled (or another item stopped the step).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the run is cancelled (or another item stopped the step); select on it in long
    /// nodes.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.cancel.cancelled()
    }

    /// A token to hand to work the node spawns: cancelled with the run, and when this attempt ends in
    /// any way (success, error, timeout), so spawned work does not outlive it.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.spawned.get_or_init(|| self.cancel.child_token()).clone()
    }

    /// When this attempt will be stopped: the earlier of the node's timeout and the run's budget.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The branch input this item was forked with, if any.
    pub fn raw_input(&self) -> Option<&serde_json::Value> {
        self.item.input.as_deref()
    }

    /// The branch input, deserialized.
    ///
    /// # Errors
    ///
    /// A non-retryable error when the input does not deserialize to `T`.
    pub fn input<T: DeserializeOwned>(&self) -> Result<Option<T>, NodeError> {
        match self.item.input.as_deref() {
            None => Ok(None),
            Some(v) => T::deserialize(v).map(Some).map_err(|e| {
                NodeError::fatal(format!(
                    "branch input of node `{}` does not deserialize: {e}",
                    self.item.node
                ))
            }),
        }
    }
}

impl Drop for Ctx {
    /// The attempt is over: whatever it spawned with [`Ctx::cancellation_token`] stops now.
    fn drop(&mut self) {
        if let Some(token) = self.spawned.get() {
            token.cancel();
        }
    }
}
