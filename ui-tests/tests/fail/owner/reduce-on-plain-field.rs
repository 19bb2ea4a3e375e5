//! Fails: `#[reduce]` on a field of a struct that has no `#[reducer]`.

use graph_runtime::prelude::*;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S {
    #[reduce(sum)]
    pub n: u64,
}

fn main() {}
