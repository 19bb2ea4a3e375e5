//! Fails: `unsafe` in a merge function.

use graph_runtime::prelude::*;

#[reducer]
fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    let n = written.len();
    current.extend(written);
    unsafe { current.set_len(n.min(current.len())) };
}

fn main() {}
