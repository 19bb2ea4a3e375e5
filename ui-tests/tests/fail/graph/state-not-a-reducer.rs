//! Fails: the state type has no `Reducer` impl.

use graph_runtime::prelude::*;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Plain {
    pub n: u64,
}

#[graph(state = Plain)]
mod flow {
    use super::*;

    #[node(entry, to = END)]
    async fn plan(_s: &Plain, _ctx: &mut Ctx) -> NodeResult<Plain> {
        todo!()
    }
}

fn main() {}
