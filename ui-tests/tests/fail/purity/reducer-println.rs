//! Fails: printing in a merge function.

use graph_runtime::prelude::*;

#[reducer]
fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    println!("merging {} entries", written.len());
    current.extend(written);
}

fn main() {}
