//! Fails: an `async` merge function.

use graph_runtime::prelude::*;

#[reducer]
async fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    current.extend(written);
}

fn main() {}
