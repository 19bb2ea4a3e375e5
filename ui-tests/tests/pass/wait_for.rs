//! `wait_for = [...]`: a join that waits for predecessors on paths of different lengths, as LangGraph's
//! `add_edge([b, c2], d)` does; `d` runs once, after both.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct S {
    #[reduce(append)]
    pub log: Vec<String>,
}

fn log(s: &str) -> SDelta {
    SDelta::default().log(vec![s.to_owned()])
}

#[graph(state = S)]
mod flow {
    use super::*;

    #[node(entry, to = [b, c1])]
    async fn start(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(log("start"))
    }

    #[node(to = d)]
    async fn b(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(log("b"))
    }

    #[node(to = c2)]
    async fn c1(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(log("c1"))
    }

    #[node(to = d)]
    async fn c2(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(log("c2"))
    }

    #[node(to = END, wait_for = [b, c2])]
    async fn d(s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(log(&format!("d after {}", s.log.join(","))))
    }
}

/// Runs the case (a `#[tokio::test]` of `tests/pass.rs`).
pub(crate) async fn main() {
    let out = Engine::builder(flow::graph()).build().run("w", S::default()).await.unwrap();
    assert_eq!(out.state.log, ["start", "b", "c1", "c2", "d after start,b,c1,c2"]);
}
