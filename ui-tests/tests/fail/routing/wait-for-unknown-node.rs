//! Fails: a `wait_for` names a node that does not exist; suggests the closest name.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct S {
    #[reduce(sum)]
    pub n: u32,
}

#[graph(state = S)]
mod flow {
    use super::*;

    #[node(entry, to = d)]
    async fn check(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default())
    }

    #[node(to = END, wait_for = [chek])]
    async fn d(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default())
    }
}

fn main() {}
