//! Fails: `#[reducer]` on a tuple struct whose field has a `#[reduce]`: the macro's error is the only
//! one (the emitted struct keeps no `#[reduce]` for rustc to reject as well).

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S(#[reduce(sum)] u64, String);

fn main() {}
