//! Durable, deterministic graph workflows.
//!
//! A workflow is a graph of async nodes over a state type. The [`Engine`] runs it in supersteps: every
//! item of a step reads the same committed state, their deltas merge in ascending order key (never in
//! completion order), and the next step is committed to a [`Store`] before any of its items run. Same
//! graph, same input, same seed → byte-identical state and checkpoints, whatever the timing or the number
//! of worker threads. See `docs/guarantees.md` for the full execution model.
//!
//! ```
//! use graph_runtime::prelude::*;
//! use graph_runtime::node::BoxFuture;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), graph_runtime::Error> {
//! // A stateless two-node graph, built by hand (the `#[graph]` macro generates the same description).
//! fn hop<'a>(_s: &'a (), ctx: &'a mut Ctx) -> BoxFuture<'a, NodeResult<(), Route>> {
//!     Box::pin(async move { Ok(((), if ctx.step() < 4 { Route::Goto(0) } else { Route::End })) })
//! }
//! let graph = Graph::<()>::builder("hops")
//!     .node("hop", hop)
//!     .entry("hop")
//!     .edge("hop", "hop")
//!     .edge("hop", END)
//!     .build()?;
//! let engine = Engine::builder(graph).build();
//! let out = engine.run("run-1", ()).await?;
//! assert_eq!(out.steps, 5);
//! # Ok(())
//! # }
//! ```

pub use graph_store::{canonical, keys};

/// The version a stored graph fingerprint names (`"v<N>:…"` → N; a plain fingerprint is version 1).
pub use graph_core::fingerprint_version as graph_version;
pub mod child;
pub mod clock;
pub mod cron;
pub mod ctx;
pub mod effect;
pub mod engine;
mod env;
pub mod error;
pub mod events;
pub mod graph;
#[doc(hidden)]
pub mod macro_support;
pub mod node;
mod persist;
pub mod policy;
mod run;
pub mod state;
pub mod store;
pub mod stream;
pub mod subgraph;
pub mod telemetry;
pub mod worker;

/// What the fuzz targets in `fuzz/` call (feature `fuzzing`): not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::persist::fuzz::*;
    #[cfg(feature = "sled")]
    pub use graph_store_sled::fuzzing as sled;
}

#[doc(hidden)]
pub use macro_support as __private;

pub use clock::{Clock, SystemClock, TestClock};
pub use ctx::{Answer, Ctx, DrawRange};
pub use effect::{Divergence, Effect, ReplayMode};
pub use engine::{
    ChainReport, Engine, EngineBuilder, HistoryEntry, Migrated, Migration, ReplayCheck, ReplayOutcome,
    ReplayVerdict, RunOptions, RunOutcome,
};
pub use error::{ConflictError, Error, GraphError, MergeError, NodeError, Result, StoreError};
pub use events::{ChainKey, Event, EventType};
pub use graph::{END, Graph, GraphBuilder, GraphShape, NodeShape};
pub use graph_macros::{graph, node, reduce, reducer};
pub use node::{Branch, Node, NodeResult, Route, Routing, Static};
pub use policy::{Backoff, EngineOptions, NodePolicy, RetryPolicy};
pub use state::{ConflictPolicy, Delta, Reducer};
pub use store::{
    Checkpoint, CommitOutcome, Integrity, Interrupt, InterruptKind, MemoryStore, PauseReason, Resolution,
    RunStatus, Store,
};
pub use stream::{NodeOutcome, Overflow, RunStream, StreamEvent, StreamModes, StreamOptions, SubgraphEvent};

pub use rand_chacha;
pub use rand_core;
pub use tokio_util::sync::CancellationToken;
pub use uuid::Uuid;

/// The README's example, compiled and run as a doctest so it stays true.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The effects guide, its examples compiled and run as doctests.
#[doc = include_str!("../../docs/effects.md")]
#[cfg(doctest)]
pub struct EffectsDoctests;

/// The human-in-the-loop guide, its examples compiled and run as doctests.
#[doc = include_str!("../../docs/interrupts.md")]
#[cfg(doctest)]
pub struct InterruptsDoctests;

/// The time guide, its examples compiled and run as doctests.
#[doc = include_str!("../../docs/time.md")]
#[cfg(doctest)]
pub struct TimeDoctests;

/// The composition guide, its examples compiled and run as doctests.
#[doc = include_str!("../../docs/composition.md")]
#[cfg(doctest)]
pub struct CompositionDoctests;

/// The audit-trail guide, its examples compiled and run as doctests.
#[doc = include_str!("../../docs/audit.md")]
#[cfg(doctest)]
pub struct AuditDoctests;

/// The observability guide, its examples compiled and run as doctests.
#[doc = include_str!("../../docs/observability.md")]
#[cfg(doctest)]
pub struct ObservabilityDoctests;

/// The guide for LangGraph users, its examples compiled and run as doctests.
#[doc = include_str!("../../docs/from-langgraph.md")]
#[cfg(doctest)]
pub struct FromLangGraphDoctests;

/// The names most workflows need.
pub mod prelude {
    pub use crate::store::Durability;
    #[cfg(feature = "sled")]
    pub use crate::store::{SledOptions, SledStore};
    #[cfg(feature = "sqlite")]
    pub use crate::store::{SqliteOptions, SqliteStore};
    pub use crate::{
        Answer, Backoff, Branch, CancellationToken, ConflictPolicy, Ctx, Delta, END, Engine, EngineOptions,
        Graph, Interrupt, InterruptKind, MemoryStore, Migration, NodeError, NodePolicy, NodeResult,
        PauseReason, Reducer, ReplayMode, Resolution, RetryPolicy, Route, RunOptions, RunOutcome, RunStatus,
        Static,
    };
    pub use graph_macros::{graph, node, reduce, reducer};
    pub use rand_core::Rng as _;
    pub use serde::{Deserialize, Serialize};
}
