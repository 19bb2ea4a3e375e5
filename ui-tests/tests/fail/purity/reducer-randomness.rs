//! Fails: randomness in a merge function.

use graph_runtime::prelude::*;

#[reducer]
fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    if rand::random::<bool>() {
        current.extend(written);
    }
}

fn main() {}
