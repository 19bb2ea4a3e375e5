//! Fails: an `on_error` handler that is not a node of the graph (a typo of `refund`).
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

    #[node(entry, to = END, on_error = refnud)]
    async fn charge(_s: &Parent, _ctx: &mut Ctx) -> NodeResult<Parent> {
        Ok(ParentDelta::default())
    }

    #[node(to = END)]
    async fn refund(_s: &Parent, _ctx: &mut Ctx) -> NodeResult<Parent> {
        Ok(ParentDelta::default())
    }
}

fn main() {}
