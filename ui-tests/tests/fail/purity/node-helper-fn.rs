//! Fails: the wall clock in a helper function of the graph module, called by two nodes: reported
//! once, in the helper, naming the first node.

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

    fn stamp() -> String {
        format!("{:?}", std::time::SystemTime::now())
    }

    #[node(entry, to = other)]
    async fn plan(_s: &S, ctx: &mut Ctx) -> NodeResult<S> {
        let _ = ctx;
        Ok(SDelta::default().text(stamp()))
    }

    #[node(to = END)]
    async fn other(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default().text(stamp()))
    }
}

fn main() {}
