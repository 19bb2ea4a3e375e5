//! Fails: a subgraph node without `output`, the mapping of the child's final state.
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

    #[node(entry, subgraph = research, to = END)]
    fn research(_s: &Parent) -> Child {
        Child::default()
    }
}

fn main() {}
