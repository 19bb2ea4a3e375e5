//! Fails: `.await` in a merge function.

use graph_runtime::prelude::*;

#[reducer]
fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    let more = std::future::ready(written).await;
    current.extend(more);
}

fn main() {}
