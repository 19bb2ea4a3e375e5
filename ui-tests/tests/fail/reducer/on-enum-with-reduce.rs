//! Fails: `#[reducer]` on an enum whose variant has a `#[reduce]` field: one error, the macro's.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum S {
    Count {
        #[reduce(sum)]
        n: u64,
    },
}

fn main() {}
