//! Fails: a strategy that does not exist.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S {
    #[reduce(apend)]
    pub log: Vec<String>,
}

fn main() {}
