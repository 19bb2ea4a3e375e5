//! Fails: a node routed by `route = ...` also returns its own `Next`.

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
    async fn inc(_s: &S, _ctx: &mut Ctx) -> NodeResult<S, inc::Next> {
        Ok((SDelta::default().n(1), inc::Next::End))
    }

    fn until_five(s: &S) -> inc::Next {
        if s.n < 5 { inc::Next::Inc } else { inc::Next::End }
    }
}

fn main() {}
