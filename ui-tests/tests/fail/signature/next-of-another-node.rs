//! Fails: a node returning another node's `Next`.

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
    #[node(entry, to = [check, END])]
    async fn plan(_s: &S, _ctx: &mut Ctx) -> NodeResult<S, check::Next> {
        todo!()
    }

    #[node(to = [plan, END])]
    async fn check(_s: &S, _ctx: &mut Ctx) -> NodeResult<S, check::Next> {
        Ok((SDelta::default(), check::Next::End))
    }
}

fn main() {}
