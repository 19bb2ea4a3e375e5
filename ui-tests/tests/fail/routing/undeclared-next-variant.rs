//! Fails: `plan` routes to an existing node, `publish`, that is not in its `to = [...]`: the macro says
//! to add the edge (rustc would only say that the variant does not exist).

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
    async fn plan(_s: &S, _ctx: &mut Ctx) -> NodeResult<S, plan::Next> {
        Ok((SDelta::default(), plan::Next::Publish))
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
