//! Fails: `union` on a `Vec`.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S {
    #[reduce(union)]
    pub items: Vec<u32>,
}

fn main() {}
