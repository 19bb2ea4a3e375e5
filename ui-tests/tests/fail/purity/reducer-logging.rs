//! Fails: logging in a merge function.

mod log {
    macro_rules! info {
        ($($t:tt)*) => {};
    }
    pub(crate) use info;
}

use graph_runtime::prelude::*;

#[reducer]
fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    log::info!("merging {} entries", written.len());
    current.extend(written);
}

fn main() {}
