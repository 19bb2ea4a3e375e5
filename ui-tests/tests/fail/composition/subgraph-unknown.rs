//! Fails: the subgraph names a module that does not exist (a typo of `research`).
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

    #[node(entry, subgraph = reserch, output = cite, to = END)]
    fn research(_s: &Parent) -> Child {
        Child::default()
    }

    fn cite(_s: &Parent, _c: Child) -> ParentDelta {
        ParentDelta::default()
    }
}

fn main() {}
