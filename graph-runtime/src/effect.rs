//! Side effects that happen once: `ctx.effect(name, &request)` and its journal, and replay from it.
//!
//! A node that touches the world does it through [`Ctx::effect`](crate::Ctx::effect). Each call has a
//! stable **effect key**, `hex(SHA256(utf8(run_id) ":" decimal(step) ":" path ":" decimal(call_index)))[..32]`
//! (`path` the item's 64-character path identity, `call_index` the call's position among the effect
//! calls of the item's attempt, from 0), which the closure receives to hand to the external system (an
//! `Idempotency-Key` header, say). The journal entry of a call is written in a commit of its own as soon
//! as the call returns, before the step commit, so a crash after the call does not repeat it: the
//! re-executed step finds the journaled response and the closure is not called. By class:
//!
//! - `non_idempotent()` (the default): a `Started` entry is journaled *before* the call. If a crash
//!   leaves it without an outcome, nobody knows whether the world saw the call: the run pauses with
//!   `PauseReason::NeedsConfirmation` and a person answers with `Engine::resolve_effect`.
//! - `idempotent()`: no `Started` entry; with no journaled response it is called again, with the same
//!   key, which the external system uses to deduplicate.
//! - `pure()`: recomputed when not journaled; journaled so that replay needs no call.
//!
//! A call whose closure fails is journaled `Failed` and may be called again (by a retry of the node, or
//! when the step runs again). Return `Err` only when the effect did not take effect; when the outcome is
//! unknown (a timeout after sending), return it as a response the node can act on.

use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ctx::Ctx;
pub use crate::env::ReplayMode;
use crate::env::{EffectNote, Replay};
pub use crate::error::Divergence;
use crate::error::{CtxStop, NodeError};
use crate::keys::{hex, sha256_parts};
use crate::store::journal::{effect_key, patch_key};
use crate::store::{EffectClass, EffectOutcome, EffectRecord, EffectState, Store};

impl Ctx {
    /// Whether this execution of the node runs the code of a change marked `id` (Temporal's
    /// `patched`): a small change to a node that runs already recorded do not take, so that their
    /// steps replay as they ran. Write the change as `if ctx.patched("id").await? { new } else { old }`:
    ///
    /// - a node executing for the first time with the marker in its code gets `true`, and the marker
    ///   is journaled with its item (so every later execution of this step, after a crash, a resume or
    ///   in a replay, gets `true` too);
    /// - a replay of a step recorded before the change, or a step that ran past this point before the
    ///   change (its next effect call is journaled without the marker), gets `false`: the old code.
    ///
    /// Once no stored run can reach the old branch (no run older than the change is left, or the
    /// replay check passes without it), remove the branch and the marker. A change to what nodes
    /// exist, their edges or the state type needs a new graph version instead (see
    /// `docs/versioning.md`).
    ///
    /// # Errors
    ///
    /// A fatal error when the journal cannot be read or written.
    pub async fn patched(&mut self, id: &str) -> Result<bool, NodeError> {
        let Some(env) = self.env() else { return Ok(true) };
        let (run_id, step, path) = (self.run_id().to_owned(), self.step(), self.path().as_str().to_owned());
        let key = patch_key(&run_id, step, &path, id);
        if let Some(replay) = &env.replay {
            return Ok(replay.journal.contains_key(&key));
        }
        let failed = |e: crate::StoreError| {
            NodeError::fatal(format!("the journal of patch marker `{id}` (key {key}) could not be used: {e}"))
        };
        let store = &*env.store;
        if store.load_effect(&key).await.map_err(failed)?.is_some() {
            return Ok(true);
        }
        // The node ran past this point before the change: its next call is journaled, the marker not.
        let next = effect_key(&run_id, step, &path, self.calls_made());
        if store.load_effect(&next).await.map_err(failed)?.is_some() {
            return Ok(false);
        }
        let record = EffectRecord {
            key: key.clone(),
            run_id,
            step,
            node: self.node().to_owned(),
            path,
            call_index: u32::MAX,
            name: format!("patch:{id}"),
            class: EffectClass::Pure,
            request_hash: String::new(),
            state: EffectState::Completed { response: serde_json::Value::Bool(true) },
        };
        match store.put_effect(&record, None).await.map_err(failed)? {
            EffectOutcome::Written | EffectOutcome::Exists(_) => Ok(true),
            EffectOutcome::Fenced => Err(fenced(self, &record)),
            other => Err(changed_under_us(self, &record, other)),
        }
    }

    /// A call to the outside world, made at most once per run where the world allows it: configure it
    /// (`.idempotent()`, `.non_idempotent()` — the default —, `.pure()`), then `.run(|key| async { .. })`
    /// the call, which receives the effect key to hand to the external system. Its response is journaled
    /// as soon as it returns, so the step running again after a crash gets it back without calling. See
    /// `docs/effects.md`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), graph_runtime::NodeError> {
    /// let mut ctx = graph_runtime::Ctx::standalone("run-1", "charge");
    /// let receipt: String = ctx
    ///     .effect("payments.charge", &("alice", 30))
    ///     .idempotent()
    ///     .run(|key| async move { Ok::<_, std::io::Error>(format!("charged with key {key}")) })
    ///     .await?;
    /// assert!(receipt.starts_with("charged"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn effect<'c, Req: serde::Serialize>(&'c mut self, name: &str, request: &'c Req) -> Effect<'c, Req> {
        Effect::new(self, name, request)
    }
}

