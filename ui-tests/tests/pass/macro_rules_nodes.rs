//! Nodes declared through a `macro_rules!` macro: the node names come from another hygiene context, and
//! the generated handlers must still reach the state and context they pass to them.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    #[reduce(append)]
    pub seen: Vec<String>,
}

macro_rules! pipeline {
    ($first:ident -> $second:ident) => {
        #[graph(state = Tally)]
        mod pipeline {
            use super::*;

            #[node(entry, to = $second)]
            async fn $first(_s: &Tally, ctx: &mut Ctx) -> NodeResult<Tally> {
                Ok(TallyDelta::default().push_seen(ctx.node()))
            }

            #[node(to = END)]
            async fn $second(_s: &Tally, ctx: &mut Ctx) -> NodeResult<Tally> {
                Ok(TallyDelta::default().push_seen(ctx.node()))
            }
        }
    };
}

pipeline!(fetch -> store);

/// Runs the case (a `#[tokio::test]` of `tests/pass.rs`).
pub(crate) async fn main() {
    let engine = Engine::builder(pipeline::graph()).build();
    let out = engine.run("macro-rules-1", Tally::default()).await.expect("the run completes");
    assert_eq!(out.state.seen, ["fetch", "store"]);
}
