//! Fails: the wall clock through a qualified path, `<std::time::SystemTime>::now()`.

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
        let _t = <std::time::SystemTime>::now();
        let _ = ctx;
        Ok(SDelta::default())
    }
}

fn main() {}
