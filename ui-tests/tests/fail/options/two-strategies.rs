//! Fails: two strategies on one field, reported at both.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S {
    #[reduce(sum, max)]
    pub n: u64,
}

fn main() {}
