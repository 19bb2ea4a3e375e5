//! Fails: an unknown option of `#[reducer]`.

use graph_runtime::prelude::*;

#[reducer(delta = SPatch, derive = Debug)]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S {
    pub n: u64,
}

fn main() {}
