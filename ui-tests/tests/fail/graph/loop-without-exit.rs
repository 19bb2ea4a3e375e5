//! Fails: a cycle from which END cannot be reached.

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
    #[node(entry, to = [work, END])]
    async fn plan(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default())
    }

    #[node(to = check)]
    async fn work(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default())
    }

    #[node(to = work)]
    async fn check(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default())
    }
}

fn main() {}
