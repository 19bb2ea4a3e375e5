//! The context a node runs with: who it is, cancellation, and deterministic time and randomness.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use rand_chacha::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};
use uuid::Uuid;

use crate::clock::{Clock, SystemClock, ms_of, time_of};
use crate::env::{EffectNote, RunEnv};
use crate::error::{Asked, CtxStop, NodeError};
use crate::keys::{OrderKey, PathId, item_rng_seed};
use crate::store::InterruptKind;

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
    /// Effect calls made so far in this attempt.
    calls: u32,
    /// Messages emitted in this attempt, for the outbox.
    emits: Vec<(String, serde_json::Value)>,
    /// Effects whose responses this attempt used, for the event log.
    effects: Vec<EffectNote>,
    /// Waiting calls (`interrupt`, `sleep` and their kin) made so far in this attempt.
    interrupts: u32,
    /// Set when an effect call or an interrupt must stop the step whatever the node does with its error.
    stop: Option<CtxStop>,
}

/// What an attempt leaves for the engine besides its result.
#[derive(Debug, Default)]
pub(crate) struct AttemptOutcome {
    pub(crate) emits: Vec<(String, serde_json::Value)>,
    pub(crate) effects: Vec<EffectNote>,
    pub(crate) stop: Option<CtxStop>,
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
    /// The journal effect calls use (`None` for a standalone context: calls are made directly).
    pub(crate) env: Option<Arc<RunEnv>>,
    /// The inputs given to the item's `interrupt` calls, by call index.
    pub(crate) resume_inputs: Option<Arc<Vec<serde_json::Value>>>,
    /// Where `stream` sends, when the run is streamed.
    pub(crate) sink: Option<Arc<dyn CustomSink>>,
}

/// Where `ctx.stream` sends: the stream's observer, without the state type.
pub(crate) trait CustomSink: Send + Sync + std::fmt::Debug {
    /// The sink itself, for a subgraph node (which knows the stream's state type) to reach it typed.
    fn any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync>;

    fn custom<'a>(
        &'a self,
        step: u64,
        node: &'a str,
        path: &'a str,
        payload: serde_json::Value,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>>;
}

