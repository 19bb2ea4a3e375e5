//! Fails: `#[node]` on a struct inside the graph module.

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
    async fn plan(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default())
    }

    #[node(to = END)]
    struct Helper;
}

fn main() {}
