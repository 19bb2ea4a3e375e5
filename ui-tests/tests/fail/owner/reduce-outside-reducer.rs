//! Fails: `#[reduce]` on an item, not on a field of a `#[reducer]` struct.

use graph_runtime::prelude::*;

#[reduce(sum)]
fn total() -> u64 {
    0
}

fn main() {}
