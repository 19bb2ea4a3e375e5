//! Fails: a `Fork` method for an edge that is not declared does not exist.

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
    #[node(entry, to = [review, END])]
    async fn plan(_s: &S, _ctx: &mut Ctx) -> NodeResult<S, plan::Fork> {
        Ok((SDelta::default(), plan::Fork::new().review().publish()))
    }

    #[node(to = publish)]
    async fn review(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default())
    }

    #[node(to = END)]
    async fn publish(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default())
    }
}

fn main() {}
