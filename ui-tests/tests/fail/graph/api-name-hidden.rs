//! Fails: a node calls `dot(..)` meaning the file's function, which `use super::*` would import, but the
//! graph module's generated `dot()` hides it.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct S {
    pub similarity: f64,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[graph(state = S)]
mod flow {
    use super::*;

    #[node(entry, to = END)]
    async fn compare(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default().similarity(dot(&[1.0, 0.0], &[0.5, 0.5])))
    }
}

fn main() {}
