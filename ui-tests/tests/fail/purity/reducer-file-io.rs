//! Fails: file I/O in a merge function.

use graph_runtime::prelude::*;

#[reducer]
fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    let extra = std::fs::read_to_string("extra.txt").unwrap_or_default();
    current.push(extra);
    current.extend(written);
}

fn main() {}
