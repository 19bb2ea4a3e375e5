//! Fails: the code writes `report::line()` beside a conditional node `report`, but nothing named
//! `report` exists besides the node (no crate, no module of the file): the routing module's glob import
//! of a crate `report` is unresolved, reported at that use (rustc's error, one).

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct S {
    pub text: String,
}

#[graph(state = S)]
mod flow {
    use super::*;

    #[node(entry, to = END)]
    async fn report(_s: &S, _ctx: &mut Ctx) -> NodeResult<S, report::Next> {
        Ok((SDelta::default().text(report::line()), report::Next::End))
    }
}

fn main() {}
