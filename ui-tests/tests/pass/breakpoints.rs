//! `interrupt_before` / `interrupt_after`: breakpoints, as LangGraph's; `resume` continues past them.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct S {
    #[reduce(append)]
    pub log: Vec<String>,
}

#[graph(state = S)]
mod deploy {
    use super::*;

    #[node(entry, to = ship)]
    async fn build(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default().push_log("build"))
    }

    #[node(to = announce, interrupt_before, interrupt_after)]
    async fn ship(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default().push_log("ship"))
    }

    #[node(to = END)]
    async fn announce(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default().push_log("announce"))
    }
}

/// Runs the case (a `#[tokio::test]` of `tests/pass.rs`).
pub(crate) async fn main() {
    let engine = Engine::builder(deploy::graph()).build();
    let out = engine.run("d", S::default()).await.unwrap();
    assert_eq!(out.state.log, ["build"]);
    assert_eq!(out.interrupts()[0].kind, InterruptKind::Before);
    let out = engine.resume("d").await.unwrap();
    assert_eq!(out.state.log, ["build", "ship"]);
    assert_eq!(out.interrupts()[0].kind, InterruptKind::After);
    let out = engine.resume("d").await.unwrap();
    assert!(out.is_completed());
    assert_eq!(out.state.log, ["build", "ship", "announce"]);
}
