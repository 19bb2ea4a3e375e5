//! Fails: a node counting in a `thread_local!` `Cell` of the file.

use std::cell::Cell;

thread_local! {
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

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
        let n = CALLS.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        let _ = ctx;
        Ok(SDelta::default().n(n))
    }
}

fn main() {}
