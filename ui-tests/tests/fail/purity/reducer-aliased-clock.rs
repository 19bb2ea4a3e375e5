//! Fails: the wall clock in a merge function, under an alias of the file (`use ... as Clock`).

use graph_runtime::prelude::*;
use std::time::SystemTime as Clock;

#[reducer]
fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    current.push(format!("{:?}", Clock::now()));
    current.extend(written);
}

fn main() {
    // The body of a merge function with errors is replaced; the alias stays in use here.
    let _ = Clock::UNIX_EPOCH;
}
