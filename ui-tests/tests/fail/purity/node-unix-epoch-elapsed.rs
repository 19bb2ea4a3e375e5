//! Fails: `UNIX_EPOCH.elapsed()`, a wall-clock read (the time from the epoch to now).

use std::time::UNIX_EPOCH;

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
        let secs = UNIX_EPOCH.elapsed().map(|d| d.as_secs()).unwrap_or_default();
        let _ = ctx;
        Ok(SDelta::default().n(secs))
    }
}

fn main() {}
