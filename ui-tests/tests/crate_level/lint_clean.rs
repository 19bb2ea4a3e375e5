//! The generated code is clean under strict lints (warnings, missing docs, unreachable `pub`), so users
//! who deny them can use the macros.
#![deny(warnings, missing_docs, unreachable_pub, clippy::all)]

use graph_runtime::prelude::*;

/// The state.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Count {
    /// Counted so far.
    #[reduce(sum)]
    pub n: u64,
    /// Private parts get private builders.
    seen: bool,
}

/// The graph.
#[graph(state = Count)]
pub mod counter {
    use super::*;

    #[node(entry, to = [step, fan])]
    async fn start(s: &Count, _ctx: &mut Ctx) -> NodeResult<Count, start::Next> {
        let next = if s.seen { start::Next::Fan } else { start::Next::Step };
        Ok((CountDelta::default().seen(true), next))
    }

    #[node(to = [start, END])]
    async fn step(s: &Count, _ctx: &mut Ctx) -> NodeResult<Count, step::Fork> {
        let fork = if s.n < 2 { step::Fork::new().start() } else { step::Fork::new().end() };
        Ok((CountDelta::default().n(1), fork))
    }

    #[node(to = END)]
    async fn fan(_s: &Count, _ctx: &mut Ctx) -> NodeResult<Count> {
        Ok(CountDelta::default().n(10))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let out = Engine::builder(counter::graph()).build().run("lint-1", Count::default()).await.unwrap();
    assert!(out.is_completed());
    assert_eq!(out.state.n, 11);
}

/// The case as a test: it compiles as a crate of its own and `main` runs to its assertions.
#[test]
fn compiles_and_runs() {
    main();
}
