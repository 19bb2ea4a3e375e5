//! The context a node runs with: who it is, cancellation, and deterministic randomness.

use std::sync::Arc;

use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::error::NodeError;
use crate::keys::{OrderKey, PathId, item_rng_seed};

/// What one attempt of one work item knows about itself.
///
/// Everything here is a function of the run's input, graph and seed, except cancellation and the
/// deadline, so a node that reads only its state and its `Ctx` is deterministic.
#[derive(Debug)]
pub struct Ctx {
    pub(crate) run_id: Arc<str>,
    pub(crate) step: u64,
    pub(crate) node: Arc<str>,
    pub(crate) order_key: OrderKey,
    pub(crate) attempt: u32,
    pub(crate) path: PathId,
    pub(crate) run_seed: u64,
    pub(crate) cancel: CancellationToken,
    pub(crate) deadline: Option<Instant>,
    pub(crate) input: Option<Arc<serde_json::Value>>,
    rng: Option<ChaCha20Rng>,
}

impl Ctx {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        run_id: Arc<str>,
        step: u64,
        node: Arc<str>,
        order_key: OrderKey,
        attempt: u32,
        path: PathId,
        run_seed: u64,
        cancel: CancellationToken,
        deadline: Option<Instant>,
        input: Option<Arc<serde_json::Value>>,
    ) -> Self {
        Ctx { run_id, step, node, order_key, attempt, path, run_seed, cancel, deadline, input, rng: None }
    }

    /// A context outside any engine, for unit-testing a node: step 0, first attempt, entry path, seed
    /// derived from `run_id`.
    pub fn standalone(run_id: &str, node: &str) -> Self {
        Ctx::new(
            run_id.into(),
            0,
            node.into(),
            OrderKey::ENTRY,
            1,
            PathId::entry(node),
            crate::keys::derive_run_seed(run_id),
            CancellationToken::new(),
            None,
            None,
        )
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The step this item belongs to (0 is the entry step).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The item's order key within its step.
    pub fn order_key(&self) -> OrderKey {
        self.order_key
    }

    /// The attempt number, starting at 1.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The item's path identity (unique per activation in the run).
    pub fn path(&self) -> &PathId {
        &self.path
    }

    /// The run's seed.
    pub fn run_seed(&self) -> u64 {
        self.run_seed
    }

    /// The deterministic random stream of this attempt: ChaCha20 seeded from the run seed, the path
    /// identity and the attempt. Loop iterations and retries get distinct streams; a resumed or replayed
    /// run gets the same ones.
    pub fn rng(&mut self) -> &mut ChaCha20Rng {
        let (seed, path, attempt) = (self.run_seed, &self.path, self.attempt);
        self.rng.get_or_insert_with(|| ChaCha20Rng::from_seed(item_rng_seed(seed, path, attempt)))
    }

    /// True once the run is cancelled or this attempt's deadline passed.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the run is cancelled or this attempt is abandoned; select on it in long nodes.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.cancel.cancelled()
    }

    /// A token to hand to work the node spawns, so it is cancelled with the node.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// When this attempt will be stopped: the earlier of the node's timeout and the run's budget.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The branch input this item was forked with, if any.
    pub fn raw_input(&self) -> Option<&serde_json::Value> {
        self.input.as_deref()
    }

    /// The branch input, deserialized.
    ///
    /// # Errors
    ///
    /// A non-retryable error when the input does not deserialize to `T`.
    pub fn input<T: DeserializeOwned>(&self) -> Result<Option<T>, NodeError> {
        match self.input.as_deref() {
            None => Ok(None),
            Some(v) => T::deserialize(v).map(Some).map_err(|e| {
                NodeError::fatal(format!("branch input of node `{}` does not deserialize: {e}", self.node))
            }),
        }
    }
}
