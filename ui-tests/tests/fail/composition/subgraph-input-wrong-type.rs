//! Fails: the subgraph node's function returns a type that is not the child graph's state.
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
    fn research(_s: &Parent) -> String {
        String::new()
    }

    fn cite(_s: &Parent, _c: Child) -> ParentDelta {
        ParentDelta::default()
    }
}

fn main() {}
