//! Fails: `var(..)` reached through `use std::env::*;`.

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

    use std::env::*;

    #[node(entry, to = END)]
    async fn plan(_s: &S, ctx: &mut Ctx) -> NodeResult<S> {
        let home = var("HOME").unwrap_or_default();
        let _ = ctx;
        Ok(SDelta::default().text(home))
    }
}

fn main() {}
