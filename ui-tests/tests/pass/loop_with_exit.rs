//! An agent loop: `think -> act -> think` until done, then `END`. Cycles are fine as long as END stays
//! reachable. Also shows `impure = "..."`, the explicit escape hatch of the purity lints, and `ctx.rng()`.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    #[reduce(sum)]
    pub rounds: u32,
    #[reduce(append)]
    pub trace: Vec<String>,
    #[reduce(max)]
    pub best: u64,
    pub home_known: bool,
}

#[graph(state = Agent)]
mod agent {
    use super::*;

    #[node(entry, to = act)]
    async fn think(s: &Agent, ctx: &mut Ctx) -> NodeResult<Agent> {
        let score = ctx.rng().next_u64() % 1000;
        Ok(AgentDelta::default().push_trace(format!("think {}", s.rounds)).best(score))
    }

    #[node(to = [think, END], impure = "reads HOME once per round for the demo; a real agent passes it in the state")]
    async fn act(s: &Agent, _ctx: &mut Ctx) -> NodeResult<Agent, act::Next> {
        let home = std::env::var("HOME").is_ok();
        let delta = AgentDelta::default().rounds(1).push_trace(format!("act {}", s.rounds)).home_known(home);
        // A route returned with the delta is decided on the state this step read, before this update
        // (`s.rounds` does not count this round yet: hence `+ 1`); `route = f` decides on the updated
        // state instead (`pass/router.rs`).
        Ok((delta, if s.rounds + 1 < 3 { act::Next::Think } else { act::Next::End }))
    }
}

/// Runs the case (a `#[tokio::test]` of `tests/pass.rs`).
pub(crate) async fn main() {
    let engine = Engine::builder(agent::graph()).build();
    let a = engine.run("loop-1", Agent::default()).await.unwrap();
    assert!(a.is_completed());
    assert_eq!(a.state.rounds, 3);
    assert_eq!(a.state.trace, ["think 0", "act 0", "think 1", "act 1", "think 2", "act 2"]);
    assert_eq!(a.steps, 6);
    // deterministic: the same run id gives the same random draws
    let engine = Engine::builder(agent::graph()).build();
    let b = engine.run("loop-1", Agent::default()).await.unwrap();
    assert_eq!(a.state, b.state);
}
