//! Fails: `rand::thread_rng` (rand 0.8 and older) in a node. The `rand` here is made by a
//! `macro_rules!` macro, standing in for the old crate: the lints read the source file, not macro
//! expansions, so they cannot see that module, and a path they cannot resolve is judged as written.

// rand 0.8's API: the workspace builds rand 0.10, which has no `thread_rng`.
macro_rules! old_rand {
    () => {
        mod rand {
            pub fn thread_rng() -> u64 {
                0
            }
        }
    };
}

old_rand!();

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
        let n = rand::thread_rng();
        let _ = ctx;
        Ok(SDelta::default().n(n))
    }
}

fn main() {}
