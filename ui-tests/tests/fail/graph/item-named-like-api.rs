//! Fails: a helper function of the graph module named `mermaid`, which the module generates.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct S {
    pub text: String,
}

#[graph(state = S)]
mod flow {
    use super::*;

    fn mermaid(text: &str) -> String {
        format!("flowchart LR\n  {text}")
    }

    #[node(entry, to = END)]
    async fn draw(s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default().text(mermaid(&s.text)))
    }
}

fn main() {}
