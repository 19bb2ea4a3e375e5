//! Subgraphs: a graph used as a node of another graph.
//!
//! A subgraph node maps the parent's state to the child graph's input, runs the child graph as a run of
//! its own in the parent's store, and maps the child's final state back to a delta of the parent. The
//! child's run id is derived from the parent item's identity ([`child_run_id`]: the parent run, the
//! node, the step and the item's path), so it is deterministic and unique, and everything keyed by a run
//! id inside the child (order keys, idempotency keys, effect keys, interrupt ids) is too. Every step of
//! the child is committed like any step, so a parent that crashes, is retried or is resumed finds the
//! child where it stopped and continues it there: nothing the child completed runs again.
//!
//! An interrupt inside the child (at any depth) stops the parent's item with the same question; its id
//! names the nesting (`"{path}#{index}>{child interrupt id}"`). Answering it delivers the answer to the
//! child, which resumes in place. A sleep inside the child parks the parent until the same time.
//! See `docs/composition.md`.

use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

use crate::ctx::Ctx;
use crate::engine::Engine;
use crate::env::RunEnv;
use crate::error::{CtxStop, Error, NodeError};
use crate::graph::{Graph, GraphBuilder};
use crate::node::{BoxFuture, Node, NodeResult, Route};
use crate::policy::NodePolicy;
use crate::run::ObserverSlot;
use crate::run::{RunOptions, RunOutcome};
use crate::state::Reducer;
use crate::store::{InterruptKind, RunStatus};
use crate::stream::{Observer, Overflow, StreamModes, SubgraphEvent};

/// Maps the parent's state (and the item's branch input, when a `Route::Fork` gave it one) to the child
/// graph's input.
pub type InputMap<P, C> = Arc<dyn Fn(&P, Option<&Value>) -> Result<C, NodeError> + Send + Sync>;
/// Maps the child's final state (and the parent's state the node read) to the parent's delta.
pub type OutputMap<P, C> = Arc<dyn Fn(&P, C) -> <P as Reducer>::Delta + Send + Sync>;

/// The run id of the subgraph run of a parent item: `"{parent run}/{node}.{step}.{path prefix}"` (the
/// first 12 hex digits of the item's path, which tell apart the items of one step).
pub fn child_run_id(parent_run: &str, node: &str, step: u64, path: &str) -> String {
    let short = path.get(..12).unwrap_or(path);
    format!("{parent_run}/{node}.{step}.{short}")
}

/// The seed of a run nested in a parent run (a subgraph's, a child's): derived from the parent's seed
/// and the nested run's id, so a parent given its own seed gives its nested runs theirs.
pub(crate) fn child_seed(parent_seed: u64, child_run: &str) -> u64 {
    crate::keys::derive_run_seed(&format!("{parent_seed:016x}/{child_run}"))
}

/// A node whose body is a graph (what [`crate::GraphBuilder::subgraph`] and `#[node(subgraph = ..)]`
/// add).
pub struct Subgraph<P: Reducer, C: Reducer> {
    graph: Graph<C>,
    input: InputMap<P, C>,
    output: OutputMap<P, C>,
    /// The child engine per parent engine (by its run environment), made on first use.
    engines: Mutex<Vec<(Weak<RunEnv>, Engine<C>)>>,
}

impl<P: Reducer, C: Reducer> Subgraph<P, C> {
    /// A subgraph node running `graph`, with the two mapping functions.
    pub fn new(
        graph: Graph<C>,
        input: impl Fn(&P) -> C + Send + Sync + 'static,
        output: impl Fn(&P, C) -> P::Delta + Send + Sync + 'static,
    ) -> Self {
        Self::from_input(graph, move |p, _| Ok(input(p)), output)
    }

    /// A subgraph node whose child input is built from the parent's state and the item's branch input
    /// (LangGraph's `Send` to a subgraph: each branch of a fork runs a child of its own, from its own
    /// input). `input` may refuse a branch input it cannot read (a non-retryable error fails the node).
    pub fn from_input(
        graph: Graph<C>,
        input: impl Fn(&P, Option<&Value>) -> Result<C, NodeError> + Send + Sync + 'static,
        output: impl Fn(&P, C) -> P::Delta + Send + Sync + 'static,
    ) -> Self {
        Subgraph { graph, input: Arc::new(input), output: Arc::new(output), engines: Mutex::new(Vec::new()) }
    }

