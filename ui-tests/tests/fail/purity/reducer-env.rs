//! Fails: the environment in a merge function.

use graph_runtime::prelude::*;

#[reducer]
fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    if std::env::var("KEEP").is_ok() {
        current.extend(written);
    }
}

fn main() {}
