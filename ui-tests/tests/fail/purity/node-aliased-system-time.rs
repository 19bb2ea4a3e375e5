//! Fails: the wall clock under an alias of the file (`use std::time::SystemTime as Clock;`),
//! reached through `use super::*`.

use std::time::SystemTime as Clock;

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
        let _t = Clock::now();
        let _ = ctx;
        Ok(SDelta::default())
    }
}

fn main() {}
