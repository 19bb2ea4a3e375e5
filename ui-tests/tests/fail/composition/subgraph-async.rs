//! Fails: a subgraph node's function is `async`: it is the input mapping, a plain fn.
use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Parent {
    #[reduce(append)]
    pub notes: Vec<String>,
}

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Child {
    pub question: String,
}

#[graph(state = Child)]
mod research {
    use super::*;

    #[node(entry, to = END)]
    async fn search(_s: &Child, _ctx: &mut Ctx) -> NodeResult<Child> {
        Ok(ChildDelta::default())
    }
}

#[graph(state = Parent)]
mod writer {
    use super::*;

    #[node(entry, subgraph = research, output = cite, to = END)]
    async fn research(_s: &Parent) -> Child {
        Child::default()
    }

    fn cite(_s: &Parent, _c: Child) -> ParentDelta {
        ParentDelta::default()
    }
}

fn main() {}
