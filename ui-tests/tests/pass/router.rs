//! `route = f`: a router reads the state with the node's own update applied, as a LangGraph conditional
//! edge does, so "increment until 5" ported as written stops at 5.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    #[reduce(sum)]
    pub n: u32,
}

#[graph(state = Counter)]
mod count {
    use super::*;

    #[node(entry, to = [inc, END], route = until_five)]
    async fn inc(_s: &Counter, _ctx: &mut Ctx) -> NodeResult<Counter> {
        Ok(CounterDelta::default().n(1))
    }

    fn until_five(s: &Counter) -> inc::Next {
        if s.n < 5 { inc::Next::Inc } else { inc::Next::End }
    }
}

/// Runs the case (a `#[tokio::test]` of `tests/pass.rs`).
pub(crate) async fn main() {
    let out = Engine::builder(count::graph()).build().run("r", Counter::default()).await.unwrap();
    assert_eq!(out.state.n, 5);
    assert_eq!(count::FINGERPRINT, count::graph().fingerprint());
}