    fn input_of(&self, parent: &P, ctx: &Ctx) -> Result<C, NodeError> {
        (self.input)(parent, ctx.raw_input())
    }

    /// The child graph.
    pub fn graph(&self) -> &Graph<C> {
        &self.graph
    }

    fn engine_for(&self, env: &Arc<RunEnv>) -> Engine<C> {
        let mut engines = self.engines.lock().unwrap_or_else(|e| e.into_inner());
        engines.retain(|(e, _)| e.strong_count() > 0);
        if let Some((_, engine)) = engines.iter().find(|(e, _)| e.as_ptr() == Arc::as_ptr(env)) {
            return engine.clone();
        }
        let engine = Engine::nested(self.graph.clone(), env);
        engines.push((Arc::downgrade(env), engine.clone()));
        engine
    }

    async fn step(&self, parent: &P, ctx: &mut Ctx) -> NodeResult<P, Route> {
        let Some(env) = ctx.env() else {
            // A standalone context (a unit test of the parent's node): the child runs in memory.
            let engine = Engine::builder(self.graph.clone()).build();
            let id = child_run_id(ctx.run_id(), ctx.node(), ctx.step(), ctx.path().as_str());
            let out = engine.run(&id, self.input_of(parent, ctx)?).await.map_err(NodeError::fatal)?;
            return match out.status {
                RunStatus::Completed => Ok(((self.output)(parent, out.state), Route::Declared)),
                other => Err(NodeError::fatal(format!(
                    "subgraph `{}` stopped {} in a standalone context, which cannot wait",
                    self.graph.name(),
                    other.as_str()
                ))),
            };
        };
        let item = ctx.item();
        let id = child_run_id(&item.run_id, &item.node, item.step, item.path.as_str());
        if let Some(replay) = &env.replay {
            // A replay reads the child's result as recorded I/O: replay the child's own run to check
            // its steps.
            let engine = Engine::nested(
                self.graph.clone(),
                &Arc::new(RunEnv {
                    store: replay.source.clone(),
                    replay: None,
                    clock: env.clock.clone(),
                    options: env.options.clone(),
                    chain_key: env.chain_key.clone(),
                    waker: Default::default(),
                    children: Default::default(),
                }),
            );
            return match engine.outcome(&id).await {
                Ok(Some(out)) if out.is_completed() => {
                    Ok(((self.output)(parent, out.state), Route::Declared))
                }
                Ok(_) => Err(NodeError::fatal(format!(
                    "replay: the subgraph run `{id}` the original run made is not complete in the store"
                ))),
                Err(e) => Err(NodeError::fatal(format!("replay: the subgraph run `{id}`: {e}"))),
            };
        }
        let engine = self.engine_for(&env);
        let seed = child_seed(item.run_seed, &id);
        let mut opts = RunOptions::default().seed(seed).cancel(ctx.cancellation_token());
        // A streamed parent sees the child's events, under the namespace of this node.
        let parent_observer = item.sink.clone().and_then(|s| s.any().downcast::<Observer<P>>().ok());
        let forward = parent_observer.map(|sink| {
            let modes = [StreamModes::UPDATES, StreamModes::CUSTOM, StreamModes::DEBUG]
                .into_iter()
                .filter(|m| sink.modes().contains(*m))
                .fold(StreamModes::CUSTOM, |a, m| a | m);
            let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
            let observer: Arc<Observer<C>> = Arc::new(Observer::new(tx, modes, Overflow::Wait));
            opts.observer = ObserverSlot(Some(observer));
            let here = format!("{}@{}", item.node, item.step);
            tokio::spawn(async move {
                while let Some(event) = rx.recv().await {
                    if let Some((below, event)) = SubgraphEvent::of(event) {
                        let mut namespace = vec![here.clone()];
                        namespace.extend(below);
                        sink.subgraph(namespace, event).await;
                    }
                }
            })
        });
        let result = self.drive(parent, ctx, &env, &engine, &id, opts).await;
        if let Some(forward) = forward {
            // The child's events are all out before this item's own.
            let _ = forward.await;
        }
        result
    }

