//! Fails: `#[reducer]` on a tuple struct.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S(u64);

fn main() {}
