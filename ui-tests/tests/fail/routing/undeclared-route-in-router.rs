//! Fails: a router (`route = f`) returns a route to an existing node, `publish`, that is not among the
//! routed node's edges.

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

    #[node(entry, to = [inc, END], route = until_five)]
    async fn inc(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default().n(1))
    }

    fn until_five(s: &S) -> inc::Next {
        if s.n < 5 { inc::Next::Inc } else { inc::Next::Publish }
    }

    #[node(to = END)]
    async fn publish(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default())
    }
}

fn main() {}
