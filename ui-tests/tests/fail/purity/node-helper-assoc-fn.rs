//! Fails: randomness in an associated function of the graph module, reached through another one.

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

    struct Ids;

    impl Ids {
        fn fresh() -> u64 {
            Self::draw()
        }

        fn draw() -> u64 {
            rand::random()
        }
    }

    #[node(entry, to = END)]
    async fn plan(_s: &S, ctx: &mut Ctx) -> NodeResult<S> {
        let _ = ctx;
        Ok(SDelta::default().n(Ids::fresh()))
    }
}

fn main() {}
