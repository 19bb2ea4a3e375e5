//! Fails: `sum` on a string.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S {
    #[reduce(sum)]
    pub name: String,
}

fn main() {}
