//! Fails: one parameter instead of two.

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
    async fn plan(_s: &S) -> NodeResult<S> {
        Ok(SDelta::default())
    }
}

fn main() {}
