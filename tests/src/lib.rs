//! Shared fixtures for the integration tests: a hand-written state with one field per merge strategy,
//! the hand-built graphs the engine tests and their macro twins share ([`graphs`]), and hashes of a
//! run's committed history.

pub mod backends;
pub mod damage;
pub mod faults;
pub mod graphs;
pub mod hooked;
pub mod mounts;
pub mod proxy;
pub mod versions;

use std::collections::BTreeSet;
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use graph_runtime::state::{Delta, FieldWrite, Reducer, Strategy, merge};
use graph_runtime::{MergeError, Store};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A state exercising every strategy: `log` appends, `count` sums, `last` overwrites, `tags` unions,
/// `best` keeps the max.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// Append-merged log.
    pub log: Vec<String>,
    /// Sum-merged counter.
    pub count: u64,
    /// Overwritten value.
    pub last: Option<String>,
    /// Union-merged set.
    pub tags: BTreeSet<String>,
    /// Max-merged value.
    pub best: u64,
}

/// The delta of [`Trace`]: one optional part per field.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceDelta {
    /// Entries to append.
    pub log: Option<Vec<String>>,
    /// Amount to add.
    pub count: Option<u64>,
    /// Value to write.
    pub last: Option<Option<String>>,
    /// Tags to add.
    pub tags: Option<BTreeSet<String>>,
    /// Candidate maximum.
    pub best: Option<u64>,
}

impl TraceDelta {
    /// Appends one log entry.
    pub fn log(mut self, entry: impl Into<String>) -> Self {
        self.log.get_or_insert_with(Vec::new).push(entry.into());
        self
    }

    /// Adds to the counter.
    pub fn count(mut self, n: u64) -> Self {
        self.count = Some(n);
        self
    }

    /// Overwrites `last`.
    pub fn last(mut self, v: impl Into<String>) -> Self {
        self.last = Some(Some(v.into()));
        self
    }

    /// Adds a tag.
    pub fn tag(mut self, t: impl Into<String>) -> Self {
        self.tags.get_or_insert_with(BTreeSet::new).insert(t.into());
        self
    }

    /// Offers a maximum.
    pub fn best(mut self, v: u64) -> Self {
        self.best = Some(v);
        self
    }
}

impl Delta for TraceDelta {
    fn writes(&self, visit: &mut dyn FnMut(FieldWrite)) {
        if self.log.is_some() {
            visit(FieldWrite::new("log", Strategy::Append));
        }
        if self.count.is_some() {
            visit(FieldWrite::new("count", Strategy::Sum));
        }
        if self.last.is_some() {
            visit(FieldWrite::new("last", Strategy::Overwrite));
        }
        if self.tags.is_some() {
            visit(FieldWrite::new("tags", Strategy::Union));
        }
        if self.best.is_some() {
            visit(FieldWrite::new("best", Strategy::Max));
        }
    }
}

impl Reducer for Trace {
    type Delta = TraceDelta;

    fn apply(&mut self, d: TraceDelta) -> Result<(), MergeError> {
        if let Some(v) = d.log {
            merge::append(&mut self.log, v, "log")?;
        }
        if let Some(v) = d.count {
            merge::sum(&mut self.count, v, "count")?;
        }
        if let Some(v) = d.last {
            merge::overwrite(&mut self.last, v, "last")?;
        }
        if let Some(v) = d.tags {
            merge::union(&mut self.tags, v, "tags")?;
        }
        if let Some(v) = d.best {
            merge::max(&mut self.best, v, "best")?;
        }
        Ok(())
    }
}

/// The crash-test workflow: `tick` → (`a` ∥ `b`) → `tock` (a join) → `tick` …, `iterations` times, then
/// END: three steps per iteration. `a` and `b` sleep a little (a random, nondeterministic time) and draw
/// from `ctx.rng()`, so a crash can land anywhere and a resumed run must redraw the same numbers.
pub fn crash_graph(iterations: u64) -> graph_runtime::Graph<Trace> {
    use graph_runtime::{END, Graph, Route};
    Graph::<Trace>::builder("crash")
        .node("tick", |_s, _c| Box::pin(async { Ok((TraceDelta::default(), Route::Declared)) }))
        .node("a", crash_branch("a"))
        .node("b", crash_branch("b"))
        .node("tock", move |s, _c| {
            let done = s.count >= 2 * iterations;
            Box::pin(async move {
                Ok((TraceDelta::default().tag(format!("i{}", s.count / 2)), Route::Goto(u32::from(done))))
            })
        })
        .entry("tick")
        .edge("tick", "a")
        .edge("tick", "b")
        .edge("a", "tock")
        .edge("b", "tock")
        .edge("tock", "tick")
        .edge("tock", END)
        .build()
        .expect("valid graph")
}

/// A branch of [`crash_graph`].
fn crash_branch(
    name: &'static str,
) -> impl for<'b> Fn(
    &'b Trace,
    &'b mut graph_runtime::Ctx,
) -> graph_runtime::node::BoxFuture<'b, graph_runtime::NodeResult<Trace, graph_runtime::Route>>
+ Send
+ Sync
+ 'static {
    use graph_runtime::rand_core::Rng;
    move |s, ctx| {
        let seen = s.count;
        Box::pin(async move {
            tokio::time::sleep(random_delay(Duration::from_micros(400), seen)).await;
            let roll = ctx.rng().next_u64() % 1_000_000;
            Ok((
                TraceDelta::default().log(format!("{name}{seen}:{roll}")).count(1).best(roll),
                graph_runtime::Route::Declared,
            ))
        })
    }
}

/// Hex SHA-256 of the state's canonical JSON (maps sorted): the same in every process.
pub fn state_hash_canonical<S: Serialize>(state: &S) -> String {
    hex(&Sha256::digest(graph_runtime::canonical::to_vec(state).expect("state serializes")))
}

/// Hex SHA-256 of the state's JSON.
pub fn state_hash<S: Serialize>(state: &S) -> String {
    hex(&Sha256::digest(serde_json::to_vec(state).expect("state serializes")))
}

/// Hex SHA-256 over every committed checkpoint of a run: step, frontier (node, order key, path, input)
/// and the hash of the full state, in step order. Run id and timestamps are left out, so two runs of the same graph,
/// input and seed under different ids hash the same exactly when they committed the same history.
pub async fn history_hash(store: &dyn Store, run_id: &str) -> String {
    let mut h = Sha256::new();
    let history = store.history(run_id).await.expect("history");
    assert!(!history.is_empty(), "run `{run_id}` has no checkpoints");
    for meta in history {
        let cp = store.load_checkpoint(run_id, meta.step).await.expect("load").expect("listed step loads");
        h.update(cp.step.to_be_bytes());
        h.update(serde_json::to_vec(&cp.frontier).expect("frontier serializes"));
        h.update(cp.state_hash.as_bytes());
    }
    hex(&h.finalize())
}

/// A nondeterministic delay in `[0, max)`, from the process's random hasher keys: timing noise that the
/// engine must not let into results.
pub fn random_delay(max: Duration, salt: u64) -> Duration {
    let r = RandomState::new().hash_one(salt);
    Duration::from_nanos(r % max.as_nanos().max(1) as u64)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
