//! The benchmark workloads, shared by the criterion benches (`benches/engine.rs`) and the runner behind
//! `docs/BENCHMARKS.md` (`src/main.rs`). Each mirrors a workload of `bench/langgraph/bench.py`.

/// The `inspector` workload: `graphctl serve`'s runs list over 100,000 runs.
pub mod inspector;
/// The `postgres` and `mysql` workloads of the runner (features `postgres`, `mysql`).
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub mod servers;
/// The workloads of runs that wait: sleepers, wake lateness, event latency.
pub mod timers;
/// The `workers_postgres` and `workers_mysql` workloads of the runner.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub mod workers;

use graph_runtime::node::BoxFuture;
use graph_runtime::state::{Delta, FieldWrite, Reducer, Strategy, merge};
use graph_runtime::{Branch, END, Graph, MergeError, NodeResult, Route};
use serde::{Deserialize, Serialize};

/// A counter: `count` sums.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Count {
    /// The counter.
    pub count: u64,
}

impl Reducer for Count {
    type Delta = CountDelta;
    fn apply(&mut self, d: CountDelta) -> Result<(), MergeError> {
        match d.count {
            Some(n) => merge::sum(&mut self.count, n, "count"),
            None => Ok(()),
        }
    }
}

/// The delta of [`Count`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CountDelta {
    /// Amount to add.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub count: Option<u64>,
}

impl Delta for CountDelta {
    fn writes(&self, visit: &mut dyn FnMut(FieldWrite)) {
        if self.count.is_some() {
            visit(FieldWrite::new("count", Strategy::Sum));
        }
    }
}

/// Workload 1 (`loop`): one node routing to itself until `count == n`.
pub fn loop_graph(n: u64) -> Graph<Count> {
    fn step(
        n: u64,
    ) -> impl for<'a> Fn(&'a Count, &'a mut graph_runtime::Ctx) -> BoxFuture<'a, NodeResult<Count, Route>>
    + Send
    + Sync {
        move |s, _ctx| {
            let next = s.count + 1;
            Box::pin(async move { Ok((CountDelta { count: Some(1) }, Route::Goto(u32::from(next >= n)))) })
        }
    }
    Graph::builder("loop")
        .node("step", step(n))
        .entry("step")
        .edge("step", "step")
        .edge("step", END)
        .build()
        .expect("valid")
}

/// The loop of [`loop_graph`] run as a subgraph: a node `call` runs `loop_graph(inner)` as a subgraph
/// (a child run of `inner` steps, its count added to the parent's) and routes back to itself until the
/// count reaches `calls * inner`; the same steps as `loop_graph(calls * inner)`, `inner` at a time.
pub fn nested_loop_graph(calls: u64, inner: u64) -> Graph<Count> {
    let total = calls * inner;
    Graph::builder("nested-loop")
        .subgraph(
            "call",
            loop_graph(inner),
            |_p: &Count| Count::default(),
            |_p, c: Count| CountDelta { count: Some(c.count) },
        )
        .router("call", move |s: &Count| u32::from(s.count >= total))
        .entry("call")
        .edge("call", "call")
        .edge("call", END)
        .build()
        .expect("valid")
}

/// The loop of [`loop_graph`] with one effect call per step, of the given class (`"idempotent"`,
/// `"non_idempotent"`), whose closure does nothing: what journaling an effect costs.
pub fn effect_graph(n: u64, class: &'static str) -> Graph<Count> {
    Graph::builder("effect")
        .node("step", move |s: &Count, ctx| {
            let next = s.count + 1;
            Box::pin(async move {
                let effect = ctx.effect("bench.call", &next);
                let effect =
                    if class == "idempotent" { effect.idempotent() } else { effect.non_idempotent() };
                let _: u64 =
                    effect.run(|_key| async move { Ok::<_, graph_runtime::NodeError>(next) }).await?;
                Ok((CountDelta { count: Some(1) }, Route::Goto(u32::from(next >= n))))
            })
        })
        .entry("step")
        .edge("step", "step")
        .edge("step", END)
        .build()
        .expect("valid")
}