    /// Starts or continues the child run `id` and maps its outcome.
    async fn drive(
        &self,
        parent: &P,
        ctx: &mut Ctx,
        env: &Arc<RunEnv>,
        engine: &Engine<C>,
        id: &str,
        opts: RunOptions,
    ) -> NodeResult<P, Route> {
        let id = id.to_owned();
        let answers: Vec<(String, Value)> =
            ctx.all_resume_inputs().iter().filter_map(nested_answer).collect();
        let mut out = match env.store.run_info(&id).await.map_err(|e| NodeError::new(e.to_string()))? {
            None => engine.run_with(&id, self.input_of(parent, ctx)?, opts.clone()).await,
            Some(info) => {
                let waits = info.status.waits();
                let open: Vec<(String, Value)> =
                    answers.into_iter().filter(|(a, _)| waits.iter().any(|w| w.id == *a)).collect();
                let sleeps = open
                    .iter()
                    .any(|(a, _)| waits.iter().any(|w| w.id == *a && w.kind == InterruptKind::Sleep));
                if sleeps {
                    engine.wake_with(&id, opts.clone()).await
                } else if open.is_empty() {
                    engine.resume_with(&id, opts.clone()).await
                } else {
                    engine.resume_with_inputs_with(&id, open, opts.clone()).await
                }
            }
        };
        loop {
            let done = self.outcome(ctx, &id, out)?;
            match done {
                Next::Done(state) => return Ok(((self.output)(parent, state), Route::Declared)),
                // A breakpoint inside the child: the parent's run stops at its own breakpoints.
                Next::PastBreakpoint => out = engine.resume_with(&id, opts.clone()).await,
            }
        }
    }

    /// What the child's outcome means for the parent's item.
    fn outcome(
        &self,
        ctx: &mut Ctx,
        id: &str,
        out: crate::Result<RunOutcome<C>>,
    ) -> Result<Next<C>, NodeError> {
        let name = self.graph.name();
        let out = match out {
            Ok(out) => out,
            Err(Error::ResumeInput { detail, .. }) => {
                let index = u32::try_from(ctx.all_resume_inputs().len().saturating_sub(1)).unwrap_or(0);
                ctx.stop(CtxStop::InputRejected { index, detail: format!("subgraph `{name}`: {detail}") });
                return Err(NodeError::fatal(format!("subgraph `{name}` refused the answer")));
            }
            Err(Error::Superseded { .. }) => {
                ctx.stop(CtxStop::Superseded);
                return Err(NodeError::fatal(format!("subgraph run `{id}` is driven elsewhere")));
            }
            Err(Error::Fenced { .. }) => {
                ctx.stop(CtxStop::Fenced);
                return Err(NodeError::fatal(format!("subgraph run `{id}` was fenced")));
            }
            Err(e) => return Err(NodeError::fatal(format!("subgraph `{name}` (run `{id}`) failed: {e}"))),
        };
        match &out.status {
            RunStatus::Completed => Ok(Next::Done(out.state)),
            RunStatus::Interrupted(list) | RunStatus::Waiting(list) => {
                if let Some(q) = list.iter().find(|i| i.kind == InterruptKind::Input) {
                    if q.wake_at_ms.is_some() {
                        return Err(NodeError::fatal(format!(
                            "subgraph `{name}` asks `{}` with a deadline; questions with deadlines inside \
                             subgraphs are not supported (ask without one, or ask in the parent)",
                            q.id
                        )));
                    }
                    return Err(ctx.ask_nested(InterruptKind::Input, q.payload.clone(), None, q.id.clone()));
                }
                if let Some(s) =
                    list.iter().filter(|i| i.kind == InterruptKind::Sleep).min_by_key(|i| i.wake_at_ms)
                {
                    return Err(ctx.ask_nested(
                        InterruptKind::Sleep,
                        Value::Null,
                        s.wake_at_ms,
                        s.id.clone(),
                    ));
                }
                if list.iter().any(|i| i.kind == InterruptKind::Event) {
                    return Err(NodeError::fatal(format!(
                        "subgraph `{name}` waits for an event; event waits inside subgraphs are not \
                         supported (wait in the parent and pass the payload in the child's input)"
                    )));
                }
                Ok(Next::PastBreakpoint)
            }
            RunStatus::Cancelled => Err(NodeError::fatal(format!("subgraph run `{id}` was cancelled"))),
            other => Err(NodeError::fatal(format!(
                "subgraph `{name}` (run `{id}`) stopped {}: continue it there, then resume this run",
                other.as_str()
            ))),
        }
    }
}

