//! Fails: `rand::rng` in a node.

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
    async fn plan(_s: &S, ctx: &mut Ctx) -> NodeResult<S> {
        let mut rng = rand::rng();
        let n = rand::Rng::next_u64(&mut rng);
        let _ = ctx;
        Ok(SDelta::default().n(n))
    }
}

fn main() {}