/// Fan-out state: `results` appends, `joined` overwrites.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fan {
    /// One entry per worker, in branch order.
    pub results: Vec<u64>,
    /// Written by the join.
    pub joined: u64,
}

/// The delta of [`Fan`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FanDelta {
    /// Entries to append.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub results: Option<Vec<u64>>,
    /// The join's count.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub joined: Option<u64>,
}

impl Reducer for Fan {
    type Delta = FanDelta;
    fn apply(&mut self, d: FanDelta) -> Result<(), MergeError> {
        if let Some(v) = d.results {
            merge::append(&mut self.results, v, "results")?;
        }
        if let Some(v) = d.joined {
            merge::overwrite(&mut self.joined, v, "joined")?;
        }
        Ok(())
    }
}

impl Delta for FanDelta {
    fn writes(&self, visit: &mut dyn FnMut(FieldWrite)) {
        if self.results.is_some() {
            visit(FieldWrite::new("results", Strategy::Append));
        }
        if self.joined.is_some() {
            visit(FieldWrite::new("joined", Strategy::Overwrite));
        }
    }
}

/// Workload 2 (`fanout`): `fan` forks `width` branches of `work`, each with its index as input; every
/// branch appends its index; `join` runs once and counts them.
pub fn fanout_graph(width: u64) -> Graph<Fan> {
    Graph::builder("fanout")
        .node("fan", move |_s: &Fan, _c| {
            Box::pin(async move {
                let branches =
                    (0..width).map(|i| Branch::with_input(0, &i)).collect::<Result<Vec<_>, _>>()?;
                Ok((FanDelta::default(), Route::Fork(branches)))
            })
        })
        .node("work", |_s: &Fan, ctx| {
            Box::pin(async move {
                let i: u64 = ctx.input()?.unwrap_or_default();
                Ok((FanDelta { results: Some(vec![i]), joined: None }, Route::Declared))
            })
        })
        .node("join", |s: &Fan, _c| {
            let n = s.results.len() as u64;
            Box::pin(async move { Ok((FanDelta { results: None, joined: Some(n) }, Route::Declared)) })
        })
        .entry("fan")
        .edge("fan", "work")
        .edge("work", "join")
        .edge("join", END)
        .build()
        .expect("valid")
}

/// Growth state: `chunks` appends.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Blob {
    /// The chunks.
    pub chunks: Vec<String>,
}

/// The delta of [`Blob`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BlobDelta {
    /// Chunks to append.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub chunks: Option<Vec<String>>,
}

impl Reducer for Blob {
    type Delta = BlobDelta;
    fn apply(&mut self, d: BlobDelta) -> Result<(), MergeError> {
        match d.chunks {
            Some(v) => merge::append(&mut self.chunks, v, "chunks"),
            None => Ok(()),
        }
    }
}

impl Delta for BlobDelta {
    fn writes(&self, visit: &mut dyn FnMut(FieldWrite)) {
        if self.chunks.is_some() {
            visit(FieldWrite::new("chunks", Strategy::Append));
        }
    }
}

/// Workload 5 (`growth`): starting from one 1 MiB chunk, `grow` appends a 1 KiB chunk per step until
/// `steps` chunks were added.
pub fn growth_graph(steps: usize) -> Graph<Blob> {
    Graph::builder("growth")
        .node("grow", move |s: &Blob, _c| {
            let added = s.chunks.len();
            Box::pin(async move {
                Ok((
                    BlobDelta { chunks: Some(vec!["y".repeat(1024)]) },
                    Route::Goto(u32::from(added >= steps)),
                ))
            })
        })
        .entry("grow")
        .edge("grow", "grow")
        .edge("grow", END)
        .build()
        .expect("valid")
}

/// The growth workload's input: one 1 MiB chunk.
pub fn growth_input() -> Blob {
    Blob { chunks: vec!["x".repeat(1 << 20)] }
}
