//! Fails: `#[reducer]` on an enum.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum S {
    A,
}

fn main() {}
