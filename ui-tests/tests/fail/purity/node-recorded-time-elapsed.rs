//! Fails: `ctx.now().elapsed()`: the recorded time is deterministic, its `elapsed()` reads the wall
//! clock.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct S {
    pub text: String,
    #[reduce(sum)]
    pub n: u64,
}

#[graph(state = S)]
mod flow {
    use super::*;

    #[node(entry, to = END)]
    async fn plan(_s: &S, ctx: &mut Ctx) -> NodeResult<S> {
        let waited = ctx.now().elapsed().map(|d| d.as_millis() as u64).unwrap_or_default();
        Ok(SDelta::default().n(waited))
    }
}

fn main() {}
