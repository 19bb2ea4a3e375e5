//! Fails: a node reading a `static mut` of the graph module (the declaration is outside the body).

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

    static mut CALLS: u64 = 0;

    #[node(entry, to = END)]
    async fn plan(_s: &S, ctx: &mut Ctx) -> NodeResult<S> {
        let n = unsafe { CALLS };
        let _ = ctx;
        Ok(SDelta::default().n(n))
    }
}

fn main() {}
