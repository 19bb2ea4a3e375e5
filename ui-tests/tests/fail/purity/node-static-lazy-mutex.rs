//! Fails: a node writing to a `LazyLock<Mutex<..>>` static of the graph module.

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

    use std::sync::{LazyLock, Mutex};

    static SEEN: LazyLock<Mutex<Vec<String>>> = LazyLock::new(|| Mutex::new(Vec::new()));

    #[node(entry, to = END)]
    async fn plan(_s: &S, ctx: &mut Ctx) -> NodeResult<S> {
        SEEN.lock().unwrap().push("plan".to_owned());
        let _ = ctx;
        Ok(SDelta::default())
    }
}

fn main() {}