impl Ctx {
    /// The context of one attempt of `item`.
    pub(crate) fn new(
        item: ItemId,
        attempt: u32,
        cancel: CancellationToken,
        deadline: Option<Instant>,
    ) -> Self {
        Ctx {
            item,
            attempt,
            cancel,
            spawned: OnceLock::new(),
            deadline,
            rng: None,
            calls: 0,
            emits: Vec::new(),
            effects: Vec::new(),
            interrupts: 0,
            stop: None,
        }
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
            env: None,
            resume_inputs: None,
            sink: None,
        };
        Ctx::new(item, 1, CancellationToken::new(), None)
    }

    /// This standalone context with `inputs` as the answers to the node's `interrupt` calls, in call
    /// order, for unit tests of nodes that ask for input.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut ctx = graph_runtime::Ctx::standalone("run-1", "approve").with_resume_inputs([serde_json::json!(true)]);
    /// let approved: bool = ctx.interrupt(&"approve the refund?").unwrap();
    /// assert!(approved);
    /// ```
    #[must_use]
    pub fn with_resume_inputs(mut self, inputs: impl IntoIterator<Item = serde_json::Value>) -> Self {
        self.item.resume_inputs = Some(Arc::new(inputs.into_iter().collect()));
        self
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
    ///
    /// It is `rand_chacha` 0.10's generator and implements `rand_core` 0.10's traits (re-exported as
    /// `graph_runtime::rand_core`): use it with `rand` 0.10, whose `Rng` methods apply to it. With
    /// another `rand` in your tree its methods will not (two `rand_core` versions); the draws on `Ctx`
    /// itself ([`Ctx::random_range`], [`Ctx::choose`], [`Ctx::shuffle`], [`Ctx::random_bool`],
    /// [`Ctx::random_f64`]) cover the common needs without `rand`.
    pub fn rng(&mut self) -> &mut ChaCha20Rng {
        let (seed, path, attempt) = (self.item.run_seed, &self.item.path, self.attempt);
        self.rng.get_or_insert_with(|| Box::new(ChaCha20Rng::from_seed(item_rng_seed(seed, path, attempt))))
    }

    /// A uniformly distributed `u64` from [`Ctx::rng`].
    pub fn random_u64(&mut self) -> u64 {
        self.rng().next_u64()
    }

    /// A uniformly distributed `f64` in `[0, 1)` (53 random bits) from [`Ctx::rng`].
    pub fn random_f64(&mut self) -> f64 {
        unit_f64(self.rng())
    }

    /// `true` with probability `p` (clamped to `[0, 1]`).
    pub fn random_bool(&mut self, p: f64) -> bool {
        self.random_f64() < p
    }

    /// A uniformly distributed value of `range` (`a..b` or `a..=b` of any integer type, or `a..b` of
    /// `f32`/`f64`), drawn without bias from [`Ctx::rng`].
    ///
    /// # Panics
    ///
    /// On an empty range, like `rand`'s `random_range`.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut ctx = graph_runtime::Ctx::standalone("run-1", "roll");
    /// let die = ctx.random_range(1..=6u8);
    /// assert!((1..=6).contains(&die));
    /// let x = ctx.random_range(-1.0..1.0);
    /// assert!((-1.0..1.0).contains(&x));
    /// ```
    pub fn random_range<R: DrawRange>(&mut self, range: R) -> R::Output {
        range.draw(self.rng())
    }

    /// One element of `items`, uniformly; `None` when it is empty.
    pub fn choose<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            return None;
        }
        Some(&items[self.random_range(0..items.len())])
    }

    /// Shuffles `items` in place (Fisher–Yates), every order equally likely.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.random_range(0..=i);
            items.swap(i, j);
        }
    }

    /// Emits a message to the outbox: written with the step's commit (nothing for a step that is not
    /// committed), delivered after it by [`Engine::outbox`](crate::Engine::outbox), with a stable key per
    /// message so a consumer can deduplicate a redelivery.
    ///
    /// # Errors
    ///
    /// The payload does not serialize to JSON.
    pub fn emit(&mut self, topic: &str, payload: &impl serde::Serialize) -> Result<(), NodeError> {
        let value = serde_json::to_value(payload).map_err(|e| {
            NodeError::fatal(format!("the payload emitted on `{topic}` does not serialize: {e}"))
        })?;
        self.emits.push((topic.to_owned(), value));
        Ok(())
    }

    /// The number of effect calls this attempt made so far (the index the next one takes).
    pub(crate) fn calls_made(&self) -> u32 {
        self.calls
    }

    pub(crate) fn next_call_index(&mut self) -> u32 {
        self.calls += 1;
        self.calls - 1
    }

    pub(crate) fn env(&self) -> Option<Arc<RunEnv>> {
        self.item.env.clone()
    }

    /// Who this item is (a subgraph derives its run from it).
    pub(crate) fn item(&self) -> &ItemId {
        &self.item
    }

    /// Every input given to this item's waiting calls so far, in call order.
    pub(crate) fn all_resume_inputs(&self) -> &[serde_json::Value] {
        self.item.resume_inputs.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Stops the item with a waiting call that stands for interrupt `nested` of a subgraph's run: it
    /// takes the index after every input given so far, so an answer is delivered in line.
    pub(crate) fn ask_nested(
        &mut self,
        kind: InterruptKind,
        payload: serde_json::Value,
        wake_at_ms: Option<u64>,
        nested: String,
    ) -> NodeError {
        let index = u32::try_from(self.all_resume_inputs().len()).unwrap_or(u32::MAX);
        self.interrupts = index.saturating_add(1);
        self.ask(Asked { index, kind, payload, wake_at_ms, topic: None, nested: Some(nested) })
    }

    pub(crate) fn stop(&mut self, stop: CtxStop) {
        self.stop.get_or_insert(stop);
    }

    /// Sends `payload` to the run's stream (a token of a model's answer, a progress note), when the run
    /// is streamed with [`StreamModes::CUSTOM`](crate::StreamModes::CUSTOM); otherwise does nothing.
    /// Payloads are not part of the state: they are not checkpointed, a step that runs again sends them
    /// again, and a replay sends nothing. A slow consumer makes this wait (or drops the payload, as the
    /// stream was opened).
    ///
    /// # Errors
    ///
    /// The payload does not serialize to JSON.
    pub async fn stream(&self, payload: &impl serde::Serialize) -> Result<(), NodeError> {
        let Some(sink) = &self.item.sink else { return Ok(()) };
        if self.item.env.as_ref().is_some_and(|e| e.replay.is_some()) {
            return Ok(());
        }
        let value = serde_json::to_value(payload).map_err(|e| {
            NodeError::fatal(format!(
                "a payload streamed by node `{}` does not serialize: {e}",
                self.item.node
            ))
        })?;
        sink.custom(self.item.step, &self.item.node, self.item.path.as_str(), value).await;
        Ok(())
    }

    /// Records an effect whose response the attempt used.
    pub(crate) fn note_effect(&mut self, note: EffectNote) {
        self.effects.push(note);
    }

    /// Makes this context attempt `attempt`'s, with `deadline`. The engine keeps one context for all of
    /// an item's attempts (one allocation an item, no copy of its identity an attempt): each begins
    /// here and ends with [`Ctx::end_attempt`].
    pub(crate) fn begin_attempt(&mut self, attempt: u32, deadline: Option<Instant>) {
        self.attempt = attempt;
        self.deadline = deadline;
    }

    /// Ends an attempt: what it leaves for the engine (its emits, its effects and, if set, why it must
    /// stop the step), whatever it spawned with [`Ctx::cancellation_token`] cancelled (as when a
    /// context is dropped), and everything an attempt counts back to a new context's.
    pub(crate) fn end_attempt(&mut self) -> AttemptOutcome {
        if let Some(token) = self.spawned.take() {
            token.cancel();
        }
        self.rng = None;
        self.calls = 0;
        self.interrupts = 0;
        AttemptOutcome {
            emits: std::mem::take(&mut self.emits),
            effects: std::mem::take(&mut self.effects),
            stop: self.stop.take(),
        }
    }

    /// The step's token, which this context's attempts observe.
    pub(crate) fn step_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Asks a person for input, as LangGraph's `interrupt`: the first time, the node stops here (return
    /// the error with `?`), the step's other items run to the barrier, and the run's status becomes
    /// [`RunStatus::Interrupted`](crate::store::RunStatus::Interrupted) carrying `payload`. When
    /// [`Engine::resume_with_input`](crate::Engine::resume_with_input) answers, the node runs again from
    /// its start and this call returns the input (as `R`). A node may call `interrupt` several times:
    /// the calls are told apart by their order in the attempt, so make them in the same order every time.
    ///
    /// Work done before the call runs again on resume: do it through [`Ctx::effect`] (journaled, not
    /// repeated), or after the call.
    ///
    /// # Errors
    ///
    /// The stop itself (when no input was given yet: propagate it); an input that does not read as `R`
    /// (the resume is rejected and nothing changes); a payload that does not serialize.
    ///
    /// # Examples
    ///
    /// ```
    /// # use graph_runtime::{Ctx, NodeError};
    /// # async fn refund(ctx: &mut Ctx, amount: u32) -> Result<bool, NodeError> {
    /// let approved: bool = ctx.interrupt(&format!("refund {amount}?"))?;
    /// # Ok(approved)
    /// # }
    /// ```
    pub fn interrupt<R: DeserializeOwned>(
        &mut self,
        payload: &impl serde::Serialize,
    ) -> Result<R, NodeError> {
        let (index, given) = self.next_wait();
        if let Some(input) = given {
            return self.read_input(index, input);
        }
        let payload = self.payload_of(payload)?;
        Err(self.ask(Asked {
            index,
            kind: InterruptKind::Input,
            payload,
            wake_at_ms: None,
            topic: None,
            nested: None,
        }))
    }

    /// [`Ctx::interrupt`] with a deadline `within` from now (the engine's clock): when nobody answers in
    /// time, the run is woken at the deadline (by an engine's timer service or a worker) and this call
    /// returns [`Answer::TimedOut`], so the node can route to an escalation. An answer given after the
    /// deadline is refused (`Error::DeadlinePassed`). The deadline is recorded with the question: a
    /// resume or replay sees the same one.
    ///
    /// # Errors
    ///
    /// As [`Ctx::interrupt`]; a zero `within` (a deadline that has already passed) is a non-retryable
    /// error.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use graph_runtime::{Answer, Ctx, NodeError};
    /// # fn approve(ctx: &mut Ctx) -> Result<&'static str, NodeError> {
    /// match ctx.interrupt_with_deadline::<bool>(&"approve the refund?", Duration::from_secs(72 * 3600))? {
    ///     Answer::Given(true) => Ok("refund"),
    ///     Answer::Given(false) => Ok("decline"),
    ///     Answer::TimedOut { .. } => Ok("escalate"),
    /// }
    /// # }
    /// ```
    pub fn interrupt_with_deadline<R: DeserializeOwned>(
        &mut self,
        payload: &impl serde::Serialize,
        within: Duration,
    ) -> Result<Answer<R>, NodeError> {
        let deadline = self.clock_now_ms().saturating_add(duration_ms(within));
        self.interrupt_until_ms(payload, deadline, within.is_zero())
    }

    /// [`Ctx::interrupt_with_deadline`] with the deadline as a time.
    ///
    /// # Errors
    ///
    /// As [`Ctx::interrupt_with_deadline`]; a deadline that is not after now (the engine's clock) is a
    /// non-retryable error, unless the question was already answered or timed out.
    pub fn interrupt_until<R: DeserializeOwned>(
        &mut self,
        payload: &impl serde::Serialize,
        deadline: SystemTime,
    ) -> Result<Answer<R>, NodeError> {
        let deadline = ms_of(deadline);
        let past = deadline <= self.clock_now_ms();
        self.interrupt_until_ms(payload, deadline, past)
    }

    fn interrupt_until_ms<R: DeserializeOwned>(
        &mut self,
        payload: &impl serde::Serialize,
        deadline_ms: u64,
        past: bool,
    ) -> Result<Answer<R>, NodeError> {
        let (index, given) = self.next_wait();
        if let Some(input) = given {
            let reply: Reply<R> = self.read_input(index, input)?;
            return Ok(match reply {
                Reply::Answer(r) | Reply::Event { payload: r, .. } => Answer::Given(r),
                Reply::TimedOutAt(ms) => Answer::TimedOut { at: time_of(ms) },
            });
        }
        if past {
            return Err(NodeError::fatal(format!(
                "node `{}` asks with a deadline ({deadline_ms} ms since the epoch) that is not after now ({} ms)",
                self.item.node,
                self.clock_now_ms()
            )));
        }
        let payload = self.payload_of(payload)?;
        Err(self.ask(Asked {
            index,
            kind: InterruptKind::Input,
            payload,
            wake_at_ms: Some(deadline_ms),
            topic: None,
            nested: None,
        }))
    }

    /// Sleeps durably for `duration` (the engine's clock): the first time, the node stops here (return
    /// the error with `?`), the step's other items run to the barrier, and the run parks as
    /// [`RunStatus::Waiting`](crate::store::RunStatus::Waiting) with its wake time, holding no task. Once
    /// the time has come (in this process or another, after any restart) the run is woken, the node
    /// runs again from its start, and this call returns the time it woke. The wake time is recorded:
    /// a resume or replay never waits again. It counts among the node's waiting calls as
    /// [`Ctx::interrupt`] does: make them in the same order every time.
    ///
    /// Who wakes runs: [`Engine::run_timers`](crate::Engine::run_timers) (an embedded store's timer
    /// service), or a worker pool on a server store (due runs are claimed like runnable ones).
    ///
    /// # Errors
    ///
    /// The stop itself, when the node has not slept yet: propagate it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use graph_runtime::{Ctx, NodeError};
    /// # fn retry_tomorrow(ctx: &mut Ctx) -> Result<(), NodeError> {
    /// let woke = ctx.sleep(Duration::from_secs(24 * 3600))?;
    /// # let _ = woke; Ok(())
    /// # }
    /// ```
    pub fn sleep(&mut self, duration: Duration) -> Result<SystemTime, NodeError> {
        let at = self.clock_now_ms().saturating_add(duration_ms(duration));
        self.sleep_until_ms(at, duration.is_zero())
    }

    /// [`Ctx::sleep`] until `time`. A time that is not after now returns it at once, without parking.
    ///
    /// # Errors
    ///
    /// As [`Ctx::sleep`].
    pub fn sleep_until(&mut self, time: SystemTime) -> Result<SystemTime, NodeError> {
        let at = ms_of(time);
        let past = at <= self.clock_now_ms();
        self.sleep_until_ms(at, past)
    }

    fn sleep_until_ms(&mut self, at_ms: u64, past: bool) -> Result<SystemTime, NodeError> {
        let (index, given) = self.next_wait();
        if let Some(input) = given {
            let woke: Woke = self.read_input(index, input)?;
            return Ok(time_of(woke.woke_at));
        }
        if past {
            // Nothing to wait for; the time returned does not depend on when the call ran.
            return Ok(time_of(at_ms));
        }
        let asked = Asked {
            index,
            kind: InterruptKind::Sleep,
            payload: serde_json::Value::Null,
            wake_at_ms: Some(at_ms),
            topic: None,
            nested: None,
        };
        Err(self.ask(asked))
    }

    /// Waits durably for an external event of `topic` sent to this run (`Engine::send_event`, from any
    /// process): the first time, the node stops here and the run parks as
    /// [`RunStatus::Waiting`](crate::store::RunStatus::Waiting) until a message of the topic is in its
    /// mailbox (one sent before the wait is delivered at once); then the node runs again and this call
    /// returns its payload, read as `T`. Messages of a topic are delivered in send order, each to one
    /// waiting call; the delivery is recorded, so a resume or replay returns the same payload. A
    /// payload that does not read as `T` is rejected: the message is kept, marked rejected, and the
    /// run waits for the next (`Error::EventRejected` from whoever delivered it).
    ///
    /// # Errors
    ///
    /// The stop itself, when no event was delivered yet: propagate it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use graph_runtime::{Ctx, NodeError};
    /// # #[derive(serde::Deserialize)] struct Payment { amount_cents: u64 }
    /// # fn settle(ctx: &mut Ctx) -> Result<u64, NodeError> {
    /// let paid: Payment = ctx.wait_event("payment.received")?;
    /// # Ok(paid.amount_cents)
    /// # }
    /// ```
    pub fn wait_event<T: DeserializeOwned>(&mut self, topic: &str) -> Result<T, NodeError> {
        match self.wait_event_until_ms(topic, None)? {
            Answer::Given(t) => Ok(t),
            Answer::TimedOut { .. } => Err(NodeError::fatal(format!(
                "node `{}` waits for `{topic}` without a timeout, yet was given one",
                self.item.node
            ))),
        }
    }

    /// [`Ctx::wait_event`] with a timeout `within` from now (the engine's clock): when no message of the
    /// topic has come by then, the run is woken and this call returns [`Answer::TimedOut`].
    ///
    /// # Errors
    ///
    /// As [`Ctx::wait_event`]; a zero `within` is a non-retryable error.
    pub fn wait_event_with_timeout<T: DeserializeOwned>(
        &mut self,
        topic: &str,
        within: Duration,
    ) -> Result<Answer<T>, NodeError> {
        if within.is_zero() {
            // Counted like any waiting call, so the calls after it keep their indexes.
            let _ = self.next_wait();
            return Err(NodeError::fatal(format!(
                "node `{}` waits for `{topic}` with a timeout of zero",
                self.item.node
            )));
        }
        let at = self.clock_now_ms().saturating_add(duration_ms(within));
        self.wait_event_until_ms(topic, Some(at))
    }

    fn wait_event_until_ms<T: DeserializeOwned>(
        &mut self,
        topic: &str,
        timeout_ms: Option<u64>,
    ) -> Result<Answer<T>, NodeError> {
        let (index, given) = self.next_wait();
        if let Some(input) = given {
            let reply: Reply<T> = self.read_input(index, input)?;
            return Ok(match reply {
                Reply::Answer(t) | Reply::Event { payload: t, .. } => Answer::Given(t),
                Reply::TimedOutAt(ms) => Answer::TimedOut { at: time_of(ms) },
            });
        }
        Err(self.ask(Asked {
            index,
            kind: InterruptKind::Event,
            payload: serde_json::Value::Null,
            wake_at_ms: timeout_ms,
            topic: Some(topic.to_owned()),
            nested: None,
        }))
    }

    /// The index of the attempt's next waiting call and the input a resumption gave it.
    fn next_wait(&mut self) -> (u32, Option<serde_json::Value>) {
        let index = self.interrupts;
        self.interrupts += 1;
        (index, self.item.resume_inputs.as_ref().and_then(|i| i.get(index as usize).cloned()))
    }

    /// Reads the input of waiting call `index` as `R`; a mismatch refuses the resumption.
    fn read_input<R: DeserializeOwned>(
        &mut self,
        index: u32,
        input: serde_json::Value,
    ) -> Result<R, NodeError> {
        serde_json::from_value(input).map_err(|e| {
            let detail = format!(
                "node `{}` reads the input of its interrupt {index} as `{}`: {e}",
                self.item.node,
                std::any::type_name::<R>()
            );
            self.stop(CtxStop::InputRejected { index, detail: detail.clone() });
            NodeError::fatal(detail)
        })
    }

    fn payload_of(&self, payload: &impl serde::Serialize) -> Result<serde_json::Value, NodeError> {
        serde_json::to_value(payload).map_err(|e| {
            NodeError::fatal(format!(
                "the payload of an interrupt of node `{}` does not serialize: {e}",
                self.item.node
            ))
        })
    }

    /// Stops the node for what it asked.
    fn ask(&mut self, asked: Asked) -> NodeError {
        let what = match asked.kind {
            InterruptKind::Sleep => "sleeps",
            InterruptKind::Event => "waits for an event",
            _ => "waits for input",
        };
        let error = NodeError::fatal(format!("node `{}` {what} (interrupt {})", self.item.node, asked.index));
        self.stop(CtxStop::Interrupt(asked));
        error
    }

    /// The engine's clock (the wall clock for a standalone context).
    fn clock_now_ms(&self) -> u64 {
        match &self.item.env {
            Some(env) => env.clock.now_ms(),
            None => SystemClock.now_ms(),
        }
    }

    /// The input given for this node's next [`Ctx::interrupt`] call, if the run was resumed with one,
    /// without stopping when there is none: a node can look before it asks.
    ///
    /// # Errors
    ///
    /// An input that does not read as `R` (the resume is rejected and nothing changes).
    pub fn resume_input<R: DeserializeOwned>(&mut self) -> Result<Option<R>, NodeError> {
        let index = self.interrupts;
        match self.item.resume_inputs.as_ref().and_then(|i| i.get(index as usize).cloned()) {
            None => Ok(None),
            Some(input) => self.read_input(index, input).map(Some),
        }
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
        time_of(self.item.now_ms)
    }

    /// This context with [`Ctx::now`] set, for unit tests of time-dependent nodes.
    #[must_use]
    pub fn with_now(mut self, now: SystemTime) -> Self {
        self.item.now_ms = ms_of(now);
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

/// What a question with a deadline returns: the answer, or that the deadline passed first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer<R> {
    /// Answered in time.
    Given(R),
    /// Nobody answered before the deadline; `at` is when the run was woken for it (recorded).
    TimedOut {
        /// When the timeout was delivered.
        at: SystemTime,
    },
}

/// The stored input of a question with a deadline or an event wait: `{"answer": …}`,
/// `{"event": {"seq": n, "payload": …}}` or `{"timed_out_at": ms}`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply<R> {
    Answer(R),
    Event {
        #[allow(dead_code, reason = "recorded with the answer; the node reads the payload")]
        seq: u64,
        payload: R,
    },
    TimedOutAt(u64),
}

