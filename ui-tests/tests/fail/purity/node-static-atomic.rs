//! Fails: a node counting in an `AtomicU64` static of the file: state shared across runs.

use std::sync::atomic::{AtomicU64, Ordering};

static CALLS: AtomicU64 = AtomicU64::new(0);

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
        let n = CALLS.fetch_add(1, Ordering::Relaxed);
        let _ = ctx;
        Ok(SDelta::default().n(n))
    }
}

fn main() {}
