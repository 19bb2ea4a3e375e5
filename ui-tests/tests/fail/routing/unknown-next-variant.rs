//! Fails: a `Next` variant that names no node of the graph (a typo) is rustc's "no variant" error,
//! which lists the variants that exist.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct S {
    pub text: String,
}

#[graph(state = S)]
mod flow {
    use super::*;
    #[node(entry, to = [review, END])]
    async fn plan(_s: &S, _ctx: &mut Ctx) -> NodeResult<S, plan::Next> {
        Ok((SDelta::default(), plan::Next::Reveiw))
    }

    #[node(to = END)]
    async fn review(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default())
    }
}

fn main() {}
