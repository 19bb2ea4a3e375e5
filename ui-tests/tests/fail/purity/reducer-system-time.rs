//! Fails: the wall clock in a merge function.

use graph_runtime::prelude::*;

#[reducer]
fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    let t = std::time::SystemTime::now();
    current.push(format!("{t:?}"));
    current.extend(written);
}

fn main() {}
