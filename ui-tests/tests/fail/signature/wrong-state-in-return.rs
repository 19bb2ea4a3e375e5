//! Fails: `NodeResult` over another state.

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
    async fn plan(_s: &S, _ctx: &mut Ctx) -> NodeResult<String> {
        todo!()
    }
}

fn main() {}
