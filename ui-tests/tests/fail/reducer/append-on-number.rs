//! Fails: `append` on a field that is not a sequence.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S {
    #[reduce(append)]
    pub count: u64,
}

fn main() {}