/// The stored input of a sleep: `{"woke_at": ms}`.
#[derive(serde::Deserialize)]
struct Woke {
    woke_at: u64,
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `[0, 1)` from the top 53 bits of a draw.
fn unit_f64(rng: &mut ChaCha20Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A uniform draw in `[0, span)` for `1 <= span <= 2^64` (Lemire's method: one multiplication, and a
/// rejection only for the few draws that would bias the result).
fn below(rng: &mut ChaCha20Rng, span: u128) -> u64 {
    debug_assert!((1..=1u128 << 64).contains(&span));
    if span == 1u128 << 64 {
        return rng.next_u64();
    }
    let span = span as u64;
    let mut m = u128::from(rng.next_u64()) * u128::from(span);
    if (m as u64) < span {
        let threshold = span.wrapping_neg() % span;
        while (m as u64) < threshold {
            m = u128::from(rng.next_u64()) * u128::from(span);
        }
    }
    (m >> 64) as u64
}

/// A range [`Ctx::random_range`] can draw from.
pub trait DrawRange {
    /// The type of the values drawn.
    type Output;
    /// Draws one value from `rng`.
    fn draw(self, rng: &mut ChaCha20Rng) -> Self::Output;
}

macro_rules! int_ranges {
    ($($t:ty),*) => {$(
        impl DrawRange for std::ops::Range<$t> {
            type Output = $t;
            fn draw(self, rng: &mut ChaCha20Rng) -> $t {
                assert!(self.start < self.end, "cannot draw from the empty range {:?}", self);
                let span = (self.end as i128 - self.start as i128) as u128;
                (self.start as i128 + below(rng, span) as i128) as $t
            }
        }
        impl DrawRange for std::ops::RangeInclusive<$t> {
            type Output = $t;
            fn draw(self, rng: &mut ChaCha20Rng) -> $t {
                let (lo, hi) = self.into_inner();
                assert!(lo <= hi, "cannot draw from the empty range {lo:?}..={hi:?}");
                let span = (hi as i128 - lo as i128) as u128 + 1;
                (lo as i128 + below(rng, span) as i128) as $t
            }
        }
    )*};
}
int_ranges!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

macro_rules! float_ranges {
    ($($t:ty),*) => {$(
        impl DrawRange for std::ops::Range<$t> {
            type Output = $t;
            fn draw(self, rng: &mut ChaCha20Rng) -> $t {
                assert!(self.start < self.end, "cannot draw from the empty range {:?}", self);
                let x = self.start + (self.end - self.start) * unit_f64(rng) as $t;
                // Rounding can land on `end` itself; the range excludes it.
                if x < self.end { x } else { self.start }
            }
        }
    )*};
}
float_ranges!(f32, f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_repeat_with_the_seed_and_stay_in_range() {
        let draws = |run: &str| {
            let mut ctx = Ctx::standalone(run, "n");
            (0..200).map(|_| ctx.random_range(-3i64..=3)).collect::<Vec<_>>()
        };
        assert_eq!(draws("a"), draws("a"));
        assert_ne!(draws("a"), draws("b"));
        assert!(draws("a").iter().all(|d| (-3..=3).contains(d)));
        let mut ctx = Ctx::standalone("r", "n");
        for _ in 0..1000 {
            assert!(ctx.random_range(250u8..=255) >= 250);
            assert!((0.5..0.75).contains(&ctx.random_range(0.5..0.75)));
            assert!(ctx.random_f64() < 1.0);
        }
        assert!((0..100).map(|_| ctx.random_range(0..=u64::MAX)).any(|x| x > u64::MAX / 2));
        assert!((0..100).map(|_| ctx.random_range(i64::MIN..=i64::MAX)).any(|x| x < 0));
    }

    #[test]
    fn draws_are_uniform_enough() {
        // 60,000 rolls of a die: each face within 5% of 10,000 (about 10 standard deviations).
        let mut ctx = Ctx::standalone("uniform", "n");
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            counts[ctx.random_range(0..6usize)] += 1;
        }
        assert!(counts.iter().all(|c| (9_500..10_500).contains(c)), "{counts:?}");
        let heads = (0..10_000).filter(|_| ctx.random_bool(0.3)).count();
        assert!((2_700..3_300).contains(&heads), "{heads}");
    }

    #[test]
    fn choose_and_shuffle() {
        let mut ctx = Ctx::standalone("s", "n");
        assert_eq!(ctx.choose::<u8>(&[]), None);
        let items = [1, 2, 3, 4, 5, 6, 7, 8];
        assert!(items.contains(ctx.choose(&items).unwrap()));
        let mut shuffled = items;
        ctx.shuffle(&mut shuffled);
        let mut sorted = shuffled;
        sorted.sort();
        assert_eq!(sorted, items, "a permutation");
        let orders: std::collections::BTreeSet<_> = (0..50)
            .map(|_| {
                let mut v = [1, 2, 3];
                ctx.shuffle(&mut v);
                v
            })
            .collect();
        assert_eq!(orders.len(), 6, "every order of three appears in 50 shuffles");
    }

    #[test]
    #[should_panic(expected = "empty range")]
    fn an_empty_range_panics() {
        Ctx::standalone("e", "n").random_range(3u8..3);
    }
}
