//! Fails: `Uuid::new_v4` in a node.

mod chrono {
    pub struct Utc;
    impl Utc {
        pub fn now() -> u64 {
            0
        }
    }
}

mod rand {
    pub fn random<T: Default>() -> T {
        T::default()
    }
    pub fn thread_rng() -> u64 {
        0
    }
    pub fn rng() -> u64 {
        0
    }
}

mod uuid {
    pub struct Uuid;
    impl Uuid {
        pub fn new_v4() -> u128 {
            0
        }
    }
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
        let id = crate::uuid::Uuid::new_v4();
        let _ = ctx;
        Ok(SDelta::default().text(id.to_string()))
    }
}

fn main() {}
