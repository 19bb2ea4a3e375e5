//! Fails: a router reads the wall clock (routers are held to the node rules: a route that changes on
//! replay changes the run).

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct S {
    #[reduce(sum)]
    pub n: u32,
}

#[graph(state = S)]
mod flow {
    use super::*;

    #[node(entry, to = [inc, END], route = by_time)]
    async fn inc(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default().n(1))
    }

    fn by_time(_s: &S) -> inc::Next {
        let odd = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() % 2;
        if odd == 1 { inc::Next::Inc } else { inc::Next::End }
    }
}

fn main() {}
