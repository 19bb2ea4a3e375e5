//! Fails: `static mut` in a merge function.

use graph_runtime::prelude::*;

#[reducer]
fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    static mut MERGES: u64 = 0;
    current.extend(written);
}

fn main() {}