/// A call to the outside world, being configured: see [`Ctx::effect`].
#[must_use = "an effect does nothing until `.run(...)` is awaited"]
pub struct Effect<'c, Req> {
    ctx: &'c mut Ctx,
    name: String,
    request: &'c Req,
    class: EffectClass,
}

impl<'c, Req: Serialize> Effect<'c, Req> {
    pub(crate) fn new(ctx: &'c mut Ctx, name: &str, request: &'c Req) -> Self {
        Effect { ctx, name: name.to_owned(), request, class: EffectClass::NonIdempotent }
    }

    /// Safe to repeat with the same key: after a crash with no journaled response it is called again.
    pub fn idempotent(mut self) -> Self {
        self.class = EffectClass::Idempotent;
        self
    }

    /// Must not happen twice (the default): after a crash between its start and its response, the run
    /// pauses for a person to confirm (`PauseReason::NeedsConfirmation`).
    pub fn non_idempotent(mut self) -> Self {
        self.class = EffectClass::NonIdempotent;
        self
    }

    /// No side effect: recomputed when not journaled, journaled for replay.
    pub fn pure(mut self) -> Self {
        self.class = EffectClass::Pure;
        self
    }

    /// Makes the call — or returns its journaled response without calling. `call` receives the effect
    /// key.
    ///
    /// # Errors
    ///
    /// The closure's error (journaled as `Failed`: a retry calls again); a fatal error when the run must
    /// pause for confirmation, when the journaled response does not deserialize as `Resp` (the type
    /// changed), when the journal has another request for this call (the node is not deterministic), or
    /// when the store fails.
    pub async fn run<Resp, F, Fut, E>(self, call: F) -> Result<Resp, NodeError>
    where
        Resp: Serialize + DeserializeOwned,
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Result<Resp, E>>,
        E: Into<NodeError>,
    {
        let Effect { ctx, name, request, class } = self;
        let call_index = ctx.next_call_index();
        let (run_id, step, path) = (ctx.run_id().to_owned(), ctx.step(), ctx.path().as_str().to_owned());
        let key = effect_key(&run_id, step, &path, call_index);
        let bytes = crate::canonical::to_vec(request).map_err(|e| {
            NodeError::fatal(format!("the request of effect `{name}` does not serialize: {e}"))
        })?;
        let request_hash = hex(&sha256_parts(&[&bytes]));
        let Some(env) = ctx.env() else {
            // A standalone context (unit tests of a node): no journal, the call is made.
            return call(key).await.map_err(Into::into);
        };
        let record = EffectRecord {
            key,
            run_id,
            step,
            node: ctx.node().to_owned(),
            path,
            call_index,
            name,
            class,
            request_hash,
            state: EffectState::Started,
        };
        if let Some(replay) = &env.replay {
            return replayed(ctx, replay, &record);
        }
        live(ctx, &*env.store, record, call).await
    }
}

/// The live call: the journal first, then (maybe) the world.
async fn live<Resp, F, Fut, E>(
    ctx: &mut Ctx,
    store: &dyn Store,
    mut record: EffectRecord,
    call: F,
) -> Result<Resp, NodeError>
where
    Resp: Serialize + DeserializeOwned,
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = Result<Resp, E>>,
    E: Into<NodeError>,
{
    let name = record.name.clone();
    let store_failed = |e: crate::StoreError| {
        NodeError::fatal(format!(
            "the journal of effect `{name}` (key {}) could not be used: {e}",
            record.key
        ))
    };
    let mut expected = match store.load_effect(&record.key).await.map_err(store_failed)? {
        None => None,
        Some(found) => {
            if found.request_hash != record.request_hash || found.name != record.name {
                return Err(NodeError::fatal(format!(
                    "effect call {} of node `{}` at step {} was journaled as `{}` with request {}, and is now `{}` \
                     with request {}: a node must make the same effect calls with the same requests when its \
                     step runs again",
                    record.call_index,
                    record.node,
                    record.step,
                    found.name,
                    found.request_hash,
                    record.name,
                    record.request_hash
                )));
            }
            match found.state {
                EffectState::Completed { response } => {
                    ctx.note_effect(EffectNote::of(&record));
                    return decode_response(&record, response);
                }
                EffectState::Rejected { message } => return Err(NodeError::fatal(message)),
                EffectState::Started if record.class == EffectClass::NonIdempotent => {
                    ctx.stop(CtxStop::NeedsConfirmation {
                        key: record.key.clone(),
                        name: record.name.clone(),
                    });
                    return Err(NodeError::fatal(format!(
                        "effect `{}` (key {}) started before a crash and its outcome is unknown: the run waits for \
                         `Engine::resolve_effect`",
                        record.name, record.key
                    )));
                }
                state => Some(state),
            }
        }
    };
    if record.class == EffectClass::NonIdempotent {
        record.state = EffectState::Started;
        match store.put_effect(&record, expected.as_ref()).await.map_err(store_failed)? {
            EffectOutcome::Written => expected = Some(EffectState::Started),
            // The lease is lost: the call is not made.
            EffectOutcome::Fenced => return Err(fenced(ctx, &record)),
            other => return Err(changed_under_us(ctx, &record, other)),
        }
    }
    let result = call(record.key.clone()).await;
    match result {
        Ok(response) => {
            let value = serde_json::to_value(&response).map_err(|e| {
                NodeError::fatal(format!("the response of effect `{}` does not serialize: {e}", record.name))
            })?;
            record.state = EffectState::Completed { response: value };
            match store.put_effect(&record, expected.as_ref()).await.map_err(store_failed)? {
                EffectOutcome::Written => {
                    ctx.note_effect(EffectNote::of(&record));
                    Ok(response)
                }
                EffectOutcome::Fenced => Err(fenced(ctx, &record)),
                other => Err(changed_under_us(ctx, &record, other)),
            }
        }
        Err(e) => {
            let e: NodeError = e.into();
            record.state = EffectState::Failed { message: e.to_string() };
            // Best effort: an entry left `Started` pauses a non-idempotent effect for confirmation instead.
            let _ = store.put_effect(&record, expected.as_ref()).await;
            Err(e)
        }
    }
}