enum Next<C> {
    Done(C),
    PastBreakpoint,
}

/// An answer the parent's engine delivered for a subgraph's question: `(child interrupt id, input)`.
fn nested_answer(v: &Value) -> Option<(String, Value)> {
    let o = v.as_object()?;
    if o.len() != 2 {
        return None;
    }
    Some((o.get("interrupt")?.as_str()?.to_owned(), o.get("input")?.clone()))
}

impl<P: Reducer, C: Reducer> Node<P> for Subgraph<P, C> {
    fn run<'a>(&'a self, state: &'a P, ctx: &'a mut Ctx) -> BoxFuture<'a, NodeResult<P, Route>> {
        Box::pin(self.step(state, ctx))
    }
}

impl<S: Reducer> GraphBuilder<S> {
    /// Adds a node whose body is `graph` (a subgraph): `input` maps this graph's state to the child's
    /// input, the child runs to its end as a run of its own in the same store (its id derived from this
    /// item, [`crate::subgraph::child_run_id`]), and `output` maps its final state to this node's delta.
    /// The node follows its declared edges. An interrupt inside the child stops this run with the same
    /// question and resumes the child in place. The node's timeout (and retries) cover the whole child
    /// run: give it a policy ([`GraphBuilder::subgraph_with`]) when the child takes longer than the
    /// engine's default node timeout. See `docs/composition.md`.
    ///
    /// # Examples
    ///
    /// ```
    /// use graph_runtime::prelude::*;
    ///
    /// #[reducer]
    /// #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    /// struct Count { #[reduce(sum)] n: u32 }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), graph_runtime::Error> {
    /// let child = Graph::<Count>::builder("inc")
    ///     .node("inc", |_s, _c| Box::pin(async { Ok((CountDelta::default().n(10), Route::Declared)) }))
    ///     .entry("inc")
    ///     .edge("inc", END)
    ///     .build()?;
    /// let parent = Graph::<Count>::builder("outer")
    ///     .subgraph("inner", child, |p: &Count| Count { n: p.n }, |_p, c: Count| CountDelta::default().n(c.n))
    ///     .entry("inner")
    ///     .edge("inner", END)
    ///     .build()?;
    /// let out = Engine::builder(parent).build().run("r", Count { n: 1 }).await?;
    /// assert_eq!(out.state.n, 1 + 11);
    /// # Ok(())
    /// # }
    /// ```
    pub fn subgraph<C: Reducer>(
        self,
        name: impl Into<String>,
        graph: Graph<C>,
        input: impl Fn(&S) -> C + Send + Sync + 'static,
        output: impl Fn(&S, C) -> S::Delta + Send + Sync + 'static,
    ) -> Self {
        self.subgraph_with(name, graph, input, output, NodePolicy::default())
    }

    /// [`GraphBuilder::subgraph`] with the node's own policy.
    pub fn subgraph_with<C: Reducer>(
        self,
        name: impl Into<String>,
        graph: Graph<C>,
        input: impl Fn(&S) -> C + Send + Sync + 'static,
        output: impl Fn(&S, C) -> S::Delta + Send + Sync + 'static,
        policy: NodePolicy,
    ) -> Self {
        self.subgraph_from_input(name, graph, move |p, _| Ok(input(p)), output, policy)
    }

    /// [`GraphBuilder::subgraph`] whose child input is built from this graph's state and the item's branch
    /// input (LangGraph's `Send` to a subgraph): a node that forks to `name` with
    /// `Branch::with_input(edge, &x)` runs one child per branch, each from its own input (`None` for a
    /// plain route). Each branch's child is a run of its own (the branches' paths differ).
    pub fn subgraph_from_input<C: Reducer>(
        self,
        name: impl Into<String>,
        graph: Graph<C>,
        input: impl Fn(&S, Option<&serde_json::Value>) -> Result<C, NodeError> + Send + Sync + 'static,
        output: impl Fn(&S, C) -> S::Delta + Send + Sync + 'static,
        policy: NodePolicy,
    ) -> Self {
        let name = name.into();
        let signature = format!("subgraph {}", graph.name());
        self.signature(name.clone(), signature).add_node(
            name,
            Subgraph::from_input(graph, input, output),
            policy,
        )
    }
}
