//! Fails: the request of an effect reads the wall clock. The effect's closure is the node's I/O zone, but
//! the request is the node's own (it is hashed into the effect's record and compared on replay).

use std::time::SystemTime;

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct S {
    pub receipt: String,
}

#[graph(state = S)]
mod flow {
    use super::*;

    #[node(entry, to = END)]
    async fn send(_s: &S, ctx: &mut Ctx) -> NodeResult<S> {
        let receipt: String = ctx
            .effect("send", &SystemTime::now())
            .run(|key| async move { Ok::<_, NodeError>(key) })
            .await?;
        Ok(SDelta::default().receipt(receipt))
    }
}

fn main() {}