/// A journal write refused because the worker's lease on the run is lost: the node fails and the run
/// stops at once, fenced ([`crate::Error::Fenced`]), writing nothing more.
fn fenced(ctx: &mut Ctx, record: &EffectRecord) -> NodeError {
    ctx.stop(CtxStop::Fenced);
    NodeError::fatal(format!(
        "the journal write of effect `{}` (key {}) was fenced: this worker's lease on the run is lost",
        record.name, record.key
    ))
}

/// A journal write that found the entry changed under it: another writer drives the run (a worker
/// claimed it while this engine drove it without a lease). The run stops at once, writing nothing more
/// ([`crate::Error::Superseded`]): never a failure of a run another writer continues.
fn changed_under_us(ctx: &mut Ctx, record: &EffectRecord, outcome: EffectOutcome) -> NodeError {
    ctx.stop(CtxStop::Superseded);
    NodeError::fatal(format!(
        "the journal entry of effect `{}` (key {}) changed while the call ran ({outcome:?}): another writer \
         drives this run",
        record.name, record.key
    ))
}

fn decode_response<Resp: DeserializeOwned>(
    record: &EffectRecord,
    response: serde_json::Value,
) -> Result<Resp, NodeError> {
    serde_json::from_value(response).map_err(|e| {
        NodeError::fatal(format!(
            "the journaled response of effect `{}` (key {}, step {}, node `{}`) does not deserialize as the type \
             the node expects now: {e}; the node's code changed since the call was made",
            record.name, record.key, record.step, record.node
        ))
    })
}

/// The replayed call: the recorded response, compared, never a call.
fn replayed<Resp: DeserializeOwned>(
    ctx: &mut Ctx,
    replay: &Replay,
    record: &EffectRecord,
) -> Result<Resp, NodeError> {
    let divergence = |expected: String, found: String| Divergence {
        step: record.step,
        node: record.node.clone(),
        call: Some(record.call_index),
        expected,
        found,
    };
    let found = format!("`{}` with request {}", record.name, record.request_hash);
    let Some(original) = replay.journal.get(&record.key) else {
        let d = divergence("no effect call here".into(), found);
        return Err(stop_or_error(ctx, replay, d, "the recorded run made no such effect call"));
    };
    if original.name != record.name || original.request_hash != record.request_hash {
        let d = divergence(format!("`{}` with request {}", original.name, original.request_hash), found);
        if let Some(err) = strict(ctx, replay, d) {
            return Err(err);
        }
    }
    match &original.state {
        EffectState::Completed { response } => {
            ctx.note_effect(EffectNote::of(record));
            decode_response(record, response.clone())
        }
        other => {
            let d = divergence(format!("a completed call, found {other:?}"), "a call to replay".into());
            Err(stop_or_error(ctx, replay, d, "the recorded call has no response to replay"))
        }
    }
}

/// Under `Strict`, stops the replay at `d` (the context carries the reason out of the node).
fn strict(ctx: &mut Ctx, replay: &Replay, d: Divergence) -> Option<NodeError> {
    let stop = replay.diverged(d)?;
    let message =
        format!("replay diverged at step {}: expected {}, found {}", stop.step, stop.expected, stop.found);
    ctx.stop(CtxStop::ReplayMismatch(stop));
    Some(NodeError::fatal(message))
}

fn stop_or_error(ctx: &mut Ctx, replay: &Replay, d: Divergence, what: &str) -> NodeError {
    strict(ctx, replay, d).unwrap_or_else(|| NodeError::fatal(what))
}
