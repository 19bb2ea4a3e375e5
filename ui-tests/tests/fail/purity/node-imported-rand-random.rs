//! Fails: `random()` imported with `use rand::random;` in the graph module.

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

    use rand::random;

    #[node(entry, to = END)]
    async fn plan(_s: &S, ctx: &mut Ctx) -> NodeResult<S> {
        let n: u64 = random();
        let _ = ctx;
        Ok(SDelta::default().n(n))
    }
}

fn main() {}
